"""The answering entry points, returning the answer's JSON form (`Answer.model_dump`): the
shape `--json` prints and users' scripts read, which is what these tests assert on."""

from __future__ import annotations

from typing import Any

from bot.agent import respond as _respond
from bot.ask import answer_question as _answer_question
from bot.cli.retrieval_cmds import agent_answer as _agent_answer
from bot.service import analyze_paths as _analyze_paths


def respond(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return _respond(*args, **kwargs).model_dump(mode="json")


def answer_question(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return _answer_question(*args, **kwargs).model_dump(mode="json")


def analyze_paths(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return _analyze_paths(*args, **kwargs).model_dump(mode="json")


def agent_answer(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return _agent_answer(*args, **kwargs).model_dump(mode="json")
