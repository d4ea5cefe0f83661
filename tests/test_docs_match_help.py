"""The README and the documentation site's pages (docs/**/*.md) cannot drift from the commands: every option
their command examples use exists on that command, and every default they state in prose is the command's
default."""

from __future__ import annotations

import re

import click
from docs_pages import name as page_name
from docs_pages import pages
from docs_pages import text as documentation

from corpusbuild.cli import main as corpusbuild_main
from indexer.cli import main as indexer_main
from pipeline.cli import main as medsnip_main
from refkit.cli import main as refkit_main
from searchd.cli import main as searchd_main

TOOLS = {
    "corpusbuild": corpusbuild_main,
    "indexer": indexer_main,
    "searchd": searchd_main,
    "refkit": refkit_main,
    "medsnip": medsnip_main,
}
COMMAND = re.compile(r"^\s*(corpusbuild|indexer|searchd|refkit|medsnip)\s+([a-z0-9-]+)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def command(tool: str, name: str) -> click.Command | None:
    return TOOLS[tool].commands.get(name)


def flags(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params for o in p.opts + p.secondary_opts if o.startswith("--")} | {"--help"}


def test_every_option_in_the_readme_examples_exists():
    """Each `tool command ...` line of the bash blocks of the README and the pages (and its indented
    continuation lines): the command exists and takes every --option written on it."""
    wrong, lines_checked = [], 0
    for page in pages():
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            lines_checked += check_block(block, page_name(page), wrong)
    assert lines_checked >= 40 and wrong == []


def check_block(block: str, file: str, wrong: list[str]) -> int:
    """Appends what is wrong in one bash block to `wrong`; returns how many command lines it checked."""
    current, lines_checked = None, 0
    for line in block.splitlines():
        code = line.split("#")[0]
        match = COMMAND.match(code)
        if match:
            current = command(*match.groups())
            if current is None:
                wrong.append(f"{file}: {match[1]} {match[2]}: no such command")
                continue
        elif not line.startswith((" ", "\t")):
            current = None
        if current is None:
            continue
        lines_checked += 1
        wrong += [f"{file}: {current.name} {flag}" for flag in FLAG.findall(code) if flag not in flags(current)]
    return lines_checked


# (what the README or a docs page says, the command, the option's parameter name, the default as it is written)
STATED_DEFAULTS = [
    ("`--shards N` (32)", ("corpusbuild", "pubmed"), "shards", 32),
    ("`--chunk-size 1000`", ("corpusbuild", "pubmed"), "chunk_size", 1000),
    ("`--chunk-overlap 200`", ("corpusbuild", "pubmed"), "chunk_overlap", 200),
    ("`--max-reply-mb` (64 MiB)", ("searchd", "serve"), "max_reply_mb", 64),
    ("`--batch-wait-ms`, 2 ms by default", ("searchd", "serve"), "batch_wait_ms", 2),
    ("`--compact-above` (10%)", ("indexer", "bm25"), "compact_above", 0.1),  # a share: 10%
    ("(`--reader-timeout`, 60 s)", ("refkit", "noise"), "reader_timeout", 60),
    ("(`--reader-retries`, 4;", ("refkit", "noise"), "reader_retries", 4),
]


def test_the_defaults_the_readme_states_are_the_commands_defaults():
    from refkit.readers.options import DEFAULTS

    text = " ".join(documentation().split())
    for phrase, (tool, name), parameter, stated in STATED_DEFAULTS:
        assert phrase in text, f"neither the README nor a docs page says {phrase} any more"
        [param] = [p for p in command(tool, name).params if p.name == parameter]
        # the reader options default in refkit.readers.options (a [reader] table may set them too)
        given = param.default if isinstance(param.default, (int, float)) else None
        default = DEFAULTS[parameter.removeprefix("reader_")] if given is None else given
        assert default == stated, f"{tool} {name} {param.opts[0]}: the README says {stated}, --help says {default}"
