"""A `refkit noise` run for a person to read: per question, its rewrites (what each replaced) and the texts kept as
noise under each, shortened (`refkit show`, `refkit noise --show`, and the demo)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from rich.console import Group
from rich.markup import escape
from rich.table import Table

TEXT_CHARS = 240  # of each kept text: enough to judge it, short enough to read a question's at a glance


def replaced(rewrite: dict) -> str:
    """What a rewrite changed: `from -> to (rule)`, one per swap."""
    return "; ".join(
        f"{change['from']} -> {change['to']}" + (f" ({change['rule']})" if "rule" in change else "")
        for change in rewrite["replaced"]
    )


def question_view(record: dict) -> Group:
    """One question: its rewrites and, under each, the texts kept from it (or why none was)."""
    title = f"{escape(str(record['id']))}: {escape(record['query'])}"
    table = Table("#", "rewrite / kept text", "kind", title=title, title_justify="left", show_lines=True)
    kept_by_rewrite: dict[int, list[dict]] = {}
    for text in record["noise"]:
        kept_by_rewrite.setdefault(text["rewrite"], []).append(text)
    for rewrite in record["rewrites"]:
        change = replaced(rewrite)
        heading = f"[bold]{escape(rewrite['query'])}[/bold]" + (f"\n{escape(change)}" if change else "")
        table.add_row(str(rewrite["number"]), heading, rewrite["kind"])
        for text in kept_by_rewrite.get(rewrite["number"], []):
            name = text["title"] or text["doc_id"]
            excerpt = textwrap.shorten(text["content"], TEXT_CHARS, placeholder=" …")
            body = f"  {escape(name)} ({escape(text['snippet_id'])})\n  {escape(excerpt)}"
            table.add_row("", body, text.get("text_kind", ""))
    stopped = record.get("stopped") or {}
    footer = f"{len(record['noise'])} kept" + (
        f"; stopped short by {stopped['stage']}/{stopped['rule']}: {escape(stopped.get('why', ''))}"
        if stopped.get("rule")
        else ""
    )
    return Group(table, footer, "")


def run_views(records: Iterable[dict], only: set[str] | None = None) -> list[Group]:
    """Every question of a run (or those whose id is in `only`), in the run's order."""
    return [question_view(record) for record in records if only is None or str(record["id"]) in only]
