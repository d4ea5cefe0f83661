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
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

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
        noise = [
            {
                "snippet_id": f"pubmedqa:{other}:0",
                "title": "",
                "content": abstracts[other]["text"],
                "rewrite": 1,
                "reason": "kept for the test",
                "label": "irrelevant",
            }
            for other in others
        ]
        records.append(
            {
                "id": query_id,
                "query": question,
                "rewrites": [{"number": 1, "query": f"{question} (rewritten)"}],
                "noise": noise,
            }
        )
    path = tmp_path / "noise.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def start_review(noise: Path, judgements: Path, annotator: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "refkit.cli",
            "review",
            str(noise),
            "--judgements",
            str(judgements),
            "--annotator",
            annotator,
            "--no-open",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
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
        process.send_signal(signal.SIGINT)  # Ctrl-C: the table's 130, what was judged kept
        assert process.wait(timeout=30) == 130
        browser.close()

    lines = judged(judgements)
    assert len(lines) == 12 and {a for _, a, _ in lines} == {"alice", "bob"}
    report = json.loads(CliRunner().invoke(refkit_main, ["agreement", str(judgements)]).output)
    pair = report["pairs"]["alice / bob"]
    assert pair["common"] == 6 and pair["agreement"] == 0.5 and pair["kappa"] < 0.5
    assert report["annotators"]["alice"] == {"answers": 1, "related": 4, "unrelated": 1}

    labeled = tmp_path / "labeled.jsonl"
    labeled.write_text(
        "".join(json.dumps({"id": r["id"], "query": r["query"], "references": []}) + "\n" for r in records)
    )
    items = tmp_path / "items.jsonl"
    arguments = [
        "assemble",
        "--relevant",
        str(labeled),
        "--noise",
        str(noise_file),
        "--judgements",
        str(judgements),
        "--n-relevant",
        "0..0",
        "--n-irrelevant",
        "5..5",
        "--seed",
        "1",
        "--out",
        str(items),
    ]
    result = CliRunner().invoke(refkit_main, arguments)
    assert result.exit_code == 0, result.output
    assert "1 noisy references dropped as answering, 0 as unrelated" in result.output
    used = {ref["snippet_id"] for item in map(json.loads, items.read_text().splitlines()) for ref in item["references"]}
    assert ids[1] not in used  # alice said it answers
    assert ids[2] in used  # alice: unrelated, bob: related: no majority for unrelated
    assert used == set(ids) - {ids[1]}


# -- the review page on a shared machine: every attack of the hostile pass is refused --


@pytest.fixture()
def review_server(noise_file, tmp_path):
    """The review server in this process, on a free loopback port: (base url, token, judgements path)."""
    import threading

    from refkit.curation.review import JudgementLog, make_server, review_items

    judgements = tmp_path / "judgements.jsonl"
    server = make_server(review_items(noise_file), JudgementLog(judgements), "alice")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    page = _request(port, "GET", "/")[1].decode()
    token = re.search(r'name="review-token" content="([^"]+)"', page).group(1)
    yield port, token, judgements
    server.shutdown()
    server.server_close()


def _request(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None):
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers={"Host": f"127.0.0.1:{port}", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_page_of_another_site_cannot_write_or_read_judgements(review_server):
    """A cross-site text/plain or form POST (with or without a foreign Origin) and a request naming another
    host (DNS rebinding) are refused, and nothing lands in the judgements file; the page's own calls work."""
    port, token, judgements = review_server
    body = json.dumps({"index": 0, "judgement": "answers"}).encode()
    assert (
        _request(port, "POST", "/api/judgement", body, {"Content-Type": "text/plain", "Origin": "http://evil.example"})[
            0
        ]
        == 403
    )
    assert (
        _request(
            port,
            "POST",
            "/api/judgement",
            b"index=0&judgement=answers",
            {"Content-Type": "application/x-www-form-urlencoded"},
        )[0]
        == 403
    )
    assert (
        _request(
            port, "POST", "/api/judgement", body, {"Content-Type": "application/json", "X-Review-Token": "guessed"}
        )[0]
        == 403
    )
    stolen = {"Content-Type": "application/json", "X-Review-Token": token, "Origin": "http://evil.example"}
    assert _request(port, "POST", "/api/judgement", body, stolen)[0] == 403  # even a token from another origin
    rebound = {"Host": f"evil.example:{port}", "X-Review-Token": token}
    assert _request(port, "GET", "/api/items", headers=rebound)[0] == 403  # a name rebound to this machine
    assert _request(port, "GET", "/", headers={"Host": f"evil.example:{port}"})[0] == 403
    assert _request(port, "GET", "/api/items")[0] == 403  # no token
    assert not judgements.exists()
    own = {"Content-Type": "application/json", "X-Review-Token": token, "Origin": f"http://127.0.0.1:{port}"}
    assert _request(port, "POST", "/api/judgement", body, own) == (200, b'{"saved": true}')
    assert judged(judgements) == [
        ("pubmedqa:" + judgements.read_text().split('"pubmedqa:')[1].split('"')[0], "alice", "answers")
    ]


def test_bad_judgement_requests_are_refused_and_write_nothing(review_server):
    port, token, judgements = review_server
    headers = {"Content-Type": "application/json", "X-Review-Token": token}
    for index in (-1, 6, True, "0", None):  # six items: 0..5; -1 once wrote the last one
        body = json.dumps({"index": index, "judgement": "related"}).encode()
        assert _request(port, "POST", "/api/judgement", body, headers)[0] == 400, index
    assert _request(port, "POST", "/api/judgement", b'{"index": 0, "judgement": "maybe"}', headers)[0] == 400
    huge = json.dumps({"index": 0, "judgement": "related", "padding": "x" * 100_000}).encode()
    assert _request(port, "POST", "/api/judgement", huge, headers)[0] == 413
    for path in ("/../../etc/passwd", "/refkit/curation/review.py", "/api/items/../../README.md", "/review_page.html"):
        assert _request(port, "GET", path)[0] == 404, path
    assert not judgements.exists()


def test_texts_that_look_like_markup_run_nothing_in_a_real_browser(tmp_path):
    """A reference, question or rewrite holding `<script>` or `<img onerror>` is shown as text and runs
    nothing (rendered with textContent, and the page's policy allows only its own script)."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM, "Debian's chromium is not installed: make setup installs it (apt-get install chromium)"
    attack = '<img src=x onerror="window.__ran = 1"><script>window.__ran = 2</script>'
    record = {
        "id": "q1",
        "query": f"Question {attack}",
        "rewrites": [{"number": 1, "query": f"Rewrite {attack}"}],
        "noise": [
            {
                "snippet_id": "s:1:0",
                "title": attack,
                "content": f"Body {attack}",
                "rewrite": 1,
                "reason": attack,
                "label": "irrelevant",
            }
        ],
    }
    noise = tmp_path / "noise.jsonl"
    noise.write_text(json.dumps(record) + "\n", encoding="utf-8")
    judgements = tmp_path / "judgements.jsonl"
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        process, url = start_review(noise, judgements, "alice")
        try:
            page.goto(url)
            page.wait_for_selector("body[data-ready=true]")
            assert page.inner_text("#content") == f"Body {attack}"
            assert page.inner_text("#question") == f"Question {attack}"
            assert page.evaluate("window.__ran") is None
            assert page.locator("#reference img").count() == 0 and page.locator("#reference script").count() == 0
            page.keyboard.press("r")
            page.wait_for_selector("body[data-saved='1']")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
            browser.close()
    assert judged(judgements) == [("s:1:0", "alice", "related")]


def _post_until_killed(url: str, acknowledged: list, count: int) -> None:
    import urllib.request

    port = int(url.rstrip("/").rsplit(":", 1)[1])
    page = urllib.request.urlopen(url, timeout=10).read().decode()
    token = re.search(r'name="review-token" content="([^"]+)"', page).group(1)
    for index in range(count):
        body = json.dumps({"index": index % 6, "judgement": ("answers", "related", "unrelated")[index % 3]}).encode()
        try:
            status, _ = _request(
                port, "POST", "/api/judgement", body, {"Content-Type": "application/json", "X-Review-Token": token}
            )
        except OSError:
            return
        if status == 200:
            acknowledged.append(index)


def test_a_kill_while_judging_and_two_reviewers_lose_nothing(noise_file, tmp_path):
    """Two reviewers' servers append to one file at once; one is killed (SIGKILL) in the middle of its
    stream of judgements. The file loads, holds every judgement either server acknowledged, and a torn last
    line (written by hand here: a write cut short) is left out and does not break the next judgement."""
    import threading
    import time

    from refkit.curation.review import JudgementLog, read_judgements

    judgements = tmp_path / "judgements.jsonl"
    alice, alice_url = start_review(noise_file, judgements, "alice")
    bob, bob_url = start_review(noise_file, judgements, "bob")
    acknowledged = {"alice": [], "bob": []}
    threads = [
        threading.Thread(target=_post_until_killed, args=(alice_url, acknowledged["alice"], 400)),
        threading.Thread(target=_post_until_killed, args=(bob_url, acknowledged["bob"], 60)),
    ]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    alice.send_signal(signal.SIGKILL)
    for thread in threads:
        thread.join(timeout=120)
    alice.wait(timeout=30)
    bob.send_signal(signal.SIGTERM)
    bob.wait(timeout=30)
    lines = read_judgements(judgements)
    for annotator, acked in acknowledged.items():
        written = [line for line in lines if line["annotator"] == annotator]
        assert len(written) >= len(acked) and acked, annotator  # every acknowledged one is there
    assert len(acknowledged["bob"]) == 60 and acknowledged["alice"]
    with open(judgements, "a", encoding="utf-8") as out:  # a line cut short by a kill
        out.write('{"id": "x", "snippet_id": "pubmedqa:')
    assert read_judgements(judgements) == lines
    log = JudgementLog(judgements)
    log.add("q", "s", "carol", "related")
    after = read_judgements(judgements)
    assert after[-1]["annotator"] == "carol" and len(after) == len(lines) + 1
