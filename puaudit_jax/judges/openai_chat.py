"""Clients of an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint, standard library only (urllib).

The endpoint of vLLM, SGLang, llama.cpp's server or a hosted API.

- :class:`ChatClient`: one request -> the first choice's message content. Retries with exponential
  back-off (``backoff * 2**attempt`` seconds, capped at ``max_backoff``) on 408, 429, 5xx,
  timeouts, connection errors and malformed response bodies; a ``Retry-After`` header (seconds) on
  429/503 is honoured instead (capped at ``max_backoff``). Permanent errors are never retried: any
  other 4xx raises :class:`ChatAPIError` at once with the server's error message, and so does a URL
  urllib cannot open. The base URL is checked up front (:func:`check_base_url`: http or https and
  a host), and ``timeout`` > 0, ``max_retries`` >= 0, ``concurrency`` >= 1 (a ValueError naming
  them). The API key is read from the environment variable named ``api_key_env`` (default
  ``OPENAI_API_KEY``); no key -> no Authorization header (local servers). Successful answers are
  cached on disk (content hash of URL, model, prompt and decoding settings); empty completions are
  returned but not cached. Once the server cannot be reached after the retries (or its URL cannot be
  opened), the client's later requests fail at once (no retry storm).
- :class:`OpenAIChatJudge`: the paper's Figure 10 prompt, :func:`~.base.parse_verdict` of the reply.
- :class:`OpenAILogprobJudge`: the local judge's verdict rule (log p("A") vs log p("B") after
  ``[[``, both orders) from the completions endpoint's ``top_logprobs``.
- :class:`OpenAIChatGenerator`: completions for the rewrite attacks (seed Figures 8-9).

Both run their batch through a thread pool of ``concurrency`` workers.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ..datasets.verdicts import MISSING
from .base import (
    ERROR,
    NO_MARGIN,
    OK,
    UNPARSED,
    VERDICT_LETTERS,
    ResponseCache,
    Verdict,
    content_key,
    default_cache_dir,
    judge_messages,
    parse_verdict,
    progress_iter,
    two_order_verdict,
)
from .names import API_KEY_ENV


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


def check_base_url(base_url: str, option: str = "base_url") -> str:
    """``base_url`` itself when it is an http(s) URL with a host, else a ValueError naming ``option``.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        option: the name the error gives it (``--base-url`` on the command line).

    Raises:
        ValueError: no scheme, another scheme than http / https, or no host.
    """
    parts = urllib.parse.urlsplit(str(base_url).strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{option} {base_url!r}: needs an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000/v1"
        )
    return base_url


def check_client_settings(timeout: float, max_retries: int, concurrency: int, names: dict | None = None) -> None:
    """Raise a ValueError naming the setting when timeout <= 0, max_retries < 0 or concurrency < 1.

    Args:
        timeout: seconds per request.
        max_retries: extra attempts after the first.
        concurrency: parallel requests.
        names: how the errors name each setting (default the parameter names).
    """
    names = {"timeout": "timeout", "max_retries": "max_retries", "concurrency": "concurrency", **(names or {})}
    if not _is_number(timeout) or not timeout > 0:
        raise ValueError(f"{names['timeout']} must be > 0 seconds, got {timeout!r}")
    for key, value, low in (("max_retries", max_retries, 0), ("concurrency", concurrency, 1)):
        if not (_is_number(value) and math.isfinite(value) and value == int(value) and value >= low):
            raise ValueError(f"{names[key]} must be an integer >= {low}, got {value!r}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def _retry_after(headers) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # HTTP-date form: fall back to exponential back-off


class ChatClient:
    """One OpenAI-compatible server (see module docstring): chat completions and next-token log-probabilities.

    The log-probabilities come through the legacy completions endpoint.

    ``base_url``: e.g. ``http://127.0.0.1:8000/v1`` (a trailing ``/chat/completions`` is accepted).
    ``timeout``: seconds per request (> 0). ``max_retries``: extra attempts after the first (>= 0).
    ``concurrency``: parallel requests of a batch (>= 1). ``params``: decoding settings sent with
    every chat request (default temperature 0). A bad setting is a ValueError naming it.

    Once a request has failed on every attempt because the server could not be reached, later
    requests fail at once with that reason (``stats["not_sent"]`` counts them) instead of each
    waiting through its own retries: a batch against a stopped server ends in seconds, and what
    was answered before stays in the cache for the rerun.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = API_KEY_ENV,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        concurrency: int = 4,
        params: dict | None = None,
        cache_dir=None,
        sleep=time.sleep,
    ):
        check_base_url(base_url)
        check_client_settings(timeout, max_retries, concurrency)
        base = base_url.strip().rstrip("/").removesuffix("/chat/completions")
        self.url, self.completions_url = base + "/chat/completions", base + "/completions"
        self.model, self.api_key_env = model, api_key_env
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.backoff, self.max_backoff, self.concurrency = float(backoff), float(max_backoff), int(concurrency)
        self.params = {"temperature": 0.0, **(params or {})}
        self.cache = (
            None
            if cache_dir is False
            else ResponseCache((default_cache_dir() / "openai") if cache_dir is None else cache_dir)
        )
        self._sleep = sleep
        self._unreachable: ChatAPIError | None = None
        self.stats = {"requests": 0, "retries": 0, "cache_hits": 0, "not_sent": 0}

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _once(self, url: str, body: bytes, extract):
        """One POST; ``extract(json) -> value`` (a KeyError / TypeError / ... means malformed)."""
        req = urllib.request.Request(url, data=body, headers=self._headers(), method="POST")
        self.stats["requests"] += 1
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            payload = err.read()
            msg = f"HTTP {err.code} from {url}: {_server_message(payload)}"
            retryable = err.code == 429 or err.code >= 500 or err.code == 408
            exc = ChatAPIError(msg, err.code, retryable)
            exc.retry_after = _retry_after(err.headers)
            raise exc from None
        except TimeoutError as err:
            raise ChatAPIError(f"timeout after {self.timeout}s from {url}", None, True) from err
        except urllib.error.URLError as err:
            if isinstance(err.reason, (socket.timeout, TimeoutError)):
                raise ChatAPIError(f"timeout after {self.timeout}s from {url}", None, True) from err
            if not isinstance(err.reason, OSError):  # e.g. "unknown url type": retrying cannot help
                raise _unreachable_error(f"cannot open {url}: {err.reason}", retryable=False) from err
            raise _unreachable_error(f"cannot reach {url}: {err.reason}") from err
        except (ConnectionError, http.client.HTTPException) as err:
            raise _unreachable_error(f"connection error from {url}: {err!r}") from err
        try:
            return extract(json.loads(raw.decode("utf-8")))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, UnicodeDecodeError):
            raise ChatAPIError(f"malformed response from {url}: {raw[:200]!r}", 200, True) from None

    def post(self, url: str, payload: dict, extract):
        """``extract`` of the JSON answer to ``payload``, retried as the module docstring says.

        Args:
            url: the endpoint.
            payload: the request's JSON body.
            extract: JSON answer -> value (a KeyError / TypeError / ... means a malformed answer).

        Raises:
            ChatAPIError: after the retries (or at once once the server is unreachable).
        """
        if self._unreachable is not None:
            self.stats["not_sent"] += 1
            raise ChatAPIError(f"not sent: {self._unreachable}", None, False)
        body = json.dumps(payload).encode("utf-8")
        attempt = 0
        while True:
            try:
                return self._once(url, body, extract)
            except ChatAPIError as err:
                if not err.retryable or attempt >= self.max_retries:
                    if getattr(err, "unreachable", False):
                        self._unreachable = err
                    if attempt:
                        raise ChatAPIError(f"{err} (after {attempt + 1} attempts)", err.status, err.retryable) from err
                    raise
                wait = getattr(err, "retry_after", None)
                wait = min(self.max_backoff, wait if wait is not None else self.backoff * 2**attempt)
                attempt += 1
                self.stats["retries"] += 1
                self._sleep(wait)

    def _cached(self, key: str, field: str, fetch, keep):
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats["cache_hits"] += 1
                return hit[field]
        value = fetch()
        if keep(value) and self.cache is not None:
            self.cache.put(key, {field: value, "model": self.model})
        return value

    def complete(self, messages: list[dict]) -> str:
        """The completion text of ``messages`` (cached); raises :class:`ChatAPIError` after the retries.

        Empty completions are returned but not cached.
        """
        key = content_key("openai-chat-v1", self.url, self.model, list(messages), self.params)
        payload = {"model": self.model, "messages": list(messages), **self.params}

        def content(data):
            text = data["choices"][0]["message"].get("content")
            return "" if text is None else str(text)

        return self._cached(key, "content", lambda: self.post(self.url, payload, content), lambda c: bool(c.strip()))

    def next_token_logprobs(self, prompt: str, top: int = 20) -> dict[str, float]:
        """Log-probabilities (nats, by token text) of the ``top`` most likely next tokens after the raw ``prompt``.

        From ``POST /completions`` with ``max_tokens=1, logprobs=top, temperature=0`` (the legacy OpenAI
        format that vLLM, SGLang and llama.cpp serve). Cached.
        """
        key = content_key("openai-next-logprobs-v1", self.completions_url, self.model, prompt, int(top))
        payload = {"model": self.model, "prompt": prompt, "max_tokens": 1, "logprobs": int(top), "temperature": 0.0}

        def top_logprobs(data):
            first = data["choices"][0]["logprobs"]["top_logprobs"][0]
            return {str(tok): float(lp) for tok, lp in dict(first).items()}

        return self._cached(
            key, "top_logprobs", lambda: self.post(self.completions_url, payload, top_logprobs), lambda d: bool(d)
        )

    def _many(self, fn, inputs: Sequence, progress: bool, desc: str) -> list:
        def one(x):
            try:
                return fn(x)
            except ChatAPIError as err:
                return err

        with ThreadPoolExecutor(self.concurrency) as pool:
            return list(progress_iter(pool.map(one, inputs), len(inputs), progress, desc))

    def complete_many(
        self, conversations: Sequence[list[dict]], *, progress: bool = False, desc: str = "chat"
    ) -> list[str | Exception]:
        """Completions of many chats through ``concurrency`` threads; failed items are the exception.

        Args:
            conversations: the chats, each a list of ``{"role", "content"}`` messages.
            progress: whether to show a progress bar.
            desc: the bar's label.

        Returns:
            One completion text, or the :class:`ChatAPIError`, per chat, in order.
        """
        return self._many(self.complete, conversations, progress, desc)

    def next_token_logprobs_many(
        self, prompts: Sequence[str], top: int = 20, *, progress: bool = False, desc: str = "logprobs"
    ) -> list[dict[str, float] | Exception]:
        """:meth:`next_token_logprobs` of many prompts through ``concurrency`` threads.

        Args:
            prompts: the raw completion prompts.
            top: next tokens per prompt (the most likely).
            progress: whether to show a progress bar.
            desc: the bar's label.

        Returns:
            Per prompt, token text -> log-probability (nats), or the :class:`ChatAPIError`, in order.
        """
        return self._many(lambda p: self.next_token_logprobs(p, top), prompts, progress, desc)


def _unreachable_error(message: str, retryable: bool = True) -> ChatAPIError:
    err = ChatAPIError(message, None, retryable)
    err.unreachable = True
    return err


class OpenAIChatJudge:
    """Seed Figure 10 judge behind an OpenAI-compatible endpoint; replies parsed by :func:`~.base.parse_verdict`.

    A failed request is a ``Verdict(status="error")`` (never raised by ``judge_many``), so a batch always
    returns one verdict per item.
    """

    def __init__(self, base_url: str, model: str, **client_kwargs):
        self.client = ChatClient(base_url, model, **client_kwargs)
        self.name = f"openai:{model}"

    def judge(self, question: str, response_a: str, response_b: str) -> Verdict:
        """The verdict on one pair (:meth:`judge_many` of one item).

        Args:
            question: the user question (the judge prompt's question text).
            response_a: the answer shown as assistant A.
            response_b: the answer shown as assistant B.
        """
        return self.judge_many([(question, response_a, response_b)])[0]

    def judge_many(self, items: Sequence[tuple[str, str, str]], *, progress: bool = False) -> list[Verdict]:
        """One verdict per (question, response_a, response_b) item; failed requests as status "error"."""
        replies = self.client.complete_many([judge_messages(*it) for it in items], progress=progress, desc=self.name)
        return [
            Verdict(None, None, str(r), ERROR, {"http_status": r.status})
            if isinstance(r, Exception)
            else parse_verdict(r)
            for r in replies
        ]


class OpenAILogprobJudge:
    """The local judge's verdict rule through a server, from the completions endpoint's ``top_logprobs``.

    log p("A") vs log p("B") of the token after an assistant turn opened with ``[[``, in both presentation
    orders (swapped back and averaged: :func:`~.base.two_order_verdict`), read from the completions
    endpoint's ``top_logprobs``.

    The prompt is the paper's Figure 10 chat rendered by ``chat_template`` (the served model's own
    template: an object whose ``apply_chat_template(messages, add_generation_prompt=True)`` returns
    the text, e.g. a ``probes`` tokenizer, or a model name or folder whose tokenizer files carry
    it, such as ``"smollm2"``) followed by ``[[``; it goes to ``POST /completions`` as raw text so the
    server does not template it again. A letter missing from the ``top`` returned tokens gets the
    smallest returned log-probability (an upper bound; ``details["bounded"]`` lists it per order);
    a pair where neither "A" nor "B" is returned in some order is "unparsed". One verdict per item,
    failed requests as ``status="error"`` with the server's message.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        chat_template="smollm2",
        top_logprobs: int = 20,
        tie_margin: float = 0.0,
        c_is_tie: bool = False,
        assistant_prefix: str = "[[",
        **client_kwargs,
    ):
        self.client = ChatClient(base_url, model, **client_kwargs)
        self.name = f"openai-logprob:{model}"
        self.template = _template_renderer(chat_template)
        self.top, self.assistant_prefix = int(top_logprobs), assistant_prefix
        self.rule = {"tie_margin": float(tie_margin), "c_is_tie": bool(c_is_tie)}

    def prompt(self, question: str, response_a: str, response_b: str) -> str:
        """The raw completion prompt: the templated Figure 10 chat and the assistant's ``[[``.

        Args:
            question: the user question (the judge prompt's question text).
            response_a: the answer shown as assistant A.
            response_b: the answer shown as assistant B.
        """
        text = self.template.apply_chat_template(
            judge_messages(question, response_a, response_b), add_generation_prompt=True
        )
        return text + self.assistant_prefix

    def judge(self, question: str, response_a: str, response_b: str) -> Verdict:
        """The verdict on one pair (:meth:`judge_many` of one item).

        Args:
            question: the user question (the judge prompt's question text).
            response_a: the answer shown as assistant A.
            response_b: the answer shown as assistant B.
        """
        return self.judge_many([(question, response_a, response_b)])[0]

    def judge_many(self, items: Sequence[tuple[str, str, str]], *, progress: bool = False) -> list[Verdict]:
        """One verdict per (question, response_a, response_b) item, both orders each (2 requests per item)."""
        prompts = [p for q, a, b in items for p in (self.prompt(q, a, b), self.prompt(q, b, a))]
        tops = self.client.next_token_logprobs_many(prompts, self.top, progress=progress, desc=self.name)
        return [self._verdict(tops[2 * k], tops[2 * k + 1]) for k in range(len(items))]

    def _verdict(self, top_ab, top_ba) -> Verdict:
        for r in (top_ab, top_ba):
            if isinstance(r, Exception):
                return Verdict(None, None, str(r), ERROR, {"http_status": r.status})
        if not top_ab or not top_ba:
            return Verdict(None, None, "", UNPARSED, {"reason": "the server returned no top log-probabilities"})
        (ab, bounded_ab), (ba, bounded_ba) = _letter_logprobs(top_ab), _letter_logprobs(top_ba)
        ba = [ba[1], ba[0], ba[2]]  # swap back: the original A first
        bounded_ba = sorted({"A": "B", "B": "A", "C": "C"}[x] for x in bounded_ba)
        raw = f"top-{self.top} logp(A,B,C) order AB {_rounded(ab)}, order BA (swapped back) {_rounded(ba)}"
        if {"A", "B"} <= set(bounded_ab) or {"A", "B"} <= set(bounded_ba):
            return Verdict(None, None, raw, UNPARSED, {"reason": f"neither A nor B among the top {self.top} tokens"})
        winner, details = two_order_verdict(ab, ba, **self.rule)
        details["bounded"] = {"ab": bounded_ab, "ba": bounded_ba}
        if winner == MISSING:
            return Verdict(None, None, raw, UNPARSED, {**details, "reason": NO_MARGIN})
        return Verdict(winner, None, raw + f"; margin {details['margin']:+.3f}", OK, details)


def _letter_logprobs(top: dict[str, float]) -> tuple[list[float], list[str]]:
    """Log-probabilities of "A", "B", "C" from a top-k dict; a missing letter gets the smallest returned value."""
    floor = min(top.values())
    return [top.get(x, floor) for x in VERDICT_LETTERS], [x for x in VERDICT_LETTERS if x not in top]


def _rounded(values) -> list[float]:
    return [round(float(v), 3) for v in values]


def _template_renderer(chat_template):
    """An object with ``apply_chat_template``: the argument itself, or the tokenizer of a model name / folder.

    The tokenizer comes from ``probes.models``; its files must carry a chat template.
    """
    if hasattr(chat_template, "apply_chat_template"):
        return chat_template
    from probes.models.pretrained import resolve
    from probes.models.tokenizer import load_tokenizer

    tok = load_tokenizer(resolve(chat_template))
    if tok is None or not tok.chat_template:
        raise ValueError(f"{chat_template!r}: no tokenizer with a chat template to render the judge prompt")
    return tok


class OpenAIChatGenerator:
    """Text generator behind an OpenAI-compatible endpoint (rewrite attacks, seed Figures 8-9).

    ``max_tokens`` caps the completion length (sent as the request's ``max_tokens``).
    """

    def __init__(self, base_url: str, model: str, *, max_tokens: int | None = 1024, **client_kwargs):
        params = dict(client_kwargs.pop("params", None) or {})
        if max_tokens is not None:
            params.setdefault("max_tokens", int(max_tokens))
        self.client = ChatClient(base_url, model, params=params, **client_kwargs)
        self.name = f"openai:{model}"

    def generate(self, messages: list[dict]) -> str:
        """The completion of one chat; raises :class:`ChatAPIError` after the retries."""
        return self.client.complete(messages)

    def generate_many(self, conversations: Sequence[list[dict]], *, progress: bool = False) -> list[str | Exception]:
        """One completion per chat, or the error its request ended with."""
        return self.client.complete_many(conversations, progress=progress, desc=f"generate ({self.name})")
