"""The index kinds, one row each: what a recipe may declare for it, whether a built one is still current,
how to build it, and how searchd opens and searches it. `medsnip build` reads a recipe's
`[indexes.NAME]` tables through this table and searchd loads every index folder of a corpus by the stage
its build record names; a new index kind is a package in indexer/ plus one row of KINDS.

Read side, by role: a "store" gives snippets by id and row; a "text" retriever answers
`search(texts, k, **options) -> [[(snippet id, score), ...], ...]` (BM25; searchd micro-batches its
queries per corpus and passes the request options the row names); a "dense" retriever is a DenseIndex
(searchd encodes the queries once per encoder and calls `search_vectors`). Every opened index has its
`record` (build.json: what Info reports as its lineage) and `close()`.

    [indexes.bm25]            # the folder name under each corpus: "store", "bm25" or "dense-<name>"
    kind = "bm25"
    threads = 2
    [indexes.dense-medcpt]
    kind = "dense"
    preset = "medcpt"
    model = "${models}/MedCPT-Article-Encoder"
    query_model = "${models}/MedCPT-Query-Encoder"
    index_factory = "IVF{lists},PQ96"
    refine = 8

An index is current when its build record is complete, cites the corpus's present lineage and was
built with the options the recipe gives now (for dense: the same encoder files, by their sha256); a
current index is reused, anything else is built (each indexer resumes what a killed run left).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from indexer.bm25.sharded import LAYOUTS
from medsnip.buildrecord import read_complete_record
from medsnip.corpus import Corpus
from medsnip.encoders import POOLINGS


class DeclaredIndexError(ValueError):
    """An [indexes.NAME] table that cannot be built as written (the message names the table and key)."""


@dataclass(frozen=True)
class IndexKind:
    """One kind of index: the stage its build record names, its role when served, the options a recipe
    may give it (name -> (type, default)), whether a built one matches them, how to build it and how to
    open it for searching."""

    name: str
    stage: str  # build.json's "stage"
    role: str  # "store" | "text" | "dense" (see the module docstring)
    folder: Callable[[str], bool]  # which folder names the kind may have (a retriever is named by its folder)
    options: dict[str, tuple[type, object]]
    current: Callable[[Corpus, Path, dict, dict], bool]  # (corpus, folder, options, its record)
    build: Callable[[Corpus, Path, dict, object, Callable], dict]  # (corpus, folder, options, executor, log)
    open: Callable[..., object]  # (folder, corpus, **serving options) -> the index, searchable
    search_options: tuple[str, ...] = ()  # the request options a text retriever's search takes


@dataclass(frozen=True)
class DeclaredIndex:
    name: str
    kind: str
    options: dict = field(default_factory=dict)

    def folder(self, corpus_dir: Path) -> Path:
        return Path(corpus_dir) / self.name

    def is_current(self, corpus: Corpus) -> bool:
        folder = self.folder(corpus.path)
        record = read_complete_record(folder)
        if record is None or record.get("upstream", {}).get("lineage_sha256") != corpus.record_hash:
            return False
        return KINDS[self.kind].current(corpus, folder, self.options, record)

    def build(self, corpus: Corpus, executor, log=None) -> dict:
        return KINDS[self.kind].build(corpus, self.folder(corpus.path), self.options, executor, log or (lambda _: None))


# -- store --


def _open_store(folder: Path, corpus: Corpus, **_):
    from indexer.store import SnippetStore

    return SnippetStore(folder, corpus)


def _store_current(corpus: Corpus, folder: Path, options: dict, record: dict) -> bool:
    return record.get("stage") == "indexer.store"


def _build_store(corpus: Corpus, folder: Path, options: dict, executor, log) -> dict:
    from indexer.store import build_store
    from medsnip.joblock import folder_job

    with folder_job(corpus.path, "indexer store"):
        return build_store(corpus, folder)


# -- bm25 --


def _open_bm25(folder: Path, corpus: Corpus, **_):
    from indexer.bm25 import BM25Index

    return BM25Index(folder, corpus)


def _bm25_current(corpus: Corpus, folder: Path, options: dict, record: dict) -> bool:
    from indexer.bm25 import bm25_language

    params = record.get("params", {})
    return record.get("stage") == "indexer.bm25" and params.get("language", "en") == bm25_language(
        corpus, options["language"] or None
    )


def _build_bm25(corpus: Corpus, folder: Path, options: dict, executor, log) -> dict:
    from indexer.bm25 import build_bm25
    from medsnip.joblock import folder_job

    with folder_job(corpus.path, "indexer bm25"):
        return build_bm25(
            corpus,
            folder,
            options["threads"],
            log,
            executor=executor,
            groups=options["groups"],
            layout=options["layout"],
            language=options["language"] or None,
        )


# -- dense --

_SPEC_KEYS = (
    "model",
    "query_model",
    "pooling",
    "max_length",
    "query_max_length",
    "query_prefix",
    "document_prefix",
    "normalize",
)


def dense_job(options: dict, name: str):
    """The indexer.dense.job.DenseJob a dense table describes."""
    from indexer.dense.job import DenseJob
    from medsnip.encoders import EncoderSpec, preset

    overrides = {key: options[key] for key in _SPEC_KEYS if options.get(key) is not None}
    if options["preset"]:
        spec = preset(options["preset"], **overrides)
    else:
        spec = EncoderSpec(name=name.removeprefix("dense-"), **{"pooling": "mean", **overrides})
    return DenseJob(
        spec,
        index_factory=options["index_factory"],
        refine=options["refine"],
        nprobe=options["nprobe"],
        metric=options["metric"],
        device=options["device"],
        devices=options["devices"] or None,
        batch_size=options["batch_size"] or None,
        batch_tokens=options["batch_tokens"] or None,
        feeders=None if options["feeders"] < 0 else options["feeders"],
        feeder_timeout=options["feeder_timeout"],
        compile=options["compile"],
        fp32=options["fp32"],
    )


def _dense_current(corpus: Corpus, folder: Path, options: dict, record: dict) -> bool:
    from medsnip.encoders import EncoderSpec, EncoderUnavailable, resolve_model_dir, weights_sha256

    job = dense_job(options, folder.name)
    params, built = record.get("params", {}), record.get("encoder", {})
    if record.get("stage") != "indexer.dense":
        return False
    if (params.get("index_factory"), params.get("refine", 0), params.get("nprobe", 0), params.get("metric")) != (
        job.index_factory,
        job.refine,
        job.nprobe,
        job.metric,
    ):
        return False
    if EncoderSpec.from_dict(built).to_dict() != job.spec.to_dict():  # a field recorded before it existed: its default
        return False
    try:  # the same files, not only the same path: a model replaced in place is a new encoder
        if built.get("weights_sha256") != weights_sha256(resolve_model_dir(job.spec.model)):
            return False
        if job.spec.query_model:
            return built.get("query_weights_sha256") == weights_sha256(resolve_model_dir(job.spec.query_model))
    except EncoderUnavailable:
        return False
    return True


def _open_dense(folder: Path, corpus: Corpus, *, store=None, nprobe=None, device="cpu", refine=None, **_):
    from indexer.dense import DenseIndex

    return DenseIndex(folder, corpus, store=store, nprobe=nprobe, device=device, refine=refine)


def _build_dense(corpus: Corpus, folder: Path, options: dict, executor, log) -> dict:
    from indexer.dense.job import run_dense

    return run_dense(corpus, folder, dense_job(options, folder.name), executor, log=log)


KINDS: dict[str, IndexKind] = {
    "store": IndexKind(
        "store", "indexer.store", "store", lambda name: name == "store", {}, _store_current, _build_store, _open_store
    ),
    "bm25": IndexKind(
        "bm25",
        "indexer.bm25",
        "text",
        lambda name: name == "bm25",
        {"threads": (int, 2), "language": (str, ""), "groups": (int, 1), "layout": (str, "merged")},
        _bm25_current,
        _build_bm25,
        _open_bm25,
        search_options=("threads", "k1", "b"),
    ),
    "dense": IndexKind(
        "dense",
        "indexer.dense",
        "dense",
        lambda name: name.startswith("dense-") and len(name) > len("dense-"),
        {
            "preset": (str, None),
            "model": (str, None),
            "query_model": (str, None),
            "pooling": (str, None),
            "max_length": (int, None),
            "query_max_length": (int, None),
            "query_prefix": (str, None),
            "document_prefix": (str, None),
            "normalize": (bool, None),
            "index_factory": (str, "Flat"),
            "refine": (int, 0),
            "nprobe": (int, 0),
            "metric": (str, "ip"),
            "device": (str, "auto"),
            "devices": (str, ""),
            "batch_size": (int, 0),
            "batch_tokens": (int, 0),
            "feeders": (int, -1),  # -1: the default for the devices (indexer.dense.job.feeding_for)
            "feeder_timeout": (float, 300.0),
            "compile": (bool, False),
            "fp32": (bool, False),
        },
        _dense_current,
        _build_dense,
        _open_dense,
    ),
}


def kind_of_record(record: dict) -> IndexKind | None:
    """The kind whose builds name this record's stage (None: not an index this table knows)."""
    return next((kind for kind in KINDS.values() if kind.stage == record.get("stage")), None)


STORE = DeclaredIndex("store", "store")
CHOICES = {"pooling": POOLINGS, "metric": ("ip", "l2"), "device": ("auto", "cpu", "cuda"), "layout": LAYOUTS}


def declared_index(name: str, table: dict, where: str, resolve_path: Callable[[str], str]) -> DeclaredIndex:
    """An [indexes.NAME] table checked against its kind; `resolve_path` turns model paths relative to the
    recipe into absolute ones (hub names in the offline cache are left as they are)."""
    kind_name = table.get("kind") or ("store" if name == "store" else "bm25" if name == "bm25" else None)
    if kind_name not in KINDS:
        raise DeclaredIndexError(f"{where}: kind must be one of {', '.join(KINDS)}, got {table.get('kind')!r}")
    kind = KINDS[kind_name]
    if not kind.folder(name):
        raise DeclaredIndexError(
            f"{where}: a {kind_name} index must be named "
            f"{'dense-<name>' if kind_name == 'dense' else kind_name!r} (searchd loads by folder "
            f"name), got {name!r}"
        )
    unknown = set(table) - set(kind.options) - {"kind"}
    if unknown:
        raise DeclaredIndexError(
            f"{where}: unknown key(s) {sorted(unknown)} for a {kind_name} index; known: "
            f"{', '.join(sorted(kind.options))}"
        )
    options = {}
    for key, (wanted, default) in kind.options.items():
        value = table.get(key, default)
        if key in table:
            if wanted is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)  # TOML writes 300 for 300.0
            if not isinstance(value, wanted) or isinstance(value, bool) != (wanted is bool):
                raise DeclaredIndexError(f"{where}: {key} must be a {wanted.__name__}, got {value!r}")
            choices = CHOICES.get(key)
            if choices and value not in choices:
                raise DeclaredIndexError(f"{where}: {key} must be one of {', '.join(choices)}, got {value!r}")
        options[key] = value
    if kind_name == "dense":
        for key in ("model", "query_model"):
            if options[key] is not None:
                options[key] = resolve_path(options[key])
        try:
            dense_job(options, name)
        except (TypeError, ValueError) as error:
            raise DeclaredIndexError(f"{where}: {error}") from error
        if not options["preset"] and not options["model"]:
            raise DeclaredIndexError(f"{where}: a dense index needs preset or model")
    return DeclaredIndex(name, kind_name, options)
