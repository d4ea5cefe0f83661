"""Gene and protein symbols in text ("BCL11B", "VPS4A", "HMGB2", "TP53") and their families.

New biomedical questions ask about genes no vocabulary snapshot lists; HGNC writes their symbols in
capitals with a number, and a family's members share the symbol's root and differ in the final
number or letter (VPS4A / VPS4B, BCL11A / BCL11B, HMGB1 / HMGB2, TP53 / TP63, PRC1 / PRC2). A symbol is
a capitalised token of `MIN_CHARS` to `MAX_CHARS` letters and digits, with a digit, starting with at
least two letters (so "H1N1", "T2", "5HT" and amino-acid positions such as "R132H" are left out).
Its root is the symbol without its final letter when that letter follows a digit (VPS4A -> VPS4),
otherwise without its final digits (HMGB2 -> HMGB).
"""

from __future__ import annotations

import re

MIN_CHARS, MAX_CHARS = 3, 10
SYMBOL = re.compile(r"(?<![\w-])([A-Z]{2}[A-Z0-9]*\d[A-Z0-9]*)(?!\w|-\d)")  # "HMGB1-mediated" names HMGB1
_VARIANT_LETTER = re.compile(r"^(.*\d)([A-Z])$")
_VARIANT_DIGITS = re.compile(r"^(.*[A-Z])(\d+)$")
_POSITION = re.compile(r"^[A-Z]\d+[A-Z]$")  # R132H: a residue change, not a gene


def is_symbol(token: str) -> bool:
    return bool(MIN_CHARS <= len(token) <= MAX_CHARS and SYMBOL.fullmatch(token) and not _POSITION.match(token))


def symbols(text: str) -> list[str]:
    """The symbols written in a text, in order (repeats kept)."""
    return [m.group(1) for m in SYMBOL.finditer(text) if is_symbol(m.group(1))]


GENE_WORDS = frozenset({"protein", "proteins", "gene", "genes", "receptor", "receptors"})


def symbol_of_name(name: str) -> str | None:
    """The symbol a name is, or starts a gene or protein name with ("HMGB1", "HMGB1 Protein", "BRCA1 Gene")."""
    words = name.split()
    if words and is_symbol(words[0]) and all(w.lower() in GENE_WORDS for w in words[1:]):
        return words[0]
    return None


def family_root(symbol: str) -> str | None:
    """The root the symbol's family shares (None when what is left is shorter than two characters)."""
    match = _VARIANT_LETTER.match(symbol) or _VARIANT_DIGITS.match(symbol)
    if match is None or len(match.group(1)) < 2:
        return None
    return match.group(1)
