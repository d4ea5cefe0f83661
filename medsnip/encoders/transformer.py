"""A transformer encoder (transformers' AutoModel + pooling) on a CPU or a GPU, in the precision asked."""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from medsnip.encoders.spec import POOLINGS, resolve_model_dir

_THREADS_LOCK = threading.Lock()  # torch's thread count is process-wide: one encode_independent changes it at a time

DTYPES = ("auto", "float16", "bfloat16", "float32")

# encode_independent pads each text to the next multiple of this many tokens. Smaller multiples waste less
# compute on padding but split a call into more, smaller batches (one per padded length). MiniLM on 2 CPU
# cores, BioASQ questions, ms per call at multiples of 16 / 8 / 4 / 2 / 1: 64 questions 194 / 184 / 167 /
# 183 / 221; 512 questions 1,512 / 1,302 / 1,173 / 1,186 / 1,141; 4,096 questions 12,176 / 10,811 / 9,629 /
# 9,121 / 8,648; 8 questions 34.9 / 34.6 / 37.6 / 44.4 / 49.9. Part of what a stored vector is
# (refkit.vector_cache names its file by it): changing it moves vectors by ~5e-7.
PAD_MULTIPLE = 4


def prefer_passive_openmp() -> None:
    """OpenMP threads that sleep when idle instead of spinning, unless the user chose (OMP_WAIT_POLICY).

    A process that encodes on a CPU shares its cores (the indexer's feeders and JVM, searchd's Lucene
    threads, refkit's searchd): torch's OpenMP default spins after each operation, burning CPU the others
    need. MiniLM encoding 160 abstracts beside one busy core took 21% more CPU and 12% more time spinning;
    alone, the same either way. Read when torch loads its OpenMP runtime, so it is set on import here."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


prefer_passive_openmp()


def resolve_dtype(dtype: str, device: str, config) -> str:
    """The precision a transformer runs in: float32 on CPUs (half precision there is slow, or missing);
    on a GPU, `auto` is half precision: bfloat16 where the model's config says it was trained in it,
    else float16; an explicit float32 (`--fp32`) opts out."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if device == "cpu":
        return "float32"
    if dtype != "auto":
        return dtype
    trained = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    return "bfloat16" if "bfloat16" in str(trained) else "float16"


def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def quiet_model_loading() -> None:
    """transformers' own progress bars ("Loading weights") off: medsnip's commands report their progress
    themselves, and a bar per model load fills a log. MEDSNIP_VERBOSE=1 keeps them."""
    import os

    if not os.environ.get("MEDSNIP_VERBOSE"):
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()


class TextEncoder:
    """One transformer + pooling; batches sorted by length so little compute goes to padding.

    `truncated` counts the texts this encoder has cut at `max_length` tokens (a caller that wants a
    count per call reads it before and after)."""

    def __init__(
        self, model: str, pooling: str, max_length: int, normalize: bool, device: str = "auto", dtype: str = "float32"
    ):
        import torch
        from transformers import AutoModel, AutoTokenizer

        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.model_dir = resolve_model_dir(model)
        self.device = pick_device(device)
        quiet_model_loading()
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        if pooling == "last-token" and self.tokenizer.pad_token is None:  # decoders often have none
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModel.from_pretrained(self.model_dir).to(self.device).eval()
        self.dtype = resolve_dtype(dtype, self.device, self.model.config)
        self.model = self.model.to(getattr(torch, self.dtype))
        self.pooling, self.max_length, self.normalize = pooling, max_length, normalize
        self.truncated = 0
        self.last_cut: list[bool] = []  # which texts of the last encode call were cut at max_length
        self._torch = torch

    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    def encode(self, texts: list, batch_size: int = 32) -> np.ndarray:
        """float32 vectors, one per text (a text may be a (first, second) sentence pair)."""
        torch = self._torch
        if not texts:
            self.last_cut = []
            return np.zeros((0, self.dimension), dtype=np.float32)
        self.last_cut = [length > self.max_length for length in self._token_counts(texts)]
        self.truncated += sum(self.last_cut)
        lengths = [len(t[0]) + len(t[1]) if isinstance(t, tuple) else len(t) for t in texts]
        order = np.argsort(-np.asarray(lengths), kind="stable")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch_index = order[start : start + batch_size]
                out[batch_index] = self._embed(self._tokenize([texts[i] for i in batch_index], self.max_length))
        return out

    def encode_independent(self, texts: list[str], batch_size: int = 64, bucket: int = PAD_MULTIPLE) -> np.ndarray:
        """float32 vectors whose every bit depends on the text alone, not on the texts batched with it.

        Padding is what couples them: a batch is padded to its longest text, and attention over a
        padded sequence takes another code path, which moves results by ~5e-7. Here a text is always
        padded to the next multiple of `bucket` tokens and batches never mix padded lengths, so each
        text meets exactly the same arithmetic whatever else is queried with it (rows of a batch do not
        interact). A search server micro-batches concurrent queries; this keeps their scores and ranks
        reproducible to the last printed digit.

        On a CPU each batch runs on one intra-op thread: with several, how torch splits a matrix product
        between threads depends on the batch's row count, and on some CPUs (AVX-512 Xeons) that changes
        the last bits of a row (measured: 4 of 30 queries differed between alone and batched with two
        threads, none with one). The cores are used by running batches side by side instead, one per
        thread torch was set to use; a single batch (a handful of queries) runs ~1.4x slower than on
        two intra-op threads."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        full = self._token_counts(texts)
        self.truncated += sum(length > self.max_length for length in full)
        lengths = [min(length, self.max_length) for length in full]
        padded = [min(-(-n // bucket) * bucket, self.max_length) for n in lengths]
        order = sorted(range(len(texts)), key=lambda i: (padded[i], i))
        batches = []  # tokenized here, in order: a fast tokenizer must not be called from two threads
        start = 0
        while start < len(order):
            size, stop = padded[order[start]], start
            while stop < len(order) and stop - start < batch_size and padded[order[stop]] == size:
                stop += 1
            batch_index = order[start:stop]
            batches.append((batch_index, self._tokenize([texts[i] for i in batch_index], size, pad_to=size)))
            start = stop

        def embed(batch):
            with self._torch.inference_mode():  # thread-local: entered in the thread that computes
                return batch[0], self._embed(batch[1])

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        with self._one_thread_on_cpu() as side_by_side:
            if side_by_side > 1:
                batches = _balanced(batches, side_by_side)
            if side_by_side > 1 and len(batches) > 1:
                embedded = list(self._side_by_side(side_by_side).map(embed, batches))
            else:
                embedded = map(embed, batches)
            for batch_index, vectors in embedded:
                out[batch_index] = vectors
        return out

    def _side_by_side(self, workers: int) -> ThreadPoolExecutor:
        """The threads batches run on side by side, kept for the encoder's life: new threads for every call would
        each take new per-thread memory from torch and the allocator (a serving process grew by hundreds of MiB)."""
        pool = getattr(self, "_side_pool", None)
        if pool is None or pool._max_workers != workers:
            if pool is not None:
                pool.shutdown(wait=False)
            pool = self._side_pool = ThreadPoolExecutor(workers, thread_name_prefix="encoder")
        return pool

    @contextlib.contextmanager
    def _one_thread_on_cpu(self):
        """torch's intra-op threads set to one for the block when this encoder runs on a CPU (restored
        after; one block at a time in the process, as the setting is the process's); yields the number
        it was set to before (1 on a GPU), the batches the block may run side by side."""
        torch = self._torch
        if self.device != "cpu":
            yield 1
            return
        with _THREADS_LOCK:  # also when already one: another block's restore must not land inside this one
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                yield threads
            finally:
                torch.set_num_threads(threads)

    def _token_counts(self, texts: list) -> list[int]:
        """Tokens each text has before truncation (with special tokens, and the EOS last-token pooling
        appends)."""
        if isinstance(texts[0], tuple):
            ids = self.tokenizer([t[0] for t in texts], [t[1] for t in texts], verbose=False)["input_ids"]
        else:
            ids = self.tokenizer(list(texts), verbose=False)["input_ids"]
        if self.pooling == "last-token":
            eos = self.tokenizer.eos_token_id
            return [len(seq) + (not seq or seq[-1] != eos) for seq in ids]
        return [len(seq) for seq in ids]

    def _tokenize(self, batch: list, max_length: int, pad_to: int | None = None):
        """A batch as model inputs, cut at `max_length` tokens, padded to its longest text (or `pad_to`)."""
        padding = "max_length" if pad_to else True
        if isinstance(batch[0], tuple):
            return self.tokenizer(
                [t[0] for t in batch],
                [t[1] for t in batch],
                truncation="longest_first",
                max_length=max_length,
                padding=padding,
                return_tensors="pt",
            )
        if self.pooling != "last-token":
            return self.tokenizer(batch, truncation=True, max_length=max_length, padding=padding, return_tensors="pt")
        # a decoder's text vector is the state of its last token, which must be EOS (as E5-Mistral and
        # Qwen3-Embedding are trained): cut one token early and append it where the tokenizer did not
        eos = self.tokenizer.eos_token_id
        ids = self.tokenizer(batch, truncation=True, max_length=max_length - 1)["input_ids"]
        ids = [seq if seq and seq[-1] == eos else [*seq, eos] for seq in ids]
        return self.tokenizer.pad({"input_ids": ids}, padding=padding, max_length=pad_to, return_tensors="pt")

    def _embed(self, tokens) -> np.ndarray:
        """Pooled (and, if configured, normalised) vectors of one tokenised batch."""
        return self.forward({key: value.to(self.device) for key, value in tokens.items()}).cpu().numpy()

    def forward(self, inputs: dict):
        """Pooled (and, if configured, normalised) float32 vectors of one batch of model inputs already
        on the device, left on the device (a caller on a GPU copies them back when it chooses)."""
        torch = self._torch
        hidden = self.model(**inputs).last_hidden_state
        if self.pooling == "cls":
            vectors = hidden[:, 0]
        elif self.pooling == "last-token":
            if self.tokenizer.padding_side == "left":
                vectors = hidden[:, -1]
            else:
                last = inputs["attention_mask"].sum(1) - 1
                vectors = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        else:
            mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        vectors = vectors.float()
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return vectors


def _balanced(batches: list, workers: int, least_rows: int = 4) -> list:
    """Tokenized (row index, inputs) batches split by rows into pieces of about equal work (rows x padded
    length), at least two per worker where the rows allow, largest first: the workers that run them side by
    side then finish together, where whole length buckets (one of 40 short questions, one of 6 long ones)
    left one thread idle. Each piece runs on one intra-op thread, where a row's vector does not depend on the
    rows beside it (encode_independent), so splitting changes no bit."""
    work = [len(index) * inputs["input_ids"].shape[1] for index, inputs in batches]
    share = max(1.0, sum(work) / (2 * workers))
    pieces = []
    for (index, inputs), cost in zip(batches, work, strict=True):
        parts = max(1, min(len(index) // least_rows, round(cost / share)))
        bounds = [len(index) * part // parts for part in range(parts + 1)]
        for start, stop in zip(bounds, bounds[1:], strict=False):
            pieces.append((index[start:stop], {key: value[start:stop] for key, value in inputs.items()}))
    return sorted(pieces, key=lambda piece: -len(piece[0]) * piece[1]["input_ids"].shape[1])
