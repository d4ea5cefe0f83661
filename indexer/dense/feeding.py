"""Feeding a transformer encoder: texts to padded token batches, prepared ahead of the device.

A build embeds texts in windows (up to `window` texts of one shard, in row order). Each window is
tokenized once, to id arrays, by the fast tokenizer's Rust core, in feeder processes (each on one
core) while the device embeds earlier windows; at most `depth` windows are tokenized ahead, so memory
follows the queue depth, not the shard size. The window's texts are then sorted by token count
(longest first, ties by position) and cut into batches by a token budget (rows x padded length)
rather than a fixed count: short texts go many to a batch, long ones few, and the device does little
work on padding. The batch plan is a pure function of the token counts and the three batch settings
(BatchPlan), so a build's vectors are reproducible bit for bit on the same device and dtype.

This module imports no torch: feeder processes start from it and import only numpy and tokenizers.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import itertools
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass

import numpy as np
import orjson

from medsnip.encoders.spec import snippet_texts
from medsnip.processes import die_with_parent


@dataclass(frozen=True)
class TokenizerSettings:
    """What a feeder needs to tokenize as the encoder would: the fast tokenizer serialised, the max
    length, and for decoders read at their last token the EOS to append (cutting one token early)."""

    tokenizer_json: str
    max_length: int
    truncation_side: str = "right"
    append_eos: int | None = None  # last-token pooling: every sequence ends with this id
    type_ids: bool = True  # the model takes token_type_ids


@dataclass(frozen=True)
class BatchPlan:
    """How a window becomes batches: at most `rows` texts and `tokens` padded tokens per batch, padded
    lengths rounded up to a multiple of `pad_multiple` (8 suits tensor cores; bigger values give
    torch.compile few shapes)."""

    rows: int = 32
    tokens: int = 8192
    pad_multiple: int = 8
    window: int = 4096

    def to_dict(self) -> dict:
        return asdict(self)

    def batches(self, lengths: np.ndarray, max_length: int) -> list[tuple[np.ndarray, int]]:
        """(window positions, padded length) of each batch, longest texts first."""
        order = np.lexsort((np.arange(len(lengths)), -lengths))
        batches, start = [], 0
        while start < len(order):
            padded = min(-(-int(lengths[order[start]]) // self.pad_multiple) * self.pad_multiple, max_length)
            padded = max(padded, int(lengths[order[start]]))
            size = max(1, min(self.rows, self.tokens // max(padded, 1)))
            batches.append((order[start : start + size], padded))
            start += size
        return batches


@dataclass
class TokenizedWindow:
    """A window's texts as token ids: `ids` (and `type_ids`) flat, text i at offsets[i]:offsets[i+1]."""

    ids: np.ndarray
    offsets: np.ndarray
    type_ids: np.ndarray | None
    cut: np.ndarray  # texts cut at the max length

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1


_backend = None  # the feeder process's tokenizer (set by _start_feeder)
_settings: TokenizerSettings | None = None


def tokenizer_settings(encoder) -> TokenizerSettings:
    """What feeder processes need to tokenize exactly as `encoder` (a medsnip.encoders.TextEncoder)
    does in its own `encode`."""
    tokenizer = encoder.tokenizer
    return TokenizerSettings(
        tokenizer_json=tokenizer.backend_tokenizer.to_str(),
        max_length=encoder.max_length,
        truncation_side=tokenizer.truncation_side,
        append_eos=tokenizer.eos_token_id if encoder.pooling == "last-token" else None,
        type_ids="token_type_ids" in tokenizer.model_input_names,
    )


def backend_tokenizer(settings: TokenizerSettings):
    """A tokenizers.Tokenizer that cuts at the max length as the transformers tokenizer does and never
    pads (padding is the batch's business)."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(settings.tokenizer_json)
    cut_at = settings.max_length - (settings.append_eos is not None)
    backend.enable_truncation(cut_at, stride=0, strategy="longest_first", direction=settings.truncation_side)
    backend.no_padding()
    return backend


def _start_feeder(settings_path: str, parent: int) -> None:
    global _backend, _settings
    die_with_parent(parent)  # a killed build leaves no feeder behind
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one core per feeder: feeders are the parallelism
    with open(settings_path, "rb") as handle:
        settings = TokenizerSettings(**orjson.loads(handle.read()))
    _backend, _settings = backend_tokenizer(settings), settings


def tokenize_window(texts: list, backend=None, settings: TokenizerSettings | None = None) -> TokenizedWindow:
    """Token ids of `texts` (strings or (first, second) pairs), cut at the max length; in a feeder
    process the tokenizer is the one _start_feeder made."""
    backend, settings = backend or _backend, settings or _settings
    # encode_batch_fast skips character offsets, which nothing here reads: same ids, ~20% less time
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    encodings = encode(texts, add_special_tokens=True)
    eos = settings.append_eos
    sequences = [encoding.ids for encoding in encodings]
    cut = np.fromiter((bool(encoding.overflowing) for encoding in encodings), dtype=bool, count=len(encodings))
    # a single text's type ids are all 0, which is what the model assumes when it is given none
    pairs = settings.type_ids and any(isinstance(text, tuple) for text in texts)
    types = [encoding.type_ids for encoding in encodings] if pairs else None
    if eos is not None:
        for number, sequence in enumerate(sequences):
            if not sequence or sequence[-1] != eos:
                sequence.append(eos)
                if types is not None:
                    types[number].append(types[number][-1] if types[number] else 0)
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int32, count=int(offsets[-1]))
    type_ids = None
    if types is not None:
        type_ids = np.fromiter(itertools.chain.from_iterable(types), dtype=np.int8, count=int(offsets[-1]))
    return TokenizedWindow(ids, offsets, type_ids, cut)


def text_digest(text) -> bytes:
    """16 bytes that identify what the encoder reads for a snippet (a text, or a (title, content) pair)."""
    return hashlib.blake2b(orjson.dumps(text), digest_size=16).digest()


@dataclass
class SnippetWindow:
    """Lines of a shard (JSON snippets) to feed: what a feeder reads, parses, keys and tokenizes, so the
    embedding process never parses JSON. Texts whose digest is in `known` (embedded before) are keyed
    but not tokenized."""

    lines: bytes
    pair: bool = False
    prefix: str = ""
    known: frozenset | None = None


@dataclass
class FedWindow:
    """A SnippetWindow fed: every line's text digest (n x 16 bytes), the positions to embed, and their
    tokens."""

    keys: np.ndarray
    todo: np.ndarray
    tokens: TokenizedWindow


def feed(payload, backend=None, settings: TokenizerSettings | None = None):
    """A feeder's work on one window: a list of texts is tokenized; a SnippetWindow is read first."""
    if not isinstance(payload, SnippetWindow):
        return tokenize_window(payload, backend, settings)
    texts = snippet_texts([orjson.loads(line) for line in payload.lines.splitlines()], payload.pair, payload.prefix)
    digests = [text_digest(text) for text in texts]
    keys = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(-1, 16)
    known = payload.known or ()
    todo = np.fromiter((number for number, digest in enumerate(digests) if digest not in known), dtype=np.int64)
    tokens = tokenize_window([texts[number] for number in todo] if known else texts, backend, settings)
    return FedWindow(keys, todo, tokens)


def pad_batch(window: TokenizedWindow, rows: np.ndarray, padded: int, pad_id: int, left: bool, allocate) -> dict:
    """The batch's rows of `window` as model inputs of `padded` tokens each: input_ids, attention_mask
    (and token_type_ids when the window has them), written into the arrays `allocate(name, shape)`
    returns (int64; views of pinned host tensors when the device is a GPU)."""
    lengths = window.lengths[rows]
    positions = np.arange(padded)
    mask = positions[None, :] >= (padded - lengths)[:, None] if left else positions[None, :] < lengths[:, None]
    # flat positions of the rows' tokens, row after row
    starts = np.repeat(window.offsets[rows] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    gather = starts + np.arange(int(lengths.sum()))
    shape = (len(rows), padded)
    inputs = {"input_ids": allocate("input_ids", shape), "attention_mask": allocate("attention_mask", shape)}
    inputs["input_ids"][:] = pad_id
    inputs["input_ids"][mask] = window.ids[gather]  # row-major order of the mask is the concatenation's
    inputs["attention_mask"][:] = mask
    if window.type_ids is not None:
        inputs["token_type_ids"] = allocate("token_type_ids", shape)
        inputs["token_type_ids"][:] = 0
        inputs["token_type_ids"][mask] = window.type_ids[gather]
    return inputs


FEEDER_TIMEOUT = 300.0  # seconds a window may take to tokenize (a few seconds is usual) before the feeder is dead
FEEDER_DIED = "a feeder process died (killed, or out of memory); the feeders were killed"


class FeederError(RuntimeError):
    """A feeder could not tokenize a window: it died, stopped answering or failed on a text. `key` is the
    window's key (the caller names the shard and rows from it); the feeders are gone when this is raised."""

    def __init__(self, key, why: str):
        super().__init__(why)
        self.key, self.why = key, why


def _first_failing(texts: list, backend, settings) -> int | None:
    """Which text of a window makes tokenizing fail (None: only the whole window does)."""
    for position, text in enumerate(texts):
        try:
            tokenize_window([text], backend, settings)
        except Exception:  # noqa: BLE001 - any failure is the one being located
            return position
    return None


def feed_checked(payload, backend=None, settings: TokenizerSettings | None = None):
    """`feed`, with a failure named by the text of the window that causes it ("text 17 of the window:
    ...")."""
    try:
        return feed(payload, backend, settings)
    except Exception as error:  # noqa: BLE001 - reported with where it happened
        texts = payload
        if isinstance(payload, SnippetWindow):
            try:
                texts = snippet_texts(
                    [orjson.loads(line) for line in payload.lines.splitlines()], payload.pair, payload.prefix
                )
            except Exception:  # noqa: BLE001 - a line that is not a snippet: the lines are the texts
                lines = payload.lines.splitlines()
                bad = next((n for n, line in enumerate(lines) if not _parses(line)), None)
                raise ValueError(f"line {bad} of the window is not a snippet: {error}") from None
        position = _first_failing(list(texts), backend or _backend, settings or _settings)
        where = f"text {position} of the window" if position is not None else "the window"
        raise ValueError(f"{where}: {type(error).__name__}: {error}") from None


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
        return True
    except orjson.JSONDecodeError:
        return False


class Feeders:
    """Tokenizes windows ahead of the device: `count` feeder processes (0: in the calling process, in
    order, when asked), at most `depth` windows in flight.

    A feeder that dies (killed), stops answering (SIGSTOP, a hung library) for `timeout` seconds, or fails
    on a text ends the job with a FeederError naming the window: the feeder processes are killed at once
    (never waited for), so the job fails in bounded time instead of hanging. Ctrl-C, or any exception in
    the caller, kills them too."""

    def __init__(
        self, settings: TokenizerSettings, count: int, depth: int | None = None, timeout: float = FEEDER_TIMEOUT
    ):
        self.settings, self.count, self.timeout = settings, count, timeout
        self.depth = depth or max(2, count + 1)
        self._pool: ProcessPoolExecutor | None = None
        self._local = backend_tokenizer(settings) if count == 0 else None
        self._settings_file: str | None = None
        self.peak_in_flight = 0  # the most windows held tokenized or being tokenized at once

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # The tokenizer (hundreds of KB of JSON) reaches the feeders through a file, not through the spawn
            # pipe: a child that never reads its pipe (stopped as it starts) would block the parent writing to it.
            if self._settings_file is None:
                descriptor, self._settings_file = tempfile.mkstemp(prefix="medsnip-feeder-", suffix=".json")
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(orjson.dumps(asdict(self.settings)))
            # spawn, not fork: the parent may hold CUDA, Ray or gRPC threads that a fork must not copy
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                self.count, mp_context=context, initializer=_start_feeder, initargs=(self._settings_file, os.getpid())
            )
        return self._pool

    def _remove_settings_file(self) -> None:
        if self._settings_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._settings_file)
            self._settings_file = None

    @property
    def pids(self) -> list[int]:
        """The feeder processes' ids (none before the first window)."""
        return sorted(getattr(self._pool, "_processes", None) or {}) if self._pool is not None else []

    def tokenized(self, windows):
        """(key, fed window) for each (key, payload) of `windows` in order (see `feed`); the iterable is
        read ahead by up to `depth` windows (so the next shard is read while this one embeds)."""
        if self.count == 0:
            for key, texts in windows:
                self.peak_in_flight = max(self.peak_in_flight, 1)
                try:
                    fed = feed_checked(texts, self._local, self.settings)
                except ValueError as error:
                    raise FeederError(key, str(error)) from None
                yield key, fed
            return
        pending: collections.deque[tuple[object, Future]] = collections.deque()
        source = iter(windows)
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < self.depth:
                    try:
                        key, texts = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    pending.append((key, self._submit(key, texts)))
                    self.peak_in_flight = max(self.peak_in_flight, len(pending))
                if not pending:
                    return
                key, future = pending.popleft()
                yield key, self._result(key, future)
        except BaseException:  # a feeder's failure, Ctrl-C, or the caller's own error: no feeder outlives it
            self.kill()
            raise

    def _submit(self, key, texts) -> Future:
        try:
            return self._executor().submit(feed_checked, texts)
        except BrokenProcessPool:  # a feeder died before this window was handed out (the pool saw it first)
            raise FeederError(key, FEEDER_DIED) from None

    def _result(self, key, future: Future):
        try:
            return future.result(timeout=self.timeout)
        except FutureTimeout:
            raise FeederError(
                key,
                f"no feeder answered in {self.timeout:.0f} s (a feeder process stopped or "
                "hung); the feeders were killed",
            ) from None
        except BrokenProcessPool:
            raise FeederError(key, FEEDER_DIED) from None
        except ValueError as error:
            raise FeederError(key, str(error)) from None

    def kill(self) -> None:
        """Stop every feeder now: SIGKILL (a stopped process ignores everything else), then reap."""
        if self._pool is None:
            return
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        for process in processes:
            try:
                process.kill()
            except (OSError, ValueError):  # already gone
                pass
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(timeout=5)
        self._pool = None
        self._remove_settings_file()

    def close(self, grace: float = 10.0) -> None:
        """Let the feeders exit (every window they owe has been taken); one that has not within `grace`
        seconds (stopped, or hung) is killed: a build never waits on a feeder it no longer needs."""
        if self._pool is None:
            return
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + grace
        for process in processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        self._pool = None
        self._remove_settings_file()
