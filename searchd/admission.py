"""Admission of calls, the same for gRPC and HTTP: admitted at once or refused at once, never queued.

At most `max_in_flight` calls run at once. Bulk calls (more than `FEW_QUESTIONS` questions, or a snippet scan) may
hold all but a reserved few of those slots: 64 bulk clients sending 256 questions each would otherwise hold every
slot, and a one-question call, from an evaluation job or a health probe that searches, would only ever be refused.

Bulk calls together also hold at most `max_bulk_questions` questions (a call alone is admitted whatever its size):
every admitted question's lists wait in the micro-batchers' queues with their results until the whole call is done,
so the questions in flight, not the calls, are what the server's memory and its small callers' waits grow with.
The batchers need only enough queued to fill their batches; more admitted questions only wait longer.
"""

from __future__ import annotations

import threading

FEW_QUESTIONS = 4  # a call of at most this many questions is a small one (the micro-batchers' rule too)
MAX_BULK_QUESTIONS = 4096  # the default of --max-bulk-questions (the module's rule)


def reserved_for_small(max_in_flight: int) -> int:
    """Slots bulk calls leave to small ones: an eighth, at least one (none when there is a single slot)."""
    return 0 if max_in_flight < 2 else max(1, max_in_flight // 8)


class Slots:
    """`max_in_flight` slots, all but `reserved_for_small` of them open to bulk calls, which hold at most
    `max_bulk_questions` questions together (the module's rule)."""

    def __init__(self, max_in_flight: int, max_bulk_questions: int = MAX_BULK_QUESTIONS):
        self.total = max_in_flight
        self.bulk_limit = max_in_flight - reserved_for_small(max_in_flight)
        self.max_bulk_questions = max_bulk_questions
        self._lock = threading.Lock()
        self.running = 0
        self.bulk = 0
        self.bulk_questions = 0

    def enter(self, bulk: bool, questions: int = 0) -> bool:
        """Take a slot for a call of `questions` questions (False when none is open to it)."""
        with self._lock:
            if self.running >= self.total:
                return False
            if bulk and (
                self.bulk >= self.bulk_limit
                or (self.bulk and self.bulk_questions + questions > self.max_bulk_questions)
            ):
                return False
            self.running += 1
            self.bulk += bulk
            self.bulk_questions += questions if bulk else 0
            return True

    def leave(self, bulk: bool, questions: int = 0) -> None:
        with self._lock:
            self.running -= 1
            self.bulk -= bulk
            self.bulk_questions -= questions if bulk else 0
