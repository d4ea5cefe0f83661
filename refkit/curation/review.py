"""`refkit review`: experts judge the kept noise, as CRAB's curators do, in a local web page.

`refkit noise` keeps references it believes cannot answer the question but are related to it; an
expert confirms each. The review page (served on loopback only, no network: refkit/review_page.html)
shows one candidate at a time: the original question, the rewrite that retrieved it, the reference and
why it was kept. The annotator answers with the keyboard:

- `a`: it **answers** the original question (a leak: never used as noise);
- `r`: **related** but does not answer (a hard negative: what noise should be);
- `u`: **unrelated** (easy noise: not used either);
- arrows move between candidates, `n` jumps to the next one this annotator has not judged.

Every judgement is appended to the judgements file the moment it is made (one JSON line: query id,
snippet id, annotator, judgement), so closing the page or killing the server loses nothing and a
restart resumes at the first candidate not yet judged by that annotator. Several annotators can share
one file; a later line by the same annotator for the same candidate replaces the earlier one.
`refkit assemble --judgements` uses them (`reviewed_noise`): a noisy reference any annotator marked as
answering is dropped, one the majority marked unrelated is dropped, the rest are kept.
`agreement` reports, per pair of annotators, the share of common candidates judged alike and Cohen's
kappa, and with the noise run, each reader's may-answer verdicts against each annotator (answers or not).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from itertools import combinations
from pathlib import Path

from medsnip.jsonl import InputFileError, read_jsonl

JUDGEMENTS = ("answers", "related", "unrelated")
PAGE = "review_page.html"


def review_items(noise_path: Path) -> list[dict]:
    """Every kept noisy reference of a noise run, in file order: what the page shows."""
    items = []
    for _, record in read_jsonl(noise_path, ("id", "query", "noise")):
        rewrites = {r["number"]: r["query"] for r in record.get("rewrites", [])}
        for reference in record["noise"]:
            items.append(
                {
                    "id": str(record["id"]),
                    "snippet_id": reference["snippet_id"],
                    "question": record["query"],
                    "rewrite": rewrites.get(reference.get("rewrite"), ""),
                    "title": reference.get("title", ""),
                    "content": reference.get("content", ""),
                    "why": reference.get("reason", ""),
                    "reader": reader_verdict(reference.get("measured", {}).get("reader")),
                }
            )
    return items


def reader_verdict(read: dict | None) -> str:
    """What the page shows of a reader's may-answer verdict beside the rules' decision ("" without one)."""
    if not read:
        return ""
    answered = {"yes": "answers the question", "no": "does not answer", "malformed": "malformed answer"}
    detail = f"score {read['score']} (yes from {read['threshold']})" if "score" in read else repr(read.get("raw", ""))
    advice = "" if read.get("decides", True) else " (advice only)"
    return f"{read['reader']}: {answered[read['answer']]}{advice}; {detail}"


def read_judgements(path: Path) -> list[dict]:
    """The judgements file's lines in order (an absent file has none); a bad line names its number. A last
    line cut short (the writer killed in the middle of it, before it acknowledged anything) is left out."""
    path = Path(path)
    if not path.exists():
        return []
    judgements = []
    # a torn last line was never acknowledged, so it is never a judgement
    for number, line in read_jsonl(path, ("id", "snippet_id", "annotator", "judgement"), complete_lines_only=True):
        if line["judgement"] not in JUDGEMENTS:
            raise InputFileError(
                f"{path}:{number}: judgement is {line['judgement']!r}, expected one of {', '.join(JUDGEMENTS)}"
            )
        judgements.append(line)
    return judgements


def latest(judgements: Iterable[dict]) -> dict[tuple[str, str, str], str]:
    """(query id, snippet id, annotator) -> that annotator's last judgement."""
    return {(str(j["id"]), j["snippet_id"], j["annotator"]): j["judgement"] for j in judgements}


class JudgementLog:
    """Appends judgements to the file, one line each, written in one system call to a file opened for
    appending and fsynced before the page hears "saved"; an advisory lock keeps two reviewers' servers
    sharing a file from interleaving. A kill at any moment leaves every acknowledged judgement whole
    (a line cut short is one nobody was told was saved, and reading leaves it out)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.known = latest(read_judgements(self.path))
        if self.path.exists():
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):  # a torn last line, never acknowledged: cut it off
                os.truncate(self.path, data.rfind(b"\n") + 1)

    def add(self, query_id: str, snippet_id: str, annotator: str, judgement: str) -> None:
        import fcntl

        line = (
            json.dumps(
                {"id": query_id, "snippet_id": snippet_id, "annotator": annotator, "judgement": judgement},
                ensure_ascii=False,
            )
            + "\n"
        )
        with self._lock:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                os.write(descriptor, line.encode("utf-8"))
                os.fsync(descriptor)
            finally:
                os.close(descriptor)  # closing releases the lock
            self.known[(query_id, snippet_id, annotator)] = judgement


LOOPBACK = ("127.0.0.1", "::1", "localhost")
MAX_BODY = 4096  # a judgement is a few dozen bytes


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def make_server(
    items: list[dict], log: JudgementLog, annotator: str, host: str = "127.0.0.1", port: int = 0
) -> ThreadingHTTPServer:
    """The review page and its two calls: GET /api/items (items with this annotator's judgements) and
    POST /api/judgement ({"index", "judgement"}). What a page of another site (or a name rebound to this
    machine) could do with a server on the reviewer's machine, it cannot here:

    - only the page's own address is answered: a request whose Host header is not this server's address
      (DNS rebinding: a foreign name resolved to 127.0.0.1) or whose Origin is another site's is refused (403);
    - the API answers only requests carrying this session's token, which the page itself carries (it is
      written into the page, which another origin cannot read); a cross-site form or `text/plain` POST
      cannot set the header, so it cannot write a judgement (403);
    - a judgement names an item in range (never index -1) and one of the three verdicts; a body over
      MAX_BODY bytes is refused unread (413);
    - only the page and the two calls exist (404 for anything else: nothing on disk is served);
    - the page renders every text as text, and its Content-Security-Policy allows only its own script (by
      nonce), so a reference holding `<script>` or `<img onerror>` runs nothing."""
    token, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(16)
    template = resources.files("refkit").joinpath(PAGE).read_text(encoding="utf-8")
    page = template.replace("__TOKEN__", token).replace("__NONCE__", nonce).encode("utf-8")
    valid = {(item["id"], item["snippet_id"]) for item in items}
    policy = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; connect-src 'self'; "
        "img-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_):  # the terminal shows progress, not every request
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Referrer-Policy", "no-referrer")
            if kind.startswith("text/html"):
                self.send_header("Content-Security-Policy", policy)
            self.end_headers()
            self.wfile.write(body)

        def _own_address(self) -> bool:
            bound = self.server.server_address[1]
            names = {f"{name}:{bound}" for name in ("127.0.0.1", "localhost", "[::1]", self.server.review_host)}
            origin = self.headers.get("Origin")
            return self.headers.get("Host", "") in names and (origin is None or origin.removeprefix("http://") in names)

        def _refused(self) -> bool:
            if not self._own_address():
                self._send(403, b'{"error": "not this server\'s address"}')
                return True
            return False

        def _authorised(self) -> bool:
            if not secrets.compare_digest(self.headers.get("X-Review-Token", ""), token):
                self._send(403, b'{"error": "no session token"}')
                return False
            return True

        def do_GET(self):  # noqa: N802 (http.server's name)
            if self._refused():
                return None
            if self.path in ("/", "/index.html"):
                return self._send(200, page, "text/html; charset=utf-8")
            if self.path == "/api/items":
                if not self._authorised():
                    return None
                shown = [
                    {**item, "judgement": log.known.get((item["id"], item["snippet_id"], annotator))} for item in items
                ]
                return self._send(200, json.dumps({"annotator": annotator, "items": shown}).encode("utf-8"))
            return self._send(404, b'{"error": "not found"}')

        def do_POST(self):  # noqa: N802
            if self._refused():
                return None
            if self.path != "/api/judgement":
                return self._send(404, b'{"error": "not found"}')
            if not self._authorised():
                return None
            if not self.headers.get("Content-Type", "").startswith("application/json"):
                return self._send(415, b'{"error": "expected application/json"}')
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return self._send(411, b'{"error": "Content-Length required"}')
            if not 0 <= length <= MAX_BODY:
                self.close_connection = True  # the body is not read: the connection cannot be reused
                return self._send(413, b'{"error": "request body too large"}')
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                index, judgement = body["index"], body["judgement"]
                if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(items):
                    raise ValueError(index)
                item = items[index]
                if judgement not in JUDGEMENTS or (item["id"], item["snippet_id"]) not in valid:
                    raise ValueError(judgement)
            except (ValueError, KeyError, TypeError, json.JSONDecodeError):
                return self._send(
                    400, b'{"error": "expected {\\"index\\": N, \\"judgement\\": answers|related|unrelated}"}'
                )
            log.add(item["id"], item["snippet_id"], annotator, judgement)
            return self._send(200, b'{"saved": true}')

    server = ThreadingHTTPServer((host, port), Handler)
    server.review_host = host
    return server


def reviewed_noise(noise: dict[str, list[dict]], judgements: list[dict]) -> tuple[dict[str, list[dict]], Counter]:
    """The noise that survives review, each kept reference with its judgements; and what was dropped why."""
    by_reference: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (query_id, snippet_id, _), judgement in sorted(latest(judgements).items()):
        by_reference[(query_id, snippet_id)].append(judgement)
    kept: dict[str, list[dict]] = {}
    dropped: Counter = Counter()
    for query_id, references in noise.items():
        kept[query_id] = []
        for reference in references:
            votes = by_reference.get((query_id, reference["snippet_id"]), [])
            if "answers" in votes:
                dropped["answers"] += 1
            elif votes and votes.count("unrelated") * 2 > len(votes):
                dropped["unrelated"] += 1
            else:
                kept[query_id].append(
                    {**reference, "review": dict(sorted(Counter(votes).items()))} if votes else reference
                )
    return kept, dropped


def cohen_kappa(a: list, b: list) -> tuple[float, float]:
    """(share of items two raters labelled alike, Cohen's kappa) over the same non-empty list of items; 1.0
    when chance agreement is already total (both gave one and the same label throughout)."""
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    expected = sum((a.count(label) / len(a)) * (b.count(label) / len(b)) for label in set(a) | set(b))
    return observed, 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def agreement(judgements: list[dict]) -> dict:
    """Per pair of annotators: candidates both judged, the share judged alike, and Cohen's kappa."""
    by_annotator: dict[str, dict[tuple[str, str], str]] = defaultdict(dict)
    for (query_id, snippet_id, annotator), judgement in latest(judgements).items():
        by_annotator[annotator][(query_id, snippet_id)] = judgement
    pairs = {}
    for first, second in combinations(sorted(by_annotator), 2):
        common = sorted(set(by_annotator[first]) & set(by_annotator[second]))
        if not common:
            pairs[f"{first} / {second}"] = {"common": 0, "agreement": None, "kappa": None}
            continue
        a = [by_annotator[first][key] for key in common]
        b = [by_annotator[second][key] for key in common]
        observed, kappa = cohen_kappa(a, b)
        pairs[f"{first} / {second}"] = {
            "common": len(common),
            "agreement": round(observed, 4),
            "kappa": round(kappa, 4),
        }
    counts = {annotator: dict(sorted(Counter(v.values()).items())) for annotator, v in sorted(by_annotator.items())}
    return {"annotators": counts, "pairs": pairs}


def reader_agreement(judgements: list[dict], noise_path: Path) -> dict:
    """Per reader of the noise run and per annotator: the kept references both judged, the share where the
    reader's may-answer verdict (yes / not yes) matches the annotator's (answers / related or unrelated),
    and Cohen's kappa; a malformed answer counts as the reader's no, as it does in the run."""
    verdicts: dict[str, dict[tuple[str, str], bool]] = defaultdict(dict)
    for _, record in read_jsonl(noise_path, ("id", "noise")):
        for reference in record["noise"]:
            read = reference.get("measured", {}).get("reader")
            if read:
                verdicts[read["reader"]][(str(record["id"]), reference["snippet_id"])] = read["answer"] == "yes"
    by_annotator: dict[str, dict[tuple[str, str], bool]] = defaultdict(dict)
    for (query_id, snippet_id, annotator), judgement in latest(judgements).items():
        by_annotator[annotator][(query_id, snippet_id)] = judgement == "answers"
    result = {}
    for reader, said in sorted(verdicts.items()):
        for annotator, judged in sorted(by_annotator.items()):
            common = sorted(set(said) & set(judged))
            result[f"{reader} / {annotator}"] = _binary_agreement(
                [said[k] for k in common], [judged[k] for k in common]
            )
    return result


def _binary_agreement(a: list[bool], b: list[bool]) -> dict:
    if not a:
        return {"common": 0, "agreement": None, "kappa": None}
    observed, kappa = cohen_kappa(a, b)
    return {
        "common": len(a),
        "agreement": round(observed, 4),
        "kappa": round(kappa, 4),
        "reader_says_answers": sum(a),
        "annotator_says_answers": sum(b),
    }
