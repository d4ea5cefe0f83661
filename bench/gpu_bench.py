"""The GPU half of `make bench` for `indexer dense`: end to end against the card's forward-only ceiling
and sentence-transformers `encode`, on the same texts, the same machine, in the same run.

Runs only where torch sees a CUDA device (`python bench/gpu_bench.py --out FILE`); it writes a Markdown
section that `bench/splice.py` puts into docs/benchmarks.md. The device is named in the section.

- Models: BERT-base shape (MedCPT, BGE-base, Contriever: 12 layers, 768 wide, 512 tokens) and MiniLM-L6
  shape (6 layers, 384 wide, 256 tokens), random weights saved by transformers beside the bundled
  MiniLM's WordPiece tokenizer (bert-base-uncased's vocabulary): speed depends on shapes, not weights,
  and nothing has to be downloaded.
- Corpus: real PubMed records repeated under new PMIDs (bench/pubmed_scaleup.py), built by
  `corpusbuild pubmed`, the store built before timing (so `indexer dense` times embedding and FAISS).
- Forward-only ceiling: the very batches `indexer dense` forms (same windows, same BatchPlan), their
  token ids padded and already on the device before the clock starts; only the model's forward and the
  pooling are timed.
- sentence-transformers: `SentenceTransformer(folder).half().encode(texts, batch_size=256)`, the same
  max length.
- GPU busy: `nvidia-smi` utilisation sampled every 100 ms while `indexer dense` runs, averaged over the
  samples from the first busy one to the last (model loading and process start-up are outside).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from pubmed_scaleup import write_scaled_pubmed  # noqa: E402

RECORDS_PER_FILE = 30_000
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
SHAPES = {
    "BERT-base": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_length": 512,
    },
    "MiniLM-L6": {
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "max_length": 256,
    },
}


def random_model(folder: Path, shape: dict, tokenizer_dir: Path) -> Path:
    """A BERT of `shape` with random weights (seeded), saved with the bundled WordPiece tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    if (folder / "config.json").is_file():
        return folder
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522, max_position_embeddings=512, **{k: v for k, v in shape.items() if k != "max_length"}
    )
    BertModel(config).eval().save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copy(tokenizer_dir / name, folder / name)
    return folder


def _scaled_file(args: tuple) -> str:
    sources, path, first = args
    write_scaled_pubmed([Path(s) for s in sources], Path(path), RECORDS_PER_FILE, first)
    return path


def build_corpus(work: Path, files: int) -> Path:
    """`files` PubMed files of RECORDS_PER_FILE real records under new PMIDs, through corpusbuild and
    the store."""
    corpus = work / "corpus"
    if (corpus / "build.json").is_file() and (corpus / "store").exists():
        return corpus
    sources = sorted(str(p) for p in (REPO / "samples" / "pubmed").iterdir())
    jobs = [
        (sources, str(work / f"pubmed25n{n:04d}.xml.gz"), 50_000_000 + n * RECORDS_PER_FILE)
        for n in range(1, files + 1)
    ]
    with ProcessPoolExecutor(min(files, os.cpu_count() or 1)) as pool:
        inputs = list(pool.map(_scaled_file, jobs))
    run(
        [
            sys.executable,
            "-m",
            "corpusbuild",
            "pubmed",
            *inputs,
            "--out",
            str(corpus),
            "--shards",
            "8",
            "--workers",
            str(min(files, os.cpu_count() or 1)),
            "--quiet",
        ]
    )
    run([sys.executable, "-m", "indexer.cli", "store", str(corpus)])
    return corpus


def run(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def corpus_texts(corpus: Path) -> list[str]:
    from medsnip.corpus import Corpus

    return [
        orjson.loads(line)["contents"]
        for shard in Corpus.open(corpus).shards
        for line in shard.path.read_bytes().splitlines()
    ]


class GpuSampler:
    """`nvidia-smi` utilisation every 100 ms in the background while a command runs."""

    def __init__(self):
        self.samples: list[int] = []
        self._process = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100"],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._process.stdout:
            if line.strip().isdigit():
                self.samples.append(int(line.strip()))

    def stop(self) -> dict:
        self._process.terminate()
        self._process.wait()
        self._thread.join(timeout=5)
        busy = [i for i, value in enumerate(self.samples) if value > 0]
        window = self.samples[busy[0] : busy[-1] + 1] if busy else []
        return {
            "busy_mean": statistics.mean(window) if window else 0.0,
            "samples": len(window),
            "all_mean": statistics.mean(self.samples) if self.samples else 0.0,
        }


def indexer_dense(corpus: Path, model: Path, max_length: int, out: Path, *extra: str) -> dict:
    """`indexer dense` end to end (shards in, vectors and FAISS out) with the GPU sampled meanwhile."""
    shutil.rmtree(out, ignore_errors=True)
    sampler = GpuSampler()
    command = [
        sys.executable,
        "-m",
        "indexer.cli",
        "dense",
        str(corpus),
        "--model",
        str(model),
        "--pooling",
        "mean",
        "--max-length",
        str(max_length),
        "--no-normalize",
        "--device",
        "cuda",
        "--out",
        str(out),
    ]
    wall = run([*command, *extra])
    gpu = sampler.stop()
    record = orjson.loads((out / "build.json").read_bytes())
    seconds = record["run"]["seconds"]
    return {
        "wall": wall,
        "embed": seconds["embed"],
        "index": seconds["index"],
        "total": seconds["total"],
        "vectors": record["counts"]["vectors"],
        "dtype": record["params"]["dtype"],
        "feeders": record["params"]["feeders"],
        "plan": record["params"]["batch_plan"],
        **gpu,
    }


def forward_ceiling(model: Path, max_length: int, texts: list[str], plan_dict: dict, repeats: int = 2) -> float:
    """Seconds of the model's forward and pooling alone over the batches `indexer dense` forms, with the
    padded token ids already on the device (best of `repeats`)."""
    import torch

    from indexer.dense.feeding import BatchPlan, backend_tokenizer, pad_batch, tokenize_window, tokenizer_settings
    from medsnip.encoders import TextEncoder

    encoder = TextEncoder(str(model), "mean", max_length, normalize=False, device="cuda", dtype="auto")
    settings = tokenizer_settings(encoder)
    backend = backend_tokenizer(settings)
    plan = BatchPlan(**plan_dict)
    pad_id = encoder.tokenizer.pad_token_id
    batches = []
    for start in range(0, len(texts), plan.window):
        window = tokenize_window(texts[start : start + plan.window], backend, settings)
        for rows, padded in plan.batches(window.lengths, max_length):
            host = pad_batch(window, rows, padded, pad_id, False, lambda name, shape: np.empty(shape, dtype=np.int64))
            batches.append({name: torch.from_numpy(array).to("cuda") for name, array in host.items()})
    out = torch.empty((len(texts), encoder.dimension), dtype=torch.float32, device="cuda")
    best = float("inf")
    with torch.inference_mode():
        for inputs in batches[:3]:  # warm-up: kernels chosen, allocator grown
            encoder.forward(inputs)
        for _ in range(repeats):
            torch.cuda.synchronize()
            started = time.perf_counter()
            row = 0
            for inputs in batches:
                rows = inputs["input_ids"].shape[0]
                out[row : row + rows] = encoder.forward(inputs)
                row += rows
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - started)
    del batches, out, encoder
    torch.cuda.empty_cache()
    return best


def sentence_transformers_seconds(model: Path, max_length: int, texts: list[str], batch_size: int = 256) -> float:
    """`encode` of sentence-transformers in half precision, mean pooling, the same max length."""
    import torch
    from sentence_transformers import SentenceTransformer

    model_st = SentenceTransformer(str(model), device="cuda")
    model_st.max_seq_length = max_length
    model_st.half()
    model_st.encode(texts[:1024], batch_size=batch_size)  # warm-up
    torch.cuda.synchronize()
    started = time.perf_counter()
    model_st.encode(texts, batch_size=batch_size, convert_to_numpy=True)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    del model_st
    torch.cuda.empty_cache()
    return seconds


def device_name() -> str:
    import torch

    props = torch.cuda.get_device_properties(0)
    return f"{props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}"


def gpu_section(work: Path, files: int, with_compile: bool, tokenizer_dir: Path) -> tuple[list[str], dict]:
    work.mkdir(parents=True, exist_ok=True)
    corpus = build_corpus(work, files)
    texts = corpus_texts(corpus)
    results: dict = {"device": device_name(), "snippets": len(texts), "cpus": os.cpu_count()}
    for name, shape in SHAPES.items():
        model = random_model(work / "models" / name, shape, tokenizer_dir)
        max_length = shape["max_length"]
        row = results[name] = {}
        row["dense"] = indexer_dense(corpus, model, max_length, work / f"dense-{name}")
        print(name, "indexer dense", row["dense"], flush=True)
        if with_compile and name == "BERT-base":
            row["dense_compile"] = indexer_dense(corpus, model, max_length, work / f"dense-{name}-c", "--compile")
            print(name, "indexer dense --compile", row["dense_compile"], flush=True)
        row["ceiling"] = forward_ceiling(model, max_length, texts, row["dense"]["plan"])
        print(name, "forward ceiling", row["ceiling"], flush=True)
        row["st"] = sentence_transformers_seconds(model, max_length, texts)
        print(name, "sentence-transformers", row["st"], flush=True)
    tokens = _mean_tokens(work / "models" / "BERT-base", texts[:5000])
    return _markdown(results, tokens, files), results


def _mean_tokens(model: Path, texts: list[str]) -> float:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    return statistics.mean(len(ids) for ids in tokenizer(texts, truncation=True, max_length=512)["input_ids"])


def _markdown(results: dict, tokens: float, files: int) -> list[str]:
    n = results["snippets"]
    lines = [
        "## indexer dense on a GPU: end to end against the forward-only ceiling and sentence-transformers",
        "",
        f"- device: {results['device']}, {results['cpus']} CPU cores",
        f"- {n:,} real PubMed snippets ({files} files of {RECORDS_PER_FILE:,} real records under new PMIDs, "
        f"8 shards), mean {tokens:.0f} tokens; random weights of real shapes with bert-base-uncased's WordPiece "
        "(speed depends on shapes, not weights); half precision (the GPU default)",
        "- end to end: `indexer dense` from shard JSON to vectors and FAISS files (build.json's embed + index "
        "seconds, the store built beforehand); wall: the whole process, model loading included",
        "- forward-only ceiling: the same batches (same windows and batch plan), padded ids already on the "
        "device, only forward and pooling timed (best of 2)",
        "- sentence-transformers: `SentenceTransformer(folder).half().encode(texts, batch_size=256)`",
        "",
        "| model | path | seconds | snippets/s | vs ceiling | GPU busy |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name in SHAPES:
        row = results[name]
        ceiling = n / row["ceiling"]
        runs = [("`indexer dense` (embed + index)", row["dense"])]
        if "dense_compile" in row:
            runs.append(("`indexer dense --compile` (embed + index)", row["dense_compile"]))
        for label, dense in runs:
            seconds = dense["embed"] + dense["index"]
            lines.append(
                f"| {name} | {label} | {seconds:.1f} | {n / seconds:,.0f} | {n / seconds / ceiling:.2f}x | "
                f"{dense['busy_mean']:.0f}% |"
            )
            lines.append(
                f"| {name} | the same, process wall | {dense['wall']:.1f} | {n / dense['wall']:,.0f} | "
                f"{n / dense['wall'] / ceiling:.2f}x | {dense['all_mean']:.0f}% |"
            )
        lines.append(f"| {name} | forward-only ceiling | {row['ceiling']:.1f} | {ceiling:,.0f} | 1.00x | |")
        lines.append(
            f"| {name} | sentence-transformers encode | {row['st']:.1f} | {n / row['st']:,.0f} | "
            f"{n / row['st'] / ceiling:.2f}x | |"
        )
    lines.append("")
    for name in SHAPES:
        row = results[name]
        dense = row["dense"]
        seconds = dense["embed"] + dense["index"]
        lines.append(
            f"- {name}: end to end {row['ceiling'] / seconds:.2f}x the ceiling (target ≥ 0.85x), "
            f"{row['st'] / seconds:.2f}x sentence-transformers (target ≥ 3x), GPU busy {dense['busy_mean']:.0f}% "
            f"(target ≥ 85%); {dense['feeders']} feeders, batch plan {dense['plan']['tokens']:,} tokens / "
            f"{dense['plan']['rows']} rows, {dense['dtype']}"
        )
    return lines


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "work" / "gpu")
    parser.add_argument("--out", type=Path, required=True, help="Markdown section written here")
    parser.add_argument("--files", type=int, default=5, help=f"PubMed files of {RECORDS_PER_FILE:,} records")
    parser.add_argument("--compile", action="store_true", help="also time `indexer dense --compile`")
    parser.add_argument("--tokenizer", type=Path, default=None, help="WordPiece tokenizer folder [bundled MiniLM]")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_bench: torch sees no CUDA device; the GPU half of the bench runs only on a GPU machine")
    if args.tokenizer is None:
        from medsnip.encoders import bundled_minilm_path

        args.tokenizer = Path(bundled_minilm_path())
    lines, results = gpu_section(args.work, args.files, args.compile, args.tokenizer)
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
