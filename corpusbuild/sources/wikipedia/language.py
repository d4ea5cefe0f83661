"""What Wikipedia cleaning needs to know about a wiki's language.

A dump's `<siteinfo>` says its language (`xml:lang` on the root) and the local names of its namespaces
(`Fichier`, `Catégorie`, `Datei`, `Kategorie`, `模块` ...). It does not say the aliases MediaWiki also
accepts (`Bild:` on dewiki, `Image:` everywhere, `分類:` beside `分类:` on zhwiki), nor what a
language calls its reference, see-also and bibliography sections, nor its disambiguation templates:
those are the per-language tables below. The English canonical names (`File`, `Image`, `Category`,
`Media`, ...) work on every wiki, so they are always included.

A dump whose header names the wrong language (a dewiki page under an enwiki header) is read with an
explicit `--language`, which replaces the header's language and is recorded with the build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from medsnip.languages import canonical_language

# Namespace keys whose links carry no prose: media, special, project, file, template, help, category.
_DROPPED_NAMESPACE_KEYS = {"-2", "-1", "4", "6", "10", "12", "14"}
_CANONICAL_PREFIXES = frozenset(
    {"file", "image", "media", "category", "wikipedia", "wp", "special", "template", "help"}
)


@dataclass(frozen=True)
class LanguageTable:
    """What siteinfo does not say: trailing sections, namespace aliases, disambiguation templates."""

    trailing_sections: frozenset[str]  # casefolded top-level headings whose sections are dropped
    link_prefixes: frozenset[str]  # casefolded namespace names and aliases whose links are dropped
    disambiguation_templates: frozenset[str]  # casefolded template names that mark a disambiguation page


def _table(sections: str, prefixes: str, templates: str) -> LanguageTable:
    def names(text: str) -> frozenset[str]:
        return frozenset(name.strip().casefold() for name in text.split("|") if name.strip())

    return LanguageTable(names(sections), names(prefixes), names(templates))


TABLES: dict[str, LanguageTable] = {
    "en": _table(
        "references|external links|see also|further reading|notes|bibliography|sources|footnotes|citations|"
        "notes and references|references and notes|works cited",
        "",
        "disambiguation|disambig|dab|disamb|hndis|geodis|numberdis|letter-numbercombdisambig|"
        "hospital disambiguation|school disambiguation|mountainindex|set index article|surname|given name",
    ),
    "fr": _table(
        "références|notes et références|notes|voir aussi|liens externes|bibliographie|articles connexes|sources|"
        "lectures complémentaires|annexes|références et notes",
        "fichier|image|média|catégorie|modèle|aide|spécial|wikipédia|portail|projet|module",
        "homonymie|bandeau homonymie|patronymie|toponymie|homonymie de personnes",
    ),
    "de": _table(
        "einzelnachweise|literatur|weblinks|siehe auch|anmerkungen|quellen|belege|fußnoten|referenzen|"
        "quellenangaben|literatur und weblinks|sekundärliteratur|weiterführende literatur",
        "datei|bild|medium|kategorie|vorlage|hilfe|spezial|wikipedia|portal|modul",
        "begriffsklärung|bkl|begriffsklärung (abkürzung)",
    ),
    "zh": _table(
        "参考文献|參考文獻|参考资料|參考資料|参考|參考|参见|參見|参看|參看|外部链接|外部連結|外部連接|外部链接与参考|"
        "注释|註釋|注釋|脚注|腳註|延伸阅读|延伸閱讀|参考书目|參考書目|研究书目|研究書目|相关条目|相關條目|"
        "注释与参考文献|註釋與參考文獻|参考来源|參考來源|书目|書目|参考网址|參考網址|参見|扩展阅读|擴展閱讀|相关链接|相關連結|"
        "外部連結與參考|资料来源|資料來源",
        "文件|檔案|档案|图像|圖像|媒体|媒體|分类|分類|模板|样板|樣板|帮助|幫助|特殊|维基百科|維基百科|模块|模組|"
        "主题|主題|portal|draft|草稿",
        "disambig|dab|消歧义|消歧義|disambiguation|消歧义页|消歧義頁",
    ),
}


_DISAMBIGUATION_TITLES = {"fr": ("(homonymie)",), "de": ("(Begriffsklärung)",), "zh": ("(消歧义)", "(消歧義)")}


@dataclass(frozen=True)
class WikiLanguage:
    """The language a dump's pages are cleaned in, and where that language came from."""

    code: str  # "en", "fr", "de", "zh", or any other code (then only siteinfo and English names apply)
    origin: str  # "siteinfo", "--language" or "default"
    trailing_sections: frozenset[str]
    link_prefixes: frozenset[str]
    disambiguation_re: re.Pattern[str]
    disambiguation_titles: tuple[str, ...]  # title endings of disambiguation pages: "(disambiguation)"

    @property
    def cjk(self) -> bool:
        return self.code in ("zh", "ja", "ko")

    def facts(self) -> dict:
        """What build.json records of the language (per input)."""
        return {"language": self.code, "language_from": self.origin}


def wiki_language(code: str | None, origin: str, namespace_names: tuple[str, ...] = ()) -> WikiLanguage:
    """The cleaning rules for `code`: its table (English's for a language without one: MediaWiki's English
    names are valid everywhere), plus `namespace_names` read from the dump's siteinfo."""
    code = canonical_language(code or "en")
    table = TABLES.get(code, TABLES["en"])
    english = TABLES["en"]
    prefixes = _CANONICAL_PREFIXES | table.link_prefixes | {name.casefold() for name in namespace_names}
    templates = english.disambiguation_templates | table.disambiguation_templates
    alternatives = "|".join(re.escape(name) for name in sorted(templates, key=len, reverse=True))
    return WikiLanguage(
        code=code,
        origin=origin,
        trailing_sections=english.trailing_sections | table.trailing_sections,
        link_prefixes=frozenset(prefixes),
        disambiguation_re=re.compile(r"\{\{\s*(?:" + alternatives + r")\s*[|}]", re.IGNORECASE),
        disambiguation_titles=("(disambiguation)", *_DISAMBIGUATION_TITLES.get(code, ())),
    )


ENGLISH = wiki_language("en", "default")


def siteinfo_language(root, siteinfo, override: str | None) -> WikiLanguage:
    """The language of a dump from its root element and <siteinfo> (either may be None), unless `override`
    (the user's --language) says otherwise."""
    names: list[str] = []
    if siteinfo is not None:
        for element in siteinfo.iter("{*}namespace"):
            if element.get("key") in _DROPPED_NAMESPACE_KEYS and (element.text or "").strip():
                names.append(element.text.strip())
    if override:
        return wiki_language(override, "--language", tuple(names))
    declared = root.get("{http://www.w3.org/XML/1998/namespace}lang") if root is not None else None
    if declared:
        return wiki_language(declared, "siteinfo", tuple(names))
    return wiki_language("en", "default", tuple(names))


# Chinese Wikipedia's language-variant markup: -{text}-, -{zh-hans:简;zh-hant:繁;}-, and flagged forms
# -{H|...}- (a conversion rule, shows nothing), -{T|...}- (a title rule), -{A|...}- (rule and text).
_VARIANT_RE = re.compile(r"-\{(?!\{)(?:([A-Za-z;\s]{1,8})\|)?(.*?)\}-", re.DOTALL)
_VARIANT_PART_RE = re.compile(r"^\s*(zh(?:-[a-z]+)?)\s*:(.*)$", re.DOTALL)
_HIDDEN_FLAGS = {"H", "T", "-"}


def resolve_variants(wikitext: str, preferred: tuple[str, ...] = ()) -> str:
    """The text of every -{...}- block: its variant for the first of `preferred` it lists (e.g. ("zh-hans",
    "zh-cn") when converting to Simplified), else the first variant it lists (the text as its author
    wrote it); a block without variants is its own text; rule-only blocks vanish."""
    if "-{" not in wikitext:
        return wikitext

    def replace(match: re.Match) -> str:
        flags, body = match.group(1), match.group(2)
        if flags and set(flags.replace(";", "").strip()) & _HIDDEN_FLAGS:
            return ""
        variants = {}
        for part in body.split(";"):
            found = _VARIANT_PART_RE.match(part)
            if found:
                variants.setdefault(found.group(1).lower(), found.group(2).strip())
        if not variants or not _VARIANT_PART_RE.match(body):
            return body
        for code in preferred:
            if code in variants:
                return variants[code]
        return next(iter(variants.values()))

    return _VARIANT_RE.sub(replace, wikitext)
