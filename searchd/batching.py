"""Dynamic micro-batching: concurrent requests share one batched call.

Each batcher owns one worker thread, which is also the only thread that touches what it wraps (the
JVM searcher, the query encoder). A call waits in the queue; the worker takes everything already
queued (up to `max_batch`), waits at most `wait_ms` for more, then serves the batch with one call, so
the encoder runs full batches under load and a lone request pays at most `wait_ms`.

Under steady load the callers come back in waves: 8 clients get their answers together, and their next
queries reach the batcher over several milliseconds while their replies are written. A fixed 2 ms
window then cut each wave in two (4.1 queries per encoder batch at 8 clients, measured), and the encoder
runs small batches less efficiently. So a batch also waits, up to `expect_ms`, until it is as large as
the previous one was: at 8 clients batches stay at ~8 (72 -> 80 queries/s at 2-4 ms in the searchd
benchmark's setup).

A lone client (one call at a time, as an evaluation script or a rollout worker sends them) waits for nobody: once
a batch held one caller's items and nothing came while it was served, the next batch skips the `wait_ms` window
(at batch 1 the window was a tenth of a MiniLM query's time). Anything waiting when a batch ends, or a batch of
several callers, turns the window on again.

Callers share the batches by what they have left: each caller's items (by default, those submitted from one
thread: one call) wait in a queue of their own, and a batch takes first from the caller with the fewest items
waiting (the earliest among equals). A one-question call never waits behind a bulk call's thousands (at most for
the batch being served), and bulk calls finish one after another, each as soon as it can, rather than all
together at the end (taking one item of each caller in turn would make every one of 64 bulk calls wait for all
of them).

A batch's length is what a small call waits for twice: for the batch being served when it arrives, and for its own.
So while several callers wait, a batch holds at most what the batcher serves in `batch_seconds` (measured from its
last batches: on two busy CPU cores ~10-30 questions for MiniLM, the full `max_batch` on a GPU), and a
batch led by a caller with at most `FEW` items waiting takes at most `FEW_BATCH` items of bulk callers after the
small callers' own. A caller alone is served in full batches (the encoder is most efficient there: 4,096 questions
run ~10% faster in batches of 1,024 than of 300, measured on two CPU cores), unless within the last COMPANY_SECONDS
a call came while another caller's items were waiting or served: then its batches hold at most `lone_seconds` of
work (never fewer than LONE_MIN_BATCH items), so where small calls mix with bulk ones (an evaluation script beside a
training loop) a small call arriving behind a 4,096-question call waits for one such batch, not for a full one
(seconds on a CPU). One client's calls one after another (each may come from another server thread) never overlap,
and keep their full batches.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

from searchd.admission import FEW_QUESTIONS

_STOP = object()
FEW = FEW_QUESTIONS  # a caller with at most this many items waiting is a small one (searchd.admission)
FEW_BATCH = 8  # bulk items a batch led by a small caller takes at most
MIN_BATCH = 8  # the time bound never cuts a batch below this (each batch has a fixed cost)
LONE_MIN_BATCH = 64  # nor a lone caller's below this: its throughput is what it waits for
COMPANY_SECONDS = 10.0  # callers that overlapped this recently may again: a lone caller's batches stay short meanwhile


class BatcherClosed(Exception):
    """The batcher was closed (the server is stopping) before this item was served."""


class MicroBatcher:
    def __init__(
        self,
        function: Callable[[list], list],
        max_batch: int = 64,
        wait_ms: float = 2.0,
        name: str = "",
        expect_ms: float = 10.0,
        on_exit: Callable[[], None] | None = None,
        batch_seconds: float = 0.1,
        lone_seconds: float = 1.0,
    ):
        """`on_exit`: run in the worker thread as it ends (a thread that called into the JVM detaches);
        `batch_seconds`: how long a batch may take while other callers wait, `lone_seconds` while one caller is
        alone (the module's rule)."""
        self._function = function
        self._on_exit = on_exit
        self._max_batch = max_batch
        self._wait = wait_ms / 1000.0
        self._expect_wait = max(expect_ms, wait_ms) / 1000.0
        self._expected = 1  # the size of the last batch served
        self._batch_seconds = batch_seconds
        self._lone_seconds = lone_seconds
        self._item_seconds = 0.0  # what an item of a full batch has cost lately (0: not known yet)
        self._waiting: dict[Hashable, deque] = {}  # caller -> its items, callers in the order they came
        self._serving: set[Hashable] = set()  # the callers of the batch being served
        self._overlapped = -COMPANY_SECONDS  # when a call last came while another caller's items were waiting or served
        self._stopping = False
        self._closed = False
        self._lock = threading.Condition()  # a submit either lands before close's drain or fails
        self._thread = threading.Thread(target=self._run, name=f"batcher-{name}", daemon=True)
        self._thread.start()
        self.batches = 0
        self.items = 0
        self.isolated = 0  # failed batches served again item by item

    def submit(self, item: Any, caller: Hashable | None = None) -> Future:
        """Queue `item` for the next batches; `caller` (default: the submitting thread) is whose turn it takes."""
        return self.submit_many([item], caller)[0]

    def submit_many(self, items: list, caller: Hashable | None = None) -> list[Future]:
        """Queue a call's `items` at once: one lock and one wake-up for all of them, so the worker finds the whole
        call waiting rather than starting a batch on its first few items while the rest trickle in one lock hand-off
        (and one GIL hand-off) at a time."""
        futures: list[Future] = [Future() for _ in items]
        caller = threading.get_ident() if caller is None else caller
        with self._lock:
            if self._closed:
                for future in futures:
                    future.set_exception(BatcherClosed("search engine closed"))
            elif futures:
                if any(other != caller for other in (*self._waiting, *self._serving)):
                    self._overlapped = time.monotonic()
                self._waiting.setdefault(caller, deque()).extend(zip(items, futures, strict=True))
                self._lock.notify()
        return futures

    def _take(self, timeout: float | None, few_only: bool = False) -> Any:
        """(the next item of the caller with the fewest waiting (the module's rule), whether that caller is a small
        one, the caller), `_STOP` once closed, or None when `timeout` passes first (None: wait) or, with `few_only`,
        when no small caller has an item waiting."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not self._waiting:
                if self._stopping:
                    return _STOP
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._lock.wait(remaining)
            caller = min(self._waiting, key=lambda c: len(self._waiting[c]))  # the earliest among equals
            items = self._waiting[caller]
            few = len(items) <= FEW
            if few_only and not few:
                return None
            item = items.popleft()
            if not items:
                del self._waiting[caller]
            return item, few, caller

    def _limit(self) -> int:
        """How many items the next batch may hold (the module's rule): all of `max_batch` for a caller alone where
        no calls overlapped lately, or while an item's cost is not known yet; else what is served in `lone_seconds`
        for a caller alone, in `batch_seconds` while others wait."""
        with self._lock:
            alone = len(self._waiting) <= 1
            company = time.monotonic() - self._overlapped < COMPANY_SECONDS
        if not self._item_seconds or (alone and not company):
            return self._max_batch
        seconds, least = (self._lone_seconds, LONE_MIN_BATCH) if alone else (self._batch_seconds, MIN_BATCH)
        return min(self._max_batch, max(least, int(seconds / self._item_seconds)))

    def __call__(self, item: Any, timeout: float | None = None) -> Any:
        return self.submit(item).result(timeout)

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            if self._on_exit is not None:
                self._on_exit()

    def _serve(self) -> None:
        one_caller = False  # whether the last batch held one caller's items
        while True:
            with self._lock:
                quiet = one_caller and not self._waiting  # nobody came while the last batch was served
            first = self._take(None)
            if first is _STOP:
                return
            entry, led_by_few, caller = first
            batch, bulk, callers = [entry], 0, {caller}
            window = 0.0 if quiet else self._wait
            limit = self._limit()
            started = time.monotonic()
            stop = False
            while len(batch) < limit:
                wait = self._expect_wait if len(batch) < self._expected else window
                taken = self._take(
                    max(0.0, started + wait - time.monotonic()), few_only=led_by_few and bulk >= FEW_BATCH
                )
                if taken is None:
                    break
                if taken is _STOP:
                    stop = True
                    break
                entry, few, caller = taken
                bulk += not few
                batch.append(entry)
                callers.add(caller)
            one_caller = len(callers) == 1
            live = [(item, future) for item, future in batch if future.set_running_or_notify_cancel()]
            self._expected = max(1, len(batch))
            if live:
                self.batches += 1
                self.items += len(live)
                with self._lock:
                    self._serving = callers
                try:
                    began = time.monotonic()
                    try:
                        results = self._function([item for item, _ in live])
                    finally:  # before any caller is answered: its next call must not find itself still served
                        with self._lock:
                            self._serving = set()
                    if len(live) >= MIN_BATCH:  # a batch of a few is mostly its fixed cost
                        cost = (time.monotonic() - began) / len(live)
                        self._item_seconds = cost if not self._item_seconds else 0.7 * self._item_seconds + 0.3 * cost
                    for (_, future), result in zip(live, results, strict=True):
                        future.set_result(result)
                except BaseException as error:  # noqa: BLE001 - handed to the caller(s) it belongs to
                    if len(live) == 1:
                        live[0][1].set_exception(error)
                    else:  # one caller's bad item must not fail the others batched with it: each alone
                        self.isolated += 1
                        for item, future in live:
                            try:
                                future.set_result(self._function([item])[0])
                            except BaseException as alone:  # noqa: BLE001 - this caller's own failure
                                future.set_exception(alone)
            if stop:
                return

    def close(self) -> None:
        """Stop the worker after the batch it is serving; items still queued fail with BatcherClosed,
        so no caller waits for an answer that will never come."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stopping = True
            self._lock.notify_all()
        self._thread.join(timeout=10)
        with self._lock:
            left = [entry for items in self._waiting.values() for entry in items]
            self._waiting.clear()
        for _, future in left:
            if future.set_running_or_notify_cancel():
                future.set_exception(BatcherClosed("search engine closed"))
