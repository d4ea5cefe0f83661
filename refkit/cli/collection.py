"""`refkit collect` and `refkit label`: candidate references for each question, and their labels."""

from __future__ import annotations

from collections import Counter

import click

from medsnip.jsonout import emit_json, json_option
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
from searchd.cli import client_options


@main.command()
@click.argument("queries_file", metavar="QUERIES", type=PathIn)
@click.option("--out", required=True, type=PathOut, help="refs.jsonl to write.")
@click.option("--k", default=32, show_default=True, type=click.IntRange(1), help="References retrieved per query.")
@client_options
@query_options
@dedup_options
@resume_options
@json_option("queries, references (kept), duplicates (dropped), out")
@friendly_errors
def collect(
    queries_file,
    out,
    k,
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
    as_json,
) -> None:
    """Candidate references per query, with provenance, deduplicated by content. Written as it goes: a killed
    run started again with the same arguments continues where it stopped (refkit.resume)."""
    from refkit.curation.collect import DedupOptions, RetrievalOptions, collect
    from refkit.resume import file_sha256

    queries = read_query_file(queries_file, query_format, limit)
    client, lineage = connect_client(address, token_file, tls, ca_file, queries)
    with client:
        options = RetrievalOptions(k, tuple(corpora), tuple(retrievers), rrf_k, fusion=fusion).served(lineage)
        dedup = DedupOptions(dedup_threshold, shingle_words)
        identity = {
            "command": "collect",
            "retrieval": options.as_dict(),
            "dedup": [dedup_threshold, shingle_words],
            "queries": file_sha256(queries_file),
            "format": query_format,
            "limit": limit,
        }
        writer, done = resumed_writer(out, identity, lineage, queries, restart, mix_generations)
        with progress("collect", len(queries) - done) as advance:
            generated = collect(client, address, lineage, queries[done:], options, dedup, progress=advance)
            records = write_all(writer, checked_at_end(generated, client, address, lineage))
    kept = sum(len(r["references"]) for r in records)
    dropped = sum(len(r["duplicates"]) for r in records)
    console.print(f"{len(records)} queries: {kept} references, {dropped} duplicates dropped -> {out}")
    if as_json:
        emit_json({"queries": len(records), "references": kept, "duplicates": dropped, "out": str(out)})


@main.command()
@click.argument("refs", type=PathIn)
@click.option("--qrels", required=True, type=PathIn, help="TREC (qid 0 docid grade) or BEIR qrels.")
@click.option("--out", required=True, type=PathOut, help="labeled.jsonl to write.")
@click.option(
    "--unjudged",
    default="skip",
    show_default=True,
    type=click.Choice(["skip", "irrelevant"]),
    help="Unjudged references: left unlabelled (skip), or called irrelevant (complete qrels only).",
)
@json_option("queries, references (label: count; unlabelled for those left without one), out")
@friendly_errors
def label(refs, qrels, out, unjudged, as_json) -> None:
    """Label collected references from relevance judgements (by document id or snippet id)."""
    from medsnip.irformats import read_qrels
    from medsnip.jsonl import write_jsonl
    from refkit.curation.label import label_references

    records = list(label_references(refs, read_qrels(qrels), unjudged))
    write_jsonl(out, records)
    labels = Counter(r["label"] for record in records for r in record["references"])
    references = {str(k or "unlabelled"): v for k, v in sorted(labels.items(), key=lambda kv: str(kv[0]))}
    shown = ", ".join(f"{count:,} {label}" for label, count in references.items())
    console.print(f"{len(records)} queries, references: {shown or 'none'} -> {out}")
    if as_json:
        emit_json({"queries": len(records), "references": references, "out": str(out)})
