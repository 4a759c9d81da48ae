"""Diagnosis accuracy on real incidents: the dev corpus (grouped CV), the sealed set, eval cases.

A case counts at top-1 when the first root cause's category is the case's category or one of
its secondary ids, at top-3 when any of the first three is. Three rankings are measured:

- `rules`: card signatures and structural rules only (the ranking before the corpus);
- `nearest`: the nearest-incident vote alone;
- `fused`: both, as `ncclbot analyze` ranks (the shipped `Fusion` settings).

On the dev corpus (`knowledge/incidents` less the sealed ids) every case is ranked with an
index built without its own thread: grouped 5-fold CV with the shipped settings, nested CV
(settings tuned inside each training split; `--nested`), and leave-one-repo-out. The sealed
set (`--sealed`) is ranked with an index of the whole dev corpus; run it once per stop.
Folders of eval cases (`../shared/eval/cases` by default) run through `analyze` and `ask`.

    .venv/bin/python benchmarks/eval_cases.py                   # dev CV + ../shared/eval
    .venv/bin/python benchmarks/eval_cases.py --nested --tune   # nested CV; best settings on dev
    .venv/bin/python benchmarks/eval_cases.py --sealed          # the sealed figure (once a stop)
    .venv/bin/python benchmarks/eval_cases.py --folders DIR     # any folder of case YAMLs
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
SHARED_EVAL = ROOT.parent / "shared" / "eval" / "cases"

from bot.diagnosis.engine import Fusion  # noqa: E402
from bot.diagnosis.evaluate import (  # noqa: E402
    MODES,
    Score,
    analyze_incidents,
    cross_validate,
    evaluate,
    fold_indexes,
    grid,
    leave_one_repo_out,
    nested_cv,
    tune,
)
from bot.diagnosis.nearest import IncidentIndex  # noqa: E402
from bot.knowledge.incidents import dev_and_sealed  # noqa: E402


def line(label: str, score: Score) -> str:
    return (f"{label:44s} cases {score.n:3d}  top-1 {round(score.top1 * score.n):3d} "
            f"({score.top1:.0%})  top-3 {round(score.top3 * score.n):3d} ({score.top3:.0%})")


def per_category(scores: dict[str, Score]) -> list[str]:
    cats = sorted({c for s in scores.values() for c in s.by_category()})
    out = [f"    {'category':24s} {'n':>3s}  " + "  ".join(f"{m:>13s}" for m in scores)]
    for cat in cats:
        cells = []
        for s in scores.values():
            n, a, b = s.by_category().get(cat, (0, 0, 0))
            cells.append(f"{a:3d}/{b:3d} of {n:3d}")
        n = next(iter(scores.values())).by_category().get(cat, (0, 0, 0))[0]
        out.append(f"    {cat:24s} {n:3d}  " + "  ".join(cells))
    return out


def folder_cases(folder: Path) -> list[dict]:
    cases = []
    for path in sorted(folder.glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(case, dict) and case.get("log") and case.get("category"):
            case["_file"] = path.name
            cases.append(case)
    return cases


def run_folder(cases: list[dict], modes: tuple[str, ...]) -> dict[str, tuple[int, int, int]]:
    """(cases, top-1, top-3) per mode: `analyze` on the log; `ask en|zh` with the question."""
    from bot.answering.ask import answer_question
    from bot.answering.troubleshooter import analyze_paths
    from bot.config import Settings

    out: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=tmp)
        for case in cases:
            log = Path(tmp) / (Path(case["_file"]).stem + ".log")
            log.write_text(case["log"], encoding="utf-8")
            ok = {case["category"], *(case.get("secondary") or [])}
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
                cats = [rc.category for rc in fn().root_causes]
                row = out.setdefault(mode, [0, 0, 0])
                row[0] += 1
                row[1] += bool(cats) and cats[0] in ok
                row[2] += bool(ok & set(cats[:3]))
    return {m: (r[0], r[1], r[2]) for m, r in out.items()}


def question_scores(dev: list, sealed: list, cards: list, folds: int,
                    weights: tuple[float, ...], with_sealed: bool) -> dict[str, Score]:
    """Log-less accuracy on the incidents' own questions (English and Chinese): each question
    answered by `ask` with a question index built without its fold (dev), or of all of dev
    (sealed). Returns a Score per (language, weight)."""
    from bot.answering.ask import DISTINCTIVE_DF, compose
    from bot.config import load_settings
    from bot.diagnosis.asked import QuestionIndex
    from bot.diagnosis.evaluate import fold_of, judge
    from bot.retrieval.search import get_retriever

    settings = load_settings()
    retriever = get_retriever(settings, cards, progress=False)
    distinctive = retriever.sparse.distinctive(DISTINCTIVE_DF)
    out: dict[str, Score] = {}
    splits = [(f"dev {folds}-fold CV", [i for i in dev if fold_of(i, folds) == f],
               [i for i in dev if fold_of(i, folds) != f]) for f in range(folds)]
    if with_sealed:
        splits.append(("SEALED", sealed, dev))
    for label, test, train in splits:
        index = QuestionIndex(train)
        for field in ("question", "question_zh"):
            for inc in test:
                q = getattr(inc, field)
                if not q:
                    continue
                hits = retriever.search(q, 8, None)
                asked = index.nearest(q, 8)
                for w in weights:
                    a = compose(q, cards, hits, "en", distinctive=distinctive, asked=asked,
                                asked_weight=w)
                    ranked = tuple(dict.fromkeys(rc.category for rc in a.root_causes))
                    key = f"{label} questions {'zh' if field.endswith('zh') else 'en'} w={w}"
                    out.setdefault(key, Score()).results.append(judge(inc, ranked))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--incidents", type=Path, help="corpus folder (default: the bundled one)")
    ap.add_argument("--folders", nargs="*", type=Path, help="eval case folders "
                    "(default: ../shared/eval/cases when present)")
    ap.add_argument("--sealed", action="store_true", help="also score the sealed set (once!)")
    ap.add_argument("--nested", action="store_true", help="nested CV (tunes inside each split)")
    ap.add_argument("--tune", action="store_true", help="print the best settings on all of dev")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--by-category", action="store_true")
    ap.add_argument("--misses", action="store_true", help="dev misses (never the sealed ones)")
    ap.add_argument("--modes", default="analyze,ask en,ask zh", help="for eval case folders")
    ap.add_argument("--questions", action="store_true",
                    help="log-less: the incidents' own questions through ask (grouped CV)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from bot.answering.knowledge import bundled_cards

    cards = list(bundled_cards())
    dev, sealed = dev_and_sealed(args.incidents)
    reports = analyze_incidents(dev + (sealed if args.sealed else []), cards)
    fusion = Fusion()
    summary: dict[str, dict[str, float]] = {}

    def record(label: str, score: Score) -> None:
        summary[label] = {"cases": score.n, "top1": round(score.top1, 3),
                          "top3": round(score.top3, 3)}
        if not args.json:
            print(line(label, score))

    indexes = fold_indexes(dev, args.folds, cards)
    dev_scores = {m: cross_validate(dev, reports, cards, fusion, m, args.folds, indexes)
                  for m in MODES}
    for m, s in dev_scores.items():
        record(f"dev {args.folds}-fold CV [{m}]", s)
    record("dev leave-one-repo-out [fused]", leave_one_repo_out(dev, reports, cards, fusion))
    if args.by_category and not args.json:
        print("\n".join(per_category(dev_scores)))
    if args.misses and not args.json:
        for r in dev_scores["fused"].results:
            if not r.top1:
                print(f"    miss {r.id} ({r.category}): {list(r.ranked[:3])}")
    if args.nested:
        score, chosen = nested_cv(dev, reports, cards, grid(), args.folds)
        record(f"dev nested {args.folds}-fold CV [fused]", score)
        if not args.json:
            for f in chosen:
                print(f"    chosen in a split: {f}")
    if args.tune:
        best, score = tune(dev, reports, cards, grid())
        record("dev LOO, best settings [fused]", score)
        if not args.json:
            print(f"    best on all of dev: {best}")
    if args.sealed:
        if not sealed:
            sys.exit("no sealed set: knowledge/incidents/sealed.yaml lists none")
        index = IncidentIndex(dev, cards)
        for m in MODES:
            s = evaluate(sealed, reports, cards, lambda _c: index, fusion, m)
            record(f"SEALED [{m}]", s)
            if args.by_category and m == "fused" and not args.json:
                print("\n".join(per_category({"fused": s})))
    if args.questions:
        from bot.answering.ask import ASKED_WEIGHT

        weights = (0.0, 0.5, 0.9, 1.2, 1.5, 2.0, 3.0) if args.tune else (0.0, ASKED_WEIGHT)
        for label, score in question_scores(dev, sealed, cards, args.folds, weights,
                                            args.sealed).items():
            record(label, score)
    folders = args.folders if args.folders is not None else (
        [SHARED_EVAL] if SHARED_EVAL.is_dir() else [])
    for folder in folders:
        for mode, (n, a, b) in run_folder(folder_cases(folder),
                                          tuple(args.modes.split(","))).items():
            label = f"{folder.name} [{mode}]"
            summary[label] = {"cases": n, "top1": round(a / n, 3), "top3": round(b / n, 3)}
            if not args.json:
                print(f"{label:44s} cases {n:3d}  top-1 {a:3d} ({a / n:.0%})  "
                      f"top-3 {b:3d} ({b / n:.0%})")
    if args.json:
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
