"""Fixtures of the judge tests: the scripted misbehaving server (tests/judges/chat_stub.py)."""

from __future__ import annotations

import pytest

from tests.judges.chat_stub import scripted_server


@pytest.fixture()
def stub_server():
    """The scripted OpenAI-compatible server on 127.0.0.1 for one test (its modes: chat_stub.py)."""
    with scripted_server() as stub:
        yield stub
