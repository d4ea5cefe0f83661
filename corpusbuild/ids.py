"""What a document id may be, checked where a reader takes it from its input.

Ids end up in snippet ids (`source:doc_id:chunk`), TREC run lines (whitespace-separated), Lucene and
the 64-bit keys that order shards, so:

- **Numeric ids** (PMIDs, Wikipedia page ids) are ASCII digits only, at most 2**63 - 1 (the shard key
  is a signed 64-bit integer). Python's `str.isdigit` would also accept "٣٤٥" or "²"; those are not
  PMIDs and are reported. Leading zeros ("007") name the same citation as "7" in NLM's numbering (a
  DeleteCitation for 7 must remove a record written 007), so they are normalised to the plain number
  and counted (`ids_normalised` in the file's stats), never silently.
- **Free-form ids** (JSONL ids, book and article file names) must be non-empty and hold no whitespace,
  control, format or unassigned characters: a newline or a tab in an id breaks every TREC run and
  qrels file that names it. A JSON number is accepted only as a whole number within 64 bits (orjson
  turns larger integers into floats, which would silently change the id).
"""

from __future__ import annotations

import re
import unicodedata

MAX_KEY = 2**63 - 1
_ASCII_DIGITS = re.compile(r"[0-9]+")


class BadId(ValueError):
    """An id that cannot be used; the message says why (the reader adds file and line)."""


def numeric_id(text: str | None, what: str = "id") -> tuple[int, bool]:
    """(the id as an int, whether it was normalised) for ASCII digits; BadId otherwise."""
    # The common case, a plain PMID of at most 18 digits without a leading zero, needs no regex (one is
    # read per citation): str.isdigit on ASCII text accepts exactly 0-9, and 18 digits stay below MAX_KEY.
    if text and text.isascii() and text.isdigit() and text[0] != "0" and len(text) <= 18:
        return int(text), False
    text = (text or "").strip()
    if not text:
        raise BadId(f"missing {what}")
    if not _ASCII_DIGITS.fullmatch(text):
        raise BadId(f"{what} {text!r} is not a number (ASCII digits 0-9)")
    value = int(text)
    if value > MAX_KEY:
        raise BadId(f"{what} {text} is beyond 64 bits (at most {MAX_KEY})")
    return value, text != str(value)


def text_id(value: object, what: str = "id") -> str:
    """A free-form id as text (a JSON string, or a whole JSON number within 64 bits); BadId otherwise."""
    if isinstance(value, bool) or value is None:
        raise BadId(f"missing or empty {what}" if value is None else f"{what} is a boolean, not an id")
    if isinstance(value, float):
        raise BadId(f"{what} {value!r} is not a whole number within 64 bits: write the id as a JSON string")
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise BadId(f"{what} is a JSON {type(value).__name__}, not a string")
    if value == "":
        raise BadId(f"missing or empty {what}")
    bad = next((c for c in value if unicodedata.category(c)[0] in "CZ"), None)
    if bad is not None:
        raise BadId(
            f"{what} is {value!r}, which holds {unicodedata.name(bad, f'U+{ord(bad):04X}')} (whitespace and control "
            "characters break TREC runs and qrels)"
        )
    return value
