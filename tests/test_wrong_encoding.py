"""XML whose bytes do not match its declared encoding is reported with the file and line of the first
bad byte, for every XML source; the same text in the encoding it declares builds normally.

Each input is a real sample re-encoded: the Latin-1 copies keep the UTF-8 declaration (or none,
which means UTF-8), as happens when a file is re-saved by a tool that ignores the declaration."""

from __future__ import annotations

import bz2

import pytest

from conftest import SAMPLES
from helpers import shard_bytes

WIKI = SAMPLES / "wikipedia" / "enwiki-table-markup.xml.bz2"
MEDLINE = SAMPLES / "pubmed" / "medsamp2014.xml"
NXML = SAMPLES / "nxml" / "pone.0000217.nxml"


def _latin1_copy(text: str, insert: str | None = None) -> bytes:
    """The text as Latin-1 bytes (characters Latin-1 lacks become '?'); `insert` puts a Latin-1-only
    character after that marker, for samples that are plain ASCII."""
    if insert is not None:
        text = text.replace(insert, insert + "Café ", 1)
    return text.encode("latin-1", errors="replace")


def _first_non_ascii_line(data: bytes) -> int:
    position = next(i for i, byte in enumerate(data) if byte >= 0x80)
    return data[:position].count(b"\n") + 1


CASES = {
    "wikipedia": (lambda: bz2.decompress(WIKI.read_bytes()).decode("utf-8"), None, "enwiki-latin1.xml"),
    "pubmed": (lambda: MEDLINE.read_text(encoding="utf-8"), None, "medsamp2014-latin1.xml"),
    "statpearls": (lambda: NXML.read_text(encoding="utf-8"), "<article-title>", "pone-latin1.nxml"),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_bytes_that_do_not_match_the_declared_encoding(tmp_path, run_corpusbuild, kind):
    read_text, insert, name = CASES[kind]
    data = _latin1_copy(read_text(), insert)
    bad = tmp_path / name
    bad.write_bytes(data)
    out = tmp_path / "out"
    result = run_corpusbuild(kind, bad, "--out", out, "--shards", 1, "--workers", 1, "--quiet")
    assert result.exit_code == 1
    # the only input failed: nothing is published, and the one error line names the file and the line
    [error] = [line for line in result.output.splitlines() if line.startswith("error: ")]
    where = f"error: {bad}:{_first_non_ascii_line(data)}"
    assert error.startswith(where), error
    assert error.split(": ", 2)[2].startswith(
        "wrong encoding: these bytes are not valid in the encoding the XML declares"
    )
    assert "nothing was built" in result.output and not (out / "build.json").exists()


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_declared_latin1_encoding_is_honoured(tmp_path, run_corpusbuild, kind):
    """The same Latin-1 bytes with a declaration that says so give the snippets of the UTF-8 text."""
    read_text, insert, name = CASES[kind]
    text = read_text()
    if insert is not None:
        text = text.replace(insert, insert + "Café ", 1)
    text = text.encode("latin-1", errors="replace").decode("latin-1")  # the same '?' replacements in both
    body = text[text.index("?>") + 2 :] if text.startswith("<?xml") else text
    declared = tmp_path / "latin1" / name
    declared.parent.mkdir()
    declared.write_bytes(b'<?xml version="1.0" encoding="ISO-8859-1"?>' + body.encode("latin-1"))
    utf8 = tmp_path / "utf8" / name
    utf8.parent.mkdir()
    utf8.write_bytes(b'<?xml version="1.0" encoding="UTF-8"?>' + body.encode("utf-8"))
    outs = []
    for source in (declared, utf8):
        out = tmp_path / f"out-{source.parent.name}"
        result = run_corpusbuild(kind, source, "--out", out, "--shards", 1, "--workers", 1, "--quiet")
        assert result.exit_code == 0, result.output
        outs.append(shard_bytes(out))
    assert outs[0] == outs[1] and outs[0]
