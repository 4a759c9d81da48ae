"""A follow-up question in a thread that already has an answer: a short reply to that
question, not the report again (pure).

The reply is made of the sentences that best match the question among what the thread's
answer rests on: its suspect, the root-cause text, remediation and verify steps of its
leading cards (in the question's language). Matching is token overlap weighted by how rare
a token is among those sentences (the retrieval tokenizer, so identifiers such as
`PYTORCH_CUDA_ALLOC_CONF` and Chinese words both count). Nothing matching: say so, and
what to ask or attach instead.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.answering.contract import Answer, Lang
from bot.knowledge.cards import Card
from bot.render.text import sentences, shorten
from bot.retrieval.tokenize import has_cjk, tokenize

MAX_CHARS = 600
MAX_SENTENCES = 3
#: A sentence of the kind the question asks for (a step, a verify step, the cause) counts as
#: much as a few rare shared words.
INTENT_BONUS = 4.0
RELEVANT_SHARE = 0.5
NO_MATCH = {
    "en": "I found nothing in this thread's answer about that. Attach more logs, or ask about "
          "its steps, its cause or how to verify the fix.",
    "zh": "本线程的分析里没有找到相关内容。可以再附上日志，或者问它的步骤、原因、如何验证。",
}
LEAD = {"step": {"en": "Step", "zh": "步骤"}, "verify": {"en": "To verify", "zh": "验证"},
        "cause": {"en": "Why", "zh": "原因"}, "suspect": {"en": "Suspect", "zh": "可疑"}}


@dataclass(frozen=True)
class FollowUp:
    """A short reply and the cards it quotes."""

    text: str
    lang: Lang
    cards: list[str] = field(default_factory=list)
    matched: bool = True


def question_lang(question: str) -> Lang:
    return "zh" if has_cjk(question) else "en"


def candidates(answer: Answer, cards: Mapping[str, Card], lg: Lang
               ) -> list[tuple[str, str, str]]:
    """(kind, card id, sentence) the reply may quote."""
    out: list[tuple[str, str, str]] = []
    for s in answer.diagnosis.suspects[:2]:
        who = " ".join(x for x in (f"rank {s.rank}" if s.rank is not None else "",
                                   s.host or "") if x)
        out.append(("suspect", "", f"{who}: {s.reason}"))
    for rc in answer.root_causes[:2]:
        card = cards.get(rc.card or "")
        if card is None:
            continue
        cause = getattr(card.root_cause, lg)
        out += [("cause", card.id, s.strip()) for s in _sentences(cause) if s.strip()]
        out += [("step", card.id, s) for s in getattr(card.remediation, lg)]
        out += [("verify", card.id, s) for s in getattr(card.verify, lg)]
    return out


def _sentences(text: str) -> list[str]:
    """Sentences, never split inside an IP address, a version or code (`render.text`)."""
    return sentences(text)


#: The question says what was already done ("we already run with --ipc=host").
ALREADY = re.compile(r"\balready\b|\btried\b|\bwe (?:do|did|use|run|set)\b|"
                     r"已经|试过|用过|设置过|加过", re.IGNORECASE)
_TECH = re.compile(r"`([^`]+)`|(--?[\w.-]+(?:=[\w./:-]+)?|[A-Z][A-Z0-9]*_[A-Z0-9_]+(?:=\S+)?)")


def already_done(question: str) -> set[str]:
    """The flags, settings and code the question says were already tried (lower case)."""
    if not ALREADY.search(question):
        return set()
    out = set()
    for m in _TECH.finditer(question):
        token = (m.group(1) or m.group(2) or "").strip().lower()
        if len(token) >= 4:
            out.add(token)
            key = token.split("=", 1)[0]
            if key != token and len(key) >= 4:  # --shm-size=8g also rules out --shm-size=1g
                out.add(key)
    return out


#: What kind of sentence a question asks for, from its wording.
INTENTS = {
    "verify": re.compile(r"verif|confirm|how (do|can|would) (i|we) (know|tell)|验证|确认|怎么知道",
                         re.IGNORECASE),
    "step": re.compile(r"\bfix|what (should|can|do) (i|we) do|how (do|can|to) (i |we )?"
                       r"(solve|resolve|avoid|prevent)|solution|workaround|怎么办|解决|怎么修|"
                       r"怎么处理|如何避免", re.IGNORECASE),
    "cause": re.compile(r"\bwhy\b|\bcause|reason|为什么|原因|为啥|怎么会", re.IGNORECASE),
}


def document_frequencies(cards: Mapping[str, Card], lg: Lang) -> tuple[Counter[str], int]:
    """How many sentences of all the cards (in `lg`) each token occurs in: a token common
    across the knowledge (\"other\", \"其他\") weighs little."""
    df: Counter[str] = Counter()
    n = 0
    for card in cards.values():
        texts = [*_sentences(getattr(card.root_cause, lg)), *getattr(card.remediation, lg),
                 *getattr(card.verify, lg)]
        for t in texts:
            df.update(set(tokenize(t)))
            n += 1
    return df, n


def follow_up(question: str, answer: Answer, cards: Mapping[str, Card]) -> FollowUp:
    """The reply to `question` from the thread's `answer` and its cards."""
    lg = question_lang(question)
    tried = already_done(question)
    pool = [c for c in candidates(answer, cards, lg)
            if not (c[0] == "step" and any(t in c[2].lower() for t in tried))]
    tokens = [Counter(tokenize(text)) for _, _, text in pool]
    df, n = _frequencies(cards, lg)
    n = max(n, 1)
    asked = set(tokenize(question))
    # the first kind the question asks for (verify before fix: "how do I verify the fix")
    wanted = next((kind for kind, pattern in INTENTS.items() if pattern.search(question)), None)
    scored = []
    for i, ((kind, card, text), toks) in enumerate(zip(pool, tokens, strict=True)):
        matched = asked & toks.keys()
        for ident in [t for t in matched if "_" in t]:  # an identifier counts once, not per part
            matched -= set(ident.split("_"))
        score = sum(math.log(1 + n / (1 + df[t])) for t in matched)
        if kind == wanted:
            score += INTENT_BONUS
        if score > 0:
            scored.append((score, i, kind, card, text))
    # the suspect when the question names it; then the sentences about as relevant as the
    # best one (not one shared common word), in the order of the answer
    names = {f"rank {s.rank}" for s in answer.diagnosis.suspects if s.rank is not None} | {
        s.host for s in answer.diagnosis.suspects if s.host}
    named = any(n.lower() in question.lower() for n in names)
    lead = [x for x in scored if x[2] == "suspect"][:1] if named else []
    rest = sorted((x for x in scored if x[2] != "suspect"), key=lambda x: (-x[0], x[1]))
    if not lead and not rest:
        return FollowUp(NO_MATCH[lg], lg, matched=False)
    top = rest[0][0] if rest else 0.0
    best = lead + [x for x in rest if x[0] >= RELEVANT_SHARE * top][:MAX_SENTENCES - len(lead)]
    best.sort(key=lambda x: x[1])
    sep = "：" if lg == "zh" else ": "
    lines = [f"{LEAD[kind][lg]}{sep}{text}" for _, _, kind, _, text in best]
    text = shorten("\n".join(lines), MAX_CHARS)
    used = list(dict.fromkeys(card for *_, card, _ in best if card))
    return FollowUp(text, lg, used)


_FREQUENCIES: dict[tuple[int, str], tuple[Counter[str], int]] = {}


def _frequencies(cards: Mapping[str, Card], lg: Lang) -> tuple[Counter[str], int]:
    key = (hash(tuple(sorted(cards))), lg)
    if key not in _FREQUENCIES:
        _FREQUENCIES[key] = document_frequencies(cards, lg)
    return _FREQUENCIES[key]


def agent_follow_up(answer: Answer, lang: Lang) -> FollowUp:
    """The LLM agent's reply to a follow-up: its explanation, cut to the reply's length."""
    text = shorten(answer.explanation.strip() or answer.summary, MAX_CHARS)
    return FollowUp(text, lang, [c.card for c in answer.citations][:3])

