"""Each entity's nearest same-type names: the swap rule for vocabularies without trees or co-occurrence.

An entity swap should go to a closely related entity (another drug of the class, another disease of the
family). MeSH trees say which (siblings), and the indexed records say which entities appear together
(co-occurrence); a descriptor known only by name (refkit.mesh_names) and absent from the indexed records
has neither, and ranking the other same-type entities by name alone would pick "Abdominal Neoplasms"
for "Abdomen, Acute". Here every name of a rewritten type is embedded with the bundled MiniLM (the
natural reading of inverted headings, each vector independent of its batch, so the table is
reproducible) and each entity keeps its `RELATED_KEPT` nearest same-type names by cosine similarity,
in the lexicon's `related` column as `name=similarity x 1000`. The names' vectors are kept between runs
(refkit.vector_cache), so all of MeSH is embedded once per machine. Left out: names nested in each other
word for word ("Asthma" / "Asthma, Exercise-Induced": likely ancestor and descendant) and names at or
above `SAME_CONCEPT`, which on MeSH names are mostly one concept under two names ("Influenza, Human" /
"Human Influenza"), or a concept and its broader or narrower one (Depression / Depressive Disorder
0.81, Asthma / Status Asthmaticus 0.74).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import numpy as np

from refkit.lexicon import REWRITTEN_TYPES, Entity, Lexicon, natural_name
from refkit.vector_cache import TextVectors
from refkit.vector_cache import shared as shared_text_vectors

RELATED_KEPT = 10
SAME_CONCEPT = 0.70
_WORD = re.compile(r"\w+")


def name_words(name: str) -> frozenset[str]:
    return frozenset(_WORD.findall(name.casefold()))


def nested_names(a: str, b: str) -> bool:
    """Does one name hold every word of the other ("Asthma" in "Asthma, Aspirin-Induced")?"""
    words_a, words_b = name_words(a), name_words(b)
    return bool(words_a and words_b) and (words_a <= words_b or words_b <= words_a)


def add_related(lexicon: Lexicon, progress: Callable[[int], None] | None = None, block: int = 1024,
                vectors: TextVectors | None = None) -> None:  # fmt: skip
    """Fill each rewritten-type entity's `related` (in place); the names' vectors come from `vectors`
    (refkit.vector_cache)."""
    typed = [e for e in lexicon.entities.values() if e.type in REWRITTEN_TYPES]
    if not typed:
        return
    typed.sort(key=lambda e: e.key)
    vectors = (vectors or shared_text_vectors()).matrix([natural_name(e) for e in typed])
    for kind in REWRITTEN_TYPES:
        rows = [i for i, e in enumerate(typed) if e.type == kind]
        if not rows:
            continue
        members, matrix = [typed[i] for i in rows], vectors[rows]
        for start in range(0, len(members), block):
            similarity = matrix[start : start + block] @ matrix.T
            for offset, scores in enumerate(similarity):
                entity = members[start + offset]
                entity.related = _nearest(entity, members, scores)
            if progress:
                progress(min(block, len(members) - start))


def _nearest(entity: Entity, members: list[Entity], scores: np.ndarray) -> Counter:
    kept: Counter = Counter()
    for index in np.argsort(-scores, kind="stable"):
        other, score = members[index], float(scores[index])
        if other is entity or score >= SAME_CONCEPT or nested_names(entity.name, other.name):
            continue
        kept[other.name] = int(round(score * 1000))
        if len(kept) == RELATED_KEPT:
            break
    return kept


class NameSimilarity:
    """MiniLM cosine similarity of two entities' natural names, for swap candidates the `related` column
    does not score (siblings, co-occurring entities). Vectors come from the process's refkit.vector_cache
    store, opened on first use."""

    def __call__(self, a: Entity, b: Entity) -> float:
        if b.name in a.related:
            return a.related[b.name] / 1000
        if a.name in b.related:
            return b.related[a.name] / 1000
        first, second = shared_text_vectors().matrix([natural_name(a), natural_name(b)])
        return round(float(first @ second), 4)

    def many(self, a: Entity, others: list[Entity]) -> list[float]:
        """`self(a, b)` for each of `others`, the names not yet stored embedded in one batch."""
        shared_text_vectors().matrix([natural_name(e) for e in [a, *others]])
        return [self(a, b) for b in others]
