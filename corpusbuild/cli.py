"""`corpusbuild`: build snippet shards from raw sources, verify them, export them."""

from __future__ import annotations

import functools
import os
import shlex
import sys
import time
from pathlib import Path

import click
from rich.markup import escape

from corpusbuild.chunking import ChunkingParams, validate_chunking
from corpusbuild.engine.report import BuildProgress, console, print_summary
from corpusbuild.engine.shardbuild import BuildAborted, BuildLocked, BuildOutcome, run_sharded_build
from corpusbuild.errors import OutputError
from corpusbuild.inputs import expand_inputs, output_folder_problem
from corpusbuild.recipe import RecipeError, check_checksums, load_recipe, root_record
from corpusbuild.sources import KINDS, SOURCE_NAME_RE, SourceKind, SourceOption
from corpusbuild.sources.wikipedia.dump_ranges import RANGE_BYTES
from medsnip import __version__
from medsnip.buildrecord import write_build_record
from medsnip.executor_options import executor_from_options, executor_options, with_options
from medsnip.languages import language_callback


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="corpusbuild")
def main() -> None:
    """Build reproducible ~1000-character snippet shards from biomedical sources."""


def build_options(command):
    """The options every source command shares: output, sharding, workers, chunking, failure policy."""
    options = [
        click.argument("inputs", nargs=-1, required=True),
        click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path), help="Output folder."),
        click.option("--shards", default=32, show_default=True, type=click.IntRange(1, 65536), help="Shards."),
        *executor_options("the parse and merge tasks"),
        click.option("--chunk-size", default=1000, show_default=True, type=int, help="Max characters a snippet."),
        click.option("--chunk-overlap", default=200, show_default=True, type=int, help="Characters chunks share."),
        click.option("--no-chunk", is_flag=True, help="One snippet per document."),
        click.option(
            "--separators",
            type=click.Choice(["auto", "default", "cjk"]),
            default="auto",
            show_default=True,
            help="Where chunks break: auto = at 。！？； in Chinese, Japanese and Korean text, LangChain's "
            "defaults otherwise; default / cjk = that set whatever the language.",
        ),
        click.option("--strict", is_flag=True, help="Stop at the first error; publish nothing."),
        click.option(
            "--keep-work/--no-keep-work",
            default=True,
            show_default=True,
            help="Keep parsed parts in OUT/.work so re-runs with more inputs re-parse only the new ones.",
        ),
        click.option("--quiet", is_flag=True, help="No progress bars."),
    ]
    return with_options(options)(command)


def chunking_params(chunk_size: int, chunk_overlap: int, no_chunk: bool, separators: str = "auto") -> ChunkingParams:
    try:
        validate_chunking(chunk_size, chunk_overlap)
    except ValueError as error:
        raise click.BadParameter(str(error)) from error
    return ChunkingParams(chunk=not no_chunk, chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=separators)


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
    # absolute from here on: the record (and every parse kept for reuse) must name inputs that a later
    # `medsnip update`, run from any directory, finds again
    files = [Path(os.path.abspath(path)) for path in files]
    out_problem = output_folder_problem(options["out_dir"], inputs, files)
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
    except BuildAborted as error:
        console.print(f"[red]stopped (--strict)[/red]: {escape(str(error))}")
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
    print_summary(outcome.record, document_label=source_kind.document_label, kept_work_bytes=outcome.kept_work_bytes)
    return outcome


def exit_on_problems(outcome: BuildOutcome) -> None:
    if not outcome.ok:
        console.print(
            f"[red]{len(outcome.problems)} problem(s)[/red]: the shards hold every file that could be read;"
            " build.json lists the problems and says complete: false"
        )
        sys.exit(1)


def check_source_name(name: str) -> None:
    if not SOURCE_NAME_RE.match(name):
        raise click.BadParameter("use lowercase letters, digits, '.', '_' or '-'", param_hint="--source")


def _click_option(option: SourceOption):
    """The command-line option for one of a source kind's options."""
    flag = "--" + option.name.replace("_", "-")
    if option.type is bool:
        return click.option(flag, option.name, is_flag=True, help=option.help)
    if option.language:
        return click.option(flag, option.name, callback=language_callback, help=option.help)
    if option.type is Path:
        return click.option(
            flag, option.name, type=click.Path(exists=True, dir_okay=False, path_type=Path), help=option.help
        )
    kinds = {int: click.IntRange(option.minimum), float: click.FloatRange(option.minimum)}
    value_type = click.Choice(option.choices) if option.choices else kinds.get(option.type, option.type)
    return click.option(
        flag,
        option.name,
        default=option.default,
        show_default=option.default is not None,
        type=value_type,
        help=option.help,
    )


def source_command(kind: SourceKind) -> click.Command:
    """`corpusbuild KIND INPUT... --out DIR`, made from the source table: the options every build takes,
    --source for a kind the user names, --range-mb for one whose inputs split, and the kind's own."""

    def command(inputs, chunk_size, chunk_overlap, no_chunk, **options) -> None:
        source_name = options.pop("source_name", kind.kind)
        check_source_name(source_name)
        chunking = chunking_params(chunk_size, chunk_overlap, no_chunk, options.pop("separators"))
        values = {option.name: options.pop(option.name) for option in kind.options}
        values = {name: str(value) if isinstance(value, Path) else value for name, value in values.items()}
        try:
            params = kind.params(chunking, source_name, **values)
        except ValueError as error:
            raise click.UsageError(str(error)) from None
        exit_on_problems(run_build(kind=kind.kind, source=source_name, inputs=inputs, params=params, options=options))

    extra = [_click_option(option) for option in kind.options]
    if kind.named:
        extra.insert(
            0,
            click.option(
                "--source",
                "source_name",
                required=kind.name_required,
                default=None if kind.name_required else kind.kind,
                show_default=not kind.name_required,
                help="Source name in ids (ids are SOURCE:id:chunk; one per collection or "
                "language, so ids of two never meet).",
            ),
        )
    if kind.split_function is not None:
        extra.insert(
            0,
            click.option(
                "--range-mb",
                default=RANGE_BYTES / 2**20,
                show_default=True,
                type=click.FloatRange(0),
                help="Split an input of at least a quarter of this into ranges of about this many MB, parsed in "
                "parallel "
                "(multistream .bz2, by its index or stream headers, or plain .xml); 0 never splits.",
            ),
        )
    command.__doc__ = kind.help
    return click.command(name=kind.kind)(build_options(with_options(extra)(command)))


for _kind in KINDS.values():
    main.add_command(source_command(_kind))


@main.command()
@click.argument("recipe_path", metavar="RECIPE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "root", required=True, type=click.Path(path_type=Path), help="Corpus root folder.")
@click.option("--var", "variables", multiple=True, help="Override a recipe variable: NAME=VALUE.")
@with_options(executor_options("the parse and merge tasks"))
@click.option("--require-checksums", is_flag=True, help="Refuse inputs without a pinned sha256 in the recipe.")
@click.option("--strict", is_flag=True, help="Stop at the first error; publish nothing.")
@click.option("--keep-work/--no-keep-work", default=True, show_default=True)
@click.option("--quiet", is_flag=True, help="No progress bars.")
def build(
    recipe_path, root, variables, workers, executor, ray_address, require_checksums, strict, keep_work, quiet
) -> None:
    """Build every source of a TOML recipe into one corpus root (ROOT/<source>/ + ROOT/build.json).

    The recipe's [indexes] and [serve] tables are for `medsnip build`, which runs this and then the
    indexer; here they are only checked to be tables."""
    recipe = load_recipe_or_exit(recipe_path, parse_variables(variables))
    options = {
        "workers": workers,
        "strict": strict,
        "keep_work": keep_work,
        "quiet": quiet,
        "executor": executor,
        "ray_address": ray_address,
    }
    record = build_recipe_sources(recipe, root, options, require_checksums)[0]
    if not record["complete"]:
        sys.exit(1)


def parse_variables(variables) -> dict[str, str]:
    """--var NAME=VALUE options as a dict (a usage error names the one without '=')."""
    overrides = {}
    for item in variables:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--var")
        overrides[name] = value
    return overrides


def load_recipe_or_exit(recipe_path: Path, overrides: dict[str, str]):
    try:
        return load_recipe(recipe_path, overrides)
    except RecipeError as error:
        console.print(f"[red]recipe error[/red]: {escape(str(error))}")
        sys.exit(1)


def build_recipe_sources(recipe, root: Path, options: dict, require_checksums: bool) -> tuple[dict, dict[str, float]]:
    """Every source of `recipe` built into `root` (checksums first: a mismatch builds nothing), then the
    root's build.json; returns (that record, seconds per source). Exits 1 on a checksum problem."""
    problems = [p for source in recipe.sources for p in check_checksums(source, require_checksums)]
    if problems:
        for problem in problems:
            console.print(f"[red]error[/red] {escape(problem)}")
        console.print("nothing was built: fix the inputs or the recipe's checksums")
        sys.exit(1)
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
    console.print(
        f"corpus root {root}: {len(records)} sources, "
        f"{sum(s['snippets'] for s in record['sources']):,} snippets, complete: {record['complete']}"
    )
    return record, seconds


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--inputs", "check_inputs", is_flag=True, help="Also re-hash the input files.")
def verify(directory: Path, check_inputs: bool) -> None:
    """Recompute checksums and counts against DIRECTORY/build.json and say exactly what differs."""
    from corpusbuild.engine.verify import verify_build

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
    from corpusbuild.engine.export import ExportError, export_corpus

    try:
        written = export_corpus(directory, fmt, out_path)
    except ExportError as error:
        console.print(f"[red]export failed[/red]: {escape(str(error))}")
        sys.exit(1)
    click.echo(f"wrote {written:,} snippets to {out_path} ({fmt})")


if __name__ == "__main__":
    main()
