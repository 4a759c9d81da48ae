"""`ncclbot knowledge check`: every defect in the knowledge base, named by file and field.

Cards: the strict schema, unique ids and titles, a quoted basis (from one of the card's own
sources) for the root cause and every step, a stated cost on steps that trade performance
for a workaround, GitHub file links pinned to a tag or commit (not a branch), and each
signature matching the logs of the incidents that name its card.
Incidents: the strict schema, unique ids and sources, a `confirmed_by` that says where the
quote stands (`url`), who wrote it (`author`) and their role; `facts` that answer real deciding
questions with one of their answers, each quoting the reporter's words (question, hardware,
log; never the resolution); a sealed list that names real,
dated ids, lists every undated incident as left out, and holds no thread a card cites.
Healthy logs: each one listed in `knowledge/healthy/index.yaml` with its source.
Decisive signatures are measured on the corpus by `ncclbot knowledge signatures`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from bot.knowledge.cards import (
    HEALTHY_INDEX,
    Card,
    card_files,
    healthy_index,
    knowledge_dir,
    parse_card,
    taxonomy_path,
)
from bot.knowledge.incidents import (
    SEALED_FILE,
    Incident,
    Sealed,
    incident_files,
    incidents_dir,
    load_sealed,
    parse_incident,
    thread_key,
)

#: Cards not yet re-checked against their sources (claims without a quoted basis). The list
#: only shrinks: a card missing from it must have a basis for every claim.
AWAITING_FILE = "awaiting-review.txt"

SHARED_TAXONOMY_IDS_NOTE = "knowledge/taxonomy.yaml must keep the ids of the shared taxonomy"

#: Steps that switch a fast path off or weaken isolation: they must say what that costs.
COSTLY_STEP = re.compile(
    r"NCCL_(?:P2P|IB|SHM|NET_GDR|COLLNET)_DISABLE=1|NCCL_(?:NVLS|CUMEM|COLLNET)_ENABLE=0|"
    r"NCCL_P2P_LEVEL=|iommu=(?:off|pt)|pci=noacs|ECAP_ACS|--privileged|NCCL_ALGO=|NCCL_PROTO=",
)


#: A GitHub file link that names a branch, not a tag or commit: the quoted text can move.
UNPINNED_LINK = re.compile(
    r"https://(?:github\.com/[^/\s]+/[^/\s]+/(?:blob|tree)|raw\.githubusercontent\.com/[^/\s]+"
    r"/[^/\s]+)/(?:main|master|HEAD|develop|dev|trunk|gh-pages)/")


@dataclass
class CheckResult:
    problems: list[str] = field(default_factory=list)
    #: what a person may want to add, never a defect (incidents without `title_zh` or
    #: `resolution_zh`)
    warnings: list[str] = field(default_factory=list)
    cards: int = 0
    incidents: int = 0


def _errors(name: str, exc: Exception) -> list[str]:
    if isinstance(exc, ValidationError):
        return [f"{name}: {'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['msg']}"
                for e in exc.errors()]
    return [f"{name}: {exc}"]


def _load(files: list[Path], parse: Callable[[str], object]
          ) -> tuple[list[tuple[Path, object]], list[str]]:
    ok, problems = [], []
    for path in files:
        try:
            ok.append((path, parse(path.read_text(encoding="utf-8"))))
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            problems.extend(_errors(path.name, exc))
    return ok, problems


def awaiting_review() -> set[str]:
    path = knowledge_dir() / AWAITING_FILE
    if not path.is_file():
        return set()
    return {line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8")
            .splitlines()} - {""}


def claim_problems(card: Card) -> list[str]:
    """Claims of a card without a quoted basis from its own sources; costly steps without
    their cost."""
    out = []
    own = {u.rstrip("/") for u in card.source_urls}
    for where, basis in card.claims():
        if not basis:
            out.append(f"{card.id}.yaml: {where}: no basis (a source URL and a verbatim quote)")
        for b in basis:
            if str(b.source).rstrip("/") not in own:
                out.append(f"{card.id}.yaml: {where}: basis source {b.source} is not one of "
                           "the card's sources")
    for i, step in enumerate(card.remediation, 1):
        if COSTLY_STEP.search(step.en) and not step.cost:
            out.append(f"{card.id}.yaml: remediation[{i}]: a step that costs performance must "
                       "say what it costs (`cost`)")
    return out


def unpinned_links(card: Card) -> list[str]:
    """The card's GitHub file links (sources, bases, signature proofs) that name a branch."""
    urls = [*card.source_urls, *(str(b.source) for _, basis in card.claims() for b in basis),
            *(str(p.source) for s in card.signatures for p in s.proof)]
    return sorted({u for u in urls if UNPINNED_LINK.match(u)})


def check_cards(require_basis: bool = True) -> tuple[list[Card], list[str]]:
    loaded, problems = _load(card_files(), parse_card)
    cards: list[tuple[Path, Card]] = [(p, c) for p, c in loaded if isinstance(c, Card)]
    awaiting = awaiting_review()
    for path, card in cards:
        if card.id != path.stem:
            problems.append(f"{path.name}: id: '{card.id}' does not match the file name")
        problems.extend(f"{path.name}: {url}: names a branch; pin the link to a tag or commit "
                        "where the quoted text stands (scripts/verify_quotes.py --pin)"
                        for url in unpinned_links(card))
        if not require_basis:
            continue
        if card.id in awaiting:
            if not claim_problems(card):
                problems.append(f"{path.name}: every claim has a basis now: remove '{card.id}' "
                                f"from knowledge/{AWAITING_FILE}")
            continue
        problems.extend(claim_problems(card))
    known = {c.id for _, c in cards}
    problems.extend(f"{AWAITING_FILE}: no card '{cid}'" for cid in sorted(awaiting - known))
    keys: tuple[tuple[str, Callable[[Card], str]], ...] = (
        ("id", lambda c: c.id),
        ("title.en", lambda c: c.title.en.lower()),
        ("title.zh", lambda c: c.title.zh),
    )
    for name, key in keys:
        counts = Counter(key(c) for _, c in cards)
        problems.extend(f"{path.name}: {name}: duplicate '{key(card)}'"
                        for path, card in cards if counts[key(card)] > 1)
    return [c for _, c in cards], problems


def check_incidents(directory: Path | None = None) -> tuple[list[Incident], list[str]]:
    files = [p for p in incident_files(directory) if p.name != SEALED_FILE]
    loaded, problems = _load(files, parse_incident)
    incidents: list[tuple[Path, Incident]] = [(p, i) for p, i in loaded
                                              if isinstance(i, Incident)]
    ids = Counter(i.id for _, i in incidents)
    sources = Counter(i.url.rstrip("/").lower() for _, i in incidents)
    for path, inc in incidents:
        conf = inc.confirmed_by
        for name, value, what in (("url", conf.url, "the comment's thread or the PR where the "
                                   "quote stands"),
                                  ("author", conf.author, "the handle of who wrote the quote"),
                                  ("role", conf.role, "reporter | maintainer | commenter | "
                                   "pr-author")):
            if value is None:
                problems.append(f"{path.name}: confirmed_by.{name}: missing ({what})")
        if ids[inc.id] > 1:
            problems.append(f"{path.name}: id: duplicate '{inc.id}'")
        if sources[inc.url.rstrip("/").lower()] > 1:
            problems.append(f"{path.name}: source: another incident has {inc.url}")
    try:
        sealed = load_sealed(directory)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.extend(_errors(SEALED_FILE, exc))
        sealed = None
    if sealed is not None:
        problems.extend(sealed_problems(sealed, [i for _, i in incidents]))
    return [i for _, i in incidents], problems


def sealed_problems(sealed: Sealed, incidents: list[Incident]) -> list[str]:
    """Sealed ids are real and dated; every undated incident is listed as left out."""
    problems = []
    by_id = {i.id: i for i in incidents}
    missing = sorted(set(sealed.ids) - set(by_id))
    if missing:
        problems.append(f"{SEALED_FILE}: ids: no incident {missing[:5]}")
    undated_sealed = sorted(i for i in sealed.ids if i in by_id and by_id[i].date is None)
    if undated_sealed:
        problems.append(f"{SEALED_FILE}: ids: sealed incidents without a date {undated_sealed[:5]}")
    undated = {i.id for i in incidents if i.date is None}
    listed = set(sealed.undated)
    if undated - listed:
        problems.append(f"{SEALED_FILE}: undated: incidents without a date must be listed as "
                        f"left out of the sealed pool: {sorted(undated - listed)[:5]}")
    if listed - undated:
        problems.append(f"{SEALED_FILE}: undated: {sorted(listed - undated)[:5]} have a date "
                        "or no file; drop them from the list")
    return problems


def held_out_problems(cards: list[Card], incidents: list[Incident],
                      sealed: Sealed | None) -> list[str]:
    """A sealed incident's thread must not be a source of any card (it would not be held out)."""
    if sealed is None:
        return []
    citing: dict[str, list[str]] = {}
    for card in cards:
        for url in card.source_urls:
            citing.setdefault(thread_key(url), []).append(card.id)
    ids = set(sealed.ids)
    return [f"{SEALED_FILE}: {inc.id}: its thread {inc.url} is a source of card(s) "
            f"{citing[thread_key(inc.url)]}; a sealed incident must be held out"
            for inc in incidents if inc.id in ids and thread_key(inc.url) in citing]


def check_card_incidents(cards: list[Card], incidents: list[Incident]) -> list[str]:
    """Each card's signatures match at least one log of the incidents that name the card."""
    problems = []
    by_card: dict[str, list[Incident]] = {}
    known = {c.id for c in cards}
    for inc in incidents:
        if inc.card is not None:
            if inc.card not in known:
                problems.append(f"incidents/{inc.id}.yaml: card: unknown card '{inc.card}'")
            by_card.setdefault(inc.card, []).append(inc)
    for card in cards:
        mine = by_card.get(card.id, [])
        if card.signatures and mine and not any(
            s.regex.search(line) for s in card.signatures
            for inc in mine for line in inc.log.splitlines()
        ):
            problems.append(f"{card.id}.yaml: signatures: none matches the log of its "
                            f"incident(s) {[i.id for i in mine][:3]}")
    return problems


def check_healthy(folder: Path | None = None) -> list[str]:
    """Every healthy log has its origin in `healthy/index.yaml`, and every entry its log."""
    folder = folder or knowledge_dir() / "healthy"
    try:
        index = healthy_index(folder)
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return _errors(f"healthy/{HEALTHY_INDEX}", exc)
    listed = [e.file for e in index.logs]
    logs = {p.name for p in folder.glob("*.log")}
    problems = [f"healthy/{name}: no entry in {HEALTHY_INDEX} (where does it come from?)"
                for name in sorted(logs - set(listed))]
    problems += [f"healthy/{HEALTHY_INDEX}: {name}: no such log" for name in
                 sorted(set(listed) - logs)]
    problems += [f"healthy/{HEALTHY_INDEX}: {name}: listed twice" for name in
                 sorted({n for n in listed if listed.count(n) > 1})]
    problems += [f"healthy/{HEALTHY_INDEX}: {e.file}: {e.url}: names a branch; pin it to a "
                 "commit" for e in index.logs if e.url and UNPINNED_LINK.match(str(e.url))]
    return problems


def _without(missing: list[str], what: str) -> list[str]:
    """One warning naming the incidents in `missing` (the first 10), or none."""
    if not missing:
        return []
    shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10
                                       else "")
    return [f"{len(missing)} incident(s) without {what}: {shown}"]


def untitled_zh(incidents: list[Incident]) -> list[str]:
    """One warning naming the incidents without `title_zh` (a Chinese answer then names the
    thread and its cause instead), or none."""
    return _without(sorted(i.id for i in incidents if not i.title_zh),
                    "title_zh (the title in Chinese, one line after title:)")


def unresolved_zh(incidents: list[Incident]) -> list[str]:
    """One warning naming the incidents without `resolution_zh` (a Chinese answer then leaves
    the fix to the thread's link), or none."""
    return _without(sorted(i.id for i in incidents if not i.resolution_zh),
                    "resolution_zh (what fixed it in Chinese, one line after resolution:)")


def check_all(directory: Path | None = None, require_basis: bool = True) -> CheckResult:
    """Validate taxonomy, cards, incidents and the index of the healthy logs."""
    result = CheckResult()
    try:
        tax = yaml.safe_load(taxonomy_path().read_text(encoding="utf-8"))
        ids = [c["id"] for c in tax["categories"]]
        if len(ids) != len(set(ids)):
            result.problems.append(
                f"taxonomy.yaml: duplicate category ids ({SHARED_TAXONOMY_IDS_NOTE})")
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        result.problems.append(f"taxonomy.yaml: unreadable ({exc})")
    cards, problems = check_cards(require_basis)
    result.problems += problems
    incidents, problems = check_incidents(directory or incidents_dir())
    result.problems += problems
    result.problems += check_card_incidents(cards, incidents)
    result.warnings += untitled_zh(incidents)
    result.warnings += unresolved_zh(incidents)
    try:
        sealed = load_sealed(directory or incidents_dir())
    except Exception:  # noqa: BLE001 - already reported by check_incidents
        sealed = None
    result.problems += held_out_problems(cards, incidents, sealed)
    result.problems += check_healthy()
    result.cards, result.incidents = len(cards), len(incidents)
    return result
