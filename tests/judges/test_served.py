"""Judges against a real OpenAI-compatible server: llama.cpp's server (the ``serve`` extra) serving
the bundled SmolLM2-135M-Instruct GGUF on 127.0.0.1. Skipped where llama-cpp-python is not
installed (``make serve-install``; ``.ci/run`` installs it, so CI runs these)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

from puaudit_jax.judges import OpenAIChatJudge, OpenAILogprobJudge, judge_table
from puaudit_jax.judges.serve import LocalServer, ServeConfig, server_available

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(not server_available(), reason="llama.cpp's server is not installed (make serve-install)"),
]

N_CTX = 2048
PAIRS = [
    ("What is 2 + 2?", "2 + 2 = 4.", "2 + 2 = 5."),
    ("Name the capital of France.", "Paris.", "Berlin is the capital of France."),
    ("Translate 'cat' into Spanish.", "gato", "perro"),
    ("Is 7 a prime number?", "Yes, 7 is prime.", "No, 7 = 2 x 3.5."),
    ("What colour is the sky on a clear day?", "Blue.", "Green."),
    ("Spell 'house' backwards.", "esuoh", "house"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with LocalServer(ServeConfig(port=0, n_ctx=N_CTX, threads=2, log=str(log))) as srv:
        yield srv


@pytest.fixture(scope="module")
def local_judge():
    from puaudit_jax.judges.local import LocalJudge

    return LocalJudge("smollm2", cache_dir=False)


def _logprob_judge(srv, cache, **kw):
    kw = {"cache_dir": cache, "concurrency": 1, "max_retries": 1, "backoff": 0.05, "timeout": 60.0, **kw}
    return OpenAILogprobJudge(srv.base_url, srv.config.alias, **kw)


def test_logprob_verdicts_match_the_in_process_judge(server, local_judge, tmp_path):
    """Same weights, two runtimes: llama.cpp's Q4_1 kernels vs the dequantised Flax port. The
    letters' log-probabilities agree to a fraction of a nat on every order of every pair."""
    served = _logprob_judge(server, tmp_path).judge_many(PAIRS[:3])
    local = local_judge.judge_many(PAIRS[:3])
    for s, loc in zip(served, local):
        assert s.status == "ok" and s.details["bounded"] == {"ab": [], "ba": []}
        for key in ("logp_ab", "logp_ba"):
            diff = [abs(x - y) for x, y in zip(s.details[key], loc.details[key])]
            assert max(diff) < 0.35, (key, s.details[key], loc.details[key])


def test_text_verdicts_through_the_chat_endpoint(server, tmp_path):
    judge = OpenAIChatJudge(
        server.base_url, server.config.alias, cache_dir=tmp_path, params={"max_tokens": 48}, max_retries=0
    )
    got = judge.judge_many(PAIRS[:2])
    assert [v.status for v in got] != ["error", "error"]
    assert all(v.status in ("ok", "unparsed") and v.raw.strip() for v in got)  # the 135M model may skip [[X]]
    assert judge.client.stats["requests"] == 2 and len(list(tmp_path.rglob("*.json"))) == 2


def _short_and_long() -> pd.DataFrame:
    long = " ".join(["word"] * (2 * N_CTX))
    return pd.DataFrame(
        {
            "id": ["short-1", "long-1"],
            "question": [PAIRS[0][0], "Summarise this."],
            "response_a": [PAIRS[0][1], long],
            "response_b": [PAIRS[0][2], "Short."],
            "judge": ["A", "A"],
            "human": ["A", "B"],
        }
    )


def test_request_over_the_context_is_a_clear_error_with_the_pair_id(server, tmp_path):
    out = judge_table(_short_and_long(), _logprob_judge(server, tmp_path), progress=False)
    status = dict(zip(out.id, out.judge_status))
    assert status["short-1"] == "ok"
    assert status["long-1"].startswith("error: HTTP 400") and f"maximum context length is {N_CTX}" in status["long-1"]


def test_judge_cli_through_the_server_names_the_failed_pair(server, tmp_path, capsys):
    from puaudit_jax.cli import main
    from puaudit_jax.datasets import save_comparisons

    save_comparisons(_short_and_long(), tmp_path / "pairs.csv")
    args = ["judge", str(tmp_path / "pairs.csv"), "--judge", "openai", "--verdict", "logprob", "--quiet"]
    args += ["--base-url", server.base_url, "--model", server.config.alias, "--out", str(tmp_path / "out")]
    assert main([*args, "--cache-dir", str(tmp_path / "cache")]) == 1  # 1 of 2 failed: more than --max-failures
    err = capsys.readouterr().err
    assert "pair long-1: error: HTTP 400" in err and "rerun the same command to resume" in err
    assert err.strip().splitlines()[-1].startswith("error: 1 of 2 pairs failed (first error: HTTP 400")
    summary = json.loads((tmp_path / "out" / "judge.json").read_text())
    assert summary["status"] == {"ok": 1, "error": 1} and summary["errors"][0]["id"] == "long-1"


def test_server_killed_mid_run_then_the_rerun_resumes(tmp_path):
    """The server dies after two pairs: the batch ends with error verdicts (bounded time), what
    was answered stays cached, and against a restarted server the rerun asks only for the rest."""
    config = ServeConfig(port=0, n_ctx=N_CTX, threads=2, log=str(tmp_path / "server.log"))
    cache = tmp_path / "cache"
    with LocalServer(config) as srv:
        port = srv.port
        judge = _logprob_judge(srv, cache)

        def kill_after_two_pairs():
            deadline = time.monotonic() + 120
            while len(list(cache.rglob("*.json"))) < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
            os.killpg(srv.process.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_after_two_pairs, daemon=True)
        killer.start()
        t = time.perf_counter()
        first = judge.judge_many(PAIRS)
        killer.join(5)
        assert time.perf_counter() - t < 120
    done = [v for v in first if v.status == "ok"]
    failed = [v for v in first if v.status == "error"]
    assert len(done) >= 2 and failed and len(done) + len(failed) == len(PAIRS)
    assert all("cannot reach" in v.raw or "connection" in v.raw for v in failed)
    with LocalServer(ServeConfig(port=port, n_ctx=N_CTX, threads=2, log=config.log)) as srv:
        again = _logprob_judge(srv, cache)
        rerun = again.judge_many(PAIRS)
    assert all(v.status == "ok" for v in rerun)
    assert rerun[: len(done)] == done  # the cached verdicts, not new requests
    assert again.client.stats["cache_hits"] >= 2 * len(done)
    assert again.client.stats["requests"] == 2 * len(PAIRS) - again.client.stats["cache_hits"]


def test_serve_local_cli_starts_and_stops_cleanly(tmp_path):
    from puaudit_runtime.launch import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "puaudit_jax.cli", "serve-local", "--port", str(port), "--n-ctx", "512"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # a shell's background job inherits SIGINT ignored, and Python then keeps ignoring it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = proc.stdout.readline()
        assert f"on http://127.0.0.1:{port}/v1" in line, line
        assert LocalServer(ServeConfig(port=port)).ready()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(90) == 0  # bounded; 30 s was too short on one loaded core
        time.sleep(0.5)
        assert not LocalServer(ServeConfig(port=port)).ready()  # the server went with it
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_the_server_ends_when_the_process_that_started_it_is_killed(tmp_path):
    code = (
        "import sys, time\n"
        "from puaudit_jax.judges.serve import LocalServer, ServeConfig\n"
        "s = LocalServer(ServeConfig(port=0, n_ctx=512)).start()\n"
        "print(s.port, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        port = int(parent.stdout.readline())
        probe = LocalServer(ServeConfig(port=port))
        assert probe.ready()
        parent.kill()  # SIGKILL: no cleanup code runs in the parent
        parent.wait(10)
        deadline = time.monotonic() + 20
        while probe.ready() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not probe.ready()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_serve_config_refuses_a_non_loopback_host():
    with pytest.raises(ValueError, match="loopback"):
        ServeConfig(host="0.0.0.0")
