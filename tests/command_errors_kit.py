"""What the command-error tests share (tests/test_command_errors.py, test_command_interrupts.py,
test_ctrl_c_processes.py): the five tools' entry points, a snapshot of every file under a folder (so a test
can say a failed command changed nothing), the one `error:` line a failed command prints, the inputs the
cases read (the `command_inputs` fixture, tests/conftest.py) and a stand-in searchd served from this
process (canned hits, one call held until its client is interrupted)."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import threading
from concurrent import futures
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from helpers import one_line
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


@pytest.fixture(scope="session")
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


def eval_args(w, out: Path, queries: Path, qrels: Path) -> list:
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


def kinds_cases(path_of):
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


def copy_work_corpus(w, out):
    """The inputs' built corpus copied to OUT/o: an earlier complete build a failed command must leave as it was."""
    shutil.copytree(w.corpus, out / "o", ignore=shutil.ignore_patterns(".generations"))


def assemble_command(relevant: Path, out_file: Path) -> list:
    """`refkit assemble` of the `relevant` labels into `out_file`, 1-2 relevant and 1-2 irrelevant texts an item."""
    return [
        "assemble",
        "--relevant",
        relevant,
        "--n-relevant",
        "1..2",
        "--n-irrelevant",
        "1..2",
        "--seed",
        1,
        "--out",
        out_file,
    ]


def noise_command(w, out: Path, address: str) -> list:
    """`refkit noise` of the inputs' queries and lexicon into OUT/n.jsonl, against searchd at `address`."""
    return ["noise", w.queries, "--lexicon", w.lexicon, "--seed", 1, "--out", out / "n.jsonl", "--server", address]
