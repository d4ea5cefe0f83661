"""Chinese script: which one a text is written in, and converting between them when asked (OpenCC).

Chinese Wikipedia keeps one text per article, written in Simplified or Traditional characters as its
authors chose (often both within one page), and shows readers their variant by converting at display
time. medsnip keeps the text as written and records, per snippet, what it is written in:
`Hans` (Simplified only), `Hant` (Traditional only), `mixed`, or `neutral` (characters the two share).
`--convert-script hans|hant` converts every title and text with OpenCC (t2s / s2t) and picks that
variant in -{zh-hans:...;zh-hant:...}- markup; the choice is recorded in the build.
"""

from __future__ import annotations

from functools import lru_cache

TARGETS = ("hans", "hant")
_VARIANTS = {
    None: (),
    "hans": ("zh-hans", "zh-cn", "zh-sg", "zh-my"),
    "hant": ("zh-hant", "zh-tw", "zh-hk", "zh-mo"),
}


@lru_cache(maxsize=4)
def _converter(config: str):
    import opencc

    return opencc.OpenCC(config)


class ChineseScript:
    def __init__(self, target: str | None = None):
        if target is not None and target not in TARGETS:
            raise ValueError(f"script conversion must be one of {', '.join(TARGETS)}, got {target!r}")
        self.target = target
        self.preferred_variants = _VARIANTS[target]

    @classmethod
    def for_build(cls, language: str, convert: str | None) -> ChineseScript | None:
        """The script handling for a dump in `language` (None unless Chinese); converting a dump that is
        not Chinese is an error rather than a no-op."""
        if language != "zh":
            if convert:
                raise ValueError(f"--convert-script applies to Chinese (zh) text; this dump is {language!r}")
            return None
        return cls(convert)

    def convert(self, text: str) -> str:
        if self.target is None or not text:
            return text
        return _converter("t2s.json" if self.target == "hans" else "s2t.json").convert(text)

    @staticmethod
    def written_in(text: str) -> str:
        """`Hans`, `Hant`, `mixed` or `neutral`: the scripts whose conversion leaves `text` unchanged tell."""
        simplified = _converter("t2s.json").convert(text) == text  # nothing Traditional-only in it
        traditional = _converter("s2t.json").convert(text) == text  # nothing Simplified-only in it
        if simplified and traditional:
            return "neutral"
        if simplified:
            return "Hans"
        if traditional:
            return "Hant"
        return "mixed"
