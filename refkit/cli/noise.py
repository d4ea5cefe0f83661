"""`refkit noise`, `refkit show` and `refkit audit`: hard negatives from rewritten questions, read and audited."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from medsnip.jsonout import emit_json, json_option
from medsnip.languages import language_callback
from medsnip.queries import read_query_file
from refkit.cli.common import (
    PathIn,
    PathOut,
    checked_at_end,
    connect_client,
    console,
    dedup_options,
    friendly_errors,
    main,
    progress,
    query_options,
    resume_options,
    resumed_writer,
    write_all,
)
from refkit.noise.options import (
    ANSWER_CEILING,
    ANSWER_MARGIN,
    ENTITY_FLOOR,
    EXAMINED,
    FILL_TO,
    ORIGINAL_RANK,
    REFERENCE_CEILING,
    RELATED,
    SIMILARITY_FLOOR,
    WEAK_FLOOR,
)
from refkit.readers.options import reader_options, resolve_settings
from searchd.cli import client_options


@main.command()
@click.argument("queries_file", metavar="QUERIES", type=PathIn)
@click.option("--lexicon", "lexicon_path", required=True, type=PathIn, help="lexicon.tsv (mined or your own).")
@click.option("--seed", required=True, type=int)
@click.option("--out", required=True, type=PathOut, help="noise.jsonl to write.")
@click.option(
    "--judge",
    "judge_name",
    help="Reject candidates a model scores as likely answers: minilm (offline), "
    "medcpt-cross, bge-reranker, or a local cross-encoder folder [default: no judge].",
)
@click.option(
    "--judge-threshold", type=float, help="Score at or above which the judge rejects [default: the preset's]."
)
@click.option("--per-query", default=5, show_default=True, type=click.IntRange(1), help="Noisy references kept.")
@click.option(
    "--fill-to",
    default=FILL_TO,
    show_default=True,
    type=click.IntRange(0),
    help="Texts of an entity swap, bare definitions and fragments (and, with --related, texts related by one name) "
    "fill a question up to this many "
    "kept, no further (texts on the question's subject or situation fill it to --per-query).",
)
@click.option(
    "--weak-floor",
    default=WEAK_FLOOR,
    show_default=True,
    type=float,
    help="Texts of those weak kinds are kept only from this MiniLM cosine to the original question (closest first).",
)
@click.option(
    "--related/--no-related",
    default=RELATED,
    show_default=True,
    help="Also keep texts related to a rewrite by one name or similarity only (an entity swap's sibling in another "
    "situation), to fill a question up to --fill-to.",
)
@click.option(
    "--candidates", default=100, show_default=True, type=click.IntRange(1), help="Hits retrieved per rewrite."
)
@click.option(
    "--examined",
    default=EXAMINED,
    show_default=True,
    type=click.IntRange(1),
    help="Candidates measured by the similarity filters per question at most (each is embedded once).",
)
@click.option(
    "--attribute-swaps",
    default=4,
    show_default=True,
    type=click.IntRange(0),
    help="Aspect rewrites: the subject kept, another aspect asked of it.",
)
@click.option("--entity-swaps", default=2, show_default=True, type=click.IntRange(0), help="Entity rewrites.")
@click.option(
    "--support/--no-support",
    default=True,
    show_default=True,
    help="Keep only swaps the corpus supports: a text retrieved for the rewrite names the swapped-in "
    "concept with what the question keeps (refkit.noise.support). --no-support rewrites regardless, for "
    "a corpus too small to name the siblings.",
)
@click.option(
    "--refs",
    type=PathIn,
    help="refs.jsonl from collect (or labeled.jsonl from label): noise is never one of these; those "
    "labelled relevant are known answers kept noise must not read like.",
)
@click.option(
    "--answer-margin",
    default=ANSWER_MARGIN,
    show_default=True,
    type=click.FloatRange(-1, 1),
    help="may-answer: a candidate this much closer (MiniLM) to the original question than to the rewrite "
    "that retrieved it is taken for an answer.",
)
@click.option(
    "--answer-ceiling",
    default=ANSWER_CEILING,
    show_default=True,
    type=click.FloatRange(-1, 1),
    help="may-answer: MiniLM similarity to the original question at which a candidate is taken for an "
    "answer (1 turns the test off).",
)
@click.option(
    "--entity-floor",
    default=ENTITY_FLOOR,
    show_default=True,
    type=click.FloatRange(-1, 1),
    help="unrelated: a candidate naming an entity of the question (or the swapped-in one) must read this "
    "close to the rewrite.",
)
@click.option(
    "--similarity-floor",
    default=SIMILARITY_FLOOR,
    show_default=True,
    type=click.FloatRange(-1, 1),
    help="unrelated: a candidate naming none of them (easy noise) is kept only this close to the rewrite (1: never).",
)
@click.option(
    "--original-rank",
    default=ORIGINAL_RANK,
    show_default=True,
    type=click.IntRange(0),
    help="may-answer: a text an aspect rewrite retrieved that the original question retrieves at this rank or "
    "better is taken for an answer (0 turns the test off).",
)
@click.option(
    "--reference-ceiling",
    default=REFERENCE_CEILING,
    show_default=True,
    type=click.FloatRange(-1, 1),
    help="may-answer: MiniLM similarity to one of the question's own references (--refs, or its best hits) at "
    "which a candidate is taken for an answer (1 turns the test off).",
)
@click.option(
    "--aspects", "aspects_path", type=PathIn, help="Your aspect lexicon [default: refkit's table for --language]."
)
@click.option(
    "--language",
    default="en",
    show_default=True,
    callback=language_callback,
    help="The queries' language: entities matched and written by their names in it (lexicon "
    "translations), refkit's aspect table for it (en, fr, de, zh), English grammar only for en.",
)
@click.option("--show", is_flag=True, help="Then print each question's rewrites and the texts kept (as `refkit show`).")
@client_options
@query_options
@dedup_options
@resume_options
@reader_options
@json_option(
    'one object per question (type "question": id, rewrites, kept, rejected, stopped: the stage, rule and why '
    'that stopped it short, or null), then the run\'s (type "totals": queries, rewritten, kept, rejected, out, '
    "reader: label, asked, source, or null)"
)
@friendly_errors
def noise(
    queries_file,
    lexicon_path,
    seed,
    out,
    judge_name,
    judge_threshold,
    per_query,
    fill_to,
    weak_floor,
    related,
    candidates,
    examined,
    attribute_swaps,
    entity_swaps,
    support,
    refs,
    answer_margin,
    answer_ceiling,
    entity_floor,
    similarity_floor,
    original_rank,
    reference_ceiling,
    aspects_path,
    language,
    show,
    address,
    token_file,
    tls,
    ca_file,
    retrievers,
    corpora,
    fusion,
    rrf_k,
    query_format,
    limit,
    dedup_threshold,
    shingle_words,
    restart,
    mix_generations,
    reader_settings,
    as_json,
) -> None:
    """Entity/attribute substitutions and the filtered hard-negative references they retrieve. Written as it
    goes: a killed run started again with the same arguments continues where it stopped (refkit.resume).
    With --reader, the user's model proposes swaps, judges rewrites and candidates (docs: refkit/readers)."""
    from medsnip.jsonl import read_jsonl
    from refkit.curation.collect import DedupOptions, RetrievalOptions
    from refkit.noise import NoiseGenerator, NoiseOptions, QueryRewriter
    from refkit.vocabulary.lexicon import shared_lexicon
    from refkit.vocabulary.matcher import aspects_table, read_aspects

    queries = read_query_file(queries_file, query_format, limit)
    lexicon_data = shared_lexicon(lexicon_path)
    aspects = read_aspects(aspects_path, language)
    collected = {}
    if refs:
        collected = {str(r["id"]): r["references"] for _, r in read_jsonl(refs, ("id", "references"))}
    provenance = {
        "lexicon_sha256": hashlib.sha256(lexicon_path.read_bytes()).hexdigest(),
        "aspects": str(aspects_path) if aspects_path else f"refkit/{aspects_table(language)}",
        "language": language,
        "dedup": {"threshold": dedup_threshold, "shingle_words": shingle_words},
    }
    judge = None
    if judge_name:
        from refkit.noise.judge import Judge, judge_spec

        judge = Judge(judge_spec(judge_name, judge_threshold))
        provenance["judge"] = {"name": judge.spec.name, "model": judge.spec.model, "threshold": judge.spec.threshold}
    reader = None
    settings = resolve_settings(reader_settings, out)
    if settings is not None:
        from refkit.readers import open_reader

        reader = open_reader(settings)
        provenance["reader"] = reader.provenance()
    client, lineage = connect_client(address, token_file, tls, ca_file, queries)
    with client:
        generator = NoiseGenerator(
            client,
            address,
            lineage,
            QueryRewriter(lexicon_data, aspects, language),
            RetrievalOptions(candidates, tuple(corpora), tuple(retrievers), rrf_k, fusion=fusion).served(lineage),
            NoiseOptions(
                seed,
                per_query,
                candidates,
                attribute_swaps,
                entity_swaps,
                support,
                answer_margin,
                answer_ceiling,
                entity_floor,
                similarity_floor,
                original_rank,
                reference_ceiling,
                fill_to,
                weak_floor,
                examined,
                related,
            ),
            DedupOptions(dedup_threshold, shingle_words),
            collected,
            provenance,
            judge,
            reader,
        )
        from refkit.resume import file_sha256

        identity = {
            "command": "noise",
            "options": generator.options.as_dict(),
            "retrieval": generator.retrieval.as_dict(),
            "provenance": provenance,
            "queries": file_sha256(queries_file),
            "refs": file_sha256(refs),
            "format": query_format,
            "limit": limit,
        }
        writer, done = resumed_writer(out, identity, lineage, queries, restart, mix_generations)
        with progress("noise searches", None) as advance:  # the count is known once queries are analysed
            # snippet lookups too: one generation from start to end
            generated = checked_at_end(generator.run(queries[done:], progress=advance), client, address, lineage)
            records = write_all(writer, generated)
    noise_summary(records)
    rewritten = sum(1 for r in records if r["rewrites"])
    kept = sum(len(r["noise"]) for r in records)
    rejected = sum(len(r["rejected"]) for r in records)
    console.print(
        f"{len(records)} queries, {rewritten} rewritten: {kept} noisy references kept, "
        f"{rejected} candidates rejected -> {out}"
    )
    if show:
        show_noise(out)
    if reader is not None:
        source = f"replayed from {settings['replay']}" if settings.get("replay") else f"cache {settings['cache']}"
        console.print(f"reader {reader.label}: {reader.asked} new answers ({source})")
    if as_json:
        for record in records:
            why = record.get("stopped")
            emit_json(
                {
                    "type": "question",
                    "id": str(record["id"]),
                    "rewrites": len(record["rewrites"]),
                    "kept": len(record["noise"]),
                    "rejected": len(record["rejected"]),
                    "stopped": {key: why.get(key) for key in ("stage", "rule", "why")} if why else None,
                }
            )
        emit_json(
            {
                "type": "totals",
                "queries": len(records),
                "rewritten": rewritten,
                "kept": kept,
                "rejected": rejected,
                "out": str(out),
                "reader": {"label": reader.label, "asked": reader.asked, "source": source} if reader else None,
            }
        )


SUMMARY_ROWS = 40  # questions listed one per line; a longer run is summarised by the rule that stopped them


def noise_summary(records: list[dict]) -> None:
    """On stderr: per question, its rewrites, kept references and the stage/rule that stopped it short (a
    table for a short run; counts by rule for a long one). The records say everything in detail."""
    stopped = Counter(f"{r['stopped']['stage']}/{r['stopped']['rule']}" for r in records if r.get("stopped"))
    err = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 160)
    if len(records) <= SUMMARY_ROWS:
        table = Table("question", "rewrites", "kept", "stopped by")
        for record in records:
            why = record.get("stopped")
            table.add_row(
                escape(str(record["id"])),
                str(len(record["rewrites"])),
                str(len(record["noise"])),
                escape(f"{why['stage']}/{why['rule']}") if why else "",
            )
        err.print(table)
    elif stopped:
        shown = ", ".join(f"{rule} {count}" for rule, count in stopped.most_common(8))
        err.print(f"questions stopped short, by stage/rule: {escape(shown)}")


@main.command()
@click.argument("noise_path", metavar="NOISE", type=PathIn)
@click.option("--question", "questions", multiple=True, help="Only this question id (repeatable) [default: all].")
@friendly_errors
def show(noise_path, questions) -> None:
    """A `refkit noise` run for a person to read: each question's rewrites, what each replaced, and the texts kept
    as noise under it (shortened), then why the question stopped short, if it did."""
    show_noise(noise_path, set(questions) or None)


def show_noise(noise_path: Path, only: set[str] | None = None) -> None:
    from medsnip.jsonl import read_jsonl
    from refkit.noise.show import run_views

    records = [record for _, record in read_jsonl(noise_path, ("id", "query", "rewrites", "noise"))]
    views = run_views(records, only)
    if only and not views:
        raise click.BadParameter(f"no question {', '.join(sorted(only))} in {noise_path}", param_hint="--question")
    output = Console(soft_wrap=False)  # to stdout: what the command is for
    for view in views:
        output.print(view)


@main.command()
@click.argument("noise_path", metavar="NOISE", type=PathIn)
@click.option(
    "--qrels", type=PathIn, help="Relevance judgements (TREC or BEIR): measure how often kept noise is relevant."
)
@click.option(
    "--min-noise",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="A question is covered with at least this many kept noisy references.",
)
@click.option(
    "--lexicon",
    "lexicon_path",
    type=PathIn,
    help="The lexicon the run used: check its entity swaps by refkit.noise.sense's entity rules too, and "
    "count generic swaps.",
)
@click.option("--by-rule", is_flag=True, help="Print how many candidates each rule rejected, per question (markdown).")
@click.option("--out", type=PathOut, help="Write the audit's records (JSON) here; the summary is printed either way.")
@json_option("the audit object (the keys --out writes) on one line, with --out too; --by-rule's table goes to stderr")
@friendly_errors
def audit(noise_path, qrels, min_noise, lexicon_path, by_rule, out, as_json) -> None:
    """What a `refkit noise` run decided, from its own records: coverage in hard negatives and what stopped each
    short question, rejections per rule, the sense of its rewrites, and its leak rate against relevance
    judgements."""
    from medsnip.buildrecord import atomic_write_bytes
    from refkit.curation.audit import audit_noise, audit_summary, by_rule_table
    from refkit.vocabulary.lexicon import shared_lexicon

    judgements = None
    if qrels:
        from medsnip.irformats import read_qrels

        judgements = read_qrels(qrels)
    result = audit_noise(noise_path, judgements, min_noise, shared_lexicon(lexicon_path) if lexicon_path else None)
    if out:
        atomic_write_bytes(out, (json.dumps(result, indent=2) + "\n").encode("utf-8"))
    for line in audit_summary(result, min_noise):
        console.print(line, highlight=False, soft_wrap=True)
    if by_rule:
        click.echo("\n".join(by_rule_table(result)), err=as_json)
    if as_json:
        emit_json(result)
