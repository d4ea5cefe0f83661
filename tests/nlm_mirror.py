"""A loopback HTTP server laid out as NLM's and Wikimedia's download servers, with faults on demand, for the tests of
`medsnip fetch` and `medsnip update --fetch` (nothing outside the machine is reached).

- `/pubmed/baseline/` and `/pubmed/updatefiles/`: an HTML directory page linking each `pubmed26nNNNN.xml.gz`
  and its `.md5` (`MD5(name)= hex`, NLM's format); the files are gzips (mtime 0) of the real PubMed samples in
  samples/pubmed, under NLM's 2026 names;
- `/enwiki/20261101/dumpstatus.json`: a Wikimedia dump's status with one done job, its file's size and sha1;
- byte ranges (206, Content-Range) and HEAD, as a real file server answers them;
- `faults[path]`: what the next requests of a path get, one fault per request, in order: "503", "429" (with
  Retry-After: 1), "truncate" (the full Content-Length announced, half the body sent, then the connection
  closed), "reset" (half the body, then a TCP reset), "slow" (3 s before the headers).
Every request is recorded in `requests` as (method, path, Range header or "").
"""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import SAMPLES

BASELINE = {"pubmed26n0001.xml.gz": "pubmed1.xml", "pubmed26n0002.xml.gz": "pubmed2.xml"}
UPDATES = {"pubmed26n0003.xml.gz": "pubmed5.xml", "pubmed26n0004.xml.gz": "pubmed6.xml"}
DUMP = "enwiki-20261101-pages-articles-multistream.xml.bz2"


def nlm_gzip(sample: str) -> bytes:
    return gzip.compress((SAMPLES / "pubmed" / sample).read_bytes(), mtime=0)


def listing(names: list[str]) -> bytes:
    rows = "".join(f'<a href="{name}">{name}</a>   2026-01-01 00:00  1K\n' for name in names)
    return f"<html><head><title>Index</title></head><body><pre>{rows}</pre></body></html>".encode()


class Mirror:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.faults: dict[str, list[str]] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        for folder, names in (("baseline", BASELINE), ("updatefiles", UPDATES)):
            for name, sample in names.items():
                self.put(f"/pubmed/{folder}/{name}", nlm_gzip(sample))
        self.publish_updates(list(UPDATES)[:1])
        dump = b"BZh9" + bytes(range(256)) * 64  # a stand-in: the fetch never opens it
        self.files[f"/enwiki/20261101/{DUMP}"] = dump
        done = {"size": len(dump), "url": f"/enwiki/20261101/{DUMP}", "sha1": hashlib.sha1(dump).hexdigest()}
        status = {"jobs": {"articlesmultistreamdump": {"status": "done", "files": {DUMP: done}}}}
        self.files["/enwiki/20261101/dumpstatus.json"] = json.dumps(status).encode()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def put(self, path: str, data: bytes, md5: str | None = None) -> None:
        """A file and its NLM sidecar (`md5`: another digest, to publish a wrong one)."""
        name = path.rsplit("/", 1)[1]
        self.files[path] = data
        self.files[path + ".md5"] = f"MD5({name})= {md5 or hashlib.md5(data).hexdigest()}\n".encode()
        folder = path.rsplit("/", 1)[0]
        names = sorted(p.rsplit("/", 1)[1] for p in self.files if p.startswith(folder + "/"))
        if folder.endswith("baseline"):
            self.files[folder + "/"] = listing(names)

    def publish_updates(self, names: list[str]) -> None:
        """NLM's updatefiles/ page listing these update files (and their sidecars) only."""
        shown = [n for name in names for n in (name, name + ".md5")]
        self.files["/pubmed/updatefiles/"] = listing(shown)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Mirror:
        self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                path = self.path.split("?")[0]
                with mirror.lock:
                    mirror.requests.append((self.command, path, self.headers.get("Range", "")))
                    faults = mirror.faults.get(path) or []
                    fault = faults.pop(0) if faults and body else None
                if fault == "slow":
                    time.sleep(3)
                if fault in ("503", "429"):
                    self.send_response(int(fault))
                    if fault == "429":
                        self.send_header("Retry-After", "1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = mirror.files.get(path)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                ranged = self.headers.get("Range", "")
                if ranged.startswith("bytes="):
                    start = int(ranged[6:].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                part = data[start:]
                self.send_header("Content-Length", str(len(part)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if not body:
                    return
                if fault in ("truncate", "reset"):
                    self.wfile.write(part[: len(part) // 2])
                    self.wfile.flush()
                    if fault == "reset":  # SO_LINGER 0: the close sends a TCP reset
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                self.wfile.write(part)

        return Handler
