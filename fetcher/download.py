"""One file from a publisher's server, fetched politely and verified, never left partial under its final name.

The bytes go to `NAME.part` beside the final file; a cut transfer (a reset, a truncated body, a timeout) resumes
from what `NAME.part` holds with an HTTP Range request, after a backoff; 429 and 5xx answers are retried after
their `Retry-After` (seconds or a date) or the backoff. Once whole, the file is checked against the size and the
checksum the publisher gives (md5, sha1 or sha256) and its sha256 computed; only then is it renamed to its name.
A file that fails its checksum is fetched once more from the start, then refused. httpx reads proxies from the
environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY).
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from medsnip import __version__

RETRY_STATUSES = {408, 429, 500, 502, 503, 504}
READ_BYTES = 1 << 20


class FetchError(Exception):
    """A file that could not be fetched or verified (the message names the URL or file and why)."""


@dataclass(frozen=True)
class FetchSettings:
    connections: int = 3  # at once per host: a polite client of a public server
    attempts: int = 8  # per file, counting every retry and resume
    backoff: float = 1.0  # seconds before the first retry, doubled each time (with jitter)
    max_backoff: float = 60.0
    timeout: float = 60.0  # seconds to connect, and without a byte while reading


@dataclass(frozen=True)
class WaitOut:
    """An answer to retry after a pause (429, 5xx): its Retry-After says how long."""

    response: httpx.Response


@dataclass(frozen=True)
class Fetched:
    path: Path
    bytes: int
    sha256: str
    checksum: str | None  # the publisher's, as verified


def file_digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while block := handle.read(READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Downloader:
    """An HTTP client for a fetch: at most `connections` requests per host at once, retries and resumes."""

    def __init__(self, settings: FetchSettings | None = None, sleep: Callable[[float], None] = time.sleep):
        self.settings = settings or FetchSettings()
        self._sleep = sleep
        timeout = httpx.Timeout(self.settings.timeout)
        # identity: the file's own bytes (a .gz is not to be decoded on the way, whatever the server labels it)
        headers = {"User-Agent": f"medsnip/{__version__} (medsnip fetch)", "Accept-Encoding": "identity"}
        self.client = httpx.Client(timeout=timeout, follow_redirects=True, trust_env=True, headers=headers)
        self._hosts: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Downloader:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def _host(self, url: str) -> threading.BoundedSemaphore:
        host = urlsplit(url).netloc
        with self._lock:
            return self._hosts.setdefault(host, threading.BoundedSemaphore(self.settings.connections))

    def _wait(self, attempt: int, response: httpx.Response | None = None) -> None:
        delay = _retry_after(response) if response is not None else None
        if delay is None:
            delay = self.settings.backoff * 2**attempt * (0.5 + random.random() / 2)
        self._sleep(min(delay, self.settings.max_backoff))

    def _retrying(self, url: str, once: Callable[[], object], kept: str = ""):
        """`once()` until it returns an answer, under the module's retry rule: a transport error (a reset, a cut
        body, a timeout) or a `WaitOut` (a 429 or 5xx answer) is retried after a pause, up to `attempts` times; then
        FetchError, saying the last problem and `kept` (what is left of a file)."""
        last = ""
        for attempt in range(self.settings.attempts):
            try:
                with self._host(url):
                    answer = once()
            except httpx.TransportError as error:
                last = f"{type(error).__name__}: {error}"
                self._wait(attempt)
                continue
            if isinstance(answer, WaitOut):
                last = f"HTTP {answer.response.status_code}"
                self._wait(attempt, answer.response)
                continue
            return answer
        raise FetchError(f"{url}: gave up after {self.settings.attempts} attempts ({last}){kept}")

    @staticmethod
    def _usable(url: str, response: httpx.Response) -> WaitOut | None:
        """A WaitOut for an answer to retry after a pause, None for one to read; FetchError for any other error."""
        if response.status_code in RETRY_STATUSES:
            return WaitOut(response)
        if response.status_code >= 400:
            raise FetchError(f"{url}: HTTP {response.status_code}")
        return None

    def get_bytes(self, url: str) -> bytes:
        """A small document (a listing, a sidecar, a dump's status), with the same retries as a file."""

        def once():
            response = self.client.get(url)
            return self._usable(url, response) or response.content

        return self._retrying(url, once)

    def size_of(self, url: str) -> int | None:
        """The file's size from a HEAD request (None when the server does not say)."""
        try:
            with self._host(url):
                response = self.client.head(url)
        except httpx.TransportError:
            return None
        length = response.headers.get("content-length")
        return int(length) if response.status_code < 400 and length and length.isdigit() else None

    def fetch(
        self,
        url: str,
        dest: Path,
        checksum: str | None,
        size: int | None = None,
        progress: Callable[[int], None] = lambda n: None,
    ) -> Fetched:
        """`url` into `dest` (via `dest.part`), resumed and retried as the module says, verified against `checksum`
        ("md5:<hex>", "sha1:<hex>", "sha256:<hex>") and `size` when given."""
        part = dest.with_name(dest.name + ".part")
        dest.parent.mkdir(parents=True, exist_ok=True)
        for fresh_start in (False, True):
            if fresh_start:
                part.unlink(missing_ok=True)
            self._transfer(url, part, size, progress)
            got = part.stat().st_size
            if size is not None and got != size:
                part.unlink(missing_ok=True)
                raise FetchError(f"{url}: {got:,} bytes arrived, the publisher lists {size:,}")
            if checksum is None:
                break
            algorithm, _, expected = checksum.partition(":")
            actual = file_digest(part, algorithm)
            if actual == expected.lower():
                break
            if fresh_start:
                part.unlink(missing_ok=True)
                raise FetchError(
                    f"{url}: {algorithm} {actual} twice, the publisher gives {expected}: the file is not what its "
                    "publisher vouches for; nothing was kept"
                )
        sha256 = checksum.partition(":")[2].lower() if checksum and checksum.startswith("sha256:") else None
        sha256 = sha256 or file_digest(part, "sha256")
        with open(part, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(part, dest)
        return Fetched(dest, dest.stat().st_size, sha256, checksum)

    def _transfer(self, url: str, part: Path, size: int | None, progress: Callable[[int], None]) -> None:
        """Bytes into `part` until the server says the file is whole, resuming with Range after a cut."""

        def once() -> WaitOut | None:
            have = part.stat().st_size if part.exists() else 0
            if size is not None and have == size:
                return None
            headers = {"Range": f"bytes={have}-"} if have else {}
            with self.client.stream("GET", url, headers=headers) as response:
                if response.status_code == 416 and have:  # nothing past what we hold: whole, or a bad part
                    if size is None or have > size:
                        part.unlink(missing_ok=True)
                    return None
                if wait := self._usable(url, response):
                    return wait
                resumed = response.status_code == 206 and have
                if have and not resumed:  # the server sent the whole file: start the part again
                    progress(-have)
                    have = 0
                length = response.headers.get("content-length")
                expected = have + int(length) if length and length.isdigit() else None
                with open(part, "ab" if resumed else "wb") as out:
                    for block in response.iter_raw():  # the bytes as sent, each block as it arrives
                        out.write(block)
                        progress(len(block))
                if expected is not None and part.stat().st_size < expected:
                    raise httpx.RemoteProtocolError(f"the body ended at {part.stat().st_size:,} of {expected:,}")
                return None

        self._retrying(url, once, f"; {part} keeps what arrived")
