"""A minimal OpenAI-compatible chat endpoint on 127.0.0.1 for tests: a function writes each reply."""

from __future__ import annotations

import json
import threading
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
