"""`refkit score`: citation-based scoring of model responses against an item's hidden labels.

Citations are bracketed reference numbers: `[1]`, `[2, 3]`, `[1-3]` (also with an en dash), `[1][4]`.
A bracket whose content is not such a list (`[a]`, `[see above]`) is not a citation. What a list holds
that cannot be a citation of the item is reported per query as invalid and otherwise ignored: a number
that is not one of its references, a range reaching past them (its valid part still counts), a
reversed range (`[3-1]`), a negative number. Responses whose id is no item's are listed in
`unknown_responses`; a response id given twice is an error.

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
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from medsnip.jsonl import InputFileError, read_jsonl

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
# A bracket is a citation list when it holds only numbers, commas, spaces and dashes (hyphen, en dash,
# minus sign); "[see 2]" or "[a]" are prose. Within a list, an item is N or N-M.
_CITATION_LIKE = re.compile(r"^[\d\s,\-\u2013\u2212]*\d[\d\s,\-\u2013\u2212]*$")
_ITEM = re.compile(r"^(\d+)(?:\s*[-\u2013]\s*(\d+))?$")
MAX_RANGE = 1000  # the longest range accepted when the item's reference numbers are not known


@dataclass
class Citations:
    cited: list[int]  # valid reference numbers, in order of first citation
    invalid: list[str]  # what was written that is not a valid citation ("-1", "3-1", "9", "6-999999")


def parse_citations(text: str, valid: Collection[int] | None = None) -> Citations:
    """The citations of a response. With `valid` (the item's reference numbers) a number or the part of
    a range outside them is invalid; without, any number from 1 is valid and ranges are capped at
    MAX_RANGE. A range is resolved against the valid numbers, never enumerated, so `[1-999999]`
    repeated through a long response costs no more than `[1-5]`; each invalid item is reported once."""
    valid_sorted = sorted(set(valid)) if valid is not None else None
    cited: list[int] = []
    seen: set[int] = set()
    invalid: list[str] = []

    def report(item: str) -> None:
        if item not in invalid:
            invalid.append(item)

    for group in _BRACKET.findall(_ascii_brackets(text)):
        if not _CITATION_LIKE.match(group):
            continue
        for part in group.split(","):
            item = " ".join(part.split())
            if not item:
                continue  # "[1,]": a trailing comma cites nothing more
            match = _ITEM.match(item)
            if match is None:  # "-1", "1-2-3", "\u22121"
                report(item)
                continue
            low = int(match.group(1))
            high = int(match.group(2)) if match.group(2) is not None else low
            if high < low:
                report(item)
                continue
            numbers, outside = _resolve(low, high, valid_sorted)
            if outside:
                report(item)
            for number in numbers:
                if number not in seen:
                    seen.add(number)
                    cited.append(number)
    return Citations(cited, invalid)


# Chinese and Japanese answers cite with full-width brackets and digits: 【1】, ［1，２］, 〖3〗, 「1」, 〔2〕
# (corner brackets are also quotation marks, but a quotation holds more than numbers: _CITATION_LIKE
# keeps 「高血压」 prose).
_WIDE_BRACKETS = str.maketrans(
    {
        "\u3010": "[",
        "\u3011": "]",
        "\u3016": "[",
        "\u3017": "]",
        "\u300c": "[",
        "\u300d": "]",
        "\u3014": "[",
        "\u3015": "]",
    }
)


def _ascii_brackets(text: str) -> str:
    """Full-width brackets, digits, commas and dashes as their ASCII forms (NFKC, plus 【】〖〗「」〔〕)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text).translate(_WIDE_BRACKETS)


def _resolve(low: int, high: int, valid_sorted: list[int] | None) -> tuple[list[int], bool]:
    """(the valid numbers in low..high, whether the range reaches outside them)."""
    if valid_sorted is None:
        if low < 1 or high - low > MAX_RANGE:
            return [], True
        return list(range(low, high + 1)), False
    inside = valid_sorted[bisect_left(valid_sorted, low) : bisect_right(valid_sorted, high)]
    return inside, len(inside) != high - low + 1


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

    def scores(self) -> dict:
        relevant = _class_scores(self.relevant_cited, self.irrelevant_cited, self.relevant_uncited)
        irrelevant = _class_scores(self.irrelevant_uncited, self.relevant_uncited, self.irrelevant_cited)
        return {
            "relevance_precision": relevant["f1"],
            "irrelevance_suppression": irrelevant["f1"],
            "curation_efficiency": (relevant["f1"] + irrelevant["f1"]) / 2,
            "relevant_class": relevant,  # cited = predicted relevant
            "irrelevant_class": irrelevant,  # not cited = predicted irrelevant
        }

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def _f1(true_positive: int, false_positive: int, false_negative: int) -> float:
    denominator = 2 * true_positive + false_positive + false_negative
    return 1.0 if denominator == 0 else 2 * true_positive / denominator


def _class_scores(true_positive: int, false_positive: int, false_negative: int) -> dict[str, float]:
    """Precision, recall and F1 of one class; a ratio with nothing to count is 1.0, as the F1 is."""
    predicted, actual = true_positive + false_positive, true_positive + false_negative
    return {
        "precision": true_positive / predicted if predicted else 1.0,
        "recall": true_positive / actual if actual else 1.0,
        "f1": _f1(true_positive, false_positive, false_negative),
    }


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
    """Responses by item id; a repeated id is an error (which of the two should count?)."""
    responses: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, record in read_jsonl(path, ("id", "response")):
        if not isinstance(record["response"], str):
            raise InputFileError(f"{path}:{number}: field 'response' is not text")
        response_id = str(record["id"])
        if response_id in lines:
            raise InputFileError(
                f"{path}:{number}: duplicate response id {response_id} (first at line {lines[response_id]})"
            )
        lines[response_id] = number
        responses[response_id] = record["response"]
    return responses


def score(items: list[dict], responses: dict[str, str]) -> dict:
    missing = [str(item["id"]) for item in items if str(item["id"]) not in responses]
    if missing:
        raise InputFileError(f"no response for item(s) {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
    overall = Counts()
    per_category: dict[str, Counts] = {}
    per_query = []
    for item in items:
        numbers = {int(n) for n in item["answer_key"]}
        citations = parse_citations(responses[str(item["id"])], numbers)
        cited = set(citations.cited)
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
        if item.get("category") is not None:
            per_category.setdefault(str(item["category"]), Counts()).add(counts)
        per_query.append(
            {
                "id": str(item["id"]),
                "cited": citations.cited,
                "invalid_citations": citations.invalid,
                "counts": counts.as_dict(),
                **counts.scores(),
            }
        )
    names = ("relevance_precision", "irrelevance_suppression", "curation_efficiency")
    mean = {name: sum(q[name] for q in per_query) / len(per_query) for name in names} if per_query else {}
    item_ids = {str(item["id"]) for item in items}
    unknown = [response_id for response_id in responses if response_id not in item_ids]
    categories = {
        name: {**counts.scores(), "counts": counts.as_dict()} for name, counts in sorted(per_category.items())
    }
    return {
        "overall": {**overall.scores(), "counts": overall.as_dict(), "items": len(items)},
        "mean_per_query": mean,
        "per_category": categories,
        "per_query": per_query,
        "unknown_responses": unknown,
    }
