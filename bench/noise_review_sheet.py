"""The blind sheet of refkit noise as a table, and its counts: docs/noise-review.md's "The sheet" section.

Reads the sample the bench drew (docs/noise-review-sample.jsonl), the two readers' verdict files
(docs/noise-review-judged.jsonl, docs/noise-review-judged-second.jsonl) and the default run's records (for each
item's rewrite kind and tier, which the readers never saw), and prints markdown: the counts per reader, per
rewrite kind and per tier, the agreement between the readers, then one row per item.

    python bench/noise_review_sheet.py bench/work/noise/noise-1.jsonl > /tmp/sheet.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
VERDICTS = ("sensible", "answers", "hard", "bare")
TIERS = ("same-subject", "situation", "related", "bare")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _cell(text: str, limit: int = 90) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def item_facts(records_path: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """(question id, snippet id) -> (rewrite kind, tier name) of every kept reference of the run."""
    facts = {}
    for line in records_path.read_bytes().splitlines():
        record = json.loads(line)
        kinds = {r["number"]: r["kind"] for r in record["rewrites"]}
        for kept in record["noise"]:
            kind = "aspect" if kinds[kept["rewrite"]] == "attribute" else "entity"
            facts[str(record["id"]), kept["snippet_id"]] = (kind, TIERS[kept["tier"]])
    return facts


def counts(verdicts: list[dict]) -> dict[str, int]:
    return {name: sum(1 for v in verdicts if v.get(name) == "yes") for name in VERDICTS}


def sheet(records_path: Path) -> list[str]:
    sample = _lines(DOCS / "noise-review-sample.jsonl")
    first = {v["item"]: v for v in _lines(DOCS / "noise-review-judged.jsonl")}
    second = {v["item"]: v for v in _lines(DOCS / "noise-review-judged-second.jsonl")}
    facts = item_facts(records_path)
    n = len(sample)
    lines = ["| verdict | first reader | second reader | both agree on |", "|---|---:|---:|---:|"]
    one, two = counts(list(first.values())), counts(list(second.values()))
    for name in VERDICTS:
        agree = sum(1 for item in sample if first[item["item"]].get(name) == second[item["item"]].get(name))
        lines.append(
            f"| {name} | {one[name]}/{n} ({one[name] / n:.0%}) | {two[name]}/{n} ({two[name] / n:.0%}) | {agree} |"
        )
    groups: dict[str, list[int]] = {}
    for item in sample:
        kind, tier = facts.get((str(item["id"]), item["snippet_id"]), ("unknown", "unknown"))
        groups.setdefault(f"{kind} rewrites", []).append(item["item"])
        groups.setdefault(f"tier {tier}", []).append(item["item"])
    lines += [
        "",
        "| items | n | sensible | answers | hard | bare (first reader, second reader) |",
        "|---|---:|---|---|---|---|",
    ]
    for group, items in sorted(groups.items()):
        a = counts([first[i] for i in items])
        b = counts([second[i] for i in items])
        lines.append(f"| {group} | {len(items)} | " + " | ".join(f"{a[v]}, {b[v]}" for v in VERDICTS) + " |")
    lines += [
        "",
        "| # | question | rewrite | kind, tier | kept reference | sensible | answers | hard | bare "
        "| reason (first reader) | second reader: sensible, answers, hard, bare | reason (second reader) |",
        "|---:|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for item in sample:
        a, b = first[item["item"]], second[item["item"]]
        kind, tier = facts.get((str(item["id"]), item["snippet_id"]), ("unknown", "unknown"))
        lines.append(
            f"| {item['item']} | {_cell(item['question'])} | {_cell(item['rewrite'])} | {kind}, {tier} | "
            f"{_cell(item['text'])} | "
            + " | ".join(a.get(v, "") for v in VERDICTS)
            + f" | {_cell(a.get('reason', ''), 160)} | {', '.join(b.get(v, '') for v in VERDICTS)} | "
            f"{_cell(b.get('reason', ''), 160)} |"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(sheet(Path(sys.argv[1]))))
