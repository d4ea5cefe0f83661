"""The source kinds corpusbuild knows: how each finds, orders and reads its inputs.

One static table shared by the per-source commands and by recipes (`corpusbuild build`), so a source
built from a recipe is built exactly as its command would build it. Each kind holds its reader
(corpusbuild.events) and the file suffixes it takes; readers keep their heavy parsers' imports inside
the functions that need them, so listing every kind costs little at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpusbuild.chunking import ChunkingParams
from corpusbuild.events import Reader
from corpusbuild.inputs import order_inputs
from corpusbuild.sources import jsonl, parallel, pubmed, statpearls, textbooks, wikipedia
from corpusbuild.sources.wikipedia.dump_ranges import plan_dump_split

SOURCE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


MEDRAG_HELP = (
    "MedRAG-compatible snippets: its ids, titles, chunk boundaries and contents "
    "(corpusbuild/sources/medrag.py says where they differ from the default)."
)


@dataclass(frozen=True)
class SourceOption:
    """One kind-specific option: a `--name` flag or value on the kind's command, a key of a recipe's
    [sources.options], and a parameter recorded in the build's params."""

    name: str  # the parameter's name (the command's option is --name-with-dashes)
    default: object
    help: str
    type: type = str  # bool: a flag; int, float, str; Path: an existing file, recorded as its absolute path
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    language: bool = False  # a language code, recorded in its canonical spelling (medsnip.languages)

    def check(self, value, kind: str):
        """`value` as recorded, or ValueError naming the kind and option."""
        from medsnip.languages import UnknownLanguage, canonical_language

        if value is None or value == self.default:
            return value
        wanted = str if self.type is Path else self.type
        if wanted is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, wanted) or isinstance(value, bool) != (wanted is bool):
            raise ValueError(f"{kind}: option {self.name} must be a {wanted.__name__}, got {value!r}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{kind}: option {self.name} must be one of {', '.join(self.choices)}, got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{kind}: option {self.name} must be at least {self.minimum}, got {value!r}")
        if self.language:
            try:
                return canonical_language(value)
            except UnknownLanguage as error:
                raise ValueError(f"{kind}: option {self.name}: {error}") from error
        return str(Path(value).resolve()) if self.type is Path else value


@dataclass(frozen=True)
class SourceKind:
    """A source kind: its reader and inputs, its options, and the help of its command (`corpusbuild KIND`)."""

    kind: str
    read: Reader
    suffixes: tuple[str, ...]  # the files a folder given as input contributes
    on_duplicate: str  # "replace": a later record is a newer version; "error": ids must be unique
    document_label: str
    help: str  # the command's help: its first line is the summary
    options: tuple[SourceOption, ...] = ()
    named: bool = False  # the user names the source (ids are NAME:id:chunk): the command takes --source
    name_required: bool = False  # --source has no default (a collection of the user's)
    order: Callable[[list[Path]], list[Path]] = list
    position_name: str = "record"
    split_function: Callable | None = None  # cuts one big input into ranges parsed in parallel

    def params(self, chunking: ChunkingParams, source_name: str, **options) -> dict:
        """The build parameters: chunking, this kind's own options (checked) and, if named, the source name."""
        known = {option.name: option for option in self.options}
        unknown = set(options) - set(known)
        if unknown:
            raise ValueError(f"{self.kind}: unknown option(s) {', '.join(sorted(unknown))}")
        values = {**chunking.to_dict(), **{option.name: option.default for option in self.options}}
        values.update({name: known[name].check(value, self.kind) for name, value in options.items()})
        if self.named:
            values["source"] = source_name
        return values


MEDRAG = SourceOption("medrag", False, MEDRAG_HELP, bool)
LANGUAGE = SourceOption(
    "language",
    None,
    "The texts' language, recorded; zh, ja, ko keep full-width punctuation and chunk at 。！？；.",
    language=True,
)

KINDS: dict[str, SourceKind] = {
    kind.kind: kind
    for kind in (
        SourceKind(
            "pubmed",
            pubmed.read_pubmed,
            pubmed.SUFFIXES,
            "replace",
            "articles",
            help="""PubMed baseline/update XML (pubmedYYnNNNN.xml[.gz], legacy MedlineCitationSet) to snippets.

    INPUT is a file, a folder (searched for *.xml and *.xml.gz) or a glob. Numbered files are applied
    in sequence-number order, unnumbered ones after them in the order given: a later record for a PMID
    replaces an earlier one and a DeleteCitation removes it.""",
            options=(
                SourceOption(
                    "keep_no_abstract", False, "Keep articles without an abstract as title-only snippets.", bool
                ),
                SourceOption(
                    "max_record_chars",
                    1_000_000,
                    "A citation whose title and abstract are longer is reported and not used (bounds memory).",
                    int,
                    minimum=1,
                ),
                MEDRAG,
            ),
            order=order_inputs,
        ),
        SourceKind(
            "statpearls",
            statpearls.read_nxml,
            statpearls.SUFFIXES,
            "error",
            "articles",
            help="""StatPearls (NCBI Bookshelf BITS) tarball or NXML files, and PMC JATS articles, to paragraphs.

    INPUT is the statpearls_NBK430685.tar.gz tarball (read without unpacking), a folder of .nxml
    files or single files. A snippet is a paragraph titled with its heading path.""",
            named=True,
            options=(MEDRAG,),
        ),
        SourceKind(
            "textbooks",
            textbooks.read_textbook,
            textbooks.SUFFIXES,
            "error",
            "books",
            help="""Plain-text textbooks (MedQA's Anatomy_Gray.txt, ...) to snippets, one document per book.

    INPUT is a .txt file, a folder of them or a glob. Whitespace is collapsed, the text chunked, and
    every chunk titled with the book name (the file name without .txt).""",
            options=(MEDRAG,),
        ),
        SourceKind(
            "wikipedia",
            wikipedia.read_wikipedia,
            wikipedia.SUFFIXES,
            "replace",
            "pages",
            help="""Wikipedia pages-articles[-multistream].xml[.bz2] dumps, in any language, to section-titled snippets.

    Main namespace only; redirects and disambiguation pages are skipped; of a page with several
    revisions (history dumps) the newest is read. Templates, references, tables, files, categories and
    interlanguage links are dropped; chunk titles are "Page -- Section". The language and namespace
    names come from the dump's siteinfo (--language overrides). A page in several dumps: the last file
    given wins.""",
            options=(
                MEDRAG,
                SourceOption(
                    "language",
                    None,
                    "The dump's language (zh, fr, de, ...), replacing what its siteinfo header says (recorded).",
                    language=True,
                ),
                SourceOption(
                    "convert_script",
                    None,
                    "Chinese: convert every page to Simplified (hans) or Traditional (hant) with OpenCC.",
                    choices=("hans", "hant"),
                ),
            ),
            named=True,
            split_function=plan_dump_split,
        ),
        SourceKind(
            "parallel",
            parallel.read_parallel,
            parallel.SUFFIXES,
            "error",
            "documents",
            help="""Sentence-aligned text (WMT biomedical Medline test sets) to snippets with their English in meta.

    `docN<TAB>sentN<TAB>text` files give one document per docN (sentence 1 is its title); one sentence
    per line gives one document per line. The English side is aligned by (doc, sentence) or by line.""",
            options=(
                SourceOption("language", None, "The text's language [default: from the file name].", language=True),
                SourceOption(
                    "english",
                    None,
                    "The aligned English file [default: found beside the input by name: X.zh -> X.en].",
                    Path,
                ),
            ),
            named=True,
            name_required=True,
            position_name="line",
        ),
        SourceKind(
            "jsonl",
            jsonl.read_jsonl,
            jsonl.SUFFIXES,
            "error",
            "documents",
            help="""Any JSONL / JSONL.gz collection (BEIR's corpus.jsonl) to snippets.

    Each line is a JSON object with an id, an optional title and a text; other fields go to meta.
    Ids must be unique across all INPUT files. --no-chunk keeps one snippet per document so
    relevance judgments keyed by document id still apply.""",
            options=(
                SourceOption("id_field", "_id", "The field holding each document's id."),
                SourceOption("title_field", "title", "The field holding its title."),
                SourceOption("text_field", "text", "The field holding its text."),
                LANGUAGE,
            ),
            named=True,
            name_required=True,
            position_name="line",
        ),
    )
}
