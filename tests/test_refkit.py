"""refkit against a real searchd over real data (tests/refkit_kit.py): real questions through collect ->
label -> noise -> assemble -> score, byte-identical outputs run to run and under load, the snippet scan and
its token, and bad input that writes nothing."""

from __future__ import annotations

import json
import re
import signal

import orjson
import pytest
from command_errors_kit import assemble_command
from refkit_kit import ASTHMA, BEIR, RISPERIDONE, VARICES

from helpers import refkit
from medsnip.queries import read_query_file
from refkit.noise.options import ANSWER_CEILING, ENTITY_FLOOR
from refkit.noise.records import CANDIDATE_RULES
from refkit.vocabulary.lexicon import read_lexicon
from refkit.vocabulary.matcher import NameMatcher, PhraseMatcher
from searchd.client import SearchClient
from searchd.launch import start_background_server

# -- the whole workflow against the server --


def test_collect_label_noise_assemble_score(server, names_lexicon_path, questions, tmp_path):
    refs, labeled, noise, items = (tmp_path / f"{n}.jsonl" for n in ("refs", "labeled", "noise", "items"))
    refkit("collect", questions, "--server", server, "--k", 16, "--out", refs)
    collected = [orjson.loads(line) for line in refs.read_bytes().splitlines()]
    assert len(collected) == 14
    with SearchClient(server) as client:
        info = client.info()
    lineage = {c.name: c.indexes[0].lineage_sha256 for c in info.corpora}
    for record in collected:
        ranks = [r["rank"] for r in record["references"]] + [d["rank"] for d in record["duplicates"]]
        assert sorted(ranks) == list(range(1, 17))
        for reference in record["references"]:
            assert reference["lineage"]["corpus"] == lineage[reference["corpus"]]
            assert {r["retriever"] for r in reference["retrievers"]} <= {"bm25", "dense-minilm"}
            assert set(reference["lineage"]) >= {"corpus", *(r["retriever"] for r in reference["retrievers"])}
        for duplicate in record["duplicates"]:
            assert duplicate["duplicate_of"] in {r["snippet_id"] for r in record["references"]}

    refkit("label", refs, "--qrels", BEIR / "qrels.tsv", "--out", labeled)
    labeled_records = {r["id"]: r for r in map(orjson.loads, labeled.read_bytes().splitlines())}
    asthma_refs = labeled_records[ASTHMA[0]]["references"]
    assert [r["label"] for r in asthma_refs if r["doc_id"] == ASTHMA[0]] == ["relevant"]  # its own abstract

    lexicon_path = names_lexicon_path
    # this 1,100-document root names few of the siblings a swap puts in beside the question's other entities, and
    # holds few texts on any one topic: the rewrites are tested without the corpus-support rule and with lower
    # relatedness floors here, and with the defaults below; 40 candidates measured per question, not 150 (each is
    # embedded on this CPU)
    refkit(
        "noise",
        questions,
        "--server",
        server,
        "--lexicon",
        lexicon_path,
        "--seed",
        13,
        "--refs",
        refs,
        "--per-query",
        4,
        "--examined",
        40,
        "--no-support",
        "--related",  # the demo's samples hold few texts on the questions' own subjects
        "--entity-floor",
        0.30,
        "--similarity-floor",
        0.35,
        "--out",
        noise,
    )
    generated = {r["id"]: r for r in map(orjson.loads, noise.read_bytes().splitlines())}
    assert set(generated) == {r["id"] for r in collected}
    rewritten = [r for r in generated.values() if r["rewrites"]]
    assert {ASTHMA[0], VARICES[0], RISPERIDONE[0]} <= {r["id"] for r in rewritten}
    for record in rewritten:  # every rewrite's articles agree with what follows them
        for rewrite in record["rewrites"]:
            for wrong in (r"\b[Aa] [aeiouAEIOU]\w*", r"\b[Aa]n [bcdfgjklmnpqrstvwz]\w*"):  # unless the question has it
                for found in re.finditer(wrong, rewrite["query"]):
                    assert found.group(0) in record["query"], rewrite["query"]
    assert sum(len(r["noise"]) for r in rewritten) >= 3
    lexicon = read_lexicon(lexicon_path)
    for record in rewritten:
        collected_ids = {r["snippet_id"] for r in labeled_records[record["id"]]["references"]}
        for kept in record["noise"]:
            assert kept["snippet_id"] not in collected_ids  # never a collected reference
            assert kept["label"] == "irrelevant" and kept["reason"].startswith("retrieved for the rewrite")
            measured = kept["measured"]
            assert measured["to_original"] < ANSWER_CEILING and kept["related"]["how"] in (
                "entity",
                "aspect",
                "phrase",
                "similarity",
            )
            [edit] = record["rewrites"][kept["rewrite"] - 1]["replaced"]
            if edit["what"] == "entity":  # it never names what the swap replaced
                replaced = lexicon.get(edit["from"])
                names = NameMatcher([(form, replaced) for form in replaced.surface_forms()])
                assert not names.find(f"{kept['title']} {kept['content']}") and not measured["names_replaced"]
        for rejected in record["rejected"]:
            assert rejected["rule"] in CANDIDATE_RULES and rejected["reason"]
    varices = generated[VARICES[0]]
    for kept in varices["noise"]:  # hypertension was replaced: no kept text names it
        assert not PhraseMatcher([("hypertension", 1)]).find(f"{kept['title']} {kept['content']}")

    audited = json.loads(refkit("audit", noise, "--qrels", BEIR / "qrels.tsv", "--json").stdout)
    assert audited["questions"] == len(generated) and audited["kept"] == sum(len(r["noise"]) for r in rewritten)
    assert audited["covered"] == sum(1 for r in generated.values() if len(r["noise"]) >= 3)
    assert audited["judged_kept"] > 0 and audited["leak_rate"] == 0.0  # a question's own abstract is never noise
    assert sum(audited["rejected_by_rule"].values()) == sum(len(r["rejected"]) for r in generated.values())
    summary = refkit("audit", noise, "--qrels", BEIR / "qrels.tsv")  # for a person: a summary, no JSON
    assert not summary.stdout.strip() and f"coverage: {audited['covered']} of {audited['questions']}" in summary.stderr
    assert "leak: 0 of" in summary.stderr and len(summary.stderr.splitlines()) < 15
    shown = next(r for r in rewritten if r["noise"])
    view = refkit("show", noise, "--question", shown["id"]).stdout  # a run for a person to read
    assert shown["query"][:30] in " ".join(view.split()) and shown["noise"][0]["snippet_id"] in view
    assert all(r["query"][:20] not in view for r in generated.values() if r["id"] != shown["id"])

    supported = tmp_path / "supported.jsonl"
    refkit(
        "noise",
        questions,
        "--server",
        server,
        "--lexicon",
        lexicon_path,
        "--seed",
        13,
        "--refs",
        refs,
        "--per-query",
        4,
        "--examined",
        40,
        "--out",
        supported,
    )
    refusals = 0
    for record in map(orjson.loads, supported.read_bytes().splitlines()):
        by_rule = [r for r in record["refused_swaps"] if r["rule"] == "unsupported"]
        refusals += len(by_rule)
        assert all(r["why"].startswith("unsupported: ") for r in by_rule)
        if record["targets"] and not record["rewrites"] and record["swaps_searched"]:  # every swap was refused
            assert record["stopped"]["stage"] == "support" and by_rule
        for rewrite in record["rewrites"]:  # a kept rewrite names the text that supports it
            support = rewrite["support"]
            assert support["supported"] and support["similarity"] >= (
                ENTITY_FLOOR if support["level"] == "paired" else 0.5
            )
        assert {n["rewrite"] for n in record["noise"]} <= {r["number"] for r in record["rewrites"]}
    assert refusals > 0

    refkit(
        "assemble",
        "--relevant",
        labeled,
        "--noise",
        noise,
        "--n-relevant",
        "1..2",
        "--n-irrelevant",
        "3..5",
        "--seed",
        7,
        "--out",
        items,
    )
    assembled = [orjson.loads(line) for line in items.read_bytes().splitlines()]
    assert len(assembled) == 14
    asthma_item = next(i for i in assembled if i["id"] == ASTHMA[0])
    labels = [k["label"] for k in asthma_item["answer_key"].values()]
    available = asthma_item["counts"]["available_irrelevant"]
    assert labels.count("relevant") == 1 and min(3, available) <= labels.count("irrelevant") <= 5
    assert asthma_item["shortfall"] == ({} if available >= 3 else {"irrelevant": 3 - available})
    assert [r["number"] for r in asthma_item["references"]] == list(range(1, len(labels) + 1))
    assert "label" not in json.dumps(asthma_item["references"])  # labels stay in the answer key
    relevant_number = next(n for n, k in asthma_item["answer_key"].items() if k["label"] == "relevant")
    assert asthma_item["references"][int(relevant_number) - 1]["doc_id"] == ASTHMA[0]

    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        "".join(
            json.dumps(
                {
                    "id": item["id"],
                    "response": "".join(f"[{n}]" for n, k in item["answer_key"].items() if k["label"] == "relevant"),
                }
            )
            + "\n"
            for item in assembled
        ),
        encoding="utf-8",
    )  # a perfect curator
    result = json.loads(refkit("score", items, responses).stdout)
    assert result["overall"]["curation_efficiency"] == 1.0


def test_same_inputs_give_byte_identical_outputs(server, lexicon_path, questions, tmp_path):
    outputs = []
    for run in ("first", "second"):
        folder = tmp_path / run
        refkit("collect", questions, "--server", server, "--k", 8, "--out", folder / "refs.jsonl")
        refkit(
            "noise",
            questions,
            "--server",
            server,
            "--lexicon",
            lexicon_path,
            "--seed",
            5,
            "--out",
            folder / "noise.jsonl",
            "--refs",
            folder / "refs.jsonl",
        )
        refkit("label", folder / "refs.jsonl", "--qrels", BEIR / "qrels.tsv", "--out", folder / "labeled.jsonl")
        refkit(
            "assemble",
            "--relevant",
            folder / "labeled.jsonl",
            "--noise",
            folder / "noise.jsonl",
            "--n-relevant",
            "0..2",
            "--n-irrelevant",
            "2..4",
            "--seed",
            5,
            "--out",
            folder / "items.jsonl",
        )
        outputs.append({p.name: p.read_bytes() for p in sorted(folder.iterdir())})
    assert outputs[0] == outputs[1]
    noise = [orjson.loads(line) for line in outputs[0]["noise.jsonl"].splitlines()]
    assert all(r["params"]["seed"] == 5 and r["params"]["lexicon_sha256"] for r in noise)


def test_collect_is_byte_identical_while_other_clients_load_the_server(server, questions, tmp_path):
    """Other clients' queries share the encoder's micro-batches; the dense scores must not notice."""
    import threading

    quiet, loaded = tmp_path / "quiet.jsonl", tmp_path / "loaded.jsonl"
    refkit("collect", questions, "--server", server, "--k", 24, "--out", quiet)
    others = [q.query for q in read_query_file(BEIR / "queries.tsv")[100:400]]
    stop = threading.Event()

    def load() -> None:
        with SearchClient(server) as client:
            position = 0
            while not stop.is_set():
                client.search(others[position % len(others)], k=10, retrievers=["dense"])
                position += 1

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        refkit("collect", questions, "--server", server, "--k", 24, "--out", loaded)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert loaded.read_bytes() == quiet.read_bytes()


def test_scan_snippets_streams_every_snippet_and_needs_the_token(server, refkit_root, tmp_path):
    with SearchClient(server) as client:
        all_pubmed = list(client.scan_snippets(["pubmed"], page_size=50))
        firsts = list(client.scan_snippets(["pubmed"], first_chunk_only=True))
    corpus_snippets = [
        json.loads(line)
        for shard in sorted((refkit_root / "pubmed").glob("shard-*.jsonl"))
        for line in shard.read_text(encoding="utf-8").splitlines()
    ]
    assert [s.id for _, s in all_pubmed] == [s["id"] for s in corpus_snippets]
    assert [s.id for _, s in firsts] == [s["id"] for s in corpus_snippets if s["chunk"] == 0]
    assert json.loads(firsts[0][1].meta_json) == corpus_snippets[0]["meta"] and not firsts[0][1].content
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    import grpc

    process, address = start_background_server(refkit_root, "--token-file", str(token_file), "--corpora", "pubmed")
    try:
        with SearchClient(address) as client, pytest.raises(grpc.RpcError) as refused:
            list(client.scan_snippets())
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with SearchClient(address, token="s3cret") as client:
            assert len(list(client.scan_snippets())) == len(corpus_snippets)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


# -- bad input writes nothing --


def test_bad_input_gives_a_clear_error_and_writes_nothing(server, lexicon_path, questions, tmp_path):
    out = tmp_path / "refs.jsonl"
    unreachable = refkit("collect", questions, "--server", "127.0.0.1:1", "--out", out, ok=False)
    assert unreachable.exit_code == 3 and "unreachable" in unreachable.output and not out.exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"id": "q1", "query": "asthma"}\n{"id": "q2", "query": ""}\n', encoding="utf-8")
    result = refkit("collect", empty, "--server", server, "--out", out, ok=False)
    assert result.exit_code == 1 and "empty.jsonl:2: empty query (id q2)" in result.output and not out.exists()
    bad_lexicon = tmp_path / "lexicon.tsv"
    bad_lexicon.write_text("name\ttype\tcolour\nAspirin\tdrug\tred\n", encoding="utf-8")
    result = refkit(
        "noise", questions, "--server", server, "--lexicon", bad_lexicon, "--seed", 1, "--out", out, ok=False
    )
    assert result.exit_code == 1 and "unknown lexicon column 'colour'" in result.output and not out.exists()
    previous = tmp_path / "items.jsonl"
    previous.write_bytes(b"earlier output\n")
    labeled = tmp_path / "labeled.jsonl"
    labeled.write_text('{"id": "q1", "query": "x", "references": [{"snippet_id": "a", "label": "maybe"}]}\n')
    result = refkit(
        *assemble_command(labeled, previous),
        ok=False,
    )
    assert result.exit_code == 1 and "labeled.jsonl:1: references[0].label is 'maybe'" in result.output
    assert previous.read_bytes() == b"earlier output\n"  # an earlier output is never damaged
    result = refkit(
        "assemble",
        "--relevant",
        labeled,
        "--n-relevant",
        "2..1",
        "--n-irrelevant",
        "1..2",
        "--seed",
        1,
        "--out",
        out,
        ok=False,
    )
    assert result.exit_code == 2 and "--n-relevant" in result.output
    huge = tmp_path / "huge.tsv"  # before: a _csv.Error traceback while reading
    huge.write_text("q1\tasthma and fast food\nq2\t" + "asthma " * 150_000 + "\n", encoding="utf-8")
    result = refkit("collect", huge, "--server", server, "--out", out, ok=False)
    assert result.exit_code == 1 and not out.exists()
    assert "query q2 has 1,049,999 characters, more than searchd's limit of 4,096" in result.output
