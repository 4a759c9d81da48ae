"""The incident corpus: strict schema, size, unique threads, the sealed set, eval cases kept out."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from bot.knowledge.cards import card_files, parse_card
from bot.knowledge.check import check_incidents, held_out_problems
from bot.knowledge.incidents import (
    MAX_LOG_LINES,
    SEAL_SIZE,
    Incident,
    Sealed,
    choose_sealed,
    incident_files,
    load_incidents,
    load_sealed,
    parse_incident,
    thread_key,
)
from bot.knowledge.taxonomy import category_ids
from tests.conftest import ROOT

SHARED_EVAL = ROOT.parent / "shared" / "eval" / "cases"


def test_corpus_is_large_valid_and_one_file_per_thread() -> None:
    incidents, problems = check_incidents()
    assert problems == []
    # issue 14 asks for 250; 142 threads were collected, and the re-check of issue 29 removed 12
    # that broke the corpus rules (docs/reviews/incidents-2026-11-29.md); it must not shrink
    # further except by such a review
    assert len(incidents) >= 130
    assert len({i.url.lower() for i in incidents}) == len(incidents)
    for path in incident_files():
        if path.name != "sealed.yaml":
            assert path.stem == yaml.safe_load(path.read_text(encoding="utf-8"))["id"]
    # every category of the taxonomy but `other` has real incidents
    counts = Counter(i.category for i in incidents)
    assert set(category_ids()) - set(counts) <= {"other"}, counts


def test_sealed_set_follows_its_rule_newest_dated_threads_no_card_cites() -> None:
    incidents = load_incidents()
    sealed = load_sealed()
    assert sealed is not None
    cited = [u for p in card_files() for u in parse_card(p.read_text("utf-8")).source_urls]
    assert sorted(sealed.ids) == choose_sealed(incidents, cited, SEAL_SIZE)
    by_id = {i.id: i for i in incidents}
    assert all(by_id[i].date is not None for i in sealed.ids)
    assert not {thread_key(by_id[i].url) for i in sealed.ids} & {thread_key(u) for u in cited}
    assert set(sealed.undated) == {i.id for i in incidents if i.date is None}
    # the replaced set is kept beside the new one, so old and new figures can be compared
    assert sealed.previous and len(sealed.previous[-1].ids) == 28


@pytest.mark.skipif(not SHARED_EVAL.is_dir(), reason="../shared/eval not present")
def test_eval_cases_stay_out_of_the_corpus() -> None:
    eval_sources = {str(yaml.safe_load(p.read_text(encoding="utf-8")).get("source", "")).lower()
                    for p in SHARED_EVAL.glob("*.yaml")}
    assert not eval_sources & {i.url.lower() for i in load_incidents()}


GOOD = {
    "id": "nccl-example-1", "source": "https://github.com/NVIDIA/nccl/issues/1",
    "repo": "NVIDIA/nccl", "title": "t", "date": "2024-01-02", "category": "infiniband_roce",
    "log": "NCCL WARN NET/IB : Got completion from peer with error 12",
    "resolution": "The IB link was flapping; replacing the cable fixed it.",
    "confirmed_by": {"who": "reporter", "author": "someone", "role": "reporter",
                     "url": "https://github.com/NVIDIA/nccl/issues/1",
                     "quote": "replacing the cable fixed it"},
}


@pytest.mark.parametrize(("change", "message"), [
    ({"confirmed_by": None}, "confirmed_by"),
    ({"confirmed_by": {"who": "someone", "quote": "it works now, thanks"}}, "who"),
    ({"category": "cosmic_rays"}, "unknown categories"),
    ({"secondary": ["cosmic_rays"]}, "unknown categories"),
    ({"source": "not a url"}, "URL"),
    ({"log": "\n".join(["x"] * (MAX_LOG_LINES + 1))}, "trim it"),
    ({"log": ""}, "at least 1 character"),
    ({"date": "yesterday"}, "date"),
    ({"confirmed_by": {"who": "reporter", "quote": "ok"}}, "at least 8"),
    ({"mood": "sad"}, "Extra inputs"),
    ({"confirmed_by": {**GOOD["confirmed_by"], "role": "maintainer"}}, "does not fit who"),
    ({"confirmed_by": {**GOOD["confirmed_by"], "role": "bystander"}}, "role"),
])
def test_schema_rejects(change: dict, message: str) -> None:
    assert parse_incident(yaml.safe_dump(GOOD)).id == "nccl-example-1"
    with pytest.raises(Exception, match=message):
        parse_incident(yaml.safe_dump({**GOOD, **change}))


def test_check_names_duplicate_sources_and_unknown_sealed_ids(tmp_path: Path) -> None:
    (tmp_path / "a-case.yaml").write_text(yaml.safe_dump({**GOOD, "id": "a-case"}), "utf-8")
    (tmp_path / "b-case.yaml").write_text(yaml.safe_dump({**GOOD, "id": "b-case"}), "utf-8")
    (tmp_path / "sealed.yaml").write_text(yaml.safe_dump(
        {"sealed_on": "2026-11-25", "rule": "newest", "ids": ["a-case", "ghost-case"]}), "utf-8")
    _, problems = check_incidents(tmp_path)
    assert any("another incident has" in p for p in problems)
    assert any("ghost-case" in p for p in problems)


def test_check_asks_where_the_confirmation_stands_and_lists_undated(tmp_path: Path) -> None:
    old_style = {**GOOD, "id": "a-case", "date": None,
                 "confirmed_by": {"who": "reporter", "quote": "replacing the cable fixed it"}}
    assert parse_incident(yaml.safe_dump(old_style)).confirmed_by.url is None  # still loads
    (tmp_path / "a-case.yaml").write_text(yaml.safe_dump(old_style), "utf-8")
    (tmp_path / "b-case.yaml").write_text(yaml.safe_dump(
        {**GOOD, "id": "b-case", "source": "https://github.com/NVIDIA/nccl/issues/2"}), "utf-8")
    (tmp_path / "sealed.yaml").write_text(yaml.safe_dump(
        {"sealed_on": "2026-11-29", "rule": "newest", "ids": ["a-case"]}), "utf-8")
    _, problems = check_incidents(tmp_path)
    for field in ("url", "author", "role"):
        assert any(f"a-case.yaml: confirmed_by.{field}: missing" in p for p in problems), field
    assert not any("b-case.yaml" in p for p in problems)
    assert any("without a date ['a-case']" in p for p in problems)
    assert any("must be listed as left out" in p and "a-case" in p for p in problems)


def test_a_sealed_thread_that_a_card_cites_is_named() -> None:
    incidents = load_incidents()
    cards = [parse_card(p.read_text("utf-8")) for p in card_files()]
    card = next(c for c in cards if any("github.com" in u for u in c.source_urls))
    url = next(u for u in card.source_urls if "github.com" in u)
    inc = parse_incident(yaml.safe_dump({**GOOD, "source": url + "/"}))
    sealed = Sealed.model_validate({"sealed_on": "2026-11-29", "rule": "r", "ids": [inc.id]})
    problems = held_out_problems(cards, [*incidents, inc], sealed)
    assert len(problems) == 1 and card.id in problems[0] and inc.id in problems[0]
    assert held_out_problems(cards, incidents, load_sealed()) == []


def test_sealing_rule_is_newest_first_and_skips_cited_and_undated() -> None:
    def inc(iid: str, date: str | None, n: int) -> Incident:
        return parse_incident(yaml.safe_dump(
            {**GOOD, "id": iid, "date": date, "source": f"https://github.com/o/r/issues/{n}"}))
    pool = [inc("old", "2020-01-01", 1), inc("new", "2025-01-01", 2),
            inc("cited", "2026-01-01", 3), inc("undated", None, 4), inc("mid", "2023-01-01", 5)]
    assert choose_sealed(pool, ["https://github.com/O/R/issues/3/"], 2) == ["mid", "new"]


STATED = {**GOOD, "question": "Two nodes fail, single node is fine. We run in Docker.",
          "hardware": "2 nodes x 8 A100"}


@pytest.mark.parametrize(("facts", "message"), [
    ({"gpu_count": {"value": "yes", "quote": "single node is fine"}}, "no deciding question"),
    ({"container": {"value": "maybe", "quote": "We run in Docker"}}, "not an answer of"),
    ({"container": {"value": "yes", "quote": "runs in a Kubernetes pod"}}, "is not in"),
    # the resolution is written after the cause was known: it is not the reporter's statement
    ({"container": {"value": "yes", "quote": "replacing the cable fixed it"}}, "is not in"),
    ({"container": {"value": "yes"}}, "quote"),
])
def test_facts_must_answer_a_deciding_question_in_the_reporters_words(
        facts: dict, message: str) -> None:
    with pytest.raises(Exception, match=message):
        parse_incident(yaml.safe_dump({**STATED, "facts": facts}))


def test_facts_read_yaml_yes_no_and_quotes_across_line_breaks() -> None:
    text = yaml.safe_dump({**STATED}) + (
        "facts:\n"
        "  container: {value: yes, quote: 'We run in\n    Docker'}\n"
        "  fewer_gpus: {value: \"yes\", quote: \"single node is fine\"}\n")
    inc = parse_incident(text)
    assert inc.answered == {"container": "yes", "fewer_gpus": "yes"}
    assert parse_incident(yaml.safe_dump(STATED)).facts == {}  # optional


def test_bundled_facts_are_checked_and_fact_quotes_tool_adds_one(tmp_path: Path) -> None:
    import subprocess
    import sys

    incidents, problems = check_incidents()
    assert problems == []
    facts = [f for i in incidents for f in i.facts.values()]
    assert len(facts) >= 50 and {k for i in incidents for k in i.facts} >= {
        "container", "fewer_gpus", "upgrade", "p2p_disable"}
    (tmp_path / "a-case.yaml").write_text(yaml.safe_dump({**STATED, "id": "a-case"}), "utf-8")
    tool = [sys.executable, str(ROOT / "scripts" / "fact_quotes.py"), "--incidents",
            str(tmp_path)]
    bad = subprocess.run([*tool, "add", "a-case", "container", "yes", "in a pod"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "is not in" in bad.stderr
    for key, quote in (("container", "We run in Docker"), ("fewer_gpus", "single node is fine")):
        ok = subprocess.run([*tool, "add", "a-case", key, "yes", quote], capture_output=True,
                            text=True, timeout=120)
        assert ok.returncode == 0, ok.stderr
    inc = parse_incident((tmp_path / "a-case.yaml").read_text("utf-8"))
    assert inc.answered == {"container": "yes", "fewer_gpus": "yes"}
    report = subprocess.run(tool, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0 and "container=yes 1" in report.stdout
    _, problems = check_incidents(tmp_path)
    assert problems == []


def test_check_names_the_file_and_the_fact_whose_quote_is_not_stated(tmp_path: Path) -> None:
    (tmp_path / "a-case.yaml").write_text(yaml.safe_dump(
        {**STATED, "id": "a-case",
         "facts": {"upgrade": {"value": "yes", "quote": "after the driver upgrade"}}}), "utf-8")
    _, problems = check_incidents(tmp_path)
    assert len(problems) == 1
    assert problems[0].startswith("a-case.yaml") and "facts.upgrade" in problems[0]


FORUM = {**GOOD, "id": "forum-example-1",
         "source": "https://discuss.pytorch.org/t/nccl-error-on-two-nodes/123456",
         "repo": "discuss.pytorch.org/distributed",
         "confirmed_by": {"who": "reporter", "author": "asker", "role": "reporter",
                          "url": "https://discuss.pytorch.org/t/nccl-error-on-two-nodes/123456/4",
                          "quote": "replacing the cable fixed it"}}


def test_a_forum_thread_is_filed_under_its_site_and_confirmed_there(tmp_path: Path) -> None:
    assert parse_incident(yaml.safe_dump(FORUM)).repo == "discuss.pytorch.org/distributed"
    with pytest.raises(Exception, match="filed as '<host>/<forum section>'"):
        parse_incident(yaml.safe_dump({**FORUM, "repo": "pytorch/pytorch"}))
    elsewhere = {**FORUM["confirmed_by"], "url": "https://github.com/NVIDIA/nccl/issues/1"}
    with pytest.raises(Exception, match=r"stands on discuss\.pytorch\.org"):
        parse_incident(yaml.safe_dump({**FORUM, "confirmed_by": elsewhere}))
    # GitHub threads keep their `owner/name`, whatever the confirmation's site (a release commit)
    assert parse_incident(yaml.safe_dump({**GOOD, "confirmed_by": elsewhere})).repo == "NVIDIA/nccl"
    # `knowledge check` names the file and the one-line reason, and goes on with the rest
    (tmp_path / "forum-example-1.yaml").write_text(
        yaml.safe_dump({**FORUM, "repo": "pytorch/pytorch"}), "utf-8")
    (tmp_path / "nccl-example-1.yaml").write_text(yaml.safe_dump(GOOD), "utf-8")
    incidents, problems = check_incidents(tmp_path)
    assert [i.id for i in incidents] == ["nccl-example-1"]
    assert any(p.startswith("forum-example-1.yaml") and "<forum section>" in p for p in problems)
