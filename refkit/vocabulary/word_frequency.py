"""How common an English word is (wordfreq's Zipf scale), the one place refkit asks.

refkit asks it of hundreds of thousands of names when a lexicon is built (is "Plan B" a brand or two
English words?), and wordfreq's `zipf_frequency` tokenizes every word it is given before looking it up.
A word of lower-case ASCII letters is its own only token, so it is looked up in wordfreq's table directly,
with the same rounding; every other word goes through wordfreq as written."""

from __future__ import annotations

import functools
import math
import re

_PLAIN = re.compile(r"[a-z]+")


@functools.cache
def _table() -> dict[str, float]:
    from wordfreq import get_frequency_dict  # its tables load on first use

    return get_frequency_dict("en", "best")


@functools.cache
def english_zipf(word: str) -> float:
    """wordfreq's `zipf_frequency(word, "en")`: 0 for a word it never saw, about 7 for "the"."""
    if _PLAIN.fullmatch(word):
        frequency = _table().get(word, 0.0)
        if frequency == 0.0:
            return 0.0
        frequency = round(frequency, math.floor(-math.log(frequency, 10)) + 3)  # wordfreq's 3 significant digits
        return round(math.log(frequency, 10) + 9, 2)
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en")


def english_words(minimum_zipf: float) -> list[str]:
    """Every alphabetic word of wordfreq's English table at `minimum_zipf` or above, most common first."""
    near = 10 ** (minimum_zipf - 9) * 0.99  # a little under the bound: wordfreq rounds before it compares
    words = []
    for word, frequency in _table().items():  # the table runs from the most common word down
        if frequency < near:
            break
        if word.isalpha() and english_zipf(word) >= minimum_zipf:
            words.append(word)
    return words
