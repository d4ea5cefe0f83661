"""Reading query files (searchd batch, refkit): JSONL/TSV and the question sets users already have.

Field mapping (docs: reference/query-files):

| format   | file shape                                   | id                      | query          |
|----------|----------------------------------------------|-------------------------|----------------|
| jsonl    | one object per line                          | `id` (or `_id`, `qid`)  | `query` (or `text`, `question`) |
| tsv      | `id<TAB>query` lines, optional header        | column 1                | column 2       |
| pubmedqa | PubMedQA JSON: `{PMID: {"QUESTION": ...}}`   | the PMID                | `QUESTION`     |
| bioasq   | BioASQ JSON: `{"questions": [...]}`          | `id`                    | `body`         |
| medqa    | MedQA JSONL (no id field)                    | `medqa-<line number>`   | `question`     |
| cmb-clin | CMB-Clin JSON: cases with `QA_pairs`         | `<case id>-<n>`, n from 1 | `description` + `question` |
| frenchmedmcqa | FrenchMedMCQA JSON list                 | `id`                    | `question`     |

Multi-CPR's `qid<TAB>query` files (`dev.query.txt`) are `tsv`. A CMB-Clin question ("简述该病人的诊断及诊断
依据。") means nothing without its case, so the query is the case description followed by the question.

`auto` picks the format from the extension and the first record. Every error names the file and the
line (or the JSON key) and the field, and nothing is read past it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from medsnip.jsonl import InputFileError, read_jsonl

FORMATS = ("auto", "jsonl", "tsv", "pubmedqa", "bioasq", "medqa", "cmb-clin", "frenchmedmcqa")
_ID_KEYS = ("id", "_id", "qid")
_TEXT_KEYS = ("query", "text", "question")


class QueryFileError(InputFileError):
    """A query file that cannot be read as asked (the message names the file and the place)."""


@dataclass(frozen=True)
class QueryItem:
    id: str
    query: str


def read_query_file(path: Path, file_format: str = "auto", limit: int | None = None) -> list[QueryItem]:
    """The queries of `path`, in file order (at most `limit`); ids must be unique and queries non-empty."""
    path = Path(path)
    if not path.is_file():
        raise QueryFileError(f"{path}: no such query file")
    if file_format == "auto":
        file_format = _detect(path)
    readers = {
        "jsonl": _jsonl,
        "tsv": _tsv,
        "pubmedqa": _pubmedqa,
        "bioasq": _bioasq,
        "medqa": _medqa,
        "cmb-clin": _cmb_clin,
        "frenchmedmcqa": _frenchmedmcqa,
    }
    if file_format not in readers:
        raise QueryFileError(f"{path}: unknown query format {file_format!r} (one of {', '.join(FORMATS)})")
    items: list[QueryItem] = []
    seen: dict[str, str] = {}
    for where, query_id, text in readers[file_format](path):
        query_id = "" if query_id is None else str(query_id).strip()
        if not query_id:
            raise QueryFileError(f"{where}: missing id")
        if any(ch.isspace() for ch in query_id):  # a run file's line is split on whitespace
            raise QueryFileError(f"{where}: id {query_id!r} has whitespace in it (TREC run lines split on it)")
        if not isinstance(text, str) or not text.strip():
            raise QueryFileError(f"{where}: empty query (id {query_id})")
        if not any(ch.isalnum() for ch in text):  # a zero-width space, punctuation: nothing to search for
            raise QueryFileError(f"{where}: query {query_id} has no letter or digit in it")
        if query_id in seen:
            raise QueryFileError(f"{where}: duplicate id {query_id} (first at {seen[query_id]})")
        seen[query_id] = where
        items.append(QueryItem(query_id, " ".join(text.split())))
        if limit is not None and len(items) >= limit:
            break
    if not items:
        raise QueryFileError(f"{path}: no queries")
    return items


def query_texts(path: Path, file_format: str = "auto") -> dict[str, str]:
    """id -> query text of a query file, in file order."""
    return {item.id: item.query for item in read_query_file(path, file_format)}


def _detect(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".tsv") or name.endswith(".txt"):
        return "tsv"
    if name.endswith(".jsonl"):
        with open(path, encoding="utf-8-sig") as handle:
            first = next((line for line in handle if line.strip()), "")
        try:
            record = json.loads(first) if first else {}
        except json.JSONDecodeError as error:
            raise QueryFileError(f"{path}:1: not JSON ({error.msg})") from error
        if isinstance(record, dict) and "question" in record and not (set(_ID_KEYS) & record.keys()):
            return "medqa"
        return "jsonl"
    if name.endswith(".json"):
        data = _load_json(path)
        if isinstance(data, dict) and isinstance(data.get("questions"), list):
            return "bioasq"
        if isinstance(data, dict) and all(isinstance(v, dict) and "QUESTION" in v for v in data.values()):
            return "pubmedqa"
        first = data[0] if isinstance(data, list) and data else None
        if isinstance(first, dict) and "QA_pairs" in first:
            return "cmb-clin"
        if isinstance(first, dict) and "question" in first and "answers" in first:
            return "frenchmedmcqa"
        raise QueryFileError(
            f"{path}: a JSON file of no known query format (BioASQ, PubMedQA, CMB-Clin, FrenchMedMCQA); pass --format"
        )
    raise QueryFileError(f"{path}: cannot tell the query format from the name; pass --format")


def _load_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as error:
        raise QueryFileError(f"{path}:{error.lineno}: not JSON ({error.msg})") from error
    except UnicodeDecodeError as error:
        raise QueryFileError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error


def _jsonl(path: Path):
    for number, record in read_jsonl(path, error=QueryFileError):
        query_id = next((record[key] for key in _ID_KEYS if key in record), None)
        text_key = next((key for key in _TEXT_KEYS if key in record), None)
        if text_key is None:
            raise QueryFileError(f"{path}:{number}: no 'query' field (nor 'text', 'question')")
        yield f"{path}:{number}", query_id, record[text_key]


def _medqa(path: Path):
    for number, record in read_jsonl(path, error=QueryFileError):
        if "question" not in record:
            raise QueryFileError(f"{path}:{number}: no 'question' field (MedQA)")
        yield f"{path}:{number}", f"medqa-{number}", record["question"]


def _tsv(path: Path):
    """Split on tabs, no quoting (so no field-size limit: a long query reaches the server's own check).
    Exactly two columns: a third means a tab inside a query, which would otherwise cut it short. Lines
    are decoded one by one, so a byte that is not UTF-8 is reported on its own line."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")  # -sig: a byte-order mark is not the id
            except UnicodeDecodeError as error:
                raise QueryFileError(
                    f"{path}:{number}: not UTF-8 text ({error.reason} at byte {error.start} of the line)"
                ) from error
            line = line.rstrip("\r\n")
            row = line.split("\t") if line else []
            if not row or (number == 1 and row[0].strip().lower() in ("id", "qid", "query-id", "query_id")):
                continue
            if len(row) < 2:
                raise QueryFileError(f"{path}:{number}: expected 'id<TAB>query', found one column")
            if len(row) > 2:
                raise QueryFileError(
                    f"{path}:{number}: expected 'id<TAB>query', found {len(row)} columns (a tab "
                    "inside the query? write it as a space)"
                )
            yield f"{path}:{number}", row[0], row[1]


def _pubmedqa(path: Path):
    data = _load_json(path)
    if not isinstance(data, dict):
        raise QueryFileError(f"{path}: PubMedQA JSON is an object keyed by PMID")
    for pmid, record in data.items():
        if not isinstance(record, dict) or "QUESTION" not in record:
            raise QueryFileError(f"{path}: [{pmid!r}]: no 'QUESTION' field (PubMedQA)")
        yield f"{path}: [{pmid!r}]", pmid, record["QUESTION"]


def _bioasq(path: Path):
    data = _load_json(path)
    questions = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(questions, list):
        raise QueryFileError(f"{path}: BioASQ JSON has a 'questions' list")
    for position, record in enumerate(questions):
        if not isinstance(record, dict) or "body" not in record:
            raise QueryFileError(f"{path}: questions[{position}]: no 'body' field (BioASQ)")
        yield f"{path}: questions[{position}]", record.get("id"), record["body"]


def _json_list(path: Path, what: str) -> list:
    data = _load_json(path)
    if not isinstance(data, list):
        raise QueryFileError(f"{path}: {what} JSON is a list")
    return data


def _cmb_clin(path: Path):
    for position, case in enumerate(_json_list(path, "CMB-Clin")):
        if not isinstance(case, dict) or not isinstance(case.get("QA_pairs"), list):
            raise QueryFileError(f"{path}: [{position}]: no 'QA_pairs' list (CMB-Clin)")
        description = case.get("description") or ""
        for number, pair in enumerate(case["QA_pairs"], 1):
            where = f"{path}: [{position}].QA_pairs[{number - 1}]"
            if not isinstance(pair, dict) or not isinstance(pair.get("question"), str):
                raise QueryFileError(f"{where}: no 'question' field (CMB-Clin)")
            yield where, f"{case.get('id', position)}-{number}", f"{description}\n{pair['question']}"


def _frenchmedmcqa(path: Path):
    for position, record in enumerate(_json_list(path, "FrenchMedMCQA")):
        if not isinstance(record, dict) or "question" not in record:
            raise QueryFileError(f"{path}: [{position}]: no 'question' field (FrenchMedMCQA)")
        yield f"{path}: [{position}]", record.get("id"), record["question"]
