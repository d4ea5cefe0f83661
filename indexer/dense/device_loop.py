"""The device side of embedding: tokenized windows (indexer.dense.feeding) through a transformer.

Each batch is padded from the window's id arrays into host tensors (pinned when the device is a GPU)
and copied with `non_blocking=True`, so the host pads batch n+1 while the device computes batch n.
Pooled vectors stay on the device until the window is done; its copy back is started then and waited
for only after the next window's batches are queued, so the device never idles on the host's
bookkeeping between windows. On a CPU the same code runs synchronously and hands each window back as
soon as it is computed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from indexer.dense.feeding import BatchPlan, TokenizedWindow, pad_batch


def compile_model(encoder) -> None:
    """torch.compile the encoder's model (`indexer dense --compile`); shapes vary with every batch, so
    it is compiled for dynamic shapes and a plan with a coarse `pad_multiple` keeps their number small."""
    encoder.model = encoder._torch.compile(encoder.model, dynamic=True)


def embed_windows(
    encoder, windows: Iterable[tuple[object, object]], plan: BatchPlan
) -> Iterator[tuple[object, object, np.ndarray]]:
    """(key, window, float32 vectors in the window's text order) for each (key, window), a window being a
    TokenizedWindow or a FedWindow (whose `tokens` are embedded)."""
    torch = encoder._torch
    device = encoder.device
    on_gpu = device.startswith("cuda")
    pad_id = encoder.tokenizer.pad_token_id
    pad_id = encoder.tokenizer.eos_token_id if pad_id is None else pad_id
    left = encoder.tokenizer.padding_side == "left"
    dimension = encoder.dimension
    pending = None
    with torch.inference_mode():
        for key, fed in windows:
            window: TokenizedWindow = getattr(fed, "tokens", fed)
            batches = plan.batches(window.lengths, encoder.max_length) if len(window) else []
            computed = torch.empty((len(window), dimension), dtype=torch.float32, device=device)
            start = 0
            for rows, padded in batches:
                host: dict = {}

                def allocate(name, shape, host=host):
                    host[name] = torch.empty(shape, dtype=torch.int64, pin_memory=on_gpu)
                    return host[name].numpy()

                pad_batch(window, rows, padded, pad_id, left, allocate)
                inputs = {name: tensor.to(device, non_blocking=True) for name, tensor in host.items()}
                computed[start : start + len(rows)] = encoder.forward(inputs)
                start += len(rows)
            order = np.concatenate([rows for rows, _ in batches]) if batches else np.zeros(0, dtype=np.int64)
            if not on_gpu:  # computed already: nothing to overlap, so no reason to hold the window back
                yield _finished(key, fed, computed, None, order)
                continue
            copied = torch.empty(computed.shape, dtype=torch.float32, pin_memory=True)
            copied.copy_(computed, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
            if pending is not None:
                yield _finished(*pending)
            pending = (key, fed, copied, done, order)
        if pending is not None:
            yield _finished(*pending)


def _finished(key, fed, copied, done, order: np.ndarray) -> tuple[object, object, np.ndarray]:
    if done is not None:
        done.synchronize()
    vectors = np.empty(tuple(copied.shape), dtype=np.float32)
    vectors[order] = copied.numpy()
    return key, fed, vectors
