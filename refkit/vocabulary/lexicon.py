"""The entity lexicon: biomedical entities mined from PubMed records' MeSH headings and chemicals.

Mining reads one record per document (chunk 0 carries the document's `meta`), either streamed from
searchd (ScanSnippets) or read from a corpus folder's shards. Every MeSH descriptor and every
substance of the chemical list is an entity, keyed by its case-folded name (the 2014 MEDLINE sample
has no UIs, newer records do; the first UI seen is kept).

Columns of lexicon.tsv (a user-supplied lexicon needs `name` and `type`; the others are optional):

| column        | meaning |
|---------------|---------|
| name          | the preferred name (MeSH heading or substance name) |
| ui            | MeSH UI (D..., C...) when the records carry it |
| type          | `drug`, `disease`, `gene`, `organism`, `procedure`, `anatomy`, `process`, `other` (`mesh`) |
| frequency     | documents that carry the entity |
| entry_terms   | other names, `|`-separated (mined: the uninverted form of an inverted heading) |
| qualifiers    | qualifier profile: `name=count|...`, most frequent first |
| cooccurrence  | the drug/disease entities it shares documents with most: `name=count|...` |
| trees         | MeSH tree numbers, `|`-separated (from `--mesh`): what sibling swaps use |
| translations  | names in other languages: `fr:Téméfos|zh:奥司他韦|...` (`--translations`: French MeSH by UI) |
| actions       | MeSH pharmacological actions, `|`-separated (from `--mesh` / `--supplementary`): drug siblings |
| corpus_frequency | served records naming it (any of its names), counted when mined from a corpus |
| origin        | `mesh`, `mesh-names`, `supplementary`, `headings` (records' MeSH, chemicals), `keyword`, ... |

`origin` also takes `abbreviation`, `inn-stem`, `symbol` and `named-disease` (refkit.vocabulary.corpus_names); an empty
`corpus_frequency` means not counted.

Type inference, since PubMed records carry no tree numbers: an entity is a `drug` when it appears in
a chemical list or its qualifier profile leans to drug-only qualifiers (pharmacology, therapeutic use,
administration & dosage, ...), a `disease` when it leans to disease-only qualifiers (diagnosis,
therapy, drug therapy, etiology, complications, mortality, ...), `other` when it has neither (check
tags such as Humans, anatomy, places, methods). A hand-made or MeSH-derived TSV with the right types
can replace the mined one.
"""

from __future__ import annotations

import collections
import csv
import hashlib
import io
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from medsnip.buildrecord import atomic_write_bytes
from refkit.vocabulary.matcher import is_plural

TYPES = ("drug", "disease", "gene", "organism", "procedure", "anatomy", "process", "other")
COLUMNS = (
    "name",
    "ui",
    "type",
    "frequency",
    "entry_terms",
    "qualifiers",
    "cooccurrence",
    "trees",
    "translations",
    "actions",
    "corpus_frequency",
    "origin",
)
# Every type but `other` is rewritten by refkit noise (aspects for some, entity swaps for all).
REWRITTEN_TYPES = ("drug", "disease", "gene", "organism", "procedure", "anatomy", "process")
# Qualifiers MeSH allows (almost) only on drugs/chemicals, and only on diseases. Qualifiers shared with
# anatomy, organisms, places or procedures (pathology, physiopathology, genetics, epidemiology, surgery,
# adverse effects, standards, ...) would type "Heart", "United States" or "Coronary Artery Bypass" as
# diseases or drugs, so they do not count.
DRUG_QUALIFIERS = frozenset(
    {
        "pharmacology",
        "therapeutic use",
        "administration & dosage",
        "pharmacokinetics",
        "toxicity",
        "poisoning",
        "analogs & derivatives",
        "agonists",
        "antagonists & inhibitors",
        "chemical synthesis",
    }
)
DISEASE_QUALIFIERS = frozenset(
    {
        "complications",
        "congenital",
        "diagnosis",
        "drug therapy",
        "etiology",
        "mortality",
        "prevention & control",
        "therapy",
        "radiotherapy",
        "chemically induced",
    }
)
COOCCURRENCE_KEPT = 25
SOURCE_PREFIX = "# source: "  # the lines before the header that say what a lexicon was built from


class LexiconError(ValueError):
    """A lexicon file that cannot be used (the message names the file, line and column)."""


@dataclass
class Entity:
    name: str
    type: str
    ui: str = ""
    frequency: int = 0
    entry_terms: list[str] = field(default_factory=list)
    qualifiers: Counter = field(default_factory=Counter)
    cooccurrence: Counter = field(default_factory=Counter)
    trees: list[str] = field(default_factory=list)
    translations: dict[str, list[str]] = field(default_factory=dict)  # language -> names, preferred first
    actions: list[str] = field(default_factory=list)  # MeSH pharmacological actions
    corpus_frequency: int | None = None  # served records naming it; None: not counted
    origin: str = ""

    @property
    def key(self) -> str:
        return self.name.casefold()

    def surface_forms(self, language: str = "en") -> list[str]:
        """The names a text in `language` may use for it, preferred first: its names in that language,
        then the English ones (drug and gene names are often written in English in any language)."""
        forms: list[str] = []
        seen: set[str] = set()
        for term in [*self.translations.get(language, []), self.name, *self.entry_terms]:
            folded = term.casefold()
            if folded not in seen:
                seen.add(folded)
                forms.append(term)
        return forms


class Lexicon:
    def __init__(self, entities: Iterable[Entity], sources: Iterable[str] = ()):
        """`sources`: what the lexicon was built from, one line each ("drug-named-entity-recognition 2.0.9"):
        written as `# source:` lines before the header, so a lexicon file says where its names come from."""
        self.sources: list[str] = list(sources)
        self.entities: dict[str, Entity] = {}
        for entity in entities:
            self.entities.setdefault(entity.key, entity)

    def __len__(self) -> int:
        return len(self.entities)

    def get(self, name: str) -> Entity | None:
        return self.entities.get(name.casefold())

    @property
    def counted(self) -> bool:
        """Were the entities counted in a served corpus (`corpus_frequency`)? Then a name no served
        record uses is never a target or a swap."""
        return any(e.corpus_frequency is not None for e in self.entities.values())

    def in_file_order(self) -> list[Entity]:
        """The entities in the order a lexicon file lists them (the most frequent MeSH heading first): where two
        share a name, the first is the one the name stands for, in `refkit lexicon` and `refkit noise` alike."""
        return sorted(self.entities.values(), key=lambda e: (-e.frequency, e.key))

    def to_tsv(self) -> bytes:
        out = io.StringIO()
        for source in self.sources:
            out.write(f"{SOURCE_PREFIX}{' '.join(source.split())}\n")
        writer = csv.writer(out, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
        writer.writerow(COLUMNS)
        for entity in self.in_file_order():
            writer.writerow(
                [
                    entity.name,
                    entity.ui,
                    entity.type,
                    entity.frequency,
                    "|".join(entity.entry_terms),
                    _pairs(entity.qualifiers),
                    _pairs(entity.cooccurrence, COOCCURRENCE_KEPT),
                    "|".join(entity.trees),
                    _translations(entity.translations),
                    "|".join(entity.actions),
                    "" if entity.corpus_frequency is None else entity.corpus_frequency,
                    entity.origin,
                ]
            )
        return out.getvalue().encode("utf-8")

    def write(self, path: Path) -> None:
        atomic_write_bytes(Path(path), self.to_tsv())


def _translations(translations: dict[str, list[str]]) -> str:
    return "|".join(f"{language}:{name}" for language in sorted(translations) for name in translations[language])


def _parse_translations(text: str, where: str) -> dict[str, list[str]]:
    translations: dict[str, list[str]] = {}
    for item in filter(None, (part.strip() for part in text.split("|"))):
        language, sep, name = item.partition(":")
        if not sep or not language.strip() or not name.strip():
            raise LexiconError(f"{where}: column 'translations' has {item!r}, expected 'language:name'")
        translations.setdefault(language.strip(), []).append(name.strip())
    return translations


def add_translations(lexicon: Lexicon, names_by_ui: dict[str, list[str]], language: str) -> int:
    """Join names in `language` (keyed by MeSH UI) to the lexicon's entities of those UIs; names that
    are already among an entity's English names are left out. Returns the entities that gained one."""
    joined = 0
    for entity in lexicon.entities.values():
        english = {form.casefold() for form in entity.surface_forms()}
        new = [name for name in names_by_ui.get(entity.ui, []) if name.casefold() not in english]
        if new:
            known = entity.translations.setdefault(language, [])
            known += [name for name in new if name not in known]
            joined += 1
    return joined


def read_names_by_ui(path: Path) -> dict[str, list[str]]:
    """Names keyed by descriptor UI from a JSON list of `{"term": ..., "id": "D000001"}` (the French MeSH
    dictionary's shape; .json or .json.gz), in file order."""
    import gzip
    import json

    path = Path(path)
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise LexiconError(f"{path}: not a JSON list of {{term, id}} ({error})") from error
    if not isinstance(data, list):
        raise LexiconError(f"{path}: expected a JSON list of {{term, id}}, found a {type(data).__name__}")
    names: dict[str, list[str]] = {}
    for position, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("term"), str) or not isinstance(item.get("id"), str):
            raise LexiconError(f"{path}: [{position}]: expected an object with string 'term' and 'id'")
        names.setdefault(item["id"].strip(), []).append(" ".join(item["term"].split()))
    return names


def _pairs(counter: Counter, limit: int | None = None) -> str:
    items = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return "|".join(f"{name}={count}" for name, count in items)


def _parse_pairs(text: str, where: str, column: str) -> Counter:
    counter: Counter = Counter()
    for part in filter(None, text.split("|")):
        name, sep, count = part.rpartition("=")
        if not sep or not count.isdigit():
            raise LexiconError(f"{where}: column '{column}': expected name=count, got {part!r}")
        counter[name] = int(count)
    return counter


_SHARED: collections.OrderedDict[tuple[str, str], Lexicon] = collections.OrderedDict()
SHARED_KEPT = 2


def shared_lexicon(path: Path) -> Lexicon:
    """`read_lexicon`, once per file content in a process, for the commands that only read a lexicon (noise,
    audit): the same Lexicon object comes back while the file's bytes are the same, so what is built from it
    (refkit.noise.rewriter.lexicon_index) is built once too. The last SHARED_KEPT files are kept."""
    path = Path(path)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return read_lexicon(path)  # which says what is wrong with the file
    key = (str(path.resolve()), digest)
    if key in _SHARED:
        _SHARED.move_to_end(key)
        return _SHARED[key]
    lexicon = read_lexicon(path)
    _SHARED[key] = lexicon
    while len(_SHARED) > SHARED_KEPT:
        _SHARED.popitem(last=False)
    return lexicon


def read_lexicon(path: Path) -> Lexicon:
    """A lexicon TSV (mined by `refkit lexicon` or written by hand: `name` and `type` are required)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise LexiconError(f"{path}: cannot read ({error.strerror})") from error
    except UnicodeDecodeError as error:
        raise LexiconError(f"{path}: not UTF-8 text") from error
    lines = text.splitlines(keepends=True)
    sources = []
    while lines and lines[0].startswith(SOURCE_PREFIX):
        sources.append(lines.pop(0)[len(SOURCE_PREFIX) :].strip())
    rows = list(csv.reader(io.StringIO("".join(lines)), delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))
    if not rows:
        raise LexiconError(f"{path}: empty lexicon (expected a header line: {' '.join(COLUMNS)})")
    header = [h.strip() for h in rows[0]]
    unknown = [h for h in header if h not in COLUMNS]
    if unknown:
        raise LexiconError(
            f"{path}:{1 + len(sources)}: unknown lexicon column '{unknown[0]}' (known: {', '.join(COLUMNS)})"
        )
    for required in ("name", "type"):
        if required not in header:
            raise LexiconError(f"{path}:{1 + len(sources)}: missing lexicon column '{required}'")
    entities = []
    for number, row in enumerate(rows[1:], 2 + len(sources)):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise LexiconError(f"{path}:{number}: {len(row)} columns, the header has {len(header)}")
        cells = dict(zip(header, (c.strip() for c in row), strict=True))
        where = f"{path}:{number}"
        if not cells["name"]:
            raise LexiconError(f"{where}: column 'name' is empty")
        if cells["type"] not in TYPES:
            raise LexiconError(f"{where}: column 'type' is {cells['type']!r}, expected one of {', '.join(TYPES)}")
        frequency = cells.get("frequency", "") or "0"
        if not frequency.isdigit():
            raise LexiconError(f"{where}: column 'frequency' is not a number: {frequency!r}")
        corpus_frequency = cells.get("corpus_frequency", "")
        if corpus_frequency and not corpus_frequency.isdigit():
            raise LexiconError(f"{where}: column 'corpus_frequency' is not a number: {corpus_frequency!r}")
        entities.append(
            Entity(
                name=cells["name"],
                type=cells["type"],
                ui=cells.get("ui", ""),
                frequency=int(frequency),
                entry_terms=[t.strip() for t in cells.get("entry_terms", "").split("|") if t.strip()],
                qualifiers=_parse_pairs(cells.get("qualifiers", ""), where, "qualifiers"),
                cooccurrence=_parse_pairs(cells.get("cooccurrence", ""), where, "cooccurrence"),
                trees=[t.strip() for t in cells.get("trees", "").split("|") if t.strip()],
                translations=_parse_translations(cells.get("translations", ""), where),
                actions=[t.strip() for t in cells.get("actions", "").split("|") if t.strip()],
                corpus_frequency=int(corpus_frequency) if corpus_frequency else None,
                origin=cells.get("origin", ""),
            )
        )
    if not entities:
        raise LexiconError(f"{path}: no entities")
    return Lexicon(entities, sources)


class LexiconMiner:
    """Accumulates documents' MeSH and chemicals in two passes over the same documents (add_document for
    all, then add_cooccurrence for all, which needs the types the first pass settles); `lexicon()`
    gives the result."""

    def __init__(self):
        self.names: dict[str, str] = {}
        self.uis: dict[str, str] = {}
        self.frequency: Counter = Counter()
        self.in_chemical_list: Counter = Counter()
        self.qualifiers: dict[str, Counter] = defaultdict(Counter)
        self.cooccurrence: dict[str, Counter] = defaultdict(Counter)
        self.documents = 0
        self._types: dict[str, str] | None = None

    def add_document(self, meta: dict) -> None:
        """First pass: names, UIs, frequencies, chemical lists and qualifier profiles."""
        mesh, chemicals = meta.get("mesh") or [], meta.get("chemicals") or []
        if not mesh and not chemicals:
            return
        self.documents += 1
        present: set[str] = set()
        for heading in mesh:
            key = self._entity(heading.get("name"), heading.get("ui"))
            if key is None:
                continue
            present.add(key)
            for qualifier in heading.get("qualifiers") or []:
                if qualifier.get("name"):
                    self.qualifiers[key][qualifier["name"].casefold()] += 1
        for chemical in chemicals:
            key = self._entity(chemical.get("name"), chemical.get("ui"))
            if key is not None:
                present.add(key)
                self.in_chemical_list[key] += 1
        for key in present:
            self.frequency[key] += 1

    def add_cooccurrence(self, meta: dict) -> None:
        """Second pass, once every document went through add_document: co-occurrence among the
        document's drug and disease entities (the only ones an entity swap uses). Counting every pair of
        every heading would hold ~10^8 pairs for all of PubMed, most of them check tags (Humans, Male);
        this keeps the table to pairs that matter."""
        if self._types is None:
            self._types = {key: self.entity_type(key) for key in self.names}
        typed = set()
        for entry in (meta.get("mesh") or []) + (meta.get("chemicals") or []):
            key = " ".join((entry.get("name") or "").split()).casefold()
            if self._types.get(key) in ("drug", "disease"):
                typed.add(key)
        ordered = sorted(typed)
        for key in ordered:
            for other in ordered:
                if other != key:
                    self.cooccurrence[key][other] += 1

    def _entity(self, name: str | None, ui: str | None) -> str | None:
        if not name or not name.strip():
            return None
        name = " ".join(name.split())
        key = name.casefold()
        self.names.setdefault(key, name)
        if ui and key not in self.uis:
            self.uis[key] = ui
        return key

    def entity_type(self, key: str) -> str:
        profile = self.qualifiers.get(key, Counter())
        drug = self.in_chemical_list[key] + sum(n for q, n in profile.items() if q in DRUG_QUALIFIERS)
        disease = sum(n for q, n in profile.items() if q in DISEASE_QUALIFIERS)
        if drug > disease:
            return "drug"
        if disease > 0:
            return "disease"
        return "other"

    def lexicon(self) -> Lexicon:
        entities = []
        for key, name in self.names.items():
            entities.append(
                Entity(
                    name=name,
                    type=self.entity_type(key),
                    ui=self.uis.get(key, ""),
                    frequency=self.frequency[key],
                    entry_terms=uninverted(name),
                    qualifiers=Counter(self.qualifiers.get(key, {})),
                    cooccurrence=Counter({self.names[k]: n for k, n in self.cooccurrence.get(key, {}).items()}),
                    origin="headings",
                )
            )
        return Lexicon(entities)


def uninverted(name: str) -> list[str]:
    """MeSH's inverted headings read naturally uninverted: "Carcinoma, Squamous Cell" -> "Squamous
    Cell Carcinoma" (only for a single comma, where the reading is unambiguous)."""
    head, sep, tail = name.partition(", ")
    if not sep or "," in tail or not tail or not head:
        return []
    return [f"{tail} {head}"]


def natural_name(entity: Entity, language: str = "en") -> str:
    """How a query in `language` would write the entity: its first name in that language, else the
    uninverted form of an inverted MeSH heading."""
    if entity.translations.get(language):
        return entity.translations[language][0]
    forms = uninverted(entity.name)
    return forms[0] if forms else entity.name


def profile_similarity(a: Entity, b: Entity) -> float:
    """Cosine similarity of two qualifier profiles (0 when either is empty)."""
    common = set(a.qualifiers) & set(b.qualifiers)
    dot = sum(a.qualifiers[q] * b.qualifiers[q] for q in common)
    norm = math.sqrt(sum(v * v for v in a.qualifiers.values())) * math.sqrt(sum(v * v for v in b.qualifiers.values()))
    return dot / norm if norm else 0.0


def group_name(entity: Entity) -> bool:
    """Is the entity named as a group (a plural head: "Antipsychotic Agents", "Epilepsies, Partial";
    in an inverted heading the head comes before the first comma: "Neoplasms, Cystic, Mucinous, and
    Serous")?"""
    if "," in entity.name:
        return is_plural(entity.name.partition(",")[0])
    return is_plural(natural_name(entity))
