"""The executors (medsnip.executor) on a real local Ray cluster: the same shards as the local process
pool for real PubMed and Wikipedia samples, and a killed Ray build resumes to the identical result."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from pubmed_scaleup import write_scaled_pubmed

from conftest import SAMPLES
from helpers import kill_when, ray_processes, record_without_run, shard_bytes, start_corpusbuild, wait_gone
from medsnip.buildrecord import read_build_record
from medsnip.executor import LocalExecutor, RayExecutor

WIKIPEDIA = SAMPLES / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


@pytest.fixture(scope="session")
def outlived_by():
    """Ray processes a test expects to end on their own, checked when the session ends: a killed private
    cluster's agents take about a minute (their last report to the dead GCS times out), which the tests
    after it use instead of waiting it out."""
    expected: list[tuple[set[int], set[int]]] = []  # (processes before the test, those to outlive it)
    yield expected
    for before, leftovers in expected:
        assert not wait_gone(before, "ray::|raylet|gcs_server", 150) & leftovers, "a killed cluster outlived it"


def test_a_killed_ray_build_resumes_to_the_identical_result(tmp_path, pubmed_samples, outlived_by):
    """SIGKILL the driver once a parse task's marker is written: its private cluster goes with it (the
    raylet and GCS at once, Ray's agents once they notice: checked when the session ends), and the next
    Ray run reuses the finished tasks and publishes the same bytes as an uninterrupted local build."""
    folder = tmp_path / "in"
    folder.mkdir()
    inputs = []
    for number in range(4):  # real records with new PMIDs, enough to kill mid-run
        path = folder / f"pubmed26n{number + 1:04d}.xml.gz"
        write_scaled_pubmed(sorted(pubmed_samples.iterdir()), path, 2_000, 50_000_000 + number * 2_000)
        inputs.append(path)
    reference = tmp_path / "reference"
    assert start_corpusbuild("pubmed", inputs, reference, "--shards", 16, "--workers", 2).wait(timeout=300) == 0

    before = ray_processes()
    out = tmp_path / "killed"
    arguments = ("--shards", 16, "--workers", 2, "--executor", "ray")
    process = start_corpusbuild("pubmed", inputs, out, *arguments)
    kill_when(process, lambda: len(list((out / ".work").glob("parts/*/task.json"))) >= 1, timeout=300)
    assert process.returncode == -signal.SIGKILL and not (out / "build.json").exists()
    assert not wait_gone(before, "raylet|gcs_server", 30), "the killed driver's cluster outlived it"
    killed_agents = ray_processes() - before

    assert start_corpusbuild("pubmed", inputs, out, *arguments).wait(timeout=300) == 0
    assert shard_bytes(out) == shard_bytes(reference)
    assert record_without_run(out) == record_without_run(reference)
    assert read_build_record(out)["run"]["reused_file_tasks"] >= 1
    outlived_by.append((before, killed_agents | ray_processes()))


@pytest.mark.parametrize(
    "kind, inputs",
    [
        ("pubmed", [SAMPLES / "pubmed"]),
        ("wikipedia", [WIKIPEDIA]),
    ],
)
def test_ray_builds_the_same_shards_as_the_local_pool(tmp_path, kind, inputs):
    """`--executor ray` on a private 2-CPU cluster (real Ray processes) against the local pool."""
    outputs = {}
    for executor in ("local", "ray"):
        out = tmp_path / executor
        process = start_corpusbuild(kind, inputs, out, "--shards", 4, "--workers", 2, "--executor", executor)
        assert process.wait(timeout=300) == 0
        outputs[executor] = out
    assert shard_bytes(outputs["ray"]) == shard_bytes(outputs["local"]) and shard_bytes(outputs["ray"])
    assert record_without_run(outputs["ray"]) == record_without_run(outputs["local"])
    assert read_build_record(outputs["ray"])["run"]["executor"] == "ray"


def _double(task: int, offset: int) -> dict:
    if task == 99:
        raise ValueError("task 99 is bad")
    return {"value": task * 2 + offset}


def test_executors_run_the_same_tasks_and_raise_the_task_error(tmp_path):
    """Both executors hand every result to on_result, stop early when it says so, and re-raise a task's
    own exception type in the driver."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import a test module
    local, ray_executor = LocalExecutor(2), RayExecutor(num_cpus=2)
    try:
        for executor in (local, ray_executor):
            seen: dict = {}
            executor.run(
                list(range(6)), _double, (1,), lambda task, result, seen=seen: seen.update({task: result}) or True
            )
            assert seen == {n: {"value": 2 * n + 1} for n in range(6)}
            with pytest.raises(ValueError, match="task 99 is bad"):
                executor.run([1, 99], _double, (0,), lambda task, result: True)
            stopped: list = []
            executor.run(list(range(6)), _double, (0,), lambda task, result, stopped=stopped: stopped.append(task))
            assert len(stopped) == 1  # on_result said None: stop
        assert ray_executor.slots == 2
    finally:
        ray_executor.shutdown()


def test_ray_in_a_process_running_a_jvm_leaves_the_jvm_working(search_root):
    """ray.init installs Ray's crash handler over the JVM's SIGSEGV handler and ray.shutdown resets it to
    the default; Lucene's JVM faults on purpose (safepoint polls), so its next search then killed the
    process (this took the test suite down once). RayExecutor keeps the JVM's handlers: searches
    before and after a Ray run in one process, in a child so a crash cannot take pytest with it."""
    script = f"""
from indexer.bm25 import BM25Index
from medsnip.executor import RayExecutor
from medsnip.queries import query_texts
index = BM25Index.open({str(search_root / "pubmedqa" / "bm25")!r})
questions = list(query_texts({str(SAMPLES / "ir" / "pubmedqa-beir" / "queries.tsv")!r}).values())
before = index.search(questions, 100, threads=2)
RayExecutor(num_cpus=1).shutdown()
for _ in range(20):
    assert index.search(questions, 100, threads=2) == before
print("searched after Ray")
"""
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, (completed.returncode, completed.stderr[-2000:])
    assert "searched after Ray" in completed.stdout


def test_a_ray_address_where_nothing_listens_fails_fast_and_says_so(tmp_path):
    """`--ray-address HOST:PORT` with no cluster there: a usage error naming the address within the
    configured wait (MEDSNIP_RAY_CONNECT_TIMEOUT), not minutes of ray.init retrying."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "corpusbuild",
            "pubmed",
            str(SAMPLES / "pubmed" / "pubmed1.xml"),
            "--out",
            str(tmp_path / "out"),
            "--executor",
            "ray",
            "--ray-address",
            f"127.0.0.1:{port}",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MEDSNIP_RAY_CONNECT_TIMEOUT": "3"},
    )
    assert result.returncode == 3, result.stderr
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port}: nothing answered within 3 s" in result.stderr
    assert time.monotonic() - started < 60
    assert not (tmp_path / "out" / "build.json").exists()
