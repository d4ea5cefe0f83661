"""Stages 1 and 2 of refkit noise for one question: its targets and subjects, and the swaps that rewrite it.

`QueryRewriter.analyse` finds mentions and targets (refkit.noise.targets), `subjects` the question's subjects
(refkit.noise.subjects); `swap_candidates` proposes, per target, the siblings that pass the swap rules
(refkit.noise.siblings), best first, and the aspect rewrites: in English, per subject, the question of each
other aspect its kind has (rule `aspect-question`: CRAB's aspect replacement, the subject kept verbatim); in
other languages, the aspect phrase replaced in place where the question's frame takes it
(refkit.noise.sense.aspect_frame_problem and predicate_problem). `rewrites` chooses among those the corpus supports,
in an order seeded by (seed, question id), aspect rewrites spread over the subjects. With a
reader that proposes swaps (`proposer`, refkit.readers), its names join the siblings under rule `reader`
after the same checks: a name of the lexicon, of the target's type, passing every swap rule (so one no
served record names is refused as not-in-corpus).
"""

from __future__ import annotations

import random
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from medsnip.queries import QueryItem
from refkit.noise.options import ENTITY_POOL, SWAP_POOL, NoiseOptions
from refkit.noise.sense import (
    aspect_frame_problem,
    doubled_word,
    generic_keys,
    member_frame_problem,
    predicate_problem,
    question_part,
    repeated_word,
)
from refkit.noise.siblings import SiblingIndex
from refkit.noise.subjects import Subject, aspect_choices, broad_keys, find_subjects, write_question
from refkit.noise.targets import (
    Analysis,
    Target,
    TargetContext,
    choose_targets,
    phrase_cut_test,
    place_aspects,
    with_defined_abbreviations,
)
from refkit.noise.writing import Rewrite, entity_words, match_case, write_swap
from refkit.vocabulary.entity_names import EntityFinder
from refkit.vocabulary.lexicon import REWRITTEN_TYPES, Entity, Lexicon, natural_name
from refkit.vocabulary.matcher import Aspect, Match, PhraseMatcher

_WORDS = re.compile(r"\w+")
ASPECT_QUESTIONS = 4  # aspect rewrites proposed per subject


@dataclass(frozen=True)
class LexiconIndex:
    """What a rewriter looks names up in, built from a lexicon alone: its names matcher, generic entities,
    siblings, broad categories and phrase-cut test. Read-only once built."""

    entity_matcher: EntityFinder
    generic: frozenset[str]
    siblings: SiblingIndex
    broad: frozenset[str]
    phrase_cut: Callable

    @classmethod
    def build(cls, lexicon: Lexicon, language: str) -> LexiconIndex:
        typed = [e for e in lexicon.in_file_order() if e.type in REWRITTEN_TYPES]
        generic = generic_keys(lexicon)
        broad = broad_keys(typed)
        bigrams = {
            pair
            for e in typed
            for form in e.surface_forms(language)
            for words in [_WORDS.findall(form.lower())]
            for pair in zip(words, words[1:], strict=False)
        }
        return cls(
            EntityFinder(lexicon, typed, language),
            generic,
            SiblingIndex(lexicon, generic, broad),
            broad,
            phrase_cut_test(bigrams),
        )


# Built once per (lexicon, language) in a process: with the names of clinicians' dictionaries a lexicon
# holds ~200,000 names, whose matcher takes seconds to build, and a process that runs several commands on
# one lexicon (the demo; refkit.cli's shared_lexicon) reads it once. Freed with its lexicon.
_INDEXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def lexicon_index(lexicon: Lexicon, language: str) -> LexiconIndex:
    built = _INDEXES.setdefault(lexicon, {})
    if language not in built:
        built[language] = LexiconIndex.build(lexicon, language)
    return built[language]


class QueryRewriter:
    """Analysis and rewrites of queries against one lexicon and one aspect list."""

    def __init__(self, lexicon: Lexicon, aspects: list[Aspect], language: str = "en"):
        """`language`: the queries' language. Entities are matched by their names in it (lexicon
        translations) and in English, swaps write the replacement's name in it; English grammar and word
        order rules apply to English queries only."""
        self.lexicon, self.aspects, self.language = lexicon, aspects, language
        self.english = language == "en"
        index = lexicon_index(lexicon, language)
        self.entity_matcher, self.generic, self.siblings = index.entity_matcher, index.generic, index.siblings
        self.broad, self._phrase_cut = index.broad, index.phrase_cut
        by_phrase: dict[str, list[Aspect]] = {}  # one phrase may name aspects of several types ("indications")
        for aspect in aspects:
            for synonym in aspect.synonyms:
                by_phrase.setdefault(" ".join(synonym.lower().split()), []).append(aspect)
        self.aspect_matcher = PhraseMatcher([(phrase, tuple(found)) for phrase, found in by_phrase.items()])
        # (question, target) -> (names or None when malformed, raw answer): a reader's swap proposals
        self.proposer: Callable[[str, Entity], tuple[list[str] | None, str]] | None = None

    def analyse(self, query: str) -> Analysis:
        """Mentions, aspects and ranked targets (refkit.noise.targets)."""
        aspects = self.aspect_matcher.find(query)
        # an aspect phrase that is also a MeSH name ("Risk Factors", "Diagnosis") is read as the aspect
        entities = [
            m
            for m in with_defined_abbreviations(query, self.entity_matcher.find(query))
            if not any(a.start <= m.start and m.end <= a.end for a in aspects)
        ]
        analysis = Analysis(entities, [], generic=frozenset(m.payload.key for m in entities) & self.generic)
        context = TargetContext(
            query, entities, self.generic, question_part(query), self.english, self.lexicon.counted, self._phrase_cut
        )
        place_aspects(analysis, aspects, context, self.english)
        choose_targets(analysis, context)
        if not entities:
            analysis.refused_targets.append(
                {
                    "text": "",
                    "entity": "",
                    "rule": "no-mention",
                    "why": "no-mention: the question names no entity of the lexicon (of a type that is rewritten)",
                }
            )
        return analysis

    def subjects(self, query: str, analysis: Analysis) -> list[Subject]:
        """The question's subjects for aspect rewrites (English questions; none in other languages, which keep
        in-place aspect swaps)."""
        return find_subjects(query, analysis, self.aspects, self.broad) if self.english else []

    def settle_asked(self, subject: Subject) -> None:
        """The aspect the question asks of a subject whose kind became known (from the corpus's texts)."""
        from refkit.noise.subjects import asked_aspect, is_definitional

        query = subject.query
        subject.definitional = is_definitional(query, (subject.start, subject.end))
        if not subject.definitional:
            subject.asked = asked_aspect(query, (subject.start, subject.end), subject.kind, self.aspects)

    def entity_candidates(
        self, original: Entity, exclude: set[str], refused: list[dict] | None = None
    ) -> list[tuple[Entity, str]]:
        """(sibling, rule) that pass the swap rules, best first (refkit.noise.siblings), at most SWAP_POOL;
        each refused candidate is appended to `refused` with its rule. For a query not in English, only
        siblings with a name in its language, where there are any."""
        found = self.siblings.siblings(original)
        if not found and refused is not None:
            reason = self.siblings.no_sibling_reason(original)
            refused.append({"target": original.name, "to": "any", "rule": reason.partition(":")[0], "why": reason})
        chosen: list[tuple[Entity, str]] = []
        for entity, rule in self.siblings.rank(original, found):
            problem = self.siblings.swap_problem(original, entity, rule, exclude)
            if problem is not None:
                if refused is not None:
                    refused.append(
                        {"target": original.name, "to": entity.name, "rule": problem.partition(":")[0], "why": problem}
                    )
                continue
            chosen.append((entity, rule))
        if not self.english:  # a swap is written in the query's language: siblings named in it, if any are
            chosen = [c for c in chosen if c[0].translations.get(self.language)] or chosen
        return chosen[:SWAP_POOL]

    def proposed_candidates(
        self, question: str, original: Entity, present: set[str], found: list[tuple[Entity, str]], refused: list[dict]
    ) -> list[tuple[Entity, str]]:
        """The reader's proposals for `original` that are lexicon entities of its type passing the swap rules
        and not among `found` already; every other proposal is refused with its rule."""
        names, raw = self.proposer(question, original)
        if names is None:
            refused.append(
                {
                    "target": original.name,
                    "to": "any",
                    "rule": "reader-malformed",
                    "why": f"reader-malformed: the reader's swap answer is not a JSON list of names: {raw[:120]!r}",
                }
            )
            return []
        taken = {entity.key for entity, _ in found} | {original.key}
        chosen = []
        for name in names:
            entity = self.lexicon.get(name) or self._named_whole(name)
            problem = None
            if entity is None:
                problem = f"reader-unknown: {name} is not a name of the lexicon"
            elif entity.type != original.type:
                problem = f"reader-type: {entity.name} is a {entity.type}, not a {original.type}"
            elif entity.key in taken:
                continue
            else:
                problem = self.siblings.swap_problem(original, entity, "reader", present)
            if problem is not None:
                refused.append({"target": original.name, "to": name, "rule": problem.partition(":")[0], "why": problem})
                continue
            taken.add(entity.key)
            chosen.append((entity, "reader"))
        return chosen

    def _named_whole(self, name: str) -> Entity | None:
        """The lexicon entity one of whose names (entry terms, translations) is all of `name`."""
        whole = [m.payload for m in self.entity_matcher.find(name) if m.start == 0 and m.end == len(name)]
        return whole[0] if whole else None

    def aspect_candidates(self, query: str, target: Target, refused: list[dict]) -> list[Aspect]:
        """The aspects that may replace the target's aspect: same entity type, and a frame and predicate
        that take them (English; other languages have no word-order rules)."""
        if target.aspect is None:
            return []
        asked = target.aspect
        if self.english:
            frame = aspect_frame_problem(query, (asked.start, asked.end))
            if frame is not None:
                refused.append({"target": asked.payload.name, "to": "any aspect", "rule": "aspect-frame", "why": frame})
                return []
        kept = []
        for aspect in self.aspects:
            if aspect.type != target.entity.type or aspect.name == asked.payload.name:
                continue
            problem = predicate_problem(query, asked.start, asked.payload.name, aspect.name) if self.english else None
            if problem is not None:
                refused.append({"target": asked.payload.name, "to": aspect.name, "rule": "predicate", "why": problem})
                continue
            kept.append(aspect)
        return kept

    def swap_candidates(
        self, query: QueryItem, analysis: Analysis, subjects: list[Subject] | None = None
    ) -> list[Rewrite]:
        """Every single swap `rewrites` may choose, computed once per analysis (the rules record what they
        refuse): the subjects' aspect rewrites (English) or the first target's in-place aspect swaps, then each
        target's entity swaps in target order."""
        if getattr(analysis, "_swaps", None) is None:
            present = {m.payload.key for m in analysis.entities}
            swaps: list[Rewrite] = []
            if self.english:
                for subject in subjects if subjects is not None else self.subjects(query.query, analysis):
                    swaps += self.aspect_rewrites(query.query, subject)
            for number, target in enumerate(analysis.targets):
                if number == 0 and not self.english:
                    for aspect in self.aspect_candidates(query.query, target, analysis.refused_swaps):
                        swaps.append(self._aspect_swap(query.query, target, aspect, number))
                frame = (
                    member_frame_problem(query.query, target.entity.type, target.mention.start)
                    if self.english
                    else None
                )
                if frame is not None:
                    analysis.refused_swaps.append(
                        {"target": target.entity.name, "to": "any", "rule": "member-frame", "why": frame}
                    )
                    continue
                found = self.entity_candidates(target.entity, present, analysis.refused_swaps)
                if self.proposer is not None:
                    found += self.proposed_candidates(
                        query.query, target.entity, present, found, analysis.refused_swaps
                    )
                for entity, rule in found:
                    if (
                        not self.english
                        and not target.mention.text.isascii()
                        and not entity.translations.get(self.language)
                    ):
                        analysis.refused_swaps.append(
                            {
                                "target": target.entity.name,
                                "to": entity.name,
                                "rule": "untranslated",
                                "why": f"untranslated: {entity.name} "
                                f"has no {self.language} name to write where "
                                f"{target.mention.text!r} stood",
                            }
                        )
                        continue
                    rewrite = self._entity_swap(query.query, target, entity, rule, number)
                    span = (target.mention.start, target.mention.end)
                    problem = (
                        doubled_word(query.query, rewrite.query)
                        or repeated_word(query.query, span, rewrite.replaced[0]["written"])
                        if self.english
                        else None
                    )
                    if problem is None:
                        swaps.append(rewrite)
                    else:
                        rule = problem.partition(":")[0]
                        analysis.refused_swaps.append(
                            {"target": target.entity.name, "to": entity.name, "rule": rule, "why": problem}
                        )
            analysis._swaps = swaps
        return analysis._swaps

    def rewrites(
        self,
        query: QueryItem,
        analysis: Analysis,
        options: NoiseOptions,
        supported: Callable[[Rewrite], bool] | None = None,
        preference: Callable[[Rewrite], int] | None = None,
    ) -> list[Rewrite]:
        """The rewrites of one question: up to `options.attribute_swaps` aspect swaps and
        `options.entity_swaps` entity swaps. Entity swaps come from the first target with any `supported`
        accepts (then the next targets, while fewer were found); among a target's accepted swaps the seed
        picks from the ENTITY_POOL best-ranked (by `preference`, lower first, then sibling rank)."""
        rng = random.Random(f"{options.seed}:{query.id}")
        accepted = supported or (lambda rewrite: True)
        swaps = self.swap_candidates(query, analysis)
        chosen = self._aspect_choice(swaps, rng, accepted, options.attribute_swaps)
        wanted = options.entity_swaps
        for number in range(len(analysis.targets)):
            if wanted <= 0:
                break
            pool = [r for r in swaps if r.kind == "entity" and r.target == number and accepted(r)]
            pool = sorted(pool, key=preference or (lambda r: 0))[:ENTITY_POOL]
            picked = rng.sample(pool, min(wanted, len(pool)))
            chosen += sorted(picked, key=pool.index)
            wanted -= len(picked)
        unique, seen = [], {query.query.casefold()}
        for rewrite in chosen:
            if rewrite.query.casefold() not in seen:
                seen.add(rewrite.query.casefold())
                unique.append(rewrite)
        return unique

    @staticmethod
    def _aspect_choice(swaps: list[Rewrite], rng: random.Random, accepted, wanted: int) -> list[Rewrite]:
        """Up to `wanted` accepted aspect rewrites in seeded order, one subject after the other (the first
        subject's first, then the second subject's, ...), so that two rewrites keep two subjects where there are."""
        by_subject: dict[int, list[Rewrite]] = {}
        for rewrite in (r for r in swaps if r.kind == "attribute"):
            key = id(rewrite.subject) if rewrite.subject is not None else 0
            by_subject.setdefault(key, []).append(rewrite)
        queues = [rng.sample(group, len(group)) for group in by_subject.values()]
        chosen: list[Rewrite] = []
        while len(chosen) < wanted and any(queues):
            for queue in queues:
                while queue and len(chosen) < wanted:
                    rewrite = queue.pop(0)
                    if accepted(rewrite):
                        chosen.append(rewrite)
                        break
        return chosen

    def aspect_rewrites(self, query: str, subject: Subject) -> list[Rewrite]:
        """The subject asked of the other aspects of its kind (refkit.noise.subjects.aspect_choices), the
        first `ASPECT_QUESTIONS` in the aspect table's order (the table lists a kind's most asked aspects
        first; each is searched for support, so the cap bounds a question's searches)."""
        rewrites = []
        for aspect in aspect_choices(subject, self.aspects)[:ASPECT_QUESTIONS]:
            record = {
                "what": "aspect",
                "type": aspect.type,
                "from": "definition" if subject.definitional else (subject.asked.name if subject.asked else ""),
                "to": aspect.name,
                "entity": subject.name,
                "rule": "aspect-question",
                "text": subject.text,
                "written": write_question(aspect, subject),
                "span": [subject.start, subject.end],
            }
            rewrites.append(Rewrite("attribute", record["written"], [record], subject=subject))
        return rewrites

    def _entity_swap(self, text: str, target: Target, entity: Entity, rule: str, number: int) -> Rewrite:
        original: Entity = target.entity
        words = entity_words(target.mention, natural_name(entity, self.language), self.language)
        record = {
            "what": "entity",
            "type": entity.type,
            "from": original.name,
            "from_ui": original.ui,
            "to": entity.name,
            "to_ui": entity.ui,
            "rule": rule,
            "class": self.siblings.class_of(original, entity, rule),
        }
        rewrite = write_swap(text, target.mention, words, record, self.language)
        rewrite.target = number
        return rewrite

    def _aspect_swap(self, text: str, target: Target, aspect: Aspect, number: int) -> Rewrite:
        asked: Match = target.aspect
        record = {
            "what": "aspect",
            "type": aspect.type,
            "from": asked.payload.name,
            "to": aspect.name,
            "entity": target.entity.name,
        }
        rewrite = write_swap(text, asked, match_case(asked.text, aspect.name), record, self.language)
        rewrite.target = number
        return rewrite
