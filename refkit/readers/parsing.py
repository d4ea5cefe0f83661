"""Strict reading of a reader's answers: what is not plainly an answer is `malformed`, recorded as such,
and counts as "no" (a reader that rambles never refuses a candidate or approves a rewrite by accident).

- yes/no: the answer's first word is "yes" or "no" (any case, a trailing period or a clause after a comma
  allowed: "No, it does not."), and no later word says the opposite one;
- names: a JSON array of strings (inside a ```json fence or not), each a name of at most 80 characters.
"""

from __future__ import annotations

import json
import re

_FIRST_WORD = re.compile(r"^\W*(yes|no)\b(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)
_WORD = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_FENCE = re.compile(r"^```(?:json)?\s*(?P<body>.*?)\s*```$", re.DOTALL)
MAX_NAME = 80


def parse_yes_no(answer: str) -> str:
    """ "yes", "no" or "malformed"."""
    match = _FIRST_WORD.match(answer.strip())
    if match is None:
        return "malformed"
    said = match[1].lower()
    if any(word.lower() != said for word in _WORD.findall(match["rest"])):
        return "malformed"
    return said


def parse_names(answer: str, limit: int) -> list[str] | None:
    """The names of a JSON array answer (at most `limit`, blanks and repeats dropped), or None if malformed."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced["body"]
    try:
        names = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) and len(n) <= MAX_NAME for n in names):
        return None
    unique = list(dict.fromkeys(" ".join(n.split()) for n in names if n.strip()))
    return unique[:limit]
