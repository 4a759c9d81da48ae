"""The CLI at its edges: startup stays light, bad input gets a message and an exit code."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True,
                          cwd=ROOT, timeout=120, input=stdin)


def test_analyze_does_not_import_heavy_packages():
    code = ("import sys, runpy; sys.argv=['ncclbot','analyze','examples/sample-8rank-oom.log','--json'];\n"
            "try:\n    runpy.run_module('bot.cli.main', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "heavy=[m for m in ('torch','chromadb','langchain','langchain_core','slack_bolt','sentence_transformers') "
            "if sys.modules.get(m) is not None]\nprint('HEAVY', heavy, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "HEAVY []" in out.stderr, out.stderr[-2000:]


def test_sample_log_names_the_culprit():
    out = _run("analyze", "examples/sample-8rank-oom.log", "--json")
    answer = json.loads(out.stdout)
    assert answer["diagnosis"]["root_causes"][0]["category"] == "rank_crashed"
    assert answer["diagnosis"]["suspects"][0] == {**answer["diagnosis"]["suspects"][0], "rank": 5,
                                                  "host": "gpu-node-17"}


def test_stdin_and_terminal_report():
    log = (ROOT / "examples" / "sample-8rank-oom.log").read_bytes()
    out = _run("analyze", "-", "--details", "--lang", "both", stdin=log)
    assert out.returncode == 0
    text = out.stdout.decode()
    assert "rank_crashed" in text and "处理步骤" in text and "Suspects" in text
    short = _run("analyze", "-", "--lang", "en", stdin=log).stdout.decode()
    assert "Likely:" in short and "--details" in short and len(short) < len(text)


def test_bad_inputs_get_messages_not_tracebacks(tmp_path):
    binary = tmp_path / "core"
    binary.write_bytes(bytes(range(256)) * 64)
    empty = tmp_path / "empty.log"
    empty.write_text("")
    for args, expected in (
        (["analyze", str(binary)], "binary"),
        (["analyze", str(empty)], "empty"),
        (["analyze", str(tmp_path / "missing.log")], "no such file"),
        # a folder is read as a job's folder: here only a binary and an empty file
        (["analyze", str(tmp_path)], "nothing to analyze"),
        (["analyze", str(tmp_path / "nodir") + "/"], "no such file"),
    ):
        out = _run(*args)
        err = out.stderr.decode()
        assert out.returncode == 2, (args, err)
        assert expected in err and "Traceback" not in err
        assert "hint" in err


def test_bad_config_file(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("data_dir = [")
    out = _run("analyze", "examples/sample-8rank-oom.log", "--config", str(cfg))
    assert out.returncode == 2 and b"not valid TOML" in out.stderr


def test_list_settings_take_comma_lists_and_json(monkeypatch) -> None:
    from bot.config import load_settings

    monkeypatch.setenv("NCCLBOT_ONCALL_USERS", "U1, U2")
    monkeypatch.setenv("NCCLBOT_AGENT_NAMES", '["gpu-node-17", "gpu-node-17.cluster"]')
    s = load_settings()
    assert s.oncall_users == ["U1", "U2"]
    assert s.agent_names == ["gpu-node-17", "gpu-node-17.cluster"]


def test_a_missing_optional_package_names_the_extra_to_install(monkeypatch, capsys) -> None:
    import pytest

    from bot.cli import main as cli

    monkeypatch.setattr("sys.argv", ["ncclbot", "ask", "why does NCCL hang?"])

    def boom() -> None:
        raise ModuleNotFoundError("No module named 'numpy'", name="numpy")

    monkeypatch.setattr(cli, "app", boom)
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'ncclbot[retrieval]'" in err
    assert "`ncclbot ask`" in err and "why does" not in err

    def other() -> None:
        raise ModuleNotFoundError("No module named 'bot.nothing'", name="bot.nothing")

    monkeypatch.setattr(cli, "app", other)
    with pytest.raises(ModuleNotFoundError):  # a real bug is not dressed up as a missing extra
        cli.main()


def test_published_answer_schema_validates_analyze_json(tmp_path) -> None:
    import jsonschema

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True,
                              text=True, cwd=ROOT, timeout=120)

    schema = json.loads(run("schema", "answer").stdout)
    assert {"verdict", "summary", "diagnosis"} <= set(schema["required"])
    assert "similar_incidents" in schema["properties"]
    quiet = tmp_path / "quiet.log"
    quiet.write_text("step 1 loss 2.3\nstep 2 loss 2.2\n", encoding="utf-8")
    for log in (ROOT / "examples" / "sample-8rank-oom.log", quiet):
        out = run("analyze", str(log), "--json")
        assert out.returncode == 0, out.stderr
        answer = json.loads(out.stdout)
        jsonschema.validate(answer, schema)
        assert isinstance(answer["similar_incidents"], list)
    bad = {"verdict": "maybe", "summary": "", "diagnosis": {"root_causes": []}}
    with __import__("pytest").raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
