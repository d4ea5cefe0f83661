"""A real Ctrl-C: SIGINT to the process group of a command started on its own, for the long-running
writers (corpusbuild pubmed with worker processes, indexer bm25 with its Anserini JVM, the process pool,
searchd batch and refkit collect in the middle of a call). Each exits 130 with one line, no traceback from
it or any worker, nothing it started still running, and nothing it had built replaced."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from command_errors_kit import REPO, SAMPLES, WORK, changes, copy_work_corpus, state

from helpers import alive, descendants, one_line


def _started(arguments: list, **options) -> subprocess.Popen:
    """Python running `arguments` (`-m MODULE ...`, `-c SCRIPT ...`) in a session of its own, so a SIGINT to its
    process group is what Ctrl-C in a terminal sends: to it and to every worker and JVM it started."""
    return subprocess.Popen(
        [sys.executable, *map(str, arguments)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_sigint_as_in_a_terminal,
        **options,
    )


def _sigint_as_in_a_terminal() -> None:
    """In the child: SIGINT back to its default. pytest-xdist's workers ignore SIGINT and a child inherits
    that, and Python installs its KeyboardInterrupt handler only where SIGINT is not ignored: without this
    the command would never see the Ctrl-C a terminal gives it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ctrl_c(process: subprocess.Popen, ready, timeout: float = 120) -> tuple[str, str]:
    """SIGINT to `process`'s group once `ready()` holds (the command still running); its output."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    os.killpg(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    return stdout, stderr


def _interrupted(process: subprocess.Popen, stdout: str, stderr: str) -> None:
    """Exit 130 with the one line, no traceback (from it or a worker), and nothing it started still running."""
    said = stdout + stderr
    assert process.returncode == 130, said
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: interrupted (Ctrl-C)"), said
    assert not alive(_in_session(process.pid), 30), "a worker or JVM outlived the interrupted command"


def _in_session(session: int) -> set[int]:
    """The running processes of a session (what `_started` made, and everything it started)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split() if entry.name.isdigit() else None
        except OSError:
            continue
        if fields and int(fields[3]) == session:
            found.add(int(entry.name))
    return found


def test_ctrl_c_stops_a_pubmed_build_and_its_workers_and_replaces_nothing(tmp_path, work):
    """Worker processes parsing files when Ctrl-C reaches the whole process group: exit 130, one line, no
    traceback from any worker, and the earlier build in --out exactly as it was (the parsed parts kept in
    .work are what the README says a re-run reuses)."""
    from pubmed_scaleup import write_scaled_pubmed

    folder = tmp_path / "in"
    folder.mkdir()
    inputs = [folder / f"pubmed26n{number:04d}.xml.gz" for number in range(1, 5)]
    # real records under new PMIDs, in four update files (each replaces the one before): a build of seconds
    write_scaled_pubmed(sorted((SAMPLES / "pubmed").glob("pubmed[0-9].xml")), inputs[0], 2_500, 60_000_000)
    for path in inputs[1:]:
        shutil.copyfile(inputs[0], path)
    out = tmp_path / "out"
    copy_work_corpus(work, tmp_path)  # tmp_path/o: an earlier complete build
    (tmp_path / "o").rename(out)
    before = state(out)
    parsed = set((out / ".work" / "parts").glob("*/task.json"))  # the earlier build's
    process = _started(["-m", "corpusbuild", "pubmed", *inputs, "--out", out, "--workers", 2, "--shards", 4, "--quiet"])
    stdout, stderr = _ctrl_c(process, lambda: set((out / ".work" / "parts").glob("*/task.json")) - parsed)
    _interrupted(process, stdout, stderr)
    assert changes(before, state(out), WORK) == []


def test_ctrl_c_stops_bm25_and_its_jvm_and_replaces_nothing(tmp_path, work):
    """Ctrl-C while Anserini's JVM indexes: the JVM ends with the indexer, exit 130, and the index in --out
    is the earlier one, byte for byte, with no temp folder beside it."""
    out = tmp_path / "bm25"
    first = subprocess.run(
        [sys.executable, "-m", "indexer.cli", "bm25", work.corpus, "--out", out],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stderr
    before = state(tmp_path, work.folder)
    process = _started(["-m", "indexer.cli", "bm25", work.corpus, "--out", out, "--full"])

    def java_running() -> bool:
        for pid in descendants(process.pid):
            try:
                if b"IndexCollection" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return True
            except OSError:
                pass
        return False

    stdout, stderr = _ctrl_c(process, java_running)
    _interrupted(process, stdout, stderr)
    assert changes(before, state(tmp_path, work.folder)) == []


POOL_SCRIPT = """
import sys, time
from pathlib import Path
from medsnip.executor import LocalExecutor

def task(seconds):
    time.sleep(seconds)
    return {}

def first_done(task, result):
    Path(sys.argv[1]).touch()
    return True

try:
    LocalExecutor(2).run([0.05, 60], task, (), first_done)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_ctrl_c_stops_the_process_pool_at_once_and_no_worker_prints_a_traceback(tmp_path):
    """One worker idle (its task done), one in a long task when Ctrl-C reaches them all: the idle one used
    to die printing a KeyboardInterrupt traceback, and the driver waited for the long one to finish."""
    marker = tmp_path / "first-done"
    process = _started(["-c", POOL_SCRIPT, marker])
    started = time.monotonic()
    _, stderr = _ctrl_c(process, marker.exists)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert time.monotonic() - started < 30  # the 60-second task was not waited for
    assert not alive(_in_session(process.pid), 30)


def _many_queries(path: Path, count: int) -> Path:
    path.write_text("".join(f"q{n}\twhat causes condition number {n}?\n" for n in range(count)), encoding="utf-8")
    return path


def test_ctrl_c_in_the_middle_of_a_searchd_batch_writes_no_run(tmp_path, fake_searchd):
    """Interrupted while a BatchSearch call is under way, with part of the run written: no run file, and
    no partial one either (an earlier run is left as it was)."""
    service, address = fake_searchd
    service.hold_at = 5
    queries = _many_queries(tmp_path / "queries.tsv", 100)
    out = tmp_path / "run.trec"
    out.write_text("an earlier run\n")
    before = state(tmp_path)
    process = _started(["-m", "searchd.cli", "batch", queries, "--out", out, "--server", address, "--batch", 8])
    stdout, stderr = _ctrl_c(process, service.reached.is_set)
    _interrupted(process, stdout, stderr)
    assert changes(before, state(tmp_path)) == []


def test_ctrl_c_in_the_middle_of_refkit_collect_keeps_only_its_resumable_progress(tmp_path, fake_searchd):
    """Interrupted after its first 256 queries were written: OUT does not exist, OUT.partial and its
    state are kept, and the same command run again finishes the run from there."""
    service, address = fake_searchd
    service.hold_at = 10  # BatchSearch calls of 32 queries: the first chunk of 256 is written by then
    queries = _many_queries(tmp_path / "queries.tsv", 300)
    out = tmp_path / "refs.jsonl"
    command = ["-m", "refkit.cli", "collect", queries, "--out", out, "--server", address]
    process = _started(command)
    stdout, stderr = _ctrl_c(process, service.reached.is_set)
    _interrupted(process, stdout, stderr)
    assert not out.exists() and (tmp_path / "refs.jsonl.partial").stat().st_size > 0
    service.release.set()
    resumed = subprocess.run([sys.executable, *map(str, command)], cwd=REPO, capture_output=True, text=True)
    assert resumed.returncode == 0 and "resuming: 256 of 300 queries" in one_line(resumed.stderr), resumed.stderr
    assert len(out.read_text().splitlines()) == 300 and not (tmp_path / "refs.jsonl.partial").exists()
