"""Every command of the five tools on the mistakes a user meets first: a missing input, an unreadable one
(garbage bytes, a truncated gzip, a folder where a file belongs, a folder that is no corpus) and an
unreachable server. Each gives one `error:` line naming the file or address, the exit status of the
README's table (1 input, 3 unreachable), no traceback, and leaves no new or changed output file: every
file under the test's folders is hashed before and after (a resumable job's progress excepted where its
README says it is kept). Commands run in this process (click's CliRunner). Ctrl-C:
tests/test_command_interrupts.py and tests/test_ctrl_c_processes.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from command_errors_kit import (
    SAMPLES,
    WORK,
    Case,
    assemble_command,
    changes,
    copy_work_corpus,
    error_line,
    eval_args,
    invoke,
    kinds_cases,
    noise_command,
    state,
)

from helpers import free_port

MISSING = {
    **kinds_cases(lambda w, kind: w.missing),
    "corpusbuild build": Case("corpusbuild", lambda w, out: ["build", w.missing, "--out", out / "root"]),
    "corpusbuild export": Case(
        "corpusbuild", lambda w, out: ["export", w.missing, "--format", "medrag", "--out", out / "x.jsonl"]
    ),
    "corpusbuild verify": Case("corpusbuild", lambda w, out: ["verify", w.missing]),
    "indexer store": Case("indexer", lambda w, out: ["store", w.missing, "--out", out / "store"]),
    "indexer bm25": Case("indexer", lambda w, out: ["bm25", w.missing, "--out", out / "bm25"]),
    "indexer dense": Case("indexer", lambda w, out: ["dense", w.missing, "--preset", "minilm", "--out", out / "d"]),
    "indexer distill-static": Case("indexer", lambda w, out: ["distill-static", w.missing, "--out", out / "m"]),
    "indexer eval": Case(
        "indexer",
        lambda w, out: eval_args(w, out, w.missing, w.qrels),
    ),
    "searchd serve": Case(
        "searchd", lambda w, out: ["serve", "--root", w.missing, "--port-file", out / "port", "--pid-file", out / "p"]
    ),
    "searchd reload": Case("searchd", lambda w, out: ["reload", "--pid-file", w.missing]),
    "searchd query": Case("searchd", lambda w, out: ["query", "scurvy", "--token-file", w.missing]),
    "searchd call": Case("searchd", lambda w, out: ["call", "Info", "--token-file", w.missing]),
    "searchd batch": Case("searchd", lambda w, out: ["batch", w.missing, "--out", out / "run"]),
    "refkit collect": Case("refkit", lambda w, out: ["collect", w.missing, "--out", out / "refs.jsonl"]),
    "refkit reader-folder": Case("refkit", lambda w, out: ["reader-folder", w.missing, "--out", out / "model"]),
    "refkit lexicon": Case("refkit", lambda w, out: ["lexicon", "--mesh", w.missing, "--out", out / "lex.tsv"]),
    "refkit lexicon --translations": Case(
        "refkit",
        lambda w, out: [
            "lexicon",
            "--mesh",
            SAMPLES / "mesh" / "meshrdf-desc-samples.xml",
            "--translations",
            f"fr={w.missing}",
            "--out",
            out / "lex.tsv",
        ],
    ),
    "refkit noise": Case(
        "refkit",
        lambda w, out: ["noise", w.queries, "--lexicon", w.missing, "--seed", 1, "--out", out / "noise.jsonl"],
    ),
    "refkit label": Case(
        "refkit", lambda w, out: ["label", w.missing, "--qrels", w.qrels, "--out", out / "labeled.jsonl"]
    ),
    "refkit assemble": Case(
        "refkit",
        lambda w, out: assemble_command(w.missing, out / "items.jsonl"),
    ),
    "refkit review": Case(
        "refkit",
        lambda w, out: ["review", w.missing, "--judgements", out / "j.jsonl", "--annotator", "ab", "--no-open"],
    ),
    "refkit agreement": Case("refkit", lambda w, out: ["agreement", w.missing]),
    "refkit score": Case("refkit", lambda w, out: ["score", w.missing, w.queries, "--out", out / "scores.json"]),
    "refkit audit": Case("refkit", lambda w, out: ["audit", w.missing, "--out", out / "audit.json"]),
    "medsnip build": Case("medsnip", lambda w, out: ["build", w.missing, "--out", out / "root"]),
    "medsnip fetch": Case("medsnip", lambda w, out: ["fetch", w.missing]),
    "medsnip update": Case("medsnip", lambda w, out: ["update", w.corpus, "--pubmed-updates", w.missing]),
    "medsnip prune": Case("medsnip", lambda w, out: ["prune", w.missing]),
}


@pytest.mark.parametrize("name", sorted(MISSING))
def test_a_missing_input_is_one_line_and_exit_1(work, tmp_path, name):
    case = MISSING[name]
    before = state(work.folder, tmp_path)
    result = invoke(case.tool, *case.args(work, tmp_path))
    line = error_line(result, 1)
    assert str(work.missing) in line and ("no such file" in line or "check the path" in line), line
    assert changes(before, state(work.folder, tmp_path)) == []


def _unreadable_input(w, kind: str) -> Path:
    return {
        "pubmed": w.truncated,
        "statpearls": w.folder / "garbage.nxml",
        "textbooks": w.folder / "garbage.txt",
        "wikipedia": w.folder / "garbage.xml",
        "parallel": w.folder / "garbage.txt",
        "jsonl": w.truncated_jsonl,
    }[kind]


UNREADABLE = {
    **kinds_cases(_unreadable_input),
    "corpusbuild build (garbage recipe)": Case(
        "corpusbuild", lambda w, out: ["build", w.garbage, "--out", out / "root"], lambda w, out: f"{w.garbage}:"
    ),
    "corpusbuild build (a folder as recipe)": Case(
        "corpusbuild", lambda w, out: ["build", w.not_corpus, "--out", out / "root"], lambda w, out: "a folder"
    ),
    "corpusbuild build (unreadable inputs)": Case(
        "corpusbuild",
        lambda w, out: ["build", w.garbage_recipe, "--out", out / "root", "--workers", 1, "--quiet"],
        lambda w, out: f"{w.folder / 'garbage.xml'}:1: malformed XML",
    ),
    "corpusbuild export": Case(
        "corpusbuild",
        lambda w, out: ["export", w.not_corpus, "--format", "medrag", "--out", out / "x.jsonl"],
        lambda w, out: f"{w.not_corpus / 'build.json'}: not JSON",
    ),
    "corpusbuild verify": Case(
        "corpusbuild", lambda w, out: ["verify", w.not_corpus], lambda w, out: "not a corpusbuild output"
    ),
    **{
        f"indexer {command}": Case(
            "indexer",
            lambda w, out, command=command, extra=extra: [
                command,
                w.not_corpus,
                "--out",
                out / "new" / "index",
                *extra,
            ],
            lambda w, out: f"{w.not_corpus / 'build.json'}: not JSON",
        )
        for command, extra in (("store", ()), ("bm25", ()), ("dense", ("--preset", "minilm")), ("distill-static", ()))
    },
    "indexer eval (queries)": Case(
        "indexer",
        lambda w, out: eval_args(w, out, w.folder / "garbage.tsv", w.qrels),
        lambda w, out: f"{w.folder / 'garbage.tsv'}:1: not UTF-8",
    ),
    "indexer eval (qrels)": Case(
        "indexer",
        lambda w, out: eval_args(w, out, w.queries, w.garbage),
        lambda w, out: f"{w.garbage}:1: not UTF-8",
    ),
    "searchd serve": Case(
        "searchd",
        lambda w, out: [
            "serve",
            "--root",
            w.not_corpus,
            "--port",
            0,
            "--port-file",
            out / "port",
            "--pid-file",
            out / "pid",
        ],
        lambda w, out: f"refusing to start: {w.not_corpus / 'build.json'}: not JSON",
    ),
    "searchd reload": Case(
        "searchd", lambda w, out: ["reload", "--pid-file", w.garbage], lambda w, out: f"{w.garbage}: not a searchd"
    ),
    "searchd query (a folder as token file)": Case(
        "searchd", lambda w, out: ["query", "scurvy", "--token-file", w.folder], lambda w, out: "a folder, not a file"
    ),
    "searchd call (a folder as token file)": Case(
        "searchd", lambda w, out: ["call", "Info", "--token-file", w.folder], lambda w, out: "a folder, not a file"
    ),
    "searchd batch": Case(
        "searchd",
        lambda w, out: ["batch", w.folder / "garbage.tsv", "--out", out / "run"],
        lambda w, out: f"{w.folder / 'garbage.tsv'}:1: not UTF-8",
    ),
    "refkit collect": Case(
        "refkit",
        lambda w, out: ["collect", w.folder / "garbage.tsv", "--out", out / "refs.jsonl"],
        lambda w, out: f"{w.folder / 'garbage.tsv'}:1: not UTF-8",
    ),
    "refkit lexicon (--mesh)": Case(
        "refkit",
        lambda w, out: ["lexicon", "--mesh", w.garbage, "--out", out / "lex.tsv"],
        lambda w, out: f"{w.garbage}:1: not MeSH XML",
    ),
    "refkit lexicon (--mesh-names)": Case(
        "refkit",
        lambda w, out: ["lexicon", "--mesh-names", w.garbage, "--out", out / "lex.tsv"],
        lambda w, out: f"{w.garbage}: not UTF-8",
    ),
    "refkit lexicon (--corpus)": Case(
        "refkit",
        lambda w, out: ["lexicon", "--corpus", w.not_corpus, "--out", out / "lex.tsv"],
        lambda w, out: f"{w.not_corpus / 'build.json'}: not JSON",
    ),
    "refkit noise": Case(
        "refkit",
        lambda w, out: ["noise", w.queries, "--lexicon", w.garbage, "--seed", 1, "--out", out / "noise.jsonl"],
        lambda w, out: f"{w.garbage}: not UTF-8",
    ),
    "refkit label (refs)": Case(
        "refkit",
        lambda w, out: ["label", w.folder / "garbage.jsonl", "--qrels", w.qrels, "--out", out / "labeled.jsonl"],
        lambda w, out: f"{w.folder / 'garbage.jsonl'}:1: not JSON",
    ),
    "refkit label (qrels)": Case(
        "refkit",
        lambda w, out: ["label", w.folder / "garbage.jsonl", "--qrels", w.garbage, "--out", out / "labeled.jsonl"],
        lambda w, out: f"{w.garbage}:1: not UTF-8",
    ),
    "refkit assemble": Case(
        "refkit",
        lambda w, out: assemble_command(w.folder / "garbage.jsonl", out / "items.jsonl"),
        lambda w, out: f"{w.folder / 'garbage.jsonl'}:1: not JSON",
    ),
    "refkit review": Case(
        "refkit",
        lambda w, out: [
            "review",
            w.folder / "garbage.jsonl",
            "--judgements",
            out / "j.jsonl",
            "--annotator",
            "ab",
            "--no-open",
        ],
        lambda w, out: f"{w.folder / 'garbage.jsonl'}:1: not JSON",
    ),
    "refkit agreement": Case(
        "refkit",
        lambda w, out: ["agreement", w.folder / "garbage.jsonl"],
        lambda w, out: f"{w.folder / 'garbage.jsonl'}:1: not JSON",
    ),
    "refkit score": Case(
        "refkit",
        lambda w, out: ["score", w.folder / "garbage.jsonl", w.folder / "garbage.jsonl", "--out", out / "s.json"],
        lambda w, out: f"{w.folder / 'garbage.jsonl'}:1: not JSON",
    ),
    "refkit audit": Case(
        "refkit",
        lambda w, out: ["audit", w.folder / "garbage.jsonl", "--out", out / "audit.json"],
        lambda w, out: f"{w.folder / 'garbage.jsonl'}:1: not JSON",
    ),
    "medsnip build (garbage recipe)": Case(
        "medsnip", lambda w, out: ["build", w.garbage, "--out", out / "root"], lambda w, out: f"{w.garbage}:"
    ),
    "medsnip build (unreadable inputs)": Case(
        "medsnip",
        lambda w, out: ["build", w.garbage_recipe, "--out", out / "root", "--workers", 1, "--quiet"],
        lambda w, out: f"{w.folder / 'garbage.xml'}:1: malformed XML",
    ),
    "medsnip update (not a corpus)": Case(
        "medsnip",
        lambda w, out: ["update", w.not_corpus, "--pubmed-updates", w.truncated],
        lambda w, out: f"{w.not_corpus / 'build.json'}: not JSON",
    ),
    "medsnip update (truncated update file)": Case(
        "medsnip",
        lambda w, out: ["update", w.corpus, "--pubmed-updates", w.truncated],
        lambda w, out: f"{w.truncated}: cannot be decompressed",
    ),
    "medsnip prune": Case(
        "medsnip", lambda w, out: ["prune", w.not_corpus], lambda w, out: f"{w.not_corpus / 'build.json'}: not JSON"
    ),
    # an earlier output in the place of the one a failed command would write stays as it was
    "corpusbuild pubmed (over an earlier build)": Case(
        "corpusbuild",
        lambda w, out: ["pubmed", w.truncated, "--out", out / "o", "--workers", 1, "--quiet", "--shards", 1],
        lambda w, out: f"{w.truncated}: truncated or corrupt",
        allowed=WORK,
        prepare=lambda w, out: copy_work_corpus(w, out),
    ),
    "corpusbuild export (over an earlier export)": Case(
        "corpusbuild",
        lambda w, out: ["export", w.not_corpus, "--format", "jsonl", "--out", out / "x.jsonl"],
        lambda w, out: f"{w.not_corpus / 'build.json'}: not JSON",
        prepare=lambda w, out: (out / "x.jsonl").write_text("an earlier export\n"),
    ),
    "indexer eval (over an earlier run)": Case(
        "indexer",
        lambda w, out: eval_args(w, out, w.queries, w.garbage),
        lambda w, out: f"{w.garbage}:1: not UTF-8",
        prepare=lambda w, out: (out / "run").write_text("q1 Q0 d1 1 1.0 earlier\n"),
    ),
    "refkit label (over an earlier output)": Case(
        "refkit",
        lambda w, out: ["label", w.folder / "garbage.jsonl", "--qrels", w.qrels, "--out", out / "labeled.jsonl"],
        lambda w, out: f"{w.folder / 'garbage.jsonl'}:1: not JSON",
        prepare=lambda w, out: (out / "labeled.jsonl").write_text('{"id": "earlier"}\n'),
    ),
    "refkit lexicon (over an earlier lexicon)": Case(
        "refkit",
        lambda w, out: ["lexicon", "--mesh", w.garbage, "--out", out / "lex.tsv"],
        lambda w, out: f"{w.garbage}:1: not MeSH XML",
        prepare=lambda w, out: (out / "lex.tsv").write_text("name\ttype\nearlier\tother\n"),
    ),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_an_unreadable_input_is_one_line_and_exit_1(work, tmp_path, monkeypatch, name):
    case = UNREADABLE[name]
    monkeypatch.setattr("indexer.jvm.start_jvm", lambda **_: None)  # searchd serve: no JVM in the test process
    if case.prepare:
        case.prepare(work, tmp_path)
    before = state(work.folder, tmp_path)
    result = invoke(case.tool, *case.args(work, tmp_path))
    line = error_line(result, 1)
    assert case.expect(work, tmp_path) in line, line
    assert changes(before, state(work.folder, tmp_path), case.allowed) == []


@pytest.fixture
def searchd_like():
    """A process that `searchd reload` takes for a searchd (its command line says `searchd serve`)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "searchd", "serve"])
    deadline = time.monotonic() + 30
    while b"searchd" not in Path(f"/proc/{process.pid}/cmdline").read_bytes():  # exec'd by now
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield process
    process.kill()
    process.wait()


UNREACHABLE = {
    "searchd query": Case("searchd", lambda w, out, a, **_: ["query", "scurvy", "--server", a]),
    "searchd call": Case("searchd", lambda w, out, a, **_: ["call", "Info", "--server", a]),
    "searchd batch": Case("searchd", lambda w, out, a, **_: ["batch", w.queries, "--out", out / "run", "--server", a]),
    "searchd reload": Case("searchd", lambda w, out, a, pid: ["reload", "--pid", pid, "--server", a]),
    "refkit collect": Case(
        "refkit", lambda w, out, a, **_: ["collect", w.queries, "--out", out / "r.jsonl", "--server", a]
    ),
    "refkit lexicon": Case("refkit", lambda w, out, a, **_: ["lexicon", "--server", a, "--out", out / "lexicon.tsv"]),
    "refkit noise": Case(
        "refkit",
        lambda w, out, a, **_: noise_command(w, out, a),
    ),
    **{
        f"{tool} {command} (Ray cluster)": Case(
            tool,
            lambda w, out, a, command=command, first=first, **_: [
                command,
                first(w),
                "--out",
                out / "o",
                "--executor",
                "ray",
                "--ray-address",
                a,
                "--workers",
                1,
            ],
            env={"MEDSNIP_RAY_CONNECT_TIMEOUT": "0"},
        )
        for tool, command, first in (
            ("corpusbuild", "pubmed", lambda w: SAMPLES / "pubmed" / "pubmed1.xml"),
            ("indexer", "bm25", lambda w: w.corpus),
            ("medsnip", "build", lambda w: w.recipe),
        )
    },
}


@pytest.mark.parametrize("name", sorted(UNREACHABLE))
def test_an_unreachable_server_is_one_line_and_exit_3(work, tmp_path, monkeypatch, searchd_like, name):
    from searchd.client import SearchClient

    case = UNREACHABLE[name]
    for variable, value in case.env.items():
        monkeypatch.setenv(variable, value)
    made = SearchClient.__init__  # the client retries as it does, with its waits (3 s in all) shortened
    monkeypatch.setattr(SearchClient, "__init__", lambda self, *a, **k: made(self, *a, **{**k, "backoff": 0.001}))
    address = f"127.0.0.1:{free_port()}"
    before = state(work.folder, tmp_path)
    result = invoke(case.tool, *case.args(work, tmp_path, address, pid=searchd_like.pid))
    line = error_line(result, 3)
    assert address in line and ("unreachable" in line or "cannot reach" in line), line
    assert changes(before, state(work.folder, tmp_path)) == []
    assert searchd_like.poll() is None  # `searchd reload` signalled nothing
