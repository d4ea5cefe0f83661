"""`medsnip build RECIPE --out ROOT`: a recipe's corpora, each corpus's declared indexes and what searchd
serves, from one command; reused when current, resumed after a kill at any stage to the root an
uninterrupted build makes. The recipe is manifests/demo.toml with its dense index on a small static
model (the encoder is not what is tested) and without its Wikipedia source (the largest; the build
path is the same)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO
from helpers import tiny_static_model
from medsnip.buildrecord import lineage_hash, read_build_record
from pipeline.cli import main as medsnip_main

DEMO = REPO / "manifests" / "demo.toml"
SOURCES = ("pubmed", "pmc", "textbooks", "pubmedqa")
QUERIES = ("aspirin myocardial infarction", "mitral valve prolapse", "anatomy of the heart")


def demo_copy(folder: Path, model: Path) -> Path:
    """manifests/demo.toml with absolute sample paths, no Wikipedia, and its dense index on `model`."""
    text = DEMO.read_text(encoding="utf-8").replace("../samples", str(REPO / "samples"))
    start = text.index('[[sources]]\nkind = "wikipedia"')
    end = text.index("[[sources]]", start + 1)
    text = text[:start] + text[end:]
    dense_start = text.index("[indexes.dense-minilm]")
    dense_end = text.index("[serve]")
    text = (
        text[:dense_start] + f'[indexes.dense-minilm]\nkind = "dense"\nmodel = "{model}"\npooling = "static"\n'
        "normalize = true\n\n" + text[dense_end:]
    )
    path = folder / "demo-copy.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("recipe")
    return demo_copy(folder, tiny_static_model(folder / "static-model"))


def build(recipe: Path, root: Path, *extra: str):
    return CliRunner().invoke(
        medsnip_main,
        ["build", str(recipe), "--out", str(root), "--workers", "2", "--quiet", *extra],
        catch_exceptions=False,
    )


def root_state(root: Path) -> dict:
    """What a root is: every corpus's and index's lineage, the bytes of every shard, store, embedding and
    FAISS file, BM25's hits and scores for a few queries (Lucene's files carry random segment ids), and
    serve.json."""
    from indexer.bm25 import BM25Index
    from medsnip.corpus import Corpus

    def lineage(folder: Path) -> str:  # records name their corpus by its path: the same build in another root
        return lineage_hash(json.loads(json.dumps(read_build_record(folder)).replace(str(root), "ROOT")))

    state = {"serve": (root / "serve.json").read_text()}
    for source in SOURCES:
        corpus_dir = root / source
        state[source] = lineage(corpus_dir)
        for folder in ("store", "bm25", "dense-minilm"):
            state[f"{source}/{folder}"] = lineage(corpus_dir / folder)
        dense = corpus_dir / "dense-minilm"
        files = [
            *corpus_dir.glob("shard-*"),
            *(corpus_dir / "store").glob("*.npy"),
            *dense.glob("emb-*.npy"),
            *dense.glob("faiss-*"),
        ]
        for path in sorted(files):
            state[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        bm25 = BM25Index(corpus_dir / "bm25", Corpus.open(corpus_dir))
        state[f"{source}/bm25 hits"] = bm25.search(list(QUERIES), k=20)
        bm25.close()
    return state


def killed_at(recipe: Path, root: Path, marker: str, after: int = 1) -> None:
    """Run `medsnip build` in its own process group and SIGKILL the group at the `after`-th output line
    holding `marker` (the stage under way then)."""
    command = [sys.executable, "-m", "pipeline.cli", "build", str(recipe), "--out", str(root), "--workers", "2"]
    process = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    seen = 0
    for line in process.stdout:
        seen += marker in line
        if seen >= after:
            os.killpg(process.pid, signal.SIGKILL)
            break
    else:
        pytest.fail(f"the build ended before {marker!r} showed (exit {process.wait()})")
    process.wait(timeout=60)
    process.stdout.close()


def test_one_command_builds_the_demo_recipe_and_a_killed_build_resumes_to_the_same_root(recipe, tmp_path):
    reference = tmp_path / "reference"
    result = build(recipe, reference)
    assert result.exit_code == 0, result.output
    assert "dense-minilm" in result.output and "built" in result.output  # the stage table
    expected = root_state(reference)

    again = build(recipe, reference)  # everything current: nothing is built again
    assert again.exit_code == 0 and " built " not in again.output.replace("│", " "), again.output
    assert root_state(reference) == expected

    the_readme_says_what_the_build_made(reference)

    root = tmp_path / "killed"
    killed_at(recipe, root, "textbooks (textbooks)")  # corpusbuild, between sources
    killed_at(recipe, root, "pmc/bm25: building")  # an index build under way
    killed_at(recipe, root, "embedded shard", after=2)  # the dense index half embedded
    result = build(recipe, root)
    assert result.exit_code == 0, result.output
    assert root_state(root) == expected


def test_the_recipe_is_checked_before_anything_is_built(recipe, tmp_path):
    text = recipe.read_text(encoding="utf-8")
    cases = {
        "unknown index kind": (text.replace('kind = "bm25"', 'kind = "splade"'), "kind must be one of"),
        "a dense option of the wrong type": (text.replace('pooling = "static"', "pooling = 3"), "must be a str"),
        "serving an index no source builds": (
            text.replace('retrievers = ["bm25", "dense-minilm"]', 'retrievers = ["bm25", "dense-medcpt"]'),
            "dense-medcpt",
        ),
        "an undeclared index": (text.replace('"bm25", "dense-minilm"]   #', '"bm25", "dense-x"]   #'), "dense-x"),
    }
    for name, (changed, message) in cases.items():
        bad = tmp_path / f"{name.replace(' ', '-')}.toml"
        bad.write_text(changed, encoding="utf-8")
        root = tmp_path / name.replace(" ", "-")
        result = build(bad, root)
        assert result.exit_code == 1 and message in result.output, (name, result.output)
        assert not any((root / source / "bm25").exists() for source in SOURCES), name


def the_readme_says_what_the_build_made(root: Path) -> None:
    """The numbers the README's tour prints for `make demo`'s root: each corpus's snippets (its searchd line),
    PubMed's BM25 documents and dense vectors, and their total, are those this build of the same recipe
    records (Wikipedia, left out here, only in the total's sum of the README's own counts)."""
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    served = dict(re.findall(r"(\w+) \((\d+) snippets: bm25\+dense-minilm\)", readme))
    assert set(served) == {*SOURCES, "wikipedia"}, served
    for corpus in SOURCES:
        assert int(served[corpus]) == read_build_record(root / corpus)["counts"]["snippets"], corpus
    total = sum(map(int, served.values()))
    assert f"corpus root build/demo: 5 sources, {total:,} snippets" in readme
    assert f"MiniLM embedding {total:,} snippets" in readme
    pubmed = read_build_record(root / "pubmed")["counts"]["snippets"]
    assert f"BM25: {pubmed} documents (en analyzer)" in readme and f"dense: {pubmed} vectors (Flat, ip)" in readme
    assert f"4/4 {pubmed} snippets written" in readme
