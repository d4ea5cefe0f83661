"""`--json` on every command that prints results or a summary (medsnip.jsonout): stdout holds nothing but
JSON objects, one per line, with the numbers the human table shows (which goes to stderr), and an error
still follows the error convention. Tiny real inputs: the first 40 PubMedQA abstracts (a `medsnip build`
root with a store and a dense index on a seeded random static model, served by searchd for refkit: no JVM
and no MiniLM), two PubMed sample files for update and prune, a seeded random BERT for the distillation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import PUBMED_SAMPLES, SAMPLES
from corpusbuild.cli import main as corpusbuild_main
from helpers import serving, tiny_static_model
from indexer.cli import main as indexer_main
from pipeline.cli import main as medsnip_main
from refkit.cli import main as refkit_main

BEIR = SAMPLES / "ir" / "pubmedqa-beir"
ABSTRACTS = 40
QUESTIONS = (26, 34)  # hepatorenal syndrome, methotrexate (with a lexicon of the corpus alone: no swap, stopped)


def json_lines(main, *args, exit_code: int = 0) -> list[dict]:
    """Run a command with --json in process; every line of its stdout parsed (each must be one object)."""
    result = CliRunner().invoke(main, [*map(str, args), "--json"], catch_exceptions=False)
    assert result.exit_code == exit_code, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines, result.stderr
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(record, dict) for record in parsed)
    return parsed


@pytest.fixture(scope="module")
def static_model(tmp_path_factory) -> Path:
    return tiny_static_model(tmp_path_factory.mktemp("json-static") / "static")


@pytest.fixture(scope="module")
def recipe(tmp_path_factory, static_model) -> Path:
    """The first 40 PubMedQA abstracts with a store and a dense index on a static model, served (no JVM in
    searchd: it starts in about a second)."""
    folder = tmp_path_factory.mktemp("json-recipe")
    corpus = folder / "corpus.jsonl"
    corpus.write_bytes(b"".join(line + b"\n" for line in (BEIR / "corpus.jsonl").read_bytes().splitlines()[:ABSTRACTS]))
    path = folder / "tiny.toml"
    path.write_text(
        '[recipe]\nname = "tiny"\n\n[defaults]\nshards = 2\nindexes = ["store", "dense-static"]\n\n'
        f'[indexes.dense-static]\nkind = "dense"\nmodel = "{static_model}"\npooling = "static"\nnormalize = true\n\n'
        '[serve]\nretrievers = ["dense-static"]\nfusion = "rrf"\nrrf_k = 60\n\n'
        f'[[sources]]\nkind = "jsonl"\nname = "pubmedqa"\ninputs = ["{corpus}"]\nno_chunk = true\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def built(recipe, tmp_path_factory) -> tuple[Path, list[dict]]:
    """(root, its --json lines): `medsnip build` of the recipe."""
    root = tmp_path_factory.mktemp("json-root") / "root"
    return root, json_lines(medsnip_main, "build", recipe, "--out", root, "--workers", 1, "--quiet")


@pytest.fixture(scope="module")
def server(built):
    yield from serving(built[0])


def test_medsnip_build_prints_its_stage_table_as_lines(built):
    root, lines = built
    stages = [line for line in lines if line["type"] == "stage"]
    assert [(s["stage"], s["corpus"], s["status"]) for s in stages][:3] == [
        ("corpusbuild", "pubmedqa", "built"),
        ("store", "pubmedqa", "built"),
        ("dense-static", "pubmedqa", "built"),
    ]
    assert all(s["bytes"] > 0 for s in stages[:3]) and all(isinstance(s["seconds"], float) for s in stages)
    total = lines[-1]
    assert total == {**total, "type": "total", "recipe": "tiny", "root": str(root)}
    assert total["bytes"] == sum(s["bytes"] for s in stages) and len(lines) == len(stages) + 1


def test_corpusbuild_source_build_verify_and_export(built, recipe, tmp_path):
    root = built[0]
    source = recipe.parent / "corpus.jsonl"
    out = tmp_path / "one"
    args = ("--source", "pubmedqa", "--no-chunk", "--shards", 2, "--workers", 1, "--quiet")
    [line] = json_lines(corpusbuild_main, "jsonl", source, "--out", out, *args)
    assert line["type"] == "source" and line["source"] == "pubmedqa" and line["out"] == str(out)
    assert line["complete"] is True and line["input_files"] == 1 and line["input_files_failed"] == 0
    assert line["documents_read"] == line["documents_kept"] == line["snippets"] == ABSTRACTS
    assert line["shards"] == 2 and line["shard_bytes"] == sum(p.stat().st_size for p in out.glob("shard-*"))
    assert line["errors"] == 0 and line["workers"] == 1

    lines = json_lines(corpusbuild_main, "build", recipe, "--out", tmp_path / "root", "--workers", 1, "--quiet")
    assert [line["type"] for line in lines] == ["source", "root"]
    assert lines[0]["snippets"] == ABSTRACTS and lines[0]["out"] == str(tmp_path / "root" / "pubmedqa")
    assert lines[1] == {"type": "root", "root": str(tmp_path / "root"), "sources": 1, "snippets": 40, "complete": True}

    [line] = json_lines(corpusbuild_main, "verify", root / "pubmedqa")
    assert line == {"directory": str(root / "pubmedqa"), "ok": True, "differences": [], "shards": 2, "snippets": 40}
    shard = sorted(out.glob("shard-*"))[0]
    shard.write_bytes(shard.read_bytes().replace(b"e", b"E", 1))  # same size, other bytes
    [line] = json_lines(corpusbuild_main, "verify", out, exit_code=1)
    assert line["ok"] is False and line["differences"] == [
        d for d in line["differences"] if d.startswith(shard.name + ": sha256 expected")
    ]
    assert len(line["differences"]) == 1

    exported = tmp_path / "medrag.jsonl"
    [line] = json_lines(corpusbuild_main, "export", root / "pubmedqa", "--format", "medrag", "--out", exported)
    assert line == {"snippets": ABSTRACTS, "out": str(exported), "format": "medrag"}
    assert len(exported.read_text(encoding="utf-8").splitlines()) == ABSTRACTS


def test_indexer_builds_and_eval(built, static_model, tmp_path):
    corpus = built[0] / "pubmedqa"
    [line] = json_lines(indexer_main, "store", corpus, "--out", tmp_path / "store")
    assert line["stage"] == "indexer.store" and line["corpus"] == str(corpus) and line["out"] == str(tmp_path / "store")
    assert line["counts"]["snippets"] == ABSTRACTS and line["counts"]["shards"] == 2

    [line] = json_lines(indexer_main, "bm25", corpus, "--out", tmp_path / "bm25")
    assert line["stage"] == "indexer.bm25" and line["counts"]["documents"] == ABSTRACTS

    dense = ("--model", static_model, "--pooling", "static", "--normalize", "--out", tmp_path / "dense")
    [line] = json_lines(indexer_main, "dense", corpus, *dense)
    assert line["stage"] == "indexer.dense" and line["counts"]["vectors"] == ABSTRACTS

    queries = tmp_path / "queries.tsv"
    queries.write_text(
        "\n".join((BEIR / "queries.tsv").read_text(encoding="utf-8").splitlines()[:ABSTRACTS]) + "\n", encoding="utf-8"
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text(
        "\n".join((BEIR / "qrels.tsv").read_text(encoding="utf-8").splitlines()[:ABSTRACTS]) + "\n", encoding="utf-8"
    )
    run = tmp_path / "dense.trec"
    args = ("--queries", queries, "--qrels", qrels, "--retriever", "dense", "--run", run, "--k", 10)
    [line] = json_lines(indexer_main, "eval", corpus, *args)  # the static index: no JVM started in this process
    assert line["retriever"] == "dense" and line["queries"] == ABSTRACTS and line["run"] == str(run)
    assert 0 < line["ndcg_cut_10"] <= 1.0 and 0 < line["recall_100"] <= 1.0 and line["k"] == 10
    assert line["judge_by"] == "doc_id" and len(run.read_text().splitlines()) == 10 * ABSTRACTS

    result = CliRunner().invoke(indexer_main, ["store", str(static_model), "--json"])
    assert result.exit_code == 1 and result.stdout == "" and result.stderr.startswith("error: ")


def test_indexer_distill_static(built, tmp_path):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from medsnip.encoders import bundled_minilm_path

    teacher = tmp_path / "tiny-bert"
    tokenizer = AutoTokenizer.from_pretrained(bundled_minilm_path())
    torch.manual_seed(20261124)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    BertModel(config).save_pretrained(teacher)
    tokenizer.save_pretrained(teacher)
    out = tmp_path / "distilled"
    [line] = json_lines(
        indexer_main,
        "distill-static",
        built[0] / "pubmedqa",
        "--model",
        teacher,
        "--out",
        out,
        "--remove-components",
        2,
    )
    assert line == {**line, "out": str(out), "model": str(teacher), "pooling": "mean", "remove_components": 2}
    assert line["snippets"] == ABSTRACTS and (out / "model.safetensors").is_file()


def test_medsnip_update_and_prune(tmp_path):
    baseline, updates = tmp_path / "baseline", tmp_path / "updates"
    baseline.mkdir()
    updates.mkdir()
    shutil.copyfile(PUBMED_SAMPLES / "pubmed1.xml", baseline / "pubmed1.xml")
    shutil.copyfile(PUBMED_SAMPLES / "pubmed2.xml", updates / "pubmed2.xml")
    corpus = tmp_path / "pubmed"
    [first] = json_lines(
        corpusbuild_main, "pubmed", baseline, "--out", corpus, "--shards", 2, "--workers", 1, "--quiet"
    )
    json_lines(indexer_main, "store", corpus)
    [line] = json_lines(medsnip_main, "update", corpus, "--pubmed-updates", updates, "--workers", 1)
    assert line["applied"] == ["pubmed2.xml"] and set(line["seconds"]) == {"corpusbuild", "indexes"}
    assert line["changes"]["added"] > 0 and line["indexes"]["store"]["snippets"] > first["snippets"]

    lines = json_lines(medsnip_main, "prune", corpus, "--dry-run")
    assert {line["type"] for line in lines[:-1]} == {"would_delete"}
    assert lines[-1] == {**lines[-1], "type": "total", "folders": 1, "deleted": len(lines) - 1, "dry_run": True}
    assert lines[-1]["deleted"] >= 1 and lines[-1]["bytes_only_there"] == sum(x["bytes_only_here"] for x in lines[:-1])
    pruned = json_lines(medsnip_main, "prune", corpus)
    assert [line["path"] for line in pruned[:-1]] == [line["path"] for line in lines[:-1]]
    assert {line["type"] for line in pruned[:-1]} == {"deleted"} and not any(
        Path(x["path"]).exists() for x in pruned[:-1]
    )


def test_refkit_commands(server, built, tmp_path):
    lines = (BEIR / "queries.tsv").read_text(encoding="utf-8").splitlines()
    questions = tmp_path / "questions.tsv"
    questions.write_text("\n".join(["id\tquery", *(lines[i] for i in QUESTIONS)]) + "\n", encoding="utf-8")
    ids = [lines[i].split("\t")[0] for i in QUESTIONS]

    refs = tmp_path / "refs.jsonl"
    [collected] = json_lines(refkit_main, "collect", questions, "--server", server, "--k", 4, "--out", refs)
    assert collected == {**collected, "queries": 2, "out": str(refs)} and collected["references"] > 2

    qrels = tmp_path / "qrels.tsv"  # each question's first reference relevant, its second not, the rest unjudged
    collected_refs = [json.loads(text)["references"] for text in refs.read_text(encoding="utf-8").splitlines()]
    qrels.write_text(
        "".join(
            f"{i}\t0\t{r[0]['snippet_id']}\t1\n{i}\t0\t{r[1]['snippet_id']}\t0\n"
            for i, r in zip(ids, collected_refs, strict=True)
        ),
        encoding="utf-8",
    )
    labeled = tmp_path / "labeled.jsonl"
    [line] = json_lines(refkit_main, "label", refs, "--qrels", qrels, "--out", labeled)
    unlabelled = collected["references"] - 4
    assert line == {
        "queries": 2,
        "references": {"irrelevant": 2, "relevant": 2, "unlabelled": unlabelled},
        "out": str(labeled),
    }

    lexicon = tmp_path / "lexicon.tsv"
    [line] = json_lines(refkit_main, "lexicon", "--corpus", built[0] / "pubmedqa", "--out", lexicon)
    rows = [row for row in lexicon.read_text().splitlines() if not row.startswith("# source: ")]
    assert line["entities"] == sum(line["types"].values()) == len(rows) - 1 > 0
    assert line["records"] == ABSTRACTS and line["out"] == str(lexicon) and sum(line["corpus_names"].values()) > 0

    noise = tmp_path / "noise.jsonl"
    args = ("--lexicon", lexicon, "--seed", 7, "--per-query", 1, "--candidates", 10, "--refs", labeled)
    lines = json_lines(refkit_main, "noise", questions, *args, "--server", server, "--out", noise)
    assert [line["type"] for line in lines] == ["question", "question", "totals"]
    assert [line["id"] for line in lines[:2]] == ids
    records = [json.loads(line) for line in noise.read_text(encoding="utf-8").splitlines()]
    for line, record in zip(lines[:2], records, strict=True):
        assert line["rewrites"] == len(record["rewrites"]) and line["kept"] == len(record["noise"])
        assert line["rejected"] == len(record["rejected"])
        stopped = record.get("stopped")
        assert line["stopped"] == ({k: stopped[k] for k in ("stage", "rule", "why")} if stopped else None)
    totals = lines[-1]
    assert totals["queries"] == 2 and totals["out"] == str(noise) and totals["reader"] is None
    assert totals["kept"] == sum(line["kept"] for line in lines[:2])
    assert totals["rewritten"] == sum(1 for line in lines[:2] if line["rewrites"])

    [line] = json_lines(refkit_main, "audit", noise, "--qrels", BEIR / "qrels.tsv", "--by-rule")
    assert line["questions"] == 2 and line["kept"] == totals["kept"] and len(line["by_rule"]) == 2

    items = tmp_path / "items.jsonl"
    args = ("--relevant", labeled, "--noise", noise, "--n-relevant", "1..1", "--n-irrelevant", "1..2")
    [line] = json_lines(refkit_main, "assemble", *args, "--seed", 3, "--out", items)
    assert line == {**line, "items": 2, "out": str(items), "dropped": None}

    responses = tmp_path / "responses.jsonl"
    assembled = [json.loads(text) for text in items.read_text(encoding="utf-8").splitlines()]
    relevant = {
        item["id"]: [n for n, key in item["answer_key"].items() if key["label"] == "relevant"] for item in assembled
    }
    responses.write_text(
        "".join(json.dumps({"id": i, "response": f"See [{refs_[0]}]."}) + "\n" for i, refs_ in relevant.items()),
        encoding="utf-8",
    )
    lines = json_lines(refkit_main, "score", items, responses)
    assert [line["type"] for line in lines] == ["query", "query", "overall"]
    assert {line["id"] for line in lines[:2]} == set(ids)
    assert all(line["relevance_precision"] == 1.0 and line["counts"]["relevant_cited"] == 1 for line in lines[:2])
    assert lines[-1]["items"] == 2 and lines[-1]["relevance_precision"] == 1.0
    assert lines[-1]["unknown_responses"] == [] and lines[-1]["mean_per_query"]["relevance_precision"] == 1.0

    judgements = tmp_path / "judgements.jsonl"
    judged = [("alice", "related"), ("bob", "related"), ("alice", "answers"), ("bob", "unrelated")]
    judgements.write_text(
        "".join(
            json.dumps({"id": ids[n // 2], "snippet_id": f"pubmedqa:{n // 2}:0", "annotator": a, "judgement": j}) + "\n"
            for n, (a, j) in enumerate(judged)
        ),
        encoding="utf-8",
    )
    [line] = json_lines(refkit_main, "agreement", judgements)
    assert line["pairs"]["alice / bob"] == {"common": 2, "agreement": 0.5, "kappa": 0.3333}  # (0.5-0.25)/0.75
    assert line["annotators"]["alice"] == {"answers": 1, "related": 1}

    responses.write_text(responses.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    result = CliRunner().invoke(refkit_main, ["score", str(items), str(responses), "--json"])
    assert result.exit_code == 1 and result.stdout == "" and result.stderr.startswith("error: no response for item")
