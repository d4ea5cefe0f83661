"""`medsnip`: jobs over several stages. `medsnip fetch RECIPE`, `medsnip build RECIPE --out ROOT`, `medsnip update
CORPUS --pubmed-updates DIR [--fetch] [--reload-pid PID]`, `medsnip prune FOLDER`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from medsnip import __version__
from medsnip.cli_errors import ToolGroup, fail
from medsnip.executor_options import executor_options, with_options
from medsnip.jsonout import emit_json, human_output_to_stderr, json_option


@click.group(cls=ToolGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="medsnip")
def main() -> None:
    """Jobs that run corpusbuild, indexer and searchd in order."""


@main.command()
@click.argument("recipe_path", metavar="RECIPE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "root", required=True, type=click.Path(path_type=Path), help="The served root to build.")
@click.option("--var", "variables", multiple=True, help="Override a recipe variable: NAME=VALUE.")
@with_options(executor_options("corpusbuild's parse and merge tasks, BM25 groups and embedding workers"))
@click.option(
    "--require-checksums", is_flag=True, help="Refuse inputs without a pinned sha256 (in the recipe or its lock)."
)
@click.option(
    "--lock",
    "lock_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The lock `medsnip fetch` wrote, whose sha256s pin the inputs [default: RECIPE.lock when it exists].",
)
@click.option("--force", is_flag=True, help="Build into an --out folder that holds files no recipe build wrote.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@json_option(
    'the stage table: one object per stage (type "stage": stage, corpus, status, seconds, bytes, detail), then '
    'type "total": recipe, root, seconds, bytes; the sources\' tables go to stderr'
)
def build(
    recipe_path: Path,
    root: Path,
    variables: tuple[str, ...],
    workers: int,
    executor: str,
    ray_address: str | None,
    require_checksums: bool,
    lock_file: Path | None,
    force: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Build everything a recipe names into one served root: its corpora, each corpus's indexes
    ([indexes.NAME] tables: store, BM25, dense) and what searchd serves ([serve] -> ROOT/serve.json).

    What is still current is reused; a killed build, run again, resumes and ends with the root an
    uninterrupted build makes. Prints each stage's time and size."""
    from corpusbuild.build import build_recipe_sources
    from corpusbuild.cli import load_recipe_or_exit, parse_variables
    from indexer.dense import EmbeddingError
    from indexer.dense.job import DeviceError
    from medsnip.encoders import EncoderUnavailable
    from medsnip.executor_options import executor_from_options
    from medsnip.joblock import FolderBusy
    from pipeline.recipe_build import RecipeBuildError, build_root

    recipe = load_recipe_or_exit(recipe_path, parse_variables(variables))
    pin_from_lock(recipe, lock_file)
    options = {
        "workers": workers,
        "executor": executor,
        "ray_address": ray_address,
        "strict": False,
        "keep_work": True,
        "quiet": quiet,
        "force": force,
    }

    def build_sources(recipe, root: Path) -> dict[str, float]:
        record, seconds = build_recipe_sources(recipe, root, options, require_checksums)
        if not record["complete"]:
            raise RecipeBuildError(
                f"{root}/build.json: a source is incomplete (its build.json lists the problems); no index was built"
            )
        return seconds

    started = time.perf_counter()
    try:
        with human_output_to_stderr(as_json), executor_from_options(options) as runner:
            runs = build_root(
                recipe, root, build_sources=build_sources, executor=runner, log=lambda line: click.echo(line, err=True)
            )
    except (RecipeBuildError, EncoderUnavailable, FolderBusy, EmbeddingError, DeviceError) as error:
        fail(str(error))
    seconds = time.perf_counter() - started
    if as_json:
        for run in runs:
            emit_json(
                {
                    "type": "stage",
                    "stage": run.stage,
                    "corpus": run.corpus,
                    "status": run.status,
                    "seconds": round(run.seconds, 3),
                    "bytes": run.bytes,
                    "detail": run.detail,
                }
            )
        emit_json(
            {
                "type": "total",
                "recipe": recipe.name,
                "root": str(root),
                "seconds": round(seconds, 3),
                "bytes": sum(run.bytes for run in runs),
            }
        )
    else:
        print_stage_table(runs, recipe.name, root, seconds)


def pin_from_lock(recipe, lock_file: Path | None) -> None:
    """The lock's sha256s as the recipe's pins (fetcher.lockfile), when there is a lock; exits 1 on a bad one."""
    from fetcher.lockfile import Lock, LockError, lock_path, pin_recipe

    path = lock_path(recipe.path, lock_file)
    if lock_file is not None and not path.is_file():
        fail(f"{path}: no such lock file (write one with medsnip fetch)")
    try:
        if path.is_file():
            pin_recipe(recipe, Lock.read(path, recipe.name))
    except LockError as error:
        fail(str(error))


@main.command()
@click.argument("recipe_path", metavar="RECIPE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--var", "variables", multiple=True, help="Override a recipe variable: NAME=VALUE.")
@click.option(
    "--lock",
    "lock_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Where the lock file goes [default: RECIPE.lock beside the recipe].",
)
@click.option("--update-lock", is_flag=True, help="Take files that changed upstream since the lock, and re-pin them.")
@click.option("--dry-run", is_flag=True, help="Print what would be fetched, and how many bytes, and stop.")
@click.option("--connections", default=3, show_default=True, type=click.IntRange(1, 16), help="At once per host.")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(1), help="Seconds without a byte.")
@click.option("--attempts", default=8, show_default=True, type=click.IntRange(1), help="Tries per file (resumed).")
@click.option(
    "--backoff",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds before a first retry (doubled).",
)
@click.option("--quiet", is_flag=True, help="No progress bars.")
@json_option("one object per file (source, name, status, bytes), then the totals (files, bytes, lock)")
def fetch(
    recipe_path: Path,
    variables: tuple[str, ...],
    lock_file: Path | None,
    update_lock: bool,
    dry_run: bool,
    connections: int,
    timeout: float,
    attempts: int,
    backoff: float,
    quiet: bool,
    as_json: bool,
) -> None:
    """Fetch a recipe's inputs from their publishers ([sources.publisher]: NLM's listings, a Wikimedia dump, a
    file, a release archive) into its input folders: resumed with HTTP Range after a cut, retried with backoff
    on 5xx, 429 (Retry-After) and resets, verified against the publisher's checksums (NLM's .md5 files,
    Wikimedia's sha1), never left partial under a file's final name; each file's size, publisher checksum and
    sha256 go into the lock file, which `medsnip build --require-checksums` then checks the inputs against."""
    from corpusbuild.cli import load_recipe_or_exit, parse_variables
    from fetcher.download import Downloader, FetchError, FetchSettings
    from fetcher.fetch import disk_free, plan_fetch
    from fetcher.lockfile import Lock, LockError, lock_path
    from fetcher.publishers import PublisherError, publisher_of

    recipe = load_recipe_or_exit(recipe_path, parse_variables(variables))
    try:
        publishers = [
            publisher
            for number, source in enumerate(recipe.sources, 1)
            if (publisher := publisher_of(source, f"{recipe.path}: [[sources]] #{number} ({source.name})"))
        ]
        if not publishers:
            fail(f"{recipe.path}: no source names its publisher ([sources.publisher]); nothing to fetch")
        lock = Lock.read(lock_path(recipe.path, lock_file), recipe.name)
        settings = FetchSettings(connections, attempts, backoff, timeout=timeout)
        with Downloader(settings) as downloader, human_output_to_stderr(as_json):
            if dry_run:
                plan = plan_fetch(publishers, downloader, sizes=True)
                missing = [item for item in plan if not item.present]
                known = sum(item.size or 0 for item in missing)
                unknown = sum(1 for item in missing if item.size is None)
                for item in missing:
                    size = "size unknown" if item.size is None else f"{item.size:,} bytes"
                    click.echo(f"fetch {item.remote.url} -> {item.dest} ({size})", err=as_json)
                free = min((disk_free(p.folder) for p in publishers), default=0)
                click.echo(
                    f"{len(missing)} of {len(plan)} files to fetch, {known:,} bytes"
                    + (f" and {unknown} of unknown size" if unknown else "")
                    + f"; {free:,} bytes free in the input folders",
                    err=as_json,
                )
                if as_json:
                    emit_json({"type": "plan", "files": len(plan), "missing": len(missing), "bytes": known})
                return
            outcomes = _fetch_with_progress(publishers, lock, downloader, update_lock, quiet or as_json)
    except (FetchError, PublisherError, LockError) as error:
        fail(str(error))
    fetched = [o for o in outcomes if o.status == "fetched"]
    if as_json:
        for outcome in outcomes:
            emit_json({"type": "file", **outcome.__dict__})
        emit_json({"type": "totals", "files": len(outcomes), "fetched": len(fetched), "lock": str(lock.path)})
    else:
        counts = {
            status: sum(1 for o in outcomes if o.status == status) for status in sorted({o.status for o in outcomes})
        }
        click.echo(
            f"{len(outcomes)} files: {', '.join(f'{n} {status}' for status, n in counts.items())}; "
            f"{sum(o.bytes for o in fetched):,} bytes fetched; pinned in {lock.path}"
        )


def _fetch_with_progress(publishers, lock, downloader, update_lock: bool, quiet: bool):
    """fetch_recipe with a progress bar per file and one for all (bytes, rate, time left) on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    from fetcher.fetch import fetch_recipe

    if quiet:
        return fetch_recipe(publishers, lock, downloader, update_lock)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        overall = progress.add_task("all files", total=None)

        def on_start(item):
            task = None  # a bar once bytes arrive: a file already present gets none

            def advance(count: int) -> None:
                nonlocal task
                if task is None:
                    task = progress.add_task(item.remote.name, total=item.size)
                progress.advance(task, count)
                progress.advance(overall, count)

            return advance

        return fetch_recipe(publishers, lock, downloader, update_lock, on_start)


def print_stage_table(runs, name: str, root: Path, seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("stage", "corpus", "status", "seconds", "size", "", title=f"medsnip build {name} -> {root}")
    for run in runs:
        table.add_row(run.stage, run.corpus, run.status, f"{run.seconds:.1f}", _size(run.bytes), run.detail)
    table.add_row("total", "", "", f"{seconds:.1f}", _size(sum(run.bytes for run in runs)), "")
    console = Console() if Console().is_terminal else Console(width=140)
    console.print(table)


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1000
    return ""


NLM_UPDATES = "https://ftp.ncbi.nlm.nih.gov/pubmed/updatefiles/"


@main.command()
@click.argument("corpus_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option(
    "--pubmed-updates",
    "folders",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="A folder (or file) of NLM update files (repeatable); with --fetch, the one folder they are fetched into.",
)
@click.option(
    "--fetch",
    "fetch_updates",
    is_flag=True,
    help="First fetch from NLM's updatefiles/ the files numbered after the last one the corpus applied, each "
    "verified against its .md5 (a cron job's one command).",
)
@click.option("--updates-url", default=NLM_UPDATES, show_default=True, help="NLM's update files listing (--fetch).")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1), help="corpusbuild workers.")
@click.option("--reload-pid", type=int, help="searchd's process id: sent SIGHUP once the indexes are rebuilt.")
@json_option(
    "only the summary the last line always is (applied, seconds, changes, indexes, fetched with --fetch, and "
    "reloaded with --reload-pid); the corpus build's table goes to stderr"
)
def update(
    corpus_dir: Path,
    folders: tuple[Path, ...],
    fetch_updates: bool,
    updates_url: str,
    workers: int,
    reload_pid: int | None,
    as_json: bool,
) -> None:
    """Apply new PubMed update files to a built corpus, rebuild its indexes, reload searchd.

    Files the corpus already read are skipped; the corpus records its change set; dense indexes embed
    only added or changed snippets. Run it again after a failure: every stage resumes. With --fetch, the
    new update files are fetched first (fetcher.fetch); nothing is applied from a file that failed its
    verification."""
    from medsnip.buildrecord import NotACorpus, read_corpus_record
    from medsnip.joblock import FolderBusy, folder_job
    from pipeline.update import UpdateError
    from pipeline.update import update as run_update

    missing = [str(folder) for folder in folders if not folder.exists()]
    if missing and not fetch_updates:
        fail(f"--pubmed-updates: {', '.join(missing)}: no such file or folder (check the path)")
    if fetch_updates and len(folders) != 1:
        fail("--fetch takes one --pubmed-updates folder to fetch into")
    fetched: list[str] = []
    try:
        record = read_corpus_record(corpus_dir)  # a folder that is no corpus is refused before its job lock is made
        with folder_job(corpus_dir, "update"), human_output_to_stderr(as_json):
            if fetch_updates:
                fetched = _fetch_updates(record, folders[0], updates_url)
            summary = run_update(
                corpus_dir,
                list(folders),
                workers=workers,
                reload_pid=reload_pid,
                log=lambda line: click.echo(line, err=True),
            )
    except (UpdateError, NotACorpus, ProcessLookupError, FolderBusy) as error:
        fail(str(error))
    if fetch_updates:
        summary["fetched"] = fetched
    if as_json:
        emit_json(summary)
    else:
        click.echo(json.dumps(summary))  # the last line of the output: what the job did, as JSON


def _fetch_updates(record: dict, folder: Path, listing: str) -> list[str]:
    """NLM's update files after the last one the corpus applied, fetched into `folder` and verified (the folder's
    medsnip-updates.lock records them); exits 1, nothing applied, when one cannot be fetched or verified."""
    from fetcher.download import Downloader, FetchError
    from fetcher.fetch import NUMBERED, fetch_update_files, last_applied_number
    from fetcher.lockfile import Lock, LockError
    from fetcher.publishers import PublisherError

    names = [Path(entry["path"]).name for entry in record["inputs"]]
    prefixes = sorted({NUMBERED.split(name)[0] for name in names if NUMBERED.search(name)})
    if not prefixes:
        fail("--fetch: the corpus read no NLM-numbered file (pubmed26nNNNN.xml.gz); give --pubmed-updates files")
    pattern = f"{prefixes[-1]}n*.xml.gz"
    after = last_applied_number(names)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        lock = Lock.read(folder / "medsnip-updates.lock", "pubmed-updates")
        with Downloader() as downloader:
            paths = fetch_update_files(listing, pattern, folder, after, downloader, lock)
    except (FetchError, PublisherError, LockError) as error:
        fail(f"{error}. Nothing was applied")
    click.echo(f"fetched or verified {len(paths)} update files after number {after} into {folder}", err=True)
    return [path.name for path in paths]


@main.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--dry-run", is_flag=True, help="List what would be deleted.")
@click.option(
    "--lease-timeout",
    default=900.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds after which a lease written by a server on another host counts as gone.",
)
@json_option(
    'one object per generation deleted (type "deleted", or "would_delete" with --dry-run: path, bytes_only_here) '
    'and per generation kept for a running searchd (type "kept": path, leased_by), then type "total": folders, '
    "deleted, bytes_only_there, dry_run"
)
def prune(folders: tuple[Path, ...], dry_run: bool, lease_timeout: float, as_json: bool) -> None:
    """Delete the kept generations of corpus (or index) folders that no running searchd uses.

    An update keeps the corpus version and indexes it replaces under FOLDER/.generations (hard links);
    searchd leases what it serves. A generation is deleted once no live lease names it."""
    from medsnip.buildrecord import read_build_record
    from medsnip.generations import kept_generations
    from medsnip.generations import prune as prune_folder
    from medsnip.joblock import FolderBusy, folder_job

    for folder in folders:  # every folder checked before any is pruned (or given a job lock)
        try:
            read_build_record(folder)
        except (FileNotFoundError, ValueError) as error:
            fail(f"{error}: not a corpus or index folder (what updates keep generations of); nothing was pruned")
    deleted = freed = 0
    for folder in folders:
        corpus_folder = folder.parent if (folder.parent / "build.json").is_file() else folder  # an index's corpus
        try:
            with folder_job(corpus_folder, "prune"):
                removed = prune_folder(folder, dry_run=dry_run, lease_timeout=lease_timeout)
        except FolderBusy as error:
            fail(str(error))
        for kept in removed:
            deleted += 1
            freed += kept.bytes_only_here
            if as_json:
                what = "would_delete" if dry_run else "deleted"
                emit_json({"type": what, "path": str(kept.path), "bytes_only_here": kept.bytes_only_here})
                continue
            click.echo(
                f"{'would delete' if dry_run else 'deleted'} {kept.path} ({kept.bytes_only_here:,} bytes only there)"
            )
        for kept in kept_generations(folder, lease_timeout):
            if kept.leased_by and as_json:
                emit_json({"type": "kept", "path": str(kept.path), "leased_by": list(kept.leased_by)})
            elif kept.leased_by:
                click.echo(f"kept {kept.path}: served by {', '.join(kept.leased_by)}")
    if as_json:
        emit_json(
            {
                "type": "total",
                "folders": len(folders),
                "deleted": deleted,
                "bytes_only_there": freed,
                "dry_run": dry_run,
            }
        )


if __name__ == "__main__":
    main()
