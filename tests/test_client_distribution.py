"""`medsnip-client` (client/build_client.py) installed into a fresh virtual environment beside MedRAG's pinned
pyserini 0.22.1 and faiss-cpu 1.7.4, as in MedRAG's own environment: it changes neither, and from there it queries
a real searchd, found through $SEARCHD_ADDRESS, through SearchClient and MedRAG's RetrievalSystem and DocExtracter.
The packages come from the registry (PyPI), as `make setup`'s do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv

import pytest

from conftest import REPO

MEDRAG_PINS = ["pyserini==0.22.1", "faiss-cpu==1.7.4"]
QUERY = """
import json
from searchd.client import SearchClient
from searchd.runners.medrag import DocExtracter, RetrievalSystem
hits = SearchClient().search("metformin and heart failure", k=3).hits
system = RetrievalSystem("BM25", "PubMedQA", "./corpus", cache=False, HNSW=False, corpora={"PubMedQA": ("pubmedqa",)})
snippets, scores = system.retrieve("metformin and heart failure", k=3, rrf_k=100)
extracted = DocExtracter(db_dir="./corpus", cache=True, corpus_name="PubMedQA").extract([s["id"] for s in snippets])
print(json.dumps({"hits": [h.id for h in hits], "medrag": [s["id"] for s in snippets], "extracted": extracted}))
"""


def freeze(python) -> dict[str, str]:
    lines = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    pins = (line.replace(" @ ", "==", 1) for line in lines.splitlines())  # a wheel from a file: "name @ file://"
    return dict(line.split("==", 1) for line in pins if "==" in line)


@pytest.fixture
def server(search_root_server):
    return search_root_server[1]


def test_the_client_installs_beside_medrags_pins_without_changing_them_and_queries_searchd(server, tmp_path):
    built = subprocess.run(
        [sys.executable, REPO / "client" / "build_client.py", "--out", tmp_path / "dist"],
        capture_output=True,
        text=True,
        check=True,
    )
    wheel = built.stdout.strip().splitlines()[-1]
    venv.create(tmp_path / "medrag-env", with_pip=True)
    python = str(tmp_path / "medrag-env" / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", *MEDRAG_PINS], check=True, timeout=600)
    before = freeze(python)
    assert before["pyserini"] == "0.22.1" and before["faiss-cpu"] == "1.7.4"
    subprocess.run([*pip, wheel], check=True, timeout=600)
    after = freeze(python)
    assert {name: after.get(name) for name in before} == before  # nothing MedRAG pinned was changed
    assert "torch" not in after and "pyserini" in after and "medsnip-client" in after
    env = {**os.environ, "SEARCHD_ADDRESS": server}
    ran = subprocess.run([python, "-c", QUERY], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    answer = json.loads(ran.stdout)
    assert len(answer["hits"]) == 3 and len(answer["medrag"]) == 3
    assert [e["id"] for e in answer["extracted"]] == answer["medrag"] and all(e["content"] for e in answer["extracted"])
