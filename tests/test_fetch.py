"""`medsnip fetch` and `medsnip update --fetch` against a loopback mirror of NLM's and Wikimedia's servers
(tests/nlm_mirror.py): a fresh fetch and the lock it writes, an interrupted fetch resumed to the same bytes, each
fault a real server shows (a truncated body, a wrong .md5, a 503, a reset mid-file, a 429 with Retry-After, a slow
server), a file replaced upstream after the lock, the build that checks the lock's pins, and the daily update that
fetches only the new files. Nothing here reaches outside the machine."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from nlm_mirror import BASELINE, DUMP, UPDATES, Mirror, nlm_gzip

from helpers import shard_bytes
from pipeline.cli import main as medsnip_main


def medsnip(*args, ok: bool = True):
    result = CliRunner().invoke(medsnip_main, [str(a) for a in args], catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def mirror():
    with Mirror() as running:
        yield running


def write_recipe(folder: Path, mirror: Mirror, wikipedia: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    recipe = folder / "fetched.toml"
    text = f"""
[recipe]
name = "fetched"

[vars]
data = "{folder / "data"}"

[[sources]]
kind = "pubmed"
shards = 2
inputs = ["${{data}}/pubmed/baseline"]

[sources.publisher]
listing = "{mirror.url}/pubmed/baseline/"
pattern = "pubmed26n*.xml.gz"
"""
    if wikipedia:
        text += f"""
[[sources]]
kind = "wikipedia"
inputs = ["${{data}}/wikipedia"]

[sources.publisher]
wikimedia = "{mirror.url}"
wiki = "enwiki"
date = "20261101"
"""
    recipe.write_text(text)
    return recipe


FAST = ("--backoff", "0.05", "--quiet")


def baseline_folder(folder: Path) -> Path:
    return folder / "data" / "pubmed" / "baseline"


def test_a_fresh_fetch_verifies_every_file_and_pins_it_and_the_build_checks_those_pins(tmp_path, mirror):
    recipe = write_recipe(tmp_path, mirror, wikipedia=True)
    dry = medsnip("fetch", recipe, "--dry-run", *FAST)
    assert (
        "3 of 3 files to fetch" in dry.output
        and not baseline_folder(tmp_path).exists()
        or not any(baseline_folder(tmp_path).iterdir())
    )
    medsnip("fetch", recipe, *FAST)
    for name, sample in BASELINE.items():
        assert (baseline_folder(tmp_path) / name).read_bytes() == nlm_gzip(sample)
    assert (tmp_path / "data" / "wikipedia" / DUMP).read_bytes() == mirror.files[f"/enwiki/20261101/{DUMP}"]
    assert not list(tmp_path.rglob("*.part"))
    lock = orjson.loads((tmp_path / "fetched.lock").read_bytes())
    entry = lock["files"]["pubmed"]["pubmed26n0001.xml.gz"]
    data = nlm_gzip(BASELINE["pubmed26n0001.xml.gz"])
    assert entry["sha256"] == hashlib.sha256(data).hexdigest() and entry["bytes"] == len(data)
    assert entry["checksum"] == f"md5:{hashlib.md5(data).hexdigest()}"
    assert lock["files"]["wikipedia"][DUMP]["checksum"].startswith("sha1:")

    again = medsnip("fetch", recipe, *FAST, "--json")  # a second run fetches nothing
    totals = json.loads(again.stdout.strip().splitlines()[-1])
    assert totals["fetched"] == 0 and totals["files"] == 3

    # the build takes the lock's sha256s as pins, and builds what the same files placed by hand build
    pubmed_only = write_recipe(tmp_path / "pinned", mirror)
    shutil.copy(tmp_path / "fetched.lock", pubmed_only.with_suffix(".lock"))
    shutil.copytree(baseline_folder(tmp_path), baseline_folder(tmp_path / "pinned"))
    medsnip("build", pubmed_only, "--out", tmp_path / "root", "--require-checksums", "--quiet")
    by_hand = tmp_path / "by-hand"
    shutil.copytree(baseline_folder(tmp_path), baseline_folder(by_hand))
    plain = write_recipe(by_hand, mirror)
    medsnip("build", plain, "--out", tmp_path / "root-by-hand", "--quiet")
    assert shard_bytes(tmp_path / "root" / "pubmed") == shard_bytes(tmp_path / "root-by-hand" / "pubmed")

    # a pinned input whose bytes changed is refused before anything is built
    (baseline_folder(tmp_path / "pinned") / "pubmed26n0002.xml.gz").write_bytes(nlm_gzip("pubmed4.xml"))
    refused = medsnip("build", pubmed_only, "--out", tmp_path / "root-2", "--require-checksums", "--quiet", ok=False)
    assert refused.exit_code != 0 and "pubmed26n0002.xml.gz" in refused.output and "differs" in refused.output
    assert not (tmp_path / "root-2" / "pubmed" / "build.json").exists()


def test_an_interrupted_fetch_resumes_to_the_same_bytes_with_a_range_request(tmp_path, mirror):
    recipe = write_recipe(tmp_path, mirror)
    path = "/pubmed/baseline/pubmed26n0001.xml.gz"
    mirror.faults[path] = ["truncate"]  # the connection drops half way (a reset may lose what the kernel held)
    cut = medsnip("fetch", recipe, *FAST, "--attempts", "1", ok=False)
    assert cut.exit_code != 0 and "gave up after 1 attempts" in cut.output
    target = baseline_folder(tmp_path) / "pubmed26n0001.xml.gz"
    part = target.with_name(target.name + ".part")
    assert not target.exists() and 0 < part.stat().st_size < len(mirror.files[path])  # never partial under its name
    held = part.stat().st_size
    medsnip("fetch", recipe, *FAST)
    assert target.read_bytes() == mirror.files[path] and not part.exists()
    assert ("GET", path, f"bytes={held}-") in mirror.requests  # resumed, not started again


@pytest.mark.parametrize("fault", ["truncate", "reset", "503", "429"])
def test_a_cut_body_a_reset_a_503_and_a_429_are_recovered(tmp_path, mirror, fault):
    recipe = write_recipe(tmp_path, mirror)
    path = "/pubmed/baseline/pubmed26n0002.xml.gz"
    mirror.faults[path] = [fault]
    began = time.monotonic()
    medsnip("fetch", recipe, *FAST)
    assert (baseline_folder(tmp_path) / "pubmed26n0002.xml.gz").read_bytes() == mirror.files[path]
    if fault == "429":  # Retry-After: 1 was honoured, not the 0.05 s backoff
        assert time.monotonic() - began >= 1.0
    gets = [r for r in mirror.requests if r[:2] == ("GET", path)]
    assert len(gets) == 2


def test_a_wrong_md5_is_refused_and_nothing_is_kept_under_the_file_name(tmp_path, mirror):
    data = mirror.files["/pubmed/baseline/pubmed26n0002.xml.gz"]
    mirror.put("/pubmed/baseline/pubmed26n0002.xml.gz", data, md5="0" * 32)
    refused = medsnip("fetch", write_recipe(tmp_path, mirror), *FAST, ok=False)
    assert refused.exit_code == 1
    assert (
        "pubmed26n0002.xml.gz" in refused.output
        and "0" * 32 in refused.output
        and hashlib.md5(data).hexdigest() in refused.output
    )
    assert not (baseline_folder(tmp_path) / "pubmed26n0002.xml.gz").exists()
    assert not list(baseline_folder(tmp_path).glob("*.part"))
    assert (baseline_folder(tmp_path) / "pubmed26n0001.xml.gz").is_file()  # the good file is kept, and pinned
    assert "pubmed26n0001.xml.gz" in orjson.loads((tmp_path / "fetched.lock").read_bytes())["files"]["pubmed"]


def test_a_slow_server_times_out_and_leaves_no_file(tmp_path, mirror):
    path = "/pubmed/baseline/pubmed26n0001.xml.gz"
    mirror.faults[path] = ["slow", "slow"]
    began = time.monotonic()
    slow = medsnip("fetch", write_recipe(tmp_path, mirror), *FAST, "--timeout", "1", "--attempts", "2", ok=False)
    assert slow.exit_code == 1 and "ReadTimeout" in slow.output and time.monotonic() - began < 20
    assert not (baseline_folder(tmp_path) / "pubmed26n0001.xml.gz").exists()


def test_a_file_replaced_upstream_after_the_lock_is_refused_naming_both_checksums(tmp_path, mirror):
    recipe = write_recipe(tmp_path, mirror)
    medsnip("fetch", recipe, *FAST)
    old = hashlib.md5(mirror.files["/pubmed/baseline/pubmed26n0001.xml.gz"]).hexdigest()
    replaced = nlm_gzip("pubmed7.xml")
    mirror.put("/pubmed/baseline/pubmed26n0001.xml.gz", replaced)
    (baseline_folder(tmp_path) / "pubmed26n0001.xml.gz").unlink()  # as on another machine, with the same lock
    refused = medsnip("fetch", recipe, *FAST, ok=False)
    assert refused.exit_code == 1 and "changed upstream" in refused.output
    assert old in refused.output and hashlib.md5(replaced).hexdigest() in refused.output
    assert not (baseline_folder(tmp_path) / "pubmed26n0001.xml.gz").exists()
    medsnip("fetch", recipe, *FAST, "--update-lock")
    entry = orjson.loads((tmp_path / "fetched.lock").read_bytes())["files"]["pubmed"]["pubmed26n0001.xml.gz"]
    assert entry["sha256"] == hashlib.sha256(replaced).hexdigest()


def test_update_fetch_applies_only_the_new_update_files_and_is_a_no_op_again(tmp_path, mirror, run_corpusbuild):
    medsnip("fetch", write_recipe(tmp_path, mirror), *FAST)
    corpus = tmp_path / "pubmed"
    result = run_corpusbuild(
        "pubmed", baseline_folder(tmp_path), "--out", corpus, "--shards", 2, "--workers", 1, "--quiet"
    )
    assert result.exit_code == 0, result.output
    updates = tmp_path / "updates"
    listing = f"{mirror.url}/pubmed/updatefiles/"
    first = medsnip("update", corpus, "--pubmed-updates", updates, "--fetch", "--updates-url", listing, "--json")
    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert summary["fetched"] == summary["applied"] == ["pubmed26n0003.xml.gz"]
    assert (updates / "pubmed26n0003.xml.gz").read_bytes() == nlm_gzip(UPDATES["pubmed26n0003.xml.gz"])
    again = json.loads(
        medsnip("update", corpus, "--pubmed-updates", updates, "--fetch", "--updates-url", listing, "--json")
        .stdout.strip()
        .splitlines()[-1]
    )
    assert again["applied"] == [] and again["fetched"] == []
    fetched_files = [r for r in mirror.requests if r[1].endswith("n0003.xml.gz") and r[0] == "GET"]
    assert len(fetched_files) == 1  # fetched once, verified from the lock the second time
    mirror.publish_updates(list(UPDATES))  # the next day's file appears
    third = json.loads(
        medsnip("update", corpus, "--pubmed-updates", updates, "--fetch", "--updates-url", listing, "--json")
        .stdout.strip()
        .splitlines()[-1]
    )
    assert third["applied"] == ["pubmed26n0004.xml.gz"]
    record = orjson.loads((corpus / "build.json").read_bytes())
    assert [Path(i["path"]).name for i in record["inputs"]][-2:] == ["pubmed26n0003.xml.gz", "pubmed26n0004.xml.gz"]


def test_update_fetch_applies_nothing_from_a_file_that_fails_verification(tmp_path, mirror, run_corpusbuild):
    medsnip("fetch", write_recipe(tmp_path, mirror), *FAST)
    corpus = tmp_path / "pubmed"
    run_corpusbuild("pubmed", baseline_folder(tmp_path), "--out", corpus, "--shards", 2, "--workers", 1, "--quiet")
    before = (corpus / "build.json").read_bytes()
    mirror.put("/pubmed/updatefiles/pubmed26n0003.xml.gz", gzip.compress(b"<PubmedArticleSet>", mtime=0), md5="f" * 32)
    refused = medsnip(
        "update",
        corpus,
        "--pubmed-updates",
        tmp_path / "updates",
        "--fetch",
        "--updates-url",
        f"{mirror.url}/pubmed/updatefiles/",
        ok=False,
    )
    assert refused.exit_code == 1 and "Nothing was applied" in refused.output and "f" * 32 in refused.output
    assert (corpus / "build.json").read_bytes() == before
    assert not (tmp_path / "updates" / "pubmed26n0003.xml.gz").exists()


def test_a_release_archive_is_fetched_pinned_and_its_members_unpacked_flat(tmp_path, mirror):
    """`archive = URL` with `members`: the archive kept apart (in .archives/), the matching members written into the
    source's folder by name, the archive pinned in the lock; a second run fetches and unpacks nothing again."""
    import io
    import zipfile

    from conftest import SAMPLES

    books = sorted((SAMPLES / "textbooks" / "books").glob("*.txt"))[:3]
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as handle:
        for book in books:
            handle.writestr(f"data_clean/textbooks/en/{book.name}", book.read_bytes())
        handle.writestr("data_clean/questions/US/test.jsonl", "{}\n")
    mirror.files["/release/data_clean.zip"] = archive.getvalue()
    recipe = tmp_path / "books.toml"
    recipe.write_text(
        f"""
[[sources]]
kind = "textbooks"
inputs = ["{tmp_path / "books"}"]

[sources.publisher]
archive = "{mirror.url}/release/data_clean.zip"
members = "data_clean/textbooks/en/*.txt"
"""
    )
    medsnip("fetch", recipe, *FAST)
    assert sorted(p.name for p in (tmp_path / "books").glob("*.txt")) == [b.name for b in books]
    assert all((tmp_path / "books" / b.name).read_bytes() == b.read_bytes() for b in books)
    assert (tmp_path / "books" / ".archives" / "data_clean.zip").read_bytes() == archive.getvalue()
    entry = orjson.loads((tmp_path / "books.lock").read_bytes())["files"]["textbooks"]["data_clean.zip"]
    assert entry["sha256"] == hashlib.sha256(archive.getvalue()).hexdigest()
    again = json.loads(medsnip("fetch", recipe, *FAST, "--json").stdout.strip().splitlines()[-1])
    assert again["fetched"] == 0 and again["files"] == 1
