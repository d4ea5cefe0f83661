"""`indexer dense` across devices (executor.run_on_devices) on the real PubMedQA collection: two CPU
workers in local processes, and two Ray actors on a real private cluster, each loading the encoder
once and taking shards as they come, give embeddings bit for bit equal to the single-process build;
a Ray build killed after its first shard resumes from the finished shards."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SAMPLES, build_pubmedqa, run_indexer
from helpers import alive, descendants, kill_when, ray_processes, wait_gone
from medsnip.buildrecord import read_build_record

ABSTRACTS = 40  # real PubMedQA abstracts: 4 shards of real work, small enough for CPU embedding


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory, run_corpusbuild):
    """The first ABSTRACTS abstracts of the PubMedQA collection in 4 shards, with `dense-minilm` built in
    this process, one device (the reference)."""
    folder = tmp_path_factory.mktemp("dense-devices")
    lines = (SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes().splitlines(keepends=True)
    corpus = build_pubmedqa(run_corpusbuild, lines[:ABSTRACTS], folder / "corpus.jsonl", folder / "pubmedqa", 4)
    run_indexer("dense", corpus, "--preset", "minilm", "--batch-size", 64)
    return corpus


def _embeddings(folder) -> list[bytes]:
    return [np.load(path).tobytes() for path in sorted(folder.glob("emb-*.npy"))]


def test_two_local_cpu_workers_embed_bit_for_bit_like_one_process(corpus_dir, tmp_path):
    out = tmp_path / "dense"
    run_indexer("dense", corpus_dir, "--preset", "minilm", "--batch-size", 64, "--devices", "cpu,cpu", "--out", out)
    record = read_build_record(out)
    assert record["params"]["device"] == "cpu,cpu" and record["counts"]["embedded_this_run"] == 4
    reference = _embeddings(corpus_dir / "dense-minilm")
    assert len(reference) == 4 and _embeddings(out) == reference
    assert record["encoder"] == read_build_record(corpus_dir / "dense-minilm")["encoder"]


def test_ray_actors_embed_the_same_and_a_killed_build_resumes(corpus_dir, tmp_path):
    out = tmp_path / "dense"
    command = [
        sys.executable,
        "-m",
        "indexer.cli",
        "dense",
        str(corpus_dir),
        "--preset",
        "minilm",
        "--batch-size",
        "64",
        "--devices",
        "cpu,cpu",
        "--executor",
        "ray",
        "--out",
        str(out),
    ]
    before = ray_processes()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_when(process, lambda: len(list(out.glob("emb-*.npy"))) >= 1, timeout=300)
    assert process.returncode == -signal.SIGKILL and not (out / "build.json").exists()
    # an actor may finish the shard it holds while its cluster goes down: count once the workers are gone
    assert not wait_gone(before, "ray::_DeviceActor", 30), "the killed driver's actors outlived it"
    finished = len(list(out.glob("emb-*.npy")))
    assert 1 <= finished < 4
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    record = read_build_record(out)
    assert record["run"]["executor"] == "ray" and record["counts"]["embedded_this_run"] == 4 - finished
    assert _embeddings(out) == _embeddings(corpus_dir / "dense-minilm")


def test_feeders_change_no_bit_die_with_a_killed_build_and_end_with_a_finished_one(corpus_dir, tmp_path):
    """Tokenizing in feeder processes changes nothing (same batch plan, same bits); a kill -9 of the
    build takes its feeders with it; the rerun, on two device workers with a feeder each, finishes the
    shards the kill left, and every worker stops its feeders at the end (one left holding its feeder
    pool would never exit)."""
    out = tmp_path / "dense"
    command = [
        sys.executable,
        "-m",
        "indexer.cli",
        "dense",
        str(corpus_dir),
        "--preset",
        "minilm",
        "--batch-size",
        "64",
        "--out",
        str(out),
    ]
    process = subprocess.Popen(
        [*command, "--feeders", "2"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    feeders: set[int] = set()

    def embedding_started() -> bool:
        feeders.update(descendants(process.pid))
        return len(list(out.glob("emb-*.npy"))) >= 1

    kill_when(process, embedding_started, timeout=300)
    assert process.returncode == -signal.SIGKILL and not (out / "build.json").exists()
    assert len(feeders) >= 2 and not alive(feeders, 30), "the killed build's feeders outlived it"
    finished = len(list(out.glob("emb-*.npy")))
    rerun = subprocess.Popen(
        [*command, "--devices", "cpu,cpu", "--feeders", "1"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    started: set[int] = set()
    while rerun.poll() is None:
        started.update(pid for pid in descendants(rerun.pid) if "resource_tracker" not in _command_line(pid))
        time.sleep(0.2)
    assert rerun.returncode == 0, rerun.stderr.read().decode()[-2000:]
    assert len(started) >= 4 and not alive(started, 10), "a device worker or feeder outlived the build"
    record = read_build_record(out)
    assert record["counts"]["embedded_this_run"] == 4 - finished and record["params"]["feeders"] == 1
    assert record["params"]["dtype"] == "float32" and record["params"]["batch_plan"]["rows"] == 64
    assert _embeddings(out) == _embeddings(corpus_dir / "dense-minilm")


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_bad_device_names_are_refused(corpus_dir, tmp_path):
    from click.testing import CliRunner

    from indexer.cli import main

    result = CliRunner().invoke(
        main, ["dense", str(corpus_dir), "--preset", "minilm", "--devices", "gpu0", "--out", str(tmp_path / "d")]
    )
    assert result.exit_code == 2 and "not a device: gpu0" in result.output
