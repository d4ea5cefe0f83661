"""`medsnip`: jobs over several stages. `medsnip update CORPUS --pubmed-updates DIR [--reload-pid PID]`,
`medsnip prune FOLDER`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from medsnip import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="medsnip")
def main() -> None:
    """Jobs that run corpusbuild, indexer and searchd in order."""


@main.command()
@click.argument("corpus_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option(
    "--pubmed-updates",
    "folders",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path, exists=True),
    help="A folder (or file) of NLM update files (repeatable).",
)
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1), help="corpusbuild workers.")
@click.option("--reload-pid", type=int, help="searchd's process id: sent SIGHUP once the indexes are rebuilt.")
def update(corpus_dir: Path, folders: tuple[Path, ...], workers: int, reload_pid: int | None) -> None:
    """Apply new PubMed update files to a built corpus, rebuild its indexes, reload searchd.

    Files the corpus already read are skipped; the corpus records its change set; dense indexes embed
    only added or changed snippets. Run it again after a failure: every stage resumes."""
    from medsnip.joblock import FolderBusy, folder_job
    from pipeline.update import UpdateError
    from pipeline.update import update as run_update

    try:
        with folder_job(corpus_dir, "update"):
            summary = run_update(corpus_dir, list(folders), workers=workers, reload_pid=reload_pid,
                                 log=lambda line: click.echo(line, err=True))  # fmt: skip
    except (UpdateError, ProcessLookupError, FolderBusy) as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)
    click.echo(json.dumps(summary))  # the last line of the output: what the job did, as JSON


@main.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--dry-run", is_flag=True, help="List what would be deleted.")
@click.option("--lease-timeout", default=900.0, show_default=True, type=click.FloatRange(0),
              help="Seconds after which a lease written by a server on another host counts as gone.")  # fmt: skip
def prune(folders: tuple[Path, ...], dry_run: bool, lease_timeout: float) -> None:
    """Delete the kept generations of corpus (or index) folders that no running searchd uses.

    An update keeps the corpus version and indexes it replaces under FOLDER/.generations (hard links);
    searchd leases what it serves. A generation is deleted once no live lease names it."""
    from medsnip.generations import kept_generations
    from medsnip.generations import prune as prune_folder
    from medsnip.joblock import FolderBusy, folder_job

    for folder in folders:
        corpus_folder = folder.parent if (folder.parent / "build.json").is_file() else folder  # an index's corpus
        try:
            with folder_job(corpus_folder, "prune"):
                removed = prune_folder(folder, dry_run=dry_run, lease_timeout=lease_timeout)
        except FolderBusy as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(1)
        for kept in removed:
            click.echo(
                f"{'would delete' if dry_run else 'deleted'} {kept.path} ({kept.bytes_only_here:,} bytes only there)"
            )
        for kept in kept_generations(folder, lease_timeout):
            if kept.leased_by:
                click.echo(f"kept {kept.path}: served by {', '.join(kept.leased_by)}")


if __name__ == "__main__":
    main()
