"""The question that decides, measured on the corpus: top-1 before and after one answered question.

Every incident may carry `facts:` (knowledge/incidents/*.yaml): answers to the deciding
questions (knowledge/taxonomy.yaml, `questions`) that its reporter stated before the cause was
known, each with the words it rests on. For each incident, `ncclbot analyze` ranks its log
(`before`); when the answer is undecided (verdict `unknown`, as in the CLI and Slack), the
system picks its question (`facts.deciding_question`), and the incident answers it with its
annotated fact, or not at all ("unknown": the answer stays as it was). Reported:

- top-1 before and after one answered question, over all incidents;
- how often a question was asked, and how often the asked question could be answered from the
  annotations (the answerable share); right->wrong and wrong->right flips;
- per question: asked, answered, flips; and, for comparison, the oracle (for each undecided
  incident, its best single annotated fact: right when any one of them makes top-1 right) and
  each fixed question asked of every undecided incident.

With `--ask`, the same for `ask --log` (the reporter's question beside the log, as in Slack):
the question's retrieval hits and the past incidents it resembles (an index of the training
threads' questions) join the ranking, before and after the answer.

Dev: grouped 5-fold CV by thread (benchmarks/eval_cases.py's folds): each incident ranked with
a nearest-incident index built without its fold. Sealed (`--sealed`, once a stop): ranked with
an index of all of dev; printed only with the flag. Nothing here tunes anything.

    .venv/bin/python benchmarks/deciding.py            # dev CV
    .venv/bin/python benchmarks/deciding.py --ask      # and for `ask --log`
    .venv/bin/python benchmarks/deciding.py --sealed   # and the sealed set
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.diagnosis.engine import Diagnosis, diagnose  # noqa: E402
from bot.diagnosis.evaluate import analyze_incidents, fold_of, neighbours_for  # noqa: E402
from bot.diagnosis.facts import deciding_question  # noqa: E402
from bot.diagnosis.nearest import IncidentIndex, Neighbour  # noqa: E402
from bot.knowledge.cards import Card  # noqa: E402
from bot.knowledge.incidents import Incident, dev_and_sealed  # noqa: E402
from bot.knowledge.taxonomy import Deciding, load_questions  # noqa: E402
from bot.logs.model import LogReport  # noqa: E402

#: ranks a case again with answered facts (its own neighbours and hits, no new retrieval):
#: the diagnosis and its verdict
Rediagnose = Callable[[Mapping[str, str]], tuple[Diagnosis, str]]


@dataclass(frozen=True)
class CaseRun:
    """One incident: right before, the question asked (if any), the answer its annotations
    give (if any), right after; the oracle and each fixed question for comparison."""

    id: str
    before: bool
    undecided: bool
    asked: str | None
    answer: str | None
    after: bool
    oracle: bool
    fixed: dict[str, bool] = field(default_factory=dict)
    #: every annotated fact answered at once, whatever the verdict (`--fact` for each):
    #: (right, diagnosed) before and after; None when the incident has no facts
    stated: tuple[bool, bool, bool, bool] | None = None


def top1(case: Incident, diagnosis: Diagnosis) -> bool:
    return bool(diagnosis.root_causes) and diagnosis.root_causes[0].category in case.accepted


def run_case(case: Incident, base: Diagnosis, verdict: str, again: Rediagnose,
             questions: Sequence[Deciding]) -> CaseRun:
    """Pure but for `again`: ask what the system asks of an undecided answer (`verdict`
    unknown), answer from the annotations."""
    before = top1(case, base)
    undecided = verdict == "unknown" and bool(base.root_causes)
    facts = case.answered
    q = deciding_question([(rc.category, rc.confidence) for rc in base.root_causes], {},
                          questions) if undecided else None
    answer = facts.get(q.id) if q is not None else None
    memo: dict[str, bool] = {}

    def right_with(key: str) -> bool:
        if key not in memo:
            memo[key] = top1(case, again({key: facts[key]})[0])
        return memo[key]

    after = right_with(q.id) if q is not None and answer is not None else before
    oracle = before or any(right_with(k) for k in facts) if undecided else before
    fixed = {x.id: (right_with(x.id) if undecided and x.id in facts else before)
             for x in questions}
    stated = None
    if facts:
        every, every_verdict = again(facts)
        stated = (before, verdict == "diagnosed", top1(case, every),
                  every_verdict == "diagnosed")
    return CaseRun(case.id, before, undecided, q.id if q else None, answer, after, oracle,
                   fixed, stated)


def run_split(test: Sequence[Incident], train: Sequence[Incident],
              reports: Mapping[str, LogReport], cards: Sequence[Card],
              questions: Sequence[Deciding]) -> list[CaseRun]:
    """Each test incident ranked with a nearest-incident index of `train` only."""
    index = IncidentIndex(train, cards)
    out = []
    for case in test:
        report = reports[case.id]
        nb = neighbours_for(index, report, case)
        base = diagnose(report, cards, neighbours=nb)

        def again(facts: Mapping[str, str], report: LogReport = report,
                  nb: list[Neighbour] = nb) -> tuple[Diagnosis, str]:
            d = diagnose(report, cards, neighbours=nb, facts=facts)
            return d, d.verdict

        out.append(run_case(case, base, base.verdict, again, questions))
    return out


def run_split_ask(test: Sequence[Incident], train: Sequence[Incident],
                  reports: Mapping[str, LogReport], cards: Sequence[Card],
                  questions: Sequence[Deciding], retriever: Any,
                  distinctive: set[str]) -> list[CaseRun]:
    """`ask --log`: each test incident that has a question, its question beside its log,
    with a nearest-incident and a question index of `train` only."""
    from bot.answering.ask import compose_diagnosis
    from bot.diagnosis.asked import QuestionIndex

    index = IncidentIndex(train, cards)
    asked_index = QuestionIndex(train)
    out = []
    for case in test:
        if not case.question:
            continue
        report = reports[case.id]
        log_dx = diagnose(report, cards, neighbours=neighbours_for(index, report, case))
        hits = retriever.search(case.question, 8, log_dx)
        asked = asked_index.nearest(case.question, 8)

        def again(facts: Mapping[str, str], q: str = case.question, report: LogReport = report,
                  log_dx: Diagnosis = log_dx, hits: Any = hits,
                  asked: Any = asked) -> tuple[Diagnosis, str]:
            c = compose_diagnosis(q, cards, hits, report, log_dx, distinctive, asked,
                                  facts=facts)
            return c.diagnosis, c.verdict

        base, verdict = again({})
        out.append(run_case(case, base, verdict, again, questions))
    return out


@dataclass(frozen=True)
class Summary:
    cases: int
    top1_before: int
    top1_after: int
    undecided: int
    asked: int
    answered: int
    right_to_wrong: int
    wrong_to_right: int
    oracle: int
    fixed: dict[str, int]
    per_question: dict[str, dict[str, int]]
    #: every annotated incident with all its facts answered, any verdict: incidents, top-1
    #: before/after, right->wrong, wrong->right, diagnosed before/after, a right diagnosis lost
    stated: dict[str, int]

    @property
    def answerable(self) -> float:
        """The share of asked questions the annotations answer."""
        return self.answered / self.asked if self.asked else 0.0


def summarize(runs: Sequence[CaseRun], questions: Sequence[Deciding]) -> Summary:
    per: dict[str, dict[str, int]] = {q.id: {"asked": 0, "answered": 0, "wrong->right": 0,
                                             "right->wrong": 0} for q in questions}
    for r in runs:
        if r.asked is None:
            continue
        row = per[r.asked]
        row["asked"] += 1
        row["answered"] += r.answer is not None
        row["wrong->right"] += r.after and not r.before
        row["right->wrong"] += r.before and not r.after
    return Summary(
        cases=len(runs), top1_before=sum(r.before for r in runs),
        top1_after=sum(r.after for r in runs), undecided=sum(r.undecided for r in runs),
        asked=sum(r.asked is not None for r in runs),
        answered=sum(r.answer is not None for r in runs),
        right_to_wrong=sum(r.before and not r.after for r in runs),
        wrong_to_right=sum(r.after and not r.before for r in runs),
        oracle=sum(r.oracle for r in runs),
        fixed={q.id: sum(r.fixed[q.id] for r in runs) for q in questions},
        per_question=per, stated=stated_counts(runs))


def stated_counts(runs: Sequence[CaseRun]) -> dict[str, int]:
    rows = [r.stated for r in runs if r.stated is not None]
    return {"incidents": len(rows), "top1_before": sum(b for b, _, _, _ in rows),
            "top1_after": sum(a for _, _, a, _ in rows),
            "right->wrong": sum(b and not a for b, _, a, _ in rows),
            "wrong->right": sum(a and not b for b, _, a, _ in rows),
            "diagnosed_before": sum(d for _, d, _, _ in rows),
            "diagnosed_after": sum(d for _, _, _, d in rows),
            "right_diagnosis_lost": sum(b and d and not (a and e) for b, d, a, e in rows)}


def report_lines(label: str, s: Summary) -> list[str]:
    n = s.cases or 1
    out = [
        f"{label}: {s.cases} incidents, {s.undecided} undecided (verdict unknown)",
        f"  top-1 before any question      {s.top1_before:3d} ({s.top1_before / n:.1%})",
        f"  top-1 after one answered q.    {s.top1_after:3d} ({s.top1_after / n:.1%})"
        f"   wrong->right {s.wrong_to_right}, right->wrong {s.right_to_wrong}",
        f"  question asked {s.asked}, answerable from the annotations {s.answered} "
        f"({s.answerable:.0%} of asked)",
        f"  oracle (best single annotated fact per undecided incident) "
        f"{s.oracle:3d} ({s.oracle / n:.1%})",
        "  fixed question for every undecided incident: "
        + ", ".join(f"{k} {v} ({v / n:.1%})" for k, v in s.fixed.items()),
    ]
    st = s.stated
    out.append(f"  every annotated fact answered ({st['incidents']} incidents, any verdict): "
               f"top-1 {st['top1_before']} -> {st['top1_after']} (wrong->right "
               f"{st['wrong->right']}, right->wrong {st['right->wrong']}); diagnosed "
               f"{st['diagnosed_before']} -> {st['diagnosed_after']}, a right diagnosis lost "
               f"{st['right_diagnosis_lost']}")
    for qid, row in s.per_question.items():
        out.append(f"    {qid:12s} asked {row['asked']:3d}  answered {row['answered']:3d}  "
                   f"wrong->right {row['wrong->right']}  right->wrong {row['right->wrong']}")
    return out


def annotation_lines(incidents: Sequence[Incident]) -> list[str]:
    counts: dict[str, int] = {}
    for inc in incidents:
        for k, v in inc.answered.items():
            counts[f"{k}={v}"] = counts.get(f"{k}={v}", 0) + 1
    have = sum(bool(i.facts) for i in incidents)
    return [f"annotated: {have} of {len(incidents)} incidents; "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--incidents", type=Path, help="corpus folder (default: the bundled one)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--sealed", action="store_true", help="also the sealed set (once a stop)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cases", action="store_true", help="one line per asked incident")
    ap.add_argument("--ask", action="store_true",
                    help="also `ask --log` (the reporter's question beside the log)")
    ap.add_argument("--dense-cache", type=Path, default=Path(tempfile.gettempdir())
                    / "ncclbot-calibration-dense.pickle",
                    help="the questions' dense retrieval results, kept between runs")
    args = ap.parse_args()

    from bot.answering.knowledge import bundled_cards

    cards = list(bundled_cards())
    dev, sealed = dev_and_sealed(args.incidents)
    questions = load_questions()
    reports = analyze_incidents(dev + (sealed if args.sealed else []), cards)

    runs: list[CaseRun] = []
    for f in range(args.folds):
        test = [i for i in dev if fold_of(i, args.folds) == f]
        train = [i for i in dev if fold_of(i, args.folds) != f]
        runs += run_split(test, train, reports, cards, questions)
    results = {f"dev {args.folds}-fold grouped CV [analyze]": (runs, dev)}
    if args.sealed and not sealed:
        sys.exit("no sealed set: knowledge/incidents/sealed.yaml lists none")
    if args.sealed:
        results["SEALED [analyze]"] = (run_split(sealed, dev, reports, cards, questions), sealed)
    if args.ask:
        from benchmarks.calibration import cache_dense
        from bot.answering.ask import DISTINCTIVE_DF
        from bot.config import load_settings
        from bot.retrieval.search import get_retriever

        retriever = get_retriever(load_settings(), cards, progress=False)
        cache_dense(retriever, args.dense_cache)
        distinctive = retriever.sparse.distinctive(DISTINCTIVE_DF)
        ask_runs: list[CaseRun] = []
        for f in range(args.folds):
            test = [i for i in dev if fold_of(i, args.folds) == f]
            train = [i for i in dev if fold_of(i, args.folds) != f]
            ask_runs += run_split_ask(test, train, reports, cards, questions, retriever,
                                      distinctive)
        results[f"dev {args.folds}-fold grouped CV [ask --log]"] = (
            ask_runs, [i for i in dev if i.question])
        if args.sealed:
            results["SEALED [ask --log]"] = (run_split_ask(
                sealed, dev, reports, cards, questions, retriever, distinctive),
                [i for i in sealed if i.question])

    if args.json:
        print(json.dumps({label: {**vars(summarize(r, questions)),
                                  "annotated": sum(bool(i.facts) for i in incs)}
                          for label, (r, incs) in results.items()}, indent=2))
        return
    for label, (r, incs) in results.items():
        print("\n".join(annotation_lines(incs) + report_lines(label, summarize(r, questions))))
        if args.cases:
            for c in r:
                if c.asked:
                    print(f"    {c.id:60s} asked {c.asked:11s} answer {c.answer or '-':4s} "
                          f"{'right' if c.before else 'wrong'} -> "
                          f"{'right' if c.after else 'wrong'}")


if __name__ == "__main__":
    main()
