"""Small readers the tests share."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson

from medsnip.buildrecord import read_build_record
from medsnip.snippet import SHARD_GLOB, iter_snippets, join_contents

PUBMEDQA_CORPUS = Path(__file__).resolve().parents[1] / "samples" / "ir" / "pubmedqa-beir" / "corpus.jsonl"


def all_snippets(directory: Path) -> list[dict]:
    return [s for shard in sorted(directory.glob(SHARD_GLOB)) for s in iter_snippets(shard)]


def by_pmid(directory: Path) -> dict[int, list[dict]]:
    found: dict[int, list[dict]] = {}
    for snippet in all_snippets(directory):
        found.setdefault(snippet["meta"]["pmid"], []).append(snippet)
    return found


def shard_bytes(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob(SHARD_GLOB))}


def record_without_run(directory: Path) -> dict:
    """build.json minus the parts that legitimately differ between runs (timings, command line)."""
    record = read_build_record(directory)
    record.pop("run")
    record.pop("command")
    return record


def start_corpusbuild(kind: str, inputs: list[Path], out: Path, *extra) -> subprocess.Popen:
    """corpusbuild as a separate process (so a test can really kill it)."""
    repo = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-m", "corpusbuild", kind, *map(str, inputs), "--out", str(out), "--quiet"]
    command += [str(arg) for arg in extra]
    return subprocess.Popen(command, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_when(process: subprocess.Popen, ready, timeout: float = 120.0) -> None:
    """SIGKILL the process as soon as `ready()` holds (it must still be running then)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, "the build finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()


def read_proc(path: Path) -> str:
    """The text of a /proc file, or "" when its thread or process has ended since it was listed."""
    try:
        return path.read_text()
    except OSError:
        return ""


def children(pid: int) -> set[int]:
    """The child processes of every thread of `pid` (threads ending while they are read are skipped)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return set()
    return {int(child) for task in tasks for child in read_proc(task / "children").split()}


def descendants(pid: int) -> set[int]:
    """PIDs of the running processes below `pid` (children, grandchildren, ...), from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int], seconds: float) -> set[int]:
    """Wait up to `seconds` for `pids` to end; those still running (zombies count as ended)."""
    deadline = time.monotonic() + seconds
    while True:
        left = set()
        for pid in pids:
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    left.add(pid)
            except OSError:
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def ray_processes(pattern: str = "ray::|raylet|gcs_server") -> set[int]:
    """PIDs of running Ray processes (a cluster's raylet, GCS, workers and actors)."""
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return {int(pid) for pid in found.split()}


def wait_gone(pids, pattern: str, seconds: float) -> set[int]:
    """Wait up to `seconds` for the Ray processes not in `pids` to end; those still running."""
    deadline = time.monotonic() + seconds
    while (left := ray_processes(pattern) - pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def rrf_by_hand(lists, k: int, rrf_k: int) -> list[tuple[str, float]]:
    """Reciprocal rank fusion written out, to check the server's: (id, score) best first, ties to the
    better best rank, then the smaller id (the documented tie-break)."""
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for hits in lists:
        for rank, (snippet_id, _) in enumerate(hits, 1):
            scores[snippet_id] = scores.get(snippet_id, 0.0) + 1 / (rrf_k + rank)
            best[snippet_id] = min(best.get(snippet_id, rank), rank)
    return [(i, scores[i]) for i in sorted(scores, key=lambda i: (-scores[i], best[i], i))[:k]]


def pubmedqa_abstracts(count: int) -> list[dict]:
    """The first `count` real PubMedQA abstracts as snippets (title, content, contents), for encoders."""
    records = [orjson.loads(line) for line in PUBMEDQA_CORPUS.read_bytes().splitlines()[:count]]
    return [
        {"title": r["title"], "content": r["text"], "contents": join_contents(r["title"], r["text"])} for r in records
    ]


def tiny_bert(folder: Path, hidden: int = 96, seed: int = 0) -> Path:
    """A 1-layer BERT with seeded random weights and the bundled MiniLM's WordPiece tokenizer, saved as a
    Hugging Face folder: a real transformer encoder of the model's kind that embeds thousands of
    snippets a second on a CPU (tests about builds and serving, not about ranking quality)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from medsnip.encoders import bundled_minilm_path

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=hidden,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=hidden,
        max_position_embeddings=512,
    )
    BertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(bundled_minilm_path()).save_pretrained(folder)
    return folder


def tiny_static_model(folder: Path, dimension: int = 16, seed: int = 20261124) -> Path:
    """A model2vec static model: seeded random rows for every MiniLM WordPiece token (encodes thousands
    of snippets a second; for tests where the encoder is not what is tested)."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    from medsnip.encoders import bundled_minilm_path, resolve_model_dir

    tokenizer = Tokenizer.from_file(str(resolve_model_dir(bundled_minilm_path()) / "tokenizer.json"))
    rows = np.random.default_rng(seed).standard_normal((tokenizer.get_vocab_size(), dimension)).astype(np.float32)
    StaticModel(rows, tokenizer, normalize=True, max_length=None).save_pretrained(folder)
    return folder


def refkit(*args, ok: bool = True):
    """`refkit ARGS...` in this process (str() of each argument); asserts exit 0 unless `ok` is False."""
    from click.testing import CliRunner

    from refkit.cli import main as refkit_main

    result = CliRunner().invoke(refkit_main, [str(a) for a in args], catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def free_port() -> int:
    """A loopback port nothing listens on (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def one_line(text: str) -> str:
    """A command's output with rich's line wrapping (and every other run of whitespace) undone."""
    return " ".join(text.split())


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 and its key (PEM)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "server.crt", folder / "server.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def rss_mb(pid: int) -> float:
    """The resident memory of a process, in MiB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def start_http(root: Path, folder: Path, *extra) -> tuple:
    """(process, gRPC address, HTTP base URL) of a searchd serving HTTP too."""
    from searchd.launch import start_background_server

    port_file = folder / "http-port"
    process, address = start_background_server(root, "--http-port", 0, "--http-port-file", port_file, *extra)
    deadline = time.monotonic() + 30
    while not port_file.exists():  # written just after the gRPC port
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return process, address, f"http://127.0.0.1:{port_file.read_text()}"


def stop_server(process: subprocess.Popen) -> str:
    """SIGTERM a searchd, which must answer by exiting 0; its log."""
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    return process.log_path.read_text()


def serving(root: Path, *extra):
    """A fixture's body: a searchd on `root` (with `extra` options) for the fixture's scope, its address yielded,
    then SIGTERM, which it must answer by exiting 0."""
    from searchd.launch import start_background_server

    process, address = start_background_server(root, *map(str, extra))
    yield address
    stop_server(process)
