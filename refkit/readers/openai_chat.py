"""A reader behind an OpenAI-compatible chat endpoint: vLLM, Ollama, llama.cpp's server, `transformers
serve`, or a hosted API. Asked at temperature 0 through the `openai` client, which retries connection
errors, timeouts, 429 and 5xx answers with exponential backoff (honouring Retry-After); requests are
also paced to `--reader-rate` per second. The API key comes from an environment variable or a file, never
from the command line, and is never recorded."""

from __future__ import annotations

import threading
import time

from refkit.readers.errors import ReaderError, ReaderUnreachable


class OpenAIChat:
    kind = "openai"

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None,
        timeout: float = 60.0,
        retries: int = 4,
        rate: float = 0.0,
    ):
        import openai

        self.url, self.model, self.timeout, self.retries = url, model, timeout, retries
        # local servers take any key; the client insists on one
        self.client = openai.OpenAI(base_url=url, api_key=api_key or "unused", timeout=timeout, max_retries=retries)
        self._interval = 1.0 / rate if rate > 0 else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    @property
    def identity(self) -> dict:
        return {"kind": self.kind, "model": self.model}

    def complete(self, prompt: str, max_tokens: int) -> str:
        import openai

        self._pace()
        tries = f"{self.retries + 1} tries"
        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "user", "content": prompt}],
                temperature=0,
                max_tokens=max_tokens,
            )
        except openai.APITimeoutError:
            raise ReaderError(f"reader endpoint {self.url}: no answer within {self.timeout:g} s ({tries})") from None
        except openai.APIConnectionError as error:
            cause = error.__cause__ or error
            raise ReaderUnreachable(
                f"reader endpoint {self.url}: unreachable ({type(cause).__name__}: {cause}); is the server running "
                "and is --reader-url its /v1 address?"
            ) from None
        except openai.RateLimitError:
            raise ReaderError(
                f"reader endpoint {self.url}: rate limited (HTTP 429) on all {tries}; lower --reader-rate or raise "
                "--reader-retries, then run the same command again (answers so far are kept)"
            ) from None
        except openai.APIStatusError as error:
            raise ReaderError(
                f"reader endpoint {self.url}: HTTP {error.status_code} for model {self.model!r}: {error.message}"
            ) from None
        choices = getattr(response, "choices", None)
        if not choices:
            raise ReaderError(f"reader endpoint {self.url}: an answer without choices for model {self.model!r}")
        return choices[0].message.content or ""

    def _pace(self) -> None:
        if not self._interval:
            return
        with self._lock:
            now = time.monotonic()
            wait = self._next - now
            self._next = max(now, self._next) + self._interval
        if wait > 0:
            time.sleep(wait)
