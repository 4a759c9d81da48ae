"""yamllint (relaxed) over every YAML file in deploy/."""

from __future__ import annotations

import pytest

from tests.deploy.conftest import DEPLOY

yamllint_config = pytest.importorskip("yamllint.config")
yamllint_linter = pytest.importorskip("yamllint.linter")

FILES = sorted(p for p in DEPLOY.rglob("*") if p.suffix in {".yaml", ".yml"} and p.is_file())


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yamllint_relaxed(path):
    conf = yamllint_config.YamlLintConfig("extends: relaxed")
    problems = [p for p in yamllint_linter.run(path.read_text(encoding="utf-8"), conf)
                if p.level == "error"]
    assert not problems, "\n".join(f"{path}:{p.line}:{p.column} {p.desc}" for p in problems)
