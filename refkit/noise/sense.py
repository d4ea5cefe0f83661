"""Does a rewrite still make sense as a question? The rules `refkit noise` applies before it writes a
rewrite and `refkit audit` applies again to every rewrite of a run.

CRAB's irrelevant references come from a query with one entity or one aspect replaced; the rewrite must
still be a question an expert would ask, about something else. The rules, each with the name that
`refkit audit` reports:

- `generic`: a generic descriptor ("Disease", "Cells", "Neoplasms", "Syndrome") is never replaced on
  its own and never written in: it names a category, not a concept, and inside a longer concept
  ("Alzheimer's disease", "B cell malignancies") replacing it breaks the concept. Generic means any of:
  - where trees are known, every tree number of depth 1 or 2 (C10, C10.228; Diabetes Mellitus, also at
    C18.452.394.750, is specific);
  - a name that at least `GENERIC_SHARE` of the vocabulary's names (and at least
    `GENERIC_MIN_CONTAINING`) contain word for word: on every MeSH name, Acids, Antigens, Blood, Cells,
    Disease, DNA, Genes, Growth, Health, Infections, Medicine, Neoplasms, Nursing, Proteins, RNA, Syndrome;
  - a one-word name that is an everyday English word: Zipf frequency at least `EVERYDAY_ZIPF` in
    general English (the `wordfreq` package's data: Wikipedia, subtitles, news, books, web text), such
    as Family, Work, Water, Back, Head, Light, Records, Blood, Skin, Pain, Sleep (MeSH has descriptors by those
    names, and a question that says "family" or "back" rarely means them).
- `possessive`: the replaced words follow a possessive ("Alzheimer's <disease>"): they belong to a longer
  concept the vocabulary did not know.
- `unwritable` (entity swaps): a name with no natural reading (an inverted heading with several
  commas, "Anemia, Hemolytic, Congenital Nonspherocytic"), naming an experimental model ("Neoplasms,
  Experimental") or a combination product ("Amlodipine, Valsartan Drug Combination") is never written in.
- `same-concept` (entity swaps): never an ancestor or a descendant (trees; names nested word for word),
  never one of its own names, and never a group for one concept or one concept for a group: MeSH names
  groups in the plural
  ("Antipsychotic Agents", "Brain Diseases", "Memory Disorders") and single concepts in the singular
  ("Risperidone", "Alzheimer Disease"), so a swap keeps the number of the name. Groups swap with
  groups ("Breast Neoplasms" / "Lung Neoplasms").
- `question`: in a text of more than two sentences (a case vignette) only the last one asks (from its
  question word, where a lab list runs into it without a full stop), with the sentence before it when
  that one is a short statement without numbers ("Risperidone therapy is initiated."); an entity or
  aspect of the findings before is never replaced ("pedal edema" -> "pedal empyema" makes a case nobody would
  write), and neither is an entity written as one everyday word ("emergency" in "the emergency
  department").
- `compound`: an entity written right next to a generic word ("lung" in "non-small cell lung cancer",
  "cell" in "B cell malignancies"), inside a longer proper name ("Granzyme B", "γ-cyclodextrin"), or as
  one word of a noun phrase the vocabulary did not match whole (next to another matched entity: "serum
  urea nitrogen"; after a code or a name: "the CYP1A2 enzyme"; after an adjective: "pedal pulses",
  "periportal fibrosis"; itself an adjective before a word: "therapeutic index") is part of a concept
  the vocabulary does not know; it is never the one replaced. A rewrite never writes a word twice in
  a row where the original did not ("gestational diabetes mellitus" -> "diabetes mellitus mellitus").
- `member-frame` (English entity swaps): the question says of its entity something that holds for that one
  member of a class only, and another member put in makes a question with a false premise: what it is made
  of ("What is the active ingredient of Eligard?" -> "... of tamoxifen?", "the main component of the Lewy
  body" -> "... of the Purkinje cell"), who makes it ("IDH inhibitors by Agios Pharmaceuticals"), the trial
  that tested it ("... effective for stroke in the RIGHT-2 trial?"), that it is
  approved or marketed (a wh-question about a drug: "What is tolebrutinib approved for in the United
  States?"), or which kind of molecule it acts on (a drug: "Which interleukins are affected by rituximab?").
  A yes/no question keeps its approval frame ("Is X approved for Y?": the answer may be no).
- `repeated-word`: a swap never writes a word the question already has spelt nearly alike ("such as mysositis
  and rhabdomyolysis" -> "... mysositis and myositis").
- `aspect-position`: an aspect is replaced only where it is what the question asks about the entity:
  "the X of|for|in ... <entity>", "<entity>('s) X", or a question's head ("which of the following X",
  "what X"); never inside a compound ("gene therapies": a word that is neither a function word nor a
  usual modifier stands right before it; "adenoma detection rate", "treatment options": a noun
  follows it), and never in a headline before the question ("quality of life and outcome in stroke
  patients: is the Barthel index an adequate measure?").
- `predicate`: the replacement must fit the words that govern the aspect, staying in the group of the
  aspect it replaces: after "effective for the", "used for", "approved for" ... only therapeutic aspects
  (treatment, indications); after "risk for", "risk of" only harms (adverse effects, complications);
  after "is/are (they, smoking, ...) a/an" (the aspect said of a subject) a cause for a cause (risk factors,
  etiology), a sign for a sign (symptoms, complications). "Is eteplirsen effective for the treatment of
  DMD?" gets no aspect swap, as no other therapeutic aspect of a disease exists; "Fast foods - are they
  a risk factor for asthma?" may become "... an etiology for asthma?", never "... a prognosis for".

The `aspect-position`, `predicate` and everyday-word rules read English word order and frequency; a
query in another language is not held to them.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable

import ahocorasick

from refkit.vocabulary.lexicon import Entity, Lexicon, group_name, natural_name
from refkit.vocabulary.word_frequency import english_zipf

GENERIC_SHARE = 0.0025  # of the vocabulary's names that contain a generic name word for word
GENERIC_MIN_CONTAINING = 20  # a small vocabulary has no generic names by share alone
GENERIC_TREE_DEPTH = 2
EVERYDAY_ZIPF = 4.7  # "family" 5.7, "pain" 5.0, "emergency" 4.72; "alcohol" 4.6, "fever" 4.2, "asthma" 3.7 are not

_WORD = re.compile(r"\w+(?:['\u2019]\w+)?")
_NAME_WORD = re.compile(r"\w+")


def name_words(name: str) -> frozenset[str]:
    return frozenset(_NAME_WORD.findall(name.casefold()))


def nested_names(a: str, b: str) -> bool:
    """Does one name hold every word of the other ("Asthma" in "Asthma, Aspirin-Induced")?"""
    words_a, words_b = name_words(a), name_words(b)
    return bool(words_a and words_b) and (words_a <= words_b or words_b <= words_a)


# Words that may stand right before an aspect without making it part of a compound noun.
FUNCTION_WORDS = frozenset(
    "the a an of for in on to and or its their his her what which are is was were be been does do did how "
    "with by as from about following this these that those any all some main major most common known "
    "possible potential usual typical primary first best new current recommended serious severe long-term "
    "short-term early late clinical other key underlying associated related specific exact precise likely "
    "genetic molecular than between among there it they".split()
)
# Words that govern an aspect, and the groups of aspects that fit after them: a swap stays inside the
# group of the aspect it replaces. Every other pairing is left as the aspect table allows.
THERAPEUTIC = frozenset({"treatment", "indications"})
HARMS = frozenset({"adverse effects", "complications"})
CAUSES = frozenset({"risk factors", "etiology"})
MANIFESTATIONS = frozenset({"symptoms", "complications"})
GOVERNORS = (
    (
        re.compile(
            r"\b(effective|efficacy|efficacious|used|use|approved|indicated|useful|beneficial|safe|option|options|"
            r"choice|drugs?|agents?|therapy|therapies|licensed|recommended)\s+(for|in)\s+(the\s+|a\s+|an\s+)?$",
            re.I,
        ),
        (THERAPEUTIC,),
        "a therapeutic use",
    ),
    (re.compile(r"\brisk\s+(for|of)\b[^.?!;]*$", re.I), (HARMS,), "a harm"),
    # "Fast foods - are they a risk factor for asthma?": the aspect is said of a subject, so only an
    # aspect that can be said of the same subject fits (a cause for a cause, a sign for a sign).
    (
        re.compile(r"\b(is|are|was|were|be|being|been)\s+((?!the\b)\w+\s+){0,4}(a|an)\s+$", re.I),
        (CAUSES, MANIFESTATIONS, THERAPEUTIC),
        "what its subject can be",
    ),
)
_QUESTION_HEAD = re.compile(r"\b(which|what)(\s+of\s+the\s+following)?(\s+\w+){0,2}\s*$", re.I)
_PREPOSITION_AFTER = re.compile(
    r"^\s*(of|for|in|on|with|to|from|after|during|among|associated\s+with|caused\s+by)\b", re.I
)
ENTITY_WINDOW = 60  # characters between an aspect's preposition and its entity


def generic_keys(lexicon: Lexicon) -> frozenset[str]:
    """Keys of the lexicon's generic entities (see the module's `generic` rule)."""
    generic = {
        e.key for e in lexicon.entities.values() if e.trees and max(_depth(t) for t in e.trees) <= GENERIC_TREE_DEPTH
    }
    phrases = {e.key: " ".join(w.lower() for w in _WORD.findall(natural_name(e))) for e in lexicon.entities.values()}
    automaton = ahocorasick.Automaton()
    for key, phrase in phrases.items():
        if phrase and phrase not in automaton:
            automaton.add_word(phrase, (key, len(phrase)))
    if len(automaton) == 0:
        return frozenset(generic)
    automaton.make_automaton()
    containing: Counter = Counter()
    for key, phrase in phrases.items():
        for end, (inner, length) in automaton.iter(phrase):
            start = end - length + 1
            if (
                inner != key
                and (start == 0 or phrase[start - 1] == " ")
                and (end + 1 == len(phrase) or phrase[end + 1] == " ")
            ):
                containing[inner] += 1
    floor = max(GENERIC_MIN_CONTAINING, GENERIC_SHARE * len(phrases))
    generic |= {key for key, count in containing.items() if count >= floor}
    generic |= {key for key, phrase in phrases.items() if " " not in phrase and everyday_word(phrase)}
    return frozenset(generic)


def everyday_word(word: str) -> bool:
    return english_zipf(word) >= EVERYDAY_ZIPF


def _depth(tree: str) -> int:
    return tree.count(".") + 1


def _tree_parents(trees: list[str]) -> set[str]:
    return {tree.rpartition(".")[0] or tree[:1] for tree in trees}


def tree_siblings(a: list[str], b: list[str]) -> bool:
    """Do two entities share a tree parent (C19.246.099 and C19.246.267 under C19.246)?"""
    return bool(a and b and _tree_parents(a) & _tree_parents(b))


def entity_swap_problem(original: Entity, replacement: Entity, generic: frozenset[str]) -> str | None:
    """Why replacing `original` by `replacement` would not make another meaningful question (None: it would)."""
    if original.key in generic:
        return f"generic: {original.name} names a category, not a concept"
    if replacement.key in generic:
        return f"generic: {replacement.name} names a category, not a concept"
    written = natural_name(replacement)
    if "," in written:  # "Anemia, Hemolytic, Congenital Nonspherocytic": no reading a question would write
        return f"unwritable: {replacement.name} has no natural reading"
    if re.search(r"\bexperimental\b", written, re.I):  # animal models, not what a clinical question names
        return f"unwritable: {replacement.name} names an experimental model"
    if re.search(r"\bdrug combination\b", replacement.name, re.I):  # a product of several drugs, not a drug
        return f"unwritable: {replacement.name} names a combination product"
    if replacement.key == original.key or replacement.key in {f.casefold() for f in original.surface_forms()}:
        return f"same-concept: {replacement.name} is a name of {original.name}"
    if any(x == y or x.startswith(y + ".") or y.startswith(x + ".") for x in original.trees for y in replacement.trees):
        return f"same-concept: {replacement.name} is an ancestor or a descendant of {original.name} (trees)"
    if nested_names(original.name, replacement.name):
        return f"same-concept: one of {original.name} / {replacement.name} holds the other's words"
    if group_name(original) != group_name(replacement):
        kinds = ("a group", "one concept") if group_name(original) else ("one concept", "a group")
        return (
            f"same-concept: {original.name} is {kinds[0]}, {replacement.name} {kinds[1]} (MeSH names groups "
            "in the plural)"
        )
    return None


_SENTENCE_START = re.compile(r"(?<=[.?!])[\"'\u201d]?\s+(?=[A-Z\"'\u201c])")
QUESTION_SENTENCES = 2
STATEMENT_WORDS = 8  # "Risperidone therapy is initiated." states what was done; longer sentences describe findings


# A vignette's lab list often runs into its question without a full stop ("... 8,100/mm3 Which of the
# following ..."): a capitalised question word after a non-final word starts the question there.
_ASKING_HEAD = re.compile(r"(?<=[^\s.?!:;])\s+(?=(Which|What|How|Why|When|Where|Who|Whose)\b)")


# a question that opens with an auxiliary verb asks yes or no ("Is cabozantinib effective ...?")
AUXILIARY = re.compile(r"^\s*(is|are|was|were|does|do|did|has|have|had|can|could|will|would|should|may|might)\b", re.I)


def question_part(query: str) -> int:
    """Where the part of a query that asks begins: in a text of more than `QUESTION_SENTENCES` sentences
    (a MedQA case vignette: its findings, vitals and tests are the case, not what is asked) its last
    sentence, from its question word when a lab list runs into it, together with the sentence before
    when that one is a short statement without numbers (at most STATEMENT_WORDS words: "Risperidone
    therapy is initiated."; a longer one or one with numbers describes findings: "An x-ray shows patchy
    areas of lytic bone and sclerosis ..."); else 0 (the whole text asks). Swapping a
    finding ("the emergency department", "pedal edema") makes a case nobody would write."""
    starts = [m.end() for m in _SENTENCE_START.finditer(query)]
    if len(starts) < QUESTION_SENTENCES:
        return 0
    head = _ASKING_HEAD.search(query, starts[-1])
    bounds = [*starts, head.end()] if head else starts
    previous = query[bounds[-2] : bounds[-1]]
    statement = not re.search(r"\d", previous) and len(previous.split()) <= STATEMENT_WORDS
    return bounds[-2] if statement else bounds[-1]


_DESIGNATOR_AFTER = re.compile(r"^[ -]?([A-Z]|\d+[a-z]?|I{1,3}|IV|VI{0,3}|[\u0370-\u03ff])\b")
_DESIGNATOR_BEFORE = re.compile(r"(\b[A-Za-z]|[\u0370-\u03ff]|\d+)-$")


def inside_a_name(text: str, span: tuple[int, int]) -> bool:
    """Is the match part of a longer proper name: followed by a designator ("Granzyme B", "type 2",
    "Factor VIII") or preceded by a letter prefix ("γ-cyclodextrin", "N-acetylcysteine")?"""
    start, end = span
    return bool(_DESIGNATOR_AFTER.match(text[end:]) or _DESIGNATOR_BEFORE.search(text[:start]))


def next_to_generic(match_span: tuple[int, int], generic_spans: Iterable[tuple[int, int]], text: str) -> bool:
    """Is the entity at `match_span` written right next to a generic word (only spaces or a hyphen between)?"""
    start, end = match_span
    return any(
        (0 <= g_start - end <= 1 and text[end:g_start] in ("", " ", "-"))
        or (0 <= start - g_end <= 1 and text[g_end:start] in ("", " ", "-"))
        for g_start, g_end in generic_spans
    )


_ADJECTIVE_ENDING = re.compile(r"\w{2,}(al|ic|ous|ary|ive|ior|ar|ile|oid)$", re.I)
_LEFT_WORD = re.compile(r"([\w'\u2019/-]+)[ -]$")
_RIGHT_WORD = re.compile(r"^[ -]([\w'\u2019/-]+)")


def modifier_problem(text: str, span: tuple[int, int], entity_spans: Iterable[tuple[int, int]]) -> str | None:
    """Why the match at `span` is one word of a longer noun phrase that the vocabulary did not match whole
    (None: it stands alone). The words next to it (only a space or a hyphen between) tell: another
    matched entity ("serum urea nitrogen", "deep tendon reflexes"), a code or proper name ("the CYP1A2
    enzyme", "Brodifacoum poisoning"), an adjective before it ("pedal pulses", "periportal fibrosis",
    "estimated fetal weight"), or the match itself an adjective before a word ("therapeutic index").
    Replacing one word of such a phrase makes words nobody writes ("pedal heart rate")."""
    start, end = span
    others = [(s, e) for s, e in entity_spans if (s, e) != (start, end) and (e <= start or s >= end)]
    left, right = _LEFT_WORD.search(text[:start]), _RIGHT_WORD.match(text[end:])
    for word, where in ((left, "before"), (right, "after")):
        if word is None or word.group(1).lower() in FUNCTION_WORDS:
            continue
        token = word.group(1)
        token_start = word.start(1) if where == "before" else end + word.start(1)
        if any(s < token_start + len(token) and token_start < e for s, e in others):
            return f"compound: {text[start:end]!r} stands next to another concept ({token!r} {where} it)"
        sentence_start = where == "before" and re.search(r"(^|[.?!:;]\s*)$", text[:token_start])
        if re.search(r"\d", token) or token[1:] != token[1:].lower() or (token[:1].isupper() and not sentence_start):
            return f"compound: {text[start:end]!r} is part of a name ({token!r} {where} it)"
        if where == "before" and (_ADJECTIVE_ENDING.search(token) or re.search(r"\w-\w+ed$", token)):
            return f"compound: {text[start:end]!r} is modified by {token!r}, a phrase the vocabulary does not know"
    if re.match(r"\s*\([^)]{1,20}\)", text[end:]):  # "Circular RNA (circRNA)": the abbreviation would stay
        return f"compound: {text[start:end]!r} is defined by the abbreviation after it"
    if (
        right is not None
        and right.group(1).lower() not in FUNCTION_WORDS
        and " " not in text[start:end].strip()
        and _ADJECTIVE_ENDING.search(text[start:end])
    ):
        return f"compound: {text[start:end]!r} modifies {right.group(1)!r}, a phrase the vocabulary does not know"
    return None


_DOUBLED = re.compile(r"\b(\w{3,})[ -]+\1\b", re.I)


def doubled_word(original: str, rewrite: str) -> str | None:
    """A word the rewrite writes twice in a row where the original did not ("diabetes mellitus mellitus":
    the match ended before a word the replacement also ends with)."""
    before = {m.group(1).casefold() for m in _DOUBLED.finditer(original)}
    for found in _DOUBLED.finditer(rewrite):
        if found.group(1).casefold() not in before:
            return f"compound: {found.group(1)!r} written twice ({found.group(0)!r})"
    return None


REPEAT_WORD_LENGTH = 6  # shorter words ("type", "cell") repeat in ordinary questions
REPEAT_LIKENESS = 0.85


def repeated_word(original: str, span: tuple[int, int], written: str) -> str | None:
    """A word of `written` (what a swap puts at `span`) that the rest of the question already has, spelt nearly
    but not exactly alike ("mysositis" and "myositis"); the same word twice ("breast cancer and colon cancer")
    is ordinary."""
    rest = {
        w.casefold().rstrip("s"): w
        for w in _WORD.findall(f"{original[: span[0]]} {original[span[1] :]}")
        if len(w) >= REPEAT_WORD_LENGTH
    }
    for word in _WORD.findall(written):
        folded = word.casefold().rstrip("s")
        if len(word) < REPEAT_WORD_LENGTH or folded in rest:
            continue
        for other, as_written in rest.items():
            if folded in other or other in folded:  # "radiation" and "irradiation": a word and its derivative
                continue
            if difflib.SequenceMatcher(None, folded, other).ratio() >= REPEAT_LIKENESS:
                return f"repeated-word: {word!r} is spelt nearly like {as_written!r}, which the question has already"
    return None


_COMPOSITION = re.compile(
    r"\b(?:active\s+ingredients?|ingredients?|components?|constituents?|composed\s+of|made\s+of|consists?\s+of|"
    r"composition)\b",
    re.IGNORECASE,
)
_APPROVAL = re.compile(r"\b(?:approved|approval|licen[cs]ed|marketed|FDA|EMA)\b", re.IGNORECASE)
_DEVELOPER = re.compile(
    r"\b[A-Z][\w-]*\s+(?:Pharmaceuticals?|Pharma|Therapeutics|Biosciences|Biotech(?:nology)?|Biologics|"
    r"Laboratories|Inc\b|Ltd\b|Corp(?:oration)?\b)"
)
# "... effective for stroke in the RIGHT-2 trial?": a named trial tested one drug in one disease
_NAMED_TRIAL = re.compile(
    r"\b[A-Z][A-Z0-9]+(?:-[A-Z0-9]+)*\s+(?:trial|study)\b|\b(?:trial|study)\s+[A-Z][A-Z0-9]+(?:-[A-Z0-9]+)*\b"
)
# "Which interleukins are affected by dupilumab?": the kind of molecule the drug acts on is part of the question
_MOLECULE_ASKED = re.compile(
    r"^\s*(?:which|what)\s+(?:(?!(?:is|are|was|were|does|do|did|has|have)\b)[a-z-]+\s+)?"
    r"(?:interleukins?|cytokines?|chemokines?|receptors?|enzymes?|kinases?|channels?|transporters?|integrins?)\b",
    re.IGNORECASE,
)
_ASKS_FOR = re.compile(r"^\s*(?:which|what)(?:\s+(?:is|was|are|were|the|first|last|only|new))*\s+$", re.IGNORECASE)


def member_frame_problem(query: str, entity_type: str, start: int | None = None) -> str | None:
    """Why no other entity of `entity_type` may replace the one the (English) question names at `start`: its
    frame holds for that member only (see the module's `member-frame`). None: the frame takes another member.
    A drug the question's head asks for ("Which was the first cholera vaccine approved ...?") is the kind of
    answer, not a member the approval is presumed of."""
    begin = question_part(query)
    asked = query[begin:]
    if found := _COMPOSITION.search(asked):
        return f"member-frame: the question asks what its {entity_type} is made of ({found.group(0)!r})"
    if found := _DEVELOPER.search(query):
        return f"member-frame: the question names who makes its {entity_type} ({found.group(0)!r})"
    if found := _NAMED_TRIAL.search(query):
        return f"member-frame: the question names a trial of its own drug and disease ({found.group(0)!r})"
    answer_kind = start is not None and bool(_ASKS_FOR.match(query[begin:start]))
    if entity_type == "drug" and not AUXILIARY.match(asked) and not answer_kind:
        if found := _APPROVAL.search(asked):
            return f"member-frame: the question presumes its drug is {found.group(0)!r} (approved or marketed)"
        if found := _MOLECULE_ASKED.match(asked):
            return f"member-frame: the question asks which {found.group(0).split()[-1]} its drug acts on"
    return None


def possessive_before(text: str, start: int) -> bool:
    """Do the words at `start` follow a possessive ("Alzheimer's disease": at "disease")?"""
    before = text[:start].rstrip()
    return bool(before) and before != text[:start] and bool(re.search(r"\w['\u2019]s?$", before))


# "Longer term quality of life and outcome in stroke patients: is the Barthel index ... adequate?": what
# the title names before the colon is the topic; the question after it is what is asked.
_HEADLINE = re.compile(
    r"^[^:?]+:\s+(?=(?:is|are|was|were|does|do|did|can|could|should|will|would|has|have|"
    r"what|which|how|why|when|who)\b[^:]*\?\s*$)",
    re.IGNORECASE,
)


def aspect_position_problem(
    query: str, aspect_span: tuple[int, int], entity_spans: Iterable[tuple[int, int]]
) -> str | None:
    """Why the aspect at `aspect_span` is not what the question asks about one of `entity_spans` (None: it is)."""
    start, end = aspect_span
    headline = _HEADLINE.match(query)
    if headline and end <= headline.end():
        return (
            f"aspect-position: {query[start:end]!r} is in the headline; the question after it asks "
            f"{query[headline.end() :].strip()!r}"
        )
    before, after = query[:start], query[end:]
    previous = _WORD.findall(before)
    spans = list(entity_spans)
    entity_right_before = any(
        0 <= start - e_end <= 4 and re.fullmatch(r"(['\u2019]s)?\s*", query[e_end:start]) for _, e_end in spans
    )
    if previous and not entity_right_before and previous[-1].lower() not in FUNCTION_WORDS:
        return f"aspect-position: {query[start:end]!r} is part of a compound ({previous[-1]!r} before it)"
    following = re.match(r"[ -]([A-Za-z][\w-]*)", after)
    if following and following.group(1).lower() not in FUNCTION_WORDS and not _PREPOSITION_AFTER.match(after):
        # "adenoma detection rate", "treatment options": the aspect modifies the noun after it
        return f"aspect-position: {query[start:end]!r} is part of a compound ({following.group(1)!r} after it)"
    if entity_right_before:
        return None
    if _PREPOSITION_AFTER.match(after):
        window = (end, end + ENTITY_WINDOW)
        if any(window[0] <= e_start <= window[1] for e_start, _ in spans):
            return None
    if _QUESTION_HEAD.search(before) and spans:
        return None
    return (
        f"aspect-position: {query[start:end]!r} is not said of the entity (no 'X of <entity>', '<entity> X' or "
        "question head)"
    )


def predicate_problem(query: str, aspect_start: int, original_aspect: str, new_aspect: str) -> str | None:
    """Why `new_aspect` cannot stand where the words before `aspect_start` govern `original_aspect` (None:
    it can)."""
    clause = re.split(r"[.?!;]", query[:aspect_start])[-1]
    for pattern, groups, what in GOVERNORS:
        governing = pattern.search(clause)
        if governing and not any(original_aspect in group and new_aspect in group for group in groups):
            return f"predicate: {governing.group(0).strip()!r} asks for {what}; {new_aspect!r} does not fit there"
    return None


def rewrite_sense_problems(
    record: dict, rewrite: dict, lexicon: Lexicon | None = None, generic: frozenset[str] | None = None
) -> list[str]:
    """Every sense rule's complaint about one rewrite of a noise record (its `query`, `entities` and
    `aspects` as refkit noise writes them). With `lexicon` the entity rules are checked as well."""
    query = str(record.get("query", ""))
    english = (record.get("params") or {}).get("language", "en") == "en"  # word-order rules read English
    entity_spans = [tuple(e["span"]) for e in record.get("entities", [])]
    generic_spans = [tuple(e["span"]) for e in record.get("entities", []) if e.get("generic")]
    problems = []
    asked_from = question_part(query)
    doubled = doubled_word(query, str(rewrite.get("query", "")))
    if doubled:
        problems.append(doubled)
    for edit in rewrite.get("replaced", []):
        start, end = edit.get("span", (0, 0))
        if edit.get("rule") == "aspect-question":
            continue  # the subject kept verbatim in the question of another aspect of its kind: no span was replaced
        if possessive_before(query, start):
            problems.append(f"possessive: {edit['text']!r} follows a possessive, inside a longer concept")
        if edit["what"] == "aspect" and not english:
            pass
        elif edit["what"] == "aspect":
            if start < asked_from:
                problems.append(f"question: {edit['text']!r} is said in the case's findings, not what it asks")
            position = aspect_position_problem(query, (start, end), entity_spans)
            if position:
                problems.append(position)
            predicate = predicate_problem(query, start, edit["from"], edit["to"])
            if predicate:
                problems.append(predicate)
        elif start < asked_from:
            problems.append(f"question: {edit['text']!r} is a finding of the case, not what the question asks")
        elif english and " " not in edit["text"] and everyday_word(edit["text"].lower()):
            problems.append(f"question: {edit['text']!r} is an everyday word here, not a concept")
        elif next_to_generic((start, end), generic_spans, query):
            problems.append(f"compound: {edit['text']!r} stands next to a generic word, inside a longer concept")
        elif inside_a_name(query, (start, end)):
            problems.append(f"compound: {edit['text']!r} is part of a longer name")
        elif english and (modifier := modifier_problem(query, (start, end), entity_spans)):
            problems.append(modifier)
        if edit["what"] == "entity" and english:
            frame = member_frame_problem(query, str(edit.get("type", "")), start)
            if frame:
                problems.append(frame)
            repeated = repeated_word(query, (start, end), str(edit.get("written", "")))
            if repeated:
                problems.append(repeated)
        if edit["what"] == "entity" and lexicon is not None:
            original, replacement = lexicon.get(edit["from"]), lexicon.get(edit["to"])
            if original is not None and replacement is not None:
                known = generic if generic is not None else generic_keys(lexicon)
                problem = entity_swap_problem(original, replacement, known)
                if problem:
                    problems.append(problem)
    return problems


_FRAME_BEFORE = re.compile(
    r"^\s*(?:(?:what|which)\s+(?:is|are|was|were)|(?:list|describe|name|explain|summari[sz]e))\s+(?:the\s+)?"
    r"(?:(?:main|most\s+common|common|known|major|primary|usual|typical)\s+)?$",
    re.IGNORECASE,
)
_FRAME_AFTER = re.compile(r"^\s+(of|for|in|associated\s+with)\b", re.IGNORECASE)


def aspect_frame_problem(query: str, aspect_span: tuple[int, int]) -> str | None:
    """Why the question's frame does not take another aspect (None: it does). Only a question that is
    about the aspect itself, "What is the mechanism of action of X?", "List the adverse effects of X",
    stays a question an expert would ask with another aspect put in; inside any other frame ("Is X
    effective for the treatment of Y?", "Does X improve the prognosis of Y?") the aspect is part of a
    claim the rest of the question is built around."""
    start, end = aspect_span
    if _FRAME_BEFORE.match(query[:start]) and _FRAME_AFTER.match(query[end:]):
        return None
    return (
        f"aspect-frame: {query[start:end]!r} is not the head of a 'what is the <aspect> of ...' question; "
        "another aspect would not fit the rest of it"
    )
