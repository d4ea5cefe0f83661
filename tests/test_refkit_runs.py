"""refkit noise runs over real question sets against a real searchd (tests/refkit_kit.py): every rewrite of
real BioASQ, MedQA and PubMedQA questions reads right, the audit says what the records say, the judge's
threshold and its runs, a permissive run decided again, and killed runs that resume to the same bytes."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import orjson
import pytest
from refkit_kit import BEIR, IR

from helpers import refkit
from refkit.noise.sense import question_part


@pytest.mark.parametrize(
    "questions_file, limit, least_rewrites, least_kept",
    [
        # this root holds no document on BioASQ's topics: most targets are refused as not-in-corpus, and say so
        (IR / "bioasq_10B1_golden.json", 40, 4, 0),
        # a vignette is rewritten only where it asks, and only in its drugs, diseases and genes (refkit.noise.sense,
        # refkit.noise): few MedQA questions get a rewrite, none of a finding
        (IR / "medqa_us_4options_test.jsonl", 60, 3, 0),
        (IR / "pubmedqa_test_set.json", 40, 10, 3),
    ],
)
def test_every_rewrite_of_real_questions_reads_right(
    server, names_lexicon_path, questions_file, limit, least_rewrites, least_kept, tmp_path
):
    """With every MeSH name, real BioASQ, MedQA and PubMedQA questions are rewritten; every rewrite passes
    refkit.noise.grammar's checks and refkit.noise.sense's rules, swaps come from the sibling rules, no generic name is
    swapped, every question short of 3 kept says which stage and rule stopped it, and PubMedQA's own
    abstracts are never kept as noise."""
    noise = tmp_path / "noise.jsonl"
    refkit(
        "noise",
        questions_file,
        "--server",
        server,
        "--lexicon",
        names_lexicon_path,
        "--seed",
        13,
        "--limit",
        limit,
        "--no-support",
        "--examined",  # the rewrites are what is tested, not how deep the filters look
        40,
        "--related",  # this small root has few texts on the questions' own subjects: what is kept is checked
        "--out",
        noise,
    )
    audited = json.loads(
        refkit("audit", noise, "--qrels", BEIR / "qrels.tsv", "--lexicon", names_lexicon_path, "--json").stdout
    )
    assert audited["questions"] == limit and audited["rewrites"] >= least_rewrites
    assert audited["rewrites_with_grammar_problems"] == 0, audited["grammar_problems"]
    assert audited["rewrites_without_sense"] == 0 and audited["sense_checked_with_lexicon"], audited["sense_problems"]
    assert set(audited["entity_swap_rules"]) <= {
        "pharmacological-action",
        "inn-stem",
        "symbol-family",
        "tree-sibling",
        "tree-cousin",
    }
    assert audited["generic_swaps"] == [] and audited["kept"] >= least_kept
    stages = {"targets", "subjects", "swaps", "support", "filters", "retrieval"}
    assert all(short["stage"] in stages and short["rule"] and short["why"] for short in audited["short"])
    assert sum(audited["stopped"].values()) == len(audited["short"]) == limit - audited["covered"]
    for record in map(orjson.loads, noise.read_bytes().splitlines()):
        asked_from = question_part(record["query"])
        assert all(
            edit["span"][0] >= asked_from
            for r in record["rewrites"]
            for edit in r["replaced"]
            if edit["what"] == "entity"
        ), record["id"]
        if not record["targets"] and not record["subjects"]:  # the reason given is the reason
            refused = {r["rule"] for r in record["refused_targets"] + record["refused_subjects"]}
            assert record["stopped"]["rule"] in refused | {"no-mention"}
    print(questions_file.name, {k: audited[k] for k in ("covered", "kept", "kept_related_by", "refused_swaps")})
    if "pubmedqa" in questions_file.name:
        assert audited["judged_kept"] > 0 and audited["leak_rate"] == 0.0


def test_audit_reports_what_the_records_say(tmp_path):
    """Noise that the judgements call relevant is a leak; a question short of --min-noise is reported with
    the stage and rule its record names; rejections are counted per rule and per question."""
    from refkit.curation.audit import audit_noise, by_rule_table

    def kept(doc_id, names=("Eczema",)):
        return {
            "snippet_id": f"pubmed:{doc_id}:0",
            "doc_id": doc_id,
            "related": {"how": "entity"},
            "measured": {"names": {"kept": list(names), "put_in": [], "phrases": []}},
        }

    rewrite = {
        "query": "What causes asthma?",
        "replaced": [
            {
                "what": "entity",
                "rule": "tree-sibling",
                "text": "eczema",
                "written": "asthma",
                "to": "Asthma",
                "from": "Eczema",
            }
        ],
    }
    rejected = [{"rule": "may-answer", "test": "ceiling"}, {"rule": "unrelated", "test": "similarity-floor"}]
    records = [
        {
            "id": "q1",
            "query": "What causes eczema?",
            "noise": [kept("1"), kept("2"), kept("3")],
            "rewrites": [rewrite],
            "targets": [{}],
            "rejected": rejected,
        },
        {
            "id": "q2",
            "query": "What causes eczema?",
            "noise": [kept("7"), kept("9", names=())],
            "rewrites": [rewrite],
            "targets": [{}],
            "rejected": rejected[:1],
            "stopped": {"stage": "filters", "rule": "may-answer", "why": "2 kept; ..."},
        },
        {
            "id": "q3",
            "noise": [],
            "rewrites": [],
            "targets": [],
            "rejected": [],
            "refused_targets": [{"rule": "generic"}],
            "stopped": {"stage": "targets", "rule": "generic", "why": "no target: generic: ..."},
        },
    ]
    noise = tmp_path / "noise.jsonl"
    noise.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = audit_noise(noise, {"q1": {"2": 1, "3": 0}, "q2": {"9": 1}})
    assert (result["covered"], result["coverage"], result["with_target"]) == (1, 1 / 3, 2)
    assert result["stopped"] == {"filters/may-answer": 1, "targets/generic": 1}
    assert [(s["id"], s["stage"], s["rule"]) for s in result["short"]] == [
        ("q2", "filters", "may-answer"),
        ("q3", "targets", "generic"),
    ]
    assert (result["kept"], result["hard"], result["kept_related_by"]) == (5, 4, {"entity": 5})
    assert (result["judged_kept"], result["leaked"], result["leak_rate"]) == (5, 2, 2 / 5)
    assert result["leaks"] == [{"id": "q1", "snippet_id": "pubmed:2:0"}, {"id": "q2", "snippet_id": "pubmed:9:0"}]
    assert result["entity_swap_rules"] == {"tree-sibling": 2} and result["refused_targets"] == {"generic": 1}
    assert result["rejected_by_rule"] == {"may-answer/ceiling": 2, "unrelated/similarity-floor": 1}
    assert result["by_rule"][1] == {"id": "q2", "kept": 2, "may-answer/ceiling": 1}
    table = by_rule_table(result)
    assert table[2] == "| **all** | 5 | 2 | 1 |" and table[4] == "| q2 | 2 | 1 | 0 |"
    assert (result["rewrites"], result["rewrites_with_grammar_problems"]) == (2, 0)


# -- the judge --


def test_judge_threshold_is_calibrated_on_the_labelled_pairs():
    """The minilm preset's threshold rejects at least 95% of the real answers (each PubMedQA question and
    its own abstract) while mismatched pairs stay below it: what refkit/noise/judge.py documents."""
    from medsnip.queries import query_texts
    from refkit.noise.judge import JUDGES, Judge, calibrate

    questions = query_texts(BEIR / "queries.tsv")
    abstracts = {r["_id"]: r for r in map(orjson.loads, (BEIR / "corpus.jsonl").read_bytes().splitlines())}
    pairs = [(questions[q], f"{abstracts[q]['title']} {abstracts[q]['text']}".strip()) for q in questions]
    judge = Judge(JUDGES["minilm"])
    measured = calibrate(judge, pairs, share=0.95)
    assert 0.45 <= measured and JUDGES["minilm"].threshold <= measured + 0.01, measured
    mismatched = [
        judge.scores(question, [pairs[(i + 1) % len(pairs)][1]])[0] for i, (question, _) in enumerate(pairs[:100])
    ]
    assert sorted(mismatched)[98] < JUDGES["minilm"].threshold


def test_noise_with_a_judge_records_it_and_rejects_likely_answers(server, names_lexicon_path, questions, tmp_path):
    """--judge minilm with a strict threshold: every scored candidate carries the judge's model, score and
    threshold; nothing kept scores at or above it; the judge's rejections say so; reruns are identical."""
    outputs = []
    for run in ("first", "second"):
        out = tmp_path / f"{run}.jsonl"
        refkit(
            "noise",
            questions,
            "--server",
            server,
            "--lexicon",
            names_lexicon_path,
            "--seed",
            3,
            "--judge",
            "minilm",
            "--judge-threshold",
            0.42,
            "--no-support",
            "--related",
            "--similarity-floor",
            0.35,
            "--out",
            out,
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    records = [orjson.loads(line) for line in outputs[0].splitlines()]
    kept = [n for r in records for n in r["noise"]]
    rejected = [c for r in records for c in r["rejected"]]
    assert kept and all(
        n["measured"]["judge"]["model"] == "minilm" and n["measured"]["judge"]["score"] < 0.42 for n in kept
    )
    by_judge = [c for c in rejected if c["test"] == "judge"]
    assert all(
        c["reason"].startswith("the judge (minilm)") and c["measured"]["judge"]["score"] >= 0.42 for c in by_judge
    )
    judged = [c for c in rejected + kept if "judge" in c.get("measured", {})]
    assert judged  # every candidate the similarity tests reach is scored
    assert all(r["params"]["judge"] == {"name": "minilm", "model": "minilm", "threshold": 0.42} for r in records)


def test_a_local_cross_encoder_judge_loads_from_a_folder(tmp_path):
    """No cross-encoder weights ship offline, so a tiny one is made here (random weights, MiniLM's real
    tokenizer) and loaded the way MedCPT-Cross-Encoder or a BGE reranker would be: by folder, through
    transformers; a hub name that is not cached is refused, never downloaded."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from medsnip.encoders import bundled_minilm_path
    from refkit.noise.judge import Judge, judge_spec

    folder = tmp_path / "tiny-cross-encoder"
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, num_labels=1
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(bundled_minilm_path()).save_pretrained(folder)
    judge = Judge(judge_spec(str(folder), threshold=0.0))
    scores = judge.scores("mechanism of action of oseltamivir", ["oseltamivir inhibits neuraminidase", "asthma"])
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
    assert judge.scores("mechanism of action of oseltamivir", ["asthma"]) == scores[1:]  # deterministic
    with pytest.raises(ValueError, match="give --judge-threshold"):
        judge_spec(str(folder))
    with pytest.raises(ValueError, match="nothing is downloaded"):
        Judge(judge_spec("medcpt-cross"))


def test_a_permissive_run_decided_again_gives_the_default_run(server, names_lexicon_path, questions, tmp_path):
    """The bench's threshold curve decides a run that measured every candidate (every threshold off) again
    at other thresholds (refkit.noise.filters.replay): at the defaults it keeps what the default run keeps."""
    from refkit.noise import NoiseOptions
    from refkit.noise.filters import replay

    default, permissive = tmp_path / "default.jsonl", tmp_path / "permissive.jsonl"
    # --related: this small root has few texts on the questions' own subjects; the replay is what is tested
    common = ("--server", server, "--lexicon", names_lexicon_path, "--seed", 13, "--no-support", "--related")
    refkit("noise", questions, *common, "--out", default)
    refkit(
        "noise",
        questions,
        *common,
        "--answer-ceiling",
        1,
        "--answer-margin",
        1,
        "--entity-floor",
        -1,
        "--similarity-floor",
        -1,
        "--per-query",
        1_000_000,
        "--out",
        permissive,
    )
    runs = [list(map(orjson.loads, path.read_bytes().splitlines())) for path in (default, permissive)]
    kept = sum(len(r["noise"]) for r in runs[0])
    assert kept and sum(len(r["noise"]) for r in runs[1]) > kept
    for ran, measured in zip(*runs, strict=True):
        chosen = replay(measured, NoiseOptions(related=True))
        assert [c["snippet_id"] for c in chosen] == [n["snippet_id"] for n in ran["noise"]]


def _kill_when_partial_has(command: list, partial: Path, lines: int) -> None:
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "refkit.cli", *map(str, command)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        if partial.exists() and partial.read_bytes().count(b"\n") >= lines:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)


@pytest.mark.parametrize("command", ["collect", "noise"])
def test_a_killed_run_resumes_to_the_bytes_of_an_unkilled_one(server, names_lexicon_path, command, tmp_path):
    """The first 40 PubMedQA test questions: a run killed part way (SIGKILL after 10, and a line left cut
    short) and started again with the same arguments ends byte-identical to a run never killed. A run killed
    under another generation of the corpus is refused, unless told to mix or to restart."""
    questions = IR / "pubmedqa_test_set.json"
    noise = ["--lexicon", names_lexicon_path, "--seed", 13, "--candidates", 20, "--per-query", 3, "--no-support"]
    options = ["--k", 8] if command == "collect" else noise
    arguments = [command, questions, "--limit", 40, "--server", server, *options]
    whole, resumed = tmp_path / "whole.jsonl", tmp_path / "resumed.jsonl"
    refkit(*arguments, "--out", whole)
    assert whole.read_bytes().count(b"\n") == 40
    partial, sidecar = (resumed.with_name(resumed.name + suffix) for suffix in (".partial", ".partial.json"))
    _kill_when_partial_has([*arguments, "--out", resumed], partial, 10)
    assert partial.exists() and not resumed.exists()
    with open(partial, "ab") as out:  # a kill in the middle of a line
        out.write(b'{"id": "cut sh')
    killed_run = {path: path.read_bytes() for path in (partial, sidecar)}  # for the second half below
    result = refkit(*arguments, "--out", resumed)
    assert "resuming:" in result.output
    assert resumed.read_bytes() == whole.read_bytes() and not partial.exists() and not sidecar.exists()

    resumed.unlink()
    for path, data in killed_run.items():  # the same killed run, to be resumed under another generation
        path.write_bytes(data)
    state = json.loads(sidecar.read_text())
    state["lineage"] = {name: {**lineage, "corpus": "0" * 64} for name, lineage in state["lineage"].items()}
    sidecar.write_text(json.dumps(state))  # as if a daily update had landed since the kill
    refused = refkit(*arguments, "--out", resumed, ok=False)
    assert refused.exit_code == 1 and "another generation" in refused.output and "--mix-generations" in refused.output
    assert not resumed.exists() and partial.exists()
    refkit(*arguments, "--out", resumed, "--restart")
    assert resumed.read_bytes() == whole.read_bytes()
    if command == "collect":  # a killed run started again with other options is replaced, and says so
        resumed.unlink()
        for path, data in killed_run.items():
            path.write_bytes(data)
        other = refkit(*[a if a != 8 else 9 for a in arguments], "--out", resumed)
        said = " ".join(other.output.split())
        assert "starting over:" in said and "records of a killed run with other retrieval.k than this" in said, said
        assert "resuming:" not in said
