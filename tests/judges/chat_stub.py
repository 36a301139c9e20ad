"""OpenAI-compatible endpoints on 127.0.0.1 that the judge tests share (each ends with its test).

- :func:`chat_server`: ``/v1/chat/completions`` whose replies a function writes.
- :func:`scripted_server`: a misbehaving server whose behaviour a line ``SCRIPT <name>`` of the last
  user message (or prompt) chooses: ``ok``, ``flaky`` (two 500s), ``ratelimit`` (429 + Retry-After),
  ``slow``, ``malformed`` (not JSON), ``empty`` (null content), ``badrequest`` (400), ``always500``;
  on ``/v1/completions`` the logprob modes ``lp_none`` (no A or B token), ``lp_nan``, ``lp_neginf``,
  ``lp_empty``, ``lp_no_b``. conftest.py serves it as the ``stub_server`` fixture.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def judge_blocks(user: str) -> tuple[str, str]:
    """The two responses of a paper's judge prompt (the text after ``[Assistant A]`` and ``[Assistant B]``)."""
    return user.split("[Assistant A]")[1].split("[Assistant B]")[0], user.split("[Assistant B]")[1]


@contextmanager
def chat_server(reply: Callable[[str], str | tuple[int, str]]):
    """Serve ``/v1/chat/completions``: ``reply(last user message)`` is the assistant's text; yields the base URL.

    A reply ``(status, message)`` is an HTTP error with that status and an OpenAI-style error body.
    """

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            content, status = reply(body["messages"][-1]["content"]), 200
            if isinstance(content, tuple):
                status, message = content
                data = json.dumps({"error": {"message": message}}).encode()
            else:
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


class Stub:
    def __init__(self):
        self.calls: dict[str, int] = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()


def _handler(stub: Stub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, code, body, headers=None):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with stub.lock:
                stub.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                content = body["prompt"] if "prompt" in body else body["messages"][-1]["content"]
                script = next((ln[7:].strip() for ln in content.splitlines() if ln.startswith("SCRIPT ")), "ok")
                n = stub.calls[script] = stub.calls.get(script, 0) + 1
            if self.path == "/v1/completions":
                return self._send(200, _next_token(content, script))
            if self.path != "/v1/chat/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def completion(text):
                return {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                }

            if script == "ok":
                return self._send(200, completion("B is better.\n[[B]]\n[[TYPE:C]]"))
            if script == "flaky":  # two 500s then success
                if n <= 2:
                    return self._send(500, {"error": {"message": "internal"}})
                return self._send(200, completion("[[A]]\n[[TYPE:A]]"))
            if script == "ratelimit":  # 429 with Retry-After, then success
                if n == 1:
                    return self._send(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.2"})
                return self._send(200, completion("[[C]]\n[[TYPE:F]]"))
            if script == "slow":
                time.sleep(1.0)
                return self._send(200, completion("[[A]]"))
            if script == "malformed":
                return self._send(200, b"{not json")
            if script == "empty":
                return self._send(200, completion(None))
            if script == "badrequest":
                return self._send(400, {"error": {"message": "model 'nope' does not exist", "type": "invalid"}})
            if script == "always500":
                return self._send(503, {"error": {"message": "overloaded"}})
            return self._send(200, completion(f"echo {script}"))

    return Handler


def _next_token(prompt: str, script: str) -> dict:
    """A legacy completions answer with one position's top_logprobs: the response holding "GOOD"
    gets its letter 1 nat above the other's, whatever the order it is shown in."""
    if script == "lp_none":
        top = {"C": -0.1, "X": -3.0}
    elif script == "lp_nan":
        top = {"A": float("nan"), "B": float("nan"), "C": -1.0}
    elif script == "lp_neginf":
        top = {"A": float("-inf"), "B": float("-inf"), "C": -0.1}
    elif script == "lp_empty":
        top = {}
    elif script == "lp_no_b":
        top = {"A": -0.2, "C": -1.0, " A": -2.5}
    else:
        first = "A" if prompt.index("GOOD") < prompt.index("BAD") else "B"
        top = {first: -0.4, {"A": "B", "B": "A"}[first]: -1.4, "C": -2.0, " A": -3.0}
    logprobs = {"tokens": ["A"], "token_logprobs": [-0.4], "top_logprobs": [top], "text_offset": [0]}
    return {"object": "text_completion", "choices": [{"index": 0, "text": "A", "logprobs": logprobs}]}


@contextmanager
def scripted_server():
    """Serve :class:`Stub`'s scripted modes on 127.0.0.1 (a free port); yields the stub (``base_url``,
    ``calls`` per script, ``requests``). The server shuts down when the block ends, also on failure."""
    stub = Stub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stub.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
