"""`refkit review` in a real headless Chromium (Debian's chromium, driven by Playwright; no network):
an annotator judges kept noise with the keyboard, every judgement lands in the file as it is made, a
killed server resumes where the annotator stopped, two annotators' agreement is reported, and
`refkit assemble --judgements` drops what the review rejected. The noise file is made of real PubMedQA
questions with other questions' real abstracts as their candidates."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from conftest import SAMPLES
from refkit.cli import main as refkit_main

BEIR = SAMPLES / "ir" / "pubmedqa-beir"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# What a headless Chromium needs on a machine without network (and as root, without its sandbox).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.geteuid() != 0,
    reason="Debian's chromium is not installed (make setup installs it when run as root)",
)


@pytest.fixture()
def noise_file(tmp_path) -> Path:
    """Two real questions, each with three other questions' abstracts as kept noise."""
    queries = [line.split("\t", 1) for line in (BEIR / "queries.tsv").read_text(encoding="utf-8").splitlines()[:8]]
    abstracts = {r["_id"]: r for r in map(orjson.loads, (BEIR / "corpus.jsonl").read_bytes().splitlines()[:8])}
    records = []
    for index, (query_id, question) in enumerate(queries[:2]):
        others = [queries[j][0] for j in range(2 + 3 * index, 5 + 3 * index)]
        noise = [{"snippet_id": f"pubmedqa:{other}:0", "title": "", "content": abstracts[other]["text"],
                  "rewrite": 1, "reason": "kept for the test", "label": "irrelevant"} for other in others]  # fmt: skip
        records.append({"id": query_id, "query": question,
                        "rewrites": [{"number": 1, "query": f"{question} (rewritten)"}], "noise": noise})  # fmt: skip
    path = tmp_path / "noise.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def start_review(noise: Path, judgements: Path, annotator: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "refkit.cli", "review", str(noise), "--judgements",
                                str(judgements), "--annotator", annotator, "--no-open"],
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    line = process.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+/", line)
    assert found, line
    return process, found.group(0)


def judged(path: Path) -> list[tuple[str, str, str]]:
    return [(j["snippet_id"], j["annotator"], j["judgement"]) for j in map(json.loads, path.read_text().splitlines())]


def test_review_page_in_a_real_browser_saves_resumes_and_feeds_assemble(noise_file, tmp_path):
    from playwright.sync_api import sync_playwright

    assert CHROMIUM, "Debian's chromium is not installed: make setup installs it (apt-get install chromium)"
    judgements = tmp_path / "judgements.jsonl"
    records = [json.loads(line) for line in noise_file.read_text().splitlines()]
    ids = [n["snippet_id"] for r in records for n in r["noise"]]
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()

        process, url = start_review(noise_file, judgements, "alice")
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]")
        assert page.inner_text("#question") == records[0]["query"]
        assert page.inner_text("#rewrite").endswith("(rewritten)")
        assert page.inner_text("#position") == "1 of 6"
        for count, (key, expected) in enumerate((("r", "related"), ("a", "answers"), ("u", "unrelated")), 1):
            page.keyboard.press(key)
            page.wait_for_selector(f"body[data-saved='{count}']")
            assert judged(judgements)[-1] == (ids[count - 1], "alice", expected)
        assert page.inner_text("#position") == "4 of 6" and page.inner_text("#question") == records[1]["query"]
        page.keyboard.press("ArrowLeft")  # back to the third: its judgement is shown
        assert page.inner_text("#judgement") == "unrelated"
        process.send_signal(signal.SIGKILL)  # the server dies: nothing judged is lost
        process.wait(timeout=30)

        process, url = start_review(noise_file, judgements, "alice")
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]")
        assert page.inner_text("#position") == "4 of 6" and page.inner_text("#progress") == "3"
        for key in ("r", "r", "r"):
            page.keyboard.press(key)
        page.wait_for_selector("body[data-saved='3']")
        assert page.is_visible("#done")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0

        process, url = start_review(noise_file, judgements, "bob")  # a second annotator, same file
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]")
        assert page.inner_text("#progress") == "0"
        for key in ("r", "r", "r", "r", "u", "r"):  # typed fast: each still judges the next candidate
            page.keyboard.press(key)
        page.wait_for_selector("body[data-saved='6']")
        assert page.is_visible("#done")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        browser.close()

    lines = judged(judgements)
    assert len(lines) == 12 and {a for _, a, _ in lines} == {"alice", "bob"}
    report = json.loads(CliRunner().invoke(refkit_main, ["agreement", str(judgements)]).output)
    pair = report["pairs"]["alice / bob"]
    assert pair["common"] == 6 and pair["agreement"] == 0.5 and pair["kappa"] < 0.5
    assert report["annotators"]["alice"] == {"answers": 1, "related": 4, "unrelated": 1}

    labeled = tmp_path / "labeled.jsonl"
    labeled.write_text("".join(json.dumps({"id": r["id"], "query": r["query"], "references": []}) + "\n"
                               for r in records))  # fmt: skip
    items = tmp_path / "items.jsonl"
    arguments = ["assemble", "--relevant", str(labeled), "--noise", str(noise_file), "--judgements", str(judgements),
                 "--n-relevant", "0..0", "--n-irrelevant", "5..5", "--seed", "1", "--out", str(items)]  # fmt: skip
    result = CliRunner().invoke(refkit_main, arguments)
    assert result.exit_code == 0, result.output
    assert "1 noisy references dropped as answering, 0 as unrelated" in result.output
    used = {ref["snippet_id"] for item in map(json.loads, items.read_text().splitlines()) for ref in item["references"]}
    assert ids[1] not in used  # alice said it answers
    assert ids[2] in used  # alice: unrelated, bob: related: no majority for unrelated
    assert used == set(ids) - {ids[1]}
