"""A question's subject, its kind and the aspect the question asks of it: what an aspect rewrite keeps.

CRAB makes most of its noise by keeping a question's subject and asking another aspect of it ("the mechanism
of action of oseltamivir" -> "the indications of oseltamivir"): the texts that answer the rewrite are about the
same drug, read like answers and are not. That needs no vocabulary entry for the subject, only its name:

- **the subject** is the question's named thing, in this order: a target the question asks an aspect of
  (refkit.noise.targets); a name the vocabulary lacks (`name_spans`: a code or symbol such as "LB-100",
  "STAMP2", "p300"; a capitalised or hyphenated multiword name, "Cobb-Stainsby excision arthroplasty", "4D-CHAINS
  algorithm", "Sideritis scardica"; a name written with its abbreviation, "common variable immunodeficiency
  (CVID)"; the whole of what a definitional question asks about, "the microgenderome"), where it holds a
  refused mention or none; then the other targets. A name is a subject only if the served corpus writes it
  (refkit.noise.pipeline searches it; `Subject.corpus_texts`), which is also where an unknown kind is read
  from (`kind_from_texts`);
- **its kind** picks the aspects that may be asked of it (refkit/aspects.tsv): the lexicon's type, else what
  its head word tells ("syndrome": disease, "algorithm" or "-Seq": method, a symbol: gene, an INN stem: drug,
  "Genus species": organism), else the aspect its question asks (only drugs have a mechanism of action), else
  the words of the texts that name it;
- **the asked aspect** is the aspect phrase the question writes of it, or the one whose `asked by` pattern the
  rest of the question matches (the longest match: "approved for" asks indications, not approval);
  a definitional question ("What is X?", "Describe X") asks for X itself, which any other aspect departs from.

`aspect_choices` lists the aspects an aspect rewrite may ask instead: of the subject's kind, with a question
to write, neither the asked aspect nor one `close` to it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from refkit.noise.sense import AUXILIARY, FUNCTION_WORDS, everyday_word, question_part
from refkit.noise.targets import ANSWER_TYPE, Analysis
from refkit.vocabulary.drug_stems import drug_words
from refkit.vocabulary.gene_symbols import is_symbol
from refkit.vocabulary.lexicon import Entity
from refkit.vocabulary.matcher import Aspect, is_plural, other_number
from refkit.vocabulary.word_frequency import english_zipf

MAX_SUBJECTS = 2
SPECIFIC_KINDS = ("drug", "gene", "procedure", "method")  # more specific than a disease they are given or seen in
SETTING_KINDS = ("disease", "anatomy", "process")  # where those are given or studied: their setting beside them
# what stands before a disease that a drug or procedure is given for, or a gene studied in
SITUATION_BEFORE = re.compile(
    r"\b(?:in|for|with|against|treat(?:s|ed|ing)?|treatment\s+of|therapy\s+of|management\s+of)\s+"
    r"(?:(?:the|a|an)\s+)?(?:(?:patients?|adults?|children|people|individuals|subjects|women|men)\s+with\s+)?$",
    re.IGNORECASE,
)
BROAD_DESCENDANTS = 60  # under one tree number: "Leukemia" has 45 kinds, "Vaccines" 117, "Transcription Factors" 390
PATHOGEN_TREES = ("B03", "B04", "B01.300")  # bacteria, viruses, fungi: what infects, spreads and resists
MOLECULAR_PROCESS_TREES = ("G02", "G03", "G04", "G05", "G06")  # chemical, metabolic, cellular, genetic, microbial
CELLULAR_TREES = ("A10", "A11", "A15")  # tissues, cells and their structures, blood and immune cells
CELL_TREES = ("A11", "A15.145")  # cells, blood cells
CELL_STRUCTURE_TREES = ("A11.284",)  # inclusion bodies, organelles, membranes: what a cell holds
PROTEIN_TREES = ("D08", "D12")  # enzymes, proteins: asked of as genes are, not as drugs
DRUG_TREES = ("D20", "D26", "D27")  # vaccines, pharmaceutical preparations, pharmacologic actions and uses
DRUG_ORIGINS = ("drug-names", "inn-stem")
# what names a study, a body, a company or a place rather than a thing a question asks aspects of
NOT_A_SUBJECT_HEADS = frozenset(
    "trial trials study studies cohort consortium project union guideline guidelines society association "
    "committee university hospital institute fda ema agency administration pharmaceuticals pharma therapeutics "
    "biosciences biotech biologics laboratories inc ltd corp corporation company".split()
)
CATEGORY_WORDS = frozenset(
    "dna rna cells cell tissue tissues antigen antigens mutation mutations genome genomes patients snp 2d 3d 4d".split()
)
METHOD_HEADS = frozenset(
    "algorithm algorithms method methods tool tools software package packages database databases protocol "
    "protocols assay assays technique techniques pipeline pipelines framework server score scores index scale "
    "questionnaire questionnaires classifier program programme model indexer engine engines platform app "
    "sequencing seq test tests".split()
)
GENE_HEADS = frozenset(
    "gene genes protein proteins receptor receptors kinase kinases factor factors enzyme enzymes channel "
    "transporter domain complex co-activator coactivator activator repressor ligase phosphatase".split()
)
DISEASE_HEADS = frozenset(
    "disease diseases syndrome syndromes disorder disorders deficiency cancer cancers carcinoma carcinomas "
    "lymphoma leukemia leukaemia tumor tumors tumour tumours infection infections dystrophy sclerosis fibrosis "
    "anemia anaemia neoplasm neoplasms sarcoma sarcomas melanoma myeloma glioma glioblastoma adenoma aneurysm "
    "aneurysms uveitis dermatitis hepatitis arthritis dementia epilepsy palsy ataxia myopathy neuropathy triad "
    "encephalopathy".split()
)
PROCEDURE_HEADS = frozenset(
    "arthroplasty surgery resection excision transplantation transplant therapy radiotherapy radiosurgery "
    "ablation implantation biopsy vaccination screening".split()
)
ORGANISM_HEADS = frozenset("virus viruses bacteria bacterium fungus yeast parasite prion prions phage".split())
DISEASE_SUFFIXES = ("itis", "emia", "aemia", "pathy", "osis", "oma", "omas")
# words whose count in the texts naming a subject tells its kind when nothing else does
KIND_WORDS = {
    "drug": frozenset("dose doses patients trial trials treatment treated approved drug therapy mg efficacy".split()),
    "gene": frozenset("gene genes protein expression cells binding domain transcription mice knockout".split()),
    "disease": frozenset(
        "patients disease syndrome symptoms diagnosis prevalence clinical disorder case lesions lesion findings".split()
    ),
    "method": frozenset("algorithm method software data tool accuracy performance implemented sequencing".split()),
    "organism": frozenset("infection strain strains pathogen isolates bacterial virus viral host transmission".split()),
}
MIN_KIND_WORDS = 2
PROCESS_HEADS = frozenset(
    "methylation acetylation phosphorylation ubiquitination splicing transcription translation replication "
    "apoptosis autophagy senescence differentiation proliferation signaling signalling inflammation".split()
)

_ADJECTIVE = re.compile(r"\w{3,}(al|ic|ous|ary|ive|ior|ile|oid|ar)$")
_CODE = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w]*(?:[-/][\w]+)*(?![\w-])")
_CAPITALISED = re.compile(r"(?<![\w'-])[A-Z][\w'’]*(?:[-–][\w]+)*")
_WORD = re.compile(r"[\w'’]+(?:[-–/][\w'’]+)*")
_ABBREVIATION_AFTER = re.compile(r"\s*\(([^()]{2,12})\)")
_PREPOSITION = re.compile(r"\b(of|with|in|for|between|on|to|from|by|about|after)\b", re.IGNORECASE)
_DEFINITIONAL = re.compile(
    r"^\s*(?:(?:what|who)\s+(?:is|are|was|were)(?:\s+known\s+about)?|describe|summari[sz]e|define|explain|"
    r"what\s+do\s+you\s+know\s+about|give\s+an?\s+(?:brief\s+)?(?:overview|description|summary)\s+of)\s+"
    r"(?:(?:a|an|the)\s+)?(?P<rest>.+?)\s*[?.]?\s*$",
    re.IGNORECASE,
)


@dataclass(eq=False)  # one subject of one question: compared and hashed by identity
class Subject:
    text: str  # as the question writes it, with the article before it when there is one ("the protein protamine 2")
    start: int
    end: int
    entity: Entity  # the lexicon's, or one named by the text (origin "question-name")
    kind: str | None  # a type of refkit/aspects.tsv, None until the corpus tells
    origin: str  # "target" | "name"
    asked: Aspect | None = None
    definitional: bool = False
    corpus_texts: int | None = None  # texts retrieved for it that write it (names: set by the pipeline)
    query: str = ""  # the question it is the subject of
    situation: str = ""  # the disease the question gives it for ("migraine" of "Is lasmiditan effective for ...")

    @property
    def name(self) -> str:
        return self.entity.name

    def as_dict(self) -> dict:
        return {
            "text": self.text,
            "span": [self.start, self.end],
            "entity": self.entity.name,
            "kind": self.kind,
            "origin": self.origin,
            "asked": "definition" if self.definitional else (self.asked.name if self.asked else None),
            **({"corpus_texts": self.corpus_texts} if self.corpus_texts is not None else {}),
            **({"situation": self.situation} if self.situation else {}),
        }


def _head(text: str) -> str:
    words = _WORD.findall(text)
    return words[-1].lower() if words else ""


def kind_of_name(text: str) -> str | None:
    """The kind a name's own words tell, or None."""
    head = _head(text)
    words = _WORD.findall(text)
    if head in METHOD_HEADS or head.endswith("-seq") or re.search(r"-seq$", text, re.I):
        return "method"
    if head in DISEASE_HEADS or (len(head) > 5 and head.endswith(DISEASE_SUFFIXES) and not is_symbol(words[-1])):
        return "disease"
    if head in PROCEDURE_HEADS:
        return "procedure"
    coded = any(c.isdigit() for c in head)
    if (
        head in GENE_HEADS
        or (words and is_symbol(words[-1]))
        or (coded and any(w.lower() in GENE_HEADS for w in words))
    ):
        return "gene"
    if head in ORGANISM_HEADS:
        return "organism"
    if head in PROCESS_HEADS:
        return "process"
    if drug_words(text):
        return "drug"
    return None


def kind_from_texts(name: str, texts: list[str]) -> str | None:
    """The kind the words of the texts naming a subject tell (the most counted kind's words, at least
    `MIN_KIND_WORDS`), or None."""
    counts: Counter = Counter()
    for text in texts:
        words = set(re.findall(r"[a-z]+", text.lower()))
        for kind, cue in KIND_WORDS.items():
            counts[kind] += len(words & cue)
    if not counts:
        return None
    order = list(KIND_WORDS)  # a tie goes to the kind listed first
    kind, best = max(counts.items(), key=lambda kv: (kv[1], -order.index(kv[0])))
    return kind if best >= MIN_KIND_WORDS else None


def kind_of_entity(entity: Entity, written: str) -> str | None:
    """The kind of a lexicon entity for its aspects: its type, where the aspects of that type fit what it is
    (a drug is something given to patients: a pharmacological action, an INN stem, a drug tree; a protein or
    enzyme otherwise typed a drug is asked of as a gene; organisms only pathogens; processes only molecular
    and cellular ones), else what its written name tells."""
    from refkit.vocabulary.drug_stems import stem_of

    trees = entity.trees
    if entity.type == "drug":
        if (
            entity.actions
            or stem_of(entity.name)
            or entity.origin in DRUG_ORIGINS
            or any(t.startswith(DRUG_TREES) for t in trees)
        ):
            return "drug"
        if trees and all(t.startswith(PROTEIN_TREES) for t in trees if t.startswith("D")):
            return "gene"
        return kind_of_name(written)
    if entity.type == "organism":
        return "organism" if any(t.startswith(PATHOGEN_TREES) for t in trees) else None
    if entity.type == "process":
        return "process" if any(t.startswith(MOLECULAR_PROCESS_TREES) for t in trees) else None
    if entity.type == "procedure" and kind_of_name(written) == "method":
        return "method"
    if entity.type == "gene" and any(t.startswith("A") for t in trees):
        return "anatomy"  # "Nucleosomes": a cell structure, though MeSH also files it among proteins
    if entity.type == "anatomy":  # cells, tissues and cell structures have a function and a make-up; body parts not
        return "anatomy" if any(t.startswith(CELLULAR_TREES) for t in trees) else None
    if entity.type in ("disease", "gene", "procedure"):
        return entity.type
    return None


def _with_article(query: str, start: int, end: int) -> int:
    """Where a subject's words begin when an article stands before them and the subject ends its noun phrase
    ("the Smith–Waterman algorithm"; not "the Orkambi" of "the Orkambi pill")."""
    before = re.search(r"\b(the|a|an)\s+$", query[:start], re.IGNORECASE)
    after = re.match(r"\s*([\w-]+)", query[end:])
    if before is None or (after and after.group(1).lower() not in FUNCTION_WORDS and not after.group(1)[0].isupper()):
        return start
    return before.start(1)


def _extend(query: str, start: int, end: int, floor: int) -> tuple[int, int]:
    """The span grown over the name words around it: capitalised words, codes and hyphenated words, and
    lower-case words up to a head word ("ice-binding protein" in "the Leucosporidium ice-binding protein"),
    never over a function word or punctuation."""
    tokens = [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(query)]
    inside = [i for i, (s, e, _) in enumerate(tokens) if s < end and e > start]
    if not inside:
        return start, end
    first, last = inside[0], inside[-1]

    def namely(word: str) -> bool:
        return word[:1].isupper() or any(c.isdigit() for c in word) or "-" in word or "–" in word

    while first > 0 and tokens[first - 1][0] >= floor:
        word = tokens[first - 1][2]
        if word.lower() in FUNCTION_WORDS or not (namely(word) or word.lower() in GENE_HEADS):
            break
        if tokens[first - 1][0] == floor and not _name_at_start(word):
            break  # the question's first word ("Describe", "Has") is capitalised as any first word is
        if query[tokens[first - 1][1] : tokens[first][0]].strip():
            break
        first -= 1
    heads = METHOD_HEADS | GENE_HEADS | DISEASE_HEADS | PROCEDURE_HEADS | NOT_A_SUBJECT_HEADS
    while last + 1 < len(tokens):
        word = tokens[last + 1][2]
        between = query[tokens[last][1] : tokens[last + 1][0]]
        if between.strip() or word.lower() in FUNCTION_WORDS:
            break
        if namely(word) or word.lower() in heads or _binomial(tokens[last][2], word, last == first):
            last += 1
            continue
        ahead = _head_within(tokens, last + 1, query, heads)  # "the NLM medical text indexer": up to its head
        if ahead is None:
            break
        last = ahead
    return tokens[first][0], max(end, tokens[last][1])


def _name_at_start(word: str) -> bool:
    """Is the capitalised first word of a question a name ("Losigamone can be used ...") rather than a word
    capitalised because it comes first ("Describe", "List")?"""
    return any(c.isdigit() or c.isupper() for c in word[1:]) or english_zipf(word.lower()) < 2.0


def _binomial(genus: str, word: str, alone: bool) -> bool:
    """ "Sideritis scardica", "Rickettsia felis": a capitalised genus then a rare lower-case epithet."""
    return (
        alone
        and genus[:1].isupper()
        and genus[1:].islower()
        and word.islower()
        and len(word) > 3
        and english_zipf(word) < 1.5
    )


def _head_within(tokens: list, at: int, query: str, heads: frozenset[str], reach: int = 3) -> int | None:
    """The index of a head word within `reach` plain words from `at` (no function word or punctuation between)."""
    for index in range(at, min(at + reach, len(tokens))):
        word = tokens[index][2]
        if index > at and query[tokens[index - 1][1] : tokens[index][0]].strip():
            return None
        if word.lower() in FUNCTION_WORDS:
            return None
        if word.lower() in heads:
            return index
    return None


def name_spans(query: str, analysis: Analysis) -> list[tuple[int, int]]:
    """Names the vocabulary did not match whole, in the part of the question that asks: codes and symbols,
    capitalised and hyphenated names (grown over their head word), refused mentions grown over the name they
    stand in, and the whole of what a definitional question asks about. Longest first, none inside another."""
    floor = question_part(query)
    spans = []
    definitional = _DEFINITIONAL.match(query)
    if definitional and definitional.start("rest") >= floor:
        rest = definitional.group("rest")
        if len(_WORD.findall(rest)) <= 6 and not _PREPOSITION.search(rest):
            spans.append((definitional.start("rest"), definitional.start("rest") + len(rest)))
    for refused in analysis.refused_targets:  # a mention refused as part of a longer name: that name
        if refused.get("text") and refused["rule"] in ("compound", "possessive"):
            at = query.find(refused["text"], floor)
            grown = _extend(query, at, at + len(refused["text"]), floor) if at >= 0 else None
            if grown is not None and grown != (at, at + len(refused["text"])):
                spans.append(grown)
    for pattern in (_CODE, _CAPITALISED):
        for found in pattern.finditer(query, floor):
            word = found.group(0)
            if found.start() == floor and pattern is _CAPITALISED and not _name_at_start(word):
                continue  # the question's first word is capitalised as any first word is
            if pattern is _CAPITALISED and word.lower() in FUNCTION_WORDS | {"which", "what", "how", "why"}:
                continue
            if pattern is _CAPITALISED and len(word) < 3:
                continue
            spans.append(_extend(query, found.start(), found.end(), floor))
    grown = []
    for start, end in spans:
        after = _ABBREVIATION_AFTER.match(query, end)
        grown.append((start, after.end() if after else end))
    chosen: list[tuple[int, int]] = []
    for start, end in sorted(set(grown), key=lambda s: (-(s[1] - s[0]), s[0])):
        text = query[start:end]
        if not _WORD.search(text) or all(w.lower() in FUNCTION_WORDS for w in _WORD.findall(text)):
            continue
        if " " not in text.strip() and everyday_word(text.lower()) and not any(c.isdigit() for c in text):
            continue
        if any(s <= start and end <= e for s, e in chosen) or not _may_be_subject(query, start, end):
            continue
        chosen.append((start, end))
    return sorted(chosen)


def _as_written_inside(text: str, first: bool) -> str:
    """A subject that opened the question, written as it reads inside another: "Spinal subdural hematoma" ->
    "spinal subdural hematoma" (a capitalised everyday first word; a name such as "Losigamone" keeps its capital)."""
    head = text.split(" ", 1)[0]
    if first and head[:1].isupper() and head[1:].islower() and english_zipf(head.lower()) >= 2.5:
        return head.lower() + text[len(head) :]
    return text


def _may_be_subject(query: str, start: int, end: int) -> bool:
    """Not the question's answer type ("Which algorithm ..."), a bare category word ("proteins", "DNA"), the
    name of a study, a body or a place, nor capitalised everyday words ("African Americans", "European Union":
    people and places, not things a question asks aspects of)."""
    text = query[start:end]
    words = _WORD.findall(text)
    if not words or ANSWER_TYPE.search(query[:start]):
        return False
    capitalised = [w for w in words if w[:1].isupper() and not any(c.isdigit() for c in w)]
    if (
        capitalised
        and len(capitalised) == len(words)
        and all(w[1:].islower() and english_zipf(w.lower()) >= 4.0 for w in words)
    ):
        return False
    head = words[-1].lower()
    if head in NOT_A_SUBJECT_HEADS:
        return False
    if len(words) == 1 and text.islower() and _ADJECTIVE.search(head):  # "neurodevelopmental": no thing of its own
        return False
    bare = len(words) == 1 and (
        head in CATEGORY_WORDS | METHOD_HEADS | GENE_HEADS | DISEASE_HEADS | ORGANISM_HEADS | PROCEDURE_HEADS
        or (head.endswith("s") and head[:-1] in CATEGORY_WORDS | METHOD_HEADS | GENE_HEADS | DISEASE_HEADS)
    )
    return not bare


def asked_aspect(query: str, span: tuple[int, int], kind: str, aspects: list[Aspect]) -> Aspect | None:
    """The aspect of `kind` the question asks of the subject at `span` by its frame: the longest match of an
    aspect's `asked by` pattern in the question with the subject's words taken out."""
    floor = question_part(query)
    frame = query[floor : span[0]] + " " * (span[1] - span[0]) + query[span[1] :]
    best = None
    for aspect in aspects:
        if aspect.type != kind or aspect.asked_by is None:
            continue
        for found in aspect.asked_by.finditer(frame):
            if best is None or len(found.group(0)) > best[0]:
                best = (len(found.group(0)), aspect)
    return best[1] if best else None


def is_definitional(query: str, span: tuple[int, int]) -> bool:
    """Does the question ask for the subject itself ("What is X?", "Describe the X", "What are X?")?"""
    found = _DEFINITIONAL.match(query)
    if not found or _PREPOSITION.search(found.group("rest")):
        return False
    return found.start("rest") <= span[0] + 4 and span[1] >= len(query.rstrip(" ?.")) - 1


_ABBREVIATED = re.compile(r"^(?P<long>.+?)\s*\((?P<short>[^()]+)\)$")
# words around a name that say what kind of thing it is, not which: "the TSA-Seq method", "the protein protamine 2"
KIND_WORDS_AROUND = frozenset(
    "method methods algorithm protocol protocols technique tool software package database "
    "gene genes protein proteins pill treatment therapy".split()
)


def question_name(written: str) -> Entity:
    """The entity a subject the vocabulary lacks stands for: its name without the words that only say what kind of
    thing it is (kept as another name) and with dashes as a text writes them ("Smith–Waterman" and
    "Smith-Waterman"), its abbreviation as another name ("common variable immunodeficiency (CVID)")."""
    names = []
    abbreviated = _ABBREVIATED.match(written)
    if abbreviated:
        written, short = abbreviated.group("long"), abbreviated.group("short").strip()
        names.append(short)
    words = written.split()
    core = list(words)
    while len(core) > 1 and core[-1].lower() in KIND_WORDS_AROUND:
        core.pop()
    while len(core) > 1 and core[0].lower() in KIND_WORDS_AROUND:
        core.pop(0)
    distinctive = any(
        any(c.isdigit() for c in w) or any(c.isupper() or c in "-–" for c in w[1:]) or w[:1].isupper() for w in core
    )
    name = " ".join(core if distinctive else words)
    if name != " ".join(words):
        names.append(" ".join(words))
    plain = name.replace("–", "-").replace("—", "-")
    if plain != name:
        names.append(name)
    return Entity(
        name=plain,
        type="other",
        entry_terms=[n for n in names if n.casefold() != plain.casefold()],
        origin="question-name",
    )


def broad_keys(entities) -> frozenset[str]:
    """Keys of the entities with `BROAD_DESCENDANTS` or more descendants in the vocabulary's trees: categories
    ("Transcription Factors", "Vaccines", "Antibodies"), which no question asks an aspect of as one thing."""
    import bisect

    numbers = sorted({t for e in entities for t in e.trees})
    broad = set()
    for entity in entities:
        below = [
            bisect.bisect_left(numbers, tree + "/") - bisect.bisect_left(numbers, tree + ".") for tree in entity.trees
        ]
        if max(below, default=0) >= BROAD_DESCENDANTS:
            broad.add(entity.key)
    return frozenset(broad)


def find_subjects(
    query: str, analysis: Analysis, aspects: list[Aspect], broad: frozenset[str] = frozenset()
) -> list[Subject]:
    """The question's subjects, best first (at most `MAX_SUBJECTS`): see the module's docstring. A target in
    `broad` (refkit.noise.subjects.broad_keys) is a category, never a subject."""
    subjects: list[Subject] = []
    taken: list[tuple[int, int]] = []

    def add(start: int, end: int, entity: Entity | None, origin: str, aspect=None) -> None:
        if any(s < end and start < e for s, e in taken) or not _may_be_subject(query, start, end):
            return
        text = _as_written_inside(query[_with_article(query, start, end) : end], start == 0)
        name = query[start:end]
        if entity is None:
            entity = question_name(name)
            kind = kind_of_name(name)
        else:
            if entity.key in broad or (other_number(entity.name) or "").casefold() in broad:
                return  # a category, named in either number ("a transcription factor": Transcription Factors)
            kind = kind_of_entity(entity, name)
            if kind is None:
                return  # of a type no aspect is asked of: a body part, a population, a non-molecular process
        subject = Subject(text, start, end, entity, kind, origin, query=query)
        if aspect is not None:
            subject.asked = aspect
        elif kind is not None:
            subject.definitional = is_definitional(query, (start, end))
            subject.asked = None if subject.definitional else asked_aspect(query, (start, end), kind, aspects)
        taken.append((start, end))
        subjects.append(subject)

    ranked = list(analysis.targets)
    asked_first = [t for t in ranked if t.aspect is not None]
    for target in asked_first:
        add(target.mention.start, target.mention.end, target.entity, "target", target.aspect.payload)
    spans = name_spans(query, analysis)
    target_spans = [(t.mention.start, t.mention.end) for t in ranked]
    for start, end in spans:  # a name holding a target is the more specific subject ("Cobb-Stainsby ... arthroplasty")
        if any(start <= s and e <= end and (s, e) != (start, end) for s, e in target_spans):
            add(start, end, None, "name")
    if AUXILIARY.match(query[question_part(query) :]):  # "Is cabozantinib effective ...": its subject comes first
        ranked = sorted(ranked, key=lambda t: (_predicate(query, t.mention.start), t.mention.start))
    for target in ranked:
        if not _predicate(query, target.mention.start):
            add(target.mention.start, target.mention.end, target.entity, "target")
    for start, end in spans:
        if not _predicate(query, start):
            add(start, end, None, "name")
    return _most_specific(query, subjects)[:MAX_SUBJECTS]


def _specific(subject: Subject) -> bool:
    return subject.kind in SPECIFIC_KINDS or (subject.origin == "name" and subject.kind != "disease")


def _most_specific(query: str, subjects: list[Subject]) -> list[Subject]:
    """The subjects without a disease, cell, tissue or process the question names beside a drug, gene, procedure or
    named thing: a question about a drug in a disease is about the drug ("Is lasmiditan effective for
    migraine?"), one about a gene in a cell about the gene ("What is regulated by STAMP2 in adipocytes?"); the
    setting's own aspects ("How common is migraine?", "What is the function of adipocytes?") find texts that
    share only the setting, which a strict reader calls easy, or other drugs for it. A disease the drug is given
    for or the gene studied in ("for migraine", "in patients with migraine") stays as the subject's situation,
    which aspects that take one write in ("What is the recommended dose of lasmiditan for migraine?")."""
    specific = [s for s in subjects if _specific(s)]
    diseases = [s for s in subjects if s.kind == "disease"]
    if not specific or not [s for s in subjects if s.kind in SETTING_KINDS]:
        return subjects
    situations = [
        _as_written_inside(query[d.start : d.end], d.start == 0)
        for d in diseases
        if SITUATION_BEFORE.search(query[: d.start])
    ]
    for subject in specific:
        subject.situation = situations[0] if situations else ""
    return [s for s in subjects if s.kind not in SETTING_KINDS]


def _predicate(query: str, start: int) -> bool:
    """Is the mention at `start` what is said of the subject ("any role as a neuroprotective agent", "Is Satb1 a
    transcription factor?", "Is the zelda transcription factor a chromatin remodeller?")?"""
    before = query[:start]
    return bool(
        re.search(r"\b(as|into|like)\s+(a|an|the)?\s*$", before, re.IGNORECASE)
        or re.search(r"^(is|are|was|were)\s+\S.*\s(a|an)\s+$", before[question_part(query) :], re.IGNORECASE)
    )


def aspect_choices(subject: Subject, aspects: list[Aspect]) -> list[Aspect]:
    """The aspects an aspect rewrite may ask of the subject instead of the asked one (see the module)."""
    if subject.kind is None:
        return []
    asked = subject.asked
    avoid = {asked.name, *asked.close} if asked is not None else set()
    if _a_cell(subject.entity):
        avoid.add("composition")  # what a Lewy body is made of is asked; what a granulocyte is made of is not
    return [a for a in aspects if a.type == subject.kind and a.question and a.name not in avoid]


def _a_cell(entity: Entity) -> bool:
    """Is the entity a kind of cell (MeSH Cells or Blood Cells), not a structure inside one?"""
    return any(t.startswith(CELL_TREES) and not t.startswith(CELL_STRUCTURE_TREES) for t in entity.trees)


def write_question(aspect: Aspect, subject: Subject) -> str:
    """The aspect's question about the subject, its verbs agreeing with the subject's number; in the subject's
    situation where it has one and the aspect a question that takes one."""
    plural = is_plural(subject.text) and not subject.text.rstrip(")").split()[-1].isupper()
    template = aspect.situated if subject.situation and aspect.situated else aspect.question
    template = template.replace("{S}", subject.situation)
    text = template.replace("{is}", "are" if plural else "is").replace("{does}", "do" if plural else "does")
    text = text.replace("{was}", "were" if plural else "was")
    return text.replace("{X}", subject.text)
