"""Past incidents by question: which real incidents was a question like this asked about?
(pure)

Every incident of the corpus carries the question a user would ask about it, in English and
Chinese, beside its title and what fixed it. A question without a log is compared with
those texts (sublinear TF-IDF over the retrieval tokenizer's tokens, so identifiers and
Chinese words both count; cosine), and the k nearest incidents vote for their categories
as the log channel's neighbours do (`nearest.category_votes`). `ask` adds the vote to the
card retrieval's evidence; the weight is chosen by grouped cross-validation over the
corpus's own questions (`benchmarks/eval_cases.py --questions`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from bot.diagnosis.nearest import Doc, Neighbour
from bot.knowledge.incidents import Incident
from bot.retrieval.tokenize import tokenize


def incident_text(incident: Incident) -> str:
    """What a question is compared with: the thread's title, the questions and the fix."""
    return "\n".join(t for t in (incident.title, incident.question, incident.question_zh,
                                 incident.resolution) if t)


class QuestionIndex:
    """Sublinear TF-IDF vectors of the incidents' texts; cosine nearest neighbours."""

    def __init__(self, incidents: Sequence[Incident]) -> None:
        self.docs = [Doc(f"incident:{i.id}", i.category, tuple(i.secondary), (), incident=i)
                     for i in incidents]
        counts = [Counter(tokenize(incident_text(i))) for i in incidents]
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        n = max(len(self.docs), 1)
        self.idf = {t: math.log((1 + n) / (1 + d)) + 1.0 for t, d in df.items()}
        self.postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for i, c in enumerate(counts):
            for t, w in self._vector(c).items():
                self.postings[t].append((i, w))

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        vec = {t: (1.0 + math.log(c)) * self.idf[t] for t, c in counts.items() if t in self.idf}
        norm = math.sqrt(sum(w * w for w in vec.values())) or 1.0
        return {t: w / norm for t, w in vec.items()}

    def nearest(self, question: str, k: int = 8,
                exclude: Callable[[Incident], bool] | None = None) -> list[Neighbour]:
        """The k incidents whose texts are closest to `question`, best first."""
        sims: dict[int, float] = defaultdict(float)
        for t, w in self._vector(Counter(tokenize(question))).items():
            for i, dw in self.postings.get(t, ()):
                sims[i] += w * dw
        out = []
        for i, score in sorted(sims.items(), key=lambda kv: -kv[1]):
            inc = self.docs[i].incident
            if score <= 0 or (exclude is not None and inc is not None and exclude(inc)):
                continue
            out.append(Neighbour(self.docs[i], score))
            if len(out) == k:
                break
        return out
