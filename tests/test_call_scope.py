"""searchd.calls.CallScope: a call's wait ends when its work is done, and at once when the call is over."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from searchd.calls import CallCancelled, CallScope, DeadlineExceeded


def _done_later(futures: list[Future], seconds: float) -> None:
    def finish() -> None:
        time.sleep(seconds)
        for position, future in enumerate(futures):
            future.set_result(position)

    threading.Thread(target=finish, daemon=True).start()


def test_a_wait_returns_once_every_future_is_done_and_their_results_stay_readable():
    scope = CallScope(30)
    futures = [Future() for _ in range(2000)]
    futures[0].set_result("already")  # one done before the wait starts
    _done_later(futures[1:], 0.2)
    scope.wait_all(futures)
    assert all(future.done() for future in futures)
    assert futures[0].result(0) == "already" and futures[-1].result(0) == 1998
    scope.wait_all([])  # nothing to wait for


def test_cancelling_the_call_ends_its_wait_at_once_and_drops_its_queued_work():
    scope = CallScope(30)
    futures = [scope.track(Future()) for _ in range(100)]
    threading.Timer(0.3, scope.cancel).start()
    began = time.monotonic()
    with pytest.raises(CallCancelled):
        scope.wait_all(futures)
    assert time.monotonic() - began < 5  # not the call's 30 s
    assert all(future.cancelled() for future in futures)
    with pytest.raises(CallCancelled):  # a wait that starts after the cancel ends at once
        scope.wait(Future())


def test_a_wait_past_the_deadline_raises_and_a_finished_wait_does_not():
    with pytest.raises(DeadlineExceeded):
        CallScope(0.3).wait_all([Future()])
    done: Future = Future()
    done.set_result(1)
    CallScope(30).wait_all([done])


def test_a_call_that_the_transport_reports_gone_stops_waiting_within_a_poll():
    alive = threading.Event()
    alive.set()
    scope = CallScope(30, is_active=alive.is_set)
    threading.Timer(0.2, alive.clear).start()
    began = time.monotonic()
    with pytest.raises(CallCancelled):
        scope.wait_all([Future()])
    assert time.monotonic() - began < 5
