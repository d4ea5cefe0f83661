"""refkit noise on real new questions over a realistic root (run_benchmarks.py --only noise).

The root (bench/noise_corpus.py) holds every gold snippet of BioASQ Task 7b-10b and 11b batches 2-4
(20,783 texts: each question's answers and thousands of texts on related entities), the 1,000 labelled
PubMedQA abstracts, and the demo's PubMed, StatPearls, textbook and Wikipedia samples, each with a store,
BM25 and MiniLM dense index, served by searchd. Task 11b batch 1 is not in the repository: it is the
project's unseen check. Questions: a seeded sample of `QUESTIONS` of the 2,237 BioASQ questions.

Steps, as a user runs them: `refkit lexicon --mesh-names --mesh ... --supplementary ... --server`, `refkit
collect` (the references the noise must not repeat, `--refs`, unlabelled as for a new question), `refkit
noise` at its defaults (twice: the two outputs must be byte-identical), `refkit audit` with the BioASQ
qrels (a kept gold snippet of the question is a leak) and the lexicon. A third run with every threshold
off (refkit.noise.filters.permissive) measures every candidate; `replay` decides it again at other
thresholds: the coverage-versus-precision curve. A fixed-seed sample of the default run's kept references
(docs/noise-review-sample.jsonl) is what a blind reader judges (docs/noise-review.md).
Returns markdown lines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np
import orjson

from medsnip.corpus import Corpus
from medsnip.irformats import read_qrels
from medsnip.snippet import iter_snippets
from refkit.noise.filters import replay
from refkit.noise.options import NoiseOptions
from refkit.noise.rewriter import QueryRewriter
from refkit.noise.subjects import question_name
from refkit.vocabulary.lexicon import read_lexicon
from refkit.vocabulary.matcher import NameMatcher, is_acronym, read_aspects, with_variants
from searchd.launch import start_background_server

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
QUESTIONS, QUESTION_SEED = 200, 35
NOISE_SEED = 13
SHEET_SIZE, SHEET_SEED = 60, 26
DEMO_SOURCES = ("pubmed", "pmc", "textbooks", "wikipedia")
# (answer ceiling, answer margin, entity floor, similarity floor); the first is the default
CURVE = (
    (0.55, 0.05, 0.40, 1.0),
    (0.45, 0.05, 0.40, 1.0),
    (0.60, 0.05, 0.40, 1.0),
    (0.55, 0.00, 0.40, 1.0),
    (0.55, 0.10, 0.40, 1.0),
    (0.55, 0.05, 0.35, 1.0),
    (0.55, 0.05, 0.45, 1.0),
    (0.55, 0.05, 0.40, 0.45),
    (0.60, 0.20, 0.30, 0.35),
)


def _run(*arguments, module: str = "refkit.cli") -> str:
    result = subprocess.run(
        [sys.executable, "-m", module, *map(str, arguments)], cwd=REPO, capture_output=True, text=True
    )
    if result.returncode:
        raise RuntimeError(f"{module} {' '.join(map(str, arguments))} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def bench_root(demo: Path, work: Path) -> Path:
    """The realistic root: BioASQ's gold snippets and PubMedQA's abstracts built and indexed here, the demo's
    other sources hard-linked (indexes built once, reused while their lineage matches)."""
    import noise_corpus

    root, beir = work / "root", work / "beir"
    noise_corpus.write_bioasq(beir / "bioasq")
    noise_corpus.write_pubmedqa(beir / "pubmedqa")
    for source in ("bioasq", "pubmedqa"):
        if not (root / source / "dense-minilm" / "build.json").is_file():
            print(f"noise bench: building and indexing {source}", flush=True)
            _run(
                "jsonl",
                beir / source / "corpus.jsonl",
                "--source",
                source,
                "--no-chunk",
                "--shards",
                4,
                "--out",
                root / source,
                "--quiet",
                module="corpusbuild",
            )
            for stage in (["store"], ["bm25"], ["dense", "--preset", "minilm"]):
                _run(stage[0], root / source, *stage[1:], module="indexer.cli")
    for source in DEMO_SOURCES:
        if not (root / source).exists():
            shutil.copytree(demo / source, root / source, copy_function=lambda a, b: Path(b).hardlink_to(a))
    return root


def _records(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _document(snippet_id: str) -> str:
    return snippet_id.split(":")[1] if snippet_id.count(":") >= 2 else snippet_id


def curve_rows(permissive: list[dict], qrels: dict, base: NoiseOptions) -> list[str]:
    """Coverage, kept per question, hard share and leak when the permissive run is decided at each setting."""
    rows = []
    for ceiling, margin, entity_floor, similarity_floor in CURVE:
        options = dataclasses.replace(
            base,
            answer_ceiling=ceiling,
            answer_margin=margin,
            entity_floor=entity_floor,
            similarity_floor=similarity_floor,
        )
        covered = kept = hard = leaked = aspect = 0
        for record in permissive:
            chosen = replay(record, options)
            gold = {doc for doc, grade in qrels.get(str(record["id"]), {}).items() if grade > 0}
            kinds = {r["number"]: r["kind"] for r in record["rewrites"]}
            kept += len(chosen)
            covered += len(chosen) >= 3
            hard += sum(1 for c in chosen if c["measured"]["names"]["kept"] or c["measured"]["names"]["put_in"])
            leaked += sum(1 for c in chosen if _document(c["snippet_id"]) in gold)
            aspect += sum(1 for c in chosen if kinds[c["rewrite"]] == "attribute")
        default = " (default)" if (ceiling, margin, entity_floor, similarity_floor) == CURVE[0] else ""
        rows.append(
            f"| {ceiling:.2f} | {margin:.2f} | {entity_floor:.2f} | {similarity_floor:.2f}{default} | "
            f"{covered / len(permissive):.0%} | {kept / len(permissive):.2f} | {aspect / max(kept, 1):.0%} | "
            f"{hard / max(kept, 1):.0%} | {leaked / max(kept, 1):.1%} |"
        )
    return rows


FILL_TO = (0, 1, 2, 3, 5)
WEAK_FLOOR = (-1.0, 0.25, 0.33, 0.40, 0.45)
BARE_KINDS = ("definition", "description", "fragment", "title")


def fill_rows(permissive: list[dict], base: NoiseOptions) -> list[str]:
    """What `--fill-to`, `--weak-floor` and `--related` trade: coverage against the share of kept texts from aspect
    rewrites and of bare kinds, the permissive run decided again at the default thresholds with each value of one
    of them, the others at their defaults."""
    settings = [dataclasses.replace(base, fill_to=f) for f in FILL_TO]
    settings += [dataclasses.replace(base, related=True, weak_floor=w) for w in WEAK_FLOOR]
    rows = []
    for options in settings:
        tiers = [0, 0, 0, 0]
        covered = aspect = bare = 0
        for record in permissive:
            chosen = replay(record, options)
            kinds = {r["number"]: r["kind"] for r in record["rewrites"]}
            covered += len(chosen) >= 3
            for candidate in chosen:
                tiers[candidate["tier"]] += 1
                aspect += kinds[candidate["rewrite"]] == "attribute"
                bare += candidate.get("text_kind") in BARE_KINDS
        kept = sum(tiers)
        default = " (default)" if options == base else ""
        floor = "none" if options.weak_floor < 0 else f"{options.weak_floor:.2f}"
        rows.append(
            f"| {options.fill_to} | {floor} | {'yes' if options.related else 'no'}{default} | "
            f"{covered / len(permissive):.0%} | {kept / len(permissive):.2f} | {' / '.join(map(str, tiers))} | "
            f"{aspect / max(kept, 1):.0%} | {bare / max(kept, 1):.0%} |"
        )
    return rows


def calibration_line(permissive: list[dict], qrels: dict) -> str:
    """How close to the original question the known answers the rewrites retrieve read, against the rest."""
    gold, other = [], []
    for record in permissive:
        answers = {doc for doc, grade in qrels.get(str(record["id"]), {}).items() if grade > 0}
        for candidate in record["noise"]:
            (gold if _document(candidate["snippet_id"]) in answers else other).append(
                candidate["measured"]["to_original"]
            )
    gold_array, other_array = np.array(gold or [0.0]), np.array(other or [0.0])
    ceiling = NoiseOptions().answer_ceiling
    return (
        f"Calibration on known answers: of the candidates the rewrites retrieved that do not name what the swap "
        f"replaced, {len(gold):,} are gold snippets of their own question; they read {np.median(gold_array):.2f} "
        f"close to it at the median (10th percentile {np.quantile(gold_array, 0.1):.2f}), the other "
        f"{len(other):,} {np.median(other_array):.2f} (90th percentile {np.quantile(other_array, 0.9):.2f}). The "
        f"ceiling {ceiling:.2f} rejects {(gold_array >= ceiling).mean():.0%} of those answers and "
        f"{(other_array >= ceiling).mean():.1%} of the rest."
    )


def ceiling_line(permissive: list[dict], qrels: dict) -> str:
    """What the corpus allows at most: the questions that keep 3 or more with every threshold off (only the rules
    no threshold moves: collected, duplicate, off-subject, the name tests), and of the others, those whose
    subject texts were all the question's own references or gold snippets."""
    covered = sum(1 for record in permissive if len(record["noise"]) >= 3)
    own_only = 0
    for record in permissive:
        if len(record["noise"]) >= 3 or not record.get("subjects"):
            continue
        rules = {r["rule"] for r in record["rejected"]}
        gold = {doc for doc, grade in qrels.get(str(record["id"]), {}).items() if grade > 0}
        if rules <= {"collected", "duplicate", "off-subject", "may-answer", "rank"} and all(
            _document(c["snippet_id"]) in gold for c in record["noise"]
        ):
            own_only += 1
    n = len(permissive)
    return (
        f"What this root allows at most: with every threshold off, {covered} of {n} questions ({covered / n:.0%}) "
        f"keep 3 or more; of the rest, {own_only} have a subject whose only texts here are the question's own "
        "references or gold snippets (each BioASQ question brought its gold snippets into the root; a subject "
        "no other question asked about has no other text), and the others name no subject the corpus writes."
    )


REACHABLE = 3  # texts naming a question's subject or a sibling for the root to hold enough for 3 kept references
_WORD_START = re.compile(r"(?<!\w)\w")
_WORD_END = re.compile(r"\w(?!\w)")


def question_names(record: dict, lexicon, rewriter: QueryRewriter) -> set[str]:
    """The names a text may give the question's subjects and their same-class siblings: each subject as the
    record names it and as the question writes it, every name of the lexicon's entity (or, for a subject the
    lexicon lacks, the names refkit.noise.subjects.question_name gives it), and every name of the siblings the
    swap rules let stand in for the question's targets."""
    names: set[str] = set()
    for subject in record["subjects"]:
        start, end = subject["span"]
        written = record["query"][start:end]  # the subject's text without the article the record keeps
        names |= {subject["entity"], written}
        entity = lexicon.get(subject["entity"])
        if entity is None and subject["origin"] == "name":
            entity = question_name(written)
        if entity is not None:
            names.update(entity.surface_forms())
    analysis = rewriter.analyse(record["query"])
    present = {m.payload.key for m in analysis.entities}
    for target in analysis.targets:
        for sibling, _ in rewriter.entity_candidates(target.entity, present):
            names.update(sibling.surface_forms())
    return {name for name in names if name.strip()}


def _phrase_key(form: str) -> tuple[bool, str]:
    """The phrase as NameMatcher keys it: acronyms as written, every other name lower-cased."""
    acronym = is_acronym(form)
    return acronym, " ".join((form if acronym else form.lower()).split())


def questions_matcher(names: dict[str, set[str]]) -> NameMatcher:
    """One NameMatcher over every question's names (`names`: question id -> names), each phrase's payload the
    frozenset of questions it names. NameMatcher keeps the first payload of a phrase given twice, and a variant
    it adds (a plural, a hyphen dropped) may be another question's name: so the questions are merged per phrase
    here, with the variants."""
    by_phrase: dict[tuple[bool, str], set[str]] = defaultdict(set)
    written: dict[tuple[bool, str], str] = {}
    for question, forms in names.items():
        for form in forms:
            if is_acronym(form):
                variants = [form, form + "s"] if form[-1:].isupper() else [form]  # NameMatcher's acronym plural
            else:
                variants = [variant for variant, _ in with_variants([(form, None)])]
            for variant in variants:
                key = _phrase_key(variant)
                by_phrase[key].add(question)
                written.setdefault(key, variant)
    return NameMatcher([(written[key], frozenset(by_phrase[key])) for key in sorted(by_phrase)])


class NamedIn:
    """The questions whose names a text writes, every name counted even where another overlaps it. NameMatcher
    keeps the longest name at each place and none overlapping it, so "non-small cell lung cancer" hides "lung
    cancer" and "breast cancer cells" hides "cancer cells": the names inside a match are found in the match's
    own text (once per distinct text), those starting inside it and running past it by matching again from each
    of its words."""

    def __init__(self, matcher: NameMatcher, longest: int):
        self.matcher = matcher
        self.reach = longest + 16  # a name with possessives written in it still ends before this
        self.inside = cache(self._inside)

    def _inside(self, written: str) -> frozenset[str]:
        """The questions of every name in `written` (a match's text), itself included."""
        starts = [m.start() for m in _WORD_START.finditer(written)]
        ends = [m.end() for m in _WORD_END.finditer(written)]
        found: set[str] = set()
        for start in starts:
            for end in ends:
                if end > start:
                    for match in self.matcher.find(written[start:end]):
                        found |= match.payload
        return frozenset(found)

    def __call__(self, text: str) -> set[str]:
        found: set[str] = set()
        for match in self.matcher.find(text):
            found |= self.inside(match.text)
            for word in _WORD_START.finditer(text, match.start + 1, match.end):
                cut = text.find(" ", word.start() + self.reach)
                again = self.matcher.find(text[word.start() : cut if cut >= 0 else len(text)])
                if again and again[0].start == 0 and word.start() + again[0].end > match.end:
                    found |= self.inside(again[0].text)
        return found


def root_texts(root: Path) -> Iterator[tuple[str, str]]:
    """(snippet id, title and content) of every snippet of every source in the root."""
    for folder in sorted(path for path in root.iterdir() if (path / "build.json").is_file()):
        for shard in Corpus.open(folder).shards:
            for snippet in iter_snippets(shard.path):
                yield snippet["id"], f"{snippet.get('title') or ''} {snippet.get('content') or ''}".strip()


def collected_references(refs: Path | None) -> dict[str, set[str]]:
    """Question id -> the snippet ids `refkit collect` gave it (`--refs`: the noise may not repeat them)."""
    if refs is None or not refs.is_file():
        return {}
    return {
        str(record["id"]): {reference["snippet_id"] for reference in record.get("references", [])}
        for record in map(orjson.loads, refs.read_bytes().splitlines())
    }


def _cell(text: str, limit: int) -> str:
    """`text` fit for a table cell: one line, no column bar, at most `limit` characters."""
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def reachable_rows(
    records: list[dict], lexicon_path: Path, root: Path, qrels: dict, refs: Path | None = None
) -> tuple[dict[str, dict], list[str]]:
    """Which questions the root could cover: per question, whether it holds `REACHABLE` or more texts outside the
    question's gold (and its collected references, `refs`) that name its subject or a same-class sibling
    ("reachable"), coverage among the reachable questions, and every reachable question that keeps fewer
    than `REACHABLE` with the stop its record gives. Texts are counted once per distinct wording (BioASQ brings
    one sentence in under several questions). Returns (question id -> {reachable, texts, kept}, markdown
    lines)."""
    lexicon = read_lexicon(lexicon_path)
    rewriter = QueryRewriter(lexicon, read_aspects(), "en")
    names = {str(record["id"]): question_names(record, lexicon, rewriter) for record in records}
    named_in = NamedIn(questions_matcher(names), max((len(n) for found in names.values() for n in found), default=0))
    gold = {str(r["id"]): {doc for doc, grade in qrels.get(str(r["id"]), {}).items() if grade > 0} for r in records}
    collected = collected_references(refs)
    wordings: dict[str, int] = {}
    naming: dict[str, set[int]] = defaultdict(set)
    excluded: dict[str, set[int]] = defaultdict(set)
    copies: dict[int, list[str]] = defaultdict(list)  # wording -> the snippet ids that write it
    for snippet_id, text in root_texts(root):
        found = named_in(text)
        if not found:
            continue
        wording = wordings.setdefault(" ".join(text.casefold().split()), len(wordings))
        copies[wording].append(snippet_id)
        document = _document(snippet_id)
        for question in found:
            naming[question].add(wording)
            # a copy of a gold text or a collected reference is that text: every copy is left out
            if document in gold[question] or snippet_id in collected.get(question, ()):
                excluded[question].add(wording)
    per_question = {}
    for record in records:
        question = str(record["id"])
        reachable_texts = naming[question] - excluded[question]
        per_question[question] = {
            "reachable": len(reachable_texts) >= REACHABLE,
            "texts": len(reachable_texts),
            "kept": len(record["noise"]),
            "fates": text_fates(record, [copies[w] for w in sorted(reachable_texts)]),
        }
    return per_question, reachable_lines(records, per_question)


def text_fates(record: dict, texts: list[list[str]]) -> Counter:
    """What the noise run did with each text naming the question's subject or a sibling (`texts`: the snippet ids
    of each distinct wording): `kept`, the rule and test that rejected it (`may-answer/retrieved-for-original`:
    the original question finds it, so it is about the original situation), or `not retrieved` by any rewrite."""
    kept = {n["snippet_id"] for n in record["noise"]}
    rejected = {r["snippet_id"]: f"{r['rule']}/{r.get('test')}" for r in record["rejected"]}
    fates: Counter = Counter()
    for ids in texts:
        if any(i in kept for i in ids):
            fates["kept"] += 1
        else:
            fates[next((rejected[i] for i in ids if i in rejected), "not retrieved")] += 1
    return fates


def reachable_lines(records: list[dict], per_question: dict[str, dict]) -> list[str]:
    """The report of `reachable_rows`: the counts, then a table of the reachable questions short of 3."""
    reachable = [r for r in records if per_question[str(r["id"])]["reachable"]]
    short = [r for r in reachable if len(r["noise"]) < REACHABLE]
    covered = len(reachable) - len(short)
    n, all_covered = len(records), sum(len(r["noise"]) >= REACHABLE for r in records)
    lines = [
        f"Reachable questions: {len(reachable)} of {n} have {REACHABLE} or more texts in the root, outside their gold "
        "snippets and collected references, that name their subject or a same-class sibling (every name of the "
        f"lexicon's entity; distinct wordings). {covered} of them keep {REACHABLE} or more: coverage among reachable "
        f"questions {covered / max(len(reachable), 1):.0%}, among all {all_covered / max(n, 1):.0%}."
    ]
    if short:
        fates = sum((per_question[str(r["id"])]["fates"] for r in short), Counter())
        lines += [
            "",
            f"Why the reachable questions that keep fewer than {REACHABLE} do: what the run did with the "
            f"{sum(fates.values()):,} texts naming their subject or a sibling: "
            + ", ".join(f"{fate} {count}" for fate, count in fates.most_common())
            + ". `may-answer/retrieved-for-original`: the original question itself retrieves the text (a text on "
            "the same subject it finds is written about its situation: the leak the rule prevents); `not "
            "retrieved`: no rewrite of the question (nor its subject's name) retrieves it; the others are the "
            "candidate rules of refkit.noise.filters. Per question, with the stop its record gives:",
            "",
            "| question | text | kept | texts naming subject or sibling | what became of them | stopped (stage/rule) |",
            "|---|---|---:|---:|---|---|",
        ]
        for record in short:
            stop = record.get("stopped") or {}
            where = f"{stop['stage']}/{stop['rule']}" if stop else "none recorded"
            found = per_question[str(record["id"])]
            became = ", ".join(f"{fate} {count}" for fate, count in found["fates"].most_common())
            lines.append(
                f"| {record['id']} | {_cell(record['query'], 90)} | {len(record['noise'])} | {found['texts']} | "
                f"{_cell(became, 200)} | {where} |"
            )
    return lines


def review_sample(records: list[dict], destination: Path) -> int:
    """A fixed-seed sample of kept references with only what a blind reader sees: question, rewrite, text."""
    kept = []
    for record in records:
        rewrites = {r["number"]: r["query"] for r in record["rewrites"]}
        for reference in record["noise"]:
            kept.append(
                {
                    "id": record["id"],
                    "snippet_id": reference["snippet_id"],
                    "question": record["query"],
                    "rewrite": rewrites[reference["rewrite"]],
                    "text": f"{reference['title']} {reference['content']}".strip()[:900],
                }
            )
    chosen = random.Random(SHEET_SEED).sample(kept, min(SHEET_SIZE, len(kept)))
    lines = [json.dumps({"item": n, **item}, ensure_ascii=False) for n, item in enumerate(chosen, 1)]
    destination.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(chosen)


def sample_kinds(records: list[dict], sample: Path) -> dict[int, str]:
    """item -> the kind of rewrite that retrieved it (not in the sheet the reader sees)."""
    kinds = {}
    by_key = {}
    for record in records:
        rewrites = {r["number"]: r for r in record["rewrites"]}
        for reference in record["noise"]:
            by_key[str(record["id"]), reference["snippet_id"]] = rewrites[reference["rewrite"]]["kind"]
    for line in sample.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        kinds[item["item"]] = by_key.get((str(item["id"]), item["snippet_id"]), "unknown")
    return kinds


def judged_summary(sample: Path, judged: Path, kinds: dict[int, str] | None = None) -> str:
    """The blind reader's verdicts on the sample, if they judged this very sample (same items, same
    questions and references)."""
    if not judged.is_file():
        return "The sample has not been judged yet."
    verdicts = [json.loads(line) for line in judged.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]

    def key(item: dict) -> tuple:
        return item["item"], item["id"], item["snippet_id"], item["rewrite"]

    if sorted(map(key, verdicts)) != sorted(map(key, items)):
        return "The judged sheet is of an earlier sample; judge docs/noise-review-sample.jsonl again."
    n = len(verdicts)
    names = ("sensible", "answers", "hard", "bare")
    count = {name: sum(1 for v in verdicts if v.get(name) == "yes") for name in names}
    line = (
        f"Blind reading of the {n} sampled kept references (docs/noise-review.md): {count['sensible']}/{n} "
        f"sensible rewrites ({count['sensible'] / n:.0%}), {count['hard']}/{n} hard negatives "
        f"({count['hard'] / n:.0%}), {count['bare']}/{n} bare definitions or fragments ({count['bare'] / n:.0%}), "
        f"{count['answers']}/{n} answering the original ({count['answers'] / n:.0%})."
    )
    if kinds:
        for kind, label in (("attribute", "aspect rewrites"), ("entity", "entity rewrites")):
            mine = [v for v in verdicts if kinds.get(v["item"]) == kind]
            if mine:
                per = {name: sum(1 for v in mine if v.get(name) == "yes") for name in names}
                line += (
                    f" Of the {len(mine)} from {label}: sensible {per['sensible']}, hard {per['hard']}, bare "
                    f"{per['bare']}, answering {per['answers']}."
                )
    return line


def noise_section(demo: Path, work: Path) -> list[str]:
    """The section's lines (see the module's docstring)."""
    import noise_corpus

    work.mkdir(parents=True, exist_ok=True)
    root = bench_root(demo, work)
    questions_path, qrels_path = work / "questions.tsv", work / "beir" / "bioasq" / "qrels.tsv"
    questions = dict(
        line.split("\t", 1)
        for line in (work / "beir" / "bioasq" / "queries.tsv").read_text(encoding="utf-8").splitlines()
    )
    sample = noise_corpus.question_sample(questions, QUESTIONS, QUESTION_SEED)
    questions_path.write_text("".join(f"{q}\t{body}\n" for q, body in sample), encoding="utf-8")
    qrels = read_qrels(qrels_path)
    process, address = start_background_server(root)
    try:
        lexicon, refs = work / "lexicon.tsv", work / "refs.jsonl"
        started = time.perf_counter()
        _run(
            "lexicon",
            "--mesh-names",
            "--mesh",
            SAMPLES / "mesh" / "meshrdf-desc-samples.xml",
            "--supplementary",
            SAMPLES / "mesh" / "meshrdf-supp-samples.xml",
            "--server",
            address,
            "--out",
            lexicon,
        )
        lexicon_seconds = time.perf_counter() - started
        _run("collect", questions_path, "--server", address, "--k", 16, "--out", refs)
        outputs, seconds = [], []
        for run in (1, 2):
            out = work / f"noise-{run}.jsonl"
            started = time.perf_counter()
            _run(
                "noise",
                questions_path,
                "--server",
                address,
                "--lexicon",
                lexicon,
                "--seed",
                NOISE_SEED,
                "--refs",
                refs,
                "--out",
                out,
            )
            seconds.append(time.perf_counter() - started)
            outputs.append(out)
        identical = outputs[0].read_bytes() == outputs[1].read_bytes()
        permissive_path = work / "noise-permissive.jsonl"
        _run(
            "noise",
            questions_path,
            "--server",
            address,
            "--lexicon",
            lexicon,
            "--seed",
            NOISE_SEED,
            "--refs",
            refs,
            "--answer-ceiling",
            1,
            "--answer-margin",
            1,
            "--entity-floor",
            -1,
            "--similarity-floor",
            -1,
            "--original-rank",
            0,
            "--reference-ceiling",
            1,
            "--per-query",
            1_000_000,
            "--fill-to",
            1_000_000,
            "--weak-floor",
            -1,
            "--related",
            "--out",
            permissive_path,
        )
        audit = json.loads(_run("audit", outputs[0], "--qrels", qrels_path, "--lexicon", lexicon, "--json"))
        by_rule = _run("audit", outputs[0], "--qrels", qrels_path, "--lexicon", lexicon, "--by-rule")
    finally:
        process.terminate()
        process.wait(timeout=60)
    records, permissive = _records(outputs[0]), _records(permissive_path)
    sample_path = REPO / "docs" / "noise-review-sample.jsonl"
    sampled = review_sample(records, sample_path)
    (REPO / "docs" / "noise-rejections-by-rule.md").write_text(
        "# refkit noise: candidates rejected per rule, per question (`refkit audit --by-rule`, the bench's "
        "default run)\n\n" + by_rule,
        encoding="utf-8",
    )
    n = audit["questions"]
    per_question = audit["kept"] / n
    kinds = sample_kinds(records, sample_path)
    stops = ", ".join(f"{rule} {count}" for rule, count in audit["stopped"].items())
    digest = hashlib.sha256(outputs[0].read_bytes()).hexdigest()[:16]
    _, reachable = reachable_rows(records, lexicon, root, qrels, refs)
    bare_kept = sum(audit["kept_text_kinds"].get(kind, 0) for kind in BARE_KINDS)
    return [
        "## refkit noise on a realistic root",
        "",
        f"Root: the gold snippets of BioASQ 7b-10b and 11b batches 2-4 (20,783 texts), 1,000 PubMedQA abstracts and "
        f"the demo samples, BM25 + MiniLM, served by searchd. Questions: {QUESTIONS} BioASQ questions drawn with "
        f"seed {QUESTION_SEED} (Task 11b batch 1 is not in the repository). Lexicon: every MeSH name with the shipped "
        f"2015 trees and 2018 pharmacological actions, the real MeSH slices, and the names the served texts give "
        f"({lexicon_seconds:.0f} s). `refkit collect --k 16` gives `--refs`; noise at its defaults, seed "
        f"{NOISE_SEED}: {seconds[0]:.0f} s ({seconds[0] / n:.2f} s a question; the second run, vectors cached, "
        f"{seconds[1]:.0f} s).",
        "",
        "| questions | with a target | 3+ kept | kept per question | hard share | leak | generic swaps | "
        "byte-identical twice |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| {n} | {audit['with_target']} ({audit['with_target'] / n:.0%}) | "
        f"{audit['covered']} ({audit['coverage']:.0%}) "
        f"| {per_question:.2f} | {audit['hard_share'] or 0:.0%} | {audit['leaked']}/{audit['judged_kept']} "
        f"({audit['leak_rate'] or 0:.1%}) | {len(audit['generic_swaps'])} | {'yes' if identical else 'NO'} "
        f"(sha256 {digest}) |",
        "",
        "| rewrites (aspect / entity) | kept from aspect rewrites | kept from entity rewrites | aspect share | "
        "kept by tier (same-subject / situation / related / bare) | kept text kinds |",
        "|---|---:|---:|---:|---|---|",
        f"| {audit['rewrites_by_kind'].get('attribute', 0)} / {audit['rewrites_by_kind'].get('entity', 0)} | "
        f"{audit['kept_by_rewrite_kind'].get('attribute', 0)} | {audit['kept_by_rewrite_kind'].get('entity', 0)} | "
        f"{audit['aspect_share'] or 0:.0%} | "
        f"{' / '.join(str(audit['kept_tiers'].get(str(t), 0)) for t in range(4))} | "
        f"{', '.join(f'{k} {v}' for k, v in audit['kept_text_kinds'].items())} |",
        "",
        f"Definitions, descriptions, fragments and titles: {bare_kept} of {audit['kept']} kept "
        f"({bare_kept / max(audit['kept'], 1):.0%}). Entity swaps by the class that justified them: "
        f"{audit['swap_classes']}; cross-class swaps (refkit audit: a swap whose record shows no class both entities "
        f"share): {len(audit['cross_class_swaps'])}; rewrites asking the aspect the question asks or carrying an "
        f"unchecked premise: {len(audit['frame_problems'])}; targets that are the question's answer type: "
        f"{len(audit['answer_type_targets'])}; stops hiding a subject no served text names: "
        f"{len(audit['hidden_absences'])}.",
        "",
        f"Where questions stopped short of 3 (stage/rule, from the records): {stops}. Entity swaps by rule: "
        f"{audit['entity_swap_rules']}. Candidates rejected by rule: {audit['rejected_by_rule']} (per question: "
        "docs/noise-rejections-by-rule.md).",
        "",
        ceiling_line(permissive, qrels),
        "",
        *reachable,
        "",
        "Coverage against precision over the thresholds (the permissive run decided again by "
        "refkit.noise.filters.replay; hard share = kept texts naming an entity of the question the rewrite kept or "
        "the one it put in; leak = kept gold snippets of the question):",
        "",
        "| answer ceiling | answer margin | entity floor | similarity floor | 3+ kept | kept per question | "
        "from aspect rewrites | names a question entity | leak |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *curve_rows(permissive, qrels, NoiseOptions()),
        "",
        "What `--fill-to`, `--weak-floor` and `--related` trade (an entity swap's texts, bare definitions and "
        "fragments of the question's subject and, with `--related`, texts related to a rewrite by one name fill a "
        "question up to `--fill-to`, the last two from `--weak-floor` close to the original question; the same "
        "permissive run decided again at the default thresholds):",
        "",
        "| --fill-to | --weak-floor | --related | 3+ kept | kept per question | kept by tier (same-subject / "
        "situation / related / bare) | from aspect rewrites | bare kinds |",
        "|---:|---:|---|---:|---:|---|---:|---:|",
        *fill_rows(permissive, NoiseOptions()),
        "",
        calibration_line(permissive, qrels),
        "",
        f"{sampled} kept references of the default run drawn with seed {SHEET_SEED}: docs/noise-review-sample.jsonl, "
        "read blind by two readers under the brief of docs/noise-review-prompt.md (verdicts: "
        "docs/noise-review-judged.jsonl and docs/noise-review-judged-second.jsonl; the sheet: docs/noise-review.md). "
        "First reader: "
        + judged_summary(sample_path, REPO / "docs" / "noise-review-judged.jsonl", kinds)
        + " Second reader: "
        + judged_summary(sample_path, REPO / "docs" / "noise-review-judged-second.jsonl", kinds),
        "",
    ]
