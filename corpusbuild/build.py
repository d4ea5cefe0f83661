"""Building sources into snippet shards, as corpusbuild's commands, `medsnip build` and `medsnip update`
all do it: one source's build with progress bars and a summary (`run_build`), and every source of a recipe
into one corpus root (`build_recipe_sources`). The CLIs only turn their options into these calls."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import click
from rich.markup import escape

from corpusbuild.engine.report import BuildProgress, console, print_summary, problem_text, summary_fields
from corpusbuild.engine.shardbuild import BuildAborted, BuildLocked, BuildOutcome, NothingRead, run_sharded_build
from corpusbuild.errors import OutputError
from corpusbuild.inputs import expand_inputs, output_folder_problem
from corpusbuild.recipe import check_checksums, root_record
from corpusbuild.sources import KINDS
from corpusbuild.sources.wikipedia.dump_ranges import RANGE_BYTES
from medsnip.buildrecord import BUILD_RECORD, foreign_folder_problem, read_build_record, write_build_record
from medsnip.executor_options import executor_from_options
from medsnip.jsonout import emit_json


def _split_function(source_kind, options: dict):
    """The source's input splitter with the command's range size, if the source can split inputs."""
    if source_kind.split_function is None:
        return None
    range_bytes = int(options.get("range_mb", RANGE_BYTES / 2**20) * 2**20)
    return functools.partial(source_kind.split_function, range_bytes=range_bytes)


def run_build(*, kind: str, source: str, inputs, params: dict, options: dict) -> BuildOutcome:
    """Build one source with progress bars and a summary; returns the outcome (the caller decides
    the exit status)."""
    source_kind = KINDS[kind]
    files, problems = expand_inputs(inputs, source_kind.suffixes)
    if not files:  # nothing to build: say why and write nothing (no empty shards beside a good build)
        for problem in problems:
            console.print(f"[red]error[/red]: {escape(problem.file)}: {escape(problem.message)}", soft_wrap=True)
        console.print(f"nothing was built: no input file; {escape(str(options['out_dir']))} is untouched")
        sys.exit(1)
    # absolute from here on: the record (and every parse kept for reuse) must name inputs that a later
    # `medsnip update`, run from any directory, finds again
    files = [Path(os.path.abspath(path)) for path in files]
    created = _first_missing(Path(options["out_dir"]))  # (a run that publishes nothing removes it again)
    out_problem = output_folder_problem(options["out_dir"], inputs, files, options.get("force", False))
    if out_problem:
        raise click.BadParameter(out_problem, param_hint="--out")
    try:
        with (
            executor_from_options(options) as executor,
            BuildProgress(enabled=not options["quiet"]) as progress,
        ):
            outcome = run_sharded_build(
                source=source,
                inputs=source_kind.order(files),
                input_problems=problems,
                out_dir=options["out_dir"],
                num_shards=options["shards"],
                params=params,
                read=source_kind.read,
                workers=executor.slots,
                executor=executor,
                strict=options["strict"],
                keep_work=options["keep_work"],
                on_duplicate=source_kind.on_duplicate,
                position_name=source_kind.position_name,
                split_function=_split_function(source_kind, options),
                command=shlex.join(["corpusbuild", *sys.argv[1:]]),
                callbacks=progress.callbacks(),
            )
    except BuildLocked as error:
        console.print(f"[red]error[/red]: {escape(str(error))}")
        sys.exit(1)
    except NothingRead as error:
        for problem in error.unreported:  # (the files that failed to parse were named as they failed)
            console.print(f"[red]error[/red]: {escape(problem_text(problem))}")
        if created is not None:  # the folders this run made hold only its lock and scratch space
            shutil.rmtree(created, ignore_errors=True)
        console.print(f"nothing was built: no input file could be read; {escape(str(options['out_dir']))} is untouched")
        sys.exit(1)
    except BuildAborted as error:
        console.print(f"[red]error[/red]: stopped (--strict): {escape(str(error))}")
        console.print("nothing was published; an earlier complete output in the folder is untouched")
        sys.exit(1)
    except OutputError as error:
        console.print(f"[red]error[/red]: {escape(str(error))}")
        console.print(
            f"the build stopped and published nothing; an earlier build in {escape(str(options['out_dir']))} is"
            " untouched (free some space, or choose another --out, and run the same command again: finished"
            " work is reused)"
        )
        sys.exit(1)
    as_json = options.get("as_json", False)  # --json: the table to stderr, its numbers as one line on stdout
    print_summary(
        outcome.record,
        out_console=console if as_json else None,
        document_label=source_kind.document_label,
        kept_work_bytes=outcome.kept_work_bytes,
    )
    if as_json:
        emit_json(summary_fields(outcome.record, options["out_dir"], outcome.kept_work_bytes))
    return outcome


def _first_missing(folder: Path) -> Path | None:
    """The outermost of `folder` and its parents that does not exist yet (None if `folder` exists)."""
    missing = None
    while not os.path.lexists(folder) and folder != folder.parent:
        missing, folder = folder, folder.parent
    return missing


def exit_on_problems(outcome: BuildOutcome) -> None:
    if not outcome.ok:
        console.print(
            f"[red]{len(outcome.problems)} problem(s)[/red]: the shards hold every file that could be read;"
            " build.json lists the problems and says complete: false"
        )
        sys.exit(1)


def _set_aside_dropped_sources(root: Path, kept: set[str]) -> dict[str, Path]:
    """Corpora an earlier build of this root made for sources the recipe no longer has, moved to
    ROOT/.dropped/NAME (a hidden folder: searchd serves every corpus folder of a root, and would go on
    serving them; kept rather than deleted, for whoever still reads them). {name: where it went}."""
    try:
        earlier = read_build_record(root)
    except (FileNotFoundError, ValueError):
        return {}
    if earlier.get("stage") != "corpusbuild.build":
        return {}
    moved = {}
    for entry in earlier.get("sources", []):
        name = str(entry.get("name", ""))
        folder = root / name
        if name and name not in kept and "/" not in name and (folder / BUILD_RECORD).is_file():
            target = root / ".dropped" / name
            if target.exists():
                target = target.with_name(f"{name}-{int(time.time())}")
            target.parent.mkdir(exist_ok=True)
            os.replace(folder, target)
            moved[name] = target
    return moved


def build_recipe_sources(recipe, root: Path, options: dict, require_checksums: bool) -> tuple[dict, dict[str, float]]:
    """Every source of `recipe` built into `root` (checksums first: a mismatch builds nothing), then the
    root's build.json; returns (that record, seconds per source). Exits 1 on a checksum problem."""
    if Path(root).exists() and not Path(root).is_dir():  # refused before any stage starts (or prints)
        raise click.BadParameter(f"{root} exists and is not a folder", param_hint="--out")
    names = {source.name for source in recipe.sources}
    own = names | {"serve.json"}  # what a killed build of it left
    if not options.get("force"):
        foreign = foreign_folder_problem(Path(root), "corpusbuild.build", "no recipe build wrote", own)
        if foreign:
            raise click.BadParameter(foreign, param_hint="--out")
    problems = [p for source in recipe.sources for p in check_checksums(source, require_checksums)]
    if problems:
        for problem in problems:
            console.print(f"[red]error[/red]: {escape(problem)}")
        console.print("nothing was built: fix the inputs or the recipe's checksums")
        sys.exit(1)
    set_aside = _set_aside_dropped_sources(Path(root), names)
    records, seconds = {}, {}
    for source in recipe.sources:
        if not options["quiet"]:
            console.rule(f"{source.name} ({source.kind})")
        started = time.perf_counter()
        outcome = run_build(
            kind=source.kind,
            source=source.name,
            inputs=source.inputs,
            params=source.params(),
            options={**options, "out_dir": root / source.name, "shards": source.shards},
        )
        records[source.name] = outcome.record
        seconds[source.name] = time.perf_counter() - started
    record = root_record(recipe, root, records)
    write_build_record(root, record)
    for name, moved in set_aside.items():
        console.print(f"source {name} is no longer in the recipe: its corpus was moved to {moved} (not served)")
    snippets = sum(s["snippets"] for s in record["sources"])
    console.print(f"corpus root {root}: {len(records)} sources, {snippets:,} snippets, complete: {record['complete']}")
    if options.get("as_json"):
        emit_json(
            {
                "type": "root",
                "root": str(root),
                "sources": len(records),
                "snippets": snippets,
                "complete": record["complete"],
            }
        )
    return record, seconds
