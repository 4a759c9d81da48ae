"""A node tool is declared once: its parameter names appear only in its own folder (and the
registry, and tests); everything else reads them from its `ToolSpec`. This greps the real
source, so a hand-written copy of a parameter (an MCP argument, a preset table, a dict key
built outside the tool) fails here instead of drifting."""

from __future__ import annotations

import re
from pathlib import Path

from tools.registry import TOOLS

ROOT = Path(__file__).resolve().parents[2]

#: Parameter names that are also ordinary words of other parts, with why they are not
#: checked everywhere. Each is still checked where a tool's parameters are built or read
#: as a dict (`params["name"]`, `params.get("name")`), the way copies drift.
GENERIC = {
    "file": "evidence lines, Slack files and log sources all have a `file`",
    "timeout": "every client, pool and subprocess call takes a `timeout`",
    "pattern": "log signatures and pydantic constraints are `pattern`s",
    "job": "Slack's fair queue runs `job`s; hang analysis names a rank's job",
    "gpu": "log facts, NVML and sysfs describe a `gpu`",
    "max_bytes": "log readers, Slack downloads and the audit log cap their `max_bytes`",
    "backend": "the MCP server's `Backend` object and module",
    "force": "the node agent's override of its GPU check for the GPU-exclusive tool "
             "(ToolSpec.exclusive): its route, /v1/probe/check, the node client and the CLI's "
             "--force; also Slack's and the door's `force` flush",
    "flight_recorder": "the log analysis has a Flight Recorder module and report field",
    "nccl_version": "a log fact ('NCCL version 2.x') the log analysis reads",
    "nccl_tests": "a log fact (nccl-tests output) the log analysis reads",
    "collectives": "the cross-rank reasons say which ranks still ran `collectives:` (prose, "
                   "and its Chinese pattern in crossrank.py)",
    "rendezvous": "a log fact (c10d rendezvous errors) the log analysis reads; the agent's "
                  "GPU-exclusive route joins a multi-node group's rendezvous (tools.probe.group)",
}

#: how a parameter is named in code: a string key, a keyword or annotated parameter, an
#: attribute
_USE = r"""["']{n}["']|\b{n}\s*(?:=(?!=)|:)|\.{n}\b"""
_DICT_USE = r"""params\w*(?:\[|\.get\()\s*["']{n}["']"""


def _folders() -> dict[str, set[str]]:
    """Each parameter name -> the folders of the tools that declare it."""
    out: dict[str, set[str]] = {}
    for spec in TOOLS.values():
        models = {spec.params, spec.request_model()}
        folders = {f"tools/{spec.name}"} | {
            str(Path(m.__module__.replace(".", "/")).parent) for m in models}
        for model in models:
            for name in model.model_fields:
                out.setdefault(name, set()).update(folders)
    return out


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """The lines that are code: not comments, not imports (`tools.probe.plot` is a module)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(i, line) for i, line in enumerate(lines, 1)
            if not line.lstrip().startswith(("#", "from ", "import "))]


def leaks() -> list[str]:
    """Every place a tool's parameter is named outside its folder, the registry and tests."""
    files = [p for top in ("bot", "tools") for p in sorted((ROOT / top).rglob("*.py"))]
    found = []
    for name, folders in sorted(_folders().items()):
        use = re.compile((_DICT_USE if name in GENERIC else _USE).format(n=re.escape(name)))
        for path in files:
            rel = path.relative_to(ROOT).as_posix()
            if rel == "tools/registry.py" or any(rel.startswith(f + "/") for f in folders):
                continue
            found += [f"{rel}:{i}: {name!r} in {line.strip()[:100]}"
                      for i, line in _code_lines(path) if use.search(line)]
    return found


def test_every_tool_parameter_is_named_only_in_its_own_folder() -> None:
    assert TOOLS, "the registry lists the tools"
    found = leaks()
    assert not found, "parameters named outside their tool's folder (read them from the " \
        "ToolSpec, or list a reason in GENERIC):\n" + "\n".join(found)


def test_the_grep_finds_a_copy(tmp_path: Path) -> None:
    """The patterns catch the ways a copy is written (so the test above can fail)."""
    samples = {"topo_text": 'backend.node_tool("topo", node, {"topo_text": text})',
               "import_torch": "def node_env(node: str, import_torch: bool = False)",
               "nproc": "if params.get(\"nproc\") is None:",
               "rdzv_id": "body.rdzv_id"}
    for name, line in samples.items():
        assert re.search(_USE.format(n=name), line), (name, line)
    assert re.search(_DICT_USE.format(n="backend"), 'params.get("backend", "nccl")')
    assert not re.search(_DICT_USE.format(n="backend"), "def f(backend: Backend)")
    assert "topo_text" in _folders() and "tools/topo" in _folders()["topo_text"]


def test_generic_words_are_parameters() -> None:
    """A GENERIC word that is no longer any tool's parameter is removed from the list."""
    assert set(GENERIC) <= set(_folders()), set(GENERIC) - set(_folders())
