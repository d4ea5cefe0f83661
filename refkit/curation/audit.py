"""`refkit audit`: what a `refkit noise` run decided, read back from its own records.

Nothing is decided again here: every count comes from what the noise records say (refkit.noise.records),
so the audit reports exactly what `refkit noise` did.

- coverage: questions with at least `--min-noise` kept references (3 by default: a CRAB-style item wants 3
  to 5), the kept count per question, and for every question below it the stage and rule that stopped it;
- targets: questions where a target was found, and the target rules that refused mentions;
- swaps: entity swaps by the sibling rule that proposed them, swap candidates refused by rule, generic
  swaps (a generic name replaced or written in: there must be none), rewrites that read wrong
  (refkit.noise.grammar) or break a sense rule (refkit.noise.sense; with `lexicon`, its entity rules too);
- classes and frames (refkit.noise.checks): entity swaps whose record does not show one class for both entities
  (cross-class swaps: there must be none), rewrites that ask the aspect the question asks or carry a premise
  unchecked, targets that are the question's answer type, stops that hide a subject no served text names;
- candidates: rejected per rule and test, in all and per question (`by_rule`, printed by `--by-rule`);
- kept: how each is related to the question, and the hard share (it names an entity of the question the
  rewrite kept, or the one it put in);
- leak, where relevance judgements exist (qrels: TREC or BEIR, by document or snippet id): the share of
  kept noise the judgements call relevant to its own question.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from medsnip.jsonl import read_jsonl
from refkit.noise.checks import answer_type_targets, frame_problems, hidden_absence, swap_class_problem
from refkit.noise.grammar import rewrite_problems
from refkit.noise.records import rule_counts
from refkit.noise.sense import generic_keys, rewrite_sense_problems
from refkit.vocabulary.lexicon import Lexicon


def _judged_relevant(reference: dict, judged: dict[str, int]) -> bool:
    keys = [reference.get("doc_id"), reference.get("snippet_id")]
    snippet = str(reference.get("snippet_id", ""))
    if snippet.count(":") >= 2:  # corpus:document:chunk: the document's id as a BEIR collection keys it
        keys.append(snippet.split(":")[1])
    grades = [judged[key] for key in keys if key in judged]
    return bool(grades) and max(grades) > 0


def audit_noise(
    noise_path: Path, qrels: dict[str, dict[str, int]] | None = None, min_noise: int = 3, lexicon: Lexicon | None = None
) -> dict:
    generic = generic_keys(lexicon) if lexicon is not None else None
    counts = {
        name: Counter()
        for name in (
            "related_by",
            "refused_targets",
            "refused_swaps",
            "stopped",
            "rules",
            "rejected",
            "kept_per_question",
            "kept_by_rewrite_kind",
            "kept_text_kinds",
            "kept_tiers",
            "rewrite_kinds",
        )
    }
    questions = covered = with_target = kept_total = hard = judged_kept = leaked = rewrites = 0
    by_rule, grammar, sense, leaks, generic_swaps, short = [], [], [], [], [], []
    cross_class, frames, answer_types, hidden = [], [], [], []
    swap_classes: Counter = Counter()
    for _, record in read_jsonl(noise_path, ("id", "noise", "rewrites")):
        questions += 1
        kept = record["noise"]
        kept_total += len(kept)
        with_target += bool(record.get("targets"))
        counts["kept_per_question"][min(len(kept), min_noise)] += 1
        counts["related_by"].update(n.get("related", {}).get("how", "unknown") for n in kept)
        kinds = {r["number"]: r.get("kind", "entity") for r in record["rewrites"] if "number" in r}
        counts["kept_by_rewrite_kind"].update(kinds.get(n.get("rewrite"), "unknown") for n in kept)
        counts["kept_text_kinds"].update(n.get("text_kind", "unknown") for n in kept)
        counts["kept_tiers"].update(str(n.get("tier", "unknown")) for n in kept)
        hard += sum(1 for n in kept if _names_question(n))
        counts["refused_targets"].update(r["rule"] for r in record.get("refused_targets", []))
        answer_types += [{"id": str(record["id"]), "target": t} for t in answer_type_targets(record)]
        if (absence := hidden_absence(record)) is not None:
            hidden.append({"id": str(record["id"]), "problem": absence})
        counts["refused_swaps"].update(r["rule"] for r in record.get("refused_swaps", []))
        rejected = rule_counts(record)
        counts["rejected"].update(rejected)
        by_rule.append({"id": str(record["id"]), "kept": len(kept), **dict(sorted(rejected.items()))})
        if len(kept) >= min_noise:
            covered += 1
        else:
            stop = record.get("stopped") or {"stage": "filters", "rule": "per-query", "why": "kept what was asked"}
            counts["stopped"][f"{stop['stage']}/{stop['rule']}"] += 1
            short.append(
                {
                    "id": str(record["id"]),
                    "kept": len(kept),
                    "stage": stop["stage"],
                    "rule": stop["rule"],
                    "why": stop["why"],
                }
            )
        for rewrite in record["rewrites"]:
            rewrites += 1
            counts["rules"].update(
                edit["rule"] for edit in rewrite["replaced"] if edit.get("rule") and edit["what"] == "entity"
            )
            counts["rewrite_kinds"][rewrite.get("kind", "entity")] += 1
            problems = rewrite_problems(str(record.get("query", "")), rewrite)
            if problems:
                grammar.append({"id": str(record["id"]), "rewrite": rewrite["query"], "problems": problems})
            for edit in rewrite["replaced"]:
                if edit["what"] == "entity" and edit.get("class"):
                    swap_classes[f"{edit['type']}: {edit['class'].partition(':')[0]}"] += 1
                if (problem := swap_class_problem(edit, lexicon)) is not None:
                    cross_class.append({"id": str(record["id"]), "rewrite": rewrite["query"], "problem": problem})
            frames += [
                {"id": str(record["id"]), "rewrite": rewrite["query"], "problem": problem}
                for problem in frame_problems(record, rewrite)
            ]
            nonsense = rewrite_sense_problems(record, rewrite, lexicon, generic)
            if nonsense:
                sense.append({"id": str(record["id"]), "rewrite": rewrite["query"], "problems": nonsense})
            if generic is not None:
                swapped = [
                    e
                    for e in rewrite["replaced"]
                    if e["what"] == "entity" and {e["from"].casefold(), e["to"].casefold()} & generic
                ]
                if swapped:
                    generic_swaps.append({"id": str(record["id"]), "rewrite": rewrite["query"]})
        judged = (qrels or {}).get(str(record["id"]))
        if judged is not None:
            for reference in kept:
                judged_kept += 1
                if _judged_relevant(reference, judged):
                    leaked += 1
                    leaks.append({"id": str(record["id"]), "snippet_id": reference.get("snippet_id")})
    return {
        "questions": questions,
        "min_noise": min_noise,
        "covered": covered,
        "coverage": covered / questions if questions else 0.0,
        "with_target": with_target,
        "kept": kept_total,
        "kept_per_question": {
            f"{n}{'+' if n == min_noise else ''}": c for n, c in sorted(counts["kept_per_question"].items())
        },
        "hard": hard,
        "hard_share": hard / kept_total if kept_total else None,
        "kept_related_by": dict(sorted(counts["related_by"].items())),
        "stopped": dict(counts["stopped"].most_common()),
        "short": short,
        "refused_targets": dict(counts["refused_targets"].most_common()),
        "entity_swap_rules": dict(sorted(counts["rules"].items())),
        "rewrites_by_kind": dict(sorted(counts["rewrite_kinds"].items())),
        "kept_by_rewrite_kind": dict(sorted(counts["kept_by_rewrite_kind"].items())),
        "aspect_share": counts["kept_by_rewrite_kind"]["attribute"] / kept_total if kept_total else None,
        "kept_text_kinds": dict(sorted(counts["kept_text_kinds"].items())),
        "kept_tiers": dict(sorted(counts["kept_tiers"].items())),
        "refused_swaps": dict(counts["refused_swaps"].most_common()),
        "generic_swaps": generic_swaps if generic is not None else None,
        "swap_classes": dict(sorted(swap_classes.items())),
        "cross_class_swaps": cross_class,
        "frame_problems": frames,
        "answer_type_targets": answer_types,
        "hidden_absences": hidden,
        "rewrites": rewrites,
        "rewrites_with_grammar_problems": len(grammar),
        "grammar_problems": grammar,
        "rewrites_without_sense": len(sense),
        "sense_problems": sense,
        "sense_checked_with_lexicon": lexicon is not None,
        "rejected_by_rule": dict(counts["rejected"].most_common()),
        "by_rule": by_rule,
        "judged_kept": judged_kept,
        "leaked": leaked,
        "leak_rate": leaked / judged_kept if judged_kept else None,
        "leaks": leaks,
    }


def _names_question(reference: dict) -> bool:
    """A hard negative by name: the kept text names an entity of the question the rewrite kept, or the one
    the swap put in."""
    names = (reference.get("measured") or {}).get("names") or {}
    return bool(names.get("kept") or names.get("put_in"))


def by_rule_table(result: dict) -> list[str]:
    """Markdown: candidates rejected per rule and test, in all and for each question."""
    rules = list(result["rejected_by_rule"])
    lines = ["| question | kept | " + " | ".join(rules) + " |", "|---|---:|" + "---:|" * len(rules)]
    lines.append(
        "| **all** | " + f"{result['kept']} | " + " | ".join(str(result["rejected_by_rule"][r]) for r in rules) + " |"
    )
    for row in result["by_rule"]:
        lines.append(f"| {row['id']} | {row['kept']} | " + " | ".join(str(row.get(r, 0)) for r in rules) + " |")
    return lines


def audit_summary(result: dict, min_noise: int) -> list[str]:
    """`refkit audit`'s summary for a person, a few lines (the records are --json's and --out's)."""

    def top(counts: dict, many: int = 6) -> str:
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        shown = ", ".join(f"{name} {count}" for name, count in ranked[:many])
        return (shown + (f", and {len(ranked) - many} more" if len(ranked) > many else "")) or "none"

    leak = (
        "n/a (no --qrels)"
        if result["leak_rate"] is None
        else f"{result['leaked']} of {result['judged_kept']} judged kept texts are relevant ({result['leak_rate']:.1%})"
    )
    hard = "n/a" if result["hard_share"] is None else f"{result['hard_share']:.0%}"
    sense = (
        f"{result['rewrites_without_sense']} break a sense rule"
        if result["sense_checked_with_lexicon"]
        else f"{result['rewrites_without_sense']} break a sense rule (entity rules unchecked: no --lexicon)"
    )
    generic = "" if result["generic_swaps"] is None else f", {len(result['generic_swaps'])} generic"
    return [
        f"coverage: {result['covered']} of {result['questions']} questions keep {min_noise}+ noisy references "
        f"({result['coverage']:.1%}); {result['with_target']} have a target",
        f"kept: {result['kept']} texts, hard share {hard}; leak: {leak}",
        f"stopped short by: {top(result['stopped'])}",
        f"rewrites: {result['rewrites']}, {result['rewrites_with_grammar_problems']} read wrong, {sense}",
        f"entity swaps by rule: {top(result['entity_swap_rules'])}{generic}",
        f"candidates rejected by rule: {top(result['rejected_by_rule'])}",
        "(the records: --json or --out FILE; per question and rule: --by-rule)",
    ]
