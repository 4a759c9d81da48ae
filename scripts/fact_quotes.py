"""The incidents' `facts:` (answers to the deciding questions that the reporter stated before
the cause was known): check that every quote stands literally in the reporter's words, list
the sentences worth reading, and add a fact to an incident file.

Deciding a fact is a person's job (read the question, hardware and log); this tool only keeps
the annotation honest: a quote that is not in `question`, `question_zh`, `hardware` or `log`
(whitespace aside) is a defect, as `ncclbot knowledge check` also says.

    python scripts/fact_quotes.py                        # check every quote; counts per key
    python scripts/fact_quotes.py cues [ID ...]          # the stated sentences that hint a fact
    python scripts/fact_quotes.py add ID KEY VALUE QUOTE  # append one fact to ID's file
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from bot.knowledge.incidents import (  # noqa: E402
    SEALED_FILE,
    STATED_FIELDS,
    Fact,
    fact_problems,
    incident_files,
    incidents_dir,
)

#: words that hint a reporter said something a deciding question asks (a hint to read, never
#: an annotation by itself)
CUES = {
    "container": r"docker|container|kube|\bpods?\b|singularity|enroot|apptainer|容器",
    "fewer_gpus": r"single[- ](?:node|machine|gpu)|one (?:node|machine|gpu)|fewer|alone|"
                  r"-g \d|\d+ (?:gpus?|nodes) work|=1\b|单机|单卡",
    "upgrade": r"upgrad|downgrad|updat|worked before|used to|升级|之前",
    "p2p_disable": r"P2P_DISABLE",
}


def stated_of(data: dict) -> str:
    return "\n".join(str(data[f]) for f in STATED_FIELDS if data.get(f))


def check(files: list[Path]) -> int:
    """Every fact's key, answer and quote; prints the defects and the counts per key."""
    bad = 0
    per_key: Counter[str] = Counter()
    annotated = 0
    for path in files:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        facts = {k: Fact.model_validate(v) for k, v in (data.get("facts") or {}).items()}
        annotated += bool(facts)
        per_key.update(f"{k}={f.value}" for k, f in facts.items())
        for problem in fact_problems(facts, stated_of(data)):
            print(f"{path.name}: {problem}")
            bad += 1
    print(f"{annotated} of {len(files)} incidents carry facts; "
          + ", ".join(f"{k} {n}" for k, n in sorted(per_key.items())))
    return bad


def cues(files: list[Path]) -> None:
    for path in files:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        have = set(data.get("facts") or {})
        for key, rx in CUES.items():
            for field in STATED_FIELDS:
                for line in str(data.get(field) or "").splitlines():
                    if re.search(rx, line, re.I):
                        mark = "(annotated)" if key in have else ""
                        print(f"{path.stem}  {key}{mark}  {field}: {line.strip()[:160]}")


def add(path: Path, key: str, value: str, quote: str) -> str | None:
    """Append `key: {value, quote}` to the incident's `facts:` block (kept the file's last
    key, so nothing else of the file moves); the reason when it cannot."""
    text = path.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    facts = {k: Fact.model_validate(v) for k, v in (data.get("facts") or {}).items()}
    if key in facts:
        return f"{path.name}: {key} is annotated already"
    new = Fact(value=value, quote=quote)
    problems = fact_problems({key: new}, stated_of(data))
    if problems:
        return f"{path.name}: {problems[0]}"
    if facts and list(data)[-1] != "facts":
        return f"{path.name}: `facts:` is not the last key; add by hand"
    entry = (f"  {key}: {{value: {json.dumps(new.value)}, "
             f"quote: {json.dumps(new.quote, ensure_ascii=False)}}}\n")
    if not text.endswith("\n"):
        text += "\n"
    path.write_text(text + ("" if facts else "facts:\n") + entry, encoding="utf-8")
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--incidents", type=Path, default=None)
    ap.add_argument("action", nargs="?", default="check", choices=("check", "cues", "add"))
    ap.add_argument("rest", nargs="*")
    args = ap.parse_args()
    folder = args.incidents or incidents_dir()
    files = [p for p in incident_files(folder) if p.name != SEALED_FILE]
    if args.action == "check":
        sys.exit(1 if check(files) else 0)
    if args.action == "cues":
        ids = set(args.rest)
        cues([p for p in files if not ids or p.stem in ids])
        return
    if len(args.rest) != 4:
        sys.exit("add ID KEY VALUE QUOTE")
    iid, key, value, quote = args.rest
    why = add(folder / f"{iid}.yaml", key, value, quote)
    if why:
        sys.exit(why)


if __name__ == "__main__":
    main()
