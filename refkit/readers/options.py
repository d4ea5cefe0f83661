"""The reader options of `refkit noise`, given on the command line or as a [reader] table in a TOML file
(`--reader-config`; the command line wins). The API key is read from an environment variable or a file:
no option takes the key itself, so it never lands in a shell history, a process list or a record."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import click

from refkit.readers.errors import ReaderError
from refkit.readers.prompts import TASKS
from refkit.readers.reader import READER_KINDS

DEFAULTS = {"key_env": "OPENAI_API_KEY", "mode": "decide", "timeout": 60.0, "retries": 4, "rate": 0.0}
_PATH = click.Path(path_type=Path)
_OPTIONS = (
    (
        "kind",
        "--reader",
        {"type": click.Choice(list(READER_KINDS))},
        "The reader to ask: an openai-compatible "
        "endpoint, a causal-lm or a cross-encoder on disk [default: none; docs: refkit/readers].",
    ),
    ("model", "--reader-model", {}, "The endpoint's model name, or the local folder / .gguf file."),
    ("url", "--reader-url", {}, "The OpenAI-compatible endpoint's base URL (http://127.0.0.1:8000/v1)."),
    ("key_env", "--reader-key-env", {}, "Environment variable holding the API key [default: OPENAI_API_KEY]."),
    (
        "key_file",
        "--reader-key-file",
        {"type": click.Path(path_type=Path, exists=True, dir_okay=False)},
        "File holding the API key.",
    ),
    ("tasks", "--reader-tasks", {}, f"Comma-separated tasks of {', '.join(TASKS)} [default: all the reader can do]."),
    (
        "mode",
        "--reader-mode",
        {"type": click.Choice(["decide", "advise"])},
        "decide: its verdicts refuse swaps and candidates; advise: recorded only [default: decide].",
    ),
    ("cache", "--reader-cache", {"type": _PATH}, "Answer cache to read and append [default: OUT.reader-cache.jsonl]."),
    (
        "replay",
        "--replay",
        {"type": click.Path(path_type=Path, exists=True, dir_okay=False)},
        "Answer from this reader cache alone, with no reader: the run of that cache byte for byte.",
    ),
    ("threshold", "--reader-threshold", {"type": float}, "A cross-encoder's score from which it says yes."),
    (
        "templates",
        "--reader-templates",
        {"type": click.Path(path_type=Path, exists=True, file_okay=False)},
        "Your own prompt templates (TASK.vN.txt) [default: refkit's].",
    ),
    ("timeout", "--reader-timeout", {"type": click.FloatRange(0, min_open=True)}, "Seconds per request [default: 60]."),
    (
        "retries",
        "--reader-retries",
        {"type": click.IntRange(0)},
        "Retries of a failed request, with exponential backoff [default: 4].",
    ),
    ("rate", "--reader-rate", {"type": click.FloatRange(0)}, "Requests per second at most [default: no limit]."),
)


def reader_options(command):
    """Adds the reader options and passes them to `command` as one dict, `reader_settings`."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        settings = {key: kwargs.pop(f"reader_{key}") for key, *_ in _OPTIONS}
        settings["config"] = kwargs.pop("reader_config")
        return command(*args, reader_settings=settings, **kwargs)

    for key, flag, extra, text in reversed(_OPTIONS):
        run = click.option(flag, f"reader_{key}", help=text, **extra)(run)
    return click.option(
        "--reader-config",
        "reader_config",
        type=click.Path(path_type=Path, exists=True, dir_okay=False),
        help="A TOML file whose [reader] table gives these options (kind, model, url, tasks, ...).",
    )(run)


def resolve_settings(settings: dict, out: Path) -> dict | None:
    """The reader's options (config file, then the command line, then defaults), or None for no reader."""
    given = {}
    if settings.get("config"):
        path = settings["config"]
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("reader", {})
        except tomllib.TOMLDecodeError as error:
            raise ReaderError(f"{path}: not TOML ({error})") from None
        unknown = set(table) - {key for key, *_ in _OPTIONS}
        if unknown:
            raise ReaderError(f"{path}: [reader] has unknown key(s) {', '.join(sorted(unknown))}")
        given.update(table)
    given.update({k: v for k, v in settings.items() if v is not None and k != "config"})
    if not given.get("kind") and not given.get("replay"):
        if given:
            raise click.UsageError(f"reader options given without --reader: {', '.join(sorted(given))}")
        return None
    if given.get("kind") and given.get("replay"):
        raise click.UsageError("--replay answers without a reader: give --replay or --reader, not both")
    tasks = given.get("tasks")
    if isinstance(tasks, str):
        tasks = [t.strip() for t in tasks.split(",") if t.strip()]
    unknown = [t for t in tasks or () if t not in TASKS]
    if unknown:
        raise ReaderError(f"--reader-tasks: unknown task(s) {', '.join(unknown)}; the tasks are {', '.join(TASKS)}")
    resolved = {**DEFAULTS, **given, "tasks": tasks}
    resolved.setdefault("cache", out.with_name(out.name + ".reader-cache.jsonl"))
    return resolved
