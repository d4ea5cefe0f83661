"""What a person sees while a build runs (progress bars) and after it (a summary table)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from corpusbuild.engine.shardbuild import BuildCallbacks
from corpusbuild.errors import InputProblem

console = Console(stderr=True, soft_wrap=True)  # never wrap: paths must stay copyable


class BuildProgress:
    """Rich progress bars for the parse and merge phases, fed by the engine's callbacks."""

    def __init__(self, enabled: bool = True):
        self.progress = Progress(
            TextColumn("{task.description:<14}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
        )
        self._tasks: dict[str, int] = {}
        self._documents = 0
        self._snippets = 0

    def __enter__(self) -> BuildProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def callbacks(self) -> BuildCallbacks:
        return BuildCallbacks(file_done=self._file_done, shard_done=self._shard_done, phase=self._phase)

    def _phase(self, name: str, total: int) -> None:
        label = {"parse": "parsing files", "merge": "writing shards"}.get(name, name)
        self._tasks[name] = self.progress.add_task(label, total=total, detail="")

    def _file_done(self, result: dict, reused: bool) -> None:
        self._documents += documents_read(result.get("stats", {}))
        detail = f"{self._documents:,} records read"
        if result["status"] != "ok":
            console.print(f"[red]error[/red]: {escape(problem_text(result['error']))}")
        self.progress.update(self._tasks["parse"], advance=1, detail=detail)

    def _shard_done(self, result: dict, reused: bool) -> None:
        self._snippets += result["records"]
        self.progress.update(self._tasks["merge"], advance=1, detail=f"{self._snippets:,} snippets written")


def documents_read(stats: dict) -> int:
    """Documents a file (or a build) held: PubMed counts "articles", the other sources "documents_read"."""
    return stats.get("articles") or stats.get("documents_read", 0)


def problem_text(problem: dict) -> str:
    return str(InputProblem(**problem))


def summary_fields(record: dict, out_dir, kept_work_bytes: int | None = None) -> dict:
    """The end-of-run table as one object, the line a build's `--json` prints (keys in this order): type
    "source", source, out, complete, input_files, input_files_reused, input_files_failed, documents_read,
    documents_kept, deletions, replaced, deleted, delete_unmatched, skipped (reason: count),
    bad_records, ids_normalised, snippets, shards, shard_bytes, kept_work_bytes (what OUT/.work
    keeps: 0 with --no-keep-work), errors, seconds, workers."""
    counts = record["counts"]
    run = record["run"]
    return {
        "type": "source",
        "source": record["source"],
        "out": str(out_dir),
        "complete": record["complete"],
        "input_files": counts["input_files"],
        "input_files_reused": run["reused_file_tasks"],
        "input_files_failed": counts["input_files_failed"],
        "documents_read": documents_read(counts),
        "documents_kept": counts["documents"],
        "deletions": counts.get("deletions", 0),
        "replaced": counts.get("replaced", 0),
        "deleted": counts.get("deleted", 0),
        "delete_unmatched": counts.get("delete_unmatched", 0),
        "skipped": dict(counts["skipped"]),
        "bad_records": counts.get("bad_records", 0),
        "ids_normalised": counts.get("ids_normalised", 0),
        "snippets": counts["snippets"],
        "shards": len(record["outputs"]),
        "shard_bytes": sum(output["bytes"] for output in record["outputs"]),
        "kept_work_bytes": kept_work_bytes,
        "errors": len(record["errors"]),
        "seconds": run["seconds"]["total"],
        "workers": run["workers"],
    }


def print_summary(
    record: dict,
    out_console: Console | None = None,
    document_label: str = "articles",
    kept_work_bytes: int | None = None,
) -> None:
    """The end-of-run table: files, records, replacements, deletions, skips, snippets, shards, disk per
    snippet (shards, and the parse cache kept in .work), speed."""
    out_console = out_console or Console()
    counts = record["counts"]
    run = record["run"]
    seconds = run["seconds"]["total"]
    read = documents_read(counts)
    table = Table(title=f"corpusbuild {record['source']}: {'complete' if record['complete'] else 'FAILED'}")
    table.add_column("what")
    table.add_column("count", justify="right")
    reused = run["reused_file_tasks"]
    table.add_row("input files", f"{counts['input_files']:,} ({reused} reused from an earlier run)")
    table.add_row("input files failed", f"{counts['input_files_failed']:,}")
    table.add_row(f"{document_label} read", f"{read:,}")
    table.add_row(f"{document_label} kept", f"{counts['documents']:,}")
    if "deletions" in counts or counts["replaced"]:  # sources whose files update earlier ones
        table.add_row("deletions listed", f"{counts.get('deletions', 0):,}")
        table.add_row("replaced by a later version", f"{counts['replaced']:,}")
        table.add_row("deleted", f"{counts['deleted']:,}")
        table.add_row("deletions of unseen ids", f"{counts['delete_unmatched']:,}")
    for reason, number in counts["skipped"].items():
        table.add_row(f"skipped: {reason}", f"{number:,}")
    table.add_row("bad records", f"{counts.get('bad_records', 0):,}")
    if counts.get("ids_normalised"):  # "007" read as 7 (corpusbuild.ids)
        table.add_row("ids with leading zeros, read as numbers", f"{counts['ids_normalised']:,}")
    table.add_row("snippets", f"{counts['snippets']:,}")
    table.add_row("shards", f"{len(record['outputs']):,}")
    if counts["snippets"]:
        shard_bytes = sum(output["bytes"] for output in record["outputs"])
        table.add_row("bytes per snippet: shards", f"{shard_bytes / counts['snippets']:,.0f}")
        if kept_work_bytes is not None:
            table.add_row("bytes per snippet: kept .work", f"{kept_work_bytes / counts['snippets']:,.0f}")
    table.add_row("time", f"{seconds:.2f} s ({run['workers']} workers)")
    table.add_row(f"{document_label}/s", f"{read / seconds if seconds > 0 else 0.0:,.0f}")
    out_console.print(table)
    for problem in record["errors"][:20]:
        console.print(f"[red]error[/red]: {escape(problem_text(problem))}")
    if len(record["errors"]) > 20:
        console.print(f"... and {len(record['errors']) - 20} more errors (see build.json)")
