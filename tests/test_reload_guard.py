"""`searchd reload` and `medsnip update --reload-pid` signal only a searchd: a pid file left by a killed
searchd (its pid now another program's) or a wrong --reload-pid sends nothing and says why; the other
process lives on."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from pipeline.cli import main as medsnip_main
from searchd.cli import main as searchd_main


def test_a_pid_that_is_not_a_searchd_is_never_signalled(tmp_path, update_chain, run_corpusbuild):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        pid_file = tmp_path / "searchd.pid"
        pid_file.write_text(f"{bystander.pid}\n{tmp_path / 'root'}\n")  # what a killed searchd leaves
        result = CliRunner().invoke(searchd_main, ["reload", "--pid-file", str(pid_file)])
        assert result.exit_code == 1 and f"process {bystander.pid} is not a searchd serve" in result.output
        assert "nothing was signalled" in result.output

        corpus = tmp_path / "corpus"
        built = run_corpusbuild("pubmed", update_chain["baseline"], "--out", corpus, "--shards", 1, "--quiet")
        assert built.exit_code == 0, built.output
        arguments = [
            "update",
            str(corpus),
            "--pubmed-updates",
            str(update_chain["n1016"]),
            "--reload-pid",
            str(bystander.pid),
        ]
        result = CliRunner().invoke(medsnip_main, arguments)
        assert result.exit_code == 1 and f"--reload-pid: process {bystander.pid} is not a searchd" in result.output
        assert bystander.poll() is None  # never signalled
    finally:
        bystander.kill()
        bystander.wait()
