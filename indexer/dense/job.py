"""One `indexer dense` job as plain options and a function: the command line, recipes (`medsnip build`)
and tests build dense indexes through `run_dense`, so the choice of devices, batch plan and feeders is
made in one place."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from medsnip.buildrecord import read_complete_record
from medsnip.corpus import Corpus
from medsnip.encoders import EncoderSpec


@dataclass(frozen=True)
class DenseJob:
    """Everything a dense index build takes besides its corpus and folder."""

    spec: EncoderSpec
    index_factory: str = "Flat"
    refine: int = 0
    nprobe: int = 0
    metric: str = "ip"
    device: str = "auto"  # one device: auto | cpu | cuda
    devices: str | None = None  # several: auto, or a list such as cuda:0,cuda:1
    batch_size: int | None = None
    batch_tokens: int | None = None
    feeders: int | None = None
    feeder_timeout: float = 300.0
    compile: bool = False
    fp32: bool = False


class DeviceError(ValueError):
    """A device list that names something other than cpu, cuda or cuda:N."""


def device_list(devices: str | None, device: str, runner) -> list[str]:
    """The job's devices as torch device names (Ray actors see their GPU as "cuda")."""
    from medsnip.encoders import pick_device

    if not devices:
        return [pick_device(device)]
    if devices == "auto":
        if runner.name == "ray":
            gpus = int(runner.cluster_resources().get("GPU", 0))
            return ["cuda"] * gpus or ["cpu"]
        import torch

        return [f"cuda:{number}" for number in range(torch.cuda.device_count())] or ["cpu"]
    found = [name.strip() for name in devices.split(",") if name.strip()]
    bad = [name for name in found if not re.fullmatch(r"cpu|cuda(:\d+)?", name)]
    if bad or not found:
        raise DeviceError(f"not a device: {', '.join(bad) or repr(devices)} (cpu, cuda or cuda:N)")
    return found


def feeding_for(encoder, devices: list[str], job: DenseJob):
    """(batch size, indexer.dense.Feeding) from the job and the devices' kind: GPUs take big batches by
    a token budget and feeder processes on the cores the devices leave free."""
    from indexer.dense.device_loop import compile_model as compile_encoder
    from indexer.dense.embedding import Feeding, rows_budget
    from indexer.dense.feeding import BatchPlan
    from medsnip.encoders import TextEncoder

    on_gpu = any(name.startswith("cuda") for name in devices)
    batch_size = job.batch_size or (512 if on_gpu else 32)
    tokens = job.batch_tokens or (65536 if on_gpu else rows_budget(encoder, batch_size))
    feeders = job.feeders
    if feeders is None:
        # a GPU embeds faster than one core tokenizes (MiniLM-L6 on an H100: ~40,000 snippets/s against
        # ~2,500/s a core), so every core that no embedding process needs is a feeder, up to 16 a device:
        # each is a process of its own, and on an H100 host 15 fed only 1.3x what 6 did
        feeders = min(16, max(1, ((os.cpu_count() or 2) - len(devices)) // len(devices))) if on_gpu else 0
    if job.compile and isinstance(encoder.documents, TextEncoder):
        compile_encoder(encoder.documents)
    plan = BatchPlan(rows=batch_size, tokens=tokens, pad_multiple=64 if job.compile else 8)
    dtype = "float32" if job.fp32 else "auto"
    feeding = Feeding(plan=plan, feeders=feeders, dtype=dtype, compile=job.compile, timeout=job.feeder_timeout)
    return batch_size, feeding


def run_dense(corpus: Corpus, out: Path, job: DenseJob, runner, log=None) -> dict:
    """Build (or resume, or update) the dense index `job` describes in `out`, on `runner`'s workers;
    builds the store first when it is missing or of another corpus version (searching maps FAISS rows to
    snippets through it). Returns the index's build record. Raises EncoderUnavailable, DeviceError,
    LineageError, EmbeddingError or FolderBusy with a message for the user."""
    from indexer.dense import build_dense
    from indexer.store import build_store
    from medsnip.encoders import DenseEncoder
    from medsnip.joblock import folder_job

    devices = device_list(job.devices, job.device, runner)
    # one device here: the shards are embedded in this process with this encoder; several (or Ray): the
    # workers load their own, and this one, on the CPU, only gives the identity build.json records
    local = runner.name == "local" and len(devices) == 1
    encoder = DenseEncoder(job.spec, device=devices[0] if local else "cpu", dtype="float32" if job.fp32 else "auto")
    batch_size, feeding = feeding_for(encoder, devices, job)
    with folder_job(corpus.path, "indexer dense"):
        store_record = read_complete_record(corpus.path / "store") or {}
        if store_record.get("upstream", {}).get("lineage_sha256") != corpus.record_hash:
            build_store(corpus, corpus.path / "store")
        return build_dense(
            corpus,
            out,
            encoder,
            index_factory=job.index_factory,
            metric=job.metric,
            batch_size=batch_size,
            log=log,
            executor=runner,
            devices=devices,
            feeding=dataclasses.replace(feeding),
            refine=job.refine,
            nprobe=job.nprobe,
        )
