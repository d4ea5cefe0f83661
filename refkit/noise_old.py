"""`refkit noise`: hard irrelevant references by entity/attribute substitution.

For each query (CRAB's recipe, scripted):
1. find its entities (lexicon, drug and disease types) and aspects (aspect lexicon) with the phrase
   matcher; the *target* is the last aspect that has an entity of its type in the query, with the
   nearest such entity (else the last entity, with no aspect);
2. rewrite it: attribute swap (the aspect replaced by another aspect of the same type), entity swap
   (the entity replaced by a same-type entity, ranked by co-occurrence with it, then qualifier-profile
   similarity, then frequency; the seed picks among the top five), and both at once;
3. retrieve for every rewrite and keep a candidate only if it plausibly cannot answer the original:
   - it is not in the original query's top-M;
   - its text does not pair the original entity (any of its names) with the original aspect (any
     synonym); a query with no aspect rejects every text that names the entity at all;
   - its MeSH does not carry the original (descriptor, qualifier of the aspect) pair;
   - it is not a duplicate (exact or near, dedup.py) of a reference already collected for the query
     (--refs), of the original's top-M, or of noise kept before it;
4. write what was rewritten, what was kept and why, and what was rejected and why.

Everything that chooses is seeded by (seed, query id) and every list is in a fixed order, so the
same queries, lexicon, seed and index lineage give byte-identical output.
"""

from __future__ import annotations

import functools
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import grpc

from medsnip.queries import QueryItem
from refkit.collect import DedupOptions, RetrievalOptions, reference_from_hit, search_many
from refkit.connection import ServerError, describe_rpc_error
from refkit.lexicon import REWRITTEN_TYPES, Entity, Lexicon, natural_name, profile_similarity
from refkit.matcher import Aspect, Match, PhraseMatcher, agree_number, is_plural, other_number, with_variants
from refkit.related import NameSimilarity
from refkit.relatedness import (
    ANSWER_CEILING,
    DENSE_FLOOR,
    GOLD_CEILING,
    PoolBM25,
    RelatednessTest,
    TextSimilarity,
    similarity_record,
)
from refkit.sense import (
    FUNCTION_WORDS,
    aspect_position_problem,
    doubled_word,
    entity_swap_problem,
    everyday_word,
    generic_keys,
    inside_a_name,
    modifier_problem,
    next_to_generic,
    possessive_before,
    predicate_problem,
    question_part,
    tree_siblings,
)
from refkit.support import CONTEXT_TYPES, Evidence, SupportTest, aspect_evidence, entity_evidence
from searchd.client import SearchClient

ENTITY_POOL = 5  # the seed picks entity swaps among this many best-ranked candidates
# A question without an aspect targets its last entity of the first type here that it names.
TARGET_PRIORITY = ("drug", "disease", "organism", "gene", "procedure", "anatomy")
# In a case vignette the tests, organs, signs and the patient's pathogens are the case's findings ("a
# blood culture", "the anterior chamber", "headache", "HIV" -> "Simian Immunodeficiency Virus"): only its
# drugs, diseases and genes are what it asks about.
VIGNETTE_TARGET_TYPES = ("drug", "disease", "gene")
SIGNS_AND_SYMPTOMS_TREE = "C23.888"  # "Signs and Symptoms": findings, never a vignette's target
# Swaps chosen by name (related) or by co-occurrence need names at least this similar (MiniLM): below it
# they are mostly other things that sound alike ("Pulse" / "Blinking", "Smoking Cessation" /
# "Retirement") or merely appear together (the sweetener of a risperidone trial in rats), not siblings.
SIBLING_NAME_FLOOR = 0.50
# Tree siblings are distinct concepts by MeSH's word, but a descriptor sits under many parents and its
# siblings under some of them are far ("Epilepsy" / "Amblyopia", "Aspirin" / "Dicamba"): siblings are
# ranked by how alike their names are (after co-occurrence) and the least alike are left out.
SIBLING_TREE_FLOOR = 0.35
# Chemicals sit in the trees by structure, not use: Risperidone's siblings are Ritanserin (0.51) but also
# Uracil (0.42) and Sparsomycin (0.43). Names of one class share a stem (Metformin / Phenformin 0.55,
# Buformin 0.48), so chemical siblings need names more alike; so do organisms, whose siblings are the
# other genera of a family (Pomegranate / Poa).
CHEMICAL_SIBLING_FLOOR = 0.45
CHEMICAL_TYPES = ("drug", "gene", "organism")
SAME_TYPE_SCAN = 50  # lexicons without related names: how many best-ranked same-type entities are tried


@dataclass
class NoiseOptions:
    seed: int = 0
    per_query: int = 5
    top_m: int = 100
    candidates: int = 100  # hits retrieved per rewrite: as deep as top_m
    attribute_swaps: int = 2
    entity_swaps: int = 2
    support: bool = True  # only swaps the corpus supports (refkit.support)

    def as_dict(self) -> dict:
        return {"seed": self.seed, "per_query": self.per_query, "top_m": self.top_m, "candidates": self.candidates,
                "attribute_swaps": self.attribute_swaps, "entity_swaps": self.entity_swaps,
                "support": self.support}  # fmt: skip


@dataclass
class Analysis:
    entities: list[Match]
    aspects: list[Match]
    entity: Match | None = None  # the target
    aspect: Match | None = None
    generic: frozenset[str] = frozenset()  # keys of the generic entities found (never targets)
    out_of_position: list[dict] = field(default_factory=list)  # aspect words that are not what is asked
    refused_swaps: list[dict] = field(default_factory=list)  # swap candidates the sense rules refused
    swap_options: tuple | None = None  # (aspects, entities) a swap may put in; QueryRewriter fills it

    def as_dict(self) -> dict:
        return {
            "entities": [{"name": m.payload.name, "ui": m.payload.ui, "type": m.payload.type, "text": m.text,
                          "span": [m.start, m.end], **({"generic": True} if m.payload.key in self.generic else {})}
                         for m in self.entities],  # fmt: skip
            "aspects": [{"aspect": m.payload.name, "type": m.payload.type, "text": m.text, "span": [m.start, m.end]}
                        for m in self.aspects],  # fmt: skip
            "target": None if self.entity is None else {
                "entity": self.entity.payload.name,
                "aspect": None if self.aspect is None else self.aspect.payload.name,
            },
            "aspects_out_of_position": self.out_of_position,
            "refused_swaps": self.refused_swaps,
        }  # fmt: skip


@dataclass
class Rewrite:
    kind: str  # "attribute" | "entity" | "both"
    query: str
    replaced: list[dict] = field(default_factory=list)

    def as_dict(self, number: int) -> dict:
        return {"number": number, "kind": self.kind, "query": self.query, "replaced": self.replaced}


class QueryRewriter:
    """Analysis and rewrites of queries against one lexicon and one aspect list."""

    def __init__(self, lexicon: Lexicon, aspects: list[Aspect], language: str = "en"):
        """`language`: the queries' language. Entities are matched by their names in it (lexicon
        translations) and in English, swaps write the replacement's name in it; English grammar (plural
        agreement, a/an) is applied to English queries only."""
        self.lexicon = lexicon
        self.aspects = aspects
        self.language = language
        typed = [e for e in lexicon.entities.values() if e.type in REWRITTEN_TYPES]
        phrases = [(form, e) for e in typed for form in e.surface_forms(language)]
        self.entity_matcher = PhraseMatcher(with_variants(phrases, english=language == "en"))
        by_phrase: dict[str, list[Aspect]] = {}  # one phrase may name aspects of several types ("indications")
        for aspect in aspects:
            for synonym in aspect.synonyms:
                by_phrase.setdefault(" ".join(synonym.lower().split()), []).append(aspect)
        self.aspect_matcher = PhraseMatcher([(phrase, tuple(found)) for phrase, found in by_phrase.items()])
        self._by_type = {kind: sorted((e for e in typed if e.type == kind), key=lambda e: e.key)
                         for kind in REWRITTEN_TYPES}  # fmt: skip
        self.generic = generic_keys(lexicon)
        self.name_similarity = NameSimilarity()
        self._name_bigrams = {pair for form, _ in phrases for words in [_WORDS.findall(form.lower())]
                              for pair in zip(words, words[1:], strict=False)}  # fmt: skip
        self._has_related = any(e.related for e in typed)
        self._has_trees = any(e.trees for e in typed)

    def analyse(self, query: str) -> Analysis:
        """Entities, aspects and the target pair. Questions end with what they ask ("... which of the
        following adverse effects?"), so aspects are tried from the last one back, each paired with the
        nearest entity of its type; a query with no such pair targets its last entity of the first type of
        TARGET_PRIORITY it names, aspect-less (a vignette's disease, not the biopsy it mentions).
        Generic entities (refkit.sense), entities after a possessive, next to a generic word, inside a
        longer name, one word of a longer noun phrase (refkit.sense.modifier_problem) or written as an
        everyday word ("emergency department") are never targets, nor, in a case vignette, the findings
        before the sentence that asks (refkit.sense.question_part); an aspect
        word counts only where it is what the question asks about an entity (refkit.sense's
        aspect-position rule)."""
        entities = self.entity_matcher.find(query)
        entity_spans = [(m.start, m.end) for m in entities]
        generic_spans = [(m.start, m.end) for m in entities if m.payload.key in self.generic]
        asked_from = question_part(query)
        vignette = asked_from > 0
        targets = [m for m in entities if m.payload.type in TARGET_PRIORITY
                   and not (vignette and not self._vignette_target(m.payload))
                   and m.payload.key not in self.generic and not possessive_before(query, m.start)
                   and not next_to_generic((m.start, m.end), generic_spans, query)
                   and not inside_a_name(query, (m.start, m.end))
                   and not (self.language == "en" and modifier_problem(query, (m.start, m.end), entity_spans))
                   and not (self.language == "en" and self._phrase_cut(query, m))
                   and not _written_again(query, m)
                   and not (self.language == "en" and " " not in m.text and everyday_word(m.text.lower()))
                   and m.start >= asked_from]  # fmt: skip
        analysis = Analysis(entities, [], generic=frozenset(m.payload.key for m in entities) & self.generic)
        for found in self.aspect_matcher.find(query):
            if found.start < asked_from or any(s < found.end and found.start < e for s, e in entity_spans):
                continue
            for aspect in found.payload:
                spans = [(m.start, m.end) for m in targets if m.payload.type == aspect.type]
                english = self.language == "en"  # the position rule reads English word order
                problem = aspect_position_problem(query, (found.start, found.end), spans) if spans and english else None
                if problem:
                    analysis.out_of_position.append({"aspect": aspect.name, "text": found.text, "why": problem})
                else:
                    analysis.aspects.append(Match(found.start, found.end, found.text, aspect))
        for aspect in reversed(analysis.aspects):
            compatible = [e for e in targets if e.payload.type == aspect.payload.type]
            if compatible:
                analysis.entity = min(compatible, key=lambda e: (_distance(e, aspect), -e.start))
                analysis.aspect = aspect
                return analysis
        if targets:  # what a question is about is its drugs and diseases more than the tests and organs it names
            best = min(TARGET_PRIORITY.index(m.payload.type) for m in targets)
            analysis.entity = [m for m in targets if TARGET_PRIORITY.index(m.payload.type) == best][-1]
        return analysis

    @staticmethod
    def _vignette_target(entity: Entity) -> bool:
        signs = any(t.startswith(SIGNS_AND_SYMPTOMS_TREE) for t in entity.trees)
        return entity.type in VIGNETTE_TARGET_TYPES and not signs

    def _phrase_cut(self, query: str, match: Match) -> bool:
        """Does the match stop inside a longer name ("gestational diabetes" before "mellitus", "urea"
        after "serum")? Its first or last word and the word right beside it are two adjacent words of
        one of the vocabulary's names."""
        inside = _WORDS.findall(match.text.lower())
        left = re.search(r"(\w+)[ -]$", query[: match.start])
        right = re.match(r"[ -](\w+)", query[match.end :])
        pairs = ([(left.group(1).lower(), inside[0])] if left and inside else []) + (
            [(inside[-1], right.group(1).lower())] if right and inside else []
        )
        return any(a not in FUNCTION_WORDS and b not in FUNCTION_WORDS and (a, b) in self._name_bigrams
                   for a, b in pairs)  # fmt: skip

    def entity_candidates(self, original: Entity, exclude: set[str],
                          refused: list[dict] | None = None) -> list[tuple[Entity, str]]:  # fmt: skip
        """(entity, the rule that chose it), best first, at most ENTITY_POOL, from the first rule that
        finds any that refkit.sense accepts:
        1. `sibling`: with MeSH trees, entities sharing a tree parent with the original (another drug of
           the class, another disease of the family), named at least SIBLING_TREE_FLOOR alike
           (CHEMICAL_SIBLING_FLOOR for drugs and genes, placed by structure, and organisms), ranked by
           co-occurrence, then by how alike the names are; in a vocabulary with trees this is the only
           rule (an entity it does not place gets no swap: names and co-occurrence alone pick "Bariatric
           Surgery" for "Barium Enema", "Cephapirin" for "Aspirin");
        2. `cooccurrence`, without trees: entities the indexed records carry together with it, named
           alike (MiniLM similarity of the names at SIBLING_NAME_FLOOR or above);
        3. `related`, without trees: its nearest same-type names at SIBLING_NAME_FLOOR or above
           (refkit.related);
        4. `same-type`, only for a lexicon built without related names (`--no-related`): the first
           SAME_TYPE_SCAN other entities of its type, ranked as below, named alike as for 2 and 3.
        Never one of its own names, an ancestor or a descendant (by trees, and by names nested word for
        word), a near-synonym (names' MiniLM similarity at or above refkit.related.SAME_CONCEPT), a
        generic entity, or for a drug a class for a substance; each candidate refused for that is
        appended to `refused` with its reason. For a query not in English, only entities with a name in
        its language, when there are any. Siblings and co-occurring entities are ranked by
        co-occurrence, then qualifier-profile similarity, then frequency."""
        names = {form.casefold() for form in original.surface_forms(self.language)}
        candidates = [e for e in self._by_type.get(original.type, [])
                      if e.key != original.key and e.key not in exclude and e.key not in names]  # fmt: skip
        if self.language != "en":  # a swap is written in the query's language: entities named in it, if any are
            candidates = [e for e in candidates if e.translations.get(self.language)] or candidates
        candidates.sort(key=lambda e: (-original.cooccurrence.get(e.name, 0), -profile_similarity(original, e),
                                       -e.frequency, e.key))  # fmt: skip
        allowed = {e.name: e for e in candidates}
        related = sorted((name for name in original.related if name in allowed
                          and original.related[name] >= SIBLING_NAME_FLOOR * 1000),
                         key=lambda name: (-original.related[name], name.casefold()))  # fmt: skip
        siblings = [e for e in candidates if tree_siblings(original.trees, e.trees)]
        alike: dict[str, float] = {}
        floor = CHEMICAL_SIBLING_FLOOR if original.type in CHEMICAL_TYPES else SIBLING_TREE_FLOOR
        if siblings:
            alike = dict(zip((e.key for e in siblings), self.name_similarity.many(original, siblings), strict=True))
            siblings.sort(key=lambda e: (-original.cooccurrence.get(e.name, 0), -alike[e.key], e.key))
        rules = [("sibling", siblings)]
        if self._has_trees and not original.trees and refused is not None:
            refused.append({"to": "any", "rule": "sibling", "why": (f"no tree place: {original.name} has no MeSH tree "
                            "number in this vocabulary, so its siblings are unknown")})  # fmt: skip
        if not self._has_trees:  # names and co-occurrence pick "Bariatric Surgery" for "Barium Enema" where trees can
            rules += [("cooccurrence", [e for e in candidates if original.cooccurrence.get(e.name, 0)]),
                      ("related", [allowed[name] for name in related])]  # fmt: skip
        if not self._has_related:  # a lexicon built without related names: the best-ranked others, named alike
            rules.append(("same-type", candidates[:SAME_TYPE_SCAN]))
        for rule, members in rules:
            chosen, far = [], 0
            for entity in members:
                problem = entity_swap_problem(original, entity, self.generic)
                if problem is None and rule == "sibling" and alike[entity.key] < floor:
                    far += 1  # counted, not listed: a drug can have hundreds of structural siblings
                    continue
                if problem is None and rule != "sibling":  # siblings in a tree are distinct concepts by MeSH's word
                    similarity = self.name_similarity(original, entity)
                    problem = entity_swap_problem(original, entity, self.generic, similarity)
                    if problem is None and similarity < SIBLING_NAME_FLOOR:
                        problem = (f"not a sibling: {original.name} / {entity.name} names similar at only "
                                   f"{similarity:.2f} (below {SIBLING_NAME_FLOOR:.2f})")  # fmt: skip
                if problem is not None:
                    if refused is not None:
                        refused.append({"to": entity.name, "rule": rule, "why": problem})
                    continue
                chosen.append((entity, rule))
                if len(chosen) == ENTITY_POOL:
                    break
            if far and refused is not None:
                refused.append({"to": f"{far} tree siblings", "rule": rule,
                                "why": f"not a sibling: names similar below {floor:.2f}"})  # fmt: skip
            if chosen:
                return chosen
        return []

    def _swap_options(self, query: QueryItem, analysis: Analysis) -> tuple[list[Aspect], list[tuple[Entity, str]]]:
        """The aspects and entities a swap may put in, in a fixed order (computed once per analysis: the
        entity rules record what they refuse)."""
        if analysis.swap_options is None:
            entity: Entity = analysis.entity.payload
            aspects: list[Aspect] = []
            if analysis.aspect is not None:
                asked = analysis.aspect

                def fits(aspect: Aspect) -> bool:
                    return self.language != "en" or predicate_problem(query.query, asked.start, asked.payload.name,
                                                                      aspect.name) is None  # fmt: skip

                aspects = [a for a in self.aspects if a.type == entity.type and a.name != asked.payload.name
                           and fits(a)]  # fmt: skip
            present = {m.payload.key for m in analysis.entities}
            analysis.swap_options = (aspects, self.entity_candidates(entity, present, analysis.refused_swaps))
        return analysis.swap_options

    def swap_candidates(self, query: QueryItem, analysis: Analysis) -> list[Rewrite]:
        """Every single swap `rewrites` may choose: each aspect, then each entity of the pool."""
        if analysis.entity is None:
            return []
        aspects, pool = self._swap_options(query, analysis)
        swap = functools.partial(self._swap, query.query, analysis, self.language)
        return [swap(aspect=a) for a in aspects] + [swap(entity=e) for e in pool]

    def rewrites(self, query: QueryItem, analysis: Analysis, options: NoiseOptions,
                 supported: Callable[[Rewrite], bool] | None = None) -> list[Rewrite]:  # fmt: skip
        """The rewrites of one query: `options.attribute_swaps` aspect swaps and `options.entity_swaps`
        entity swaps, taken in a seeded order from what the sense rules allow and, with `supported`, only
        swaps it accepts (refkit.support: the corpus speaks of the swapped situation); then both at once,
        the first of each (its support is checked once it is retrieved)."""
        if analysis.entity is None:
            return []
        rng = random.Random(f"{options.seed}:{query.id}")
        entity: Entity = analysis.entity.payload
        aspects, pool = self._swap_options(query, analysis)
        swap = functools.partial(self._swap, query.query, analysis, self.language)
        accepted = supported or (lambda rewrite: True)
        attribute_targets = [a for a in rng.sample(aspects, len(aspects))
                             if accepted(swap(aspect=a))][: options.attribute_swaps]  # fmt: skip
        entity_targets = [e for e in rng.sample(pool, len(pool)) if accepted(swap(entity=e))][: options.entity_swaps]
        rewrites = [swap(aspect=target) for target in attribute_targets]
        rewrites += [swap(entity=target) for target in entity_targets]
        if attribute_targets and entity_targets:
            rewrites.append(swap(entity=entity_targets[0], aspect=attribute_targets[0]))
        for rewrite in rewrites:
            for edit in rewrite.replaced:
                if edit["what"] == "entity":
                    edit["name_similarity"] = self.name_similarity(entity, self.lexicon.get(edit["to"]))
        unique, seen = [], {query.query.casefold()}
        for rewrite in rewrites:
            if rewrite.query.casefold() not in seen and doubled_word(query.query, rewrite.query) is None:
                seen.add(rewrite.query.casefold())
                unique.append(rewrite)
        return unique

    @staticmethod
    def _swap(text: str, analysis: Analysis, language: str, entity: tuple[Entity, str] | None = None,
              aspect: Aspect | None = None) -> Rewrite:  # fmt: skip
        edits = []  # (start, end, replacement, record)
        english = language == "en"
        if entity is not None:
            match, (target, rule) = analysis.entity, entity
            name = natural_name(target, language)
            words = _match_case(match.text, agree_number(match.text, name) if english else name)
            edits.append((match.start, match.end, words, {
                "what": "entity", "type": target.type, "from": match.payload.name, "from_ui": match.payload.ui,
                "to": target.name, "to_ui": target.ui, "rule": rule, "text": match.text, "written": words,
                "span": [match.start, match.end]}))  # fmt: skip
        if aspect is not None:
            match = analysis.aspect
            words = _match_case(match.text, aspect.name)
            edits.append((match.start, match.end, words, {
                "what": "aspect", "type": aspect.type, "from": match.payload.name, "to": aspect.name,
                "text": match.text, "written": words, "span": [match.start, match.end]}))  # fmt: skip
        for start, end, words, record in sorted(edits, key=lambda e: -e[0]):
            prefix = text[:start]
            if english:
                prefix = agree_article(prefix, words)
                if record["what"] == "aspect":
                    prefix = agree_verb(prefix, record["text"], words)
            text = prefix + words + text[end:]
        kind = "both" if len(edits) == 2 else edits[0][3]["what"].replace("aspect", "attribute")
        return Rewrite(kind, text, [record for *_, record in sorted(edits, key=lambda e: e[0])])


_WORDS = re.compile(r"\w+")


def _written_again(query: str, match: Match) -> bool:
    """Is the matched text written elsewhere in the query too ("peak oxygen uptake reflect maximum
    oxygen uptake")? Replacing one mention would make the question compare the concept with another."""
    pattern = re.compile(rf"(?<!\w){re.escape(match.text)}(?!\w)", re.I)
    return any(found.start() != match.start for found in pattern.finditer(query))


ARTICLE_BEFORE = re.compile(r"\b(an|a)(\s+)$", re.IGNORECASE)
_AN_LETTERS = "aeiou"
_AN_INITIALS = "AEFHILMNORSX"  # letters whose name starts with a vowel sound: "an MRI", "an HIV test"


def agree_article(prefix: str, word: str) -> str:
    """`prefix` with an "a"/"an" that ends it made to agree with the words that now follow: "are they a
    etiology" -> "are they an etiology" ("an MRI" for initialisms; the article's case is kept), and no
    article before a plural ("are they a indications" -> "are they indications")."""
    match = ARTICLE_BEFORE.search(prefix)
    if match is None or not word:
        return prefix
    last = word.split()[-1]
    if last[-1:] == "s" and (singular := other_number(last)) is not None and not singular.endswith("s"):
        return prefix[: match.start(1)]  # "are they a risk factor" -> "are they indications": no article
    initialism = len(word) > 1 and word.split()[0].isupper()
    vowel = word[0] in _AN_INITIALS if initialism else word[0].lower() in _AN_LETTERS
    article = "an" if vowel else "a"
    written = match.group(1)
    article = article.upper() if written.isupper() and len(written) > 1 else article
    article = article[0].upper() + article[1:] if written[0].isupper() else article
    return prefix[: match.start(1)] + article + match.group(2)


VERB_BEFORE = re.compile(r"\b(is|are)(\s+(?:the\s+)?(?:\w+\s+){0,2})$", re.IGNORECASE)


def _head_is_plural(phrase: str) -> bool:
    """The number of an aspect phrase's head noun: "mechanism of action" (mechanism), "adverse effects"."""
    return is_plural(phrase.lower().split(" of ")[0])


def agree_verb(prefix: str, replaced: str, written: str) -> str:
    """`prefix` with an "is"/"are" just before the replaced aspect made to agree with the new one: "What
    are the side effects of X" -> "What is the mechanism of action of X"."""
    match = VERB_BEFORE.search(prefix)
    if match is None or _head_is_plural(replaced) == _head_is_plural(written):
        return prefix
    verb = "are" if _head_is_plural(written) else "is"
    verb = verb.capitalize() if match.group(1)[0].isupper() else verb
    return prefix[: match.start(1)] + verb + match.group(2)


def _distance(a: Match, b: Match) -> int:
    return max(a.start - b.end, b.start - a.end, 0)


def _match_case(original: str, replacement: str) -> str:
    if original.islower():
        return replacement.lower()
    if original[:1].isupper() and not original.isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


class NoiseGenerator:
    def __init__(self, client: SearchClient, address: str, lineage: dict, rewriter: QueryRewriter,
                 retrieval: RetrievalOptions, options: NoiseOptions, dedup: DedupOptions,
                 collected: dict[str, list[dict]] | None = None, provenance: dict | None = None,
                 judge=None, floor: float = DENSE_FLOOR, ceiling: float = ANSWER_CEILING):  # fmt: skip
        """`judge` (refkit.judge.Judge, optional): rejects candidates it scores as likely answers; `floor`: the
        MiniLM similarity to the question that makes a candidate naming none of its entities related
        (refkit.relatedness); `ceiling`: the similarity at which a candidate is taken for an answer."""
        self.client, self.address, self.lineage = client, address, lineage
        self.rewriter, self.retrieval, self.options, self.dedup = rewriter, retrieval, options, dedup
        self.collected = collected or {}
        self.provenance = provenance or {}
        self.judge = judge
        self.similarity = TextSimilarity()
        self.support = SupportTest(self.similarity)
        self.floor, self.ceiling = floor, ceiling

    def run(
        self, queries: list[QueryItem], batch: int = 32, progress: Callable[[int], None] | None = None
    ) -> Iterator[dict]:
        """`progress(n)`: called as searches finish (one per rewritten original and one per rewrite)."""
        analyses = [self.rewriter.analyse(q.query) for q in queries]
        candidates = [self.rewriter.swap_candidates(q, a) for q, a in zip(queries, analyses, strict=True)]
        wanted = [i for i, c in enumerate(candidates) if c]
        originals = search_many(
            self.client, self.address, [queries[i].query for i in wanted], self._retrieval(self.options.top_m), batch,
            progress, self.lineage,
        )  # fmt: skip
        top_m = dict(zip(wanted, originals, strict=True))
        searched: dict[str, list] = {}  # rewrite -> its hits; with support, every candidate swap is searched first
        if self.options.support:
            self._search_into(searched, [r.query for i in wanted for r in candidates[i]], batch, progress)
        supports: list[dict[str, dict]] = [{} for _ in queries]  # per query: rewrite -> refkit.support record
        checks = [self._support_check(query, analysis, searched, supports[index])
                  if candidates[index] and self.options.support else None
                  for index, (query, analysis) in enumerate(zip(queries, analyses, strict=True))]  # fmt: skip
        rewrites = [self.rewriter.rewrites(query, analysis, self.options, check)
                    for query, analysis, check in zip(queries, analyses, checks, strict=True)]  # fmt: skip
        self._search_into(searched, [r.query for chosen in rewrites for r in chosen], batch, progress)  # both at once
        for index, check in enumerate(checks):
            if check is not None:
                rewrites[index] = [r for r in rewrites[index] if check(r)]
        for index, (query, analysis) in enumerate(zip(queries, analyses, strict=True)):
            record = {"id": query.id, "query": query.query, **analysis.as_dict()}
            if not rewrites[index]:
                reason = ("no entity of the lexicon (of a type that is rewritten) in the query" if not candidates[index]
                          else "no swap the corpus supports (refkit.support)")  # fmt: skip
                yield {**record, "rewrites": [], "noise": [], "rejected": [], "skipped": reason, "shortfall": None,
                       **self._footer()}  # fmt: skip
                continue
            hits_per_rewrite = [searched[r.query] for r in rewrites[index]]
            support = [supports[index].get(r.query) for r in rewrites[index]]
            noise, rejected = self._filter(query, analysis, rewrites[index], top_m[index], hits_per_rewrite)
            shortfall = None
            if len(noise) < self.options.per_query:
                unrelated = sum(1 for r in rejected if r["reason"].startswith("unrelated"))
                shortfall = (f"{len(noise)} hard negatives: of the {len(rejected) + len(noise)} candidates the "
                             f"rewrites retrieved, the others may answer the question, duplicate what is kept, or are "
                             f"unrelated to it ({unrelated}); the corpus holds no more related references that "
                             f"cannot answer")  # fmt: skip
            yield {
                **record,
                "rewrites": [
                    {**r.as_dict(n), "support": s}
                    for n, (r, s) in enumerate(zip(rewrites[index], support, strict=True), 1)
                ],
                "noise": noise,
                "rejected": rejected,
                "skipped": None,
                "shortfall": shortfall,
                **self._footer(),
            }

    def _search_into(self, searched: dict[str, list], texts: list[str], batch: int, progress) -> None:
        """Retrieve every text not searched yet (candidates deep) into `searched`."""
        new = [t for t in dict.fromkeys(texts) if t not in searched]
        hits = search_many(self.client, self.address, new, self._retrieval(self.options.candidates), batch, progress,
                           self.lineage)  # fmt: skip
        searched.update(zip(new, hits, strict=True))

    def _support_check(self, query: QueryItem, analysis: Analysis, searched: dict[str, list],
                       records: dict[str, dict]) -> Callable[[Rewrite], bool]:  # fmt: skip
        """Does the corpus support a rewrite of this query (refkit.support)? Each rewrite is tested once and
        its record kept in `records`; a refused swap is listed among the query's refused swaps with rule
        `support`."""
        target: Entity = analysis.entity.payload
        context = [e for e in self._key_entities(query, analysis) if e.key != target.key and e.type in CONTEXT_TYPES]

        def supported(rewrite: Rewrite) -> bool:
            if rewrite.query not in records:
                record = records[rewrite.query] = self.support.check(
                    rewrite.query, self._evidence(rewrite, target, context), searched[rewrite.query]
                )
                if not record["supported"]:
                    to = " + ".join(edit["to"] for edit in rewrite.replaced)
                    analysis.refused_swaps.append({"to": to, "rule": "support", "why": f"unsupported: {record['why']}"})
            return records[rewrite.query]["supported"]

        return supported

    def _retrieval(self, k: int) -> RetrievalOptions:
        return RetrievalOptions(k, self.retrieval.corpora, self.retrieval.retrievers, self.retrieval.rrf_k,
                                fusion=self.retrieval.fusion)  # fmt: skip

    def _footer(self) -> dict:
        return {"params": {**self.options.as_dict(), "retrieval": self.retrieval.as_dict(), **self.provenance},
                "lineage": self.lineage["corpora"]}  # fmt: skip

    @staticmethod
    def _key_entities(query: QueryItem, analysis: Analysis) -> list[Entity]:
        """The entities a question is about: its non-generic entities in the part that asks (a vignette's
        findings are not what it asks about), of refkit.support.CONTEXT_TYPES where it names any ("Hospitals",
        "Mutation", "Plasma" set a question's scene; a text naming only them is not about it)."""
        asked_from = question_part(query.query)
        key = list({m.payload.key: m.payload for m in analysis.entities
                    if m.payload.key not in analysis.generic and m.start >= asked_from}.values())  # fmt: skip
        return [e for e in key if e.type in CONTEXT_TYPES] or key

    def _put_in(self, rewrite: Rewrite) -> list[Entity]:
        """The entities a rewrite's swap put in."""
        return [e for edit in rewrite.replaced if edit["what"] == "entity"
                and (e := self.rewriter.lexicon.get(edit["to"])) is not None]  # fmt: skip

    def _evidence(self, rewrite: Rewrite, target: Entity, context: list[Entity]) -> Evidence:
        put_in = self._put_in(rewrite)
        if put_in:
            return entity_evidence(put_in, context, self.rewriter.language)
        [edit] = [edit for edit in rewrite.replaced if edit["what"] == "aspect"]
        aspect = next(a for a in self.rewriter.aspects if a.name == edit["to"] and a.type == edit["type"])
        return aspect_evidence(aspect, target, self.rewriter.language)

    def _relatedness(self, query: QueryItem, analysis: Analysis, rewrites: list[Rewrite]) -> RelatednessTest:
        key = self._key_entities(query, analysis)
        swapped_in = {number: self._put_in(rewrite) for number, rewrite in enumerate(rewrites, 1)}
        return RelatednessTest(query.query, key, swapped_in, self.similarity, self.rewriter.language, self.floor,
                               ceiling=self.ceiling)  # fmt: skip

    def _filter(self, query: QueryItem, analysis: Analysis, rewrites: list[Rewrite], original_hits: list,
                hits_per_rewrite: list[list]):  # fmt: skip
        entity: Entity = analysis.entity.payload
        related = self._relatedness(query, analysis, rewrites)
        gold = [f"{r.get('title', '')} {r.get('content', '')}".strip() for r in self.collected.get(query.id, [])
                if r.get("label") == "relevant"]  # fmt: skip
        aspect: Aspect | None = None if analysis.aspect is None else analysis.aspect.payload
        pairing = PairingTest(entity, aspect, self.rewriter.language)
        original_rank = {hit.id: hit.rank for hit in original_hits}
        deduplicator = self.dedup.new()
        for reference in self.collected.get(query.id, []):
            deduplicator.add(reference["snippet_id"], reference.get("content", ""))
        for hit in original_hits:
            deduplicator.add(hit.id, hit.content)
        order = _round_robin(hits_per_rewrite)
        meta = self._meta([hit.id for _, hit in order if hit.id not in original_rank])
        noise, rejected, considered = [], [], set()
        for position, (rewrite_number, hit) in enumerate(order):
            if len(noise) >= self.options.per_query:
                break
            if hit.id in considered:
                continue
            considered.add(hit.id)
            where = {"snippet_id": hit.id, "rewrite": rewrite_number, "rewrite_rank": hit.rank}
            reason = None
            if hit.id in original_rank:
                reason = f"in the original query's top-{self.options.top_m} (rank {original_rank[hit.id]})"
            if reason is None:
                reason = pairing.check(f"{hit.title} {hit.content}")
            if reason is None:
                reason = mesh_pair(meta.get(hit.id, {}), entity, aspect)
            if reason is None:
                duplicate = deduplicator.match(hit.content)
                if duplicate is not None:
                    reason = (f"duplicate ({duplicate.kind}, Jaccard {duplicate.jaccard:.2f}) of "
                              f"{duplicate.of}")  # fmt: skip
            if reason is None and self.judge is not None:  # the model only sees what passed the cheaper tests
                judged = where["judge"] = self._judged(query.query, hit)
                if judged["score"] >= judged["threshold"]:
                    reason = (f"the judge ({judged['model']}) scores it {judged['score']:.4f}, at or above "
                              f"{judged['threshold']}: it may answer the original question")  # fmt: skip
            how = None
            if reason is None:
                self._embed_ahead(order, position, original_rank)
            if reason is None and gold:
                closest = max(self.similarity.cosine(f"{hit.title} {hit.content}", gold))
                if closest >= GOLD_CEILING:
                    reason = (f"likely answers: MiniLM similarity {closest:.2f} to a relevant reference of the "
                              f"question, at or above {GOLD_CEILING:.2f}")  # fmt: skip
            if reason is None:
                how, why = related.check(f"{hit.title} {hit.content}", rewrite_number)
                if how is None:
                    reason = why
            if reason is not None:
                rejected.append({**where, "reason": reason})
                continue
            deduplicator.add(hit.id, hit.content)
            kept_reason = (
                f"retrieved for rewrite {rewrite_number} at rank {hit.rank}; not in the original's "
                f"top-{self.options.top_m}; {pairing.describe()}; {mesh_description(entity, aspect)}; not a duplicate; "
                f"related: {why}"
            )
            noise.append({**reference_from_hit(hit, self.lineage), **where, "label": "irrelevant",
                          "origin": "noise", "reason": kept_reason,
                          "related": {"how": how.how, "entities": list(how.entities)}})  # fmt: skip
        if noise:
            pool = [f"{h.title} {h.content}".strip() for h in original_hits] + [f"{h.title} {h.content}".strip()
                                                                                for _, h in order] + gold  # fmt: skip
            bm25 = PoolBM25(pool)
            for kept in noise:
                text = f"{kept.get('title', '')} {kept.get('content', '')}".strip()
                kept["related"].update(similarity_record(query.query, text, gold, self.similarity, bm25))
        return noise, rejected

    def _embed_ahead(self, order: list, position: int, original_rank: dict, ahead: int = 16) -> None:
        """Embed the next candidates outside the original's top-M in one batch (a CPU encodes a batch
        several times faster than its texts one by one); the order is fixed, so the batches are too."""
        texts = [f"{hit.title} {hit.content}" for _, hit in order[position:] if hit.id not in original_rank][:ahead]
        self.similarity.vectors(texts)

    def _judged(self, question: str, hit) -> dict:
        """The judge's record (model, score, threshold) of one candidate."""
        [score] = self.judge.scores(question, [f"{hit.title} {hit.content}".strip()])
        return self.judge.record(score)

    def _meta(self, ids: list[str]) -> dict[str, dict]:
        """The meta (MeSH) of candidate snippets, from GetSnippets."""
        found: dict[str, dict] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            try:
                response = self.client.get_snippets(unique[start : start + 500])
            except grpc.RpcError as error:
                raise ServerError(describe_rpc_error(self.address, error)) from error
            for snippet in response.snippets:
                found[snippet.id] = json.loads(snippet.meta_json) if snippet.meta_json else {}
        return found


def _round_robin(hits_per_rewrite: list[list]) -> list[tuple[int, object]]:
    """(rewrite number, hit): rank 1 of every rewrite, then rank 2, ... so kept noise spans rewrites."""
    order = []
    for rank in range(max((len(h) for h in hits_per_rewrite), default=0)):
        for number, hits in enumerate(hits_per_rewrite, 1):
            if rank < len(hits):
                order.append((number, hits[rank]))
    return order


class PairingTest:
    """Does a text name the original entity together with the original aspect?"""

    def __init__(self, entity: Entity, aspect: Aspect | None, language: str = "en"):
        self.entity, self.aspect = entity, aspect
        forms = [(form, entity) for form in entity.surface_forms(language)]
        self._entity = PhraseMatcher(with_variants(forms, english=language == "en"))
        self._aspect = PhraseMatcher([(s, aspect) for s in aspect.synonyms]) if aspect else None

    def check(self, text: str) -> str | None:
        named = self._entity.find(text)
        if not named:
            return None
        if self._aspect is None:
            return f"names {self.entity.name} ('{named[0].text}') and the query has no aspect to tell answers apart"
        about = self._aspect.find(text)
        if about:
            return f"pairs {self.entity.name} ('{named[0].text}') with {self.aspect.name} ('{about[0].text}')"
        return None

    def describe(self) -> str:
        if self.aspect is None:
            return f"does not name {self.entity.name}"
        return f"does not pair {self.entity.name} with {self.aspect.name}"


def mesh_pair(meta: dict, entity: Entity, aspect: Aspect | None) -> str | None:
    """A reason if the record's MeSH carries (entity, a qualifier of the aspect)."""
    if aspect is None or not aspect.qualifiers:
        return None
    for heading in meta.get("mesh") or []:
        if (heading.get("name") or "").casefold() != entity.key:
            continue
        for qualifier in heading.get("qualifiers") or []:
            if (qualifier.get("name") or "").casefold() in aspect.qualifiers:
                return f"MeSH carries {heading['name']}/{qualifier['name']}"
    return None


def mesh_description(entity: Entity, aspect: Aspect | None) -> str:
    if aspect is None or not aspect.qualifiers:
        return "no MeSH pair to test"
    return f"MeSH has no {entity.name}/{'|'.join(aspect.qualifiers)}"
