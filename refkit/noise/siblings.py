"""Stage 2 of refkit noise: the siblings a clinician would swap in for a target, and the swap rules.

A sibling is another concept of the same class, chosen by what the concept *is*, never by how its name
looks, and a swap records the class that justified it (`SiblingIndex.class_of`):

- `inn-stem` (drugs): drugs whose INN names the same class (refkit.vocabulary.drug_stems.drug_class): the same class
stem
  (tucatinib -> lapatinib, "-tinib"; losartan -> valsartan, "-sartan") or, for antibodies, the same target
  syllable (tocilizumab -> sarilumab, "-li-"); the bare "-mab" or "-nib" says only "an antibody" and is no class;
- `pharmacological-action` (a drug that is one substance, not a class): drugs sharing one of the target's most
  specific MeSH pharmacological actions (NLM's XML, or the shipped MeSH 2018 table: risperidone -> haloperidol
  by "Dopamine D2 Receptor Antagonists"); an action that is an ancestor of another of the target's actions, or
  one of `BROAD_ACTION` drugs or more beside a narrower one ("Antihypertensive Agents" beside "Angiotensin II
  Type 1 Receptor Blockers"), is too broad to name its class;
- `symbol-family` (genes): symbols of the same family (refkit.vocabulary.gene_symbols: VPS4A -> VPS4B);
- `tree-sibling`: the other children of the target's parent in the MeSH trees, at the same depth
  (mantle cell lymphoma -> follicular lymphoma), for diseases, organisms, anatomy, procedures, processes
  and genes, and for drug classes in MeSH's functional branches (vaccines, pharmacologic actions and uses:
  "Neuroprotective Agents"). A disease's siblings are diseases of the same kind in the same organ system:
  a parent of `BROAD_PARENT` or more concepts ("Genetic Diseases, Inborn") is a branch, not a kind, and
  where the target sits in an organ system's branch (C01-C26 but neoplasms, congenital and general
  pathology), the sibling must sit in one of the same (a urea-cycle disorder is never swapped for a
  muscular dystrophy);
- `tree-cousin`, when a target has no tree sibling: the concepts at its depth under its grandparent
  (obesity, alone under overnutrition -> malnutrition), for organisms, anatomy, procedures, processes and
  genes; never for diseases and drugs, whose grandparents span unrelated kinds.

Drugs get no tree siblings in the chemical branches: MeSH places chemicals there by structure (losartan
beside tetrazolium salts), not by what they do. Every candidate then passes the swap rules, in order; the
first that refuses it is recorded with its name:

- `generic`, `unwritable`, `same-concept` (refkit.noise.sense.entity_swap_problem: a category, a name no
  question would write, the target's own name, an ancestor or descendant, nested names, a group for one
  concept);
- `broad`: a category of many kinds (refkit.noise.subjects.broad_keys: "Chromosome Disorders", "Parasites")
  put in for one concept: a question about hereditary angioedema asked of "chromosome disorders" has no answer;
- `look-alike`: a name spelt nearly like the target's (character similarity `LOOK_ALIKE` or more; not
  for a symbol family, whose members differ by design in one character);
- `not-in-corpus`: no served record names it (when the lexicon was counted in the corpus);
- `in-question`: the question names it already.

A candidate keeps the first rule that found it. What passes is ranked by the rule (a stem sibling before an
action sibling), the size of the most specific action it shares (drugs), then by how many served
records name it (a clinician reaches for the common sibling: valsartan before eprosartan), then by name.
"""

from __future__ import annotations

import difflib
from collections import defaultdict

from refkit.noise.sense import entity_swap_problem, group_name
from refkit.vocabulary.drug_stems import drug_class
from refkit.vocabulary.gene_symbols import family_root, symbol_of_name
from refkit.vocabulary.lexicon import REWRITTEN_TYPES, Entity, Lexicon, natural_name

LOOK_ALIKE = 0.85
TREE_TYPES = ("disease", "organism", "anatomy", "procedure", "process", "gene")
# The drug branches of MeSH that are ordered by what a drug does or is for, not by its structure: vaccines
# (by pathogen), and Chemical Actions and Uses (pharmacologic actions, therapeutic uses).
FUNCTIONAL_DRUG_TREES = ("D20.215.894", "D27")
# Pathologic Processes and Pathological Conditions, Anatomical: inflammation, hypertrophy, atrophy, plaques,
# necrosis. Processes and lesions of every organ sit side by side there, and a question about one is rarely a
# question about another.
PATHOLOGIC_PROCESSES = ("C23.550", "C23.300")
# Disease branches that group by kind of process, not by organ: neoplasms, congenital and hereditary
# diseases, pathological conditions and signs.
NOT_ORGAN_SYSTEMS = ("C04", "C16", "C23")
COUSIN_TYPES = ("organism", "anatomy", "procedure", "process", "gene")
BROAD_PARENT = 60  # concepts under a parent at most for its children to be one kind (refkit.noise.subjects)
BROAD_ACTION = 40  # drugs sharing an action at most for it to name a class beside a narrower action of the drug


def _parent(tree: str) -> str | None:
    parent = tree.rpartition(".")[0]
    return parent or None


def _cousin(tree: str, others: list[str]) -> bool:
    """Does one of `others` sit at `tree`'s depth under its grandparent, under another parent?"""
    parent = _parent(tree)
    grandparent = _parent(parent)
    return any(
        _parent(o) != parent and _parent(_parent(o) or "") == grandparent and o.count(".") == tree.count(".")
        for o in others
    )


def symbol_forms(entity: Entity) -> list[str]:
    return list(dict.fromkeys(filter(None, (symbol_of_name(form) for form in [entity.name, *entity.entry_terms]))))


class SiblingIndex:
    """Every rewritten-type entity by pharmacological action, INN stem, tree parent and symbol family."""

    def __init__(self, lexicon: Lexicon, generic: frozenset[str], broad: frozenset[str] = frozenset()):
        self.generic, self.broad, self.counted = generic, broad, lexicon.counted
        self.by_action: dict[str, list[Entity]] = defaultdict(list)
        self.by_stem: dict[str, list[Entity]] = defaultdict(list)
        self.by_parent: dict[str, list[Entity]] = defaultdict(list)
        self.by_root: dict[str, list[Entity]] = defaultdict(list)
        self.by_grandparent: dict[str, list[Entity]] = defaultdict(list)
        for entity in sorted(lexicon.entities.values(), key=lambda e: e.key):
            if entity.type not in REWRITTEN_TYPES:
                continue
            if entity.type == "drug":
                for action in entity.actions:
                    self.by_action[action.casefold()].append(entity)
                named_class = drug_class(entity.name)
                if named_class is not None:
                    self.by_stem[named_class].append(entity)
            if entity.type in TREE_TYPES or entity.type == "drug":
                for tree in self._trees(entity):
                    if (parent := _parent(tree)) is not None:
                        self.by_parent[parent].append(entity)
                        if (grandparent := _parent(parent)) is not None:
                            self.by_grandparent[grandparent].append(entity)
            if entity.type == "gene":
                for root in {family_root(form) for form in symbol_forms(entity)} - {None}:
                    self.by_root[root].append(entity)
        self.action_trees: dict[str, list[str]] = {
            action: lexicon.get(action).trees if lexicon.get(action) is not None else [] for action in self.by_action
        }

    def siblings(self, original: Entity) -> list[tuple[Entity, str]]:
        """(candidate, rule) before the swap rules, each candidate once (its first rule)."""
        found: dict[str, tuple[Entity, str]] = {}

        def add(members, rule):
            for entity in members:
                if entity.key != original.key and entity.type == original.type:
                    found.setdefault(entity.key, (entity, rule))

        if original.type == "drug":
            named_class = drug_class(original.name)
            if named_class is not None:  # one stem is one class by design: minocycline -> doxycycline
                add(self.by_stem.get(named_class, ()), "inn-stem")
            if not group_name(original):  # a class ("Vaccines") shares actions with other kinds of class
                for action in self.specific_actions(original):
                    add(self.by_action.get(action, ()), "pharmacological-action")
        if original.type == "gene":
            for root in {family_root(form) for form in symbol_forms(original)} - {None}:
                add(self.by_root.get(root, ()), "symbol-family")
        if original.type in TREE_TYPES or original.type == "drug":
            trees = self._trees(original)
            for tree in trees:
                if (parent := _parent(tree)) is not None:
                    if original.type == "disease" and len(self.by_parent.get(parent, ())) >= BROAD_PARENT:
                        continue
                    add(
                        (
                            e
                            for e in self.by_parent.get(parent, ())
                            if tree not in e.trees and self._same_system(original, e)
                        ),
                        "tree-sibling",
                    )
            if original.type in COUSIN_TYPES and not any(rule == "tree-sibling" for _, rule in found.values()):
                for tree in trees:
                    parent = _parent(tree)
                    grandparent = _parent(parent) if parent else None
                    if grandparent is not None:
                        add((e for e in self.by_grandparent[grandparent] if _cousin(tree, e.trees)), "tree-cousin")
        return list(found.values())

    def specific_actions(self, drug: Entity) -> list[str]:
        """The drug's pharmacological actions (case-folded) that name its class: not an ancestor of another of its
        actions in the MeSH trees, and not a broad one (`BROAD_ACTION` drugs or more) beside a narrower one
        ("Angiotensin II Type 1 Receptor Blockers", not "Antihypertensive Agents" or "Anti-Arrhythmia Agents")."""
        actions = list(dict.fromkeys(a.casefold() for a in drug.actions))
        trees = {a: self.action_trees.get(a, []) for a in actions}
        narrow = [
            a
            for a in actions
            if not any(
                other != a and any(t.startswith(mine + ".") for mine in trees[a] for t in trees[other])
                for other in actions
            )
        ]
        sizes = {a: len(self.by_action.get(a, ())) for a in narrow}
        smallest = min(sizes.values(), default=0)
        return [a for a in narrow if sizes[a] < BROAD_ACTION or sizes[a] == smallest]

    @staticmethod
    def _same_system(original: Entity, candidate: Entity) -> bool:
        """For diseases: does the candidate sit in one of the organ systems the original sits in (where the original
        sits in any)? Other types: always."""
        if original.type != "disease":
            return True
        systems = {t[:3] for t in original.trees if t.startswith("C") and not t.startswith(NOT_ORGAN_SYSTEMS)}
        return not systems or bool(systems & {t[:3] for t in candidate.trees})

    def class_of(self, original: Entity, candidate: Entity, rule: str) -> str:
        """The class that makes `candidate` a sibling of `original` under `rule`, as a swap's record says it."""
        if rule == "inn-stem":
            return drug_class(original.name) or ""
        if rule == "pharmacological-action":
            shared = [a for a in self.specific_actions(original) if a in {b.casefold() for b in candidate.actions}]
            named = {a.casefold(): a for a in candidate.actions}
            return "MeSH pharmacological action: " + "; ".join(named[a] for a in shared)
        if rule == "symbol-family":
            roots = {family_root(form) for form in symbol_forms(original)} - {None}
            return "gene symbol family: " + ", ".join(sorted(roots))
        if rule in ("tree-sibling", "tree-cousin"):
            up = _parent if rule == "tree-sibling" else lambda tree: _parent(_parent(tree) or "")
            shared = sorted({up(t) for t in self._trees(original)} & {up(t) for t in candidate.trees} - {None})
            return f"MeSH {'parent' if rule == 'tree-sibling' else 'grandparent'}: " + ", ".join(shared)
        return rule

    @staticmethod
    def _trees(entity: Entity) -> list[str]:
        """The tree numbers that place an entity among siblings: for a drug only inside the functional
        branches (its parent in one too: Vaccines' own parent, Biological Products, is not), and never
        under Pathologic Processes or Anatomical Conditions (C23.550, C23.300: a plaque is not swapped for
        hypertrophy)."""
        if entity.type == "drug":
            return [t for t in entity.trees if (_parent(t) or "").startswith(FUNCTIONAL_DRUG_TREES)]
        return [t for t in entity.trees if not t.startswith(PATHOLOGIC_PROCESSES)]

    def no_sibling_reason(self, original: Entity) -> str:
        """Why a target has no sibling candidate at all (a refusal record's text)."""
        if original.type == "drug":
            return (
                f"no-class: {original.name} has no pharmacological action in this vocabulary shared with another "
                "drug and no INN stem naming a class (a bare -mab or -nib names none); chemical-structure siblings "
                "are not what a clinician swaps"
            )
        if original.type == "gene" and not original.trees:
            return f"no-class: {original.name} is not a gene symbol of a family and has no MeSH tree place"
        if not original.trees:
            return (
                f"no-tree-place: {original.name} has no MeSH tree number in this vocabulary, so its siblings are "
                "unknown"
            )
        if original.type == "disease":
            return (
                f"no-sibling: no other disease of {original.name}'s kind in its organ system (its tree parents, "
                f"below {BROAD_PARENT} concepts)"
            )
        return f"no-sibling: no other concept shares {original.name}'s tree parents"

    def swap_problem(self, original: Entity, candidate: Entity, rule: str, present: set[str]) -> str | None:
        """The first swap rule that refuses `candidate` for `original` ("rule: why"), or None."""
        problem = entity_swap_problem(original, candidate, self.generic)
        if problem is not None:
            return problem
        if candidate.key in self.broad and original.key not in self.broad:
            return f"broad: {candidate.name} is a category of many kinds, {original.name} one of them"
        if rule != "symbol-family":
            alike = difflib.SequenceMatcher(None, natural_name(original).lower(), natural_name(candidate).lower())
            if alike.ratio() >= LOOK_ALIKE:
                return f"look-alike: {candidate.name} is spelt nearly like {original.name} ({alike.ratio():.2f})"
        if self.counted and not candidate.corpus_frequency:
            return f"not-in-corpus: no served record names {candidate.name}"
        if candidate.key in present:
            return f"in-question: the question names {candidate.name} already"
        return None

    def rank(self, original: Entity, candidates: list[tuple[Entity, str]]) -> list[tuple[Entity, str]]:
        """Stem siblings first, then drugs sharing the most specific action (losartan: the angiotensin receptor
        blockers before the 100 antihypertensives), then the most written about."""

        specific = set(self.specific_actions(original))

        def class_size(entity: Entity) -> int:
            shared = specific & {a.casefold() for a in entity.actions}
            return min((len(self.by_action[a]) for a in shared), default=1_000_000)

        rules = ("inn-stem", "pharmacological-action")
        return sorted(
            candidates,
            key=lambda c: (
                rules.index(c[1]) if c[1] in rules else 0,
                class_size(c[0]),
                -(c[0].corpus_frequency or c[0].frequency or 0),
                c[0].key,
            ),
        )
