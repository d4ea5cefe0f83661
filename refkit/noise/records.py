"""What a refkit noise record says about why a question kept fewer references than asked, and the counts
`refkit audit --by-rule` and the review page read from the same records.

A question stops at the first stage that left it nothing to go on, or, when it reached the filters, at
the filter that rejected most of its candidates:

- `subjects` or `targets`, no target and no subject: first the real cause, a subject or mention no served text
  names (`not-in-corpus`: "cystic fibrosis" in a corpus without it, whatever else the question's words are),
  then the target rule that refused most mentions (`no-mention` when it names none; `generic` when its only
  matches are generic words, said so);
- `subjects`, no target, and every subject the question names refused: not written by any served text
  (`not-in-corpus`), or of no kind its texts tell (`no-kind`);
- `swaps`, targets but no swap passed the rules: the swap rule that refused most candidates (`no-class`,
  `no-tree-place`, `no-sibling` when there were none);
- `support`, swaps but none the corpus supports: `unsupported` (or `premise`, when the rewrites presume a count
  or feature no text states of the new entity, and that refused more);
- `filters`, rewrites retrieved candidates but too few passed: the candidate rule that rejected most
  (`may-answer`, `unrelated`, `duplicate`, `collected`), with its tests;
- `retrieval`, every candidate retrieved was kept and there were too few: `exhausted`.
"""

from __future__ import annotations

from collections import Counter

SUPPORT_RULES = ("unsupported", "premise")  # refused after the swap rules, when the rewrite was searched
CANDIDATE_RULES = ("collected", "duplicate", "off-subject", "may-answer", "unrelated", "rank")


def _most(counter: Counter, fallback: str) -> str:
    return max(counter.items(), key=lambda kv: (kv[1], kv[0]))[0] if counter else fallback


def stop_reason(record: dict, per_query: int, swap_candidates: int) -> dict | None:
    """The stage and rule that stopped a question short of `per_query` kept references (None: it was not)."""
    kept = len(record.get("noise", []))
    if kept >= per_query:
        return None
    if not record.get("targets") and not record.get("subjects"):
        refused_subjects = record.get("refused_subjects", [])
        absent = [r for r in [*refused_subjects, *record.get("refused_targets", [])] if r["rule"] == "not-in-corpus"]
        if absent:
            named = ", ".join(dict.fromkeys(repr(r.get("text") or r.get("entity")) for r in absent))
            stage = "subjects" if any(r in refused_subjects for r in absent) else "targets"
            return {
                "stage": stage,
                "rule": "not-in-corpus",
                "kept": kept,
                "why": f"no served text names what the question is about ({named})",
            }
        if refused_subjects:
            rule = _most(Counter(r["rule"] for r in refused_subjects), "not-in-corpus")
            examples = [r["why"] for r in refused_subjects if r["rule"] == rule][:2]
            return {"stage": "subjects", "rule": rule, "kept": kept, "why": f"no subject: {'; '.join(examples)}"}
        refusals = record.get("refused_targets", [])
        rules = Counter(r["rule"] for r in refusals)
        rule = _most(rules, "no-mention")
        if rules and set(rules) == {"generic"}:
            words = ", ".join(dict.fromkeys(r["entity"] for r in refusals))
            why = f"no target: the question's only matches are generic words ({words}): it names no subject"
        else:
            examples = [r["why"] for r in refusals if r["rule"] == rule][:2]
            why = f"no target: {'; '.join(examples) or 'the question names no entity of the lexicon, and no name'}"
        return {"stage": "targets", "rule": rule, "kept": kept, "why": why}
    refused = Counter(r["rule"] for r in record.get("refused_swaps", []) if r["rule"] not in SUPPORT_RULES)
    if not swap_candidates:
        rule = _most(refused, "no-sibling")
        examples = [r["why"] for r in record.get("refused_swaps", []) if r["rule"] == rule][:2]
        return {"stage": "swaps", "rule": rule, "kept": kept, "why": f"no swap: {'; '.join(examples)}"}
    if not record.get("rewrites"):
        support = Counter(r["rule"] for r in record.get("refused_swaps", []) if r["rule"] in SUPPORT_RULES)
        rule = _most(support, "unsupported")
        return {
            "stage": "support",
            "rule": rule,
            "kept": kept,
            "why": f"none of the {sum(support.values())} candidate swaps is supported by the corpus "
            "(refkit.noise.support)"
            + (f"; {support['premise']} presume a count or feature no text states" if support["premise"] else ""),
        }
    rejected = Counter(r["rule"] for r in record.get("rejected", []))
    if rejected:
        rule = _most(rejected, "exhausted")
        tests = Counter(r.get("test") for r in record["rejected"] if r["rule"] == rule)
        return {
            "stage": "filters",
            "rule": rule,
            "kept": kept,
            "why": f"{kept} kept; of {len(record['rejected'])} candidates rejected, {rejected[rule]} by {rule} "
            f"({', '.join(f'{t} {n}' for t, n in sorted(tests.items(), key=lambda kv: (-kv[1], str(kv[0]))))})",
        }
    return {
        "stage": "retrieval",
        "rule": "exhausted",
        "kept": kept,
        "why": f"the rewrites retrieved only {kept + len(record.get('rejected', []))} candidates",
    }


def rule_counts(record: dict) -> Counter:
    """Candidates rejected per rule (and test) in one record: `may-answer/names-target` ..."""
    return Counter(f"{r['rule']}/{r.get('test')}" for r in record.get("rejected", []))
