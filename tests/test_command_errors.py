"""Every command of the five tools on the mistakes and accidents a user meets first: a missing input, an
unreadable one (garbage bytes, a truncated gzip, a folder where a file belongs, a folder that is no corpus),
an unreachable server, and Ctrl-C mid-run. Each gives one `error:` line naming the file or address, the exit
status of the README's table (1 input, 3 unreachable, 130 interrupted), no traceback, and leaves no new or
changed output file: every file under the test's folders is hashed before and after (a resumable job's
progress excepted where its README says it is kept).

Commands run in this process (click's CliRunner); Ctrl-C is a real SIGINT to the process group of a
command started on its own for the long-running writers (corpusbuild pubmed with worker processes,
indexer bm25 with its Anserini JVM, searchd batch and refkit collect in the middle of a call), and a
KeyboardInterrupt raised from a function the command calls mid-run for the others. The searchd that
batch, collect and noise talk to is a stand-in served from this process (canned hits, one call held until
the client is interrupted): what is tested is the client's behaviour, not searching."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from helpers import alive, descendants, free_port, one_line
from medsnip.v1 import search_pb2, search_pb2_grpc

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
# a build's parsed parts, kept to resume (README: corpusbuild), and the folders that hold them
WORK = ("*/.work", "*/.work/*", "*/o", "*/root", "*/root/pubmed")
GARBAGE = b"\x89PNG\r\n\x1a\n\x00\xff\xfe not any format a medsnip command reads \x00\x01\n" * 8


def tools():
    from corpusbuild.cli import main as corpusbuild_main
    from indexer.cli import main as indexer_main
    from pipeline.cli import main as medsnip_main
    from refkit.cli import main as refkit_main
    from searchd.cli import main as searchd_main

    return {
        "corpusbuild": corpusbuild_main,
        "indexer": indexer_main,
        "searchd": searchd_main,
        "refkit": refkit_main,
        "medsnip": medsnip_main,
    }


def invoke(tool: str, *args):
    return CliRunner().invoke(tools()[tool], [str(a) for a in args], catch_exceptions=False)


def state(*folders: Path) -> dict[str, str]:
    """Every file (its sha256) and folder under `folders`; a job lock file (and the folder that holds only
    it) is not an output."""
    found = {}
    for folder in folders:
        for path in folder.rglob("*"):
            if path.name == ".job.lock" or (path.name == ".generations" and not any(path.glob("[!.]*"))):
                continue
            key = str(path)
            found[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def changes(before: dict, after: dict, allowed=()) -> list[str]:
    """Paths created, changed or deleted between two states, less those matching an `allowed` pattern."""
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    return sorted(key for key in changed if not any(fnmatch(key, pattern) for pattern in allowed))


def error_line(result, code: int) -> str:
    """The one `error:` line of a command that failed with exit status `code`."""
    said = result.output
    assert result.exit_code == code, said
    assert "Traceback" not in said, said
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, said
    assert not any(line.startswith("error:") for line in result.stdout.splitlines()), said
    return one_line(errors[0])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Inputs shared by the cases (never changed by them: each case checks it): a built PubMed corpus with
    its store, a folder that is no corpus, garbage bytes under the names commands expect, a truncated
    gzip, a small recipe, a lexicon."""
    folder = tmp_path_factory.mktemp("inputs")
    w = SimpleNamespace(folder=folder, missing=folder / "no-such-input")
    w.corpus = folder / "corpus"
    built = invoke(
        "corpusbuild",
        "pubmed",
        SAMPLES / "pubmed" / "pubmed1.xml",
        "--out",
        w.corpus,
        "--shards",
        1,
        "--workers",
        1,
        "--quiet",
    )
    assert built.exit_code == 0, built.output
    assert invoke("indexer", "store", w.corpus).exit_code == 0
    for name in ("garbage.bin", "garbage.tsv", "garbage.jsonl", "garbage.nxml", "garbage.txt", "garbage.xml"):
        (folder / name).write_bytes(GARBAGE)
    w.garbage = folder / "garbage.bin"
    w.not_corpus = folder / "not-a-corpus"
    w.not_corpus.mkdir()
    (w.not_corpus / "build.json").write_bytes(GARBAGE)
    w.truncated = folder / "pubmed26n0009.xml.gz"  # a download cut short
    w.truncated.write_bytes((SAMPLES / "pubmed" / "pubmed20n1016.xml.gz").read_bytes()[:300])
    w.truncated_jsonl = folder / "corpus.jsonl.gz"
    w.truncated_jsonl.write_bytes(gzip.compress((SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes())[:400])
    w.queries = SAMPLES / "ir" / "refkit-demo-queries.tsv"
    w.qrels = SAMPLES / "ir" / "pubmedqa-beir" / "qrels.tsv"
    w.recipe = folder / "recipe.toml"
    w.recipe.write_text(recipe(SAMPLES / "pubmed" / "pubmed1.xml"), encoding="utf-8")
    w.garbage_recipe = folder / "garbage-inputs.toml"
    w.garbage_recipe.write_text(recipe(folder / "garbage.xml"), encoding="utf-8")
    w.lexicon = folder / "lexicon.tsv"
    w.lexicon.write_text("name\ttype\nscurvy\tdisease\nvitamin C\tdrug\n", encoding="utf-8")
    return w


def recipe(source: Path) -> str:
    return (
        '[recipe]\nname = "tiny"\n\n[defaults]\nshards = 1\nindexes = ["store"]\n\n'
        f'[[sources]]\nkind = "pubmed"\ninputs = ["{source}"]\n'
    )


def _eval_args(w, out: Path, queries: Path, qrels: Path) -> list:
    """`indexer eval` of the work corpus by BM25, its run in OUT."""
    return ["eval", w.corpus, "--queries", queries, "--qrels", qrels, "--retriever", "bm25", "--run", out / "run"]


@dataclass
class Case:
    tool: str
    args: object  # (w, out) -> arguments; for UNREACHABLE (w, out, address, pid=a searchd-like pid)
    expect: object = None  # (w, out) -> text the error line holds
    allowed: tuple = ()  # output patterns a resumable job may leave (its README says so)
    env: dict = field(default_factory=dict)
    prepare: object = None  # (w, out) -> None: outputs an earlier run left, which must stay as they were


def _kinds(path_of):
    """One case per corpusbuild source kind (those a user names get --source)."""
    extra = {"parallel": ("--source", "wmt"), "jsonl": ("--source", "beir")}
    return {
        f"corpusbuild {kind}": Case(
            "corpusbuild",
            lambda w, out, kind=kind: [
                kind,
                path_of(w, kind),
                "--out",
                out / "o",
                "--workers",
                1,
                "--quiet",
                *extra.get(kind, ()),
            ],
            lambda w, out, kind=kind: f"error: {path_of(w, kind)}",
        )
        for kind in ("pubmed", "statpearls", "textbooks", "wikipedia", "parallel", "jsonl")
    }


MISSING = {
    **_kinds(lambda w, kind: w.missing),
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
        lambda w, out: _eval_args(w, out, w.missing, w.qrels),
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
        lambda w, out: [
            "assemble",
            "--relevant",
            w.missing,
            "--n-relevant",
            "1..2",
            "--n-irrelevant",
            "1..2",
            "--seed",
            1,
            "--out",
            out / "items.jsonl",
        ],
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
    **_kinds(_unreadable_input),
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
        lambda w, out: _eval_args(w, out, w.folder / "garbage.tsv", w.qrels),
        lambda w, out: f"{w.folder / 'garbage.tsv'}:1: not UTF-8",
    ),
    "indexer eval (qrels)": Case(
        "indexer",
        lambda w, out: _eval_args(w, out, w.queries, w.garbage),
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
        lambda w, out: [
            "assemble",
            "--relevant",
            w.folder / "garbage.jsonl",
            "--n-relevant",
            "1..2",
            "--n-irrelevant",
            "1..2",
            "--seed",
            1,
            "--out",
            out / "items.jsonl",
        ],
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
        prepare=lambda w, out: _copy_corpus(w, out),
    ),
    "corpusbuild export (over an earlier export)": Case(
        "corpusbuild",
        lambda w, out: ["export", w.not_corpus, "--format", "jsonl", "--out", out / "x.jsonl"],
        lambda w, out: f"{w.not_corpus / 'build.json'}: not JSON",
        prepare=lambda w, out: (out / "x.jsonl").write_text("an earlier export\n"),
    ),
    "indexer eval (over an earlier run)": Case(
        "indexer",
        lambda w, out: _eval_args(w, out, w.queries, w.garbage),
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
        lambda w, out, a, **_: [
            "noise",
            w.queries,
            "--lexicon",
            w.lexicon,
            "--seed",
            1,
            "--out",
            out / "n.jsonl",
            "--server",
            a,
        ],
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


# ---------------------------------------------------------------------------------------------------------
# Ctrl-C


class FakeSearchd(search_pb2_grpc.SearchServiceServicer):
    """searchd's service with canned answers (three hits per query), served from this process; the
    `hold_at`-th BatchSearch waits until `release` is set, so a test can interrupt its client mid-call."""

    def __init__(self, hold_at: int = 0):
        self.pb = search_pb2
        self.calls = 0
        self.hold_at = hold_at
        self.reached, self.release = threading.Event(), threading.Event()

    def Info(self, request, context):
        pb = self.pb
        corpus = pb.CorpusInfo(name="fake", path="/fake", snippets=3, shards=1, lineage_sha256="0" * 64)
        return pb.InfoResponse(
            server_version="fake",
            corpora=[corpus],
            retrievers=["bm25"],
            max_k=1000,
            max_query_chars=4096,
            max_batch=256,
            max_call_seconds=300,
            max_reply_bytes=1 << 26,
            max_page_size=1000,
            stats_json="{}",
        )

    def _answer(self, request):
        pb = self.pb
        return pb.SearchResponse(
            hits=[
                pb.Hit(
                    id=f"fake:{n}:0",
                    score=1.0 / (n + 1),
                    rank=n + 1,
                    title=f"title {n}",
                    content=f"{request.query} is answered by text number {n}",
                    source="fake",
                    doc_id=str(n),
                    retrievers=[pb.RetrieverHit(corpus="fake", retriever="bm25", rank=n + 1, score=1.0)],
                )
                for n in range(min(request.k, 3))
            ]
        )

    def Search(self, request, context):
        return self._answer(request)

    def BatchSearch(self, request, context):
        self.calls += 1
        if self.calls == self.hold_at:
            self.reached.set()
            self.release.wait(60)
        return self.pb.BatchSearchResponse(responses=[self._answer(r) for r in request.requests])


@pytest.fixture
def fake_searchd():
    """(the service, its address); `service.hold_at` is set by the test."""
    import grpc

    service = FakeSearchd()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    search_pb2_grpc.add_SearchServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield service, f"127.0.0.1:{port}"
    service.release.set()
    server.stop(0)


def _raise_interrupt(*_args, **_kwargs):
    raise KeyboardInterrupt


def _interrupted_generator(*_args, **_kwargs):
    raise KeyboardInterrupt
    yield  # a generator, as the function it replaces


def _kind_input(w, kind: str) -> list:
    return {
        "pubmed": [SAMPLES / "pubmed" / "pubmed2.xml"],
        "statpearls": [SAMPLES / "nxml" / "pone.0000217.nxml"],
        "textbooks": [SAMPLES / "textbooks" / "books" / "Anatomy_Gray.txt"],
        "wikipedia": [SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2"],
        "parallel": [SAMPLES / "multilingual" / "medline" / "wmt-wmt19.medline.de-en.de", "--source", "wmt"],
        "jsonl": [SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl", "--source", "beir"],
    }[kind]


@dataclass
class Interrupt:
    tool: str
    args: object  # (w, out, address) -> arguments
    patch: str  # the function that raises KeyboardInterrupt when the command calls it
    replacement: object = _raise_interrupt
    allowed: tuple = ()
    prepare: object = None  # (w, out) -> None: outputs an earlier run left, which must stay as they were
    also: dict = field(default_factory=dict)  # other functions replaced for the case (a model's slow part)


def _copy_corpus(w, out):
    shutil.copytree(w.corpus, out / "o", ignore=shutil.ignore_patterns(".generations"))


def _partial_write(write):
    """A writer that writes part of its output, then is interrupted."""

    def interrupted(lines, handle, *args, **kwargs):
        handle.write(next(iter(lines)))
        raise KeyboardInterrupt

    return interrupted


def _random_rows(model_dir):
    """Token vectors for the model's vocabulary without running it (the transformer is not what is tested)."""
    import numpy as np
    from tokenizers import Tokenizer

    size = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json")).get_vocab_size()
    return np.random.default_rng(0).standard_normal((size, 8)).astype(np.float32)


def _save_part_then_interrupt(self, path, *args, **kwargs):
    Path(path, "config.json").write_text("{}")
    raise KeyboardInterrupt


INTERRUPTS = {
    **{
        f"corpusbuild {kind}": Interrupt(
            "corpusbuild",
            lambda w, out, a, kind=kind: [
                kind,
                *_kind_input(w, kind),
                "--out",
                out / "o",
                "--workers",
                1,
                "--quiet",
                "--shards",
                1,
            ],
            "corpusbuild.engine.shardbuild.publish",
            allowed=WORK,
            prepare=_copy_corpus if kind == "pubmed" else None,  # an earlier build there is not replaced
        )
        for kind in ("pubmed", "statpearls", "textbooks", "wikipedia", "parallel", "jsonl")
    },
    "corpusbuild build": Interrupt(
        "corpusbuild",
        lambda w, out, a: ["build", w.recipe, "--out", out / "root", "--workers", 1, "--quiet"],
        "corpusbuild.engine.shardbuild.publish",
        allowed=WORK,
    ),
    "corpusbuild export": Interrupt(
        "corpusbuild",
        lambda w, out, a: ["export", w.corpus, "--format", "medrag", "--out", out / "x.jsonl"],
        "corpusbuild.engine.export._write_jsonl",
        _partial_write(None),
        prepare=lambda w, out: (out / "x.jsonl").write_text("an earlier export\n"),
    ),
    "corpusbuild verify": Interrupt(
        "corpusbuild", lambda w, out, a: ["verify", w.corpus], "corpusbuild.engine.verify.count_and_hash"
    ),
    "indexer store": Interrupt(  # the earlier store is kept, and no temp folder
        "indexer", lambda w, out, a: ["store", w.corpus], "indexer.store.write_build_record"
    ),
    "indexer dense": Interrupt(
        "indexer", lambda w, out, a: ["dense", w.corpus, "--preset", "minilm"], "indexer.dense.job.run_dense"
    ),
    "indexer distill-static": Interrupt(
        "indexer",
        lambda w, out, a: ["distill-static", w.corpus, "--out", out / "static", "--remove-components", 0],
        "model2vec.StaticModel.save_pretrained",
        _save_part_then_interrupt,
        also={"indexer.dense.static_distill.token_vectors": lambda model_dir, pooling: _random_rows(model_dir)},
    ),
    "indexer eval": Interrupt(
        "indexer",
        lambda w, out, a: _eval_args(w, out, w.queries, w.qrels),
        "indexer.bm25.BM25Index",
    ),
    "searchd serve": Interrupt(
        "searchd",
        lambda w, out, a: [
            "serve",
            "--root",
            w.folder,
            "--port",
            0,
            "--port-file",
            out / "port",
            "--pid-file",
            out / "pid",
        ],
        "searchd.engine.SearchEngine",
    ),
    "searchd query": Interrupt(
        "searchd", lambda w, out, a: ["query", "scurvy", "--server", a], "searchd.client.SearchClient.search"
    ),
    "searchd call": Interrupt(
        "searchd", lambda w, out, a: ["call", "Info", "--server", a], "searchd.client.SearchClient.call"
    ),
    "searchd reload": Interrupt(
        "searchd", lambda w, out, a: ["reload", "--pid", os.getpid()], "searchd.process_check.searchd_problem"
    ),
    "refkit lexicon": Interrupt(
        "refkit",
        lambda w, out, a: [
            "lexicon",
            "--mesh",
            SAMPLES / "mesh" / "meshrdf-desc-samples.xml",
            "--out",
            out / "lexicon.tsv",
        ],
        "medsnip.buildrecord.os.fsync",  # in the middle of writing it
        prepare=lambda w, out: (out / "lexicon.tsv").write_text("name\ttype\nan earlier lexicon\tother\n"),
    ),
    "refkit noise": Interrupt(
        "refkit",
        lambda w, out, a: [
            "noise",
            w.queries,
            "--lexicon",
            w.lexicon,
            "--seed",
            1,
            "--out",
            out / "n.jsonl",
            "--server",
            a,
        ],
        "refkit.noise.pipeline.NoiseGenerator.run",
        _interrupted_generator,
        allowed=("*/n.jsonl.partial", "*/n.jsonl.partial.json"),  # resumed by the next run (README: refkit)
    ),
    "refkit label": Interrupt(
        "refkit",
        lambda w, out, a: ["label", w.queries, "--qrels", w.qrels, "--out", out / "labeled.jsonl"],
        "refkit.curation.label.label_references",
    ),
    "refkit assemble": Interrupt(
        "refkit",
        lambda w, out, a: [
            "assemble",
            "--relevant",
            w.queries,
            "--n-relevant",
            "1..2",
            "--n-irrelevant",
            "1..2",
            "--seed",
            1,
            "--out",
            out / "items.jsonl",
        ],
        "refkit.curation.assemble.read_labeled",
    ),
    "refkit review": Interrupt(
        "refkit",
        lambda w, out, a: ["review", w.queries, "--judgements", out / "j.jsonl", "--annotator", "ab", "--no-open"],
        "refkit.curation.review.review_items",
    ),
    "refkit agreement": Interrupt(
        "refkit", lambda w, out, a: ["agreement", w.queries], "refkit.curation.review.read_judgements"
    ),
    "refkit score": Interrupt(
        "refkit",
        lambda w, out, a: ["score", w.queries, w.queries, "--out", out / "s.json"],
        "refkit.curation.score.read_items",
    ),
    "refkit audit": Interrupt(
        "refkit",
        lambda w, out, a: ["audit", w.queries, "--out", out / "audit.json"],
        "refkit.curation.audit.audit_noise",
    ),
    "medsnip build": Interrupt(
        "medsnip",
        lambda w, out, a: ["build", w.recipe, "--out", out / "root", "--workers", 1, "--quiet"],
        "pipeline.recipe_build.build_root",
    ),
    "medsnip update": Interrupt(
        "medsnip",
        lambda w, out, a: ["update", w.corpus, "--pubmed-updates", SAMPLES / "pubmed" / "pubmed2.xml"],
        "pipeline.update.update",
    ),
    "medsnip prune": Interrupt("medsnip", lambda w, out, a: ["prune", w.corpus], "medsnip.generations.prune"),
}


@pytest.mark.parametrize("name", sorted(INTERRUPTS))
def test_ctrl_c_in_the_middle_is_exit_130_and_leaves_no_output(work, tmp_path, monkeypatch, fake_searchd, name):
    case = INTERRUPTS[name]
    _, address = fake_searchd
    monkeypatch.setattr("indexer.jvm.start_jvm", lambda **_: None)  # searchd serve: no JVM in the test process
    monkeypatch.setattr(case.patch, case.replacement)
    for target, replacement in case.also.items():
        monkeypatch.setattr(target, replacement)
    if case.prepare:
        case.prepare(work, tmp_path)
    before = state(work.folder, tmp_path)
    result = invoke(case.tool, *case.args(work, tmp_path, address))
    line = error_line(result, 130)
    assert line.startswith("error: interrupted (Ctrl-C)"), line
    assert changes(before, state(work.folder, tmp_path), case.allowed) == []


def _started(command: list, **options) -> subprocess.Popen:
    """A command in a session of its own, so a SIGINT to its process group is what Ctrl-C in a terminal
    sends: to it and to every worker and JVM it started."""
    return subprocess.Popen(
        [sys.executable, "-m", *map(str, command)],
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
    _copy_corpus(work, tmp_path)  # tmp_path/o: an earlier complete build
    (tmp_path / "o").rename(out)
    before = state(out)
    parsed = set((out / ".work" / "parts").glob("*/task.json"))  # the earlier build's
    process = _started(["corpusbuild", "pubmed", *inputs, "--out", out, "--workers", 2, "--shards", 4, "--quiet"])
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
    process = _started(["indexer.cli", "bm25", work.corpus, "--out", out, "--full"])

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
    process = subprocess.Popen(
        [sys.executable, "-c", POOL_SCRIPT, marker],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_sigint_as_in_a_terminal,
    )
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
    process = _started(["searchd.cli", "batch", queries, "--out", out, "--server", address, "--batch", 8])
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
    command = ["refkit.cli", "collect", queries, "--out", out, "--server", address]
    process = _started(command)
    stdout, stderr = _ctrl_c(process, service.reached.is_set)
    _interrupted(process, stdout, stderr)
    assert not out.exists() and (tmp_path / "refs.jsonl.partial").stat().st_size > 0
    service.release.set()
    resumed = subprocess.run([sys.executable, "-m", *map(str, command)], cwd=REPO, capture_output=True, text=True)
    assert resumed.returncode == 0 and "resuming: 256 of 300 queries" in one_line(resumed.stderr), resumed.stderr
    assert len(out.read_text().splitlines()) == 300 and not (tmp_path / "refs.jsonl.partial").exists()
