"""Conversation state per thread, serialisable to JSON, behind a small store interface.

Follow-up questions in a thread reuse the attachments already analyzed, the cards
already retrieved (which may then be cited again) and the placeholder mapping of
the redactor, so `HOST_1` means the same host for the whole thread.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from pydantic import BaseModel, Field


class Turn(BaseModel):
    question: str
    explanation: str = ""
    summary: str = ""


class ThreadState(BaseModel):
    """Everything a follow-up needs; `model_dump_json()` / `model_validate_json()` round-trip."""

    thread_id: str | None = None
    attachments: dict[str, str] = Field(default_factory=dict)  # display name -> path
    analyses: dict[str, dict[str, Any]] = Field(default_factory=dict)  # name -> analyze_log data
    evidence: dict[str, dict[str, str]] = Field(default_factory=dict)  # file -> {line: text}
    seen_cards: list[str] = Field(default_factory=list)  # card ids returned by a tool
    placeholders: dict[str, str] = Field(default_factory=dict)  # HOST_1 -> original
    turns: list[Turn] = Field(default_factory=list)
    proposals: list[dict[str, Any]] = Field(default_factory=list)

    def see_card(self, card_id: str) -> None:
        if card_id not in self.seen_cards:
            self.seen_cards.append(card_id)


class ConversationStore(Protocol):
    """Where thread state lives (the Slack app keeps it in SQLite)."""

    def get(self, thread_id: str) -> ThreadState | None: ...

    def put(self, state: ThreadState) -> None: ...


class InMemoryConversationStore:
    """A process-local store; states are kept as JSON so they behave like a persisted one."""

    def __init__(self, max_threads: int = 1000) -> None:
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()
        self.max_threads = max_threads

    def get(self, thread_id: str) -> ThreadState | None:
        with self._lock:
            raw = self._data.get(thread_id)
        return ThreadState.model_validate_json(raw) if raw is not None else None

    def put(self, state: ThreadState) -> None:
        if state.thread_id is None:
            return
        with self._lock:
            self._data.pop(state.thread_id, None)
            self._data[state.thread_id] = state.model_dump_json()
            while len(self._data) > self.max_threads:
                self._data.pop(next(iter(self._data)))
