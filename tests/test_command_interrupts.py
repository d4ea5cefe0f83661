"""Ctrl-C in the middle of every command of the five tools, run in this process (click's CliRunner): a
KeyboardInterrupt raised from a function the command calls mid-run. Each exits 130 with one `error:
interrupted (Ctrl-C)` line, no traceback, and leaves no new or changed output file (a resumable job's
progress excepted where its README says it is kept). The searchd that batch, collect and noise talk to is
a stand-in served from this process (canned hits): what is tested is the client's behaviour, not
searching."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from command_errors_kit import (
    SAMPLES,
    WORK,
    assemble_command,
    changes,
    copy_work_corpus,
    error_line,
    eval_args,
    invoke,
    noise_command,
    state,
)


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
            prepare=copy_work_corpus if kind == "pubmed" else None,  # an earlier build there is not replaced
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
        lambda w, out, a: eval_args(w, out, w.queries, w.qrels),
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
        noise_command,
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
        lambda w, out, a: assemble_command(w.queries, out / "items.jsonl"),
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
