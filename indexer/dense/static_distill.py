"""A static embedding model distilled from a local transformer, in model2vec's folder format.

Every vocabulary token is run through the transformer on its own ("[CLS] token [SEP]"), pooled the way
the model pools texts, and that vector becomes the token's row; a text's vector is then the mean of its
tokens' rows (`--pooling static`). The rows are then post-processed with token frequencies counted on snippets of
the target corpus (see `post_process`), so that frequent, uninformative tokens weigh less and texts do
not all collapse onto one common direction.

Why: a static model encodes thousands of snippets per second on one CPU core, where the transformer
does ~20. It keeps the transformer's vector space per token but loses everything attention adds (word
order, context, negation), so its rankings are worse; the scale benchmark uses it to get vectors of
real text at millions of snippets, not to measure retrieval quality. model2vec's own `distill` does the
same with PCA and Zipf weights, but pins a transformers release older than the one medsnip runs on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from medsnip.corpus import replace_dir
from medsnip.encoders import resolve_model_dir

SIF_A = 1e-3  # Arora et al.'s smoothing constant


def token_vectors(model_dir: Path, pooling: str = "mean", batch_size: int = 512) -> np.ndarray:
    """One vector per vocabulary id: the transformer's pooled output for that token alone."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    vocabulary = len(tokenizer)
    # the special tokens the model sees around every text (BERT's [CLS] ... [SEP]; a decoder's BOS/EOS)
    first = [t for t in (tokenizer.cls_token_id or tokenizer.bos_token_id,) if t is not None]
    last = [t for t in (tokenizer.sep_token_id or tokenizer.eos_token_id,) if t is not None]
    vectors = np.zeros((vocabulary, model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, vocabulary, batch_size):
            ids = torch.tensor([[*first, token, *last] for token in range(start, min(start + batch_size, vocabulary))])
            hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
            pooled = hidden[:, 0] if pooling == "cls" else hidden.mean(dim=1)
            vectors[start : start + len(ids)] = pooled.numpy()
    return vectors


def token_frequencies(tokenizer, texts: Iterable[str], vocabulary: int, batch_size: int = 4096) -> np.ndarray:
    """p(token) over the tokens of `texts` (0 for unseen tokens)."""
    counts = np.zeros(vocabulary, dtype=np.float64)
    batch: list[str] = []

    def count(batch: list[str]) -> None:
        for encoding in tokenizer.encode_batch(batch, add_special_tokens=False):
            np.add.at(counts, [token for token in encoding.ids if token < vocabulary], 1)

    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            count(batch)
            batch = []
    if batch:
        count(batch)
    return counts / max(counts.sum(), 1)


def post_process(vectors: np.ndarray, frequency: np.ndarray, remove_components: int) -> np.ndarray:
    """Centre the rows on their frequency-weighted mean, project out the top `remove_components`
    principal directions ("all but the top", Mu & Viswanath 2018) and scale each row by its smooth
    inverse frequency. Why: a mean of hundreds of raw token vectors lands near the vocabulary's common
    direction (mean cosine to the centroid 0.97 on the demo's PubMed snippets, where MiniLM's texts have
    0.28), which would make every snippet look alike to an ANN index; after this it is 0.34."""
    centred = vectors - frequency @ vectors
    if remove_components:
        _, _, directions = np.linalg.svd(centred * np.sqrt(frequency)[:, None], full_matrices=False)
        top = directions[:remove_components]
        centred = centred - (centred @ top.T) @ top
    return (centred * (SIF_A / (SIF_A + frequency))[:, None]).astype(np.float32)


def distill(model: str, out: Path, texts: Iterable[str], pooling: str = "mean", remove_components: int = 10) -> Path:
    """Write a model2vec static model distilled from `model` (a local folder or cached hub name) to
    `out`; token frequencies are counted over `texts` (snippets of the kind the model will encode)."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    model_dir = resolve_model_dir(model)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    vectors = token_vectors(model_dir, pooling)
    frequency = token_frequencies(tokenizer, texts, len(vectors))
    vectors = post_process(vectors, frequency, remove_components)
    static = StaticModel(vectors, tokenizer, normalize=True, base_model_name=Path(model).name, max_length=None)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:  # the model appears whole at the end, or not at all (an earlier one is replaced only then)
        static.save_pretrained(temp)
        os.chmod(temp, 0o755)  # mkdtemp makes 0700; models are meant to be shared
        replace_dir(temp, out)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return out
