"""`medsnip build RECIPE --out ROOT`: everything a recipe names, built into one served root.

1. corpusbuild: every [[sources]] entry into ROOT/<source>/ (a source whose inputs and parameters did
   not change is reused from its kept work: its lineage stays the same, so its indexes stay current);
   ROOT/build.json lists them.
2. indexer: for each source, the indexes its `indexes` list names ([indexes.NAME] tables, kinds in
   indexer.kinds), the store always first (searchd reads text through it). An index whose record
   cites the corpus's present lineage and the recipe's present options is reused; any other is built.
3. ROOT/serve.json from [serve] (medsnip.serving): the retrievers and fusion searchd serves by default.

Every stage resumes what a killed run left (corpusbuild's task markers, the dense index's embedded
shards, atomic swaps), so a killed build run again ends with the root an uninterrupted one makes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpusbuild.recipe import Recipe
from indexer.kinds import STORE, DeclaredIndex, DeclaredIndexError, declared_index
from medsnip.serving import ServePlan, ServePlanError


class RecipeBuildError(ValueError):
    """A recipe that cannot be built as written, or a stage that failed (the message says which)."""


@dataclass
class StageRun:
    """One line of the build's report."""

    stage: str  # corpusbuild | store | bm25 | dense-<name> | serve
    corpus: str
    status: str  # built | current (reused as it was)
    seconds: float
    bytes: int
    detail: str = ""


def index_plan(recipe: Recipe) -> dict[str, list[DeclaredIndex]]:
    """Each source's declared indexes, checked, the store first; RecipeBuildError names the table at fault."""
    declared = {}
    for name, table in recipe.indexes.items():
        where = f"{recipe.path}: [indexes.{name}]"
        resolved = {
            key: recipe.substitute(value, where) if isinstance(value, str) else value for key, value in table.items()
        }
        try:
            declared[name] = declared_index(name, resolved, where, recipe.resolve_path)
        except DeclaredIndexError as error:
            raise RecipeBuildError(str(error)) from error
    plan = {}
    for source in recipe.sources:
        names = [name for name in source.indexes if name != "store"]
        plan[source.name] = [STORE, *(declared[name] for name in names)] if names or source.indexes else []
    return plan


def serve_plan(recipe: Recipe, plan: dict[str, list[DeclaredIndex]]) -> ServePlan | None:
    """The [serve] table checked against the indexes the recipe builds (None when it has none)."""
    if not recipe.serve:
        return None
    try:
        serving = ServePlan.from_dict(recipe.serve, f"{recipe.path}: [serve]")
    except ServePlanError as error:
        raise RecipeBuildError(str(error)) from error
    built = {index.name for indexes in plan.values() for index in indexes if index.kind != "store"}
    missing = [name for name in serving.retrievers if name not in built]
    if missing:
        raise RecipeBuildError(
            f"{recipe.path}: [serve] retrievers {missing} are not indexes any source builds "
            f"(built: {', '.join(sorted(built)) or 'none'})"
        )
    return serving


def folder_bytes(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name), follow_symlinks=False).st_size
            except OSError:  # a temp file another process just renamed
                pass
    return total


def build_root(
    recipe: Recipe,
    root: Path,
    *,
    build_sources: Callable[[Recipe, Path], dict[str, float]],
    executor,
    log: Callable[[str], None] = lambda _: None,
) -> list[StageRun]:
    """Build everything `recipe` names into `root`; returns one StageRun per stage. `build_sources`
    builds the recipe's corpora (corpusbuild's, with its progress display) and returns each one's
    seconds; `executor` runs the indexers' tasks (local pool or Ray)."""
    from medsnip.corpus import Corpus, LineageError

    plan = index_plan(recipe)
    serving = serve_plan(recipe, plan)
    before = {source.name: _lineage(root / source.name) for source in recipe.sources}
    seconds = build_sources(recipe, root)
    runs = [
        StageRun(
            "corpusbuild",
            source.name,
            "built" if _lineage(root / source.name) != before[source.name] else "current",
            seconds[source.name],
            sum(path.stat().st_size for path in (root / source.name).glob("shard-*")),
        )
        for source in recipe.sources
    ]
    for source in recipe.sources:
        try:
            corpus = Corpus.open(root / source.name, verify="full")
        except LineageError as error:
            raise RecipeBuildError(str(error)) from error
        for index in plan[source.name]:
            started = time.perf_counter()
            status = "current"
            if not index.is_current(corpus):
                log(f"{source.name}/{index.name}: building")
                try:
                    index.build(corpus, executor, log)
                except (LineageError, DeclaredIndexError) as error:
                    raise RecipeBuildError(f"{source.name}/{index.name}: {error}") from error
                status = "built"
            runs.append(
                StageRun(
                    index.name,
                    source.name,
                    status,
                    time.perf_counter() - started,
                    folder_bytes(index.folder(corpus.path)),
                )
            )
    if serving is not None:
        serving.write(root)
        runs.append(
            StageRun(
                "serve.json",
                "",
                "written",
                0.0,
                (root / "serve.json").stat().st_size,
                f"{', '.join(serving.retrievers) or 'every retriever'}; {serving.fusion} (k={serving.rrf_k})",
            )
        )
    return runs


def _lineage(corpus_dir: Path) -> str | None:
    from medsnip.buildrecord import lineage_hash, read_complete_record

    record = read_complete_record(corpus_dir)
    return lineage_hash(record) if record else None
