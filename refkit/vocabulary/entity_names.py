"""The names matcher of a lexicon's entities, built once for `refkit lexicon` and `refkit noise` alike.

`refkit lexicon` counts how many served texts name each entity and `refkit noise` finds the entities a question
names, both with every name of every rewritten-type entity (~300,000 phrases with their variants once the
clinicians' dictionaries are in: seconds to build). The matcher is kept in refkit.disk_cache by its names, so the
noise run after a lexicon build, and every later run on that lexicon, reads it instead of building it.
"""

from __future__ import annotations

import hashlib
import json

from refkit.disk_cache import cached
from refkit.vocabulary.lexicon import Entity, Lexicon
from refkit.vocabulary.matcher import Match, NameMatcher


def names_matcher(entities: list[Entity], language: str = "en") -> NameMatcher:
    """A NameMatcher over every name of `entities` in `language` (Entity.surface_forms), payloads their keys."""
    english = language == "en"
    phrases = [(form, entity.key) for entity in entities for form in entity.surface_forms(language)]
    digest = hashlib.sha256(json.dumps(phrases, ensure_ascii=False).encode()).hexdigest()
    return cached("names-matcher", {"phrases": digest, "english": english}, lambda: NameMatcher(phrases, english))


class EntityFinder:
    """The entities of a lexicon a text names (`names_matcher`'s matches with the entities as payloads)."""

    def __init__(self, lexicon: Lexicon, entities: list[Entity], language: str = "en"):
        self._entities = lexicon.entities
        self._names = names_matcher(entities, language)

    def find(self, text: str) -> list[Match]:
        return [Match(m.start, m.end, m.text, self._entities[m.payload]) for m in self._names.find(text)]
