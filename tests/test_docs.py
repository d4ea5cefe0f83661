"""The documentation site (mkdocs.yml, docs/) and the short README.

- `mkdocs build --strict` builds the site with no warning: a broken link between pages, a link to a heading
  that does not exist, or a page left out of the navigation fails it (mkdocs.yml's `validation:`).
- Every command and every option of the five tools is in the generated command reference
  (docs/reference/<tool>.md, rendered from the tools' own `--help` by mkdocs-click): walked from each click
  group, so a new command or option is checked without editing this file.
- The README stays a short tour that starts with the two commands a fresh machine runs.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from test_docs_match_help import TOOLS

from conftest import REPO

README_MAX_LINES = 250


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The site built as `make docs` builds it, into a temp folder."""
    folder = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2, printed on every build
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return folder, built


def test_the_site_builds_strictly_with_no_warning(site):
    folder, built = site
    said = built.stdout + built.stderr
    assert built.returncode == 0, said[-4000:]
    warnings = [line for line in said.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert warnings == [], warnings
    assert (folder / "index.html").is_file() and (folder / "reference" / "searchd.html").is_file()


def test_broken_links_and_anchors_fail_the_build():
    """What makes `make docs` check internal links: strict, and every link check a warning."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True and config["docs_dir"] == "docs" and config["site_dir"] == "build/site"
    assert config["theme"]["name"] == "material"
    validation = config["validation"]
    assert set(validation["links"].values()) == {"warn"} and len(validation["links"]) == 4
    assert set(validation["nav"].values()) == {"warn"} and "omitted_files" in validation["nav"]


def commands(group: click.Group, path: tuple[str, ...]):
    """(command path, command) for the group and every command under it, depth first."""
    yield path, group
    for name, command in sorted(group.commands.items()) if isinstance(group, click.Group) else ():
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        elif not command.hidden:
            yield (*path, name), command


def sections(page: str) -> dict[str, str]:
    """The reference page's text under each command's heading, by the heading's id (`searchd-serve`)."""
    parts = re.split(r'<h[2-6] id="([^"]+)"', page)
    return {parts[i]: plain(parts[i + 1]) for i in range(1, len(parts), 2)}


def plain(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_command_and_option_is_in_the_reference(site, tool):
    folder, built = site
    assert built.returncode == 0, (built.stdout + built.stderr)[-4000:]
    found = sections((folder / "reference" / f"{tool}.html").read_text(encoding="utf-8"))
    missing, checked = [], 0
    for path, command in commands(TOOLS[tool], (tool,)):
        name = " ".join(path)
        section = found.get("-".join(path))
        if section is None or name not in section:
            missing.append(f"{name}: no section")
            continue
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:  # --help leaves hidden options out too
                continue
            for opt in param.opts + param.secondary_opts:
                checked += 1
                if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", section):
                    missing.append(f"{name} {opt}")
    assert missing == [], missing
    assert checked >= 5


def test_the_readme_is_short_and_starts_with_the_two_commands():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    first = [line for line in lines[1:] if line.strip()][:4]
    assert lines[0] == "# medsnip" and first[0] == "```bash" and first[3] == "```", first
    assert first[1].split("#")[0].split() == ["make", "demo"] and first[2].split("#")[0].split() == ["make", "test"]
