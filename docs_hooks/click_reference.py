"""MkDocs hook (mkdocs.yml `hooks:`): two small fixes to how mkdocs-click renders the five CLIs in
docs/reference/, so the reference reads as `--help` does.

- A command's description is written into the page as Markdown, and the tools' help texts are plain text
  with `code` spans: `ROOT/<source>/` would become an HTML tag and `*.xml and *.xml.gz` italics. Outside
  code spans, `<`, `>` and `*` are escaped.
- The list of subcommands shows the first line of each help text, cut wherever the docstring wraps ("prints
  the response as JSON (one line per"). It shows click's own short help instead (the first sentence, as
  the group's `--help` lists its commands), at a width that fits a page.

Both replace private functions of mkdocs_click._docs (0.8 and 0.9 have them); if a later mkdocs-click
renames them the build fails here, saying so, rather than quietly rendering differently.
"""

from __future__ import annotations

import html
import re

import click
from mkdocs_click import _docs

SHORT_HELP_WIDTH = 110
CODE_SPAN = re.compile(r"(`[^`]*`)")


def _escaped(line: str) -> str:
    """A line of plain help text as Markdown that shows it as written; code spans are left as they are."""
    parts = CODE_SPAN.split(line)
    return "".join(part if part.startswith("`") else _plain(part) for part in parts)


def _plain(text: str) -> str:
    return html.escape(text, quote=False).replace("*", r"\*")


_original_description = _docs._make_description


def _make_description(ctx: click.Context, remove_ascii_art: bool = False):
    for line in _original_description(ctx, remove_ascii_art=remove_ascii_art):
        yield line if line.strip() == "\b" else _escaped(line)


def _make_subcommands_links(subcommands, parent: click.Context, has_attr_list: bool, show_hidden: bool):
    yield "**Subcommands**"
    yield ""
    for command in subcommands:
        ctx = _docs._build_command_context(str(command.name), command, parent)
        if command.hidden and not show_hidden:
            continue
        name = str(command.name)
        bullet = f"[{name}](#{_docs.slugify(ctx.command_path, '-')})" if has_attr_list else name
        yield f"- *{bullet}*: {_escaped(command.get_short_help_str(limit=SHORT_HELP_WIDTH))}"
    yield ""


for _name in ("_make_description", "_make_subcommands_links", "_build_command_context", "slugify"):
    if not hasattr(_docs, _name):
        raise RuntimeError(f"mkdocs_click._docs has no {_name}: docs_hooks/click_reference.py needs updating")
_docs._make_description = _make_description
_docs._make_subcommands_links = _make_subcommands_links
