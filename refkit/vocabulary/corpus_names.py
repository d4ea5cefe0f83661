"""Names the served records give, beside MeSH: what a question about something new can be matched by.

A vocabulary snapshot lacks the drugs approved after it, most gene symbols and the abbreviations
clinicians write. The served texts have them. Over every snippet (`refkit lexicon --server` or
`--corpus`), `CorpusNames` collects:

- abbreviations the texts define (refkit.vocabulary.abbreviations: "Duchenne muscular dystrophy (DMD)"): the short
  form becomes a name of the entity its long form names (a vocabulary entity, or a new one named by the
  long form when its words tell a type, `name_type`, and it has more than one word or is a drug name),
  when that long form is the one most texts give it (`LONG_FORM_SHARE`), and the short form has a
  capital or a digit and is not an everyday English word ("ALL", "CAT");
- words that read as drug names by their INN stem (refkit.vocabulary.drug_stems: "lenvatinib"), as drugs;
- gene symbols (refkit.vocabulary.gene_symbols: "BCL11B") written in at least `MIN_SYMBOL_RECORDS` records, as genes
  (not compound codes: "LY2951742", "AK002" have a run of `CODE_DIGITS` digits);
- named diseases, an eponym or a capitalised name before "syndrome", "disease", "disorder", "anomaly"
  ("Leigh syndrome", "Coffin-Siris syndrome"), written in at least `MIN_SYMBOL_RECORDS` records;
- the PubMed records' author keywords, typed by their words (`name_type`) where that tells a type.

`count_mentions` then counts, for every entity of a rewritten type, the records that name it by any of
its names (`corpus_frequency`): refkit noise never targets or swaps in a name no served record uses.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable

from refkit.vocabulary.abbreviations import definitions
from refkit.vocabulary.drug_stems import drug_words
from refkit.vocabulary.entity_names import names_matcher
from refkit.vocabulary.gene_symbols import is_symbol, symbols
from refkit.vocabulary.lexicon import REWRITTEN_TYPES, Entity, Lexicon
from refkit.vocabulary.matcher import is_acronym
from refkit.vocabulary.word_frequency import english_zipf

LONG_FORM_SHARE = 0.6
MIN_SYMBOL_RECORDS = 2
CODE_DIGITS = re.compile(r"\d{3,}")
EVERYDAY_ZIPF = 3.0  # a short form that is also this common an English word is not taken for a name
DISEASE_HEADS = frozenset(
    "disease diseases syndrome syndromes disorder disorders deficiency cancer cancers carcinoma carcinomas lymphoma "
    "lymphomas leukemia leukaemia tumor tumors tumour tumours infection infections dystrophy dystrophies sclerosis "
    "fibrosis anemia anaemia neoplasm neoplasms sarcoma melanoma myeloma glioma gliomas glioblastoma adenoma "
    "hypertension diabetes arthritis hepatitis dementia epilepsy palsy ataxia myopathy neuropathy cardiomyopathy "
    "encephalopathy failure injury".split()
)
DISEASE_SUFFIXES = ("itis", "emia", "aemia", "pathy", "oma")
GENE_HEADS = frozenset("gene genes protein proteins receptor receptors kinase kinases enzyme factor".split())
_WORDS = re.compile(r"[\w'-]+")
NAMED_DISEASE = re.compile(
    r"(?<![\w-])((?:[A-Z][a-z]+(?:['\u2019]s)?[- ]){1,3}(?:syndrome|disease|disorder|anomaly))\b"
)
_NOT_A_NAME = frozenset("the this these that those a an our its their such each both no all any other".split())


def name_type(name: str) -> str:
    """The type a free name's words tell (`other`: they do not)."""
    words = _WORDS.findall(name)
    if not words:
        return "other"
    last = words[-1].lower()
    if is_symbol(words[-1]) or last in GENE_HEADS:
        return "gene"
    if drug_words(name):
        return "drug"
    if last in DISEASE_HEADS or (len(last) > 5 and last.endswith(DISEASE_SUFFIXES)):
        return "disease"
    return "other"


def usable_short_form(short: str) -> bool:
    """A short form clinicians write as a name: capitals ("DMD", "HSP70", "IL-6"), not a plural of one
    ("ANDs" is "AND"), and not an everyday English word in lower case ("ALL", "CAT")."""
    if not is_acronym(short) or (short.endswith("s") and short[-2:-1].isupper()):
        return False
    return english_zipf(short.lower()) < EVERYDAY_ZIPF


def _key(name: str) -> str:
    return " ".join(name.replace("-", " ").split()).casefold()


_POSSESSIVE = re.compile(r"['\u2019]s?(?= )|s(?= (?:syndrome|disease)$)")


def _aliases(key: str) -> list[str]:
    """Other spellings of a disease name the vocabulary may use: without the possessive ("wilson's disease"
    -> "wilson disease"), and "syndrome" for "disease" and back (MeSH's "Leigh Disease" is "Leigh syndrome")."""
    plain = _POSSESSIVE.sub("", key)
    keys = [key, plain]
    for one, other in ((" syndrome", " disease"), (" disease", " syndrome")):
        keys += [k[: -len(one)] + other for k in (key, plain) if k.endswith(one)]
    return list(dict.fromkeys(keys))


class CorpusNames:
    def __init__(self):
        self.definitions: dict[str, Counter] = defaultdict(Counter)  # short form -> long form key -> records
        self.written: dict[str, Counter] = defaultdict(Counter)  # a key -> how it is written
        self.drugs: Counter = Counter()
        self.symbols: Counter = Counter()
        self.keywords: Counter = Counter()
        self.named_diseases: Counter = Counter()
        self.records = 0

    def add(self, text: str, meta: dict | None = None) -> None:
        """One served record (a snippet's title and text; its meta for the first chunk of a document)."""
        self.records += 1
        for short, long_form in dict.fromkeys(definitions(text)):
            self.definitions[short][_key(long_form)] += 1
            self.written[_key(long_form)][long_form] += 1
        for word in set(drug_words(text)):
            self.drugs[word.casefold()] += 1
            self.written[word.casefold()][word] += 1
        for symbol in set(symbols(text)):
            self.symbols[symbol] += 1
        for name in {m.group(1) for m in NAMED_DISEASE.finditer(text)}:
            if name.split()[0].lower().strip("'\u2019s") not in _NOT_A_NAME:
                self.named_diseases[_key(name)] += 1
                self.written[_key(name)][name] += 1
        for keyword in (meta or {}).get("keywords") or []:
            if isinstance(keyword, str) and keyword.strip():
                self.keywords[_key(keyword)] += 1
                self.written[_key(keyword)][" ".join(keyword.split())] += 1

    def _written(self, key: str) -> str:
        """The most common way a name is written (lower case first among equals: a sentence start is no name)."""
        return max(self.written[key].items(), key=lambda kv: (kv[1], kv[0].islower(), kv[0]))[0]

    def add_to(self, lexicon: Lexicon) -> tuple[Lexicon, Counter]:
        """The lexicon with the corpus's names (new entities, short forms as names of known ones), and
        how many of each kind were added."""
        by_form: dict[str, Entity] = {}
        for entity in lexicon.entities.values():
            for form in entity.surface_forms():
                by_form.setdefault(_key(form), entity)
        entities = dict(lexicon.entities)
        added: Counter = Counter()

        def new(name: str, kind: str, origin: str, names: list[str] | None = None) -> Entity:
            entity = Entity(name=name, type=kind, entry_terms=names or [], origin=origin)
            entities.setdefault(entity.key, entity)
            by_form.setdefault(_key(name), entity)
            added[origin] += 1
            return entity

        for short in sorted(self.definitions):
            counts = self.definitions[short]
            long_key, count = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
            if count < LONG_FORM_SHARE * sum(counts.values()):
                continue
            if any(c in long_key for c in "()[];"):  # a parenthesis inside: the pattern caught a list or a remark
                continue
            owner = next((by_form[k] for k in _aliases(long_key) if k in by_form), None)
            if owner is None:
                kind = name_type(self._written(long_key))
                if kind == "other" or (" " not in long_key and kind != "drug"):
                    continue
                owner = new(self._written(long_key), kind, "abbreviation")
            if not usable_short_form(short):  # the long form is a name all the same
                continue
            taken = by_form.get(_key(short))
            if taken is None:
                owner.entry_terms.append(short)
                by_form[_key(short)] = owner
                added["short forms"] += 1
        for word in sorted(self.drugs):
            if word not in by_form:
                new(self._written(word), "drug", "inn-stem")
        for symbol, records in sorted(self.symbols.items()):
            if records < MIN_SYMBOL_RECORDS or _key(symbol) in by_form or CODE_DIGITS.search(symbol):
                continue
            protein = next(
                (by_form[k] for k in (_key(f"{symbol} {w}") for w in ("protein", "proteins", "gene")) if k in by_form),
                None,
            )
            if protein is not None:  # MeSH's "HMGB1 Protein" is what a text calls HMGB1
                protein.entry_terms.append(symbol)
                by_form[_key(symbol)] = protein
                added["symbols of known proteins"] += 1
            else:
                new(symbol, "gene", "symbol")
        for name, records in sorted(self.named_diseases.items()):
            if records < MIN_SYMBOL_RECORDS or name in by_form:
                continue
            known = next((by_form[k] for k in _aliases(name) if k in by_form), None)
            if known is not None:  # "Leigh syndrome" is MeSH's "Leigh Disease": a name of it, with its trees
                known.entry_terms.append(self._written(name))
                by_form[name] = known
                added["named diseases of known entities"] += 1
            else:
                new(self._written(name), "disease", "named-disease")
        for keyword in sorted(self.keywords):
            if keyword not in by_form and (kind := name_type(self._written(keyword))) != "other":
                new(self._written(keyword), kind, "keyword")
        return Lexicon(entities.values()), added


NEOPLASMS = re.compile(r"^(?P<site>[A-Z][\w -]+) Neoplasms$")
DISORDERS = re.compile(r"^(?P<name>[A-Z][a-z]+) Disorders$")


def name_diseases_as_written(lexicon: Lexicon) -> int:
    """MeSH names tumours by site as "<Site> Neoplasms" ("Lung Neoplasms", "Urinary Bladder Neoplasms") and
    some diseases as "<Name> Disorders" ("Migraine Disorders"); texts and questions write "<site> cancer",
    "<site> tumor" and "migraine": those become names of the descriptor (unless another entity has them).
    Returns how many descriptors gained them."""
    gained = 0
    taken = {form.casefold() for e in lexicon.entities.values() for form in e.surface_forms()}
    for entity in lexicon.entities.values():
        neoplasms, disorders = NEOPLASMS.match(entity.name), DISORDERS.match(entity.name)
        if entity.type != "disease" or not (neoplasms or disorders):
            continue
        if neoplasms:
            site = neoplasms.group("site").lower()
            written = [f"{site} {word}" for word in ("cancer", "tumor", "tumour")]
        else:
            written = [disorders.group("name").lower()]
        new = [name for name in written if name not in taken]
        if new:
            entity.entry_terms += new
            taken.update(new)
            gained += 1
    return gained


def type_drugs_by_stem(lexicon: Lexicon) -> int:
    """Type as drugs the entities named by one word that reads as a drug by its INN stem ("Panitumumab":
    MeSH's trees place antibodies among proteins, which the lexicon types as genes). Returns how many
    changed."""
    changed = 0
    for entity in lexicon.entities.values():
        if entity.type != "drug" and " " not in entity.name.strip() and drug_words(entity.name) == [entity.name]:
            entity.type = "drug"
            changed += 1
    return changed


def count_mentions(lexicon: Lexicon, texts: Iterable[str]) -> int:
    """Set every rewritten-type entity's `corpus_frequency`: the texts naming it by any of its names
    (with the plural and hyphen variants refkit noise matches). Returns the texts read."""
    typed = [e for e in lexicon.in_file_order() if e.type in REWRITTEN_TYPES]
    matcher = names_matcher(typed)
    counts: Counter = Counter()
    read = 0
    for text in texts:
        read += 1
        counts.update({match.payload for match in matcher.find(text)})
    for entity in typed:
        entity.corpus_frequency = counts.get(entity.key, 0)
    return read
