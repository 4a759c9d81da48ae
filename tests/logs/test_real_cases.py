"""Accuracy floors on the real cases (tests/fixtures/heldout*): a change that makes the
analyzer worse on real logs fails here. Floors sit a few cases below the measured figures
(benchmarks/eval_cases.py prints them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.logs.sources import expand_inputs
from bot.service import analyze_sources
from tests.conftest import FIXTURES

FLOORS = {"heldout": (0.80, 0.88), "heldout2": (0.68, 0.75)}  # (top-1, top-3)


@pytest.mark.parametrize("folder", sorted(FLOORS))
def test_analyze_accuracy_on_real_cases(folder: str, tmp_path: Path) -> None:
    cases = [yaml.safe_load(p.read_text(encoding="utf-8"))
             for p in sorted((FIXTURES / folder).glob("*.yaml"))]
    assert len(cases) >= 30
    top1 = top3 = 0
    for i, case in enumerate(cases):
        log = tmp_path / f"{i}.log"
        log.write_text(case["log"], encoding="utf-8")
        cats = [rc.category for rc in analyze_sources(expand_inputs([str(log)]))[1].root_causes]
        ok = {case["category"], *(case.get("secondary") or [])}
        top1 += bool(cats) and cats[0] in ok
        top3 += bool(ok & set(cats[:3]))
    floor1, floor3 = FLOORS[folder]
    assert top1 / len(cases) >= floor1, f"{folder}: top-1 {top1}/{len(cases)}"
    assert top3 / len(cases) >= floor3, f"{folder}: top-3 {top3}/{len(cases)}"
