"""The CUDA path of `indexer dense` end to end (`pytest -m cuda`; skipped where torch sees no GPU): the
feeding pipeline into pinned tensors and non_blocking copies, half precision by default and recorded,
`--fp32` on request, vectors that agree with the CPU's, and bit-for-bit repeatable runs."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SAMPLES, build_pubmedqa, run_indexer
from medsnip.buildrecord import read_build_record

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory, run_corpusbuild):
    """120 real PubMedQA abstracts in 3 shards, embedded on the CPU as the reference."""
    folder = tmp_path_factory.mktemp("cuda")
    lines = (SAMPLES / "ir" / "pubmedqa-beir" / "corpus.jsonl").read_bytes().splitlines(keepends=True)
    corpus = build_pubmedqa(run_corpusbuild, lines[:120], folder / "corpus.jsonl", folder / "pubmedqa", 3)
    run_indexer("dense", corpus, "--preset", "minilm", "--device", "cpu", "--out", corpus / "dense-cpu")
    return corpus


def _vectors(folder) -> np.ndarray:
    return np.concatenate([np.load(path).astype(np.float32) for path in sorted(folder.glob("emb-*.npy"))])


def test_gpu_build_defaults_to_half_precision_and_agrees_with_the_cpu(corpus_dir, tmp_path):
    out = tmp_path / "dense-gpu"
    run_indexer("dense", corpus_dir, "--preset", "minilm", "--device", "cuda", "--out", out)
    record = read_build_record(out)
    assert record["params"]["dtype"] == "float16" and record["params"]["feeders"] >= 1
    assert record["params"]["batch_plan"]["tokens"] == 65536
    gpu, cpu = _vectors(out), _vectors(corpus_dir / "dense-cpu")
    cosine = (gpu * cpu).sum(1) / (np.linalg.norm(gpu, axis=1) * np.linalg.norm(cpu, axis=1))
    assert cosine.min() > 0.999
    again = tmp_path / "dense-gpu-again"
    run_indexer("dense", corpus_dir, "--preset", "minilm", "--device", "cuda", "--out", again)
    assert np.array_equal(_vectors(again), gpu)  # same device, dtype and batch plan: the same bits


def test_fp32_on_gpu_is_recorded_and_close_to_the_cpu(corpus_dir, tmp_path):
    out = tmp_path / "dense-fp32"
    run_indexer("dense", corpus_dir, "--preset", "minilm", "--device", "cuda", "--fp32", "--feeders", 2, "--out", out)
    assert read_build_record(out)["params"]["dtype"] == "float32"
    assert np.abs(_vectors(out) - _vectors(corpus_dir / "dense-cpu")).max() < 2e-3
