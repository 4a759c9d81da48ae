"""The knowledge base: strict schema, coverage, and the `ncclbot knowledge` commands."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from bot.knowledge.cards import card_files, load_cards, parse_card
from bot.knowledge.check import check_all
from bot.knowledge.taxonomy import category_ids
from tests.conftest import ROOT

COMMON = ["rank_crashed", "straggler_or_imbalance", "collective_mismatch", "timeout_too_short",
          "rendezvous_failure", "network_interface", "infiniband_roce", "shm_ipc_container"]


def test_every_card_is_valid_and_knowledge_check_is_clean():
    result = check_all()
    assert result.problems == []
    assert result.cards == len(card_files()) >= 60
    assert result.incidents >= 130  # the re-check of issue 29 removed 12 (docs/reviews)


def test_taxonomy_has_exactly_the_shared_ids():
    shared = ROOT.parent / "shared" / "taxonomy.yaml"
    if not shared.exists():
        pytest.skip("../shared/taxonomy.yaml not beside this checkout")
    ids = {c["id"] for c in yaml.safe_load(shared.read_text())["categories"]}
    assert ids == set(category_ids())


def test_category_coverage():
    counts = Counter(c.category for c in load_cards())
    for cid in category_ids() - {"other"}:
        assert counts[cid] >= (4 if cid in COMMON else 2), (cid, counts[cid])


def test_sources_and_languages():
    cards = load_cards()
    assert all(c.sources for c in cards)
    assert sum(len(c.sources) >= 2 for c in cards) / len(cards) >= 0.8
    for c in cards:
        assert len(c.remediation.en) == len(c.remediation.zh) or (c.remediation.en and c.remediation.zh)
        assert any("\u4e00" <= ch <= "\u9fff" for ch in c.title.zh), c.id


def test_seed_writeups_have_cards():
    text = " ".join(" ".join(c.source_urls) for c in load_cards())
    for repo in ("om-ai-lab/VLM-R1", "Lightning-AI", "verl", "huggingface/trl", "OpenRLHF"):
        assert repo.lower() in text.lower(), repo


def _card_yaml(**override) -> str:
    data = yaml.safe_load(card_files()[0].read_text(encoding="utf-8"))
    data.update(override)
    return yaml.safe_dump(data, allow_unicode=True)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"colour": "red"}, "Extra inputs"),
        ({"category": "no_such_category"}, "unknown categories"),
        ({"frameworks": ["cobol"]}, "unknown frameworks"),
        ({"probes": ["reboot"]}, "unknown probes"),
        ({"sources": ["not a url"]}, "URL"),
        ({"signatures": [{"name": "bad", "pattern": "(", "weight": 0.5}]}, "does not compile"),
        ({"signatures": [{"name": "la", "pattern": "(?=x)y", "weight": 0.5}]}, "lookarounds"),
        ({"signatures": [{"name": "nomatch", "pattern": "zzz-never", "weight": 0.5}]}, "matches none"),
        ({"title": {"en": "x", "zh": ""}}, "at least 1 character"),
    ],
)
def test_strict_schema_rejects(override, message):
    with pytest.raises(Exception, match=message):
        parse_card(_card_yaml(**override))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_knowledge_list_json_and_show():
    out = _cli("knowledge", "list", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert {"id", "category", "title", "sources", "remediation"} <= set(rows[0])
    assert rows[0]["remediation"]["zh"]
    only = json.loads(_cli("knowledge", "list", "--category", "shm_ipc_container", "--json").stdout)
    assert only and {r["category"] for r in only} == {"shm_ipc_container"}
    shown = _cli("knowledge", "show", rows[0]["id"], "--lang", "zh")
    assert shown.returncode == 0 and rows[0]["title"]["zh"][:8] in shown.stdout
    missing = _cli("knowledge", "show", rows[0]["id"][:-2])
    assert missing.returncode != 0 and "Did you mean" in missing.stderr + missing.stdout


def test_knowledge_check_names_file_and_field(tmp_path, monkeypatch):
    import bot.knowledge.check as check

    bad = tmp_path / "cards"
    bad.mkdir()
    good = card_files()[0]
    (bad / good.name).write_text(good.read_text(encoding="utf-8").replace("reviewed:", "revieved:"),
                                 encoding="utf-8")
    monkeypatch.setattr(check, "card_files", lambda: sorted(Path(bad).glob("*.yaml")))
    problems = check.check_all(tmp_path / "none").problems
    assert any(p.startswith(good.name) and "revieved" in p for p in problems)


def test_a_github_link_on_a_branch_is_a_defect(tmp_path, monkeypatch):
    import bot.knowledge.check as check

    good = card_files()[0]
    card = parse_card(good.read_text(encoding="utf-8"))
    assert check.unpinned_links(card) == []
    data = yaml.safe_load(good.read_text(encoding="utf-8"))
    branch = "https://github.com/NVIDIA/nccl/blob/master/src/init.cc"
    data["sources"].append(branch)
    data["root_cause"]["basis"] = [{"source": branch, "quote": "a sentence of init.cc"}]
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / good.name).write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    monkeypatch.setattr(check, "card_files", lambda: sorted(folder.glob("*.yaml")))
    problems = check.check_all(tmp_path / "none").problems
    assert any(good.name in p and branch in p and "pin" in p for p in problems)
    tagged = branch.replace("/master/", "/v2.30.7-1/")
    assert not check.UNPINNED_LINK.match(tagged)
    assert check.UNPINNED_LINK.match("https://raw.githubusercontent.com/o/r/main/x.py")


def _claims_card(**override):
    data = yaml.safe_load(card_files()[0].read_text(encoding="utf-8"))
    data.update(override)
    return parse_card(yaml.safe_dump(data, allow_unicode=True))


def test_a_claim_without_basis_or_a_costly_step_without_cost_is_a_defect():
    from bot.knowledge.check import claim_problems

    card = load_cards()[0]
    src = card.source_urls[0]
    basis = [{"source": src, "quote": "a sentence from the source"}]
    good = _claims_card(
        root_cause={"en": "x", "zh": "x", "basis": basis},
        remediation=[{"en": "Set NCCL_P2P_DISABLE=1", "zh": "设置 NCCL_P2P_DISABLE=1",
                      "basis": basis, "cost": "GPU-to-GPU traffic goes through host memory"}],
        verify=[{"en": "v", "zh": "v", "basis": basis}])
    assert claim_problems(good) == []
    bare = _claims_card(root_cause={"en": "x", "zh": "x"},
                        remediation=[{"en": "Set NCCL_P2P_DISABLE=1", "zh": "设置", "basis": basis}],
                        verify=[{"en": "v", "zh": "v",
                                 "basis": [{"source": "https://example.com/other", "quote": "q q q"}]}])
    problems = claim_problems(bare)
    assert any("root_cause: no basis" in p for p in problems)
    assert any("remediation[1]" in p and "cost" in p for p in problems)
    assert any("verify[1]" in p and "not one of the card's sources" in p for p in problems)
    with pytest.raises(Exception, match="English and 1 Chinese"):
        _claims_card(remediation={"en": ["a", "b"], "zh": ["a"]})


def test_cards_awaiting_review_are_listed_and_the_list_only_shrinks(monkeypatch, tmp_path):
    import bot.knowledge.check as check

    cards = load_cards()
    unreviewed = {c.id for c in cards if not c.verified}
    assert check.awaiting_review() == unreviewed  # every unreviewed card is listed, no others
    reviewed = next(c.id for c in cards if c.verified)
    monkeypatch.setattr(check, "awaiting_review", lambda: unreviewed | {reviewed, "ghost-card"})
    problems = check.check_all().problems
    assert any(reviewed in p and "remove" in p for p in problems)
    assert any("ghost-card" in p for p in problems)
    # a card off the list whose claims lost their basis is a defect
    data = yaml.safe_load(card_files()[0].read_text(encoding="utf-8"))
    data["root_cause"].pop("basis", None)
    bare = tmp_path / card_files()[0].name
    bare.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    monkeypatch.setattr(check, "awaiting_review", lambda: unreviewed)
    monkeypatch.setattr(check, "card_files", lambda: [bare])
    assert any("root_cause: no basis" in p for p in check.check_all().problems)
