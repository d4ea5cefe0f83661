"""The commands behave as one tool on a user's first mistakes: one line saying what is wrong and what to do,
an exit status, and no output file left behind or half written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from helpers import free_port, one_line

REPO = Path(__file__).resolve().parents[1]


def run(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def test_searchd_batch_to_an_unreachable_server_says_so_once_and_writes_no_run(tmp_path):
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tWhat causes scurvy?\n")
    out = tmp_path / "run.trec"
    address = f"127.0.0.1:{free_port()}"
    # side by side: each spends its seconds retrying the connection, not computing
    batch, query = (
        subprocess.Popen(
            [sys.executable, "-m", "searchd.cli", *map(str, args), "--server", address],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for args in (("batch", queries, "--out", out), ("query", "scurvy"))
    )
    said = one_line(batch.communicate(timeout=120)[0])
    assert batch.returncode == 3 and "Traceback" not in said
    assert f"error: searchd at {address} is unreachable" in said and "searchd serve --root ROOT" in said
    assert list(tmp_path.iterdir()) == [queries]  # neither run.trec nor its partial
    assert query.wait(timeout=120) == 3 and f"error: searchd at {address} is unreachable" in one_line(
        query.communicate()[0]
    )


def test_corpusbuild_with_no_input_file_builds_nothing(tmp_path):
    out = tmp_path / "pubmed"
    result = run("corpusbuild", "pubmed", tmp_path / "nosuchdir", "--out", out, "--quiet")
    said = one_line(result.stdout + result.stderr)
    assert result.returncode == 1 and f"error: {tmp_path / 'nosuchdir'}: no such file or directory" in said
    assert "nothing was built" in said and not out.exists()


def test_searchd_serve_given_a_corpus_folder_names_its_parent(search_root):
    corpus = search_root / "pubmedqa"
    result = run("searchd.cli", "serve", "--root", corpus, "--port", 0)
    said = one_line(result.stdout + result.stderr)
    assert result.returncode == 1 and f"{corpus} is a corpus folder, not a root" in said
    assert f"--root {search_root}" in said and "--corpora pubmedqa" in said


def test_review_of_a_run_without_noise_warns_and_leaves_a_judgements_file(tmp_path):
    """Nothing to review is said, and the judgements file exists from the start, so the README's next step
    (refkit assemble --judgements) works even when nobody judged anything."""
    noise = tmp_path / "noise.jsonl"
    noise.write_text('{"id": "q1", "query": "What causes scurvy?", "rewrites": [], "noise": []}\n')
    judgements = tmp_path / "judgements.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "refkit.cli", "review", noise, "--judgements", judgements, "--annotator", "ab"]
        + ["--port", "0", "--no-open"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not judgements.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    process.terminate()
    output, _ = process.communicate(timeout=30)
    assert judgements.exists() and judgements.read_text() == ""
    assert "keeps no noisy reference: nothing to review" in one_line(output)


TOOL_MAINS = {
    "corpusbuild": "corpusbuild.cli",
    "indexer": "indexer.cli",
    "searchd": "searchd.cli",
    "refkit": "refkit.cli",
    "medsnip": "pipeline.cli",
}


def test_the_readme_prints_the_exit_code_table_the_tools_use():
    """Every row of medsnip.cli_errors.EXIT_CODES, as the documentation's table writes it (docs/operations/errors.md),
    and every tool applies it."""
    import importlib

    from medsnip.cli_errors import EXIT_CODES, ToolGroup

    page = (REPO / "docs" / "operations" / "errors.md").read_text(encoding="utf-8")
    for code, meaning in EXIT_CODES.items():
        assert f"| {int(code)} | {meaning} |" in page, f"the exit-code table lacks {int(code)}: {meaning}"
    for tool, module in TOOL_MAINS.items():
        group = importlib.import_module(module).main
        assert isinstance(group, ToolGroup), tool
        assert {"--debug", "--verbose"} <= {opt for param in group.params for opt in param.opts}, tool


def test_an_internal_error_is_one_line_and_exit_70_with_its_traceback_only_under_debug(tmp_path, monkeypatch):
    """A bug (here: an exception nobody expected from corpusbuild verify's checker) is said in one line with
    exit 70 and no traceback; with --debug the traceback is printed too."""
    from click.testing import CliRunner

    import corpusbuild.engine.verify
    from corpusbuild.cli import main

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(corpusbuild.engine.verify, "corpora_of_root", broken)
    plain = CliRunner().invoke(main, ["verify", str(tmp_path)])
    assert plain.exit_code == 70 and "Traceback" not in plain.output
    assert "error: internal error, ZeroDivisionError: a bug (run again with --debug" in one_line(plain.output)
    debug = CliRunner().invoke(main, ["--debug", "verify", str(tmp_path)])
    assert debug.exit_code == 70 and "Traceback" in debug.output and 'raise ZeroDivisionError("a bug")' in debug.output


def test_verbose_keeps_the_progress_bars_of_model_loading(monkeypatch):
    """--verbose sets MEDSNIP_VERBOSE (read where models load, here and in the processes a command starts)."""
    from click.testing import CliRunner

    from refkit.cli import main

    monkeypatch.setenv("MEDSNIP_VERBOSE", "")  # off, and restored after the test
    assert CliRunner().invoke(main, ["--verbose", "score", "--help"]).exit_code == 0
    assert os.environ["MEDSNIP_VERBOSE"] == "1"
