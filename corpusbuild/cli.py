"""`corpusbuild`: build snippet shards from raw sources, verify them, export them."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from corpusbuild.build import build_recipe_sources, exit_on_problems, run_build
from corpusbuild.chunking import ChunkingParams, validate_chunking
from corpusbuild.recipe import RecipeError, load_recipe
from corpusbuild.sources import KINDS, SOURCE_NAME_RE, SourceKind, SourceOption
from corpusbuild.sources.wikipedia.dump_ranges import RANGE_BYTES
from medsnip import __version__
from medsnip.cli_errors import ToolGroup, fail
from medsnip.executor_options import executor_options, with_options
from medsnip.jsonout import emit_json, json_option
from medsnip.languages import language_callback


@click.group(cls=ToolGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="corpusbuild")
def main() -> None:
    """Build reproducible ~1000-character snippet shards from biomedical sources."""


SOURCE_JSON = (
    'the summary table as one object with type "source" (source, out, complete, input_files, '
    "input_files_reused, input_files_failed, documents_read, documents_kept, deletions, replaced, deleted, "
    "delete_unmatched, skipped, bad_records, ids_normalised, snippets, shards, shard_bytes, kept_work_bytes, "
    "errors, seconds, workers); the table goes to stderr"
)


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
        click.option(
            "--force",
            is_flag=True,
            help="Build into an --out folder that holds files corpusbuild did not write (refused otherwise).",
        ),
        json_option(SOURCE_JSON),
    ]
    return with_options(options)(command)


def chunking_params(chunk_size: int, chunk_overlap: int, no_chunk: bool, separators: str = "auto") -> ChunkingParams:
    try:
        validate_chunking(chunk_size, chunk_overlap)
    except ValueError as error:
        raise click.BadParameter(str(error)) from error
    return ChunkingParams(chunk=not no_chunk, chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=separators)


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
                # no default at all when required: click 8.3+ takes an explicit default=None for a given
                # value, and a missing --source reached the command as None (an internal error)
                **({} if kind.name_required else {"default": kind.kind}),
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
@click.option("--force", is_flag=True, help="Build into an --out folder that holds files no recipe build wrote.")
@json_option(
    'one object per source, as a source command prints it (type "source"), then the root\'s (type "root": '
    "root, sources, snippets, complete)"
)
def build(
    recipe_path,
    root,
    variables,
    workers,
    executor,
    ray_address,
    require_checksums,
    strict,
    keep_work,
    quiet,
    force,
    as_json,
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
        "as_json": as_json,
        "force": force,
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
        fail(str(error))


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--inputs", "check_inputs", is_flag=True, help="Also re-hash the input files.")
@json_option(
    "directory, ok, differences (one sentence each), shards and snippets (as build.json records them; null "
    "where it cannot be read); the text goes to stderr"
)
def verify(directory: Path, check_inputs: bool, as_json: bool) -> None:
    """Recompute checksums and counts against DIRECTORY/build.json and say exactly what differs. A root of
    corpora (`medsnip build`'s, or searchd's ROOT) verifies each of its corpora."""
    from corpusbuild.engine.verify import corpora_of_root
    from medsnip.buildrecord import NotACorpus, read_corpus_record

    corpora = corpora_of_root(directory)
    if not corpora:
        try:
            read_corpus_record(directory)
        except NotACorpus as error:  # say what the folder is, not that it "differs"
            fail(f"{error}")
    reports = [_verify_one(corpus, check_inputs, as_json) for corpus in corpora or [directory]]
    if as_json:
        emit_json(reports[0] if not corpora else {"directory": str(directory), "root": True, "corpora": reports})
    differing = [r for r in reports if not r["ok"]]
    if corpora and differing:
        fail(
            f"{directory}: a root of {len(corpora)} corpora; {', '.join(Path(r['directory']).name for r in differing)} "
            "differ from their build.json (DIFFERS above): rebuild them with the same command, or restore what changed"
        )
    if differing:
        fail(  # the one error line (stderr, exit 1) after the report of what differs
            f"{directory}: {len(differing[0]['differences'])} difference(s) from build.json (DIFFERS above); rebuild "
            "it with the same corpusbuild command, or restore what changed"
        )


def _verify_one(directory: Path, check_inputs: bool, as_json: bool) -> dict:
    """Verify one corpus folder, printing its DIFFERS lines or its OK line; its JSON report."""
    from corpusbuild.engine.verify import verify_build
    from medsnip.buildrecord import read_build_record

    differences, summary = verify_build(directory, check_inputs=check_inputs)
    try:
        record = read_build_record(directory)
        shards, snippets = len(record["outputs"]), record["counts"]["snippets"]
    except (OSError, ValueError, KeyError, TypeError):
        shards = snippets = None
    for line in differences:
        click.echo(f"DIFFERS {line}", err=as_json)
    if not differences:
        click.echo(f"{directory}: OK ({summary})", err=as_json)
    return {
        "directory": str(directory),
        "ok": not differences,
        "differences": differences,
        "shards": shards,
        "snippets": snippets,
    }


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["medrag", "jsonl", "parquet"]), required=True)
@click.option("--out", "out_path", required=True, type=click.Path(path_type=Path), help="Output file.")
@json_option("snippets, out, format; the text goes to stderr")
def export(directory: Path, fmt: str, out_path: Path, as_json: bool) -> None:
    """Export a built corpus: MedRAG JSONL (id,title,content,contents), full JSONL, or Parquet."""
    from corpusbuild.engine.export import ExportError, export_corpus

    try:
        written = export_corpus(directory, fmt, out_path)
    except ExportError as error:
        fail(f"export failed: {error}")
    click.echo(f"wrote {written:,} snippets to {out_path} ({fmt})", err=as_json)
    if as_json:
        emit_json({"snippets": written, "out": str(out_path), "format": fmt})


if __name__ == "__main__":
    main()
