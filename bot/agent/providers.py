"""Chat models from the settings, wrapped so every request is redacted and bounded.

`openai`: any OpenAI-compatible endpoint (vLLM, SGLang, LM Studio, hosted) through
langchain-openai's chat completions; `ollama` through langchain-ollama. No retries,
a per-call timeout and a per-call token cap; `GuardedChatModel` redacts every
message right before the provider's HTTP call, enforces a deadline for the whole
answer and a total token budget.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, Field

from bot.agent.backends import LlmWatch
from bot.agent.redact import Redactor
from bot.config import Settings


class ProviderError(RuntimeError):
    """The LLM is not configured usably, ran out of time or budget."""


class BudgetExceededError(ProviderError):
    """This answer's time or token budget is spent: the next call is refused."""


def _import_provider(module: str, package: str) -> ModuleType:
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ProviderError(f"{package} is not installed (pip install 'ncclbot[llm]')") from exc


#: Seconds to wait for the LLM endpoint to accept a connection.
CONNECT_TIMEOUT_S = 5.0


def make_chat_model(settings: Settings) -> BaseChatModel | None:
    """The configured provider's chat model, or None when no LLM is configured."""
    provider = settings.llm_provider
    if provider is None:
        return None
    if not settings.llm_model:
        raise ProviderError("NCCLBOT_LLM_MODEL is not set (the model name the endpoint serves)")
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    if provider == "openai":
        if not key and not settings.llm_base_url:
            raise ProviderError("set NCCLBOT_LLM_API_KEY for a hosted endpoint, or "
                                "NCCLBOT_LLM_BASE_URL for a local one")
        openai = _import_provider("langchain_openai", "langchain-openai")
        import httpx

        # an endpoint that does not even accept the connection fails in seconds, not after
        # the whole per-call timeout
        timeout = httpx.Timeout(settings.llm_timeout_s,
                                connect=min(CONNECT_TIMEOUT_S, settings.llm_timeout_s))
        chat: BaseChatModel = openai.ChatOpenAI(
            model=settings.llm_model, base_url=settings.llm_base_url,
            api_key=key or "not-needed", timeout=timeout, max_retries=0,
            max_tokens=settings.llm_max_tokens, temperature=0, use_responses_api=False)
        return chat
    if provider == "ollama":
        ollama = _import_provider("langchain_ollama", "langchain-ollama")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        local: BaseChatModel = ollama.ChatOllama(
            model=settings.llm_model, base_url=settings.llm_base_url,
            num_predict=settings.llm_max_tokens, temperature=0,
            client_kwargs={"timeout": settings.llm_timeout_s, "headers": headers})
        return local
    raise ProviderError(f"unknown LLM provider {provider!r}; use openai or ollama")


class Budget:
    """Wall-clock deadline and token budget shared by every call of one answer."""

    def __init__(self, seconds: float, tokens: int) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.tokens = tokens
        self.tokens_left = tokens
        self.calls = 0

    def check(self) -> None:
        """Refuse the next call once the deadline passed or the tokens are spent."""
        if time.monotonic() > self.deadline:
            raise BudgetExceededError(f"the LLM ran out of time for this answer "
                                      f"({self.seconds:.0f} s over {self.calls} calls)")
        if self.tokens_left <= 0:
            raise BudgetExceededError(f"the LLM used up the token budget for this answer "
                                      f"({self.tokens - self.tokens_left} of {self.tokens} "
                                      f"output tokens in {self.calls} calls)")
        self.calls += 1

    def spend(self, result: ChatResult) -> None:
        for gen in result.generations:
            usage = getattr(gen.message, "usage_metadata", None) or {}
            self.tokens_left -= int(usage.get("output_tokens", 0))


class GuardedChatModel(BaseChatModel):
    """Wraps a provider model: redacts the whole message list before each call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseChatModel
    redactor: Redactor
    budget: Budget
    on_request: Callable[[list[BaseMessage]], None] | None = Field(default=None, exclude=True)
    #: told when a request goes out and when its response arrives (the first-token bound)
    watch: LlmWatch | None = Field(default=None, exclude=True)
    #: the last request as it was sent (redacted): everything the model has been shown
    sent: list[BaseMessage] = Field(default_factory=list, exclude=True)

    @property
    def _llm_type(self) -> str:
        return f"guarded-{self.inner._llm_type}"

    def redact_messages(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The whole request, redacted: names are learned from every message (question,
        attachment names, tool outputs, earlier tool calls) before any is replaced."""
        for m in messages:
            content = m.content
            if isinstance(content, str):
                self.redactor.learn_payload(content)
            else:
                self.redactor.learn_obj(content)
            self.redactor.learn_obj(m.additional_kwargs)
            if isinstance(m, AIMessage):
                self.redactor.learn_obj([c["args"] for c in m.tool_calls])
        out = []
        for m in messages:
            update: dict[str, Any] = {"additional_kwargs": self.redactor.redact_obj(
                m.additional_kwargs)}
            content = m.content
            update["content"] = (self.redactor.redact_payload(content) if isinstance(content, str)
                                 else self.redactor.redact_obj(content))
            if isinstance(m, AIMessage):
                update["tool_calls"] = [{**c, "args": self.redactor.redact_obj(c["args"])}
                                        for c in m.tool_calls]
                update["invalid_tool_calls"] = self.redactor.redact_obj(m.invalid_tool_calls)
            out.append(m.model_copy(update=update))
        self.sent = out
        if self.on_request is not None:
            self.on_request(out)
        return out

    def shown(self) -> str:
        """The text of the last request (contents and tool-call arguments), as sent."""
        parts = []
        for m in self.sent:
            parts.append(m.content if isinstance(m.content, str) else json.dumps(m.content))
            if isinstance(m, AIMessage):
                parts += [json.dumps(c["args"], ensure_ascii=False) for c in m.tool_calls]
        return "\n".join(parts)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        self.budget.check()
        request = self.redact_messages(messages)
        if self.watch is not None:
            try:
                self.watch.sending()
            except TimeoutError as exc:
                raise BudgetExceededError(str(exc)) from None
        result = self.inner._generate(request, stop=stop, **kwargs)
        if self.watch is not None:
            self.watch.received()
        self.budget.spend(result)
        return result

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
                   *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[Any, AIMessage]:
        bound = self.inner.bind_tools(tools, tool_choice=tool_choice, **kwargs)
        return self.bind(**getattr(bound, "kwargs", {}))
