"""`refkit assemble`: CRAB-style benchmark items from labelled references and generated noise.

Inputs:
- LABELED.jsonl: `refkit collect` records whose references carry `"label": "relevant"|"irrelevant"`
  (from experts, or from qrels with `refkit label`); unlabelled references are not used;
- noise.jsonl: `refkit noise` records; their kept noise counts as irrelevant.

Per query, with a generator seeded by (seed, query id): the number of relevant references is drawn
from A..B and of irrelevant ones from C..D (each capped by what is available and recorded as a
shortfall when below the minimum: a query may end with no relevant reference, as in CRAB), the
references are drawn, shuffled together and numbered 1..n. The item shows `query` and `references`;
`answer_key` (number -> label, origin) is for scoring and must not be shown to the model.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from medsnip.jsonl import InputFileError, read_jsonl

LABELS = ("relevant", "irrelevant")
SHOWN_FIELDS = ("title", "content", "source", "doc_id", "snippet_id")


@dataclass(frozen=True)
class CountRange:
    low: int
    high: int

    @classmethod
    def parse(cls, text: str, name: str) -> CountRange:
        low, sep, high = text.partition("..")
        try:
            result = cls(int(low), int(high if sep else low))
        except ValueError as error:
            raise ValueError(f"{name}: expected A..B (e.g. 2..4), got {text!r}") from error
        if result.low < 0 or result.high < result.low:
            raise ValueError(f"{name}: expected 0 <= A <= B, got {text!r}")
        return result

    def __str__(self) -> str:
        return f"{self.low}..{self.high}"


def read_labeled(path: Path) -> list[dict]:
    """Labelled collect records, in file order; a bad label is an error naming the line."""
    records, seen = [], set()
    for number, record in read_jsonl(path, ("id", "query", "references")):
        if record["id"] in seen:
            raise InputFileError(f"{path}:{number}: duplicate query id {record['id']}")
        seen.add(record["id"])
        for position, reference in enumerate(record["references"]):
            label = reference.get("label")
            if label is not None and label not in LABELS:
                raise InputFileError(
                    f"{path}:{number}: references[{position}].label is {label!r}, "
                    f"expected one of {', '.join(LABELS)} (or none)"
                )
            if "snippet_id" not in reference:
                raise InputFileError(f"{path}:{number}: references[{position}] has no 'snippet_id'")
        records.append(record)
    return records


def read_noise(path: Path) -> dict[str, list[dict]]:
    noise: dict[str, list[dict]] = {}
    for _, record in read_jsonl(path, ("id", "noise")):
        noise[str(record["id"])] = record["noise"]
    return noise


def assemble(
    labeled: list[dict], noise: dict[str, list[dict]], relevant: CountRange, irrelevant: CountRange, seed: int
) -> Iterator[dict]:
    for record in labeled:
        query_id = str(record["id"])
        rng = random.Random(f"{seed}:{query_id}")
        relevant_pool = _unique([r for r in record["references"] if r.get("label") == "relevant"])
        relevant_ids = {r["snippet_id"] for r in relevant_pool}
        irrelevant_pool = _unique(
            [
                {**r, "origin": r.get("origin", "collected")}
                for r in record["references"]
                if r.get("label") == "irrelevant"
            ]
            + [{**r, "origin": "noise"} for r in noise.get(query_id, [])],
            exclude=relevant_ids,
        )
        wanted_relevant = rng.randint(relevant.low, relevant.high)
        wanted_irrelevant = rng.randint(irrelevant.low, irrelevant.high)
        chosen = [(r, "relevant") for r in rng.sample(relevant_pool, min(wanted_relevant, len(relevant_pool)))]
        chosen += [(r, "irrelevant") for r in rng.sample(irrelevant_pool, min(wanted_irrelevant, len(irrelevant_pool)))]
        rng.shuffle(chosen)
        references, answer_key = [], {}
        for number, (reference, label) in enumerate(chosen, 1):
            references.append({"number": number, **{f: reference.get(f, "") for f in SHOWN_FIELDS}})
            answer_key[str(number)] = {"label": label, "origin": reference.get("origin", "collected")}
        shortfall = {}
        relevant_count = sum(1 for _, label in chosen if label == "relevant")
        if relevant_count < relevant.low:
            shortfall["relevant"] = relevant.low - relevant_count
        if len(chosen) - relevant_count < irrelevant.low:
            shortfall["irrelevant"] = irrelevant.low - (len(chosen) - relevant_count)
        yield {
            "id": query_id,
            "query": record["query"],
            "references": references,
            "answer_key": answer_key,
            "counts": {
                "relevant": relevant_count,
                "irrelevant": len(chosen) - relevant_count,
                "available_relevant": len(relevant_pool),
                "available_irrelevant": len(irrelevant_pool),
            },
            "shortfall": shortfall,
            "params": {"seed": seed, "n_relevant": str(relevant), "n_irrelevant": str(irrelevant)},
        }


def _unique(references: list[dict], exclude: set[str] = frozenset()) -> list[dict]:
    """First occurrence of each snippet id (a reference can be both collected and noise), none of `exclude`."""
    seen, unique = set(exclude), []
    for reference in references:
        if reference["snippet_id"] not in seen:
            seen.add(reference["snippet_id"])
            unique.append(reference)
    return unique
