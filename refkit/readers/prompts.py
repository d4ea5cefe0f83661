"""The prompt templates readers are asked with: one versioned file per task in refkit/readers/templates/
(`may-answer.v1.txt`), or the user's own folder of the same names.

A template is identified by its task, version and the sha256 of its text, and that identity is part of
every cached answer's key: editing a template asks the reader again instead of replaying answers to
another prompt. Placeholders are `string.Template`'s (`$question`), so JSON examples in a prompt need no
escaping.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

TASKS = ("swaps", "sense", "may-answer")
_NAME = re.compile(r"^(?P<task>[a-z-]+)\.v(?P<version>\d+)\.txt$")


@dataclass(frozen=True)
class PromptTemplate:
    task: str
    version: int
    text: str

    @property
    def identity(self) -> str:
        """`task.vN:sha256-prefix`: what a cached answer was asked with."""
        return f"{self.task}.v{self.version}:{hashlib.sha256(self.text.encode('utf-8')).hexdigest()[:16]}"

    def render(self, **fields) -> str:
        try:
            return string.Template(self.text).substitute(**fields)
        except (KeyError, ValueError) as error:
            raise ValueError(f"template {self.task}.v{self.version}: placeholder {error} has no value") from None


def load_templates(folder: Path | None = None) -> dict[str, PromptTemplate]:
    """The newest version of each task's template, from `folder` or refkit's own."""
    if folder is None:
        files = {p.name: p.read_text(encoding="utf-8") for p in resources.files("refkit.readers.templates").iterdir()}
    else:
        files = {p.name: p.read_text(encoding="utf-8") for p in Path(folder).iterdir() if p.is_file()}
    newest: dict[str, PromptTemplate] = {}
    for name, text in sorted(files.items()):
        match = _NAME.match(name)
        if match is None or match["task"] not in TASKS:
            continue
        template = PromptTemplate(match["task"], int(match["version"]), text)
        if template.task not in newest or template.version > newest[template.task].version:
            newest[template.task] = template
    return newest
