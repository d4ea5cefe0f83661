"""searchd's micro-batcher (searchd/batching.py): a batch waits for as many queries as the previous one
had, so waves of callers whose queries trickle in stay whole; a lone caller's batches stay at one; callers share
the batches, and batches last a bounded time while others wait; and the admission rule that goes
with it (searchd.admission)."""

from __future__ import annotations

import threading
import time

import pytest

from searchd.admission import Slots, reserved_for_small
from searchd.batching import FEW_BATCH, LONE_MIN_BATCH, MicroBatcher


def test_a_wave_that_trickles_in_stays_one_batch_like_the_last():
    sizes: list[int] = []
    batcher = MicroBatcher(lambda items: (sizes.append(len(items)), items)[1], wait_ms=1, expect_ms=2000)
    try:
        first = [batcher.submit(i) for i in range(8)]  # a wave that arrives at once: one batch of 8
        assert [f.result(5) for f in first] == list(range(8))
        trickle = []
        for i in range(8):  # the next wave, 20 ms apart: far beyond wait_ms, within expect_ms
            trickle.append(batcher.submit(i))
            time.sleep(0.02)
        assert [f.result(5) for f in trickle] == list(range(8))
        assert sizes == [8, 8]
    finally:
        batcher.close()


def test_a_call_submitted_at_once_is_one_batch_even_after_a_lone_caller_and_fails_whole_once_closed():
    """submit_many queues a call's items under one lock: the worker, used to batches of one, still finds all of
    them (one submit at a time, it would start on the first while the rest arrive)."""
    from searchd.batching import BatcherClosed

    sizes: list[int] = []
    batcher = MicroBatcher(lambda items: (sizes.append(len(items)), items)[1], max_batch=256, wait_ms=0, expect_ms=0)
    try:
        assert batcher(-1, timeout=5) == -1
        futures = batcher.submit_many(list(range(200)))
        assert [f.result(5) for f in futures] == list(range(200))
        assert sizes == [1, 200]
    finally:
        batcher.close()
    closed = batcher.submit_many(["a", "b"])
    assert all(isinstance(f.exception(1), BatcherClosed) for f in closed)


def test_a_lone_caller_is_not_held_for_a_wave():
    sizes: list[int] = []
    batcher = MicroBatcher(lambda items: (sizes.append(len(items)), items)[1], wait_ms=1, expect_ms=2000)
    try:
        for i in range(5):
            started = time.monotonic()
            assert batcher(i, timeout=5) == i
            assert time.monotonic() - started < 1.0  # never the 2 s a wave may wait
        assert sizes == [1] * 5
        done = threading.Event()
        late = batcher.submit("late")
        late.add_done_callback(lambda _: done.set())
        assert done.wait(5) and late.result() == "late"
    finally:
        batcher.close()


def test_a_lone_caller_skips_the_window_and_a_caller_arriving_during_a_batch_turns_it_back_on():
    """Calls one at a time from one caller are served at once (no `wait_ms` window once a batch held one caller
    and nothing came while it was served); a call that arrives while another is served shows company again, and
    its batch waits the window for more."""
    sizes: list[int] = []
    serving = threading.Event()
    go_on = threading.Event()
    go_on.set()

    def serve(items: list) -> list:
        serving.set()
        assert go_on.wait(5)
        sizes.append(len(items))
        return items

    batcher = MicroBatcher(serve, wait_ms=300)
    try:
        assert batcher(0, timeout=5) == 0  # the first batch waits its window: nothing is known yet
        started = time.monotonic()
        for i in range(5):
            assert batcher(i, timeout=5) == i
        assert time.monotonic() - started < 0.3, "a lone caller waited for the window"
        go_on.clear()
        serving.clear()
        held = batcher.submit("a", caller="a")  # taken at once, and held in the batch function
        assert serving.wait(5)
        joined = batcher.submit("b", caller="b")  # arrives while "a" is served
        go_on.set()
        time.sleep(0.05)
        late = batcher.submit("c", caller="c")  # within the window "b"'s batch now waits
        assert [f.result(5) for f in (held, joined, late)] == ["a", "b", "c"]
        assert sizes == [1, 1, 1, 1, 1, 1, 1, 2]
    finally:
        batcher.close()


def test_one_bad_item_fails_only_its_own_caller():
    """A batch function that fails on one item: the batch is served again item by item, so the callers
    batched with the bad item get their results and only its caller gets the error."""
    calls = []

    def square(items):
        calls.append(len(items))
        if "bad" in items:
            raise ValueError("bad item")
        return [item * item for item in items]

    batcher = MicroBatcher(square, max_batch=16, wait_ms=200)
    futures = [batcher.submit(i) for i in range(5)] + [batcher.submit("bad")]
    futures += [batcher.submit(i) for i in range(5, 8)]
    assert [f.result(timeout=10) for f in futures[:5] + futures[6:]] == [i * i for i in range(8)]
    with pytest.raises(ValueError, match="bad item"):
        futures[5].result(timeout=10)
    assert calls[0] == 9 and batcher.isolated == 1
    batcher.close()


def test_a_bulk_caller_does_not_keep_a_small_one_waiting_behind_all_its_items():
    """A caller's items wait in a queue of their own and batches take first from the caller with the fewest
    waiting: a one-item call submitted after two 400-item calls is served in the first batches, not after all
    800, and the two bulk calls finish one after the other, not both at the end."""
    import threading

    served: list[list] = []
    release = threading.Event()

    def serve(items: list) -> list:
        release.wait(10)  # the first batch holds the worker until both callers have queued
        served.append(list(items))
        return items

    batcher = MicroBatcher(serve, max_batch=8, wait_ms=0.0, expect_ms=0.0, name="fair")
    try:
        bulk = [batcher.submit(("bulk", n), caller="bulk") for n in range(400)]
        other = [batcher.submit(("other", n), caller="other") for n in range(400)]
        small = batcher.submit(("small", 0), caller="small")
        release.set()
        assert small.result(10) == ("small", 0)
        at = next(n for n, batch in enumerate(served) if ("small", 0) in batch)
        assert at <= 1, f"served in batch {at} of {len(served)}"
        assert [f.result(10) for f in bulk] == [("bulk", n) for n in range(400)]  # in order within a caller
        assert [f.result(10) for f in other] == [("other", n) for n in range(400)]
        last = {
            name: max(n for n, batch in enumerate(served) for item in batch if item[0] == name)
            for name in ("bulk", "other")
        }
        assert min(last.values()) < 0.75 * max(last.values()), last  # one finished well before the other
    finally:
        batcher.close()


def test_while_callers_wait_a_batch_lasts_about_batch_seconds_and_a_small_callers_batch_stays_small():
    served: list[list] = []

    def serve(items: list) -> list:
        time.sleep(0.005 * len(items))  # 5 ms an item: 0.1 s holds 20
        served.append(list(items))
        return items

    batcher = MicroBatcher(serve, max_batch=256, wait_ms=0.0, expect_ms=0.0, name="timed", batch_seconds=0.1)
    try:
        alone = [batcher.submit(n, caller="alone") for n in range(300)]
        assert [f.result(30) for f in alone] == list(range(300))
        assert [len(batch) for batch in served] == [256, 44]  # a caller alone, nobody else seen: full batches
        served.clear()
        bulk = [batcher.submit(("bulk", n), caller="bulk") for n in range(300)]
        other = [batcher.submit(("other", n), caller="other") for n in range(300)]
        time.sleep(0.2)
        small = batcher.submit(("small", 0), caller="small")
        assert small.result(10) == ("small", 0)
        for future in bulk + other:
            future.result(30)
        at = next(n for n, batch in enumerate(served) if ("small", 0) in batch)
        timed = [len(batch) for batch in served[1 : at + 1]]  # the first was formed before the others queued
        assert timed and max(timed) <= 40, timed  # (once one bulk caller is done, the other is alone: full batches)
        own = served[at]
        assert own[0] == ("small", 0) and len(own) <= 1 + FEW_BATCH, own
    finally:
        batcher.close()


def test_a_lone_bulk_callers_batches_last_about_lone_seconds_where_small_calls_come_too():
    """Once a small call came while a bulk call was served, the bulk caller alone gets batches of about
    `lone_seconds` of work (never below LONE_MIN_BATCH), not the whole max_batch: the next small call is answered
    after the batch being served, not after a full one (1 s here). One client's calls one after another, each from
    another thread, never overlap and keep full batches."""
    served: list[list] = []

    def serve(items: list) -> list:
        time.sleep(0.001 * len(items))  # 1 ms an item: lone_seconds (0.15 s) holds 150
        served.append(list(items))
        return items

    batcher = MicroBatcher(serve, max_batch=1024, wait_ms=0.0, expect_ms=0.0, name="lone", lone_seconds=0.15)
    try:
        for _ in range(2):  # one client, two calls one after another from two threads: full batches
            served.clear()
            sequential = threading.Thread(target=lambda: [f.result(30) for f in batcher.submit_many(list(range(1500)))])
            sequential.start()
            sequential.join(30)
            assert [len(batch) for batch in served] == [1024, 476]
        served.clear()
        bulk = batcher.submit_many([("bulk", n) for n in range(3000)], caller="bulk")
        time.sleep(0.1)
        assert batcher.submit(("small", -1), caller="small").result(30) == ("small", -1)  # came while bulk was served
        asked = time.monotonic()
        assert batcher.submit(("small", 0), caller="small").result(30) == ("small", 0)
        waited = time.monotonic() - asked
        assert [f.result(30) for f in bulk] == [("bulk", n) for n in range(3000)]
        sizes = [len(batch) for batch in served]
        assert sizes[0] == 1024 and waited < 0.6, (waited, sizes)
        after = next(n for n, batch in enumerate(served) if ("small", 0) in batch)
        bulk_batches = [len(batch) for batch in served[after + 1 :]][:-1]  # the last: what was left
        assert bulk_batches and all(LONE_MIN_BATCH <= size <= 200 for size in bulk_batches), sizes
    finally:
        batcher.close()


def test_bulk_calls_leave_slots_to_small_ones():
    slots = Slots(16)
    assert slots.bulk_limit == 14 and reserved_for_small(1) == 0
    assert all(slots.enter(bulk=True) for _ in range(14))
    assert not slots.enter(bulk=True)
    assert slots.enter(bulk=False) and slots.enter(bulk=False)
    assert not slots.enter(bulk=False)  # every slot taken
    slots.leave(bulk=True)
    assert slots.enter(bulk=False) and not slots.enter(bulk=True)


def test_bulk_calls_hold_at_most_their_question_budget_together_and_a_call_alone_any_size():
    slots = Slots(16, max_bulk_questions=1000)
    assert slots.enter(bulk=True, questions=4096)  # alone: admitted whatever its size
    assert not slots.enter(bulk=True, questions=5)  # anything more would pass the budget
    assert slots.enter(bulk=False, questions=1)  # small calls are not counted against it
    slots.leave(bulk=True, questions=4096)
    assert slots.enter(bulk=True, questions=600) and slots.enter(bulk=True, questions=400)
    assert not slots.enter(bulk=True, questions=5)
    slots.leave(bulk=True, questions=400)
    assert slots.enter(bulk=True, questions=400) and slots.bulk_questions == 1000
