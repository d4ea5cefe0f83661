"""`refkit assemble`, `refkit review`, `refkit agreement` and `refkit score`: from labelled references and noise to
scored items."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from medsnip.jsonout import emit_json, json_option
from refkit.cli.common import (
    PathIn,
    PathOut,
    console,
    friendly_errors,
    main,
)


@main.command()
@click.option("--relevant", "labeled_path", required=True, type=PathIn, help="Labelled references (JSONL).")
@click.option("--noise", "noise_path", type=PathIn, help="noise.jsonl from `refkit noise`.")
@click.option(
    "--judgements",
    "judgements_path",
    type=PathIn,
    help="judgements.jsonl from `refkit review`: drop noise judged as answering, or by most as unrelated.",
)
@click.option("--n-relevant", required=True, help="A..B relevant references per item.")
@click.option("--n-irrelevant", required=True, help="C..D irrelevant references per item.")
@click.option("--seed", required=True, type=int)
@click.option("--out", required=True, type=PathOut, help="items.jsonl to write.")
@json_option("items, short (items below a minimum), out, dropped (with --judgements: answers, unrelated; else null)")
@friendly_errors
def assemble(labeled_path, noise_path, judgements_path, n_relevant, n_irrelevant, seed, out, as_json) -> None:
    """CRAB-style items: the query and numbered references in a seeded order, labels hidden in answer_key."""
    from medsnip.jsonl import write_jsonl
    from refkit.curation.assemble import CountRange, assemble, read_labeled, read_noise

    try:
        relevant = CountRange.parse(n_relevant, "--n-relevant")
        irrelevant = CountRange.parse(n_irrelevant, "--n-irrelevant")
    except ValueError as error:  # an option's value: a usage error (exit 2), before any file is read
        raise click.UsageError(str(error)) from None
    noise = read_noise(noise_path) if noise_path else {}
    dropped = None
    if judgements_path:
        from refkit.curation.review import read_judgements, reviewed_noise

        noise, dropped = reviewed_noise(noise, read_judgements(judgements_path))
        console.print(
            f"review: {dropped['answers']} noisy references dropped as answering, {dropped['unrelated']} as unrelated"
        )
    items = list(assemble(read_labeled(labeled_path), noise, relevant, irrelevant, seed))
    write_jsonl(out, items)
    short = sum(1 for item in items if item["shortfall"])
    console.print(f"{len(items)} items ({short} below a minimum, see their 'shortfall') -> {out}")
    if as_json:
        emit_json({"items": len(items), "short": short, "out": str(out), "dropped": dropped})


@main.command()
@click.argument("noise_path", metavar="NOISE", type=PathIn)
@click.option(
    "--judgements",
    "judgements_path",
    required=True,
    type=PathOut,
    help="judgements.jsonl: each judgement is appended as it is made; an existing file is resumed.",
)
@click.option("--annotator", required=True, help="Your name or initials, recorded with each judgement.")
@click.option(
    "--port",
    default=0,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to serve the page on (0: any free one).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to serve on. Keep the loopback default on a shared machine: anyone who reaches "
    "another interface can read the items and write judgements.",
)
@click.option(
    "--open/--no-open",
    "open_browser",
    default=True,
    show_default=True,
    help="Open the page in this machine's web browser.",
)
@friendly_errors
def review(noise_path, judgements_path, annotator, port, host, open_browser) -> None:
    """Judge kept noise by hand in a local web page: answers (a), related (r), unrelated (u)."""
    from refkit.curation.review import JudgementLog, make_server, review_items

    if not annotator.strip():
        raise click.BadParameter("must not be empty", param_hint="--annotator")
    items = review_items(noise_path)
    if not items:
        console.print(
            f"[yellow]warning[/yellow]: {escape(str(noise_path))} keeps no noisy reference: nothing to review "
            "(refkit audit says which rules stopped each question)"
        )
    log = JudgementLog(judgements_path)
    # the file exists from the start, so `refkit assemble --judgements` works even before any judgement
    Path(judgements_path).touch(exist_ok=True)
    from refkit.curation.review import is_loopback

    if not is_loopback(host):
        console.print(
            f"[yellow]warning[/yellow]: serving on {escape(host)}, not loopback: anyone who can reach it "
            "can read these items and, with the page, write judgements under your name"
        )
    server = make_server(items, log, annotator.strip(), host=host, port=port)
    shown_host = host if not is_loopback(host) else "127.0.0.1"
    url = f"http://{shown_host}:{server.server_address[1]}/"
    mine = sum(1 for item in items if (item["id"], item["snippet_id"], annotator.strip()) in log.known)
    click.echo(
        f"review: {url} ({len(items)} candidates, {mine} judged by {annotator.strip()}); "
        f"judgements -> {judgements_path}; Ctrl-C to stop",
        err=True,
    )
    sys.stderr.flush()
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    signal.signal(signal.SIGTERM, stop_serving)  # a stop by the service manager: the page's normal end, exit 0
    # Ctrl-C stops it (exit 130) even where it was started with SIGINT ignored (a shell's background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        server.serve_forever()
    except Stopped:
        pass
    finally:
        server.server_close()  # every judgement is already saved: each was written when it was made
    # Ctrl-C (KeyboardInterrupt) goes on to the tool's handler: exit 130, as the exit-code table says


class Stopped(Exception):
    """SIGTERM asked the review page to stop."""


def stop_serving(*_) -> None:
    raise Stopped


@main.command()
@click.argument("judgements_paths", metavar="JUDGEMENTS...", nargs=-1, required=True, type=PathIn)
@click.option(
    "--noise",
    "noise_path",
    type=PathIn,
    help="The noise.jsonl the judgements are of: also each reader's may-answer verdicts against each annotator.",
)
@json_option("the agreement object (annotators, pairs, and readers with --noise) on one line")
@friendly_errors
def agreement(judgements_paths, noise_path, as_json) -> None:
    """Agreement between annotators of `refkit review`: share judged alike and Cohen's kappa per pair; with
    --noise, of each reader of the run with each annotator (answers or not), to see if a reader can be trusted."""
    from refkit.curation.review import agreement as measure
    from refkit.curation.review import read_judgements, reader_agreement

    judgements = [line for path in judgements_paths for line in read_judgements(path)]
    result = measure(judgements)
    if noise_path:
        result["readers"] = reader_agreement(judgements, noise_path)
    if as_json:
        emit_json(result)
    else:
        click.echo(json.dumps(result, indent=2))


@main.command()
@click.argument("items_path", metavar="ITEMS", type=PathIn)
@click.argument("responses_path", metavar="RESPONSES", type=PathIn)
@click.option("--out", type=PathOut, help="Write the scores as JSON here too.")
@json_option(
    'one object per item (type "query": id, cited, invalid_citations, counts, relevance_precision, '
    "irrelevance_suppression, curation_efficiency, relevant_class, irrelevant_class), one per category "
    '(type "category": category and the same scores), then type "overall": the overall scores, counts, items, '
    "mean_per_query, unknown_responses"
)
@friendly_errors
def score(items_path, responses_path, out, as_json) -> None:
    """Relevance Precision, Irrelevance Suppression and Curation Efficiency from the responses' citations."""
    from medsnip.buildrecord import atomic_write_bytes
    from refkit.curation.score import read_items, read_responses
    from refkit.curation.score import score as compute

    result = compute(read_items(items_path), read_responses(responses_path))
    text = json.dumps(result, indent=2)
    if out:
        atomic_write_bytes(out, (text + "\n").encode("utf-8"))
    table = Table(
        "query", "relevance precision", "irrelevance suppression", "curation efficiency", "cited", "invalid citations"
    )
    for row in result["per_query"]:
        table.add_row(
            escape(row["id"]),
            f"{row['relevance_precision']:.3f}",
            f"{row['irrelevance_suppression']:.3f}",
            f"{row['curation_efficiency']:.3f}",
            escape(str(row["cited"])),
            escape(", ".join(row["invalid_citations"])),
        )
    overall = result["overall"]
    table.add_row(
        "[bold]overall[/bold]",
        f"{overall['relevance_precision']:.3f}",
        f"{overall['irrelevance_suppression']:.3f}",
        f"{overall['curation_efficiency']:.3f}",
        "",
    )
    Console(stderr=True).print(table)
    classes = Table("class", "precision", "recall", "F1", title="overall, per class")
    for name in ("relevant_class", "irrelevant_class"):
        scores = overall[name]
        classes.add_row(
            name.removesuffix("_class"), f"{scores['precision']:.3f}", f"{scores['recall']:.3f}", f"{scores['f1']:.3f}"
        )
    Console(stderr=True).print(classes)
    if result["per_category"]:
        categories = Table("category", "relevance precision", "irrelevance suppression", "curation efficiency")
        for name, scores in result["per_category"].items():
            columns = ("relevance_precision", "irrelevance_suppression", "curation_efficiency")
            categories.add_row(escape(name), *(f"{scores[column]:.3f}" for column in columns))
        Console(stderr=True).print(categories)
    if result["unknown_responses"]:
        unknown = result["unknown_responses"]
        console.print(
            f"[yellow]warning[/yellow]: {len(unknown)} response(s) match no item and were not scored: "
            f"{escape(', '.join(unknown[:10]))}{' ...' if len(unknown) > 10 else ''}"
        )
    empty = [row["id"] for row in result["per_query"] if not sum(row["counts"].values())]
    if empty:
        console.print(
            f"[yellow]warning[/yellow]: {len(empty)} item(s) have no references, so their scores say nothing: "
            f"{escape(', '.join(empty[:10]))}{' ...' if len(empty) > 10 else ''} (refkit assemble's shortfall)"
        )
    if out:
        console.print(f"scores -> {out}")
    if as_json:
        for row in result["per_query"]:
            emit_json({"type": "query", **row})
        for name, scores in result["per_category"].items():
            emit_json({"type": "category", "category": name, **scores})
        emit_json(
            {
                "type": "overall",
                **overall,
                "mean_per_query": result["mean_per_query"],
                "unknown_responses": result["unknown_responses"],
            }
        )
    elif not out:
        click.echo(text)
