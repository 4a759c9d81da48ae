"""`ncclbot knowledge check`: every defect in the knowledge base, named by file and field."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml
from pydantic import ValidationError

from bot.knowledge.cards import Card, card_files, parse_card, taxonomy_path

SHARED_TAXONOMY_IDS_NOTE = "knowledge/taxonomy.yaml must keep the ids of the shared taxonomy"


def default_fixtures_dir() -> Path | None:
    here = Path.cwd() / "tests" / "fixtures" / "cases"
    return here if here.is_dir() else None


def load_fixture_cases(directory: Path) -> list[tuple[Path, dict]]:
    cases = []
    for path in sorted(directory.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            cases.append((path, data))
    return cases


def check_all(fixtures: Path | None = None) -> tuple[list[str], int]:
    """Validate cards, taxonomy and (when available) fixtures. Returns (problems, card count)."""
    problems: list[str] = []
    cards: list[tuple[Path, Card]] = []
    try:
        tax = yaml.safe_load(taxonomy_path().read_text(encoding="utf-8"))
        ids = [c["id"] for c in tax["categories"]]
        if len(ids) != len(set(ids)):
            problems.append(f"taxonomy.yaml: duplicate category ids ({SHARED_TAXONOMY_IDS_NOTE})")
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        problems.append(f"taxonomy.yaml: unreadable ({exc})")
    for path in card_files():
        try:
            card = parse_card(path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"]) or "(card)"
                problems.append(f"{path.name}: {loc}: {err['msg']}")
            continue
        except Exception as exc:  # noqa: BLE001 - yaml errors and the like
            problems.append(f"{path.name}: {exc}")
            continue
        if card.id != path.stem:
            problems.append(f"{path.name}: id: '{card.id}' does not match the file name")
        cards.append((path, card))
    for field, key in (
        ("id", lambda c: c.id),
        ("title.en", lambda c: c.title.en.lower()),
        ("title.zh", lambda c: c.title.zh),
    ):
        counts = Counter(key(c) for _, c in cards)
        for path, card in cards:
            if counts[key(card)] > 1:
                problems.append(f"{path.name}: {field}: duplicate '{key(card)}'")
    fixtures = fixtures or default_fixtures_dir()
    if fixtures is not None:
        problems.extend(check_fixtures([c for _, c in cards], fixtures))
    return problems, len(cards)


def check_fixtures(cards: list[Card], directory: Path) -> list[str]:
    """Each card's signatures match its own fixtures; decisive ones stay off unrelated ones."""
    problems: list[str] = []
    by_id = {c.id: c for c in cards}
    cases = load_fixture_cases(directory)
    healthy = sorted((directory.parent / "healthy").glob("*.log"))
    for path, case in cases:
        card = by_id.get(str(case.get("card")))
        if card is None:
            problems.append(
                f"{directory.name}/{path.name}: card: unknown card '{case.get('card')}'"
            )
            continue
        lines = str(case.get("log", "")).splitlines()
        if card.signatures and not any(
            s.regex.search(line) for s in card.signatures for line in lines
        ):
            problems.append(f"{card.id}.yaml: signatures: none matches its fixture {path.name}")
    for card in cards:
        accepted = {card.category, *card.also}
        for path, case in cases:
            cats = {case.get("category"), *(case.get("secondary") or [])}
            if case.get("card") == card.id or cats & accepted:
                continue
            lines = str(case.get("log", "")).splitlines()
            for sig in card.signatures:
                if sig.decisive and any(sig.regex.search(line) for line in lines):
                    problems.append(
                        f"{card.id}.yaml: signatures.{sig.name}: decisive signature fires "
                        f"on unrelated fixture {path.name}"
                    )
        for path in healthy:
            text = path.read_text(encoding="utf-8", errors="replace")
            for sig in card.signatures:
                if sig.decisive and any(sig.regex.search(line) for line in text.splitlines()):
                    problems.append(
                        f"{card.id}.yaml: signatures.{sig.name}: decisive signature fires "
                        f"on healthy log {path.name}"
                    )
    return problems
