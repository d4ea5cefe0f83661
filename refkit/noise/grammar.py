"""Checks that a rewritten question still reads as English where the rewrite touched it.

`refkit noise` replaces a span of the question (an entity name, an aspect phrase), or writes the question of
another aspect around the question's subject (rule `aspect-question`, which must keep the subject's words as the
question wrote them), and fixes what the
replacement disturbs: the article before it ("a etiology" -> "an etiology", none before a plural),
the grammatical number of the inserted entity name (MeSH's plural "Endoscopes" for a singular
"endosonography" is written "endoscope"), and its capitalisation (lower case in lower-case text, a
capital where the replaced text had one). These checks read the rewrite and its recorded edits
(`text` replaced by `written`) and name each problem; `refkit audit` counts them over a whole run and
the tests require none over every rewrite the demo makes.
"""

from __future__ import annotations

from refkit.noise.writing import ARTICLE_BEFORE, agree_article
from refkit.vocabulary.matcher import is_plural


def rewrite_problems(original: str, rewrite: dict) -> list[str]:
    """What reads wrong in one rewrite ({"query", "replaced": [{"text", "written", "what", ...}]})."""
    text, problems = rewrite["query"], []
    whole = any(edit.get("rule") == "aspect-question" for edit in rewrite["replaced"])
    if text[:1].isupper() != original[:1].isupper() and not whole:
        problems.append(f"first letter's case changed: {text[:20]!r}")
    if "  " in text and "  " not in original:
        problems.append("a double space")
    for edit in rewrite["replaced"]:
        if edit.get("rule") == "aspect-question":  # a whole question about the subject: its words are kept as written
            if edit["text"] not in text:
                problems.append(f"aspect question {text!r} does not keep the subject {edit['text']!r} as written")
            continue
        written, replaced = edit.get("written", ""), edit["text"]
        at = text.find(written) if written else -1
        if at < 0:
            problems.append(f"{edit['what']} {edit['to']!r}: its words {written!r} are not in the rewrite")
            continue
        if replaced.islower() and not written.islower() and not any(w.isupper() for w in written.split()):
            problems.append(f"{written!r} replaces lower-case {replaced!r} with capitals")
        if replaced[:1].isupper() and not written[:1].isupper():
            problems.append(f"{written!r} replaces capitalised {replaced!r} in lower case")
        if edit["what"] == "entity" and is_plural(written) and not is_plural(replaced):
            problems.append(f"plural {written!r} replaces singular {replaced!r}")
        before = text[:at]
        if ARTICLE_BEFORE.search(before) and agree_article(before, written) != before:
            problems.append(f"article before {written!r} does not agree: {before[-12:] + written!r}")
    return problems
