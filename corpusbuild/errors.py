"""Input errors that name the file and position, so a user can find the bad byte."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class InputProblem:
    """One problem with one input: where it is and what is wrong.

    `line` is the 1-based line in the (decompressed) XML where known; `element` names the record
    (e.g. `PubmedArticle #12`) when the problem is inside one record and the rest of the file is fine.
    """

    file: str
    message: str
    line: int | None = None
    element: str | None = None

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.element:
            where += f" ({self.element})"
        return f"{where}: {self.message}"

    def to_dict(self) -> dict:
        return asdict(self)


class InputError(Exception):
    """A whole input file could not be used; carries the InputProblem that says why."""

    def __init__(self, problem: InputProblem):
        super().__init__(str(problem))
        self.problem = problem


class OutputError(Exception):
    """The build's own files could not be written (disk full, quota, read-only folder): not the fault
    of any input. The build stops and publishes nothing, so an earlier build in the folder stays whole.

    Deliberately not an OSError: readers catch OSError from their input streams (a damaged .gz), and
    must not mistake a full disk for a damaged input."""


@contextmanager
def writing(what) -> Iterator[None]:
    """Turn an OSError raised while writing `what` into an OutputError that names it."""
    try:
        yield
    except OSError as error:
        raise OutputError(f"cannot write {what}: {error.strerror or error}") from error
