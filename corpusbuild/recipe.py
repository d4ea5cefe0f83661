"""Declarative build recipes (TOML): every source of a corpus, built into one corpus root.

    [recipe]
    name = "demo"
    [vars]                      # ${name} in inputs; override with --var name=value
    samples = "../samples"
    [defaults]                  # for every source unless it says otherwise
    shards = 4
    chunk_size = 1000
    chunk_overlap = 200
    [[sources]]
    kind = "pubmed"             # pubmed | statpearls | textbooks | wikipedia | parallel | jsonl
    name = "pubmed"             # folder under the root and source name in ids (default: kind)
    inputs = ["${samples}/pubmed"]
    [sources.options]           # kind-specific: keep_no_abstract; language; id_field/title_field/text_field
    [sources.checksums]         # input file name -> "sha256:<hex>", checked before building
    "pubmed20n1016.xml.gz" = "sha256:..."
    [sources.publisher]         # where `medsnip fetch` gets the inputs (fetcher.publishers)

Relative paths are relative to the recipe file. The root gets one folder per source (each with its
own build.json) and a root build.json listing the recipe and every source's record hash. A recipe's
`indexes` lists (per source or in [defaults]), [indexes.NAME] tables and [serve] table are for
`medsnip build` (pipeline/recipe_build.py); here they are kept as read and checked only for shape.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from corpusbuild.chunking import ChunkingParams, validate_chunking
from corpusbuild.inputs import expand_inputs
from corpusbuild.sources import KINDS, SOURCE_NAME_RE
from medsnip.buildrecord import RECORD_SCHEMA, record_hash, sha256_file, tool_identity

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SOURCE_KEYS = {
    "kind",
    "name",
    "inputs",
    "shards",
    "chunk_size",
    "chunk_overlap",
    "no_chunk",
    "separators",
    "options",
    "checksums",
    "indexes",
    "publisher",
}
_DEFAULT_KEYS = {"shards", "chunk_size", "chunk_overlap", "no_chunk", "separators", "indexes"}
_TABLES = {"recipe", "vars", "defaults", "sources", "indexes", "serve"}


class RecipeError(Exception):
    """The recipe is malformed, or its inputs do not match their pinned checksums."""


@dataclass
class RecipeSource:
    kind: str
    name: str
    inputs: list[str]
    shards: int
    chunking: ChunkingParams
    options: dict = field(default_factory=dict)
    checksums: dict[str, str] = field(default_factory=dict)
    indexes: list[str] = field(default_factory=list)  # names of the recipe's [indexes.NAME] tables
    publisher: dict = field(default_factory=dict)  # [sources.publisher]: where `medsnip fetch` gets the inputs

    def params(self) -> dict:
        return KINDS[self.kind].params(self.chunking, self.name, **self.options)


@dataclass
class Recipe:
    path: Path
    name: str
    sources: list[RecipeSource]
    sha256: str
    text: str
    variables: dict[str, str] = field(default_factory=dict)
    indexes: dict[str, dict] = field(default_factory=dict)  # [indexes.NAME] tables, read by medsnip build
    serve: dict = field(default_factory=dict)  # the [serve] table (medsnip.serving)

    def substitute(self, value: str, where: str) -> str:
        """`value` with the recipe's ${variables} filled in."""
        return _substitute(value, self.variables, where)

    def resolve_path(self, value: str) -> str:
        """A path relative to the recipe file made absolute, when such a file or folder exists (else the
        value as given: an absolute path, or a hub name for the offline cache)."""
        path = Path(value).expanduser()
        if not path.is_absolute() and (self.path.parent / path).exists():
            return str((self.path.parent / path).resolve())
        return str(path) if value.startswith("~") else value


def _substitute(value: str, variables: dict[str, str], where: str) -> str:
    def replace(match: re.Match) -> str:
        if match.group(1) not in variables:
            raise RecipeError(f"{where}: unknown variable ${{{match.group(1)}}} (define it in [vars] or --var)")
        return variables[match.group(1)]

    return _VAR_RE.sub(replace, value)


def load_recipe(path: Path, overrides: dict[str, str] | None = None) -> Recipe:
    """Parse and validate a recipe; every problem names the recipe file and the key at fault."""
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except OSError as error:
        raise RecipeError(f"{path}: cannot read: {error.strerror or error}") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise RecipeError(f"{path}: not valid TOML: {error}") from error
    unknown_tables = set(data) - _TABLES
    if unknown_tables:
        known = ", ".join(sorted(_TABLES))
        raise RecipeError(f"{path}: unknown table(s) {sorted(unknown_tables)}; a recipe has {known}")
    variables = {key: str(value) for key, value in data.get("vars", {}).items()}
    variables.update(overrides or {})
    defaults = data.get("defaults", {})
    if set(defaults) - _DEFAULT_KEYS:
        raise RecipeError(f"{path}: [defaults] has unknown key(s) {sorted(set(defaults) - _DEFAULT_KEYS)}")
    entries = data.get("sources")
    if not isinstance(entries, list) or not entries:
        raise RecipeError(f"{path}: no [[sources]]")
    sources = []
    for number, entry in enumerate(entries, 1):
        where = f"{path}: [[sources]] #{number}"
        unknown = set(entry) - _SOURCE_KEYS
        if unknown:
            raise RecipeError(f"{where}: unknown key(s) {sorted(unknown)}")
        kind = entry.get("kind")
        if kind not in KINDS:
            raise RecipeError(f"{where}: kind must be one of {sorted(KINDS)}, got {kind!r}")
        name = entry.get("name", kind)
        if not SOURCE_NAME_RE.match(name):
            raise RecipeError(f"{where}: name {name!r} must be lowercase letters, digits, '.', '_' or '-'")
        inputs = entry.get("inputs")
        if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
            raise RecipeError(f"{where}: inputs must be a non-empty list of paths or globs")
        resolved = []
        for spec in inputs:
            spec = str(Path(_substitute(spec, variables, where)).expanduser())
            resolved.append(spec if Path(spec).is_absolute() else str(path.parent / spec))
        settings = {key: entry.get(key, defaults.get(key)) for key in _DEFAULT_KEYS}
        chunk_size = settings["chunk_size"] or 1000
        chunk_overlap = 200 if settings["chunk_overlap"] is None else settings["chunk_overlap"]
        try:
            validate_chunking(chunk_size, chunk_overlap)
        except ValueError as error:
            raise RecipeError(f"{where}: {error}") from error
        separators = settings["separators"] or "auto"
        try:
            chunking = ChunkingParams(not settings["no_chunk"], chunk_size, chunk_overlap, separators)
        except ValueError as error:
            raise RecipeError(f"{where}: {error}") from error
        indexes = settings["indexes"] or []
        if not isinstance(indexes, list) or not all(isinstance(i, str) for i in indexes):
            raise RecipeError(f"{where}: indexes must be a list of names of [indexes.NAME] tables")
        undeclared = [i for i in indexes if i not in data.get("indexes", {}) and i != "store"]
        if undeclared:
            raise RecipeError(f"{where}: indexes {undeclared} have no [indexes.NAME] table")
        source = RecipeSource(
            kind,
            name,
            resolved,
            int(settings["shards"] or 32),
            chunking,
            dict(entry.get("options", {})),
            dict(entry.get("checksums", {})),
            list(indexes),
            {
                key: _substitute(v, variables, where) if isinstance(v, str) else v
                for key, v in entry.get("publisher", {}).items()
            }
            if isinstance(entry.get("publisher", {}), dict)
            else entry["publisher"],
        )
        try:
            source.params()
        except ValueError as error:
            raise RecipeError(f"{where}: {error}") from error
        sources.append(source)
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise RecipeError(f"{path}: two sources share a name: {names}")
    recipe_name = data.get("recipe", {}).get("name", path.stem)
    index_tables, serve = data.get("indexes", {}), data.get("serve", {})
    if not isinstance(index_tables, dict) or not all(isinstance(t, dict) for t in index_tables.values()):
        raise RecipeError(f"{path}: [indexes] must hold one [indexes.NAME] table per index")
    if not isinstance(serve, dict):
        raise RecipeError(f"{path}: [serve] must be a table")
    return Recipe(
        path,
        recipe_name,
        sources,
        hashlib.sha256(raw).hexdigest(),
        raw.decode("utf-8"),
        variables,
        dict(index_tables),
        dict(serve),
    )


def check_checksums(source: RecipeSource, require: bool) -> list[str]:
    """Compare every input file with its pinned sha256 (by file name); returns the problems."""
    files, missing = expand_inputs(source.inputs, KINDS[source.kind].suffixes)
    problems = [str(problem) for problem in missing]
    pinned = {name: value.removeprefix("sha256:").lower() for name, value in source.checksums.items()}
    for path in files:
        expected = pinned.get(path.name)
        if expected is None:
            if require:
                problems.append(f"{path}: no pinned checksum in the recipe (--require-checksums)")
            continue
        actual, _ = sha256_file(path)
        if actual != expected:
            problems.append(f"{path}: sha256 {actual} differs from the pinned {expected}")
    return problems


def root_record(recipe: Recipe, root: Path, outcomes: dict[str, dict]) -> dict:
    """ROOT/build.json: the recipe and each source's record hash (what indexes cite as lineage)."""
    return {
        "schema": RECORD_SCHEMA,
        "tool": tool_identity(),
        "stage": "corpusbuild.build",
        "recipe": {"name": recipe.name, "path": str(recipe.path), "sha256": recipe.sha256, "text": recipe.text},
        "complete": all(record["complete"] for record in outcomes.values()),
        "sources": [
            {
                "name": source.name,
                "kind": source.kind,
                "path": source.name,
                "record_sha256": record_hash(root / source.name),
                "complete": outcomes[source.name]["complete"],
                "documents": outcomes[source.name]["counts"]["documents"],
                "snippets": outcomes[source.name]["counts"]["snippets"],
            }
            for source in recipe.sources
        ],
    }
