"""`refkit noise`: hard irrelevant references for new questions, by entity and aspect substitution.

For each question (CRAB's recipe, as one pipeline of named stages: refkit.noise.pipeline): find what it
asks about (targets), swap in a sibling a clinician would pick or another aspect the question's frame
takes (swaps), search the rewrites and keep only swaps the corpus supports, then keep the retrieved texts
that pass every filter: not a collected reference, not a duplicate, may not answer the original question,
related to it. Every stage records what it refused and by which rule; `refkit audit` and the review page
read those records. With `--reader`, the user's model (refkit.readers) proposes swaps and judges rewrites and
candidates inside the same stages, under the same rules.

| module | stage |
|---|---|
| `targets` | mentions, target rules, ranked targets |
| `siblings` | sibling rules by type (pharmacological action, INN stem, symbol family, MeSH tree) and swap rules |
| `rewriter` | per question: targets, candidate swaps, the seeded choice among supported ones |
| `writing` | the rewritten text (case, number, article, verb agreement) |
| `answers` | the one "may answer the original" decision |
| `filters` | the candidate filters |
| `pipeline` | the stages run over a question set through searchd |
| `records` | why a question stopped short; counts per rule |
| `options` | the run's options and calibrated thresholds |
"""

from importlib import import_module

__all__ = ["NoiseGenerator", "NoiseOptions", "QueryRewriter", "Rewrite"]
_HOMES = {
    "NoiseGenerator": "refkit.noise.pipeline",
    "NoiseOptions": "refkit.noise.options",
    "QueryRewriter": "refkit.noise.rewriter",
    "Rewrite": "refkit.noise.writing",
}


def __getattr__(name: str):
    # imported when first asked for: the pipeline pulls in datasketch (and scipy), ~0.8 s that the commands
    # which only read refkit.noise.options (every refkit command's option defaults) need not pay
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'refkit.noise' has no attribute {name!r}")
