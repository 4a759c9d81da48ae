"""Local incidents: what is kept of a log (bounded, redacted), the store on SQLite and
PostgreSQL, the ranking (at once, and gone at once when forgotten), and the CLI
(`ncclbot incidents …` as a real process: add, list, show, forget, export, import)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.answering.troubleshooter import analyze_paths
from bot.config import load_settings
from bot.knowledge.incidents import MAX_LOG_LINES
from bot.logs.salient import salient_key, salient_lines
from bot.memory import runtime
from bot.memory.model import LocalIncident, capture, excerpt, to_corpus
from bot.memory.store import MemoryChangeError, MemoryStore
from bot.state.db import Database, PostgresDatabase, SqliteDatabase
from tests.conftest import FIXTURES, ROOT
from tests.memory.conftest import FAMILY, family_log

PLANTED = yaml.safe_load((FIXTURES / "secrets" / "planted.yaml").read_text(encoding="utf-8"))
RUN1, RUN2 = "w2-r1-s2", "w3-r2-s4"


def _lines(run: str) -> list[str]:
    return family_log(run).decode().splitlines()


def _incident(run: str = RUN1, **kw: Any) -> LocalIncident:
    args: dict[str, Any] = {
        "log_lines": _lines(run), "category": "version_incompatibility",
        "resolution": "pinned shardstore>=2.5", "who": "UALICE", "role": "asker",
        "keep_hosts": False, "source": "https://fake.slack/archives/C1/p1"}
    args.update(kw)
    return capture(**args)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    opened: Database = (PostgresDatabase(request.getfixturevalue("postgres_url"))
                        if request.param == "postgres" else
                        SqliteDatabase(tmp_path / "state.sqlite3"))
    yield opened
    opened.close()


def test_the_excerpt_keeps_the_salient_lines_with_context_and_is_bounded() -> None:
    kept = excerpt(_lines(RUN1))
    assert any("ManifestVersionError: shardstore: manifest format v3" in x for x in kept)
    assert len(kept) < len(_lines(RUN1))  # not the whole log
    noisy = [f"step {i} ok" if i % 3 else f"RuntimeError: distinct failure number {i}x{i % 97}"
             f" kind {chr(97 + i % 26)}{chr(97 + i // 26 % 26)}" for i in range(20000)]
    big = excerpt(noisy)
    assert len(big) <= MAX_LOG_LINES and all(len(x) <= 400 for x in big)
    kept_keys = {salient_key(x) for x in big}
    assert salient_key(noisy[-2]) in kept_keys  # the failures at the end are there too


def test_no_planted_secret_is_ever_stored(db: Database) -> None:
    lines = _lines(RUN1)
    for case in PLANTED:  # each as a failing line, and as the context of one
        lines += [f"ERROR config check failed: {case['line']}", case["line"],
                  "RuntimeError: launcher refused the job"]
    fix = "rotated the key " + PLANTED[0]["line"]
    store = MemoryStore(db)
    for keep_hosts in (False, True):
        inc = _incident(log_lines=lines, resolution=fix, keep_hosts=keep_hosts,
                        question="why? " + PLANTED[3]["line"])
        store.add(inc, "UALICE")
        exported = yaml.safe_dump(to_corpus(inc).model_dump(mode="json"))
        assert "ManifestVersionError" in inc.log
        for case in PLANTED:
            assert case["secret"] not in exported, case["line"]
    with db.tx() as tx:
        raw = json.dumps(tx.execute("SELECT * FROM local_incidents").rows)
        raw += json.dumps(tx.execute("SELECT * FROM memory_audit").rows)
    for case in PLANTED:
        assert case["secret"] not in raw, case["line"]


def test_host_names_are_kept_only_when_the_team_allows() -> None:
    lines = ["gpu-node-17: [rank3]: RuntimeError: shardstore: manifest format v3 refused on "
             "gpu-node-17 (10.1.2.3)"]
    hidden = _incident(log_lines=lines, keep_hosts=False)
    kept = _incident(log_lines=lines, keep_hosts=True)
    assert "gpu-node-17" not in hidden.log and "10.1.2.3" not in hidden.log
    assert "gpu-node-17" in kept.log and "10.1.2.3" in kept.log


def test_the_store_keeps_one_per_thread_and_counts_every_change(db: Database) -> None:
    store = MemoryStore(db)
    v0 = store.version()
    inc = _incident(channel="C1", thread_ts="1.1", origin="slack")
    store.add(inc, "UALICE")
    with pytest.raises(MemoryChangeError, match="resolved already"):
        store.add(_incident(channel="C1", thread_ts="1.1"), "UBOB")
    fixed = inc.model_copy(update={"category": "other"})
    store.replace(fixed, "UALICE")
    assert store.for_thread("C1", "1.1").category == "other"
    assert MemoryStore(db).version() == v0 + 2  # another replica's view
    assert store.forget(inc.id, "UALICE") and not store.forget(inc.id, "UALICE")
    assert store.version() == v0 + 3 and store.count() == 0
    assert [a for _, a, _, _ in store.audit_rows()] == ["add", "correct", "forget"]


def test_stored_counts_at_once_and_forgotten_is_gone_at_once(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    log2 = FAMILY / f"shardstore-{RUN2}.log"
    before = analyze_paths([str(log2)], settings)
    # the bundled corpus may hold a look-alike; the team's own incident is what comes and goes
    assert before.root_causes[0].category == "rank_crashed"
    assert not any(s.local for s in before.similar_incidents)
    store = runtime.memory(settings, create=True)
    assert store is not None
    inc = _incident()
    store.add(inc, "UALICE")
    after = analyze_paths([str(log2)], settings)
    assert after.root_causes[0].category == "version_incompatibility"
    assert after.similar_incidents[0].local and after.similar_incidents[0].source == (
        "https://fake.slack/archives/C1/p1")
    store.forget(inc.id, "UALICE")
    gone = analyze_paths([str(log2)], settings)
    assert gone.root_causes[0].category == "rank_crashed"
    assert not any(s.local for s in gone.similar_incidents)


# -- the CLI, as a real process ---------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., subprocess.
                                                                      CompletedProcess[str]]:
    monkeypatch.setenv("NCCLBOT_DATA_DIR", str(tmp_path / "team-a"))
    return _cli


def test_cli_add_list_show_forget_export_import(cli: Callable[..., subprocess.
                                                              CompletedProcess[str]],
                                                tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    log1 = str(FAMILY / f"shardstore-{RUN1}.log")
    out = cli("incidents", "add", "--log", log1, "--category", "version_incompatibility",
              "--fix", "pinned shardstore>=2.5", "--source", "https://wiki.example.com/pm/42",
              "--title", "shardstore too old", "--json")
    assert out.returncode == 0, out.stderr
    added = json.loads(out.stdout)
    listed = json.loads(cli("incidents", "list", "--json").stdout)
    assert [r["id"] for r in listed] == [added["id"]]
    shown = cli("incidents", "show", added["id"]).stdout
    assert "ManifestVersionError" in shown and "pinned shardstore" in shown
    # the CLI answer uses it at once
    answer = json.loads(cli("analyze", str(FAMILY / f"shardstore-{RUN2}.log"), "--json").stdout)
    assert answer["diagnosis"]["root_causes"][0]["category"] == "version_incompatibility"
    assert answer["similar_incidents"][0]["source"] == "https://wiki.example.com/pm/42"
    # export: corpus files that `knowledge check` validates
    exported = tmp_path / "export"
    assert cli("incidents", "export", str(exported)).returncode == 0
    assert (exported / f"{added['id']}.yaml").is_file()
    check = cli("knowledge", "check", "--incidents", str(exported))
    assert check.returncode == 0, check.stdout + check.stderr
    # another team imports it (a defective file beside it is skipped with one line)
    (exported / "broken.yaml").write_text("id: x\n")
    monkeypatch.setenv("NCCLBOT_DATA_DIR", str(tmp_path / "team-b"))
    imported = cli("incidents", "import", str(exported))
    assert imported.returncode == 0 and "imported 1 incident(s)" in imported.stdout
    assert "skipped broken.yaml: id:" in imported.stderr and "Traceback" not in imported.stderr
    assert [r["id"] for r in json.loads(cli("incidents", "list", "--json").stdout)] == [
        added["id"]]
    assert cli("incidents", "forget", added["id"]).returncode == 0
    assert json.loads(cli("incidents", "list", "--json").stdout) == []


@pytest.mark.parametrize(("args", "says"), [
    (["--category", "nope", "--fix", "x"], "unknown category 'nope'"),
    (["--category", "rank_crashed", "--fix", "x", "--card", "no-such-card"], "unknown card"),
    (["--category", "rank_crashed", "--fix", "x", "--source", "javascript:alert(1)"],
     "--source must be an http(s) link"),
    (["--category", "rank_crashed", "--fix", "   "], "the fix is empty"),
])
def test_cli_bad_input_is_one_line(cli: Callable[..., subprocess.CompletedProcess[str]],
                                   args: list[str], says: str) -> None:
    out = cli("incidents", "add", "--log", str(FAMILY / f"shardstore-{RUN1}.log"), *args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr
    gone = cli("incidents", "forget", "local-nothing")
    assert gone.returncode == 2 and "no local incident" in gone.stderr
    missing = cli("incidents", "show", "local-nothing")
    assert missing.returncode == 2 and "no local incident" in missing.stderr


def test_a_thumbs_down_then_a_resolution_records_the_right_cause(tmp_path: Path) -> None:
    from bot.answering.contract import Answer
    from bot.slack.store import Store

    slack_store = Store(tmp_path / "state.sqlite3")
    memory = MemoryStore(slack_store.db)
    answered = Answer.model_validate({
        "verdict": "diagnosed", "summary": "Likely: rank_crashed", "diagnosis": {"root_causes": [
            {"category": "rank_crashed", "card": None, "confidence": 0.56}]}})
    wrong = slack_store.save_answer("C1", "5.5", answered)
    right = slack_store.save_answer("C1", "6.6", answered)
    slack_store.add_feedback(wrong, "UALICE", False, "it was our data library")
    slack_store.add_feedback(right, "UBOB", True)
    memory.add(_incident(channel="C1", thread_ts="5.5", answer_id=wrong), "UALICE")
    memory.add(_incident(channel="C1", thread_ts="6.6", answer_id=right,
                         category="rank_crashed"), "UBOB")
    assert memory.corrections() == [(wrong, "rank_crashed", "version_incompatibility", None)]
    assert memory.downvoted(wrong) and not memory.downvoted(right)
    slack_store.close()


def test_the_local_index_follows_each_change_without_a_rebuild(tmp_path: Path) -> None:
    from bot.answering.knowledge import bundled_index
    from bot.diagnosis.nearest import WithLocal

    settings = load_settings(data_dir=tmp_path)
    store = runtime.memory(settings, create=True)
    assert store is not None
    base = bundled_index(None)
    store.add_many([_incident(log_lines=[f"RuntimeError: team step {n} of stage {chr(97 + n)}"
                                         f"{chr(98 + n)} failed"], incident_id=f"local-f{n:03d}")
                    for n in range(20)], "UALICE")
    first = runtime.index_for(settings, base)
    assert isinstance(first, WithLocal) and first.local.size == 20
    inc = _incident()
    store.add(inc, "UALICE")
    keys = salient_lines(_lines(RUN2))
    second = runtime.index_for(settings, base)
    assert isinstance(second, WithLocal) and second.local is first.local  # updated in place
    assert second.nearest(keys, 3)[0].doc.id == (
        f"local:{inc.id}")
    store.replace(inc.model_copy(update={"category": "other"}), "UALICE")
    third = runtime.index_for(settings, base)
    near = third.nearest(keys, 3)
    assert near[0].doc.local is not None and near[0].doc.local.category == "other"
    assert [n.doc.id for n in near].count(f"local:{inc.id}") == 1
    store.forget(inc.id, "UALICE")
    gone = runtime.index_for(settings, base)
    assert all(n.doc.id != f"local:{inc.id}" for n in gone.nearest(
        keys, 5))
