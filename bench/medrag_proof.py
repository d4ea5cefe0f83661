"""docs/runners.md's proof: MedRAG's unmodified `MedRAG.answer` and MIRAGE's `evaluate` (checkouts outside this
repository, never copied in) against a medsnip searchd on the demo root, the LLM stubbed (MedRAG.generate returns a
fixed answer; transformers.pipeline loads nothing), the bundled MiniLM folder as llm_name for its tokenizer. For
each of BM25 and RRF-2 over one and two corpora, k 5 and 32: the snippets MedRAG's answer retrieved against
`searchd query --fusion medrag`, its `snippets_ids=` path through DocExtracter, then MIRAGE's answer files and
its evaluate on them. MedRAG needs python-liquid (its templates): `pip install --target DEPS python-liquid`.

    python bench/medrag_proof.py --medrag-dir MedRAG --mirage-dir MIRAGE --benchmark benchmark.json \
        --dataset medqa --deps DEPS --work /tmp/proof
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
for flag in ("--medrag-dir", "--mirage-dir", "--benchmark", "--deps", "--work"):
    parser.add_argument(flag, type=Path, required=True)
parser.add_argument("--dataset", default="medqa")
parser.add_argument("--root", type=Path, default=REPO / "build" / "demo")
options_given = parser.parse_args()
for name in ("medrag_dir", "mirage_dir", "benchmark", "deps", "work", "root"):  # MedRAG's import changes folder
    setattr(options_given, name, getattr(options_given, name).resolve())
sys.path[:0] = [str(options_given.deps), str(REPO)]
from medsnip.encoders import bundled_minilm_path  # noqa: E402 (after the path is set)
from searchd.launch import start_background_server  # noqa: E402 (after the path is set)
from searchd.runners.medrag import patch_medrag  # noqa: E402 (after the path is set)
from searchd.runners.mirage import load_medrag, run_mirage  # noqa: E402 (after the path is set)

proc, address = start_background_server(options_given.root)
os.environ["SEARCHD_ADDRESS"] = address
module = load_medrag(options_given.medrag_dir)
maps = {
    "retrievers": {"RRF-2": ("bm25", "dense-minilm")},
    "corpora": {"MedText": ("textbooks", "pubmed"), "Textbooks": ("textbooks",)},
}
patch_medrag(module, **maps)
module.transformers.pipeline = lambda *args, **kwargs: None  # no LLM is loaded
prompts = []


def generate(self, messages, **kwargs):
    prompts.append(messages[-1]["content"])
    return '{"step_by_step_thinking": "stub", "answer_choice": "A"}'


module.MedRAG.generate = generate
tokenizer = str(bundled_minilm_path())
question = "Which drugs lower LDL cholesterol after a myocardial infarction?"
options = {"A": "statins", "B": "insulin", "C": "warfarin", "D": "aspirin"}
report = []
for retriever, corpus in (("BM25", "MedText"), ("RRF-2", "MedText"), ("RRF-2", "Textbooks")):
    medrag = module.MedRAG(llm_name=tokenizer, rag=True, retriever_name=retriever, corpus_name=corpus)
    for k in (5, 32):
        answer, snippets, scores = medrag.answer(question=question, options=options, k=k, rrf_k=100)
        args = [sys.executable, "-m", "searchd.cli", "query", question, "--server", address, "--json"]
        args += ["--fusion", "medrag", "--rrf-k", "100", "--k", str(k)]
        for r in ({"BM25": ("bm25",)} | maps["retrievers"])[retriever]:
            args += ["--retrievers", r]
        for c in maps["corpora"][corpus]:
            args += ["--corpora", c]
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        expected = [h["id"] for h in json.loads(out)["hits"]]
        same = [s["id"] for s in snippets] == expected
        report.append(
            f"{retriever}/{corpus} k={k}: {len(snippets)} snippets, ids equal to searchd query --fusion medrag: "
            f"{same}; prompt begins {prompts[-1][:70]!r}"
        )
    _, extracted, _ = medrag.answer(
        question=question, options=options, k=3, snippets_ids=[{"id": s["id"]} for s in snippets]
    )
    same = [s["id"] for s in extracted] == [s["id"] for s in snippets[:3]]
    report.append(f"  snippets_ids= through DocExtracter, the same 3 snippets: {same}")
work = options_given.work.resolve()
files = run_mirage(
    medrag,
    options_given.benchmark.resolve(),
    options_given.dataset,
    work / "prediction",
    "stub/minilm",
    "Textbooks",
    "RRF-2",
    k=5,
)
report.append(f"MIRAGE files: {[str(f.relative_to(work)) for f in files][:2]} ... ({len(files)})")
sys.path.insert(0, str(options_given.mirage_dir.resolve() / "src"))
sys.modules.pop("utils", None)  # MedRAG's src/utils.py has the same module name
os.chdir(options_given.mirage_dir)
import evaluate as mirage_evaluate  # noqa: E402
from utils import QADataset  # noqa: E402

dataset = QADataset(options_given.dataset, dir=str(options_given.benchmark.resolve().parent))
acc, std, flag = mirage_evaluate.evaluate(dataset, str(files[0].parent), "test")
report.append(f"MIRAGE's evaluate on those {len(files)}: accuracy {acc:.3f} (the stub always answers A)")
proc.terminate()
proc.wait(60)
print("\n".join(report))
