"""Move the answering modules into `bot/answering/` and the state into `bot/state/`, and
rewrite every import and mention of their old names (issue 28, "the answering path as one
room").

    python scripts/answering_room.py            # the moves (once), then the rewrites
    python scripts/answering_room.py --imports  # only the rewrites: re-run after merging a
                                                # branch that still imports the old names

The rewrite is idempotent. `bot/service.py` is split: loading the knowledge goes to
`bot/answering/knowledge.py`, analysing logs (and answering from that analysis alone) to
`bot/answering/analysis.py`; `from bot.service import a, b` is split by name.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: old module -> new module (whole modules)
MOVES = {
    "bot.troubleshooter": "bot.answering.troubleshooter",
    "bot.ask": "bot.answering.ask",
    "bot.answer": "bot.answering.answer",
    "bot.contract": "bot.answering.contract",
    "bot.followup": "bot.answering.followup",
    "bot.threads": "bot.state.threads",
    "bot.db": "bot.state.db",
}
KNOWLEDGE = "bot.answering.knowledge"
ANALYSIS = "bot.answering.analysis"
#: the names of bot.service that load the knowledge; every other name is the analysis's
KNOWLEDGE_NAMES = {"bundled_cards", "bundled_incidents", "knowledge_for", "question_index",
                   "bundled_index", "_bundled", "_disk_cached"}
#: names that left bot.service before the move
ELSEWHERE = {"analyze_paths": "bot.answering.troubleshooter"}
TEXT = {".py", ".md", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".txt", ".sh", ".json"}
SKIP = ("scripts/answering_room.py",)


def where(name: str) -> str:
    base = name.split(" as ")[0].strip()
    return ELSEWHERE.get(base) or (KNOWLEDGE if base in KNOWLEDGE_NAMES else ANALYSIS)


_FROM_SERVICE = re.compile(r"^(?P<ind>[ \t]*)from bot\.service import (?P<names>\([^)]*\)|[^\n]*)",
                           re.MULTILINE)


def _split_import(m: re.Match[str]) -> str:
    ind, raw = m.group("ind"), m.group("names")
    comment = ""
    if not raw.startswith("(") and "#" in raw:
        raw, comment = raw.split("#", 1)
        comment = "  #" + comment
    names = [n.strip() for n in raw.strip("()").replace("\n", " ").split(",") if n.strip()]
    by_module: dict[str, list[str]] = {}
    for n in names:
        by_module.setdefault(where(n), []).append(n)
    return "\n".join(f"{ind}from {mod} import {', '.join(ns)}{comment}"
                     for mod, ns in sorted(by_module.items()))


#: what the knowledge module also holds (imported there), for `import bot.service as s`
KNOWLEDGE_ALSO = {"IncidentIndex", "QuestionIndex", "load_cards", "load_incidents",
                  "card_files", "incident_files", "KnowledgeError"}
_IMPORT_SERVICE = re.compile(r"^(?P<ind>[ \t]*)import bot\.service as (?P<alias>\w+)", re.MULTILINE)


def _whole_module(m: re.Match[str], text: str) -> str:
    """`import bot.service as s`: the knowledge module when every `s.<name>` is its."""
    used = set(re.findall(rf"\b{m.group('alias')}\.(\w+)", text))
    mod = KNOWLEDGE if used and used <= KNOWLEDGE_NAMES | KNOWLEDGE_ALSO else ANALYSIS
    return f"{m.group('ind')}import {mod} as {m.group('alias')}"


def rewrite(text: str) -> str:
    text = _IMPORT_SERVICE.sub(lambda m: _whole_module(m, text), text)
    text = _FROM_SERVICE.sub(_split_import, text)
    text = re.sub(r"(?<![\w.])bot\.service\.(\w+)", lambda m: f"{where(m.group(1))}.{m.group(1)}",
                  text)
    text = re.sub(r"(?<![\w.])bot\.service\b", ANALYSIS, text)
    text = re.sub(r"(?<![\w/])bot/service\.py", "bot/answering/analysis.py", text)
    for old, new in MOVES.items():
        text = re.sub(rf"(?<![\w.]){re.escape(old)}\b", new, text)
        text = re.sub(rf"(?<![\w/]){re.escape(old.replace('.', '/'))}\.py",
                      new.replace(".", "/") + ".py", text)
    return text


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def move() -> None:
    """The git mv's (only those not done yet), and the split of bot/service.py."""
    for old, new in MOVES.items():
        src, dst = ROOT / (old.replace(".", "/") + ".py"), ROOT / (new.replace(".", "/") + ".py")
        if src.exists() and not dst.exists():
            dst.parent.mkdir(exist_ok=True)
            init = dst.parent / "__init__.py"
            if not init.exists():
                init.write_text("")
                git("add", str(init.relative_to(ROOT)))
            git("mv", str(src.relative_to(ROOT)), str(dst.relative_to(ROOT)))
    service, analysis = ROOT / "bot/service.py", ROOT / "bot/answering/analysis.py"
    if service.exists() and not analysis.exists():
        git("mv", "bot/service.py", "bot/answering/analysis.py")
        split_service(analysis, ROOT / "bot/answering/knowledge.py")


def split_service(analysis: Path, knowledge: Path) -> None:
    """The knowledge loading (from `T = TypeVar` to `bundled_index`) into its own module."""
    text = analysis.read_text()
    start = text.index('T = TypeVar("T")')
    end = text.index("def analyze_sources(")
    head = ('"""The bundled knowledge, loaded once per process (and kept on disk between '
            'processes):\nthe cards, the incidents, the nearest-incident index and the '
            'questions index."""\n\n'
            "from __future__ import annotations\n\n"
            "import hashlib\nimport os\nimport pickle\n"
            "from collections.abc import Callable, Sequence\nfrom functools import lru_cache\n"
            "from pathlib import Path\nfrom types import ModuleType\nfrom typing import TypeVar\n\n"
            "from bot.diagnosis import asked, nearest\n"
            "from bot.diagnosis.asked import QuestionIndex\n"
            "from bot.diagnosis.nearest import IncidentIndex\n"
            "from bot.errors import KnowledgeError\n"
            "from bot.knowledge import cards as cards_module\n"
            "from bot.knowledge.cards import Card, card_files, load_cards\n"
            "from bot.knowledge.incidents import Incident, incident_files, load_incidents\n"
            "from bot.logs import salient\n"
            "from bot.retrieval import tokenize\n\n")
    knowledge.write_text(head + text[start:end].rstrip() + "\n")
    git("add", str(knowledge.relative_to(ROOT)))
    rest = text[:start] + text[end:]
    rest = rest.replace(
        '"""The troubleshooting service: what the CLI, the agent and Slack call (knows nothing '
        'of them)."""',
        '"""The evidence: logs (and Flight Recorder dumps) analysed into a report and a '
        'diagnosis,\nand the answer from that analysis alone (or from hang samples)."""')
    rest = rest.replace("from bot.config import Settings\n",
                        "from bot.answering.knowledge import bundled_index, knowledge_for\n"
                        "from bot.config import Settings\n")
    analysis.write_text(rest)


def main() -> None:
    if "--imports" not in sys.argv:
        move()
    files = [ROOT / f for f in git("ls-files").splitlines()
             if Path(f).suffix in TEXT and f not in SKIP and (ROOT / f).is_file()]
    files += [ROOT / "scripts" / "check"] if (ROOT / "scripts" / "check").is_file() else []
    changed = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        new = rewrite(text)
        if new != text:
            path.write_text(new, encoding="utf-8", errors="surrogateescape")
            changed.append(path)
    py = sorted({str(p) for p in changed if p.suffix == ".py"}
                | {str(p) for p in (ROOT / "bot/answering").glob("*.py")})
    ruff = [sys.executable, "-m", "ruff", "check", "--fix", "-q"]
    if py:  # import order
        subprocess.run([*ruff, "--select", "I001", *py], cwd=ROOT, check=False)
    split = [str(p) for p in (ROOT / "bot/answering/analysis.py",
                              ROOT / "bot/answering/knowledge.py") if p.exists()]
    if split:  # the imports the split left unused
        subprocess.run([*ruff, "--select", "F401", *split], cwd=ROOT, check=False)
    print(f"rewrote {len(changed)} files")


if __name__ == "__main__":
    main()
