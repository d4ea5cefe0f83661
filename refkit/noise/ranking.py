"""Stage 5 of refkit noise: which of the candidates that passed every filter a question keeps.

Hard noise is close to the question's situation. Every candidate that passed the filters gets a tier, and a
question keeps the best `per_query` by (tier, the order retrieval met them in), at most one per document:

0. `same-subject`: retrieved for an aspect rewrite, it names the question's subject (the same drug, gene or
   disease in another aspect: CRAB's aspect replacement);
1. `situation`: retrieved for an entity swap, it names the entity the swap put in and something the question
   keeps (another of its entities, one of its own content phrases, or the words of the aspect it asks): the
   swapped-in entity in the question's situation or aspect;
2. `related`: retrieved for a rewrite, related to it by one name or by similarity only;
3. `bare`: a bare definition ("Kearns-Sayre syndrome is a mitochondrial disorder.") or a fragment too short to
   say anything about a situation (`text_kind`): kept only when nothing better passed.

A document (a PubMed record, a book section) gives at most one kept chunk per question: four chunks of one
abstract are one reference, not four.
"""

from __future__ import annotations

import re

TIERS = ("same-subject", "situation", "related", "bare")
FRAGMENT_WORDS = 12  # fewer words than this say too little about any situation
DEFINITION_WORDS = 30  # a one-sentence definition longer than this says more than what the thing is
_SENTENCE_END = re.compile(r"[.!?](?:\s+|$)(?=[A-Z0-9(\"']|$)")
_DEFINES = re.compile(
    r"^[^.;:]{1,120}?\b(?:is|are|was|were|refers to|represents|describes)\s+(?:a|an|the|one of the|one)\b", re.I
)


def text_kind(text: str) -> str:
    """`fragment`, `definition` (one sentence saying what something is), `sentence` or `passage`."""
    words = text.split()
    if len(words) < FRAGMENT_WORDS:
        return "fragment"
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    if len(sentences) <= 1:
        return "definition" if len(words) <= DEFINITION_WORDS and _DEFINES.match(text.strip()) else "sentence"
    return "passage"


def tier(kind: str, rewrite_kind: str, measured: dict) -> int:
    """The candidate's tier (the module's list) from its text kind, its rewrite's kind and what was measured."""
    if kind in ("fragment", "definition"):
        return 3
    names = measured.get("names", {})
    if rewrite_kind == "attribute" and measured.get("names_subject"):
        return 0
    if (
        rewrite_kind == "entity"
        and names.get("put_in")
        and (names.get("kept") or names.get("phrases") or names.get("aspect"))
    ):
        return 1
    return 2


def document_key(reference: dict, meta: dict) -> str:
    """What identifies a candidate's document: its PubMed id where its record gives one, else its corpus and
    document id."""
    pmid = meta.get("pmid") or meta.get("PMID")
    return (
        f"pmid:{pmid}"
        if pmid
        else f"{reference.get('corpus', '')}:{reference.get('doc_id') or reference['snippet_id']}"
    )


def choose(passed: list[dict], per_query: int) -> tuple[list[dict], list[dict]]:
    """(kept, set aside): the best `per_query` by (tier, order), one per document; the rest set aside, each
    with why (`outranked` or `same-document`)."""
    kept, aside, documents = [], [], set()
    for candidate in sorted(passed, key=lambda c: (c["tier"], c["order"])):
        if candidate["document"] in documents:
            aside.append({**candidate, "why": "same-document"})
        elif len(kept) < per_query:
            kept.append(candidate)
            documents.add(candidate["document"])
        else:
            aside.append({**candidate, "why": "outranked"})
    return sorted(kept, key=lambda c: (c["tier"], c["order"])), aside
