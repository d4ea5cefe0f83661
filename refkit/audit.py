"""`refkit audit`: how much of a question set `refkit noise` covered, and how often its "noise" leaks.

Coverage: the share of questions with at least N kept noisy references (N = `--min-noise`, 3 by
default: a CRAB-style item wants 3 to 5 irrelevant references), with the reasons the others fell short
(no entity found, no rewrite, too few candidates survived the filters). Leak rate, where relevance
judgements exist (qrels: TREC or BEIR, keyed by document or snippet id): the share of kept noise that
the judgements call relevant to its question, i.e. noise that answers the question and would punish a
model for citing it. Entity swaps are counted by the rule that chose them (sibling, cooccurrence,
related), rewrites whose edited words read wrong (refkit.grammar) are counted and listed, and so are
rewrites that break a sense rule (refkit.sense: with `lexicon`, its entity rules too), and so are
rewrites the corpus does not support (refkit.support; noise kept from one of them is listed as a sense
problem of that rewrite, as noise must never keep it). Coverage counts
hard negatives only: kept references recorded as related to the question (refkit.relatedness), by how
(a shared entity, or similarity above the floor); swap candidates the sense rules refused are counted
by rule.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from medsnip.jsonl import read_jsonl
from refkit.grammar import rewrite_problems
from refkit.lexicon import Lexicon
from refkit.sense import generic_keys, rewrite_sense_problems


def audit_noise(noise_path: Path, qrels: dict[str, dict[str, int]] | None = None, min_noise: int = 3,
                lexicon: Lexicon | None = None) -> dict:  # fmt: skip
    generic = generic_keys(lexicon) if lexicon is not None else None
    sense: list = []
    related_by: Counter = Counter()
    refused: Counter = Counter()
    questions = covered = kept_total = judged_kept = leaked = not_related = 0
    shortfall: Counter = Counter()
    rules: Counter = Counter()
    kept_per_question: Counter = Counter()
    leaks, grammar = [], []
    rewrites = unsupported = 0
    for _, record in read_jsonl(noise_path, ("id", "noise", "rewrites")):
        questions += 1
        kept = [n for n in record["noise"] if n.get("related")]  # hard negatives: related to the question
        related_by.update(n["related"]["how"] for n in kept)
        not_related += len(record["noise"]) - len(kept)
        refused.update(r["why"].partition(":")[0] for r in record.get("refused_swaps", []))
        kept_total += len(kept)
        kept_per_question[min(len(kept), min_noise)] += 1
        if len(kept) >= min_noise:
            covered += 1
        elif record.get("skipped"):
            shortfall[str(record["skipped"])] += 1
        elif not record["rewrites"]:
            shortfall["no rewrite"] += 1
        else:
            shortfall["too few hard negatives kept"] += 1
        for rewrite in record["rewrites"]:
            rewrites += 1
            rules.update(change["rule"] for change in rewrite["replaced"] if change.get("rule"))
            problems = rewrite_problems(str(record.get("query", "")), rewrite)
            if problems:
                grammar.append({"id": str(record["id"]), "rewrite": rewrite["query"], "problems": problems})
            nonsense = rewrite_sense_problems(record, rewrite, lexicon, generic)
            support = rewrite.get("support")
            if support is not None and not support["supported"]:
                unsupported += 1
                if any(n.get("rewrite") == rewrite.get("number") for n in record["noise"]):
                    nonsense = [*nonsense, f"unsupported: noise kept from it, though {support['why']}"]
            if nonsense:
                sense.append({"id": str(record["id"]), "rewrite": rewrite["query"], "problems": nonsense})
        judged = (qrels or {}).get(str(record["id"]))
        if judged is None:
            continue
        for reference in record["noise"]:
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
        "kept_not_related": not_related,
        "kept_related_by": dict(sorted(related_by.items())),
        "kept_per_question": {f"{n}{'+' if n == min_noise else ''}": c for n, c in sorted(kept_per_question.items())},
        "shortfall": dict(sorted(shortfall.items())),
        "entity_swap_rules": dict(sorted(rules.items())),
        "rewrites": rewrites,
        "rewrites_unsupported": unsupported,
        "rewrites_with_grammar_problems": len(grammar),
        "grammar_problems": grammar,
        "rewrites_without_sense": len(sense),
        "sense_problems": sense,
        "sense_checked_with_lexicon": lexicon is not None,
        "refused_swaps": dict(sorted(refused.items())),
        "judged_kept": judged_kept,
        "leaked": leaked,
        "leak_rate": leaked / judged_kept if judged_kept else None,
        "leaks": leaks,
    }
