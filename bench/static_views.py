"""768-dimension static encoders of real text for the compressed-index benchmark (bench/compressed_dense.py).

No 768-d transformer can be installed on this offline machine, and a transformer encodes ~20 snippets/s
on its CPU, so 2M real-text vectors of MedCPT's width come from the bundled MiniLM's token table seen
two ways at once. Each of three models is a model2vec static model whose row for a token is two
384-d views of it side by side, each centred, cut of its top 10 directions and SIF-weighted on real
PubMed text (indexer/static_distill.post_process), then scaled to the same mean row norm:

- "mean+input": MiniLM's mean-pooled output for the token alone, beside its input word embedding;
- "cls+input": the [CLS] output for the token alone, beside its input word embedding;
- "mean+cls": the mean-pooled output beside the [CLS] output.

So three encoders whose vectors differ and whose rankings overlap but are not the same, as MedCPT's,
Contriever's and SPECTER's do, with 768 dimensions that are not a copy of 384 (PQ's sub-quantizers see
two different views). What they are not: those models' rankings, or a transformer's encoding cost.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

VIEWS = {"mean+input": ("mean", "input"), "cls+input": ("cls", "input"), "mean+cls": ("mean", "cls")}


def _token_tables(model_dir: Path) -> dict[str, np.ndarray]:
    import torch
    from transformers import AutoModel

    from indexer.dense.static_distill import token_vectors

    tables = {"mean": token_vectors(model_dir, "mean"), "cls": token_vectors(model_dir, "cls")}
    with torch.inference_mode():
        model = AutoModel.from_pretrained(model_dir)
        tables["input"] = model.embeddings.word_embeddings.weight.detach().numpy().astype(np.float32)
    return tables


def make_static_views(work: Path, texts: list[str]) -> dict[str, Path]:
    """The three 768-d static models under `work` (made once; token frequencies from `texts`)."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    from indexer.dense.static_distill import post_process, token_frequencies
    from medsnip.encoders import bundled_minilm_path, resolve_model_dir

    paths = {name: work / f"static-{name.replace('+', '-')}-768" for name in VIEWS}
    if all((path / "model.safetensors").is_file() for path in paths.values()):
        return paths
    model_dir = resolve_model_dir(bundled_minilm_path())
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tables = _token_tables(model_dir)
    frequency = token_frequencies(tokenizer, texts, len(tables["input"]))
    processed = {}
    for name, table in tables.items():
        rows = post_process(table[: len(frequency)], frequency, remove_components=10)
        processed[name] = rows / float(frequency @ np.linalg.norm(rows, axis=1))  # equal weight for each view
    for name, (left, right) in VIEWS.items():
        path = paths[name]
        if (path / "model.safetensors").is_file():
            continue
        vectors = np.concatenate([processed[left], processed[right]], axis=1).astype(np.float32)
        model = StaticModel(vectors, tokenizer, normalize=True, base_model_name=f"minilm-{name}", max_length=None)
        temp = path.with_name(path.name + ".tmp")
        model.save_pretrained(temp)
        os.replace(temp, path)
    return paths


def static_dense_command(corpus: Path, model: Path, factory: str | None = None, out: Path | None = None) -> list:
    """`python -m indexer.cli dense` over `corpus` with one of these static views (unit-length mean of token
    vectors, no transformer) into `out` (default CORPUS/dense-static), with the batch size and index
    factory of the scale benches when a factory is given."""
    args = ["--model", model, "--pooling", "static", "--normalize", "--max-length", 512, "--query-max-length", 512]
    if factory is not None:
        args += ["--batch-size", 4096, "--index-factory", factory]
    return ["-m", "indexer.cli", "dense", corpus, *args, "--out", out or corpus / "dense-static"]
