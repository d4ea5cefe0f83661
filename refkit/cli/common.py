"""What every refkit command shares: the `refkit` group, its console, the options several commands take, and
writing a run's records whole (resumably) while checking it stayed on one server generation."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress

from medsnip import __version__
from medsnip.cli_errors import ExitCode, ToolGroup, Unreachable, fail
from medsnip.queries import FORMATS, QueryFileError

console = Console(stderr=True, highlight=False)
PathIn = click.Path(path_type=Path, exists=True, dir_okay=False)
PathOut = click.Path(path_type=Path, dir_okay=False)


def friendly_errors(command):
    """Known input, server and reader problems become one `error:` line: exit 3 for a server or reader
    endpoint that cannot be reached, 1 for the rest (medsnip.cli_errors)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        from medsnip.jsonl import InputFileError
        from refkit.connection import ServerError
        from refkit.readers.errors import ReaderError
        from refkit.vocabulary.lexicon import LexiconError

        try:
            return command(*args, **kwargs)
        except (QueryFileError, InputFileError, LexiconError, ServerError, ReaderError, ValueError) as error:
            if getattr(error, "unreachable", False):
                raise Unreachable(str(error)) from None
            fail(str(error), ExitCode.USAGE if getattr(error, "rejected", False) else ExitCode.FAILED)

    return run


def query_options(command):
    command = click.option("--limit", type=click.IntRange(1), help="Only the first N queries of the file.")(command)
    return click.option(
        "--format",
        "query_format",
        default="auto",
        show_default=True,
        type=click.Choice(FORMATS),
        help="Query file format (docs: reference/query-files).",
    )(command)


def resume_options(command):
    mix = click.option(
        "--mix-generations",
        is_flag=True,
        help="Continue a killed run even though searchd now serves another generation of a corpus "
        "(recorded in OUT.partial.json); without it such a run is refused.",
    )
    restart = click.option(
        "--restart",
        is_flag=True,
        help="Start over instead of continuing the killed run of the same command (OUT.partial).",
    )
    return restart(mix(command))


def resumed_writer(out: Path, identity: dict, lineage: dict, queries: list, restart: bool, mix: bool):
    """(the writer of OUT, how many leading queries a killed run of the same command already did)."""
    from refkit.resume import ResumableJsonl

    writer = ResumableJsonl(out, identity)
    done = writer.start(lineage, [str(q.id) for q in queries], restart=restart, mix_generations=mix)
    if writer.discarded:
        console.print(writer.discarded)
    if done:
        console.print(f"resuming: {done:,} of {len(queries):,} queries were done by the killed run ({writer.partial})")
    return writer, done


def write_all(writer, records) -> list[dict]:
    """Append every record, then publish OUT; an error or Ctrl-C leaves the partial run for the next start."""
    try:
        for record in records:
            writer.append(record)
    except BaseException:
        writer.close()
        raise
    writer.finish()
    from medsnip.jsonl import read_jsonl

    return [record for _, record in read_jsonl(writer.out)]


def checked_at_end(records, client, address: str, lineage: dict):
    """The records, then a check that the server still serves the generation they came from (before the
    output is published)."""
    from refkit.connection import check_same_generation

    yield from records
    check_same_generation(client, address, lineage)


def dedup_options(command):
    threshold = click.FloatRange(0, 1, min_open=True)
    command = click.option(
        "--dedup-threshold",
        default=0.8,
        show_default=True,
        type=threshold,
        help="Word-shingle Jaccard at which references are near-duplicates.",
    )(command)
    return click.option("--shingle-words", default=3, show_default=True, type=click.IntRange(1))(command)


@contextlib.contextmanager
def progress(description: str, total: int | None):
    """A progress bar on stderr (hidden when stderr is not a terminal); yields its advance function."""
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def connect_client(address, token_file, tls, ca_file, queries=None):
    from refkit.connection import ServerOptions, connect

    return connect(ServerOptions(address, token_file, tls, ca_file), queries)


@click.group(cls=ToolGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="refkit")
def main() -> None:
    """Reproducible reference collection, noise generation, benchmark assembly and citation scoring."""
