"""`medsnip update`: the daily job. New PubMed update files go into a built corpus, its indexes follow,
and a running searchd is told to swap generations.

1. corpusbuild: the corpus is rebuilt with its recorded inputs plus the new update files, with the
   parameters its build.json records. Parsed files are reused from the kept work, so only the new
   files are parsed; the build records its change set (corpusbuild.engine.changes).
2. indexes: every index the corpus folder holds (store, bm25, dense-*) that cites an earlier version of
   the corpus is rebuilt with the parameters its own build.json records; dense embeds only snippets
   whose text was added or changed (vectors are keyed by text digest, indexer.dense), BM25 applies the
   change set in Lucene by id (indexer.bm25.update), and the store re-reads only shards whose bytes
   changed. Each index replaced is kept as a generation until `medsnip prune` (medsnip.generations).
3. searchd: SIGHUP to `--reload-pid`, which loads the new indexes beside the serving ones and switches
   with no failed call (searchd.hot_swap).

Every stage resumes as it does on its own, so a killed update is finished by running it again.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from medsnip.buildrecord import read_build_record, read_corpus_record


class UpdateError(ValueError):
    """An update that cannot be applied as asked (the message says why)."""


def new_update_files(record: dict, folders: list[Path]) -> list[Path]:
    """The PubMed files in `folders` that the corpus's build has not read yet, in NLM's order."""
    from corpusbuild.inputs import expand_inputs, order_inputs
    from corpusbuild.sources.pubmed import SUFFIXES

    known = {str(Path(entry["path"]).resolve()) for entry in record["inputs"]}
    files, problems = expand_inputs([str(folder) for folder in folders], SUFFIXES)
    if problems:
        raise UpdateError("; ".join(problem.message for problem in problems))
    return order_inputs([path for path in files if str(Path(path).resolve()) not in known])


def check_recorded_inputs(corpus_dir: Path, record: dict) -> None:
    """Every input the corpus's build read must still be where its record says, with the recorded size:
    a rebuild without one would publish a corpus that silently lacks its records. Paths are recorded
    absolute; a relative one (from an older build) resolves from the current directory only."""
    problems = []
    for entry in record["inputs"]:
        if entry.get("status") != "ok":
            continue
        path = Path(entry["path"])
        where = "" if path.is_absolute() else f" (recorded as a relative path, looked up from {Path.cwd()})"
        if not path.is_file():
            problems.append(f"{path}: recorded input is missing{where}")
        elif "bytes" in entry and path.stat().st_size != entry["bytes"]:
            problems.append(
                f"{path}: recorded input has {path.stat().st_size:,} bytes, the build read {entry['bytes']:,}{where}"
            )
    if problems:
        raise UpdateError(
            f"{corpus_dir}/build.json: " + "; ".join(problems) + ". Nothing was published: restore "
            "the inputs (or rebuild the corpus from its inputs) and run the update again"
        )


def check_update_files(files: list[Path]) -> None:
    """A new update file must be a complete PubMed XML file before anything is rebuilt: a truncated
    download or a stray XML would otherwise be published as a failed input (an incomplete corpus)."""
    from corpusbuild.inputs import DECOMPRESSION_ERRORS, decompressed

    problems = []
    for path in files:
        try:
            with open(path, "rb") as raw:
                handle = decompressed(raw, raw.read(4))
                raw.seek(0)
                head = handle.read(4096)
                while handle.read(1 << 20):  # the whole stream: a cut .gz fails only at its end
                    pass
        except DECOMPRESSION_ERRORS as error:
            problems.append(f"{path}: cannot be decompressed to its end ({error})")
            continue
        if b"<PubmedArticleSet" not in head and b"<MedlineCitationSet" not in head:
            problems.append(f"{path}: not a PubMed update file (no PubmedArticleSet or MedlineCitationSet root)")
    if problems:
        raise UpdateError(
            "; ".join(problems) + ". Nothing was published: the corpus keeps its last complete "
            "version; move the file away or download it again"
        )


def rebuild_corpus(corpus_dir: Path, record: dict, new_files: list[Path], workers: int) -> dict:
    """corpusbuild pubmed over the recorded inputs plus `new_files`, with the recorded parameters."""
    from corpusbuild.build import exit_on_problems, run_build
    from corpusbuild.chunking import ChunkingParams
    from corpusbuild.sources import KINDS

    kind = KINDS["pubmed"]
    params = record["params"]
    options = {option.name: params[option.name] for option in kind.options if option.name in params}
    build_params = kind.params(ChunkingParams.from_dict(params), record["source"], **options)
    inputs = [entry["path"] for entry in record["inputs"]] + [str(path) for path in new_files]
    outcome = run_build(
        kind="pubmed",
        source=record["source"],
        inputs=inputs,
        params=build_params,
        options={
            "out_dir": corpus_dir,
            "shards": params["shards"],
            "workers": workers,
            "executor": "local",
            "strict": False,
            "keep_work": True,
            "quiet": True,
        },
    )
    exit_on_problems(outcome)
    return outcome.record


def rebuild_indexes(corpus_dir: Path, log) -> dict[str, dict]:
    """Every index of the corpus folder that was built from an earlier version of it, rebuilt with the
    parameters its build.json records (an index that already cites the corpus's lineage is current:
    a rerun after a kill rebuilds only what the kill left stale); returns each rebuilt one's record."""
    from indexer.bm25 import build_bm25
    from indexer.dense import build_dense
    from indexer.store import build_store
    from medsnip.corpus import Corpus, restore_interrupted_swaps
    from medsnip.encoders import DenseEncoder, EncoderSpec

    for restored in restore_interrupted_swaps(corpus_dir):
        log(f"{restored.name}: restored from a swap a crash interrupted")
    corpus = Corpus.open(corpus_dir, verify="full")
    records = {}
    built = [
        (path, read_build_record(path))
        for path in corpus_dir.iterdir()
        if not path.name.startswith(".") and (path / "build.json").is_file()
    ]  # not a killed run's temps
    built += unfinished_indexes(corpus_dir)
    stores_first = sorted(built, key=lambda item: (item[1].get("stage") != "indexer.store", item[0].name))
    for folder, old in stores_first:  # BM25's update reads the changed snippets' lines through the store
        stage, params = old.get("stage"), old.get("params", {})
        if old.get("upstream", {}).get("lineage_sha256") == corpus.record_hash:
            log(f"{folder.name}: current")
            continue
        started = time.perf_counter()
        if stage == "indexer.store":
            records[folder.name] = build_store(corpus, folder)
        elif stage == "indexer.bm25":
            groups, layout = len(params.get("groups", [[]])), params.get("layout", "merged")
            records[folder.name] = build_bm25(
                corpus,
                folder,
                params.get("threads", 1),
                groups=groups,
                layout=layout,
                language=params.get("language", "en"),
            )
        elif stage == "indexer.dense":
            feeding = dense_feeding(params)
            encoder = DenseEncoder(EncoderSpec.from_dict(old["encoder"]), dtype=feeding.dtype)
            records[folder.name] = build_dense(
                corpus,
                folder,
                encoder,
                index_factory=params["index_factory"],
                metric=params["metric"],
                batch_size=params["batch_size"],
                feeding=feeding,
                refine=params.get("refine", 0),
                nprobe=params.get("nprobe", 0),
            )
        else:
            continue
        log(f"{folder.name}: rebuilt in {time.perf_counter() - started:.1f} s")
    return records


def dense_feeding(params: dict):
    """The batch plan and precision a dense index was built with, so an update embeds its new text the
    same way (an index recorded before batch plans existed: `batch_size` rows, as then)."""
    from indexer.dense import Feeding
    from indexer.dense.feeding import BatchPlan

    plan = BatchPlan(**params["batch_plan"]) if "batch_plan" in params else None
    return Feeding(plan=plan, dtype=params.get("dtype_asked", "float32"))


def unfinished_indexes(corpus_dir: Path) -> list[tuple[Path, dict]]:
    """Index folders a killed (or disk-full) build left without build.json, as records to finish them
    with: a dense index from the encoder and parameters it wrote before embedding, a store as any store.
    An unfinished index is never skipped: the root would never be complete again."""
    from indexer.dense import UNFINISHED_PARAMS

    found = []
    for folder in sorted(corpus_dir.iterdir()):
        if not folder.is_dir() or (folder / "build.json").exists() or folder.name.startswith("."):
            continue
        encoder, params = folder / "encoder.json", folder / UNFINISHED_PARAMS
        if folder.name.startswith("dense-") and encoder.is_file() and params.is_file():
            found.append(
                (
                    folder,
                    {
                        "stage": "indexer.dense",
                        "encoder": json.loads(encoder.read_text()),
                        "params": json.loads(params.read_text()),
                    },
                )
            )
        elif folder.name == "store":
            found.append((folder, {"stage": "indexer.store", "params": {}}))
        elif folder.name.startswith(("dense-", "bm25")) and any(folder.iterdir()):
            raise UpdateError(
                f"{folder}: an index build that did not finish and cannot be resumed (no record of "
                "its parameters): build it again with `indexer`, then run the update"
            )
    return found


def check_reload_pid(pid: int, consequence: str) -> None:
    """UpdateError unless `pid` is a running searchd (searchd.process_check): SIGHUP ends most programs."""
    from searchd.process_check import searchd_problem

    problem = searchd_problem(pid)
    if problem:
        raise UpdateError(f"--reload-pid: {problem}; {consequence}")


def update(
    corpus_dir: Path, update_folders: list[Path], *, workers: int = 2, reload_pid: int | None = None, log=print
) -> dict:
    """The daily job on one PubMed corpus folder; returns what it did."""
    corpus_dir = Path(corpus_dir)
    record = read_corpus_record(corpus_dir)
    if record.get("stage") != "corpusbuild.pubmed":
        raise UpdateError(f"{corpus_dir}: a {record.get('stage')} build; medsnip update applies PubMed update files")
    if reload_pid is not None:  # before any work: a wrong pid is a mistake to hear about at once
        check_reload_pid(reload_pid, "nothing was done")
    new_files = new_update_files(record, update_folders)
    check_recorded_inputs(corpus_dir, record)
    check_update_files(new_files)
    summary: dict = {"applied": [path.name for path in new_files], "seconds": {}}
    started = time.perf_counter()
    if new_files or not record.get("complete"):
        record = rebuild_corpus(corpus_dir, record, new_files, workers)
    else:  # rebuilding would only replace the last change set with an empty one
        log("no new update files: the corpus already has every file given")
    summary["seconds"]["corpusbuild"] = round(time.perf_counter() - started, 3)
    summary["changes"] = record.get("changes")
    started = time.perf_counter()
    indexes = rebuild_indexes(corpus_dir, log)
    summary["seconds"]["indexes"] = round(time.perf_counter() - started, 3)
    summary["indexes"] = {name: index.get("counts", {}) for name, index in indexes.items()}
    if reload_pid is not None:  # checked again: the server may have gone while the indexes were rebuilt
        check_reload_pid(reload_pid, "the indexes are rebuilt, nothing was signalled")
        os.kill(reload_pid, signal.SIGHUP)
        summary["reloaded"] = reload_pid
    return summary
