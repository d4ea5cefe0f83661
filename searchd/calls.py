"""The lifetime of one call: its deadline and its cancellation, shared by every piece of work it starts.

A call's work runs in other threads (the BatchSearch pool, the micro-batchers), so "stop" has to reach
them: every wait goes through `CallScope.wait`, which returns as soon as the result is there and raises
as soon as the deadline passes or the call is cancelled (the client went away, or the server is
shutting down and gRPC cancelled its calls after the grace period). A job that starts after its call
ended gives up at once instead of searching for nobody.

The deadline is absolute (monotonic clock), fixed when the call starts: a job that waited in a queue
has less time left, not a fresh allowance. A call without a client deadline, or with one longer than
the server's own limit, gets the server's limit, so no wait is ever unbounded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future

_POLL_SECONDS = 0.25  # how often a waiting call also asks gRPC whether it is still alive


class CallCancelled(Exception):
    """The call ended (client cancelled or went away, or the server is stopping)."""


class DeadlineExceeded(Exception):
    """The call's deadline passed before its work finished."""


class CallScope:
    def __init__(self, seconds: float, is_active: Callable[[], bool] = lambda: True):
        self.deadline = time.monotonic() + seconds
        self._is_active = is_active
        self._cancelled = threading.Event()  # set once the call is cancelled
        self._lock = threading.Lock()
        self._waits: set[threading.Event] = set()  # the waits in progress: cancelling wakes them at once
        self._started: list[Future] = []

    @classmethod
    def for_context(cls, context, max_seconds: float) -> CallScope:
        """The scope of a gRPC call: the client's deadline capped by the server's `max_seconds` (and
        `max_seconds` when the client sent none: grpcio then reports a remaining time of years, or None)."""
        remaining = context.time_remaining()
        seconds = max_seconds if remaining is None else min(max(remaining, 0.0), max_seconds)
        scope = cls(seconds, context.is_active)
        context.add_callback(scope.cancel)  # runs when the call terminates, cancelled or not
        return scope

    def cancel(self) -> None:
        """End the call's work: wake every wait and drop queued work that has not started."""
        with self._lock:
            self._cancelled.set()
            for waiting in self._waits:
                waiting.set()
        for future in self._started:
            future.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set() or not self._is_active()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        """Raise if the call is over (cancelled or past its deadline)."""
        if self.cancelled:
            raise CallCancelled("the call was cancelled")
        if self.remaining() <= 0:
            raise DeadlineExceeded("deadline exceeded")

    def track(self, future: Future) -> Future:
        """Remember work started for this call, so that cancelling the call cancels it if still queued."""
        self._started.append(future)
        return future

    def wait(self, future: Future):
        """The future's result, or CallCancelled / DeadlineExceeded as soon as the call is over."""
        self.wait_all([future])
        return future.result(0)

    def wait_all(self, futures: Iterable[Future]) -> None:
        """Wait until every future is done; raise as soon as the call is over (their results are not read).

        Each future counts itself done through a callback and the last one wakes the wait, so a wait costs one
        callback per future: waiting on the pending set again after each completion costs the square of their
        number in lock operations under the GIL (a million for a bulk call of 256 questions x 6 lists)."""
        futures = list(futures)
        left = [len(futures)]
        counted = threading.Lock()
        finished = threading.Event()

        def one_done(_: Future) -> None:
            with counted:
                left[0] -= 1
                if not left[0]:
                    finished.set()

        with self._lock:
            self._waits.add(finished)
            if self._cancelled.is_set():
                finished.set()
        try:
            for future in futures:
                future.add_done_callback(one_done)  # runs at once for a future already done
            while True:
                with counted:
                    all_done = not left[0]
                if all_done:
                    if self._cancelled.is_set():  # cancelling the call cancelled its queued work: no results
                        raise CallCancelled("the call was cancelled")
                    return
                self.check()
                finished.wait(max(min(self.remaining(), _POLL_SECONDS), 0.0))  # also set when the call is cancelled
        finally:
            with self._lock:
                self._waits.discard(finished)


class QueryRefused(ValueError):
    """A query the index cannot run as written (Lucene's clause limit): INVALID_ARGUMENT for its caller."""
