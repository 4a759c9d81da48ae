"""Does ncclbot learn from the team's own resolved threads? Three figures.

1. A novel failure, made real: torchrun gloo jobs on CPU (benchmarks/shardstore_family) that
   fail the same new way (a team library refuses a shard written by a newer version) with
   varying world sizes, failing ranks and steps. Every run is asked about through the real
   Slack app (local Slack server); then one thread is resolved through the "Resolved" form
   and the other runs are asked about again: top-1 on the family before and after, and how
   many answers link the resolved thread under "seen before".
2. A prequential replay of the corpus (its development part; the sealed newest fifth is not
   touched) in thread-date order, each incident resolved after it was answered: top-1 over
   the stream with the loop on (local memory grows) and off. The base is the cards alone, as
   for a team that starts without the public corpus; a case never sees its own thread.
   The local channel's weight is swept here too (a documented default, not fitted).
3. Cost: answer latency (the first answer after a change rebuilds the local index; later
   ones do not) and peak memory with 0, 1,000 and 10,000 generated local incidents, each
   size in a fresh process.

`python benchmarks/learning.py [--runs 8] [--skip-family] [--sizes 0,1000,10000]`
(small by default: 2-4 ranks per job, one job at a time, OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FAMILY = ROOT / "benchmarks" / "shardstore_family" / "train.py"
CATEGORY = "version_incompatibility"
#: (world size, failing rank, failing step) of each run; the first is the one resolved
SPECS = [(2, 1, 2), (3, 2, 4), (4, 0, 1), (2, 0, 3), (3, 1, 1), (4, 3, 2), (2, 1, 5), (3, 0, 2)]


def run_family(out: Path, specs: list[tuple[int, int, int]]) -> list[Path]:
    """Run each job with torchrun (CPU, gloo); its combined output is the log."""
    logs = []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    for world, rank, step in specs:
        path = out / f"shardstore-w{world}-r{rank}-s{step}.log"
        with path.open("wb") as fh:
            subprocess.run(["nice", torchrun, "--standalone", f"--nproc-per-node={world}",
                            str(FAMILY), "--bad-rank", str(rank), "--step", str(step)],
                           stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=300,
                           check=False)
        logs.append(path)
    return logs


# -- 1. the family through the real Slack app ----------------------------------------------

def family(runs: int) -> dict[str, Any]:
    from benchmarks.slack_harness import running_bot
    from bot.config import load_settings
    from tests.slack.conftest import click

    specs = SPECS[:max(2, runs)]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        logs = run_family(Path(tmp), specs)
        run_s = time.monotonic() - t0
        with running_bot(index_dir=load_settings().index_path) as bot:
            ts = itertools.count(1000)

            def ask(log: Path, user: str) -> dict[str, Any]:
                thread = f"{next(ts)}.000100"
                f = bot.slack.add_file(log.name, log.read_bytes())
                bot.mention(thread, user, "<@UBOT> our training job died", [f])
                if thread not in bot.first_answers([thread], 300):
                    raise SystemExit(f"no answer for {log.name} in 300 s")
                return next(m for m in bot.slack.thread("C1", thread)
                            if "ncclbot_details" in json.dumps(m.get("blocks")))

            def top(message: dict[str, Any]) -> tuple[str, bool, str]:
                ids = {e["action_id"]: e["value"] for b in message["blocks"]
                       if b["type"] == "actions" for e in b["elements"]}
                answer = bot.deps.store.answer(ids["ncclbot_resolve"])
                assert answer is not None
                first = answer.root_causes[0].category if answer.root_causes else "-"
                seen = answer.similar_incidents[0] if answer.similar_incidents else None
                return first, bool(seen and seen.local), seen.source if seen else ""

            before = [top(ask(log, "UBOB")) for log in logs]
            resolved = ask(logs[0], "UALICE")
            resolve_through_form(bot, resolved, click)
            permalink = bot.deps.memory.for_thread("C1", resolved["thread_ts"]).source  # type: ignore[union-attr]
            after = [top(ask(log, "UBOB")) for log in logs[1:]]
        weights = family_weights(logs)
    return {"weights": weights,"runs": [f"w{w}-r{r}-s{s}" for w, r, s in specs], "run_s": round(run_s, 1),
            "before_top1": sum(c == CATEGORY for c, _, _ in before), "before_n": len(before),
            "before_top": sorted({c for c, _, _ in before}),
            "after_top1": sum(c == CATEGORY for c, _, _ in after), "after_n": len(after),
            "after_seen_thread": sum(local and src == permalink for _, local, src in after)}


def family_weights(logs: list[Path], weights: tuple[float, ...] = (0.3, 0.6, 0.75, 0.9)
                   ) -> dict[str, int]:
    """Top-1 on the family's other runs, the first one resolved, at each local weight (the
    same diagnosis, in-process)."""
    from bot.answering.analysis import analyze_sources
    from bot.answering.knowledge import bundled_cards, bundled_index
    from bot.config import load_settings
    from bot.diagnosis.engine import Fusion, diagnose
    from bot.logs.sources import expand_inputs
    from bot.memory import runtime
    from bot.memory.capture import read_lines
    from bot.memory.model import capture

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp))
        store = runtime.memory(settings, create=True)
        assert store is not None
        store.add(capture(log_lines=read_lines([str(logs[0])]), category=CATEGORY,
                          resolution="rebuilt the image with shardstore 2.5", who="bench",
                          role="cli", keep_hosts=False), "bench")
        index = runtime.index_for(settings, bundled_index(None))
        reports = [analyze_sources(expand_inputs([str(p)]), settings)[0] for p in logs[1:]]
        out = {}
        for w in weights:
            tops = [diagnose(r, list(bundled_cards()), incidents=index,
                             fusion=Fusion(local_weight=w)).root_causes[0].category
                    for r in reports]
            out[str(w)] = sum(t == CATEGORY for t in tops)
    return out


def resolve_through_form(bot: Any, message: dict[str, Any], click: Any) -> None:
    """Press Resolved as the asker and submit the form: something new, with its fix."""
    ids = {e["action_id"]: e["value"] for b in message["blocks"] if b["type"] == "actions"
           for e in b["elements"]}
    n = len(bot.slack.of("views.open"))
    bot.poster.action(click("ncclbot_resolve", ids["ncclbot_resolve"], "UALICE", message))
    bot.slack.wait_for(lambda: len(bot.slack.of("views.open")) > n)
    view = bot.slack.of("views.open")[-1].params["view"]
    values = {"cause": {"value": {"selected_option": {"value": "new"}}},
              "title": {"value": {"value": "shardstore reader older than the shard writer"}},
              "category": {"value": {"selected_option": {"value": CATEGORY}}},
              "fix": {"value": {"value": "rebuilt the training image with shardstore 2.5, "
                                "which reads manifest v3"}},
              "link": {"value": {"value": None}}}
    bot.poster.action({"type": "view_submission", "team": {"id": "T1"},
                       "user": {"id": "UALICE"}, "api_app_id": "A1", "trigger_id": "tLEARN",
                       "view": {**view, "id": "VLEARN", "state": {"values": values}}})
    bot.slack.wait_for(lambda: bot.deps.memory.for_thread("C1", message["thread_ts"]), 60)


# -- 2. prequential replay of the corpus ---------------------------------------------------

def replay(weights: tuple[float, ...] = (0.3, 0.6, 0.9)) -> dict[str, Any]:
    from bot.answering.knowledge import bundled_cards, bundled_incidents
    from bot.diagnosis.engine import Fusion, diagnose
    from bot.diagnosis.evaluate import analyze_incidents, thread_of
    from bot.diagnosis.nearest import IncidentIndex, LocalIndex, WithLocal, local_doc
    from bot.knowledge.incidents import load_sealed
    from bot.memory.model import LocalIncident, ResolvedBy

    cards = list(bundled_cards())
    sealed = set(load_sealed().ids) if load_sealed() else set()
    stream = sorted((i for i in bundled_incidents() if i.date and i.id not in sealed),
                    key=lambda i: (i.date, i.id))
    reports = analyze_incidents(stream, cards)
    base = IncidentIndex([], cards)  # the cards alone: a team without the public corpus
    when = dt.datetime.now(dt.timezone.utc)

    def as_local(inc: Any) -> LocalIncident:
        return LocalIncident(id=inc.id, title=inc.title[:150], source=inc.url, date=inc.date,
                             category=inc.category, secondary=list(inc.secondary),
                             card=inc.card, log=inc.log, resolution=inc.resolution[:500],
                             confirmed_by=ResolvedBy(who="replay", role="cli", when=when))

    def run(loop: bool, weight: float) -> list[bool]:
        hits, docs = [], []
        for inc in stream:
            report = reports[inc.id]
            mine = [d for d in docs if d.local is not None and d.local.source != inc.url]
            index: Any = WithLocal(base, LocalIndex(mine, base)) if loop and mine else base
            diagnosis = diagnose(report, cards, incidents=index if report.shows_failure else None,
                                 fusion=Fusion(local_weight=weight))
            first = diagnosis.root_causes[0].category if diagnosis.root_causes else ""
            hits.append(first in inc.accepted)
            local = as_local(inc)
            docs.append(local_doc(local, local.salient()))
        return hits

    off = run(False, 0.0)
    on = {w: run(True, w) for w in weights}
    marks = sorted({len(stream) // 4, len(stream) // 2, 3 * len(stream) // 4, len(stream)})

    def curve(h: list[bool]) -> list[str]:
        return [f"{sum(h[:m]) / m:.2f}@{m}" for m in marks]

    def second_half(h: list[bool]) -> float:
        half = h[len(h) // 2:]
        return round(sum(half) / len(half), 3)

    groups = len({thread_of(i) for i in stream})
    return {"cases": len(stream), "threads": groups, "sealed_left_out": len(sealed),
            "off": {"top1": round(sum(off) / len(off), 3), "curve": curve(off),
                    "second_half": second_half(off)},
            "on": {str(w): {"top1": round(sum(h) / len(h), 3), "curve": curve(h),
                            "second_half": second_half(h)} for w, h in on.items()}}


# -- 3. cost with many local incidents -----------------------------------------------------

def cost_one(size: int) -> dict[str, Any]:
    """One size, in this (fresh) process: store `size` generated incidents, then answer the
    family's log: the first answer after the change (it builds the local index), the median
    of five more, and the answer after one more resolution (the index follows it)."""
    import random

    from bot.answering.knowledge import bundled_incidents
    from bot.answering.troubleshooter import analyze_paths
    from bot.config import load_settings
    from bot.memory import runtime
    from bot.memory.model import capture

    rng = random.Random(size)
    log = ROOT / "tests" / "fixtures" / "logs" / "memory" / "shardstore-w3-r2-s4.log"
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp))
        analyze_paths([str(log)], settings)  # the bundled index and scanner, warm
        rss0 = rss_mib()
        store = runtime.memory(settings, create=True)
        assert store is not None
        corpus = list(bundled_incidents())
        templates = [capture(log_lines=i.log.splitlines(), category=i.category,
                             resolution=i.resolution[:400], who="gen", role="cli",
                             keep_hosts=True, title=i.title[:140], source=i.url)
                     for i in corpus]
        t0 = time.monotonic()
        batch = []
        for n in range(size):
            t = rng.choice(templates)
            # each generated incident is its own: a distinct job tag in its failing lines
            extra = f"RuntimeError: team job {rng.randrange(10**6)} stage {n % 97} failed"
            batch.append(t.model_copy(update={"id": f"gen-{n:06d}", "log": t.log + "\n" + extra,
                                              "source": f"{t.source}#gen{n}"}))
            if len(batch) == 1000:
                store.add_many(batch, "gen")
                batch = []
        if batch:
            store.add_many(batch, "gen")
        store_s = time.monotonic() - t0
        t1 = time.monotonic()
        first = analyze_paths([str(log)], settings)
        first_s = time.monotonic() - t1
        steady = []
        for _ in range(5):
            t2 = time.monotonic()
            analyze_paths([str(log)], settings)
            steady.append(time.monotonic() - t2)
        store.add(rng.choice(templates).model_copy(update={"id": "one-more"}), "gen")
        t3 = time.monotonic()
        analyze_paths([str(log)], settings)  # one more resolution: the index follows it
        one_more_s = time.monotonic() - t3
        rss1 = rss_mib()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"size": size, "store_s": round(store_s, 2), "first_answer_s": round(first_s, 3),
            "answer_s_median": round(sorted(steady)[2], 3), "one_more_s": round(one_more_s, 3),
            "peak_rss_mib": round(peak, 1), "rss_growth_mib": round(rss1 - rss0, 1),
            "top": first.root_causes[0].category if first.root_causes else "-"}


def rss_mib() -> float:
    """This process's resident memory now (Linux), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cost(sizes: list[int]) -> list[dict[str, Any]]:
    out = []
    for size in sizes:
        proc = subprocess.run(["nice", sys.executable, __file__, "--cost-one", str(size)],
                              capture_output=True, text=True, timeout=1800, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        if proc.returncode != 0:
            raise SystemExit(f"cost run {size} failed: {proc.stderr[-2000:]}")
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8, help="family runs (2-8)")
    ap.add_argument("--skip-family", action="store_true")
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--sizes", default="0,1000,10000")
    ap.add_argument("--cost-one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cost_one is not None:
        print(json.dumps(cost_one(args.cost_one)))
        return
    if not args.skip_family:
        f = family(args.runs)
        print(f"family ({len(f['runs'])} torchrun gloo runs, {f['run_s']} s to run them): "
              f"top-1 before {f['before_top1']}/{f['before_n']} (led with "
              f"{', '.join(f['before_top'])}); after resolving one thread: "
              f"{f['after_top1']}/{f['after_n']}, 'seen before' links the thread in "
              f"{f['after_seen_thread']}/{f['after_n']}", flush=True)
        print("  top-1 after, by local weight: " + ", ".join(
            f"{w}: {n}/{f['after_n']}" for w, n in f["weights"].items()), flush=True)
    if not args.skip_replay:
        r = replay()
        print(f"prequential replay: {r['cases']} dated dev incidents ({r['threads']} threads, "
              f"{r['sealed_left_out']} sealed left out), base = cards only", flush=True)
        print(f"  loop off: top-1 {r['off']['top1']:.3f}  curve {' '.join(r['off']['curve'])}"
              f"  second half {r['off']['second_half']:.3f}")
        for w, v in r["on"].items():
            print(f"  loop on (local weight {w}): top-1 {v['top1']:.3f}  curve "
                  f"{' '.join(v['curve'])}  second half {v['second_half']:.3f}")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if sizes:
        print("cost (SQLite; answer = analyze the family's 3-rank log):")
        for c in cost(sizes):
            print(f"  {c['size']:>6} local incidents: stored in {c['store_s']} s; first answer "
                  f"(builds the index) {c['first_answer_s']:.3f} s, then {c['answer_s_median']:.3f}"
                  f" s (median of 5), after one more resolution {c['one_more_s']:.3f} s; resident memory +{c['rss_growth_mib']} MiB for the "
                  f"incidents (peak {c['peak_rss_mib']} MiB); leads with {c['top']}",
                  flush=True)


if __name__ == "__main__":
    main()
