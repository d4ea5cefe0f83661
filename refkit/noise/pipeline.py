"""refkit noise as one pipeline of named stages, question by question.

1. targets and subjects: the question's mentions and the ones a swap may replace (refkit.noise.targets), and
   the subjects an aspect rewrite keeps (refkit.noise.subjects); a subject the vocabulary lacks is searched,
   kept only if the served corpus writes it, and given the kind its texts tell where its name does not;
2. swaps: per subject, the other aspects its kind has (CRAB's aspect replacement); per target, the siblings
   that pass the swap rules (refkit.noise.siblings, rewriter), and the names a reader proposes
   (refkit.readers), checked by the same rules;
3. retrieve and support: every candidate rewrite is searched; a swap is kept only if the corpus supports it
   (refkit.noise.support), and, with a reader asked about sense, only if it calls the rewrite sensible; the seed
   chooses among the accepted ones;
4. filter: the hits of the chosen rewrites, round robin (rank 1 of each, then rank 2, ...), through the
   candidate filters (refkit.noise.filters), until enough of the closest kinds passed or `examined` did;
5. rank: the best `per_query` of what passed, by how close each is to the question's situation, one per
   document, the weak tiers only up to `fill_to` and `weak_floor` close to the question (refkit.noise.ranking);
6. record: what each stage found, refused and why, every candidate's rule and measured values, and, when
   fewer than `per_query` were kept, the stage and rule that stopped the question (refkit.noise.records).

Everything that chooses is seeded by (seed, question id) and every list is in a fixed order, so the same
queries, lexicon, seed and index lineage give byte-identical output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import grpc

from medsnip.queries import QueryItem
from refkit.connection import server_error
from refkit.curation.collect import DedupOptions, RetrievalOptions, reference_from_hit, search_many
from refkit.noise.answers import AnswerTest
from refkit.noise.filters import (
    Candidate,
    CollectedReference,
    Duplicate,
    MayAnswerByName,
    MayAnswerBySimilarity,
    OffSubject,
    QuestionFacts,
    Unrelated,
    related_how,
)
from refkit.noise.options import NoiseOptions
from refkit.noise.premises import carried_premises, premise_problem
from refkit.noise.ranking import TIERS, choose, document_key, text_kind, tier
from refkit.noise.records import stop_reason
from refkit.noise.rewriter import QueryRewriter
from refkit.noise.sense import question_part
from refkit.noise.subjects import Subject, kind_from_texts
from refkit.noise.support import CONTEXT_TYPES, Evidence, SupportTest, aspect_evidence, entity_evidence
from refkit.noise.targets import Analysis, question_phrases
from refkit.noise.writing import Rewrite
from refkit.text_similarity import PoolBM25, TextSimilarity, similarity_record
from refkit.vocabulary.lexicon import Entity
from refkit.vocabulary.matcher import NameMatcher, PhraseMatcher
from searchd.client import SearchClient

CHUNK = 32  # questions whose searches go to the server together
OWN_REFERENCES = 16  # without --refs, the original question's best hits stand for its references
SUBJECT_CANDIDATES = 20  # texts retrieved for a subject's name to see whether the corpus writes it


class NoiseGenerator:
    def __init__(
        self,
        client: SearchClient,
        address: str,
        lineage: dict,
        rewriter: QueryRewriter,
        retrieval: RetrievalOptions,
        options: NoiseOptions,
        dedup: DedupOptions,
        collected: dict[str, list[dict]] | None = None,
        provenance: dict | None = None,
        judge=None,
        reader=None,
    ):
        """`collected`: the question's references from `--refs` (never kept as noise; those labelled relevant
        are the known answers the `gold` test compares with); `judge` (refkit.noise.judge.Judge): a model for the
        may-answer decision's `judge` test; `reader` (refkit.readers.Reader): the user's reader, for the tasks
        it was given."""
        self.client, self.address, self.lineage = client, address, lineage
        self.rewriter, self.retrieval, self.options, self.dedup = rewriter, retrieval, options, dedup
        self.collected = collected or {}
        self.provenance = provenance or {}
        self.judge, self.reader = judge, reader
        if reader is not None and "swaps" in reader.tasks:
            rewriter.proposer = lambda question, entity: reader.swaps(question, entity.name, entity.type)
        self.similarity = TextSimilarity()
        self.support = SupportTest(self.similarity)
        self._aspect_matchers: dict[tuple[str, str], PhraseMatcher] = {}

    def run(
        self, queries: list[QueryItem], batch: int = 32, progress: Callable[[int], None] | None = None
    ) -> Iterator[dict]:
        """One record per query, in order. `progress(n)`: called as searches finish."""
        for start in range(0, len(queries), CHUNK):
            yield from self._chunk(queries[start : start + CHUNK], batch, progress)

    def _chunk(self, queries: list[QueryItem], batch: int, progress) -> Iterator[dict]:
        analyses = [self.rewriter.analyse(q.query) for q in queries]
        searched: dict[str, list] = {}
        subjects = [self.rewriter.subjects(q.query, a) for q, a in zip(queries, analyses, strict=True)]
        refused_subjects = self._settle_subjects(subjects, searched, batch, progress)
        for analysis, found in zip(analyses, subjects, strict=True):
            analysis.subjects = found
        candidates = [
            self.rewriter.swap_candidates(q, a, s) for q, a, s in zip(queries, analyses, subjects, strict=True)
        ]
        if self.options.support:  # every candidate swap is searched before any is chosen
            self._search_into(searched, [r.query for swaps in candidates for r in swaps], batch, progress)
        supports: list[dict[str, dict]] = [{} for _ in queries]
        senses: list[dict[str, dict]] = [{} for _ in queries]
        rewrites = []
        for index, (query, analysis) in enumerate(zip(queries, analyses, strict=True)):
            check = self._support_check(query, analysis, searched, supports[index]) if self.options.support else None
            if self.reader is not None and "sense" in self.reader.tasks:
                check = self._sense_check(query, analysis, check, senses[index])
            paired_first = (
                (lambda r, records=supports[index]: 0 if records[r.query].get("level") == "paired" else 1)
                if self.options.support
                else None
            )
            rewrites.append(self.rewriter.rewrites(query, analysis, self.options, check, paired_first))
        self._search_into(searched, [r.query for chosen in rewrites for r in chosen], batch, progress)
        self._search_into(
            searched, [q.query for q, chosen in zip(queries, rewrites, strict=True) if chosen], batch, progress
        )
        by_name: dict[str, list] = {}  # a subject's name alone, searched as deep as a rewrite
        self._search_into(
            by_name,
            [_subject_query(r.subject) for chosen in rewrites for r in chosen if r.subject is not None],
            batch,
            progress,
        )
        for index, (query, analysis) in enumerate(zip(queries, analyses, strict=True)):
            record = {
                "id": query.id,
                "query": query.query,
                **analysis.as_dict(),
                "subjects": [subject.as_dict() for subject in subjects[index]],
                "refused_subjects": refused_subjects[index],
            }
            chosen = rewrites[index]
            noise, rejected = (
                self._filter(
                    query, analysis, chosen, [searched[r.query] for r in chosen], searched[query.query], by_name
                )
                if chosen
                else ([], [])
            )
            record.update(
                {
                    "swaps_searched": len(supports[index]) if self.options.support else None,
                    "rewrites": [
                        {**r.as_dict(n), "support": supports[index].get(r.query), **_sense(senses[index], r)}
                        for n, r in enumerate(chosen, 1)
                    ],
                    "noise": noise,
                    "rejected": rejected,
                }
            )
            record["stopped"] = stop_reason(record, self.options.per_query, len(candidates[index]))
            record["skipped"] = record["stopped"]["why"] if record["stopped"] and not chosen else None
            yield {**record, **self._footer()}

    def _settle_subjects(
        self, subjects: list[list[Subject]], searched: dict[str, list], batch: int, progress
    ) -> list[list[dict]]:
        """Keep a subject the vocabulary lacks only if texts retrieved for its name write it, and give a subject
        of unknown kind the kind those texts tell (refkit.noise.subjects.kind_from_texts); the refused ones
        per question, with their rule."""
        unsettled = [s for found in subjects for s in found if s.origin == "name" or s.kind is None]
        names = {s: _subject_query(s) for s in unsettled}
        self._search_into(searched, list(names.values()), batch, progress, SUBJECT_CANDIDATES)
        refused: list[list[dict]] = [[] for _ in subjects]
        for index, found in enumerate(subjects):
            kept = []
            for subject in found:
                if subject in names:
                    writes = NameMatcher([(f, subject.entity) for f in subject.entity.surface_forms()], True)
                    texts = [f"{h.title} {h.content}" for h in searched[names[subject]]]
                    texts = [t for t in texts if writes.find(t)]
                    subject.corpus_texts = len(texts)
                    if not texts:
                        refused[index].append(
                            _refusal(subject, "not-in-corpus", "no served text retrieved for it writes it")
                        )
                        continue
                    if subject.kind is None:
                        subject.kind = kind_from_texts(subject.name, texts)
                        if subject.kind is None:
                            refused[index].append(
                                _refusal(
                                    subject,
                                    "no-kind",
                                    f"neither its name nor the {len(texts)} texts writing it tell what it is",
                                )
                            )
                            continue
                        self.rewriter.settle_asked(subject)
                kept.append(subject)
            found[:] = kept
        return refused

    def _search_into(
        self, searched: dict[str, list], texts: list[str], batch: int, progress, depth: int | None = None
    ) -> None:
        """Retrieve every text not searched yet (`candidates` deep, or `depth`) into `searched`."""
        new = [t for t in dict.fromkeys(texts) if t not in searched]
        retrieval = RetrievalOptions(
            depth or self.options.candidates,
            self.retrieval.corpora,
            self.retrieval.retrievers,
            self.retrieval.rrf_k,
            fusion=self.retrieval.fusion,
        )
        hits = search_many(self.client, self.address, new, retrieval, batch, progress, self.lineage)
        searched.update(zip(new, hits, strict=True))

    def _support_check(
        self, query: QueryItem, analysis: Analysis, searched: dict[str, list], records: dict[str, dict]
    ) -> Callable[[Rewrite], bool]:
        """Does the corpus support a rewrite (refkit.noise.support)? Each rewrite is tested once, its record kept
        in `records`; a refused swap is listed among the refused swaps with rule `unsupported`."""
        key = self._key_entities(query, analysis)

        def supported(rewrite: Rewrite) -> bool:
            if rewrite.query not in records:
                target = (
                    rewrite.subject.entity if rewrite.subject is not None else analysis.targets[rewrite.target].entity
                )
                context = [e for e in key if e.key != target.key and e.type in CONTEXT_TYPES]
                record = records[rewrite.query] = self.support.check(
                    rewrite.query, self._evidence(rewrite, target, context), searched[rewrite.query]
                )
                if record["supported"] and rewrite.kind == "entity" and self.rewriter.english:
                    record = records[rewrite.query] = self._premises_held(
                        query.query, analysis, rewrite, searched[rewrite.query], record
                    )
                if not record["supported"]:
                    edit = rewrite.replaced[0]
                    rule = record.get("rule", "unsupported")
                    analysis.refused_swaps.append(
                        {
                            "target": edit["from"],
                            "to": edit["to"],
                            "rule": rule,
                            "why": record["why"] if rule == "premise" else f"unsupported: {record['why']}",
                        }
                    )
            return records[rewrite.query]["supported"]

        return supported

    def _premises_held(self, query: str, analysis: Analysis, rewrite: Rewrite, hits: list, record: dict) -> dict:
        """The support record of an entity swap, refused when it carries a count or defining feature over to the
        new entity that no retrieved text states of it (refkit.noise.premises); the premises it checked are
        recorded."""
        mention = analysis.targets[rewrite.target].mention
        premises = carried_premises(query, (mention.start, mention.end))
        put_in = self._put_in(rewrite)
        if not premises or not put_in:
            return record
        problem = premise_problem(premises, put_in[0], [f"{h.title} {h.content}" for h in hits])
        checked = {**record, "premises": [p.words for p in premises]}
        return checked if problem is None else {**checked, "supported": False, "rule": "premise", "why": problem}

    def _sense_check(
        self, query: QueryItem, analysis: Analysis, before: Callable[[Rewrite], bool] | None, verdicts: dict[str, dict]
    ) -> Callable[[Rewrite], bool]:
        """`before` (the support check), then the reader's sense verdict on what passed it: anything but yes
        refuses the swap with rule `reader-sense` (in advise mode the verdict is only recorded)."""

        def sensible(rewrite: Rewrite) -> bool:
            if before is not None and not before(rewrite):
                return False
            if rewrite.query not in verdicts:
                verdict = verdicts[rewrite.query] = self.reader.sense(query.query, rewrite.query)
                if verdict["answer"] != "yes" and self.reader.mode == "decide":
                    edit = rewrite.replaced[0]
                    analysis.refused_swaps.append(
                        {
                            "target": edit["from"],
                            "to": edit["to"],
                            "rule": "reader-sense",
                            "why": f"reader-sense: {verdict['reader']} answered {verdict['answer']} "
                            f"to whether {rewrite.query!r} is a sensible question",
                        }
                    )
            return verdicts[rewrite.query]["answer"] == "yes" or self.reader.mode != "decide"

        return sensible

    def _evidence(self, rewrite: Rewrite, target: Entity, context: list[Entity]) -> Evidence:
        put_in = self._put_in(rewrite)
        if put_in:
            return entity_evidence(put_in, context, self.rewriter.language)
        aspect = self._new_aspect(rewrite)
        subject = rewrite.subject.entity if rewrite.subject is not None else target
        return aspect_evidence(aspect, subject, self.rewriter.language)

    def _new_aspect(self, rewrite: Rewrite):
        edit = rewrite.replaced[0]
        return next(a for a in self.rewriter.aspects if a.name == edit["to"] and a.type == edit["type"])

    def _put_in(self, rewrite: Rewrite) -> list[Entity]:
        return [
            e
            for edit in rewrite.replaced
            if edit["what"] == "entity" and (e := self.rewriter.lexicon.get(edit["to"])) is not None
        ]

    def _footer(self) -> dict:
        return {
            "params": {**self.options.as_dict(), "retrieval": self.retrieval.as_dict(), **self.provenance},
            "lineage": self.lineage["corpora"],
        }

    @staticmethod
    def _key_entities(query: QueryItem, analysis: Analysis) -> list[Entity]:
        """The entities a question is about: its non-generic entities in the part that asks, of
        refkit.noise.support.CONTEXT_TYPES where it names any ("Hospitals", "Mutation" set a question's scene)."""
        asked_from = question_part(query.query)
        key = list(
            {
                m.payload.key: m.payload
                for m in analysis.entities
                if m.payload.key not in analysis.generic and m.start >= asked_from
            }.values()
        )
        return [e for e in key if e.type in CONTEXT_TYPES] or key

    def _facts(self, query: QueryItem, analysis: Analysis, rewrites: list[Rewrite]) -> QuestionFacts:
        key = self._key_entities(query, analysis)
        swaps, kept, put_in, phrases, asked = {}, {}, {}, {}, {}
        asked_of = {s.entity.key: s.asked for s in analysis.subjects}
        for number, rewrite in enumerate(rewrites, 1):
            entity_swap = rewrite.kind == "entity"
            if rewrite.subject is not None:  # an aspect rewrite: the subject kept, another aspect asked
                subject = rewrite.subject
                swaps[number] = {
                    "replaced": None,
                    "target": subject.entity,
                    "aspect": subject.asked,
                    "new_aspect": self._new_aspect(rewrite),
                    "definitional": subject.definitional,
                    "subject": subject.entity,
                    "situation": [e for e in key if e.key != subject.entity.key],
                }
                kept[number] = [subject.entity, *(e for e in key if e.key != subject.entity.key)]
                put_in[number] = []
                phrases[number] = question_phrases(query.query, []) if self.rewriter.english else []
                continue
            target = analysis.targets[rewrite.target]
            asked[number] = target.aspect.payload if target.aspect is not None else asked_of.get(target.entity.key)
            new_aspect = None if entity_swap else self._new_aspect(rewrite)
            swaps[number] = {
                "replaced": target.entity if entity_swap else None,
                "target": target.entity,
                "aspect": None if target.aspect is None else target.aspect.payload,
                "new_aspect": new_aspect,
            }
            kept[number] = [e for e in key if not (entity_swap and e.key == target.entity.key)]
            put_in[number] = self._put_in(rewrite)
            replaced = target.mention if entity_swap else target.aspect
            phrases[number] = (
                question_phrases(query.query, [(replaced.start, replaced.end)]) if self.rewriter.english else []
            )
        collected = {r["snippet_id"] for r in self.collected.get(query.id, [])}
        return QuestionFacts(collected, swaps, kept, put_in, phrases, asked)

    def _filter(
        self,
        query: QueryItem,
        analysis: Analysis,
        rewrites: list[Rewrite],
        hits_per_rewrite: list[list],
        original_hits: list,
        by_name: dict[str, list] | None = None,
    ) -> tuple[list[dict], list[dict]]:
        """The kept and rejected candidates of one question. An aspect rewrite's candidates are its own hits, then
        the texts its subject's name retrieves (`by_name`) that speak of the rewrite's aspect: a subject few texts
        name is rarely among the hits of a question about one of its aspects, which general texts on that aspect
        fill."""
        facts = self._facts(query, analysis, rewrites)
        gold = [
            f"{r.get('title', '')} {r.get('content', '')}".strip()
            for r in self.collected.get(query.id, [])
            if r.get("label") == "relevant"
        ]
        own = [f"{r.get('title', '')} {r.get('content', '')}".strip() for r in self.collected.get(query.id, [])]
        own = own or [f"{h.title} {h.content}".strip() for h in original_hits[:OWN_REFERENCES]]
        answers = AnswerTest(
            query.query,
            self.similarity,
            self.rewriter.language,
            gold,
            self.judge,
            self.reader,
            own,
            self.rewriter.entity_matcher,
            frozenset(m.payload.key for m in analysis.entities),
        )
        deduplicator = self.dedup.new()
        for reference in self.collected.get(query.id, []):
            deduplicator.add(reference["snippet_id"], reference.get("content", ""))
        duplicate = Duplicate(deduplicator)
        by_similarity = MayAnswerBySimilarity(answers)
        filters = (
            CollectedReference(facts),
            duplicate,
            OffSubject(facts, self.rewriter.language),
            MayAnswerByName(answers, facts, {hit.id: hit.rank for hit in original_hits}),
            by_similarity,
            Unrelated(facts, self.rewriter.language),
        )
        hits_per_rewrite, via_name = self._with_subject_texts(rewrites, hits_per_rewrite, by_name or {})
        order = _round_robin(hits_per_rewrite)
        meta = self._meta([hit.id for _, hit in order])
        # the filters before the similarity test that decide a text alone (not `duplicate`, which depends on what
        # was kept): a text they refuse is never embedded
        lexical = [rule for rule in filters[: filters.index(by_similarity)] if rule is not duplicate]
        ahead = _LookAhead(order, lambda n, hit: Candidate(hit, n, rewrites[n - 1], meta.get(hit.id, {})), lexical)
        passed, rejected, considered, examined = [], [], set(), 0
        for position, (number, hit) in enumerate(order):
            close = sum(1 for c in passed if c["tier"] <= 1)
            if close >= self.options.per_query or examined >= self.options.examined:
                break
            if hit.id in considered:
                continue
            considered.add(hit.id)
            candidate = Candidate(hit, number, rewrites[number - 1], meta.get(hit.id, {}))
            where = {"snippet_id": hit.id, "rewrite": number, "rewrite_rank": hit.rank, "order": position}
            if (number, hit.id) in via_name:
                where["via"] = "subject-name"
            verdict = None
            for rule in filters:
                if rule is by_similarity:
                    self.similarity.vectors(ahead.texts_from(position, self.options))
                    examined += 1
                rule.measure(candidate)
                verdict = rule.decide(candidate.measured, self.options)
                if verdict is not None:
                    break
            if verdict is not None:
                rejected.append({**where, **verdict.as_dict(), "measured": candidate.measured})
                continue
            duplicate.keep(candidate)
            how = related_how(candidate.measured, self.options)
            names = candidate.measured["names"]
            kind = text_kind(candidate.text)
            reference = reference_from_hit(hit, self.lineage)
            passed.append(
                {
                    **reference,
                    **where,
                    "label": "irrelevant",
                    "origin": "noise",
                    "measured": candidate.measured,
                    "reason": _kept_reason(rewrites[number - 1], hit.rank, candidate.measured, how),
                    "related": {"how": how, "entities": names["kept"] + names["put_in"]},
                    "text_kind": kind,
                    "chars": len(candidate.text),
                    "tier": tier(kind, rewrites[number - 1].kind, candidate.measured),
                    "rewrite_kind": rewrites[number - 1].kind,
                    "document": document_key(reference, candidate.meta),
                }
            )
        noise, aside = choose(
            passed, self.options.per_query, self.options.fill_to, self.options.weak_floor, self.options.related
        )
        for kept in noise:
            if kept["tier"] == TIERS.index("bare"):
                kept["note"] = f"a bare text ({kept['text_kind']}), kept as nothing closer passed for this question"
        for candidate in aside:
            rejected.append(
                {
                    **{key: candidate[key] for key in ("snippet_id", "rewrite", "rewrite_rank", "order")},
                    "rule": "rank",
                    "test": candidate["why"],
                    "reason": _aside_reason(candidate, self.options),
                    "measured": candidate["measured"],
                    "tier": candidate["tier"],
                }
            )
        if noise:
            pool = [f"{h.title} {h.content}".strip() for _, h in order] + gold
            bm25 = PoolBM25(pool)
            for kept in noise:
                text = f"{kept.get('title', '')} {kept.get('content', '')}".strip()
                kept["related"].update(similarity_record(query.query, text, gold, self.similarity, bm25))
        return noise, rejected

    def _with_subject_texts(
        self, rewrites: list[Rewrite], hits_per_rewrite: list[list], by_name: dict[str, list]
    ) -> tuple[list[list], set[tuple[int, str]]]:
        """Each aspect rewrite's hits followed by its subject's name hits that are not among them and write one of
        the rewrite's new aspect's phrases; the (rewrite number, snippet id) pairs so added."""
        extended, added = [], set()
        for number, (rewrite, hits) in enumerate(zip(rewrites, hits_per_rewrite, strict=True), 1):
            named = by_name.get(_subject_query(rewrite.subject), []) if rewrite.subject is not None else []
            if not named:
                extended.append(hits)
                continue
            aspect = self._aspect_phrases(self._new_aspect(rewrite))
            own = {hit.id for hit in hits}
            extra = [h for h in named if h.id not in own and aspect.find(f"{h.title} {h.content}")]
            added.update((number, h.id) for h in extra)
            extended.append([*hits, *extra])
        return extended, added

    def _aspect_phrases(self, aspect) -> PhraseMatcher:
        """A matcher of the words that say a text speaks of `aspect`, built once per aspect for the run."""
        key = (aspect.type, aspect.name)
        if key not in self._aspect_matchers:
            self._aspect_matchers[key] = PhraseMatcher([(phrase, True) for phrase in aspect.phrases])
        return self._aspect_matchers[key]

    def _meta(self, ids: list[str]) -> dict[str, dict]:
        """The meta (MeSH) of candidate snippets, from GetSnippets."""
        found: dict[str, dict] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            try:
                response = self.client.get_snippets(unique[start : start + 500])
            except grpc.RpcError as error:
                raise server_error(self.address, error) from error
            for snippet in response.snippets:
                found[snippet.id] = json.loads(snippet.meta_json) if snippet.meta_json else {}
        return found


def _subject_query(subject: Subject) -> str:
    """What is searched to see whether the corpus writes a subject: its name alone."""
    return subject.entity.name


def _refusal(subject: Subject, rule: str, why: str) -> dict:
    return {"text": subject.text, "kind": subject.kind, "rule": rule, "why": f"{rule}: {subject.text!r}: {why}"}


def _sense(verdicts: dict[str, dict], rewrite: Rewrite) -> dict:
    """The reader's sense verdict for a chosen rewrite's record (nothing when no reader was asked)."""
    return {"sense": verdicts[rewrite.query]} if rewrite.query in verdicts else {}


def _aside_reason(candidate: dict, options: NoiseOptions) -> str:
    """Why ranking set a candidate that passed every filter aside (refkit.noise.ranking.choose)."""
    if candidate["why"] == "same-document":
        return "another text of its document was kept"
    if candidate["why"] == "related":
        return "related to its rewrite by one name or similarity only, not by the question's subject or situation"
    if candidate["why"] == "bare-sibling":
        return f"a bare text ({candidate['text_kind']}) on the entity a swap put in, not on the question's subject"
    if candidate["why"] == "far":
        return (
            f"a {TIERS[candidate['tier']]} text ({candidate['text_kind']}) reading "
            f"{candidate['measured']['to_original']:.2f} close to the original question, under {options.weak_floor}"
        )
    if candidate["why"] == "weak-tier":
        return (
            f"{options.fill_to} were kept, and a {TIERS[candidate['tier']]} text ({candidate['text_kind']}) only "
            f"fills a question up to {options.fill_to}"
        )
    return (
        f"{options.per_query} closer to the question's situation were kept (tier {candidate['tier']}, "
        f"{candidate['text_kind']})"
    )


def _kept_reason(rewrite: Rewrite, rank: int, measured: dict, how: str) -> str:
    names = measured["names"]["kept"] + measured["names"]["put_in"]
    related = (
        f"names {', '.join(names)}" if how == "entity" else "by similarity"
    ) + f", {measured['to_rewrite']:.2f} close to the rewrite"
    return (
        f"retrieved for the rewrite {rewrite.query!r} at rank {rank}; may not answer the original: it does not "
        f"name what the swap replaced and reads {measured['to_original']:.2f} close to the original question; "
        f"related: {related}"
    )


class _LookAhead:
    """The texts to embed in one batch when a candidate reaches the similarity test: its own and those of the next
    candidates that the text-alone filters (`lexical`) let through, up to `BATCH` (a CPU encodes a batch several
    times faster than its texts one by one). On the realistic bench three in four candidates are refused by a
    name test before any similarity is measured; embedding them all would be most of a question's time. Vectors
    are independent of their batch (refkit.vector_cache), so what is measured is the same."""

    BATCH = 16

    def __init__(self, order: list, make_candidate, lexical: list):
        """`make_candidate(rewrite number, hit)`: a fresh refkit.noise.filters.Candidate."""
        self.order, self.make_candidate, self.lexical = order, make_candidate, lexical
        self.scanned = 0  # positions before this one were scanned, and those that pass were embedded

    def texts_from(self, position: int, options: NoiseOptions) -> list[str]:
        """The texts to embed now that the candidate at `position` reaches the similarity test (none when an
        earlier batch covered it)."""
        if position < self.scanned:
            return []
        texts, seen = [], set()
        at = position
        while at < len(self.order) and len(texts) < self.BATCH:
            number, hit = self.order[at]
            at += 1
            if hit.id in seen:
                continue
            seen.add(hit.id)
            candidate = self.make_candidate(number, hit)
            if at - 1 == position or self._passes(candidate, options):
                texts.append(candidate.text)
        self.scanned = at
        return texts

    def _passes(self, candidate, options: NoiseOptions) -> bool:
        for rule in self.lexical:
            rule.measure(candidate)
            if rule.decide(candidate.measured, options) is not None:
                return False
        return True


def _round_robin(hits_per_rewrite: list[list]) -> list[tuple[int, object]]:
    """(rewrite number, hit): rank 1 of every rewrite, then rank 2, ... so kept noise spans rewrites."""
    order = []
    for rank in range(max((len(h) for h in hits_per_rewrite), default=0)):
        for number, hits in enumerate(hits_per_rewrite, 1):
            if rank < len(hits):
                order.append((number, hits[rank]))
    return order
