"""English prose left in Chinese answers (issue 25, "one language"): how much, and where.

Every incident log of the corpus (`knowledge/incidents`) and the bundled sample is answered in
Chinese as a reader gets it: `analyze --lang zh` (the one-screen answer and `--details`),
`ask --lang zh` with a Chinese question beside the log, and a Chinese Slack thread's first
message, Details reply and Other-causes reply (Slack keeps a thread's answer in both languages
and shows it in the thread's). Each text is searched for runs of English prose outside code,
quotes, identifiers and the log's own words (`bot.render.lang.latin_prose`); the runs in the
cards' and the taxonomy's own Chinese (their authors' words, quoted as written) are counted
apart.

On 2026-11-29 (154 logs, 924 texts), before issue 25's wording (510005a) and after it: lines
with English prose 1536 -> 514, runs 2674 -> 871, of which in the cards' and taxonomy's own
Chinese 861 -> 863; outside it 1813 -> 8 (a card id joined to its title, a cut quote).

Later that day (167 logs, 1002 texts), the knowledge's own Chinese was mended: it quoted
English error strings and identifiers without backticks (100 runs in 41 cards, 2 taxonomy
texts), which this count cannot tell from prose; they are in backticks now, so a run counts
whoever wrote it. Runs 958 (9 outside the knowledge's own Chinese) -> 177 on a full run
(166 in one taxonomy step quoting `Timeout(ms)=` bare, 3 in another, 5 where Slack's escaping
of `<`/`>` met an incident's `resolution_zh`, 3 quotes cut by shortening) -> 0 on a second
full run, once those were in backticks too (9 min on 2 cores). The last column counts the
texts showing what fixed the nearest past incident in Chinese (`resolution_zh`; before, a
Chinese answer hid the fix): 426 of 1002 (analyze 105 of 167, Slack first message 72).
After the cards' Chinese put its quoted English ('…', "…", 「…」) in backticks too (204 logs,
1224 texts): still 0 runs; the fix shown in 597 texts (analyze 138 of 204).

The live-hang answer (`ncclbot node hang`, Slack's `/nccl hang` and "Why is it stuck?") is
measured apart (`--hang`): every message the node's hang diagnostic can write (each note
string of tools/hang, found in the source by `node_messages`) is put in a node's sample beside
recorded py-spy stacks, answered in Chinese and rendered as the CLI's `--details` text and
Slack's first and Details messages. On 2026-11-29, 75 messages, before the node's notes were
translated at render time (7e4f8ce, this script run on it) and after: texts with English prose
216 of 225 -> 0, runs 309 -> 0 (4 s).

    .venv/bin/python scripts/zh_leaks.py            # totals per surface, the commonest runs
    .venv/bin/python scripts/zh_leaks.py --top 60   # more of them
    .venv/bin/python scripts/zh_leaks.py --ids a,b  # only these incidents (and the sample)
    .venv/bin/python scripts/zh_leaks.py --hang     # only the live-hang answer's node notes
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from rich.console import Console  # noqa: E402

from bot.answering.contract import Answer  # noqa: E402
from bot.answering.troubleshooter import Question, Troubleshooter  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.knowledge.cards import card_files, taxonomy_path  # noqa: E402
from bot.knowledge.incidents import load_incidents  # noqa: E402
from bot.render.lang import Leak, latin_prose  # noqa: E402
from bot.render.terminal import render_answer  # noqa: E402
from bot.slack.blocks import render_other_causes  # noqa: E402
from bot.slack.message import details_message, first_message, message_text  # noqa: E402

SAMPLE = ROOT / "examples" / "sample-8rank-oom.log"
#: the Chinese question asked beside each log
QUESTION = "训练报错退出了，是什么原因？应该怎么解决？"
SURFACES = ("analyze", "analyze --details", "ask", "slack first", "slack details",
            "slack other causes")


@dataclass
class Tally:
    """Per surface: texts read, lines with English prose, the runs themselves."""

    texts: Counter[str] = field(default_factory=Counter)
    lines: Counter[str] = field(default_factory=Counter)
    runs: Counter[str] = field(default_factory=Counter)
    #: of the runs, those in the knowledge's own Chinese (cards, taxonomy)
    in_knowledge: Counter[str] = field(default_factory=Counter)
    #: texts that show what fixed a past incident, in Chinese (its `resolution_zh`)
    fixes: Counter[str] = field(default_factory=Counter)
    #: each run (normalised: digits as 0) -> how often, and one case it came from
    common: Counter[str] = field(default_factory=Counter)
    where: dict[str, str] = field(default_factory=dict)


def _zh_values(node: object) -> Iterator[str]:
    """Every text under a `zh` key of a YAML tree."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "zh":
                yield from ([v] if isinstance(v, str) else
                            [x for x in v if isinstance(x, str)] if isinstance(v, list) else [])
            else:
                yield from _zh_values(v)
    elif isinstance(node, list):
        for v in node:
            yield from _zh_values(v)


@cache
def knowledge_zh() -> tuple[str, ...]:
    """The Chinese the knowledge itself is written in (every card's and the taxonomy's `zh`
    texts): its authors' words, which an answer quotes as they are."""
    files = [taxonomy_path(), *card_files()]
    return tuple(t for f in files
                 for t in _zh_values(yaml.safe_load(f.read_text(encoding="utf-8"))))


def terminal(answer: Answer, details: bool) -> str:
    buf = io.StringIO()
    render_answer(answer, Console(file=buf, width=200, highlight=False, soft_wrap=True,
                                  color_system=None), details=details)
    return buf.getvalue()


def surfaces(ts: Troubleshooter, log: Path) -> tuple[dict[str, str], set[str]]:
    """Each surface's Chinese text for one log, and the Chinese resolutions its answers'
    "seen before" could show."""
    analyzed = ts.answer(Question("", (str(log),), lang="zh", brief=False), llm=False,
                         strict=True)
    asked = ts.answer(Question(QUESTION, (str(log),), lang="zh"), llm=False, strict=True)
    # Slack keeps a thread's answer in both languages and shows it in the thread's
    thread = ts.answer(Question(QUESTION, (str(log),), lang="both"), llm=False, strict=True)
    fixes = {i.resolution_zh for a in (analyzed, asked, thread) for i in a.similar_incidents
             if i.resolution_zh}
    return {
        "analyze": terminal(analyzed, details=False),
        "analyze --details": terminal(analyzed, details=True),
        "ask": terminal(asked, details=False),
        "slack first": message_text(first_message(thread, "zh").blocks),
        "slack details": message_text(details_message(thread, "zh").blocks),
        "slack other causes": message_text(render_other_causes(thread, "zh").blocks),
    }, fixes


def _norm(text: str) -> str:
    return "".join("0" if c.isdigit() else c for c in text)


def measure(cases: list[tuple[str, str]]) -> Tally:
    tally = Tally()
    with tempfile.TemporaryDirectory() as tmp:
        ts = Troubleshooter(Settings(data_dir=Path(tmp) / "data"))
        for name, text in cases:
            log = Path(tmp) / f"{name}.log"
            log.write_text(text, encoding="utf-8")
            texts, fixes = surfaces(ts, log)
            for surface, out in texts.items():
                tally.texts[surface] += 1
                # the first sentence is enough: the one-screen answer shortens by sentence
                tally.fixes[surface] += any(f.split("。")[0][:40] in out for f in fixes)
                leaks: list[Leak] = latin_prose(out, [text, QUESTION])
                tally.lines[surface] += len({leak.line for leak in leaks})
                tally.runs[surface] += len(leaks)
                tally.in_knowledge[surface] += sum(
                    any(leak.text in k for k in knowledge_zh()) for leak in leaks)
                for leak in leaks:
                    key = _norm(leak.text)
                    tally.common[key] += 1
                    tally.where.setdefault(key, f"{name} [{surface}]: {leak.line[:160]}")
    return tally


#: where the node's hang notes are written (tools/runner.py: why py-spy did not run;
#: tools/nvml.py: why there is no GPU sample)
NODE_SOURCES = (*sorted((ROOT / "tools" / "hang").glob("*.py")), ROOT / "tools" / "runner.py",
                ROOT / "tools" / "nvml.py")
_NOTE_FIELDS = {"fr_note", "ras_note", "gpu_note", "stack_error"}
#: exceptions whose message becomes a note (`NCCL RAS: {exc}`, `{exc} (no GPU sample)`, ...)
_NOTE_ERRORS = {"RefusedError", "RasUnavailableError", "RasRefusedError", "NvmlUnavailableError"}
#: functions whose plain `return "..."` is a note (pipe_paths: why a rank has no pipe,
#: reader._why: why a file is not opened, ras.refusal: why RAS is not asked)
_NOTE_RETURNS = {"pipe_paths", "_why", "refusal"}


def _text(node: ast.expr) -> str | None:
    """A string expression with each interpolated value as `7`; None when not a string."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "7"
                       for v in node.values)
    if isinstance(node, ast.IfExp):  # `(", matching ..." if p.pattern else "")`: the text
        return _text(node.body)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is None and right is None:
            return None
        return (left or "7") + (right or "7")
    return None


def _messages_in(tree: ast.AST) -> list[tuple[int, str]]:
    """Every note-writing string of one module: appended to `notes`, set as a rank's or the
    node's note field, the note of a `(value, note)` return or of `_outcome`'s late pair, a
    note-carrying exception's message, a command's `error=`, a no-rank reason."""
    found: list[tuple[int, str]] = []

    def add(expr: ast.expr | None) -> None:
        if expr is not None and (t := _text(expr)) is not None and any(c.isalpha() for c in t):
            found.append((expr.lineno, t))

    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
                add(node.value.elts[-1])
            elif (isinstance(node, ast.Return) and fn.name in _NOTE_RETURNS
                  and node.value is not None):
                add(node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) \
                else ""
            owner = f.value if isinstance(f, ast.Attribute) else None
            to_notes = name == "append" and (
                (isinstance(owner, ast.Name) and owner.id == "notes")
                or (isinstance(owner, ast.Attribute) and owner.attr == "notes"))
            if to_notes or (name in _NOTE_ERRORS and node.args):
                add(node.args[0])
            elif name == "_outcome" and isinstance(late := node.args[1], ast.Tuple):
                add(late.elts[-1])
            elif name == "unavailable" and len(node.args) > 2:
                add(node.args[2])
            for kw in node.keywords:
                if kw.arg == "error":
                    add(kw.value)
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                elts = t.elts if isinstance(t, ast.Tuple) else [t]
                vals = (node.value.elts if isinstance(node.value, ast.Tuple) and
                        isinstance(t, ast.Tuple) else [node.value] * len(elts))
                for e, v in zip(elts, vals, strict=False):
                    if ((isinstance(e, ast.Attribute) and e.attr in _NOTE_FIELDS)
                            or (isinstance(node, ast.AugAssign) and isinstance(e, ast.Name)
                                and e.id == "why")):
                        add(v)
    return found


def node_messages() -> list[tuple[str, int, str]]:
    """Every message the node's hang diagnostic can write: (file, line, text with each
    interpolated value as `7`), read from the source (pure: parses, runs nothing)."""
    return [(str(path.relative_to(ROOT)), line, text) for path in NODE_SOURCES
            for line, text in _messages_in(ast.parse(path.read_text(encoding="utf-8")))]


def measure_hang() -> Tally:
    """Each node message in a Chinese live-hang answer: the node's sample (recorded py-spy
    stacks, rank 2 in its own code) with the message as its note, answered as `ncclbot node
    hang --lang zh` does, on the CLI (`--details`, every note) and Slack (first, Details)."""
    from bot.answering.analysis import answer_hang
    from tools.hang.model import HangSample, RankSample
    from tools.hang.stacks import parse_dump_json

    recorded = ROOT / "tests" / "fixtures" / "hang"
    ranks = [RankSample(pid=1000 + r, rank=r, world_size=4, threads=parse_dump_json(
        (recorded / ("py-spy-rank-in-load_shard.json" if r == 2 else
                     "py-spy-rank-in-all_reduce.json")).read_text())) for r in range(4)]
    tally = Tally()
    for where, line, text in node_messages():
        answer = answer_hang([HangSample(host="gpu-node07", ranks=ranks, notes=[text])],
                             lang="zh")
        for surface, out in {"node hang (cli)": terminal(answer, details=True),
                             "node hang (slack first)": message_text(
                                 first_message(answer, "zh").blocks),
                             "node hang (slack details)": message_text(
                                 details_message(answer, "zh").blocks)}.items():
            tally.texts[surface] += 1
            leaks = latin_prose(out)
            tally.lines[surface] += len({leak.line for leak in leaks})
            tally.runs[surface] += len(leaks)
            for leak in leaks:
                key = _norm(leak.text)
                tally.common[key] += 1
                tally.where.setdefault(key, f"{where}:{line} [{surface}]: {leak.line[:160]}")
    return tally


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", type=int, default=30, help="how many of the commonest runs")
    ap.add_argument("--ids", default="", help="comma-separated incident ids (default: all)")
    ap.add_argument("--hang", action="store_true",
                    help="only the live-hang answer: every node message in a Chinese answer")
    args = ap.parse_args()
    if args.hang:
        hang = measure_hang()
        print(f"{len(node_messages())} node messages (tools/hang), each in a Chinese hang answer")
        print(f"{'surface':28s} {'texts':>6s} {'lines with English prose':>25s} {'runs':>6s}")
        for s in hang.texts:
            print(f"{s:28s} {hang.texts[s]:6d} {hang.lines[s]:25d} {hang.runs[s]:6d}")
        for key, n in hang.common.most_common(args.top):
            print(f"{n:5d}  {key[:90]}\n       {hang.where[key]}")
        return
    wanted = {i for i in args.ids.split(",") if i}
    cases = [("sample-8rank-oom", SAMPLE.read_text(encoding="utf-8"))]
    cases += [(i.id, i.log) for i in load_incidents() if not wanted or i.id in wanted]
    tally = measure(cases)
    print(f"{len(cases)} logs (the bundled sample and {len(cases) - 1} incidents), "
          f"question: {QUESTION}")
    print(f"{'surface':22s} {'texts':>6s} {'lines with English prose':>25s} {'runs':>6s} "
          f"{'of which the cards/taxonomy own zh':>35s} {'Chinese fix shown':>18s}")
    for s in SURFACES:
        print(f"{s:22s} {tally.texts[s]:6d} {tally.lines[s]:25d} {tally.runs[s]:6d} "
              f"{tally.in_knowledge[s]:35d} {tally.fixes[s]:18d}")
    print(f"{'total':22s} {sum(tally.texts.values()):6d} {sum(tally.lines.values()):25d} "
          f"{sum(tally.runs.values()):6d} {sum(tally.in_knowledge.values()):35d} "
          f"{sum(tally.fixes.values()):18d}")
    if tally.common:
        print(f"\nthe {args.top} commonest runs (digits as 0), with one place each:")
        for key, n in tally.common.most_common(args.top):
            own = "" if any(key in k for k in knowledge_zh()) else "  [not the cards' own]"
            print(f"{n:5d}  {key[:90]}{own}\n       {tally.where[key]}")


if __name__ == "__main__":
    main()
