"""indexer dense's feeding pipeline (indexer.dense.feeding, indexer.dense.device_loop) on real PubMedQA abstracts:
the vectors and cut flags equal the encoder's own `encode` (the path before the pipeline) in feeder
processes or in-process, for texts and (title, content) pairs; batch plans are deterministic and keep
their budget; a shard many times the queue's size is embedded with memory that follows the queue depth
(null model: the feeding is what is measured); GPU builds default to every free core as a feeder."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import orjson
import pytest
from feeding_bench import null_dense_encoder

from helpers import PUBMEDQA_CORPUS, children, pubmedqa_abstracts, read_proc
from indexer.dense import Feeding, close_feeders, embed_corpus
from indexer.dense.device_loop import embed_windows
from indexer.dense.feeding import BatchPlan, Feeders, tokenize_window, tokenizer_settings
from indexer.dense.job import DenseJob, feeding_for
from medsnip.corpus import Corpus
from medsnip.encoders import DenseEncoder, preset


@pytest.fixture(scope="module")
def minilm():
    return DenseEncoder(preset("minilm"), device="cpu").documents


@pytest.fixture(scope="module")
def abstracts() -> list[dict]:
    return pubmedqa_abstracts(24)


@pytest.mark.parametrize("feeders", [0, 2])
def test_fed_vectors_equal_the_encoders_own(minilm, abstracts, feeders):
    texts = [a["contents"] for a in abstracts]
    pairs = [(a["title"], a["content"]) for a in abstracts[:8]]
    feeding = Feeders(tokenizer_settings(minilm), feeders, depth=2)
    try:
        for inputs in (texts, pairs):
            expected = minilm.encode(inputs, batch_size=8)
            cut = list(minilm.last_cut)
            windows = [(start, inputs[start : start + 7]) for start in range(0, len(inputs), 7)]
            fed = list(embed_windows(minilm, feeding.tokenized(windows), BatchPlan(rows=8, tokens=1024)))
            assert [key for key, _, _ in fed] == [key for key, _ in windows]
            vectors = np.concatenate([vectors for _, _, vectors in fed])
            assert np.abs(vectors - expected).max() < 1e-5
            assert np.concatenate([window.cut for _, window, _ in fed]).tolist() == cut
        assert sum(cut) < len(cut) and any(minilm.last_cut)  # some texts cut at 256 tokens, some not
    finally:
        feeding.close()


def test_ids_equal_the_transformers_tokenizer(minilm, abstracts):
    texts = [a["contents"] for a in abstracts]
    window = tokenize_window(texts, Feeders(tokenizer_settings(minilm), 0)._local, tokenizer_settings(minilm))
    expected = minilm.tokenizer(texts, truncation=True, max_length=minilm.max_length)["input_ids"]
    assert [window.ids[a:b].tolist() for a, b in zip(window.offsets, window.offsets[1:], strict=False)] == expected
    assert window.cut.tolist() == [n > minilm.max_length for n in map(len, minilm.tokenizer(texts)["input_ids"])]


def test_batch_plans_are_deterministic_and_keep_their_budget(minilm, abstracts):
    lengths = np.asarray([len(ids) for ids in minilm.tokenizer([a["contents"] for a in abstracts] * 8)["input_ids"]])
    lengths = np.minimum(lengths, 256)
    plan = BatchPlan(rows=16, tokens=2048, pad_multiple=8)
    batches = plan.batches(lengths, 256)
    again = plan.batches(lengths.copy(), 256)
    assert [(rows.tolist(), padded) for rows, padded in batches] == [(rows.tolist(), p) for rows, p in again]
    seen = np.concatenate([rows for rows, _ in batches])
    assert sorted(seen.tolist()) == list(range(len(lengths)))  # every text once
    for rows, padded in batches:
        assert len(rows) <= 16 and (len(rows) * padded <= 2048 or len(rows) == 1)
        assert padded >= lengths[rows].max() and (padded % 8 == 0 or padded == 256)
    assert len({len(rows) for rows, _ in batches}) > 1  # short texts go more to a batch than long ones
    assert list(lengths[seen]) == sorted(lengths, reverse=True)  # longest first


def _shard_of(folder, lines: list[bytes], copies: int, run_corpusbuild) -> Corpus:
    """A one-shard corpus of `copies` rounds of real PubMedQA abstracts under new ids (corpusbuild jsonl)."""
    folder.mkdir()
    rows = []
    for round_number in range(copies):
        for line in lines:
            record = orjson.loads(line)
            rows.append(orjson.dumps({**record, "_id": f"{record['_id']}-{round_number}"}))
    (folder / "corpus.jsonl").write_bytes(b"\n".join(rows) + b"\n")
    result = run_corpusbuild(
        "jsonl",
        folder / "corpus.jsonl",
        "--source",
        "pubmedqa",
        "--no-chunk",
        "--out",
        folder / "corpus",
        "--shards",
        1,
        "--workers",
        1,
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    return Corpus.open(folder / "corpus")


def test_memory_follows_the_queue_not_the_shard(tmp_path, run_corpusbuild):
    """A shard of 8x the snippets costs about what a shard of 1x costs in the embedding process: windows
    are read from a memory map, tokenized ahead at most `depth` at a time and the vectors are written to
    a memory-mapped file."""
    lines = PUBMEDQA_CORPUS.read_bytes().splitlines()[:100]  # 400 rows against 3,200: 2 windows against 13
    peaks = {}
    for copies in (4, 32):
        corpus = _shard_of(tmp_path / f"corpus-{copies}", lines, copies, run_corpusbuild)
        encoder = null_dense_encoder()
        feeding = Feeding(plan=BatchPlan(rows=64, tokens=16384, window=256), feeders=2)
        tracemalloc.start()
        (tmp_path / f"dense-{copies}").mkdir()
        embed_corpus(corpus, tmp_path / f"dense-{copies}", encoder, 64, feeding=feeding)
        peaks[copies] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert encoder.documents.feeders.peak_in_flight <= encoder.documents.feeders.depth
        close_feeders(encoder)
        vectors = np.load(tmp_path / f"dense-{copies}" / "emb-00000.npy", mmap_mode="r")
        assert vectors.shape == (copies * len(lines), 768)
    assert peaks[32] < 1.5 * peaks[4] + 2**20, peaks  # 8x the rows: not 8x the memory


@pytest.mark.parametrize(("cores", "gpus", "feeders"), [(16, 1, 15), (64, 1, 16), (16, 2, 7), (2, 1, 1), (1, 2, 1)])
def test_gpu_builds_feed_from_every_free_core_up_to_16_a_device(monkeypatch, cores, gpus, feeders):
    """One core per device for its embedding process, the rest shared as feeders (at most 16 each); big
    token-budget batches; CPU builds tokenize in the embedding process."""
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    encoder = SimpleNamespace(documents=SimpleNamespace(max_length=256))
    job = DenseJob(preset("minilm"))
    batch_size, feeding = feeding_for(encoder, [f"cuda:{n}" for n in range(gpus)], job)
    assert feeding.feeders == feeders and batch_size == 512
    assert (feeding.plan.rows, feeding.plan.tokens) == (512, 65536)
    batch_size, feeding = feeding_for(encoder, ["cpu"], DenseJob(preset("minilm"), fp32=True))
    assert feeding.feeders == 0 and (batch_size, feeding.plan.tokens) == (32, 32 * 256)
    assert feeding_for(encoder, ["cuda:0"], DenseJob(preset("minilm"), feeders=3))[1].feeders == 3  # --feeders wins


# -- feeders under faults: a killed, stopped or failing feeder ends the build in bounded time --


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = open(f"/proc/{pid}/status").read() if os.path.exists(f"/proc/{pid}/status") else ""
    return "State:\tZ" not in status


@pytest.mark.parametrize("fault", ["SIGSTOP", "SIGKILL"])
def test_a_stopped_or_killed_feeder_fails_the_job_in_bounded_time(minilm, abstracts, fault):
    """The last hostile pass stopped a feeder and the build sat for more than 450 s. Now, within bounded
    time: a FeederError naming the window the feeder owed; or, for a stopped feeder that happened to owe
    nothing (the other one took every window), a finished stream and the stopped feeder killed at the end.
    Never a wait without end, and no feeder left behind."""
    import signal
    import time

    from indexer.dense.feeding import FeederError

    texts = [a["contents"] for a in abstracts]
    feeders = Feeders(tokenizer_settings(minilm), 2, depth=2, timeout=5)
    windows = [((number, start), texts) for number, start in enumerate(range(0, 4000, 24))]
    stream = feeders.tokenized(windows)
    next(stream)  # the feeders are up and have answered
    pids = feeders.pids
    os.kill(pids[0], getattr(signal, fault))
    started = time.monotonic()
    failure = None
    try:
        for _ in stream:
            pass
    except FeederError as error:
        failure = error
    if failure is None:  # the stopped feeder owed nothing: the stream ended, and closing must not wait on it
        assert fault == "SIGSTOP", "a killed feeder breaks the pool: the stream cannot end normally"
        feeders.close(grace=2)
    else:
        assert ("no feeder answered in 5 s" if fault == "SIGSTOP" else "died") in str(failure)
        assert failure.key in [key for key, _ in windows]
    assert time.monotonic() - started < 20
    assert not any(_alive(pid) for pid in pids)


def test_a_feeder_killed_before_the_next_window_is_handed_out_is_a_feeder_error(minilm, abstracts):
    """The pool may see a feeder's death before the next window is submitted (under load it did, in CI's make
    test): that submit fails too, and it is the same FeederError naming that window, not the pool's own error."""
    import signal
    import time

    from indexer.dense.feeding import FeederError

    texts = [a["contents"] for a in abstracts[:24]]
    feeders = Feeders(tokenizer_settings(minilm), 2, depth=2, timeout=5)
    stream = feeders.tokenized([((number, 0), texts) for number in range(50)])
    next(stream)
    pids = feeders.pids
    os.kill(pids[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not feeders._pool._broken and time.monotonic() < deadline:  # the pool's own thread has seen it
        time.sleep(0.05)
    assert feeders._pool._broken
    with pytest.raises(FeederError, match="died") as failure:
        list(stream)
    assert failure.value.key[0] in range(50)
    assert not any(_alive(pid) for pid in pids)


@pytest.mark.parametrize("feeders", [0, 2])
def test_a_text_that_cannot_be_tokenized_is_named(minilm, abstracts, feeders):
    from indexer.dense.feeding import FeederError

    texts = [a["contents"] for a in abstracts[:6]]
    bad = texts[:3] + [None] + texts[3:]  # a line whose text is not a string
    pool = Feeders(tokenizer_settings(minilm), feeders, depth=2, timeout=30)
    with pytest.raises(FeederError) as failure:
        list(pool.tokenized([(("shard", 0), texts), (("shard", 7), bad)]))
    assert failure.value.key == ("shard", 7) and failure.value.why.startswith("text 3 of the window")
    pool.close()


def test_an_interrupted_build_leaves_no_feeder(minilm, abstracts):
    """Ctrl-C (here a KeyboardInterrupt raised in the consumer) kills every feeder at once."""
    texts = [a["contents"] for a in abstracts]
    feeders = Feeders(tokenizer_settings(minilm), 2, depth=2)
    stream = feeders.tokenized((n, texts) for n in range(100))
    next(stream)
    pids = feeders.pids
    with pytest.raises(KeyboardInterrupt):
        stream.throw(KeyboardInterrupt)
    assert pids and not any(_alive(pid) for pid in pids)


def test_indexer_dense_with_stopped_feeders_never_hangs(tmp_path, run_corpusbuild):
    """`indexer dense --feeders 2` on real abstracts with both feeders stopped (SIGSTOP) as soon as they
    start: the command ends in bounded time, either failing within its --feeder-timeout with the shard
    and rows named and no index published, or, where a feeder had already tokenized its window, with the
    index built and the stopped feeders killed (it once finished its shards and then waited forever)."""
    import signal
    import subprocess
    import sys
    import time

    lines = PUBMEDQA_CORPUS.read_bytes().splitlines()[:100]
    corpus = _shard_of(tmp_path / "corpus", lines, 2, run_corpusbuild)
    out = tmp_path / "dense"
    command = [
        sys.executable,
        "-m",
        "indexer.cli",
        "dense",
        str(corpus.path),
        "--preset",
        "minilm",
        "--device",
        "cpu",
        "--feeders",
        "2",
        "--feeder-timeout",
        "8",
        "--batch-size",
        "8",
        "--out",
        str(out),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    stopped: set[int] = set()
    first_stop = None  # feeders start as windows need them: stop every one that shows up for 5 s
    while time.monotonic() < deadline and process.poll() is None:
        if first_stop is not None and time.monotonic() - first_stop > 5:
            break
        for pid in children(process.pid) - stopped:
            if "spawn_main" in read_proc(Path(f"/proc/{pid}/cmdline")):
                os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)
                first_stop = first_stop or time.monotonic()
        time.sleep(0.05)
    assert stopped
    started = time.monotonic()
    output, _ = process.communicate(timeout=180)
    assert time.monotonic() - started < 120
    if process.returncode == 1:
        assert "shard-00000-of-00001.jsonl: texts from row 0" in output and "no feeder answered in 8 s" in output
        assert not (out / "build.json").exists()
    else:
        assert process.returncode == 0, output
        assert (out / "build.json").is_file()
    assert not any(_alive(pid) for pid in stopped)
