"""Grounding checks on the model's answer (pure): drop or repair what fails, and say so.

- a cited card must have been returned by a tool in this conversation;
- a category must be a taxonomy id (repaired to the card's category when it is not);
- an evidence line must exist in a log analyze_log returned in this conversation
  (`analyzed_files`, `line_at`) and the quote must really match it (at least 12
  characters of it, or most of its words); a wrong line number is repaired when the text
  is among the lines analyze_log reported; every replacement or drop gets a note;
- a remediation step must point at an existing step of a returned card;
- a probe suggestion must name a known preset and a node of the inventory;
- the explanation may not name a card no tool returned (the id is removed, with a note);
- nor a node it was never shown: a name shaped like the cluster's node names (or a host
  or IP placeholder), and any other host-like name (an IPv4/IPv6 literal, a common node
  name shape such as `dgx01` or `ip-10-0-0-1`, an FQDN), that is neither in the inventory
  nor in anything the model was sent (the question, the logs, tool outputs) is removed,
  with a note.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from bot.agent.answer_model import (
    AgentAnswer,
    EvidenceRef,
    ProbeSuggestion,
    RemediationStep,
    RootCauseClaim,
)
from bot.agent.redact_rules import shaped_names
from bot.answering.contract import Dropped
from bot.knowledge.cards import Card

LineLookup = Callable[[str, int], "str | None"]
#: A quote shorter than this must be the whole line.
MIN_QUOTE = 12
#: Otherwise: this share of the line's words (and of the quote's) must be shared.
MIN_WORD_SHARE = 0.6
UNVERIFIED_CARD = "[unverified card]"
UNVERIFIED_NODE = "[unverified node]"
#: A host-name-like word: letters first, then letters, digits, '-', '_' or dotted labels.
_HOST_WORD = re.compile(r"(?<![\w.-])[A-Za-z][\w-]*(?:\.[A-Za-z0-9-]+)*(?![\w-])")
_HOST_PLACEHOLDER = r"HOST_\d+"
_IP_PLACEHOLDER = re.compile(r"(?<![\w.-])IP_\d+(?![\w-])")


@dataclass(frozen=True)
class NodeNames:
    """What the explanation may call a node. `known`: the inventory's node names as the
    model knows them; `naming`: real host names (the inventory's, the logs') whose shape a
    node name has (digit runs vary: gpu-node07 -> gpu-node<digits>); `seen`: everything the
    model was sent, as it was sent (placeholders and all)."""

    known: Collection[str]
    naming: Collection[str]
    seen: str = ""

    def shape(self) -> re.Pattern[str]:
        """One pattern for every node-name shape (host placeholders always included)."""
        shapes = {_HOST_PLACEHOLDER}
        for name in self.naming:
            for part in {name, name.split(".", 1)[0]}:
                if re.search(r"\d", part) and part[:1].isalpha():
                    shapes.add("".join(r"\d+" if piece.isdigit() else re.escape(piece)
                                       for piece in re.split(r"(\d+)", part)))
        return re.compile("|".join(sorted(shapes)), re.IGNORECASE)


@dataclass
class Outcome:
    answer: AgentAnswer
    notes: list[str] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    @property
    def grounded(self) -> bool:
        """Something cited survived: root causes or citations."""
        return bool(self.answer.root_causes or self.answer.citations)


def _norm(text: str) -> str:
    return " ".join(text.split())


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _in_order(pieces: list[str], text: str) -> bool:
    at = 0
    for piece in pieces:
        found = text.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _matches(claimed: str, actual: str) -> bool:
    """Whether a quote really is (part of) the line: the whole line, a substring of at least
    MIN_QUOTE characters (or such pieces, in order, around `...`), or most of the line's
    words (and mostly words of the line)."""
    c, a = _norm(claimed), _norm(actual)
    if not c or not a:
        return False
    if c == a or (len(c) >= MIN_QUOTE and c in a) or (len(a) >= MIN_QUOTE and a in c):
        return True
    pieces = [p for p in re.split(r"\s*(?:\.\.\.|\u2026)\s*", c) if p]
    if len(pieces) > 1 and sum(map(len, pieces)) >= MIN_QUOTE and _in_order(pieces, a):
        return True  # "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried ... free."
    cw, aw = _words(c), _words(a)
    if len(aw) < 3 or not cw:
        return False
    shared_line = sum(w in set(cw) for w in aw) / len(aw)
    shared_quote = sum(w in set(aw) for w in cw) / len(cw)
    return shared_line >= MIN_WORD_SHARE and shared_quote >= MIN_WORD_SHARE


def check_evidence(ev: EvidenceRef, line_at: LineLookup,
                   known: Mapping[str, Mapping[str, str]],
                   files: Collection[str] | None = None
                   ) -> tuple[EvidenceRef | None, str | None]:
    """The evidence as it stands in the log (maybe repaired), or None, plus a note.

    `files`: the logs analyze_log returned (None: any file `line_at` can read)."""
    where = f"{ev.file}:{ev.line}"
    readable = files is None or ev.file in files
    actual = line_at(ev.file, ev.line) if readable else None
    if actual is not None and _matches(ev.text, actual):
        reported = known.get(ev.file, {}).get(str(ev.line))
        same = _norm(ev.text) in (_norm(actual), _norm(reported or ""))
        note = None if same else f"evidence {where}: the quoted text was replaced by the log line"
        return EvidenceRef(file=ev.file, line=ev.line, text=actual), note
    for file, lines in known.items():
        for ln, text in lines.items():
            if _matches(ev.text, text):
                return (EvidenceRef(file=file, line=int(ln), text=text),
                        f"repaired evidence {where} to {file}:{ln}")
    if not readable:
        return None, (f"dropped evidence {where}: {ev.file} is not a log analyze_log returned "
                      "in this conversation")
    if actual is None:
        return None, f"dropped evidence {where}: no such line in the analyzed logs"
    return None, f"dropped evidence {where}: the quoted text does not match that line"


def _check_root_cause(rc: RootCauseClaim, out: Outcome, cards: Mapping[str, Card],
                      categories: Collection[str], line_at: LineLookup,
                      known: Mapping[str, Mapping[str, str]],
                      files: Collection[str] | None) -> RootCauseClaim | None:
    card = cards.get(rc.card)
    if card is None:
        out.notes.append(f"dropped root cause citing card {rc.card!r}: no tool returned it "
                         "in this conversation")
        out.dropped.append(Dropped(kind="root_cause", card=rc.card, reason="card not retrieved"))
        return None
    category = rc.category
    if category not in categories or category not in (card.category, *card.also):
        out.notes.append(f"repaired category {category!r} of {card.id} to {card.category!r}")
        out.dropped.append(Dropped(kind="category", card=card.id, value=category))
        category = card.category
    evidence: list[EvidenceRef] = []
    for ev in rc.evidence:
        fixed, note = check_evidence(ev, line_at, known, files)
        if note:
            out.notes.append(note)
        if fixed is None:
            out.dropped.append(Dropped(kind="evidence", file=ev.file, line=ev.line))
        elif all((e.file, e.line) != (fixed.file, fixed.line) for e in evidence):
            evidence.append(fixed)
    confidence = min(1.0, max(0.0, rc.confidence))
    if confidence != rc.confidence:
        out.notes.append(f"clamped confidence of {card.id} to {confidence}")
    return RootCauseClaim(category=category, card=card.id, confidence=confidence,
                          evidence=evidence, why=rc.why)


def validate_answer(answer: AgentAnswer, *, cards: Mapping[str, Card],
                    categories: Collection[str], line_at: LineLookup,
                    known_evidence: Mapping[str, Mapping[str, str]] | None = None,
                    presets: Collection[str] = (),
                    analyzed_files: Collection[str] | None = None,
                    known_nodes: Collection[str] | None = None,
                    all_card_ids: Collection[str] = (),
                    node_names: NodeNames | None = None) -> Outcome:
    """Check every claim of `answer` against what tools returned; see the module doc.

    `cards`: the cards tools returned; `all_card_ids`: every card id (to find ids the
    explanation names without a tool having returned them); `known_nodes`: the inventory's
    node names as the model knows them (None: not checked); `node_names`: what the
    explanation may call a node (None: not checked)."""
    out = Outcome(answer=AgentAnswer(explanation=answer.explanation))
    known = known_evidence or {}
    root_causes: list[RootCauseClaim] = []
    for rc in answer.root_causes:
        fixed = _check_root_cause(rc, out, cards, categories, line_at, known, analyzed_files)
        if fixed is not None and all(r.card != fixed.card for r in root_causes):
            root_causes.append(fixed)
    root_causes.sort(key=lambda r: r.confidence, reverse=True)
    steps = _check_steps(answer, out, cards, root_causes)
    citations: list[str] = []
    for cid in [*answer.citations, *(r.card for r in root_causes), *(s.card for s in steps)]:
        if cid not in cards:
            if cid in answer.citations:
                out.notes.append(f"dropped citation {cid!r}: no tool returned it")
                out.dropped.append(Dropped(kind="citation", card=cid))
        elif cid not in citations:
            citations.append(cid)
    probes = _check_probes(answer, out, presets, known_nodes)
    unverified = ({*all_card_ids, *(d.card for d in out.dropped if d.card)}
                  - set(cards))
    explanation = _strip_card_ids(answer.explanation, unverified, out)
    if node_names is not None:
        explanation = _strip_unknown_nodes(explanation, node_names, out)
    out.answer = AgentAnswer(explanation=explanation, root_causes=root_causes,
                             remediation=steps, citations=citations, probes=probes)
    return out


def _check_steps(answer: AgentAnswer, out: Outcome, cards: Mapping[str, Card],
                 root_causes: list[RootCauseClaim]) -> list[RemediationStep]:
    steps: list[RemediationStep] = []
    for st in answer.remediation:
        card = cards.get(st.card)
        if card is None or not 1 <= st.step <= len(card.remediation.en):
            out.notes.append(f"dropped remediation step {st.card}#{st.step}: not a step of a "
                             "card returned in this conversation")
            out.dropped.append(Dropped(kind="remediation", card=st.card, step=st.step))
        elif all((s.card, s.step) != (st.card, st.step) for s in steps):
            steps.append(st)
    if not steps and root_causes:
        top = cards[root_causes[0].card]
        steps = [RemediationStep(card=top.id, step=i + 1) for i in range(len(top.remediation.en))]
        if answer.remediation:
            out.notes.append(f"remediation replaced by the steps of card {top.id}")
    return steps


def _check_probes(answer: AgentAnswer, out: Outcome, presets: Collection[str],
                  known_nodes: Collection[str] | None) -> list[ProbeSuggestion]:
    probes: list[ProbeSuggestion] = []
    for p in answer.probes:
        if presets and p.preset not in presets:
            out.notes.append(f"dropped probe suggestion {p.preset!r} on {p.node}: unknown preset "
                             f"(known: {', '.join(sorted(presets))})")
            out.dropped.append(Dropped(kind="probe", preset=p.preset, node=p.node))
        elif known_nodes is not None and p.node not in known_nodes:
            out.notes.append(f"dropped probe suggestion {p.preset!r} on {p.node}: not a node of "
                             "the inventory (NCCLBOT_NODES_FILE)")
            out.dropped.append(Dropped(kind="probe", preset=p.preset, node=p.node))
        elif all((q.node, q.preset) != (p.node, p.preset) for q in probes):
            probes.append(p)
    return probes


def _strip_card_ids(text: str, ids: Collection[str], out: Outcome) -> str:
    """The explanation without card ids that no tool returned (each removal noted)."""
    for cid in sorted(ids, key=len, reverse=True):
        rx = re.compile(r"(?<![\w-])" + re.escape(cid) + r"(?![\w-])")
        if rx.search(text):
            text = rx.sub(UNVERIFIED_CARD, text)
            out.notes.append(f"removed card id {cid!r} from the explanation: no tool returned it")
            out.dropped.append(Dropped(kind="explanation_card", card=cid))
    return text


def _strip_unknown_nodes(text: str, nodes: NodeNames, out: Outcome) -> str:
    """The explanation without node names the model made up (each removal noted)."""
    shape = nodes.shape()
    known = set(nodes.known)
    made_up: list[str] = []

    def check(m: re.Match[str]) -> str:
        word = m.group(0)
        if not shape.fullmatch(word) or word in known or _said(word, nodes.seen):
            return word
        if word not in made_up:
            made_up.append(word)
        return UNVERIFIED_NODE

    text = _HOST_WORD.sub(check, text)
    allowed = {*known, *nodes.naming}
    pieces: list[str] = []
    pos = 0
    found = [(m.group(0), *m.span()) for m in _IP_PLACEHOLDER.finditer(text)]
    for word, start, end in sorted([*found, *shaped_names(text)], key=lambda f: f[1]):
        if start < pos or word == UNVERIFIED_NODE or word in allowed or _said(word, nodes.seen):
            continue
        if word not in made_up:
            made_up.append(word)
        pieces += [text[pos:start], UNVERIFIED_NODE]
        pos = end
    text = "".join([*pieces, text[pos:]])
    for word in made_up:
        out.notes.append(f"removed node name {word!r} from the explanation: not a node of the "
                         "inventory, nor named in the question, the logs or a tool's output")
        out.dropped.append(Dropped(kind="explanation_node", node=word))
    return text


def _said(word: str, text: str) -> bool:
    return re.search(r"(?<![\w.-])" + re.escape(word) + r"(?![\w-])", text) is not None
