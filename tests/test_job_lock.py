"""`medsnip update` and `medsnip prune` exclude each other on a corpus folder (prune once deleted the
generation an update was writing): whichever comes second is refused with the holder named, and a
killed holder (SIGKILL) leaves nothing locked."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from click.testing import CliRunner

from medsnip.joblock import folder_job
from pipeline.cli import main as medsnip_main


def test_update_and_prune_exclude_each_other_and_a_killed_holder_frees_the_folder(
    tmp_path, update_chain, run_corpusbuild
):
    corpus = tmp_path / "corpus"
    built = run_corpusbuild("pubmed", update_chain["baseline"], "--out", corpus, "--shards", 1, "--quiet")
    assert built.exit_code == 0, built.output
    published = (corpus / "build.json").read_bytes()

    with folder_job(corpus, "update"):  # an update under way
        pruned = CliRunner().invoke(medsnip_main, ["prune", str(corpus)])
        assert pruned.exit_code == 1 and "medsnip update (pid" in pruned.output and "run prune again" in pruned.output
    with folder_job(corpus, "prune"):  # a prune under way
        updated = CliRunner().invoke(
            medsnip_main, ["update", str(corpus), "--pubmed-updates", str(update_chain["n1016"])]
        )
        assert updated.exit_code == 1 and "medsnip prune (pid" in updated.output
        assert (corpus / "build.json").read_bytes() == published

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from pathlib import Path; from medsnip.joblock import folder_job\n"
                "with folder_job(Path(sys.argv[1]), 'update'):\n    print('held', flush=True); time.sleep(120)"
            ),
            str(corpus),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    assert CliRunner().invoke(medsnip_main, ["prune", str(corpus)]).exit_code == 1
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    time.sleep(0.1)
    assert CliRunner().invoke(medsnip_main, ["prune", str(corpus)]).exit_code == 0


def test_an_index_build_waits_for_no_one_and_never_interleaves(tmp_path, update_chain, run_corpusbuild):
    """`indexer store|bm25|dense` take the corpus folder's job lock too: while an update (or another index
    build) holds it, a second build is refused at once with the holder named, and nothing of the folder
    changes; once free, the build runs."""
    from indexer.cli import main as indexer_main

    corpus = tmp_path / "corpus"
    built = run_corpusbuild("pubmed", update_chain["baseline"], "--out", corpus, "--shards", 1, "--quiet")
    assert built.exit_code == 0, built.output
    with folder_job(corpus, "update"):
        for stage in ("store", "bm25"):
            refused = CliRunner().invoke(indexer_main, [stage, str(corpus)])
            assert refused.exit_code != 0 and "medsnip update (pid" in refused.output, refused.output
            assert not (corpus / stage).exists() and not list(corpus.glob(f".{stage}.tmp-*"))
    assert CliRunner().invoke(indexer_main, ["store", str(corpus)]).exit_code == 0
    assert (corpus / "store" / "build.json").is_file()
