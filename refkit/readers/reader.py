"""A reader as refkit noise asks it: one of the kinds of READER_KINDS behind the answer cache, asked with
the versioned templates, its answers parsed strictly (refkit.readers.parsing).

Three questions, each turned on by `--reader-tasks`:
- `swaps`: which concepts of the target's class would a clinician put in its place (names, checked by the
  noise rules against the lexicon and the corpus before any is used);
- `sense`: is a rewrite a sensible question (no: the swap is refused, rule `reader-sense`);
- `may-answer`: may a candidate answer the original question (yes: refused, test `reader`).

In `advise` mode the sense and may-answer verdicts are recorded beside the rules' decisions and change
nothing, so a reader's agreement with experts can be measured (`refkit agreement --noise`) before it is
trusted to decide; proposed swaps are used in both modes (the rules check every one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from refkit.readers.cache import ReaderCache, answer_key
from refkit.readers.errors import ReaderError
from refkit.readers.parsing import parse_names, parse_yes_no
from refkit.readers.prompts import TASKS, PromptTemplate, load_templates

RAW_KEPT = 300  # characters of a raw answer written into a noise record
SWAP_COUNT = 5  # names asked for per target
# tokens an answer may take: a verdict is its first word (a model that explains itself is cut short, and
# parsing reads the first word), a JSON list of five drug or disease names takes about 40
ANSWER_TOKENS = {"may-answer": 16, "sense": 16, "swaps": 64}


@dataclass(frozen=True)
class ReaderKind:
    """How to open one kind of reader from its options, and the tasks it can do."""

    open: Callable[..., object]
    tasks: tuple[str, ...]


def _open_openai(options: dict):
    from refkit.readers.openai_chat import OpenAIChat

    if not options.get("url") or not options.get("model"):
        raise ReaderError("an openai reader needs --reader-url (its /v1 address) and --reader-model")
    return OpenAIChat(
        options["url"],
        options["model"],
        _api_key(options),
        options.get("timeout", 60.0),
        options.get("retries", 4),
        options.get("rate", 0.0),
    )


def _open_causal_lm(options: dict):
    from refkit.readers.causal_lm import CausalLM

    return CausalLM(_model_path(options))


def _open_cross_encoder(options: dict):
    from refkit.readers.cross_encoder import CrossEncoderReader

    if options.get("threshold") is None:
        raise ReaderError("a cross-encoder reader needs --reader-threshold (its scores have no fixed scale)")
    return CrossEncoderReader(_model_path(options))


READER_KINDS: dict[str, ReaderKind] = {
    "openai": ReaderKind(_open_openai, TASKS),
    "causal-lm": ReaderKind(_open_causal_lm, TASKS),
    "cross-encoder": ReaderKind(_open_cross_encoder, ("may-answer",)),
}


def _model_path(options: dict) -> str:
    if not options.get("model"):
        raise ReaderError(f"a {options['kind']} reader needs --reader-model PATH (a local folder or .gguf file)")
    return options["model"]


def _api_key(options: dict) -> str | None:
    import os

    if options.get("key_file"):
        return Path(options["key_file"]).read_text(encoding="utf-8").strip()
    return os.environ.get(options.get("key_env") or "OPENAI_API_KEY")


@dataclass
class Reader:
    """A reader's answers through its cache. `backend` is None on replay (answers come from the cache only)."""

    backend: object | None
    cache: ReaderCache
    tasks: tuple[str, ...]
    templates: dict[str, PromptTemplate]
    mode: str = "decide"  # or "advise"
    threshold: float | None = None  # a scorer's yes from here up
    asked: int = field(default=0)  # answers not found in the cache this run

    @property
    def identity(self) -> dict:
        return self.cache.reader

    @property
    def label(self) -> str:
        return f"{self.identity['kind']}:{self.identity['model']}"

    def provenance(self) -> dict:
        """What a noise run records of its reader (identical for a run and its replay)."""
        record = {
            **self.identity,
            "tasks": list(self.tasks),
            "mode": self.mode,
            "templates": {task: self.templates[task].identity for task in self.tasks if task in self.templates},
        }
        if self.threshold is not None:
            record["threshold"] = self.threshold
        return record

    def _raw(self, task: str, fields: dict):
        template = self.templates[task]
        key = answer_key(self.identity, template.identity, fields)
        found = self.cache.get(key, task, template.identity, fields)
        if found is not None:
            return found["raw"]
        if self.identity["kind"] == "cross-encoder":
            raw = self.backend.score(fields["question"], fields["text"])
        else:
            raw = self.backend.complete(template.render(**fields), ANSWER_TOKENS[task])
        self.asked += 1
        return self.cache.put(key, task, template.identity, fields, raw)["raw"]

    def _verdict(self, task: str, fields: dict) -> dict:
        raw = self._raw(task, fields)
        if isinstance(raw, (int, float)):
            answer = "yes" if raw >= self.threshold else "no"
            return {"reader": self.label, "answer": answer, "score": raw, "threshold": self.threshold}
        return {"reader": self.label, "answer": parse_yes_no(raw), "raw": raw[:RAW_KEPT]}

    def may_answer(self, question: str, text: str) -> dict:
        """{"reader", "answer": yes | no | malformed, "raw" or "score", "decides"}."""
        return {**self._verdict("may-answer", {"question": question, "text": text}), "decides": self.mode == "decide"}

    def sense(self, question: str, rewrite: str) -> dict:
        return self._verdict("sense", {"question": question, "rewrite": rewrite})

    def swaps(self, question: str, target: str, entity_type: str) -> tuple[list[str] | None, str]:
        """(the names proposed, or None when the answer is malformed; the raw answer)."""
        fields = {"question": question, "target": target, "type": entity_type, "count": SWAP_COUNT}
        raw = self._raw("swaps", fields)
        return parse_names(raw, SWAP_COUNT), raw[:RAW_KEPT]


def open_reader(options: dict) -> Reader:
    """A Reader from the options of `refkit noise` (or a [reader] table): kind, model, url, key_env or key_file,
    tasks, mode, cache, replay, threshold, templates, timeout, retries, rate."""
    templates = load_templates(options.get("templates"))
    replay = options.get("replay")
    if replay:
        cache = ReaderCache(Path(replay), None, replay=True)
        backend = None
        kind = cache.reader.get("kind")
    else:
        kind = options.get("kind")
        if kind not in READER_KINDS:
            raise ReaderError(f"--reader {kind!r}: one of {', '.join(READER_KINDS)}")
        backend = READER_KINDS[kind].open(options)
        cache = ReaderCache(Path(options["cache"]), backend.identity)
    if kind not in READER_KINDS:
        raise ReaderError(f"{replay}: the cache names reader kind {kind!r}, not one refkit knows")
    able = READER_KINDS[kind].tasks
    tasks = tuple(options.get("tasks") or able)
    unable = [t for t in tasks if t not in able]
    if unable:
        raise ReaderError(f"a {kind} reader cannot do {', '.join(unable)} (it can do {', '.join(able)})")
    missing = [t for t in tasks if t not in templates and kind != "cross-encoder"]
    if missing:
        raise ReaderError(f"no prompt template for {', '.join(missing)} in {options.get('templates')}")
    if kind == "cross-encoder" and options.get("threshold") is None:
        raise ReaderError("a cross-encoder reader (or its replay) needs --reader-threshold")
    mode = options.get("mode") or "decide"
    threshold = options.get("threshold") if kind == "cross-encoder" else None
    return Reader(backend, cache, tasks, templates, mode, threshold)
