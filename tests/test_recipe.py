"""`corpusbuild build RECIPE`: every source of a recipe into one corpus root, checksums enforced."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import REPO
from corpusbuild.recipe import RecipeError, load_recipe
from helpers import all_snippets
from medsnip.buildrecord import read_build_record, record_hash

DEMO = REPO / "manifests" / "demo.toml"


def test_demo_recipe_builds_every_source_into_one_root(tmp_path, run_corpusbuild):
    root = tmp_path / "root"
    result = run_corpusbuild("build", DEMO, "--out", root, "--require-checksums", "--quiet")
    assert result.exit_code == 0, result.output
    record = read_build_record(root)
    assert record["stage"] == "corpusbuild.build" and record["complete"] is True
    assert [s["name"] for s in record["sources"]] == ["pubmed", "pmc", "textbooks", "wikipedia", "pubmedqa"]
    for source in record["sources"]:
        assert source["record_sha256"] == record_hash(root / source["name"])
        assert source["snippets"] == len(all_snippets(root / source["name"])) > 0
        assert read_build_record(root / source["name"])["source"] == source["name"]
    assert record["recipe"]["text"] == DEMO.read_text(encoding="utf-8")
    assert len(list((root / "wikipedia").glob("shard-*"))) == 2  # the source's own shard count


def recipe_copy(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "manifests"
    folder.mkdir(exist_ok=True)
    path = folder / "recipe.toml"
    path.write_text(text.replace("../samples", str(REPO / "samples")), encoding="utf-8")
    return path


def test_a_changed_input_or_a_missing_pin_stops_the_build_before_anything_is_written(tmp_path, run_corpusbuild):
    text = DEMO.read_text(encoding="utf-8")
    pinned = '"pubmed4.xml" = "sha256:'
    start = text.index(pinned) + len(pinned)
    wrong = recipe_copy(tmp_path, text[:start] + "0" * 64 + text[start + 64 :])
    root = tmp_path / "root"
    result = run_corpusbuild("build", wrong, "--out", root, "--quiet")
    assert (
        result.exit_code == 1 and "pubmed4.xml: sha256" in result.output and "differs from the pinned" in result.output
    )
    assert not root.exists()

    unpinned = recipe_copy(tmp_path, text.replace('"pubmed4.xml" = "sha256:', '"other.xml" = "sha256:'))
    assert run_corpusbuild("build", unpinned, "--out", root, "--quiet").exit_code == 0  # pins are optional...
    shutil.rmtree(root)
    result = run_corpusbuild("build", unpinned, "--out", root, "--require-checksums", "--quiet")
    assert result.exit_code == 1 and "pubmed4.xml: no pinned checksum in the recipe" in result.output  # ...unless
    assert not root.exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('kind = "textbooks"', 'kind = "books"'), "kind must be one of"),
        (lambda t: t.replace('kind = "textbooks"', 'kind = "textbooks"\ncolour = "blue"'), "unknown key(s) ['colour']"),
        (lambda t: t.replace("${samples}/nxml", "${nowhere}/nxml"), "unknown variable ${nowhere}"),
        (lambda t: t.replace("chunk_overlap = 200", "chunk_overlap = 2000"), "chunk overlap must be in"),
        (lambda t: t + "\n[[sources]\n", "not valid TOML"),
    ],
)
def test_malformed_recipes_name_the_problem(tmp_path, edit, message):
    path = recipe_copy(tmp_path, edit(DEMO.read_text(encoding="utf-8")))
    with pytest.raises(RecipeError) as error:
        load_recipe(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_full_scale_recipe_names_its_publishers_and_demands_pins(tmp_path):
    """The MedCorp recipe names where each input comes from (medsnip fetch; NLM's 2026 baseline by pattern, not
    1,334 paths), and with --require-checksums an input neither the recipe nor a lock pins is refused."""
    from fetcher.publishers import publisher_of

    recipe = load_recipe(REPO / "manifests" / "medcorp-2026.toml", {"data": str(tmp_path)})
    kinds = {source.kind: source for source in recipe.sources}
    assert sorted(kinds) == ["pubmed", "statpearls", "textbooks", "wikipedia"]
    pubmed = publisher_of(kinds["pubmed"], "pubmed")
    assert pubmed.table == {
        "listing": "https://ftp.ncbi.nlm.nih.gov/pubmed/baseline/",
        "pattern": "pubmed26n*.xml.gz",
        "updates": "https://ftp.ncbi.nlm.nih.gov/pubmed/updatefiles/",
    }
    assert pubmed.folder == tmp_path / "pubmed" / "baseline"
    assert publisher_of(kinds["statpearls"], "statpearls").file_name == "statpearls_NBK430685.tar.gz"
    assert publisher_of(kinds["wikipedia"], "wikipedia").table["date"] == "20261101"
    assert publisher_of(kinds["textbooks"], "textbooks") is None  # MedQA's books have no stable link
    from corpusbuild.recipe import check_checksums

    books = tmp_path / "textbooks" / "en"
    books.mkdir(parents=True)
    shutil.copy(REPO / "samples" / "textbooks" / "books" / "Anatomy_Gray.txt", books)
    problems = check_checksums(kinds["textbooks"], require=True)
    assert any("Anatomy_Gray.txt: no pinned checksum" in p for p in problems)
    assert json.dumps(recipe.text)  # the recipe text is what the root record stores


def test_an_out_that_is_a_file_is_refused_before_any_stage(tmp_path):
    """`medsnip build RECIPE --out FILE`: a usage error (exit 2) before any stage starts or prints its header."""
    from click.testing import CliRunner

    from pipeline.cli import main as medsnip_main

    taken = tmp_path / "a-file"
    taken.write_text("mine\n")
    result = CliRunner().invoke(medsnip_main, ["build", str(REPO / "manifests" / "demo.toml"), "--out", str(taken)])
    assert result.exit_code == 2 and f"{taken} exists and is not a folder" in result.output
    assert "pubmed (pubmed)" not in result.output and taken.read_text() == "mine\n"


def test_a_folder_no_recipe_build_wrote_is_refused_as_out(tmp_path, run_corpusbuild):
    """`corpusbuild build` and `medsnip build` refuse an --out holding someone's files (exit 2, before any
    stage), build there with --force, and rebuild a root they wrote without it."""
    from click.testing import CliRunner

    from pipeline.cli import main as medsnip_main

    recipe = tmp_path / "recipe.toml"
    books = REPO / "samples" / "textbooks" / "books"
    recipe.write_text(f'[recipe]\nname = "tiny"\n[[sources]]\nkind = "textbooks"\ninputs = ["{books}"]\nshards = 1\n')
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine\n")
    refused = run_corpusbuild("build", recipe, "--out", notes, "--quiet")
    assert refused.exit_code == 2 and "is a folder no recipe build wrote (it holds notes.txt)" in refused.output
    medsnip = CliRunner().invoke(medsnip_main, ["build", str(recipe), "--out", str(notes), "--quiet"])
    assert medsnip.exit_code == 2 and "no recipe build wrote" in medsnip.output
    assert sorted(p.name for p in notes.iterdir()) == ["notes.txt"]
    assert run_corpusbuild("build", recipe, "--out", notes, "--quiet", "--force").exit_code == 0
    assert run_corpusbuild("build", recipe, "--out", notes, "--quiet").exit_code == 0  # its own root now
    assert (notes / "notes.txt").read_text() == "mine\n"


def test_a_source_dropped_from_the_recipe_is_set_aside_not_served(tmp_path, run_corpusbuild):
    """Rebuilding a root from a recipe without one of its sources moves that source's corpus to ROOT/.dropped
    (said in the output): searchd serves every corpus folder of a root, and would go on serving it."""
    from searchd.engine import discover_corpora

    books = REPO / "samples" / "textbooks" / "books"
    source = '[[sources]]\nkind = "textbooks"\nname = "{}"\ninputs = ["{}"]\nshards = 1\n'
    both, one = tmp_path / "both.toml", tmp_path / "one.toml"
    both.write_text('[recipe]\nname = "tiny"\n' + source.format("books", books) + source.format("old", books))
    one.write_text('[recipe]\nname = "tiny"\n' + source.format("books", books))
    root = tmp_path / "root"
    assert run_corpusbuild("build", both, "--out", root, "--quiet").exit_code == 0
    assert [p.name for p in discover_corpora(root)] == ["books", "old"]
    result = run_corpusbuild("build", one, "--out", root, "--quiet")
    assert result.exit_code == 0, result.output
    assert "source old is no longer in the recipe" in " ".join(result.output.split())
    assert [p.name for p in discover_corpora(root)] == ["books"]
    assert (root / ".dropped" / "old" / "build.json").is_file()
