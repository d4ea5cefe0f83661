"""Content deduplication of references: exact (hash of normalised text) and near-duplicate (MinHash LSH).

References are offered best-ranked first; the first member of a cluster stays and every later member
is dropped as a duplicate *of that member*. Near-duplicates are found with datasketch's MinHash LSH
over word shingles (fixed seed, so the same texts always give the same candidates), and each LSH
candidate is then confirmed with the exact Jaccard similarity of the two shingle sets, so a drop never
rests on an estimate and the recorded similarity is the true one.

Normalisation (for both): Unicode NFKC, case-folded, every run of non-alphanumeric characters turned
into one space. Overlapping chunks of one document (200 characters of overlap in 1000) stay far below
the default threshold of 0.8; the same paragraph copied into two articles does not.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from dataclasses import dataclass

from datasketch import MinHash, MinHashLSH

from medsnip.languages import CJK_CHARACTERS

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalise(text: str) -> str:
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def content_hash(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


# A Han, kana or Hangul character, or a run of anything else but spaces: Chinese and Japanese have no
# spaces between words, so each of their characters counts as a word (3-word shingles: 3 characters).
_TOKEN = re.compile(f"[{CJK_CHARACTERS}]|[^\\s{CJK_CHARACTERS}]+")


def words_of(text: str) -> list[str]:
    normalised = normalise(text)
    return normalised.split() if normalised.isascii() else _TOKEN.findall(normalised)


def shingles(text: str, size: int) -> set[str]:
    """Word `size`-grams of the normalised text (the whole text as one shingle when it is shorter); in CJK
    text every character is a word."""
    words = words_of(text)
    if len(words) <= size:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + size]) for i in range(len(words) - size + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


@dataclass(frozen=True)
class Duplicate:
    of: str  # the key of the kept member of the cluster
    kind: str  # "exact" | "near"
    jaccard: float

    def as_dict(self) -> dict:
        return {"duplicate_of": self.of, "kind": self.kind, "jaccard": round(self.jaccard, 4)}


@functools.lru_cache(maxsize=16)
def _lsh_params(threshold: float, num_perm: int) -> tuple[int, int]:
    """datasketch's (bands, rows) for a threshold: it integrates to find them (~25 ms), so once per setting
    rather than once per query."""
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    return lsh.b, lsh.r


@functools.lru_cache(maxsize=16)
def _permutations(num_perm: int, seed: int) -> tuple:
    """The seeded hash permutations (and their scheme), drawn once and shared by every MinHash."""
    template = MinHash(num_perm=num_perm, seed=seed)
    return template.permutations, template.scheme


class Deduplicator:
    def __init__(self, threshold: float = 0.8, shingle_words: int = 3, num_perm: int = 128, seed: int = 1):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"near-duplicate threshold must be in (0, 1], got {threshold}")
        self.threshold, self.shingle_words, self.num_perm, self.seed = threshold, shingle_words, num_perm, seed
        self._lsh = MinHashLSH(num_perm=num_perm, params=_lsh_params(threshold, num_perm))
        self._exact: dict[str, str] = {}
        self._shingles: dict[str, set[str]] = {}
        self._order: dict[str, int] = {}

    def params(self) -> dict:
        return {
            "threshold": self.threshold,
            "shingle_words": self.shingle_words,
            "num_perm": self.num_perm,
            "seed": self.seed,
        }

    def _minhash(self, words: set[str]) -> MinHash:
        permutations, scheme = _permutations(self.num_perm, self.seed)
        minhash = MinHash(num_perm=self.num_perm, seed=self.seed, permutations=permutations, scheme=scheme)
        minhash.update_batch([w.encode("utf-8") for w in sorted(words)])
        return minhash

    def match(self, text: str) -> Duplicate | None:
        """The kept text this one duplicates (the earliest kept of the best matches), or None."""
        return self._match(content_hash(text), shingles(text, self.shingle_words), {})

    def _match(self, digest: str, words: set[str], cache: dict) -> Duplicate | None:
        kept = self._exact.get(digest)
        if kept is not None:
            return Duplicate(kept, "exact", 1.0)
        if not words:
            return None
        cache["minhash"] = self._minhash(words)
        best: tuple[float, int, str] | None = None
        for key in self._lsh.query(cache["minhash"]):
            similarity = jaccard(words, self._shingles[key])
            if similarity >= self.threshold:
                candidate = (-similarity, self._order[key], key)
                best = candidate if best is None or candidate < best else best
        return None if best is None else Duplicate(best[2], "near", -best[0])

    def add(self, key: str, text: str) -> None:
        """Keep `key` (a new cluster): later texts are compared with it."""
        self._add(key, content_hash(text), shingles(text, self.shingle_words), {})

    def _add(self, key: str, digest: str, words: set[str], cache: dict) -> None:
        if key in self._order:
            return
        self._order[key] = len(self._order)
        self._exact.setdefault(digest, key)
        if words:
            self._shingles[key] = words
            self._lsh.insert(key, cache.get("minhash") or self._minhash(words))

    def offer(self, key: str, text: str) -> Duplicate | None:
        """match() and, when the text is new, add() it (its shingles and MinHash computed once)."""
        digest, words, cache = content_hash(text), shingles(text, self.shingle_words), {}
        duplicate = self._match(digest, words, cache)
        if duplicate is None:
            self._add(key, digest, words, cache)
        return duplicate
