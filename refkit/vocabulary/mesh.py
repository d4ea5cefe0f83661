"""NLM's MeSH files as a lexicon: descriptors (desc2026.xml) and supplementary concepts (supp2026.xml).

Every descriptor becomes an entity with its preferred name, UI, tree numbers, pharmacological actions
(what drug swaps share) and every entry term of every concept as a synonym (plus the uninverted reading of
inverted terms: "Penicillin, Aminobenzyl" -> "Aminobenzyl Penicillin"). Its type comes from its trees,
the first rule that applies winning:

| trees | type | aspects (refkit/aspects.tsv) |
|---|---|---|
| any C (Diseases) | disease | symptoms, diagnosis, treatment, etiology, ... |
| only D08 (Enzymes), D12 (Proteins), no pharmacological action | gene | function, expression, mutations |
| any other D (Chemicals and Drugs), or D08/D12 with one (insulin) | drug | mechanism of action, indications, ... |
| B (Organisms) | organism | infections, transmission, drug resistance |
| E (Analytical, Diagnostic and Therapeutic Techniques) | procedure | indications, complications, outcomes |
| A (Anatomy) | anatomy | none: entity swaps only |
| G (Phenomena and Processes) | process | none: entity swaps only |
| anything else (F, H-N, V, Z), or no tree | other | not rewritten |

Supplementary concept records (new drugs and antibodies, rare diseases, organisms) take the type of the
descriptors they are mapped to when those are known, else their SCRClass (1 chemical -> drug, 2
protocol -> procedure, 3 disease, 4 organism). Both files are streamed (desc2026.xml is ~300 MB), one
record in memory at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from refkit.vocabulary.lexicon import Entity, Lexicon, uninverted

_SCR_CLASS_TYPES = {"1": "drug", "2": "procedure", "3": "disease", "4": "organism"}
_PROTEIN_TREES = ("D08", "D12")


def type_from_trees(trees: list[str], pharmacological: bool = False) -> str:
    """The entity type a descriptor's tree numbers give (module docstring)."""
    if any(t.startswith("C") for t in trees):
        return "disease"
    chemical = [t for t in trees if t.startswith("D")]
    if chemical:
        if pharmacological or not all(t.startswith(_PROTEIN_TREES) for t in chemical):
            return "drug"
        return "gene"
    for prefix, kind in (("B", "organism"), ("E", "procedure"), ("A", "anatomy"), ("G", "process")):
        if any(t.startswith(prefix) for t in trees):
            return kind
    return "other"


def mesh_records(path: Path, tag: str) -> Iterator[etree._Element]:
    """Each `tag` record of a MeSH XML file, cleared once used (no network, no DTD loaded)."""
    for _, element in etree.iterparse(
        str(path), events=("end",), tag=tag, no_network=True, load_dtd=False, resolve_entities=False, huge_tree=True
    ):
        yield element
        element.clear(keep_tail=True)
        while element.getprevious() is not None:
            del element.getparent()[0]


def _synonyms(record: etree._Element, name: str) -> list[str]:
    """Every entry term of every concept, and the uninverted reading of inverted ones; no repeats."""
    seen = {name.casefold()}
    terms = []
    for term in record.iterfind("ConceptList/Concept/TermList/Term/String"):
        for form in [term.text or "", *uninverted(term.text or "")]:
            form = " ".join(form.split())
            if form and form.casefold() not in seen:
                seen.add(form.casefold())
                terms.append(form)
    return terms


def _actions(record: etree._Element) -> list[str]:
    """The record's pharmacological actions, by name (what drug siblings share)."""
    path = "PharmacologicalActionList/PharmacologicalAction/DescriptorReferredTo/DescriptorName/String"
    return list(dict.fromkeys(" ".join((a.text or "").split()) for a in record.iterfind(path) if a.text))


def read_descriptors(path: Path) -> Iterator[Entity]:
    for record in mesh_records(Path(path), "DescriptorRecord"):
        name = " ".join((record.findtext("DescriptorName/String") or "").split())
        if not name:
            continue
        trees = [t.text.strip() for t in record.iterfind("TreeNumberList/TreeNumber") if t.text]
        pharmacological = record.find("PharmacologicalActionList") is not None
        yield Entity(
            name=name,
            type=type_from_trees(trees, pharmacological),
            ui=(record.findtext("DescriptorUI") or "").strip(),
            entry_terms=_synonyms(record, name),
            trees=trees,
            actions=_actions(record),
            origin="mesh",
        )


def read_supplementary(path: Path, descriptor_types: dict[str, str]) -> Iterator[Entity]:
    """Supplementary concept records; `descriptor_types` (UI -> type) types them by their mapped headings."""
    for record in mesh_records(Path(path), "SupplementalRecord"):
        name = " ".join((record.findtext("SupplementalRecordName/String") or "").split())
        if not name:
            continue
        headings = record.iterfind("HeadingMappedToList/HeadingMappedTo/DescriptorReferredTo/DescriptorUI")
        mapped = [(ui.text or "").strip().lstrip("*") for ui in headings]
        types = [descriptor_types[ui] for ui in mapped if descriptor_types.get(ui, "other") != "other"]
        kind = types[0] if types else _SCR_CLASS_TYPES.get(record.get("SCRClass", ""), "other")
        yield Entity(
            name=name,
            type=kind,
            ui=(record.findtext("SupplementalRecordUI") or "").strip(),
            entry_terms=_synonyms(record, name),
            actions=_actions(record),
            origin="supplementary",
        )


def read_mesh(
    descriptors: Path | None = None, supplementary: Path | None = None, known_types: dict[str, str] | None = None
) -> Lexicon:
    """A lexicon of the descriptors and supplementary concepts of NLM's MeSH XML files; `known_types`
    (descriptor UI -> type, e.g. from refkit.vocabulary.mesh_names) types supplementary records whose headings
    the descriptor file does not hold."""
    entities = list(read_descriptors(descriptors)) if descriptors else []
    types = {**(known_types or {}), **{entity.ui: entity.type for entity in entities}}
    if supplementary:
        entities += list(read_supplementary(supplementary, types))
    return Lexicon(entities)


def merge(vocabulary: Lexicon, mined: Lexicon) -> Lexicon:
    """The vocabulary's names, synonyms, trees and types, with what the indexed records say of each entity
    (frequency, qualifier profile, co-occurrence); mined entities the vocabulary lacks are kept as mined.
    Entities are matched by UI, else by name."""
    by_ui = {entity.ui: entity for entity in mined.entities.values() if entity.ui}
    merged, used = [], set()
    for entity in vocabulary.entities.values():
        found = by_ui.get(entity.ui) if entity.ui else None
        found = found or mined.get(entity.name)
        if found is not None:
            used.add(found.key)
            entity.frequency, entity.qualifiers, entity.cooccurrence = (
                found.frequency,
                found.qualifiers,
                found.cooccurrence,
            )
        merged.append(entity)
    merged += [entity for entity in mined.entities.values() if entity.key not in used]
    return Lexicon(merged)
