"""The fault-injection harness (benchmarks/faults) on real faults and real launch shapes: a rank
raising, a rank asleep past the process-group timeout, a Slurm-style job started by hand."""

from __future__ import annotations

import importlib
import pickle
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bot.logs.analyze import global_rank_of_file, host_of_file, rank_of_file
from tests.conftest import ROOT

FAULTS = ROOT / "benchmarks" / "faults"


def _module(name: str) -> ModuleType:
    if str(FAULTS) not in sys.path:
        sys.path.insert(0, str(FAULTS))
    return importlib.import_module(name)


def test_the_kinds_are_many_and_name_real_categories() -> None:
    kinds = _module("kinds")
    taxonomy = (ROOT / "knowledge" / "taxonomy.yaml").read_text()
    assert len(kinds.DEV) >= 20
    assert len({k.name for k in kinds.DEV}) == len(kinds.DEV)
    assert not {k.name for k in kinds.DEV} & {k.name for k in kinds.SEALED}
    # the second sealed set (SEALED-2.md) is new: in neither the development nor the first set
    assert len(kinds.SEALED2) >= 6
    assert not {k.name for k in kinds.SEALED2} & {k.name for k in (*kinds.DEV, *kinds.SEALED)}
    sealed2_doc = (FAULTS / "SEALED-2.md").read_text()
    assert all(f"`{k.name}`" in sealed2_doc for k in kinds.SEALED2)
    # the fourth sealed set (SEALED-4.md) is new too, and its fixed plan is the document's
    earlier = {k.name for k in (*kinds.DEV, *kinds.SEALED, *kinds.SEALED2, *kinds.SEALED3)}
    assert len(kinds.SEALED4) >= 6 and not {k.name for k in kinds.SEALED4} & earlier
    sealed4_doc = (FAULTS / "SEALED-4.md").read_text()
    assert all(f"`{k.name}`" in sealed4_doc for k in kinds.SEALED4)
    plan4 = _module("scorecard").SEALED4_PLAN
    assert {kind for kind, *_ in plan4} == {k.name for k in kinds.SEALED4} and len(plan4) == 21
    for k in (*kinds.DEV, *kinds.SEALED, *kinds.SEALED2, *kinds.SEALED3, *kinds.SEALED4):
        assert k.right and all(f"id: {c}" in taxonomy for c in k.right), k.name


def _sealed_plan_is_its_document(n: int, earlier: tuple[str, ...]) -> list[tuple]:
    """SEALED{n}_PLAN is exactly SEALED-{n}.md's table: new kinds (none of `earlier`'s), real
    categories, valid ranks, node-wide runs at a node's first rank, every multi-node run on a
    non-zero node. Returns the plan."""
    kinds = _module("kinds")
    shapes = _module("shapes")
    sealed = getattr(kinds, f"SEALED{n}")
    plan: list[tuple] = getattr(_module("scorecard"), f"SEALED{n}_PLAN")
    taxonomy = (ROOT / "knowledge" / "taxonomy.yaml").read_text()
    before = {k.name for group in earlier for k in getattr(kinds, group)}
    assert len(sealed) >= 6 and not {k.name for k in sealed} & before
    for k in sealed:
        assert k.right and all(f"id: {c}" in taxonomy for c in k.right), k.name
    doc = (FAULTS / f"SEALED-{n}.md").read_text()
    cell = re.compile(r"`([\w-]+)` (?:rank (\d+)(?: \(node \d+\))?|node (\d+))(?:, step (\d))?")
    documented = []
    for line in doc.splitlines():
        row = re.match(r"\| `(\w+)` \|((?: [^|]+ \|){3})$", line)
        if row is None:
            continue
        for text in row.group(2).split("|")[:3]:
            m = cell.search(text)
            assert m is not None, text
            shape = shapes.BY_NAME[m.group(1)]
            rank = int(m.group(2)) if m.group(2) else int(m.group(3)) * shape.per_node
            documented.append((row.group(1), shape.name, rank, int(m.group(4) or 0),
                               m.group(3) is not None))
    assert sorted(documented) == sorted(plan) and len(plan) == 3 * len(sealed)
    assert {kind for kind, *_ in plan} == {k.name for k in sealed}
    assert {shape for _, shape, *_ in plan} == {s.name for s in shapes.SHAPES}
    for kind, name, rank, step, node_wide in plan:
        shape = shapes.BY_NAME[name]
        assert 0 <= rank < shape.world and step in (0, 4), (kind, name)
        if shape.nodes > 1:
            assert shape.node_of(rank) > 0, (kind, name)  # the fault is on a non-zero node
        if node_wide:
            k = kinds.BY_NAME[kind]
            assert (k.node_wide or k.at_start) and shape.nodes > 1, (kind, name)
            assert rank % shape.per_node == 0, (kind, name)
    return plan


def test_the_fifth_sealed_plan_is_the_documents_and_well_formed() -> None:
    """SEALED5_PLAN is exactly SEALED-5.md's table (`_sealed_plan_is_its_document`)."""
    _sealed_plan_is_its_document(5, ("DEV", "SEALED", "SEALED2", "SEALED3", "SEALED4"))


def test_the_sixth_sealed_plan_is_the_documents_and_well_formed() -> None:
    """SEALED6_PLAN is exactly SEALED-6.md's table (`_sealed_plan_is_its_document`), with at
    least 8 multi-node runs and no DDP kind on a DETAIL shape (where constructing DDP
    segfaults with no fault)."""
    shapes = _module("shapes")
    plan = _sealed_plan_is_its_document(
        6, ("DEV", "SEALED", "SEALED2", "SEALED3", "SEALED4", "SEALED5"))
    multinode = [(kind, name) for kind, name, *_ in plan if shapes.BY_NAME[name].nodes > 1]
    assert len(multinode) >= 8, multinode
    for kind, name, *_ in plan:
        if kind == "unused_param":
            assert not shapes.BY_NAME[name].detail, name


def test_every_shape_and_kind_is_planned_with_faults_on_every_position() -> None:
    sc = _module("scorecard")
    shapes = _module("shapes")
    kinds = _module("kinds")
    plans = sc.plans(list(shapes.SHAPES), list(kinds.DEV), False, False)
    assert {p.shape for p in plans} == {s.name for s in shapes.SHAPES}
    assert {p.kind for p in plans} == {k.name for k in kinds.DEV}
    assert {p.step for p in plans} == {0, sc.STEPS - 1}  # early and late
    two = shapes.BY_NAME["2node-torchrun"]
    assert two.positions() == [0, 2, 3]  # rank 0, a middle rank / node 2's first, the last
    assert [two.node_of(r) for r in range(4)] == [0, 0, 1, 1]
    node_faults = [p for p in plans if p.node_fault]
    assert node_faults and all(shapes.BY_NAME[p.shape].nodes > 1 for p in node_faults)
    full = sc.plans(list(shapes.SHAPES), list(kinds.DEV), True, True)
    assert len(full) > len(plans) and {(p.shape, p.kind) for p in plans} <= {
        (p.shape, p.kind) for p in full}


def test_files_name_their_rank_and_node() -> None:
    assert rank_of_file("gpu-node-02/logs/job_x/attempt_0/1/stderr.log") == 1  # a local rank
    assert host_of_file("gpu-node-02/logs/job_x/attempt_0/1/stderr.log") == "gpu-node-02"
    assert host_of_file("run.zip:logs/gpu-node-01.log") == "gpu-node-01"
    assert host_of_file("ip-10-0-0-12.log") == "ip-10-0-0-12"
    assert host_of_file("torchrun.log") is None and host_of_file("rank-3.log") is None
    assert host_of_file("slurm-job17.out") is None and host_of_file("x" * 5000) is None
    assert global_rank_of_file("job/rank-3.log") == 3
    assert global_rank_of_file("rank_12.out") == 12 and global_rank_of_file("frank-3.log") is None


def test_recording_a_run_scrubs_the_machines_paths(tmp_path: Path) -> None:
    record = _module("record")
    src = tmp_path / "run"
    (src / "dumps").mkdir(parents=True)
    (src / "gpu-node-01.log").write_bytes(f"  File \"{ROOT}/benchmarks/faults/job.py\"\n".encode()
                                          + b"  File \"/work/wt-faults3/benchmarks/x.py\"\n")
    (src / "dumps" / "fr_trace_0").write_bytes(b"\x80\x04")
    (src / "plan.json").write_text("{}")
    out = record.record(src, tmp_path / "kept")
    assert [p.name for p in out] == ["gpu-node-01.log"]
    assert (tmp_path / "kept" / "gpu-node-01.log").read_text() == \
        '  File "/job/benchmarks/faults/job.py"\n  File "/job/benchmarks/x.py"\n'
    # --dumps: a dump's strings are scrubbed inside the pickle, kept in its own protocol
    frame = {"name": "<module>", "filename": f"{ROOT}/benchmarks/faults/job.py", "line": 212}
    dump = {"version": "2.10", "entries": [{"frames": [frame, frame], "time_created_ns": 7}]}
    (src / "dumps" / "fr_trace_1").write_bytes(pickle.dumps(dump, protocol=2))
    record.record(src, tmp_path / "with", dumps=True)
    kept = (tmp_path / "with" / "dumps" / "fr_trace_1").read_bytes()
    assert record.pickle_protocol(kept) == 2 and str(ROOT).encode() not in kept
    frames = pickle.loads(kept)["entries"][0]["frames"]
    assert frames[0] == {**frame, "filename": "/job/benchmarks/faults/job.py"} == frames[1]
    # a dump cut off while it was written is kept as the run left it
    assert (tmp_path / "with" / "dumps" / "fr_trace_0").read_bytes() == b"\x80\x04"


#: a path of the machine that recorded a run: a checkout, a worktree, a home folder
MACHINE_PATHS = re.compile(rb"/work/|/home/[A-Za-z0-9_.-]+/|/root/|/Users/[A-Za-z0-9_.-]+/")


def test_no_recorded_fault_run_names_the_machines_paths() -> None:
    # every file (logs and Flight Recorder pickles alike, as bytes) went through record.scrub
    kept = [p for p in (ROOT / "tests" / "fixtures" / "faults").rglob("*") if p.is_file()]
    assert len(kept) > 50
    found = {str(p.relative_to(ROOT)): m.group().decode() for p in kept
             if (m := MACHINE_PATHS.search(p.read_bytes()))}
    assert found == {}
    assert MACHINE_PATHS.search(b'File "/work/wt-faults3/benchmarks/faults/job.py"')
    assert MACHINE_PATHS.search(pickle.dumps({"filename": "/home/ana/train.py"}, protocol=2))


def _run(shape_name: str, kind: str, rank: int, tmp_path: Path, step: int = 2) -> dict[str, object]:
    sc = _module("scorecard")
    shapes = _module("shapes")
    shape = shapes.BY_NAME.get(shape_name) or shapes.Shape(shape_name, "slurm", 2)
    plan = sc.Plan(shape.name, kind, rank, step, False)
    if shape.name not in shapes.BY_NAME:
        shapes.BY_NAME[shape.name] = shape
    where = shapes.run(shape, kind, rank, tmp_path / "run", step, sc.STEPS, timeout_s=150)
    verdict: dict[str, object] = sc.judge(where, plan)
    return verdict


def test_an_exception_on_rank_1_is_a_crash_of_rank_1(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    verdict = _run("torchrun-4-logdir", "exception", 1, tmp_path)
    where = tmp_path / "run"
    assert sorted(p.name for p in (where / "dumps").iterdir())  # the ranks' dumps
    assert "injected failure on rank 1" in "".join(
        p.read_text() for p in (where / "logs").rglob("*.log"))
    assert (verdict["category_ok"], verdict["culprit_ok"]) == (True, True), verdict


def test_a_rank_asleep_past_the_timeout_is_the_straggler(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    verdict = _run("torchrun-4-logdir", "sleep", 2, tmp_path)  # rank 2: not a scorecard position
    assert (verdict["category_ok"], verdict["culprit_ok"]) == (True, True), verdict


def test_a_slurm_style_rank_that_exits_cleanly_early_is_the_cause(tmp_path: Path) -> None:
    # two processes started by hand with env:// (as srun starts them), `N: ` prefixes, one
    # interleaved file; rank 1 returns with exit code 0 at its first step
    pytest.importorskip("torch")
    verdict = _run("slurm-2", "exit0_early", 1, tmp_path, step=0)
    text = (tmp_path / "run" / "slurm-job17.out").read_text()
    assert "1: rank 1: nothing left to do, exiting" in text
    assert verdict["culprit_ok"] and verdict["suspect"] == 1, verdict
    assert verdict["category_ok"], verdict


def test_a_busy_machine_stretches_the_job_limit_and_a_stopped_run_is_flagged(
        tmp_path: Path) -> None:
    shapes = _module("shapes")
    assert shapes.job_limit(90, 0.5, 2) == 90  # idle: the base
    assert shapes.job_limit(90, 6.0, 2) == 270  # load 3 per core: 3x
    assert shapes.job_limit(90, 50.0, 2) == 360  # never past 4x
    ran = tmp_path / "ran"
    (ran / "node0").mkdir(parents=True)
    (ran / "node0" / "torchrun.log").write_text("[rank0]: step 4 done\n")
    assert not shapes.harness_stopped(ran)
    (ran / "node0" / "torchrun.log").write_text(f"[rank0]: step 1\n{shapes.STOPPED} 90 s)\n")
    assert shapes.harness_stopped(ran)
