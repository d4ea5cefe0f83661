"""`refkit audit`: how much of a question set `refkit noise` covered, and how often its "noise" leaks.

Coverage: the share of questions with at least N kept noisy references (N = `--min-noise`, 3 by
default: a CRAB-style item wants 3 to 5 irrelevant references), with the reasons the others fell short
(no entity found, no rewrite, too few candidates survived the filters). Leak rate, where relevance
judgements exist (qrels: TREC or BEIR, keyed by document or snippet id): the share of kept noise that
the judgements call relevant to its question, i.e. noise that answers the question and would punish a
model for citing it. Entity swaps are counted by the rule that chose them (sibling, cooccurrence,
related, same-type), and rewrites whose edited words read wrong (refkit.grammar) are counted and listed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from medsnip.jsonl import read_jsonl
from refkit.grammar import rewrite_problems


def audit_noise(noise_path: Path, qrels: dict[str, dict[str, int]] | None = None, min_noise: int = 3) -> dict:
    questions = covered = kept_total = judged_kept = leaked = 0
    shortfall: Counter = Counter()
    rules: Counter = Counter()
    kept_per_question: Counter = Counter()
    leaks, grammar = [], []
    rewrites = 0
    for _, record in read_jsonl(noise_path, ("id", "noise", "rewrites")):
        questions += 1
        kept = record["noise"]
        kept_total += len(kept)
        kept_per_question[min(len(kept), min_noise)] += 1
        if len(kept) >= min_noise:
            covered += 1
        elif record.get("skipped"):
            shortfall[str(record["skipped"])] += 1
        elif not record["rewrites"]:
            shortfall["no rewrite"] += 1
        else:
            shortfall["too few candidates kept"] += 1
        for rewrite in record["rewrites"]:
            rewrites += 1
            rules.update(change["rule"] for change in rewrite["replaced"] if change.get("rule"))
            problems = rewrite_problems(str(record.get("query", "")), rewrite)
            if problems:
                grammar.append({"id": str(record["id"]), "rewrite": rewrite["query"], "problems": problems})
        judged = (qrels or {}).get(str(record["id"]))
        if judged is None:
            continue
        for reference in kept:
            judged_kept += 1
            grades = [judged[key] for key in (reference.get("doc_id"), reference.get("snippet_id")) if key in judged]
            if grades and max(grades) > 0:
                leaked += 1
                leaks.append({"id": str(record["id"]), "snippet_id": reference.get("snippet_id")})
    return {
        "questions": questions,
        "min_noise": min_noise,
        "covered": covered,
        "coverage": covered / questions if questions else 0.0,
        "kept": kept_total,
        "kept_per_question": {f"{n}{'+' if n == min_noise else ''}": c for n, c in sorted(kept_per_question.items())},
        "shortfall": dict(sorted(shortfall.items())),
        "entity_swap_rules": dict(sorted(rules.items())),
        "rewrites": rewrites,
        "rewrites_with_grammar_problems": len(grammar),
        "grammar_problems": grammar,
        "judged_kept": judged_kept,
        "leaked": leaked,
        "leak_rate": leaked / judged_kept if judged_kept else None,
        "leaks": leaks,
    }
