"""`refkit score`: citation-based scoring of model responses against an item's hidden labels.

Citations are bracketed reference numbers: `[1]`, `[2, 3]`, `[1-3]` (also with an en dash), `[1][4]`.
A bracket whose content is not such a list (`[a]`, `[see above]`) is not a citation; a number that is
not one of the item's references is reported as invalid and otherwise ignored.

Each reference is one decision, relevant (label) vs cited (response):
- Relevance Precision = F1 of the relevant class (cited = predicted relevant);
- Irrelevance Suppression = F1 of the irrelevant class (not cited = predicted irrelevant);
- Curation Efficiency = macro F1, the mean of the two.
Overall scores pool every reference of every item; per-query scores use that item's references, and
their mean is reported too. An F1 whose class is absent from both the labels and the predictions (no
relevant reference and none cited) is 1.0: there was nothing to find and nothing was claimed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from medsnip.jsonl import InputFileError, read_jsonl

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_CITATION_LIST = re.compile(r"^\s*\d+(\s*[-\u2013]\s*\d+)?(\s*,\s*\d+(\s*[-\u2013]\s*\d+)?)*\s*$")
MAX_RANGE = 1000


def parse_citations(text: str) -> list[int]:
    """Cited numbers in order of first appearance."""
    cited: list[int] = []
    for group in _BRACKET.findall(text):
        if not _CITATION_LIST.match(group):
            continue
        for part in group.split(","):
            low, _, high = part.replace("\u2013", "-").partition("-")
            first, last = int(low), int(high) if high.strip() else int(low)
            if last < first or last - first > MAX_RANGE:
                last = first
            for number in range(first, last + 1):
                if number not in cited:
                    cited.append(number)
    return cited


@dataclass
class Counts:
    relevant_cited: int = 0
    relevant_uncited: int = 0
    irrelevant_cited: int = 0
    irrelevant_uncited: int = 0

    def add(self, other: Counts) -> None:
        self.relevant_cited += other.relevant_cited
        self.relevant_uncited += other.relevant_uncited
        self.irrelevant_cited += other.irrelevant_cited
        self.irrelevant_uncited += other.irrelevant_uncited

    def scores(self) -> dict[str, float]:
        relevance = _f1(self.relevant_cited, self.irrelevant_cited, self.relevant_uncited)
        suppression = _f1(self.irrelevant_uncited, self.relevant_uncited, self.irrelevant_cited)
        return {
            "relevance_precision": relevance,
            "irrelevance_suppression": suppression,
            "curation_efficiency": (relevance + suppression) / 2,
        }

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _f1(true_positive: int, false_positive: int, false_negative: int) -> float:
    denominator = 2 * true_positive + false_positive + false_negative
    return 1.0 if denominator == 0 else 2 * true_positive / denominator


def read_items(path: Path) -> list[dict]:
    items, seen = [], set()
    for number, item in read_jsonl(path, ("id", "references", "answer_key")):
        if item["id"] in seen:
            raise InputFileError(f"{path}:{number}: duplicate item id {item['id']}")
        seen.add(item["id"])
        numbers = {str(r["number"]) for r in item["references"]}
        if numbers != set(item["answer_key"]):
            raise InputFileError(f"{path}:{number}: answer_key does not cover exactly the item's references")
        items.append(item)
    return items


def read_responses(path: Path) -> dict[str, str]:
    responses: dict[str, str] = {}
    for number, record in read_jsonl(path, ("id", "response")):
        if not isinstance(record["response"], str):
            raise InputFileError(f"{path}:{number}: field 'response' is not text")
        responses[str(record["id"])] = record["response"]
    return responses


def score(items: list[dict], responses: dict[str, str]) -> dict:
    missing = [str(item["id"]) for item in items if str(item["id"]) not in responses]
    if missing:
        raise InputFileError(f"no response for item(s) {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
    overall = Counts()
    per_query = []
    for item in items:
        cited = parse_citations(responses[str(item["id"])])
        numbers = {int(n) for n in item["answer_key"]}
        counts = Counts()
        for number_text, key in item["answer_key"].items():
            is_cited = int(number_text) in cited
            if key["label"] == "relevant":
                counts.relevant_cited += is_cited
                counts.relevant_uncited += not is_cited
            else:
                counts.irrelevant_cited += is_cited
                counts.irrelevant_uncited += not is_cited
        overall.add(counts)
        per_query.append({
            "id": str(item["id"]),
            "cited": [n for n in cited if n in numbers],
            "invalid_citations": [n for n in cited if n not in numbers],
            "counts": counts.as_dict(),
            **counts.scores(),
        })  # fmt: skip
    names = ("relevance_precision", "irrelevance_suppression", "curation_efficiency")
    mean = {name: sum(q[name] for q in per_query) / len(per_query) for name in names} if per_query else {}
    return {"overall": {**overall.scores(), "counts": overall.as_dict(), "items": len(items)},
            "mean_per_query": mean, "per_query": per_query}  # fmt: skip
