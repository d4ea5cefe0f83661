"""Building a dense index from its embeddings: the FAISS index factory made concrete for the corpus size, one
training on a seeded sample (kept and reused until enough vectors are new), one index per shard."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson

from indexer.dense.embedding import Feeding, embed_corpus, embedding_dtypes, truncated_snippets
from indexer.dense.files import (
    RETRAIN_SHARE,
    STAGE,
    TRAIN_SAMPLE_MAX,
    TRAIN_SAMPLE_SEED,
    TRAINED,
    embeddings_name,
    faiss_name,
    metric_code,
    write_atomic,
)
from medsnip.buildrecord import read_complete_record, sha256_file, write_build_record
from medsnip.corpus import Corpus, index_record
from medsnip.encoders import DenseEncoder
from medsnip.generations import keep_index
from medsnip.processes import remove_stale_temps


def training_sample_size(vectors: int, lists: int) -> int:
    """How many vectors train an index: TRAIN_SAMPLE_MAX, or 40 a list where an IVF has more lists than
    that sample trains well (k-means wants 39 points a centroid: FAISS warns below), at most every vector."""
    return min(vectors, max(TRAIN_SAMPLE_MAX, 40 * lists))


def _training_sample(out: Path, corpus: Corpus, dimension: int, lists: int = 0) -> np.ndarray:
    """A seeded sample of training_sample_size embeddings drawn across all shards."""
    total = corpus.snippets
    rng = np.random.default_rng(TRAIN_SAMPLE_SEED)
    count = training_sample_size(total, lists)
    chosen = np.sort(rng.choice(total, size=count, replace=False)) if count < total else np.arange(total)
    sample = np.empty((count, dimension), dtype=np.float32)
    start = filled = 0
    for shard in corpus.shards:
        vectors = np.load(out / embeddings_name(shard.index), mmap_mode="r")
        rows = chosen[(chosen >= start) & (chosen < start + shard.records)] - start
        sample[filled : filled + len(rows)] = vectors[rows]
        filled += len(rows)
        start += shard.records
    return sample


def _reusable_training(out: Path, index_factory: str, metric: str, identity: dict) -> dict | None:
    """The training record of the index in `out`, when its trained.index can start this build too: the
    same index type, metric and encoder, and the file the record names."""
    record = read_complete_record(out)
    if record is None:
        return None
    training = record.get("training")
    params = record.get("params", {})
    built = params.get("index_factory_built", params.get("index_factory"))
    if (
        not training
        or built != index_factory
        or params.get("metric") != metric
        or record.get("encoder") != identity
        or not (out / TRAINED).is_file()
    ):
        return None
    if sha256_file(out / TRAINED)[0] != training["sha256"]:
        return None
    return training


def _trained_template(out: Path, corpus: Corpus, template, previous: dict | None, embedded_now: int, dimension: int):
    """(the trained index every shard starts from, the training record) for an index type that needs
    training. The earlier build's trained index is reused while the vectors embedded since it was
    trained stay within RETRAIN_SHARE of the index: an update's new and changed snippets are assigned
    to the lists the earlier snippets defined, so lists stay comparable between days; past that share
    the sample no longer stands for the corpus and the index is trained again on a new one."""
    import faiss

    since = (previous["embedded_since_training"] + embedded_now) if previous else None
    if previous is not None and since <= RETRAIN_SHARE * corpus.snippets:
        template = faiss.read_index(str(out / TRAINED))
        training = {**previous, "embedded_since_training": since, "reused": True}
    else:
        ivf = faiss.try_extract_index_ivf(template)
        sample = _training_sample(out, corpus, dimension, ivf.nlist if ivf is not None else 0)
        template = _train(template, sample)
        temp = out / f".{TRAINED}.tmp-{os.getpid()}"
        faiss.write_index(template, str(temp))
        os.replace(temp, out / TRAINED)
        training = {
            "trained_on_vectors": corpus.snippets,
            "sample": len(sample),
            "embedded_since_training": 0,
            "reused": False,
        }
    training["sha256"] = sha256_file(out / TRAINED)[0]
    training["retrain_share"] = RETRAIN_SHARE
    return template, training


def lists_for(vectors: int) -> int:
    """Inverted lists for `vectors`: about 4 sqrt(n) as a power of two (FAISS's guideline of 4-16 sqrt(n),
    at its cheap end: fewer centroids to train and to search per query), at most 65,536, and few enough
    that every list gets 39 training vectors (training_sample_size takes 40 a list where it can)."""
    wanted = 2 ** round(np.log2(max(4 * np.sqrt(max(vectors, 1)), 1)))
    trainable = 2 ** int(np.log2(max(vectors // 39, 1)))
    return int(max(1, min(wanted, trainable, 65_536)))


def concrete_factory(index_factory: str, vectors: int) -> str:
    """`index_factory` with `{lists}` sized to the corpus (lists_for), and exact `Flat` where the corpus
    is too small to train what it asks for (a PQ codebook needs 256 vectors; IVF at least one list):
    a recipe's MedCorp index then builds on the sample corpora too, as an exact index."""
    factory = index_factory.replace("{lists}", str(lists_for(vectors)))
    if "{" in factory:
        raise ValueError(f"index factory {index_factory!r}: the only placeholder is {{lists}}")
    needs_codebook = any(part.startswith(("PQ", "OPQ", "IVF")) and "PQ" in part for part in factory.split(","))
    if needs_codebook and vectors < 256:
        return "Flat"
    return factory


UNFINISHED_PARAMS = "build-params.json"  # written first, so an unfinished build can be finished by a later run


def build_dense(
    corpus: Corpus,
    out: Path,
    encoder: DenseEncoder,
    *,
    index_factory: str = "Flat",
    metric: str = "ip",
    batch_size: int = 32,
    log=None,
    executor=None,
    devices: list[str] | None = None,
    feeding: Feeding | None = None,
    refine: int = 0,
    nprobe: int = 0,
) -> dict:
    """Embed (resumably, across `devices` through `executor`: see embed_corpus) and index `corpus` into
    `out`; build.json is written last. An index in `out` of another corpus version is kept as a
    generation first (medsnip.generations: hard links, so every file below is replaced by renaming,
    never rewritten in place). `index_factory` may hold `{lists}` (sized to the corpus: lists_for);
    `refine`: searches re-rank refine x k candidates exactly from the kept embeddings; `nprobe`: the
    inverted lists an IVF search visits (both recorded as the index's defaults; 0: none / FAISS's 1); `feeding`:
    how tokenized texts reach the encoder (embed_corpus; None: its defaults)."""
    import faiss

    feeding = feeding or Feeding()
    started = time.perf_counter()
    keep_index(out, corpus.record_hash)
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out)  # half-written embeddings or FAISS files of a killed earlier run
    identity = encoder.identity()
    built_factory = concrete_factory(index_factory, corpus.snippets)
    previous_training = _reusable_training(out, built_factory, metric, identity)
    identity_file = out / "encoder.json"
    if identity_file.is_file() and orjson.loads(identity_file.read_bytes()) != identity:
        for stale in out.glob("emb-*"):  # embeddings (and counts) of another model: never mix them
            stale.unlink()
    write_atomic(identity_file, orjson.dumps(identity, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    (out / "build.json").unlink(missing_ok=True)  # the output is incomplete until build.json is rewritten
    plan = feeding.plan_for(encoder, batch_size)
    # what a later run needs to finish this build if it is killed before build.json (medsnip update)
    write_atomic(
        out / UNFINISHED_PARAMS,
        orjson.dumps(
            {
                "index_factory": index_factory,
                "metric": metric,
                "batch_size": batch_size,
                "batch_plan": plan.to_dict(),
                "dtype_asked": feeding.dtype,
                "refine": refine,
                "nprobe": nprobe,
            },
            option=orjson.OPT_SORT_KEYS,
        ),
    )
    embed_started = time.perf_counter()
    devices = devices or [encoder.device]
    feeding = replace(feeding, plan=plan)
    embedded_now, snippets_embedded = embed_corpus(
        corpus, out, encoder, batch_size, log, executor=executor, devices=devices, feeding=feeding
    )
    embed_seconds = time.perf_counter() - embed_started

    dimension = identity["dimension"]
    index_started = time.perf_counter()
    template = faiss.index_factory(dimension, built_factory, metric_code(metric))
    ivf = faiss.try_extract_index_ivf(template)
    if ivf is not None and hasattr(faiss.downcast_index(ivf), "do_polysemous_training"):
        # The factory turns on polysemous training for IVF-PQ: it reorders each codebook so that Hamming
        # distances between codes follow real ones, for a Hamming pre-filter searches here never use.
        # ADC scores do not depend on the order, so the hits are the same; training took 2,000x longer
        # (IVF4,PQ96 on 300 vectors: 214 s against 0.1 s).
        faiss.downcast_index(ivf).do_polysemous_training = False
    training = None
    if not template.is_trained:
        template, training = _trained_template(out, corpus, template, previous_training, snippets_embedded, dimension)
    shard_entries = []
    for shard in corpus.shards:
        vectors = np.load(out / embeddings_name(shard.index)).astype(np.float32)
        index = faiss.clone_index(template)
        index.add(vectors)
        path = out / faiss_name(shard.index)
        temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        faiss.write_index(index, str(temp))
        os.replace(temp, path)
        shard_entries.append(
            {
                "shard": shard.index,
                "rows": int(index.ntotal),
                "faiss": path.name,
                "embeddings": embeddings_name(shard.index),
            }
        )
    index_seconds = time.perf_counter() - index_started
    record = index_record(
        STAGE,
        corpus,
        encoder=identity,
        params={
            "index_factory": index_factory,
            "index_factory_built": built_factory,
            "refine": refine,
            "nprobe": nprobe,
            "metric": metric,
            "batch_size": batch_size,
            "batch_plan": plan.to_dict(),
            "feeders": feeding.feeders,
            "compile": feeding.compile,
            "dtype_asked": feeding.dtype,
            "dtype": ",".join(embedding_dtypes(out, corpus)),
            "train_sample_seed": TRAIN_SAMPLE_SEED,
            "train_sample_max": TRAIN_SAMPLE_MAX,
            "embeddings_dtype": "float16",
            "device": ",".join(devices),
        },
        engine={"faiss": faiss.__version__},
        shards=shard_entries,
        **({"training": training} if training else {}),
        counts={
            "vectors": sum(entry["rows"] for entry in shard_entries),
            "embedded_this_run": len(embedded_now),
            "snippets_embedded_this_run": snippets_embedded,
            "truncated_snippets": truncated_snippets(out, corpus),
        },
        run={
            "executor": getattr(executor, "name", "local"),
            "seconds": {
                "embed": round(embed_seconds, 3),
                "index": round(index_seconds, 3),
                "total": round(time.perf_counter() - started, 3),
            },
        },
    )
    write_build_record(out, record)
    if log:
        truncated = record["counts"]["truncated_snippets"]
        cut = f"; {truncated:,} snippets cut at {identity['max_length']} tokens" if truncated else ""
        log(f"dense: {record['counts']['vectors']:,} vectors ({built_factory}, {metric}){cut} -> {out}")
    return record


def _train(index, sample: np.ndarray):
    """Train on the GPUs when faiss-gpu sees any (k-means is the slow part), else on the CPU; the
    trained index comes back as a CPU index either way."""
    import faiss

    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if gpus:
        try:
            on_gpu = faiss.index_cpu_to_all_gpus(index)
        except RuntimeError:  # a type faiss-gpu does not implement: train it on the CPU
            on_gpu = None
        if on_gpu is not None:
            on_gpu.train(sample)
            return faiss.index_gpu_to_cpu(on_gpu)
    index.train(sample)
    return index
