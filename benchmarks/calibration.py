"""Certainty that means something: how often `likely`, `possible` and `weak` are right.

For every dev incident (knowledge/incidents less the sealed ids) three answers are judged:

- `analyze`: the incident's log alone;
- `ask --log`: its log and the question its reporter asked (English);
- `ask`: the question alone (incidents that carry one).

Three cross-validation schemes (`--schemes`; `evaluate.splits_of`), a case always answered
with a nearest-incident index and a question index built from its split's training
incidents only:

- `grouped`: 5-fold by thread (every incident of one source thread in one fold);
- `repo`: leave one repository out (a thread from a project never seen);
- `time`: the dated threads in 5 blocks by date, each block after the first answered with
  only the older ones (and the undated) to learn from: new threads, as the sealed set's.

Per certainty word: precision (the leading cause's category is one the incident accepts)
and coverage (the share of answers said with that word), with the shipped cuts
(`engine.CERTAINTY_CUTS`), with the uncalibrated cuts (0.5 / 0.3 for every evidence group;
grouped only), and with cuts chosen on each split's training threads (`evaluate.fit_cuts`
on their grouped-CV answers, as the shipped cuts are chosen) and applied to its test
threads; then the same for the test threads no card cites (the sealed set is drawn from
those), with the shipped cuts and with the cuts fit in train. An answer whose verdict is
`no_evidence` says no word (weak). Choose a change by the harder schemes, not by the
grouped one. `--fit` prints the cuts chosen on all of dev
(what ships).

A reliability diagram (confidence bins vs. how often the leading cause was right, per mode)
is written as a PNG to `--png` (default: a temporary folder).

    .venv/bin/python benchmarks/calibration.py                  # dev, the three CV schemes
    .venv/bin/python benchmarks/calibration.py --schemes time   # only the time-ordered one
    .venv/bin/python benchmarks/calibration.py --fit            # and the cuts to ship
    .venv/bin/python benchmarks/calibration.py --sealed         # the sealed set (once a stop)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.diagnosis.engine import CERTAINTY_CUTS, UNCALIBRATED, Cuts, Fusion, diagnose  # noqa: E402
from bot.diagnosis.evaluate import (  # noqa: E402
    SCHEMES,
    WORDS,
    Outcome,
    WordStats,
    analyze_incidents,
    decisive_logs_held,
    fit_cuts,
    fold_of,
    grouped_cut_cv,
    neighbours_for,
    outcome_of,
    said_stats,
    split_cut_cv,
    splits_of,
    word_stats,
)
from bot.diagnosis.nearest import IncidentIndex  # noqa: E402
from bot.knowledge.incidents import Incident, dev_and_sealed, thread_key  # noqa: E402

MODES = ("analyze", "ask --log", "ask")


def collect(test: Sequence[Incident], train: Sequence[Incident], reports: dict, cards: list,
            retriever: object, distinctive: set[str]) -> list[Outcome]:
    """Each test case answered three ways with indexes of `train` only."""
    from bot.answering.ask import DISTINCTIVE_DF, compose_diagnosis  # noqa: F401
    from bot.diagnosis.asked import QuestionIndex

    index = IncidentIndex(train, cards)
    questions = QuestionIndex(train)
    fusion = Fusion()
    out = []
    for case in test:
        report = reports[case.id]
        nb = neighbours_for(index, report, case)
        base = diagnose(report, cards, fusion=fusion, neighbours=nb)
        out.append(outcome_of(case, "analyze", base))
        if not case.question:
            continue
        asked = questions.nearest(case.question, 8)
        for mode, rep, log_dx in (("ask --log", report, base), ("ask", None, None)):
            hits = retriever.search(case.question, 8, log_dx)  # type: ignore[attr-defined]
            c = compose_diagnosis(case.question, cards, hits, rep, log_dx, distinctive, asked)
            out.append(outcome_of(case, mode, c.diagnosis, c.verdict))
    return out


def cache_dense(retriever: object, path: Path) -> None:
    """Each question's dense retrieval once (the slow channel), kept in `path` between runs
    (keyed by the index build, so a rebuilt index is queried again)."""
    import pickle

    build = str(getattr(getattr(retriever, "build", None), "hash", ""))
    try:
        saved = pickle.loads(path.read_bytes())
        memo = saved["memo"] if saved.get("build") == build else {}
    except (OSError, pickle.PickleError, EOFError, KeyError, TypeError):
        memo = {}
    inner = retriever.dense  # type: ignore[attr-defined]

    def dense(query: str, *a: object) -> object:
        key = (query, *a)
        if key not in memo:
            memo[key] = inner(query, *a)
            try:
                path.write_bytes(pickle.dumps({"build": build, "memo": memo}))
            except OSError:
                pass
        return memo[key]

    retriever.dense = dense  # type: ignore[attr-defined]


def one_answered_question(test: Sequence[Incident], train: Sequence[Incident], reports: dict,
                          cards: list) -> tuple[int, int, int, int]:
    """analyze top-1 before and after the deciding question is answered (simulated: the
    answer the question's data implies for the incident's confirmed cause; cases where it
    implies none stay as they were). Returns (cases, asked, top-1 before, top-1 after)."""
    from bot.diagnosis.evaluate import judge
    from bot.diagnosis.facts import deciding_question, truthful_answer

    index = IncidentIndex(train, cards)
    n = asked = before = after = 0
    for case in test:
        report = reports[case.id]
        nb = neighbours_for(index, report, case)
        base = diagnose(report, cards, neighbours=nb)
        ranked = tuple(dict.fromkeys(rc.category for rc in base.root_causes))
        ok = judge(case, ranked).top1
        n += 1
        before += ok
        q = deciding_question([(rc.category, rc.confidence) for rc in base.root_causes], {}) \
            if base.verdict == "unknown" and base.root_causes else None
        said = truthful_answer(q, case.accepted) if q is not None else None
        if q is None or said is None:
            after += ok
            continue
        asked += 1
        again = diagnose(report, cards, neighbours=nb, facts={q.id: said})
        after += judge(case, tuple(dict.fromkeys(rc.category for rc in again.root_causes))).top1
    return n, asked, before, after


def eval_folder(folder: Path) -> dict[str, dict[str, WordStats]]:
    """Real cases never tuned on (`../shared/eval/cases`): per mode (analyze, ask en, ask
    zh), per certainty word of the leading cause, how often it was right."""
    from benchmarks.eval_cases import folder_cases
    from bot.answering.ask import answer_question
    from bot.answering.troubleshooter import analyze_paths
    from bot.config import Settings

    said: dict[str, list[tuple[str, bool]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=tmp)
        for case in folder_cases(folder):
            log = Path(tmp) / (Path(case["_file"]).stem + ".log")
            log.write_text(case["log"], encoding="utf-8")
            ok = {case["category"], *(case.get("secondary") or [])}
            runs = {"analyze": lambda log=log: analyze_paths([str(log)], settings, "en")}
            for key, mode in (("question", "ask en --log"), ("question_zh", "ask zh --log")):
                if case.get(key):
                    runs[mode] = lambda q=case[key], log=log: answer_question(
                        q, [str(log)], "both", settings)
            for mode, fn in runs.items():
                a = fn()
                top = a.root_causes[0] if a.root_causes else None
                word = top.certainty or "weak" if top else "weak"
                said.setdefault(mode, []).append((word, bool(top and top.category in ok)))
    return {mode: {w: WordStats(w, sum(1 for x, _ in rows if x == w),
                                sum(r for x, r in rows if x == w), len(rows)) for w in WORDS}
            for mode, rows in said.items()}


def fmt(stats: dict[str, WordStats]) -> str:
    cells = []
    for w in WORDS:
        s = stats[w]
        p = "  - " if s.precision is None else f"{s.precision:4.0%}"
        cells.append(f"{w:8s} {p} of {s.n:3d} ({s.coverage:3.0%})")
    return "   ".join(cells)


def diagram(outcomes: Sequence[Outcome], path: Path, cuts: Cuts) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = [i / 10 for i in range(11)]
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.plot([0, 1], [0, 1], ls=":", c="grey", label="perfectly calibrated")
    for mode in MODES:
        xs, ys, ns = [], [], []
        rows = [o for o in outcomes if o.mode == mode]
        for lo, hi in pairwise(bins):
            inside = [o for o in rows if lo <= o.confidence < hi or (hi == 1 and o.confidence == 1)]
            if inside:
                xs.append(sum(o.confidence for o in inside) / len(inside))
                ys.append(sum(o.top1 for o in inside) / len(inside))
                ns.append(len(inside))
        ax.plot(xs, ys, marker="o", label=f"{mode} (n={len(rows)})")
        for x, y, n in zip(xs, ys, ns, strict=True):
            ax.annotate(str(n), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    for likely, possible in cuts.values():
        if likely <= 1:
            ax.axvline(likely, ls="--", lw=0.6, c="green")
        if possible <= 1:
            ax.axvline(possible, ls="--", lw=0.6, c="orange")
    ax.set_xlabel("confidence of the leading cause")
    ax.set_ylabel("share right (top-1)")
    ax.set_title("ncclbot reliability (dev, grouped CV)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--incidents", type=Path, help="corpus folder (default: the bundled one)")
    ap.add_argument("--folds", type=int, default=5, help="grouped folds and time blocks")
    ap.add_argument("--schemes", nargs="+", choices=SCHEMES, default=list(SCHEMES),
                    help="cross-validation schemes (default: all)")
    ap.add_argument("--png", type=Path, help="reliability diagram (default: a temp folder)")
    ap.add_argument("--fit", action="store_true", help="print the cuts chosen on all of dev")
    ap.add_argument("--sealed", action="store_true",
                    help="score the sealed set with the shipped cuts (the lead runs it once)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--eval-folder", nargs="*", type=Path,
                    help="folders of real eval cases never tuned on (e.g. ../shared/eval/cases)")
    ap.add_argument("--deciding", action="store_true",
                    help="top-1 before/after one answered deciding question (simulated)")
    ap.add_argument("--save", type=Path, help="write the judged outcomes (a pickle)")
    ap.add_argument("--dense-cache", type=Path, default=Path(tempfile.gettempdir())
                    / "ncclbot-calibration-dense.pickle",
                    help="the questions' dense retrieval results, kept between runs")
    args = ap.parse_args()

    from bot.answering.ask import DISTINCTIVE_DF
    from bot.answering.knowledge import bundled_cards
    from bot.config import load_settings
    from bot.retrieval.search import get_retriever

    cards = list(bundled_cards())
    dev, sealed = dev_and_sealed(args.incidents)
    reports = analyze_incidents(dev + (sealed if args.sealed else []), cards)
    retriever = get_retriever(load_settings(), cards, progress=False)
    cache_dense(retriever, args.dense_cache)
    distinctive = retriever.sparse.distinctive(DISTINCTIVE_DF)

    cited = {thread_key(u) for c in cards for u in c.source_urls}
    outcomes: list[Outcome] = []
    for _name, train, test in splits_of("grouped", dev, args.folds):
        outcomes += collect(test, train, reports, cards, retriever, distinctive)
    answered = {"grouped": outcomes}
    for scheme in args.schemes:
        if scheme not in answered:
            answered[scheme] = [o for _name, train, test in splits_of(scheme, dev, args.folds)
                                for o in collect(test, train, reports, cards, retriever,
                                                 distinctive)]
    if args.save:
        import pickle

        args.save.write_bytes(pickle.dumps(answered))

    summary: dict[str, object] = {}
    lines = [f"dev {len(dev)} incidents; precision of the leading cause said with each word, "
             "count, coverage. Schemes: grouped = 5-fold by thread; repo = leave one "
             "repository out; time = dated threads in 5 blocks by date, each answered with "
             "the older ones only. Cuts fit on each split's training threads (their grouped-CV "
             "answers) and applied to its test threads; 'uncited' = the test threads no card "
             "cites (as the sealed set's)."]
    # one set of cuts serves every mode: chosen on the training threads of all modes
    summary["cuts chosen per fold"] = grouped_cut_cv(outcomes, args.folds)[1]
    for scheme in args.schemes:
        splits = splits_of(scheme, dev, args.folds)
        said_all = split_cut_cv(splits, answered[scheme], outcomes)
        uncited = {i.id for i in dev if thread_key(i.url) not in cited}
        for mode in MODES:
            rows = [o for o in answered[scheme] if o.mode == mode]
            said = [(o, w) for o, w in said_all if o.mode == mode]
            table = {"shipped cuts": word_stats(rows, CERTAINTY_CUTS),
                     "  uncited, shipped cuts": word_stats([o for o in rows if o.id in uncited],
                                                           CERTAINTY_CUTS),
                     "cuts fit in train": said_stats(said),
                     "  uncited threads": said_stats([(o, w) for o, w in said
                                                      if o.id in uncited])}
            if scheme == "grouped":
                table = {"uncalibrated (0.5/0.3)": word_stats(rows, UNCALIBRATED), **table}
            top1 = sum(o.top1 for o in rows) / len(rows) if rows else 0.0
            none = sum(o.verdict == "no_evidence" for o in rows)
            lines.append(f"[{scheme}] [{mode}] n={len(rows)} top-1 {top1:.0%}  no_evidence "
                         f"{none} (every incident is a real failure)")
            for label, stats in table.items():
                lines.append(f"  {label:24s} {fmt(stats)}")
                summary[f"{scheme} / {mode} / {label.strip()}"] = {
                    w: {"n": s.n, "precision": s.precision, "coverage": round(s.coverage, 3)}
                    for w, s in stats.items()}
    for scheme in args.schemes:
        held = decisive_logs_held(answered[scheme])
        lines.append(f"[{scheme}] a question beside a log that alone is diagnosed: changed the "
                     f"lead {held[1]} of {held[0]} times, left it undiagnosed {held[2]}; beside "
                     f"a log with no failure, made it a diagnosis {held[4]} of {held[3]}")
        summary[f"{scheme} / question vs decisive log"] = dict(zip(
            ("decisive", "lead changed", "undiagnosed", "no failure", "diagnosed"), held,
            strict=True))
    for folder in args.eval_folder or []:
        for mode, stats in eval_folder(folder).items():
            lines.append(f"{folder.name} [{mode}] n={stats['likely'].total}  {fmt(stats)}")
            summary[f"{folder.name} {mode}"] = {
                w: {"n": s.n, "precision": s.precision, "coverage": round(s.coverage, 3)}
                for w, s in stats.items()}
    if args.deciding:
        totals = [0, 0, 0, 0]
        for f in range(args.folds):
            test = [i for i in dev if fold_of(i, args.folds) == f]
            train = [i for i in dev if fold_of(i, args.folds) != f]
            for k, v in enumerate(one_answered_question(test, train, reports, cards)):
                totals[k] += v
        n, asked, before, after = totals
        lines.append(f"one answered deciding question (analyze, simulated truthful answer): "
                     f"asked in {asked} of {n}; top-1 {before / n:.0%} -> {after / n:.0%}")
        summary["deciding"] = {"cases": n, "asked": asked, "top1_before": before / n,
                               "top1_after": after / n}
    if args.fit:
        every = fit_cuts(outcomes)
        lines.append(f"cuts fit on all of dev (every mode): {every}")
        summary["fit on all dev"] = every
    if args.sealed:
        if not sealed:
            sys.exit("no sealed set: knowledge/incidents/sealed.yaml lists none")
        sealed_out = collect(sealed, dev, reports, cards, retriever, distinctive)
        for mode in MODES:
            rows = [o for o in sealed_out if o.mode == mode]
            stats = word_stats(rows, CERTAINTY_CUTS)
            lines.append(f"SEALED [{mode}] n={len(rows)}  {fmt(stats)}")
            summary[f"SEALED {mode}"] = {
                w: {"n": s.n, "precision": s.precision, "coverage": round(s.coverage, 3)}
                for w, s in stats.items()}
    png = args.png or Path(tempfile.mkdtemp(prefix="ncclbot-calibration-")) / "reliability.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    diagram(outcomes, png, CERTAINTY_CUTS)
    lines.append(f"reliability diagram: {png}")
    if args.json:
        summary["png"] = str(png)
        print(json.dumps(summary, indent=2, default=str))
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
