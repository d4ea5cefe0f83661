"""Checks `refkit audit` runs over a noise record, each from what the record wrote, independently of the rules
that made it: a rule that fails shows up here rather than in a reader's verdict.

- `swap_class_problem`: an entity swap of a drug whose recorded class is missing, only names a kind of molecule
  ("-mab"), or does not hold for both drugs in the lexicon; a disease swap whose recorded MeSH parent is not a
  parent of both;
- `frame_problems`: a rewrite that asks the aspect the question asks ("Do statins cause myopathy?" ->
  "What are the adverse effects of statins?"), or a premise (count, set, feature) carried over by an entity swap;
- `answer_type_targets`: a target that is what the question asks for ("Which *gene* ...");
- `hidden_absence`: a stop that names another rule while a subject or mention of the question is written by no
  served text.
"""

from __future__ import annotations

import re

from refkit.noise.premises import carried_premises
from refkit.noise.sense import question_part
from refkit.noise.targets import ANSWER_TYPE
from refkit.vocabulary.drug_stems import KIND_ONLY_STEMS, drug_class
from refkit.vocabulary.lexicon import Lexicon

# "Does X cause Y?", "Can X induce Y?": a question about an adverse effect of X
_CAUSES = re.compile(r"^\s*(?:does|do|did|can|could|may|might|will|would)\b.*\b(?:caus\w*|induc\w*)\b", re.IGNORECASE)


def swap_class_problem(edit: dict, lexicon: Lexicon | None) -> str | None:
    """Why an entity swap's record does not show one class for both entities, or None."""
    if edit.get("what") != "entity" or edit.get("rule") in (None, "reader"):
        return None
    named = edit.get("class", "")
    if not named:
        return f"no class recorded for {edit['from']} -> {edit['to']}"
    if any(named.startswith(f"INN stem -{stem}:") for stem in KIND_ONLY_STEMS):
        return f"{edit['from']} -> {edit['to']}: {named!r} names a kind of molecule, not a class"
    if lexicon is None:
        return None
    original, sibling = lexicon.get(edit["from"]), lexicon.get(edit["to"])
    if original is None or sibling is None:
        return None
    if edit["rule"] == "inn-stem" and drug_class(original.name) != drug_class(sibling.name):
        return f"{original.name} ({drug_class(original.name)}) and {sibling.name} ({drug_class(sibling.name)}) differ"
    if edit["rule"] == "pharmacological-action":
        actions = named.partition(": ")[2].split("; ")
        both = {a.casefold() for a in original.actions} & {a.casefold() for a in sibling.actions}
        missing = [a for a in actions if a.casefold() not in both]
        if missing:
            return f"{original.name} and {sibling.name} do not share {', '.join(missing)}"
    if edit["rule"] == "tree-sibling":
        parents = named.partition(": ")[2].split(", ")
        for entity in (original, sibling):
            if not any(t.rpartition(".")[0] in parents for t in entity.trees):
                return f"{entity.name} is not under {', '.join(parents)}"
    return None


def frame_problems(record: dict, rewrite: dict) -> list[str]:
    """A rewrite that asks what the question asks, or an entity swap that carries a count or feature the question
    stated of the old entity over to the new one without the premise check having held (its support record lists
    the premises a retrieved text stated)."""
    query = str(record.get("query", ""))
    problems = []
    for edit in rewrite.get("replaced", []):
        if edit.get("rule") == "aspect-question" and edit.get("to") == "adverse effects" and _CAUSES.search(query):
            problems.append(f"asked-aspect: {query!r} asks about an adverse effect; {rewrite['query']!r} asks it again")
        if edit.get("what") == "entity":
            target = next((t for t in record.get("targets", []) if t.get("entity") == edit["from"]), None)
            span = tuple(target["span"]) if target and target.get("span") else None
            premises = carried_premises(query, span) if span else []
            support = rewrite.get("support") or {}
            if premises and not support.get("premises"):
                words = ", ".join(p.words for p in premises)
                problems.append(f"premise: {rewrite['query']!r} carries {words!r} without a text stating it")
    return problems


def answer_type_targets(record: dict) -> list[str]:
    """Targets the question asks for rather than about (English questions)."""
    query = str(record.get("query", ""))
    if (record.get("params") or {}).get("language", "en") != "en":
        return []
    asked_from = question_part(query)
    return [
        t["text"]
        for t in record.get("targets", [])
        if t.get("span") and ANSWER_TYPE.search(query[asked_from : t["span"][0]])
    ]


def hidden_absence(record: dict) -> str | None:
    """A stop that does not name the absent subject when the question has no target and one of its subjects or
    mentions is written by no served text."""
    stop = record.get("stopped")
    if not stop or record.get("targets") or record.get("subjects"):
        return None
    absent = [
        r
        for r in [*record.get("refused_subjects", []), *record.get("refused_targets", [])]
        if r.get("rule") == "not-in-corpus"
    ]
    if absent and stop.get("rule") != "not-in-corpus":
        return f"stopped at {stop['stage']}/{stop['rule']} though {absent[0].get('text')!r} is in no served text"
    return None
