"""Clients of an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint (vLLM, SGLang,
llama.cpp server, hosted APIs), standard library only (urllib).

- :class:`ChatClient`: one request -> the first choice's message content. Retries with exponential
  back-off (``backoff * 2**attempt`` seconds, capped at ``max_backoff``) on 429, 5xx, timeouts,
  connection errors and malformed response bodies; a ``Retry-After`` header (seconds) on 429/503
  is honoured instead (capped at ``max_backoff``). Any other 4xx raises :class:`ChatAPIError`
  at once with the server's error message. The API key is read from the environment variable
  named ``api_key_env`` (default ``OPENAI_API_KEY``); no key -> no Authorization header (local
  servers). Successful completions are cached on disk (content hash of base URL, model, messages
  and decoding settings); empty completions are returned but not cached.
- :class:`OpenAIChatJudge`: the seed's Figure 10 prompt, :func:`~.base.parse_verdict` of the reply.
- :class:`OpenAIChatGenerator`: completions for the rewrite attacks (seed Figures 8-9).

Both run their batch through a thread pool of ``concurrency`` workers.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from .base import (
    ERROR,
    ResponseCache,
    Verdict,
    content_key,
    default_cache_dir,
    judge_messages,
    parse_verdict,
    progress_iter,
)


class ChatAPIError(RuntimeError):
    """A failed chat request: ``status`` is the HTTP status (None for timeouts / network errors)."""

    def __init__(self, message: str, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status, self.retryable = status, retryable


def _server_message(body: bytes) -> str:
    try:
        data = json.loads(body.decode("utf-8", "replace"))
        err = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(err, dict):
            return str(err.get("message") or err)
        return str(err)
    except (ValueError, AttributeError):
        return body.decode("utf-8", "replace")[:500]


def _retry_after(headers) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # HTTP-date form: fall back to exponential back-off


class ChatClient:
    """One OpenAI-compatible chat endpoint (see module docstring).

    ``base_url``: e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended unless
    already there). ``timeout``: seconds per request. ``max_retries``: extra attempts after the
    first. ``params``: decoding settings sent with every request (default temperature 0).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        concurrency: int = 4,
        params: dict | None = None,
        cache_dir=None,
        sleep=time.sleep,
    ):
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model, self.api_key_env = model, api_key_env
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.backoff, self.max_backoff, self.concurrency = float(backoff), float(max_backoff), max(1, int(concurrency))
        self.params = {"temperature": 0.0, **(params or {})}
        self.cache = (
            None
            if cache_dir is False
            else ResponseCache((default_cache_dir() / "openai") if cache_dir is None else cache_dir)
        )
        self._sleep = sleep
        self.stats = {"requests": 0, "retries": 0, "cache_hits": 0}

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _once(self, body: bytes) -> str:
        req = urllib.request.Request(self.url, data=body, headers=self._headers(), method="POST")
        self.stats["requests"] += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            payload = err.read()
            msg = f"HTTP {err.code} from {self.url}: {_server_message(payload)}"
            retryable = err.code == 429 or err.code >= 500 or err.code == 408
            exc = ChatAPIError(msg, err.code, retryable)
            exc.retry_after = _retry_after(err.headers)
            raise exc from None
        except TimeoutError as err:
            raise ChatAPIError(f"timeout after {self.timeout}s from {self.url}", None, True) from err
        except urllib.error.URLError as err:
            if isinstance(err.reason, (socket.timeout, TimeoutError)):
                raise ChatAPIError(f"timeout after {self.timeout}s from {self.url}", None, True) from err
            raise ChatAPIError(f"cannot reach {self.url}: {err.reason}", None, True) from err
        except (ConnectionError, http.client.HTTPException) as err:
            raise ChatAPIError(f"connection error from {self.url}: {err!r}", None, True) from err
        try:
            data = json.loads(raw.decode("utf-8"))
            content = data["choices"][0]["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, UnicodeDecodeError):
            raise ChatAPIError(f"malformed response from {self.url}: {raw[:200]!r}", 200, True) from None
        return "" if content is None else str(content)

    def complete(self, messages: list[dict]) -> str:
        """The completion text of ``messages`` (cached); raises :class:`ChatAPIError` after the retries."""
        key = content_key("openai-chat-v1", self.url, self.model, list(messages), self.params)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats["cache_hits"] += 1
                return hit["content"]
        body = json.dumps({"model": self.model, "messages": list(messages), **self.params}).encode("utf-8")
        attempt = 0
        while True:
            try:
                content = self._once(body)
                break
            except ChatAPIError as err:
                if not err.retryable or attempt >= self.max_retries:
                    if attempt:
                        raise ChatAPIError(f"{err} (after {attempt + 1} attempts)", err.status, err.retryable) from err
                    raise
                wait = getattr(err, "retry_after", None)
                wait = min(self.max_backoff, wait if wait is not None else self.backoff * 2**attempt)
                attempt += 1
                self.stats["retries"] += 1
                self._sleep(wait)
        if content.strip() and self.cache is not None:
            self.cache.put(key, {"content": content, "model": self.model})
        return content

    def complete_many(
        self, conversations: Sequence[list[dict]], *, progress: bool = False, desc: str = "chat"
    ) -> list[str | Exception]:
        """Completions of many chats through ``concurrency`` threads; failed items are the exception."""

        def one(msgs):
            try:
                return self.complete(msgs)
            except ChatAPIError as err:
                return err

        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(progress_iter(pool.map(one, conversations), len(conversations), progress, desc))


class OpenAIChatJudge:
    """Seed Figure 10 judge behind an OpenAI-compatible endpoint; replies parsed by
    :func:`~.base.parse_verdict`. A failed request is a ``Verdict(status="error")`` (never raised
    by ``judge_many``), so a batch always returns one verdict per item."""

    def __init__(self, base_url: str, model: str, **client_kwargs):
        self.client = ChatClient(base_url, model, **client_kwargs)
        self.name = f"openai:{model}"

    def judge(self, question: str, response_a: str, response_b: str) -> Verdict:
        return self.judge_many([(question, response_a, response_b)])[0]

    def judge_many(self, items: Sequence[tuple[str, str, str]], *, progress: bool = False) -> list[Verdict]:
        replies = self.client.complete_many([judge_messages(*it) for it in items], progress=progress, desc=self.name)
        return [
            Verdict(None, None, str(r), ERROR, {"http_status": r.status})
            if isinstance(r, Exception)
            else parse_verdict(r)
            for r in replies
        ]


class OpenAIChatGenerator:
    """Text generator behind an OpenAI-compatible endpoint (rewrite attacks, seed Figures 8-9).
    ``max_tokens`` caps the completion length (sent as the request's ``max_tokens``)."""

    def __init__(self, base_url: str, model: str, *, max_tokens: int | None = 1024, **client_kwargs):
        params = dict(client_kwargs.pop("params", None) or {})
        if max_tokens is not None:
            params.setdefault("max_tokens", int(max_tokens))
        self.client = ChatClient(base_url, model, params=params, **client_kwargs)
        self.name = f"openai:{model}"

    def generate(self, messages: list[dict]) -> str:
        return self.client.complete(messages)

    def generate_many(self, conversations: Sequence[list[dict]], *, progress: bool = False) -> list[str | Exception]:
        return self.client.complete_many(conversations, progress=progress, desc=f"generate ({self.name})")
