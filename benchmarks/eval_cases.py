"""Diagnosis accuracy on labelled real cases, through `analyze` and `ask --log`.

A case is a YAML file with `log`, `category`, optional `secondary` (also accepted) and optional
`question` / `question_zh` (the form of `../shared/eval/cases/` and `tests/fixtures/cases/`).
A case counts at top-1 when the first root cause's category is the case's category or one of
its secondary ids, at top-3 when any of the first three is. Each case runs through

- `analyze`: the log alone;
- `ask en` / `ask zh`: the question (English / Chinese) with the log, when the case has one.

    .venv/bin/python benchmarks/eval_cases.py                      # ../shared/eval/cases if present
    .venv/bin/python benchmarks/eval_cases.py tests/fixtures/cases --misses
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DIRS = (ROOT.parent / "shared" / "eval" / "cases", ROOT / "tests" / "fixtures" / "cases")


def load_cases(folder: Path) -> list[dict]:
    cases = []
    for path in sorted(folder.glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(case, dict) and case.get("log") and case.get("category"):
            case["_file"] = path.name
            cases.append(case)
    return cases


def score(categories: list[str], case: dict) -> tuple[bool, bool]:
    """(top-1 hit, top-3 hit) for a ranked list of categories."""
    ok = {case["category"], *(case.get("secondary") or [])}
    return bool(categories[:1]) and categories[0] in ok, bool(ok & set(categories[:3]))


MODES = ("analyze", "ask en", "ask zh")


def run(cases: list[dict], data_dir: str, modes: tuple[str, ...] = MODES
        ) -> dict[str, list[tuple[str, list[str], bool, bool]]]:
    from bot.ask import answer_question
    from bot.config import Settings
    from bot.service import analyze_paths

    settings = Settings(data_dir=data_dir)
    results: dict[str, list[tuple[str, list[str], bool, bool]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            log = Path(tmp) / (Path(case["_file"]).stem + ".log")
            log.write_text(case["log"], encoding="utf-8")
            runs = {"analyze": lambda log=log: analyze_paths([str(log)], settings)}
            if case.get("question"):
                runs["ask en"] = lambda q=case["question"], log=log: answer_question(
                    q, [str(log)], "both", settings)
            if case.get("question_zh"):
                runs["ask zh"] = lambda q=case["question_zh"], log=log: answer_question(
                    q, [str(log)], "both", settings)
            for mode, fn in runs.items():
                if mode not in modes:
                    continue
                cats = [rc["category"] for rc in fn()["diagnosis"]["root_causes"]]
                results[mode].append((case["_file"], cats, *score(cats, case)))
    return {m: rows for m, rows in results.items() if rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="*", type=Path)
    ap.add_argument("--data-dir", help="index location (default: a temporary directory)")
    ap.add_argument("--misses", action="store_true", help="list the cases missed at top-1")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated: analyze, ask en, ask zh")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    folders = args.folders or [d for d in DEFAULT_DIRS if d.is_dir()][:1]
    if not folders:
        sys.exit("no case folders: pass one, e.g. tests/fixtures/cases")
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        for folder in folders:
            cases = load_cases(folder)
            if not cases:
                sys.exit(f"no cases (YAML with log and category) in {folder}")
            results = run(cases, args.data_dir or tmp, tuple(args.modes.split(",")))
            rel = str(folder.resolve().relative_to(ROOT.parent)) if folder.resolve().is_relative_to(
                ROOT.parent) else str(folder)
            for mode, rows in results.items():
                n = len(rows)
                top1, top3 = sum(r[2] for r in rows), sum(r[3] for r in rows)
                summary[f"{rel} [{mode}]"] = {"cases": n, "top1": top1 / n, "top3": top3 / n}
                if not args.json:
                    print(f"{rel:40s} {mode:8s} cases {n:3d}  top-1 {top1:3d}/{n} "
                          f"({top1 / n:.0%})  top-3 {top3:3d}/{n} ({top3 / n:.0%})")
                    if args.misses:
                        for name, cats, t1, _ in rows:
                            if not t1:
                                print(f"    miss {name}: {cats[:3]}")
    if args.json:
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
