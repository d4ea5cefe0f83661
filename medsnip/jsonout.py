"""`--json`, the one machine-readable output of the five command-line tools.

A command that prints results or a summary takes `--json`: then stdout carries nothing but JSON objects,
one per line (its keys in the order the command's help lists them, non-ASCII text as written), and
whatever a person reads (tables, progress, notes) goes to stderr. Errors keep their convention
(medsnip.cli_errors: one `error:` line on stderr and the exit status of its class). A command whose lines
are of several kinds says which in each line's first key, `type`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator

import click


def json_option(what: str):
    """The `--json` flag (`as_json`); `what` says what the lines hold, for --help."""
    return click.option("--json", "as_json", is_flag=True, help=f"One JSON object per line on stdout: {what}.")


def emit_json(record: dict) -> None:
    """`record` as one line of JSON on stdout: keys in the order given, non-ASCII as written, paths as text."""
    click.echo(json.dumps(record, ensure_ascii=False, default=str))


@contextlib.contextmanager
def human_output_to_stderr(as_json: bool) -> Iterator[None]:
    """With --json, what a job prints for people on stdout (the summary tables of the stages it runs)
    goes to stderr instead, so that stdout keeps only the JSON lines emitted after it."""
    if not as_json:
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield
