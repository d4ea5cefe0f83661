"""Admission of calls, the same for gRPC and HTTP: admitted at once or refused at once, never queued.

At most `max_in_flight` calls run at once. Bulk calls (more than `FEW_QUESTIONS` questions, or a snippet scan) may
hold all but a reserved few of those slots: 64 bulk clients sending 256 questions each would otherwise hold every
slot, and a one-question call, from an evaluation job or a health probe that searches, would only ever be refused.
"""

from __future__ import annotations

import threading

FEW_QUESTIONS = 4  # a call of at most this many questions is a small one (the micro-batchers' rule too)


def reserved_for_small(max_in_flight: int) -> int:
    """Slots bulk calls leave to small ones: an eighth, at least one (none when there is a single slot)."""
    return 0 if max_in_flight < 2 else max(1, max_in_flight // 8)


class Slots:
    """`max_in_flight` slots, all but `reserved_for_small` of them open to bulk calls."""

    def __init__(self, max_in_flight: int):
        self.total = max_in_flight
        self.bulk_limit = max_in_flight - reserved_for_small(max_in_flight)
        self._lock = threading.Lock()
        self.running = 0
        self.bulk = 0

    def enter(self, bulk: bool) -> bool:
        """Take a slot (False when none is open to this call)."""
        with self._lock:
            if self.running >= self.total or (bulk and self.bulk >= self.bulk_limit):
                return False
            self.running += 1
            self.bulk += bulk
            return True

    def leave(self, bulk: bool) -> None:
        with self._lock:
            self.running -= 1
            self.bulk -= bulk
