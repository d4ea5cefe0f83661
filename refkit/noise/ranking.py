"""Stage 5 of refkit noise: which of the candidates that passed every filter a question keeps.

Hard noise is close to the question's situation. Every candidate that passed the filters gets a tier, and a
question keeps the best `per_query` by (tier, the order retrieval met them in), at most one per document:

0. `same-subject`: retrieved for an aspect rewrite, it names the question's subject (the same drug, gene or
   disease in another aspect: CRAB's aspect replacement);
1. `situation`: retrieved for an entity swap, it names the entity the swap put in and something of the question's
   situation (another of its entities, or one of its own content phrases): the swapped-in entity where the
   question sets its own (the words of the aspect asked are not enough: "pexidartinib's mechanism" is another
   drug's mechanism, which a strict reader calls easy);
2. `related`: retrieved for a rewrite, related to it by one name or by similarity only (kept only with
   `related`: the swapped-in entity in another situation reads as easy to a strict reader);
3. `bare`: a bare definition ("Kearns-Sayre syndrome is a mitochondrial disorder."), a one-sentence description
   with no finding ("Dupilumab blocks IL-4 and IL-13 signalling."), a title, or a fragment too short to say
   anything about a situation (`text_kind`): kept only when nothing better passed, and its record says so; and
   only of the question's own subject (an aspect rewrite's): a one-line description of a swapped-in sibling says
   nothing of the question's subject or situation (`bare-sibling`).

Within a tier a passage (two sentences or more: a finding with its setting) comes before a single sentence,
then the order retrieval met them in.

Aspect rewrites come first in what is kept: only `same-subject` texts fill a question up to `per_query`; the
other tiers (`situation`, `related`, `bare`) only fill it up to `fill_to` kept references, so a question with
enough same-subject texts keeps no entity-swap text beyond them, and one with few keeps the next tiers' texts
until it has an item's worth (two strict readers called 76% of the texts of aspect rewrites hard, 26% of those
of entity swaps). A weak text
reading less than `weak_floor` close to the original question (its `to_original` cosine) is never kept: related
to the rewrite by a name and far from the question, it distracts no reader. The weak ones rank closest to the
question first.

A document (a PubMed record, a book section) gives at most one kept chunk per question: four chunks of one
abstract are one reference, not four.
"""

from __future__ import annotations

import re

TIERS = ("same-subject", "situation", "related", "bare")
FILL_TIER = 1  # this tier and those after it only fill a question up to `fill_to`
WEAK_TIER = 2  # this tier and those after it are kept only from `weak_floor`, closest to the question first
BARE_KINDS = ("fragment", "title", "definition", "description")
KIND_ORDER = ("passage", "sentence")  # within a tier, a passage before a single finding
FRAGMENT_WORDS = 12  # fewer words than this say too little about any situation
CUT_FRAGMENT_WORDS = 30  # a piece cut out of running text (starts or stops mid-sentence) shorter than this
DEFINITION_WORDS = 30  # a one-sentence definition longer than this says more than what the thing is, if it reports
# what a study found; without a finding (`_FINDING`) a sentence of any length only describes its subject
# What a text reporting a finding or a study's setting writes: who or what was studied, what was seen or measured,
# numbers and comparisons. A text with none of these describes its subject (what it is, does, is approved for).
# "patients", "treatment" or "associated" alone do not count: "indicated for the treatment of patients with
# ..." and "pain associated with endometriosis" describe.
_FINDING = re.compile(
    r"\b(?:we|our|here|study|studies|studied|trials?|cohorts?|mice|rats|volunteers|participants|showed|shown|shows|"
    r"found|observed|demonstrat\w+|reveal\w*|reported|suggest\w*|identified|investigated|evaluated|assessed|"
    r"compared|comparison|significant\w*|association|correlat\w+|increased|decreased|reduced|improved|higher|lower|"
    r"results(?! from)|resulted|analy[sz]\w+|measured|detected|confirmed|examined|tested|randomi[sz]ed|placebo|"
    r"efficacy|"
    r"survival|incidence|prevalence|risk|odds|ratio|rates?|response|outcomes?|in vitro|in vivo|knockout|"
    r"knockdown|occurr\w+|patients (?:who|were|had|received|treated))\b|\d+(?:\.\d+)?\s*%|\bp\s*[<=>]|"
    r"\b\d+\s+(?:of|out of)\s+\d+\b",
    re.IGNORECASE,
)
TITLE_WORDS = 30
SUBTITLE_WORDS = 12  # "...nasopharyngeal carcinoma: association with EBV LMP-1 expression."
_SENTENCE_END = re.compile(r"[.!?](?:\s+|$)(?=[A-Z0-9(\"']|$)")
_DEFINES = re.compile(
    r"^[^.:]{1,160}?\b(?:is|are|was|were|refers to|represents|describes)\s+(?:a|an|the|one of the|one)\b", re.I
)
_ENDS_WHOLE = re.compile(r"[.!?)\]\"'\u201d]\s*$")
_SECTION_LABEL = re.compile(r"^[A-Z][A-Z /&-]+:\s")  # "BACKGROUND: ", "AIMS: " open an abstract's sentence
_LONG_WORD = re.compile(r"[A-Za-z][\w-]{3,}")


def text_kind(text: str) -> str:
    """`fragment` (a few words, or a short piece cut out of running text), `title` (a headline: a subtitle after
    a colon, or its words capitalised), `definition` (one sentence saying what something is), `description`
    (one sentence with no finding: what something does or has), `sentence` (one sentence reporting a finding)
    or `passage` (two sentences or more)."""
    text = text.strip()
    words = text.split()
    if len(words) < FRAGMENT_WORDS:
        return "fragment"
    cut = text[:1].islower() or not _ENDS_WHOLE.search(text)
    if cut and len(words) < CUT_FRAGMENT_WORDS:
        return "fragment"
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
    finding = _FINDING.search(text) is not None
    if len(sentences) > 1:  # a passage that only says what its subject is and does is a longer description
        return "passage" if finding or not _DEFINES.match(text) else "description"
    if len(words) <= TITLE_WORDS and not _SECTION_LABEL.match(text):
        later = _LONG_WORD.findall(text)[1:]
        subtitle = text.rpartition(": ")[2] if ": " in text else None
        if (subtitle is not None and len(subtitle.split()) <= SUBTITLE_WORDS) or (
            later and sum(w[0].isupper() for w in later) * 2 >= len(later)
        ):
            return "title"
    if _DEFINES.match(text) and (len(words) <= DEFINITION_WORDS or not finding):
        return "definition"
    return "sentence" if finding else "description"


def tier(kind: str, rewrite_kind: str, measured: dict) -> int:
    """The candidate's tier (the module's list) from its text kind, its rewrite's kind and what was measured."""
    if kind in BARE_KINDS:
        return 3
    names = measured.get("names", {})
    if rewrite_kind == "attribute" and measured.get("names_subject"):
        return 0
    if rewrite_kind == "entity" and names.get("put_in") and (names.get("kept") or names.get("phrases")):
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


def rank_key(candidate: dict) -> tuple:
    """(tier, closeness, kind, order): the close tiers passages first, then in the order retrieval met them, the
    weak ones closest to the original question first."""
    weak = candidate["tier"] >= WEAK_TIER
    kind = candidate.get("text_kind")
    kind_rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    return candidate["tier"], -candidate["measured"]["to_original"] if weak else 0.0, kind_rank, candidate["order"]


def choose(
    passed: list[dict],
    per_query: int,
    fill_to: int | None = None,
    weak_floor: float | None = None,
    related: bool = True,
) -> tuple[list[dict], list[dict]]:
    """(kept, set aside): the best `per_query` by `rank_key`, one per document, the tiers after `same-subject` only
    while fewer than `fill_to` are kept (None: up to `per_query`), the weak ones only from `weak_floor` close to
    the original question (None: any), `related` texts only when asked, bare texts only of the question's
    subject; the rest set aside, each with why (`related`, `bare-sibling`, `outranked`, `weak-tier`, `far` or
    `same-document`)."""
    kept, aside, documents = [], [], set()
    weak_limit = per_query if fill_to is None else min(per_query, fill_to)
    for candidate in sorted(passed, key=rank_key):
        weak = candidate["tier"] >= WEAK_TIER
        if candidate["tier"] == TIERS.index("related") and not related:
            aside.append({**candidate, "why": "related"})
        elif candidate["tier"] == TIERS.index("bare") and candidate.get("rewrite_kind") == "entity":
            aside.append({**candidate, "why": "bare-sibling"})
        elif weak and weak_floor is not None and candidate["measured"]["to_original"] < weak_floor:
            aside.append({**candidate, "why": "far"})
        elif candidate["document"] in documents:
            aside.append({**candidate, "why": "same-document"})
        elif len(kept) >= per_query:
            aside.append({**candidate, "why": "outranked"})
        elif candidate["tier"] >= FILL_TIER and len(kept) >= weak_limit:
            aside.append({**candidate, "why": "weak-tier"})
        else:
            kept.append(candidate)
            documents.add(candidate["document"])
    return sorted(kept, key=rank_key), aside
