"""MIRAGE end to end on a medsnip root: MIRAGE's questions through MedRAG's own `MedRAG.answer`, retrieval served
by searchd (searchd.runners.medrag), each answer saved where MIRAGE's `src/evaluate.py` reads it:

    RESULTS/<dataset>/rag_<k>/<llm_name>/<corpus_name>/<retriever_name>/<split>_<question id>.json

(a JSON list whose first item is the model's answer; the split is `dev` for medmcqa, `test` otherwise). A question
whose file exists is not asked again, so a stopped run continues. From a MedRAG checkout (its code unedited; it
must be importable: run from its folder, which this adds to sys.path with its src/):

    python -m searchd.runners.mirage --medrag-dir MedRAG --benchmark MIRAGE/benchmark.json --dataset medqa \\
        --llm-name OpenAI/gpt-35-turbo-16k --retriever RRF-4 --corpus MedCorp --k 32 --results-dir prediction
    cd MIRAGE && python src/evaluate.py --results_dir ../prediction --llm_name OpenAI/gpt-35-turbo-16k --rag \\
        --k 32 --corpus_name MedCorp --retriever_name RRF-4
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from searchd.runners.medrag import patch_medrag


def split_of(dataset: str) -> str:
    """MIRAGE's split of a dataset: medmcqa's questions are its dev split."""
    return "dev" if dataset == "medmcqa" else "test"


def questions(benchmark: Path, dataset: str) -> Iterator[tuple[str, dict]]:
    """(id, question) of one MIRAGE dataset, in the order MIRAGE's QADataset indexes them (sorted ids)."""
    data = json.loads(Path(benchmark).read_text(encoding="utf-8"))
    if dataset not in data:
        raise KeyError(f"{benchmark}: no dataset {dataset!r}; it has {', '.join(sorted(data))}")
    for question_id in sorted(data[dataset]):
        yield question_id, data[dataset][question_id]


def save_dir(results: Path, dataset: str, k: int, llm_name: str, corpus_name: str, retriever_name: str) -> Path:
    return Path(results) / dataset / f"rag_{k}" / llm_name / corpus_name / retriever_name


def run_mirage(
    medrag,
    benchmark: Path,
    dataset: str,
    results: Path,
    llm_name: str,
    corpus_name: str,
    retriever_name: str,
    k: int = 32,
    rrf_k: int = 100,
    limit: int | None = None,
) -> list[Path]:
    """Ask `medrag` (a MedRAG, built with rag=True) each question of `dataset` and save MIRAGE's answer files;
    returns the files of the questions asked or already answered, in order."""
    folder = save_dir(results, dataset, k, llm_name, corpus_name, retriever_name)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number, (question_id, item) in enumerate(questions(benchmark, dataset)):
        if limit is not None and number >= limit:
            break
        path = folder / f"{split_of(dataset)}_{question_id}.json"
        if not path.is_file():
            answer, _, _ = medrag.answer(question=item["question"], options=item["options"], k=k, rrf_k=rrf_k)
            temporary = path.with_suffix(".json.tmp")
            temporary.write_text(json.dumps([answer] if isinstance(answer, str) else answer, indent=4))
            temporary.replace(path)  # whole or not at all: a stopped run leaves no half file
        written.append(path)
    return written


def load_medrag(medrag_dir: Path):
    """MedRAG's `src.medrag` module, imported from its checkout as its README runs it (from its folder), with
    RetrievalSystem and DocExtracter served by searchd."""
    medrag_dir = Path(medrag_dir).resolve()
    os.chdir(medrag_dir)  # medrag.py appends "src" to sys.path and reads its templates relative to it
    sys.path[:0] = [str(medrag_dir), str(medrag_dir / "src")]
    module = importlib.import_module("src.medrag")
    patch_medrag(module)
    return module


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--medrag-dir", type=Path, required=True, help="A checkout of MedRAG (its code unedited).")
    parser.add_argument("--benchmark", type=Path, required=True, help="MIRAGE's benchmark.json.")
    parser.add_argument("--dataset", required=True, help="mmlu, medqa, medmcqa, pubmedqa or bioasq.")
    parser.add_argument("--llm-name", required=True, help="MedRAG's llm_name.")
    parser.add_argument("--retriever", default="RRF-4", help="MedRAG's retriever_name.")
    parser.add_argument("--corpus", default="MedCorp", help="MedRAG's corpus_name.")
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--rrf-k", type=int, default=100)
    parser.add_argument("--limit", type=int, help="Only the first N questions.")
    parser.add_argument("--results-dir", type=Path, default=Path("prediction"))
    args = parser.parse_args(argv)
    benchmark, results = args.benchmark.resolve(), args.results_dir.resolve()
    module = load_medrag(args.medrag_dir)
    medrag = module.MedRAG(llm_name=args.llm_name, rag=True, retriever_name=args.retriever, corpus_name=args.corpus)
    files = run_mirage(
        medrag,
        benchmark,
        args.dataset,
        results,
        args.llm_name,
        args.corpus,
        args.retriever,
        args.k,
        args.rrf_k,
        args.limit,
    )
    print(f"{len(files)} answers of {args.dataset} in {files[0].parent if files else results}")


if __name__ == "__main__":
    main()
