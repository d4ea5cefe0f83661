"""The command examples of the README and of every page of the documentation site (docs/**/*.md), run as a
user runs them: each command of a marked ```bash block, split into words as the shell splits it, runs
through its tool's click entry point (what the console script runs) in a fresh folder, and a line with a
pipe, and the background server, as real subprocesses through bash; each must exit 0 and write the files
it names. The same rules hold for every file, and an error names the file and line (`docs/serve/searchd.md:40`).

Which blocks run (the rule): a ```bash block right below the line `<!-- run by tests/test_readme_examples.py
-->` is run, every command of it in order; editing such a block changes what this test runs, and a marked
block that stops running fails it. Every other block must show why it cannot run
(`test_unmarked_blocks_cannot_run`): a placeholder (`INPUT...`, `DIR`, `CORPUS_ROOT`, `[--opt]`, `~/...`,
`/mnt/...`, `...`), an input file that is neither in the repository, nor in the demo root `build/demo`, nor
written by an earlier line of the block (`questions.tsv`, `beir/trec-covid/corpus.jsonl`), an output into
`build/demo` itself (`medsnip build ... --out build/demo`: here `build/demo` is the session's shared test
root, and building the demo takes minutes), a `make` target (the demo and the suite themselves), or the shell's own
setup (`source .venv/bin/activate`: the test's shell has the venv on PATH already). A block
that uses only bundled inputs and the demo root must be marked, so no runnable example is left out by
accident.

Run once: the README's tour repeats commands the pages explain (the server, the refkit walkthrough, a
verify); a command whose words were already run (in any file, comments aside), or a Python block whose code
was, is not run again, so a page can show the whole walkthrough without the test paying for it twice.

What a marked block sees, as `make demo` leaves it for a user:
- the working folder is a temp folder holding `samples/` and `manifests/` (links to the repository's) and
  `build/demo`: a link to the session's `search_root` (tests/conftest.py: the 500 PubMedQA abstracts with
  store, BM25 and dense MiniLM, and the sample textbooks) instead of the whole demo root, which would take
  `medsnip build` 80 s to make; the console scripts are on PATH (this venv's bin);
- every port an example names is a free port instead, one per number (`--port 50051`, `--http-port 8000`,
  `127.0.0.1:50051`, `http://127.0.0.1:8000`): tests run side by side;
- a marked ```python block runs whole as a script in that folder, once the servers are up; it must exit 0
  and print something;
- a line ending in `&` (`searchd serve ... &`) starts in the background; the test waits until it is
  SERVING (as a user waits for its "serving" line) and stops it with SIGTERM when every block has run
  (it must exit 0). Blocks that start a server run first (the others in order: the README, then the pages
  by path), and a command that calls searchd without naming it (`searchd query ...` with no `--server`,
  whose default is the examples' 127.0.0.1:50051) is given `--server` of that server.

Steps handled explicitly (HUMAN and `write_responses`):
- `refkit review` is not run: it opens a page for a person to judge noise in and serves it until closed
  (tests/test_refkit_review.py drives that page in Chromium);
- step 7's `refkit score items.jsonl responses.jsonl` needs a model's answers: before it runs, the test
  writes responses.jsonl from items.jsonl as a user saves their model's answers, here a model citing
  exactly the references labelled relevant, so its scores must all be 1.0.

The walkthrough's questions: 2 of the 7 of its `samples/ir/refkit-demo-queries.tsv` (its path in the
commands is replaced by a file of those 2, QUESTIONS_RUN): the one the paragraph on step 4 describes
(docs/refkit/index.md; 17682349, acute myocardial infarction -> angina pectoris: a rewrite and kept noise)
and one stopped before any rewrite (26879871, no mention of a lexicon entity). With an empty MiniLM vector
cache (a fresh clone's), refkit noise took 34 s on all 7 and 21 s on the first 3, when this whole file may
take about 30.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import orjson
import pytest
from click.testing import CliRunner
from docs_pages import name as page_name
from docs_pages import pages
from test_docs_match_help import TOOLS
from test_docs_match_help import command as click_command

from conftest import REPO
from helpers import free_port
from searchd.launch import wait_serving

MARK = "<!-- run by tests/test_readme_examples.py -->"
DEFAULT_SERVER = "127.0.0.1:50051"
HUMAN = {("refkit", "review"): "opens a page for a person to judge the noise in (tests/test_refkit_review.py)"}
OUTPUT_OPTIONS = ("--out", "--run")
QUESTIONS = "samples/ir/refkit-demo-queries.tsv"  # as the walkthrough writes it
QUESTIONS_RUN = ("refkit-demo-queries-2.tsv", {"26879871", "17682349"})  # the test's file, the questions kept
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9_]{2,}\b|~/|/mnt/|/shared/|\[--|\.\.\.")


@dataclass
class Command:
    line: int  # its first line in its file
    text: str  # as written, continuation lines joined
    words: list[str]  # shell words, comment dropped

    @property
    def background(self) -> bool:
        return self.words[-1:] == ["&"]

    @property
    def name(self) -> tuple[str, str] | None:
        return (self.words[0], self.words[1]) if len(self.words) > 1 and self.words[0] in TOOLS else None

    def outputs(self) -> list[str]:
        return [self.words[i + 1] for i, w in enumerate(self.words[:-1]) if w in OUTPUT_OPTIONS]


@dataclass
class Block:
    file: str  # README.md, docs/serve/searchd.md, ...
    heading: str
    line: int  # its opening fence in its file
    marked: bool
    commands: list[Command]
    python: str | None = None  # a ```python block's code (run whole, as a script)

    def label(self) -> str:
        return f"{self.file}:{self.line} ({self.heading})"

    def where(self, command: Command) -> str:
        return f"{self.file}:{command.line} ({self.heading})"


def readme_blocks() -> list[Block]:
    """The ```bash blocks (and the marked ```python ones) of the README and of every docs page, in that order."""
    return [block for page in pages() for block in page_blocks(page)]


def page_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    file = page_name(page)
    blocks, heading, number = [], "", 0
    while number < len(lines):
        line = lines[number]
        if line.startswith("```"):
            end = lines.index("```", number + 1)
            marked = number > 0 and lines[number - 1].strip() == MARK
            if line == "```bash":
                found = commands(lines[number + 1 : end], number + 2)
                blocks.append(Block(file, heading, number + 1, marked, found))
            elif line == "```python" and marked:
                code = "\n".join(lines[number + 1 : end]) + "\n"
                blocks.append(Block(file, heading, number + 1, marked, [], code))
            number = end + 1
            continue
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        number += 1
    return blocks


def commands(lines: list[str], first: int) -> list[Command]:
    found, parts, start = [], [], 0
    for offset, line in enumerate(lines):
        if not parts:
            start = first + offset
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        text = " ".join(parts + [line]).strip()
        parts = []
        words = shlex.split(text, comments=True)
        if words:
            found.append(Command(start, text, words))
    return found


def calls_default_server(name: tuple[str, str] | None) -> bool:
    """Whether the command's --server defaults to 127.0.0.1:50051 (searchd query, batch, call; refkit collect,
    noise): run without --server, it calls the examples' port."""
    found = click_command(*name) if name else None
    return found is not None and any("--server" in p.opts and p.default == DEFAULT_SERVER for p in found.params)


def marked_blocks() -> list[Block]:
    return [block for block in readme_blocks() if block.marked]


def test_the_walkthrough_and_the_other_examples_are_marked():
    """Removing a marker would silently stop running its block: the examples this file was written for stay
    marked (a new marked block is welcome)."""
    marked = {(block.file, block.heading) for block in marked_blocks()}
    assert {
        ("README.md", "2. Serve it"),
        ("README.md", "3. Query it"),
        ("README.md", "4. Curate a benchmark from your questions"),
        ("docs/refkit/index.md", "Build a curation benchmark for your queries (`refkit`)"),
        ("docs/serve/searchd.md", "Serve and query (`searchd`)"),
        ("docs/serve/searchd.md", "The Python client"),
        ("docs/corpus/verify-export.md", "corpusbuild verify"),
        ("docs/corpus/verify-export.md", "corpusbuild export"),
        ("docs/runners.md", "MedRAG and MIRAGE"),
    } <= marked


def test_unmarked_blocks_cannot_run():
    """The rule in the module docstring: an unmarked block shows a placeholder, an input that is nowhere, or
    is a `make` target or the shell's setup; one that uses only bundled inputs must be marked and run."""
    runnable = []
    for block in readme_blocks():
        if block.marked or any(c.words[0] in ("make", "source") for c in block.commands):
            continue
        written: set[str] = set()
        reasons = []
        for command in block.commands:
            if PLACEHOLDER.search(command.text.split(" #")[0]):
                reasons.append("placeholder")
            for word in command.words[2:] if command.name else []:
                looks_like_file = "/" in word or re.search(r"\.[A-Za-z]\w*$", word)
                if looks_like_file and not word.startswith(("-", "http")) and "=" not in word:
                    bundled = (REPO / word).exists() and not word.startswith("build/")  # a fresh clone's
                    if not (bundled or word.startswith("build/demo") or word in written):
                        reasons.append(f"{word} is not bundled")
            if any(output.startswith("build/demo") for output in command.outputs()):
                reasons.append("writes the demo root itself")
            written.update(command.outputs())
        if not reasons:
            runnable.append(block.label())
    assert runnable == [], f"{runnable} use only bundled inputs (or build/demo): mark them with {MARK}"


@pytest.fixture(scope="module")
def workdir(search_root, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    for name in ("samples", "manifests"):
        (folder / name).symlink_to(REPO / name)
    (folder / "build").mkdir()
    (folder / "build" / "demo").symlink_to(search_root)
    name, kept = QUESTIONS_RUN
    header, *questions = (REPO / QUESTIONS).read_text(encoding="utf-8").splitlines(keepends=True)
    chosen = [line for line in questions if line.split("\t")[0] in kept]
    assert len(chosen) == len(kept)
    (folder / name).write_text(header + "".join(chosen), encoding="utf-8")
    return folder


def write_responses(items: Path, responses: Path) -> None:
    """A model that cites exactly the references its answer key labels relevant, one {"id", "response"}
    line per item, as step 7 of the walkthrough says to save them."""
    lines = []
    for item in map(orjson.loads, items.read_bytes().splitlines()):
        relevant = [
            n for n, key in sorted(item["answer_key"].items(), key=lambda k: int(k[0])) if key["label"] == "relevant"
        ]
        cited = "".join(f"[{n}]" for n in relevant)
        answer = f"The answer is in {cited}." if relevant else "None of the references answers this."
        lines.append(orjson.dumps({"id": item["id"], "response": answer}))
    responses.write_bytes(b"\n".join(lines) + b"\n")


class Ports:
    """The examples' ports (50051, 8000, ...) -> free ports of this test, one each: tests run side by side."""

    def __init__(self) -> None:
        self.free: dict[str, int] = {}

    def of(self, written: str) -> int:
        return self.free.setdefault(written, free_port())

    def substituted(self, text: str) -> str:
        """The command with the test's ports and its shorter question file."""
        port = re.compile(r"(?<=127\.0\.0\.1:)(\d{4,5})\b|(?<=--port )(\d{4,5})\b|(?<=--http-port )(\d{4,5})\b")
        return port.sub(lambda m: str(self.of(m.group(0))), text).replace(QUESTIONS, QUESTIONS_RUN[0])


def start_server(where: str, text: str, workdir: Path, env: dict, address: str) -> subprocess.Popen:
    log_path = workdir / f"searchd-{len(list(workdir.glob('searchd-*.log')))}.log"
    with open(log_path, "w") as log:  # its request log: a file, never a pipe nobody reads
        process = subprocess.Popen(
            ["bash", "-c", "exec " + text.split(" #")[0].rstrip().removesuffix("&")],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    process.log_path = log_path  # type: ignore[attr-defined]
    deadline = time.monotonic() + 300
    while True:
        assert process.poll() is None, f"{where}: {text}\n{log_path.read_text()[-3000:]}"
        try:
            wait_serving(address, timeout=2)
            return process
        except (grpc.RpcError, RuntimeError):  # not listening yet, or NOT_SERVING while its HTTP side starts
            assert time.monotonic() < deadline, f"{where}: searchd did not start in 300 s"


def stop(server: subprocess.Popen) -> int | None:
    """SIGTERM, as a user stops the server they started; its exit status (None: killed after 60 s)."""
    server.send_signal(signal.SIGTERM)
    try:
        return server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        return None


def run_command(text: str, workdir: Path, env: dict) -> tuple[int, str]:
    """(exit status, what it printed). A plain `tool command ARGS` runs in this process through the tool's
    click entry point with the same words (what its console script runs, without a Python start and
    torch import per step); a line with a pipe or a redirection runs in bash."""
    words = shlex.split(text, comments=True)
    if words[0] in TOOLS and not {"|", ">", "<", ";", "&&"} & set(words):
        with contextlib.chdir(workdir):
            result = CliRunner().invoke(TOOLS[words[0]], words[1:], catch_exceptions=False)
        return result.exit_code, result.output
    completed = subprocess.run(
        ["bash", "-o", "pipefail", "-c", text], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
    )
    return completed.returncode, completed.stdout if completed.returncode == 0 else completed.stderr


def run_python(block: Block, code: str, workdir: Path, env: dict) -> None:
    """A marked ```python block, run as a script in the working folder: it must exit 0 and print."""
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, f"{block.label()}: exit {completed.returncode}\n{completed.stderr[-4000:]}"
    assert completed.stdout.strip(), f"{block.label()}: printed nothing"


def test_the_readme_examples_run(workdir):
    blocks = marked_blocks()
    starts_server = [b for b in blocks if any(c.background for c in b.commands)]
    blocks = starts_server + [b for b in blocks if b not in starts_server]
    ports = Ports()
    address = f"127.0.0.1:{ports.of(DEFAULT_SERVER.rsplit(':', 1)[1])}"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    servers: list[subprocess.Popen] = []
    ran = []
    done: dict[object, str] = {}  # a command's words, or a Python block's code -> where it ran
    try:
        for block in blocks:
            if block.python is not None and block.python in done:
                print(f"ran as {done[block.python]}: {block.label()}")
            elif block.python is not None:
                started = time.monotonic()
                run_python(block, ports.substituted(block.python), workdir, env)
                done[block.python] = block.label()
                ran.append(("python", block.heading))
                print(f"{time.monotonic() - started:5.1f} s  {block.label()}: a Python example")
            for command in block.commands:
                where = block.where(command)
                if tuple(command.words) in done:
                    print(f"ran as {done[tuple(command.words)]}: {where}")
                    continue
                done[tuple(command.words)] = where
                if command.name in HUMAN:
                    print(f"not run: {where}: {command.name[0]} {command.name[1]} {HUMAN[command.name]}")
                    continue
                text = ports.substituted(command.text)
                if calls_default_server(command.name) and "--server" not in command.words:
                    assert servers, f"{where}: calls searchd, but no marked block starts one"
                    tool, name = command.name
                    text = text.replace(f"{tool} {name}", f"{tool} {name} --server {address}", 1)
                if command.background:
                    served = f"127.0.0.1:{ports.of(command.words[command.words.index('--port') + 1])}"
                    servers.append(start_server(where, text, workdir, env, served))
                    ran.append(command.name)
                    continue
                if command.name == ("refkit", "score"):
                    items, responses = (workdir / w for w in command.words[2:4])
                    write_responses(items, responses)
                for output in command.outputs():
                    assert not (workdir / output).exists(), f"{where}: {output} was written before its step"
                started = time.monotonic()
                returncode, said = run_command(text, workdir, env)
                assert returncode == 0, f"{where}: exit {returncode}\n$ {text}\n{said[-4000:]}"
                for output in command.outputs():
                    path = workdir / output
                    assert path.is_file() and path.stat().st_size > 0, f"{where}: {output} was not written"
                if "|" in command.words:  # a pipe into a script: it printed something
                    assert said.strip(), f"{where}: printed nothing"
                ran.append(command.name)
                print(f"{time.monotonic() - started:5.1f} s  {where}: {text[:80]}")
    finally:
        codes = [stop(server) for server in servers]
    assert codes == [0] * len(servers), [s.log_path.read_text()[-2000:] for s in servers]  # type: ignore[attr-defined]

    # what the walkthrough's steps wrote, read back
    questions = QUESTIONS_RUN[1]
    assert any(QUESTIONS in c.text for b in blocks for c in b.commands), f"the walkthrough no longer asks {QUESTIONS}"
    assert {("refkit", step) for step in ("collect", "label", "lexicon", "noise", "audit", "assemble", "score")} <= set(
        ran
    )
    assert len((workdir / "build" / "refs.jsonl").read_bytes().splitlines()) == len(questions)
    items = {i["id"]: i for i in map(orjson.loads, (workdir / "build" / "items.jsonl").read_bytes().splitlines())}
    assert set(items) == questions
    labels = [key["label"] for key in items["17682349"]["answer_key"].values()]  # step 4's example
    # its abstract, and noise from its rewrites (on this small root most texts on myocardial infarction are the
    # question's own references, which noise never repeats)
    assert labels.count("relevant") == 1 and labels.count("irrelevant") >= 1
    overall = orjson.loads((workdir / "build" / "scores.json").read_bytes())["overall"]
    assert overall["curation_efficiency"] == overall["relevance_precision"] == 1.0
