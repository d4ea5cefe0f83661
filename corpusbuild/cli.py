"""`corpusbuild`: build snippet shards from raw sources, verify them, export them."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import click
from rich.markup import escape

from corpusbuild.chunking import validate_chunking
from corpusbuild.inputs import expand_inputs, order_inputs
from corpusbuild.pubmed import ChunkingParams, map_pubmed_file
from corpusbuild.report import BuildProgress, console, print_summary
from corpusbuild.shardbuild import BuildAborted, BuildLocked, run_sharded_build
from medsnip import __version__

PUBMED_SUFFIXES = (".xml", ".xml.gz")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="corpusbuild")
def main() -> None:
    """Build reproducible ~1000-character snippet shards from biomedical sources."""


@main.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--shards", default=32, show_default=True, type=click.IntRange(1, 65536), help="Number of shards.")
@click.option(
    "--workers", default=os.cpu_count() or 1, show_default=True, type=click.IntRange(1), help="Worker processes."
)
@click.option("--chunk-size", default=1000, show_default=True, type=int, help="Max characters per snippet.")
@click.option("--chunk-overlap", default=200, show_default=True, type=int, help="Characters shared by chunks.")
@click.option("--no-chunk", is_flag=True, help="One snippet per abstract (MedRAG's PubMed corpus).")
@click.option("--keep-no-abstract", is_flag=True, help="Keep articles without an abstract as title-only snippets.")
@click.option("--strict", is_flag=True, help="Stop at the first error; publish nothing.")
@click.option(
    "--keep-work/--no-keep-work",
    default=True,
    show_default=True,
    help="Keep parsed parts in OUT/.work so adding update files later re-parses only those.",
)
@click.option("--quiet", is_flag=True, help="No progress bars.")
def pubmed(
    inputs, out_dir, shards, workers, chunk_size, chunk_overlap, no_chunk, keep_no_abstract, strict, keep_work, quiet
) -> None:
    """PubMed baseline/update XML (pubmedYYnNNNN.xml[.gz], legacy MedlineCitationSet) to snippets.

    INPUT is a file, a folder (searched for *.xml and *.xml.gz) or a glob. Numbered files are applied
    in sequence-number order, unnumbered ones after them in the order given: a later record for a PMID
    replaces an earlier one and a DeleteCitation removes it.
    """
    try:
        validate_chunking(chunk_size, chunk_overlap)
    except ValueError as error:
        raise click.BadParameter(str(error)) from error
    params = ChunkingParams(
        chunk=not no_chunk, chunk_size=chunk_size, chunk_overlap=chunk_overlap, keep_no_abstract=keep_no_abstract
    )
    files, problems = expand_inputs(inputs, PUBMED_SUFFIXES)
    files = order_inputs(files)
    command = shlex.join(["corpusbuild", *sys.argv[1:]])
    try:
        with BuildProgress(enabled=not quiet) as progress:
            outcome = run_sharded_build(
                source="pubmed",
                inputs=files,
                input_problems=problems,
                out_dir=out_dir,
                num_shards=shards,
                params=params.to_dict(),
                map_function=map_pubmed_file,
                workers=workers,
                strict=strict,
                keep_work=keep_work,
                command=command,
                callbacks=progress.callbacks(),
            )
    except BuildLocked as error:
        console.print(f"[red]error[/red]: {escape(str(error))}")
        sys.exit(1)
    except BuildAborted as error:
        console.print(f"[red]stopped (--strict)[/red]: {escape(str(error))}")
        console.print("nothing was published; an earlier complete output in the folder is untouched")
        sys.exit(1)
    print_summary(outcome.record)
    if not outcome.ok:
        console.print(
            f"[red]{len(outcome.problems)} problem(s)[/red]: the shards hold every file that could be read;"
            " build.json lists the problems and says complete: false"
        )
        sys.exit(1)


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--inputs", "check_inputs", is_flag=True, help="Also re-hash the input files.")
def verify(directory: Path, check_inputs: bool) -> None:
    """Recompute checksums and counts against DIRECTORY/build.json and say exactly what differs."""
    from corpusbuild.verify import verify_build

    differences, summary = verify_build(directory, check_inputs=check_inputs)
    if differences:
        for line in differences:
            click.echo(f"DIFFERS {line}")
        click.echo(f"{directory}: {len(differences)} difference(s) from build.json")
        sys.exit(1)
    click.echo(f"{directory}: OK ({summary})")


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["medrag", "jsonl", "parquet"]), required=True)
@click.option("--out", "out_path", required=True, type=click.Path(path_type=Path), help="Output file.")
def export(directory: Path, fmt: str, out_path: Path) -> None:
    """Export a built corpus: MedRAG JSONL (id,title,content,contents), full JSONL, or Parquet."""
    from corpusbuild.export import ExportError, export_corpus

    try:
        written = export_corpus(directory, fmt, out_path)
    except ExportError as error:
        console.print(f"[red]export failed[/red]: {error}")
        sys.exit(1)
    click.echo(f"wrote {written:,} snippets to {out_path} ({fmt})")


if __name__ == "__main__":
    main()
