"""`puaudit judge` / `attack` when requests fail: no tie for a failed judgement, a non-zero exit when
too many failed (files written first), permanent errors not retried, options checked up front, and
the output folder locked with a manifest."""

from __future__ import annotations

import csv
import json
import os
import socket
import time

import pandas as pd
import pytest

from puaudit_jax.cli import CommandError, main
from puaudit_jax.datasets import load_comparisons, save_comparisons
from puaudit_jax.judges import ChatAPIError, ChatClient
from puaudit_runtime.launch import free_port
from tests.judges.chat_stub import chat_server, judge_blocks


def _pairs(n: int, fail: tuple[int, ...] = ()) -> pd.DataFrame:
    """n pairs; response_a of pair i holds GOOD, and FAIL where i is in ``fail`` (the stub then answers 500)."""
    rows = [
        dict(id=str(i), question=f"q{i}", response_a=f"a{i} GOOD" + (" FAIL" if i in fail else ""),
             response_b=f"b{i}", judge="B", human="A")
        for i in range(n)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _reply(user: str):
    a_block, b_block = judge_blocks(user)
    if "FAIL" in user:
        return 500, "the model crashed"
    return "ok\n[[A]]" if "GOOD" in a_block else "ok\n[[B]]"


@pytest.fixture()
def server():
    with chat_server(_reply) as url:
        yield url


def _judge_args(tmp_path, url: str, n: int = 5, fail=(), out: str = "out", *extra) -> list[str]:
    save_comparisons(_pairs(n, fail), tmp_path / "pairs.csv")
    return ["judge", str(tmp_path / "pairs.csv"), "--judge", "openai", "--base-url", url, "--model", "stub",
            "--quiet", "--max-retries", "0", "--timeout", "5", "--single-order", "--cache-dir",
            str(tmp_path / "cache"), "--out", str(tmp_path / out), *extra]  # fmt: skip


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there


# --------------------------------------------------------------------------------------------------
# failed judgements


def test_judge_against_an_unreachable_server_exits_1_with_missing_verdicts(tmp_path, capsys):
    assert main(_judge_args(tmp_path, _dead_url(), n=4)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: 4 of 4 pairs failed (first error: cannot reach http://127.0.0.1:")
    with open(tmp_path / "out" / "comparisons.csv", newline="") as fh:  # written first: nothing lost
        written = list(csv.DictReader(fh))
    assert [r["judge"] for r in written] == ["missing"] * 4  # never a tie
    assert all(r["judge_status"].startswith("error: ") for r in written)
    assert [r["judge_original"] for r in written] == ["B"] * 4
    report = json.loads((tmp_path / "out" / "judge.json").read_text())
    assert report["status"] == {"error": 4} and len(report["errors"]) == 4
    # quantify does not read the failures as ties (A share 0.50 [0.50, 0.50]): no verdict, no estimate
    with pytest.raises(CommandError):
        main(["quantify", str(tmp_path / "out" / "comparisons.csv"), "--out", str(tmp_path / "q"), "--no-figures"])
    assert "none of the 4 rows has a judge verdict" in capsys.readouterr().err


def test_failed_swapped_order_requests_are_counted_reported_and_fail_the_run(tmp_path, capsys):
    """Issue 40: every swapped-order request failed, judge_swapped was missing on every row, and the run
    exited 0 with no error in judge.json."""

    def reply(user):
        return (500, "the model crashed") if "GOOD" in judge_blocks(user)[1] else "ok\n[[A]]"  # swapped: GOOD in B

    with chat_server(reply) as url:
        args = [a for a in _judge_args(tmp_path, url, n=4) if a != "--single-order"]
        assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: 4 of 4 pairs failed (first error: HTTP 500") and "the model crashed" in err[-1]
    written = load_comparisons(tmp_path / "out" / "comparisons.csv")
    assert (written["judge"] == "A").all() and (written["judge_swapped"] == "missing").all()
    assert written["judge_swapped_status"].str.startswith("error: ").all()
    report = json.loads((tmp_path / "out" / "judge.json").read_text())
    assert [e["order"] for e in report["errors"]] == ["swapped"] * 4


def test_the_failure_count_counts_orders_and_pairs_apart(tmp_path, capsys):
    """Issue 40 (new case): 3 pairs failing in both orders printed "6 pairs failed (1 more in judge.json)
    (judge = missing)" beside "error: 3 of 3 pairs failed"."""
    args = [a for a in _judge_args(tmp_path, _dead_url(), n=3) if a != "--single-order"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "6 judgements failed (1 more in judge.json), on 3 pairs (each order counts" in err
    assert err.strip().splitlines()[-1].startswith("error: 3 of 3 pairs failed")


def test_a_run_where_no_pair_gets_a_verdict_exits_1_and_says_why(tmp_path, capsys):
    """Issue 40: replies without a verdict on every pair exited 0 with nothing on stderr."""
    with chat_server(lambda user: "Both answers have merit; I cannot decide.") as url:
        assert main(_judge_args(tmp_path, url, n=3)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "error: no pair got a verdict: 3 of 3 replies had none (first: no verdict in the last lines)"
    assert (load_comparisons(tmp_path / "out" / "comparisons.csv")["judge"] == "missing").all()


def test_logprob_judge_against_an_unreachable_server_exits_1(tmp_path, capsys):
    args = _judge_args(tmp_path, _dead_url(), 3, (), "out", "--verdict", "logprob")
    assert main(args) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: 3 of 3 pairs failed (first error: ")
    assert list(pd.read_csv(tmp_path / "out" / "comparisons.csv").judge) == ["missing"] * 3


def test_failures_up_to_max_failures_exit_0_more_exit_1(tmp_path, server, capsys):
    assert main(_judge_args(tmp_path, server, 5, (3,))) == 0  # 1 of 5 = 0.2: not more than the default
    err = capsys.readouterr().err
    assert "pair 3: error: HTTP 500" in err and "error: " not in err.splitlines()[-1]
    rows = pd.read_csv(tmp_path / "out" / "comparisons.csv", dtype=str, keep_default_na=False)
    assert list(rows.judge) == ["A", "A", "A", "missing", "A"]
    assert rows.judge_status[3].startswith("error: HTTP 500") and "the model crashed" in rows.judge_status[3]

    assert main(_judge_args(tmp_path, server, 5, (3,), "strict", "--max-failures", "0")) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: 1 of 5 pairs failed (first error: HTTP 500 from {server}/chat/completions: the model crashed)"
    )
    assert main(_judge_args(tmp_path, server, 5, (1, 3), "two")) == 1  # 2 of 5 > 0.2
    assert (tmp_path / "two" / "comparisons.csv").exists()


def test_attack_against_an_unreachable_server_exits_1(tmp_path, capsys):
    args = _judge_args(tmp_path, _dead_url(), n=3, out="att")
    args[0:1] = ["attack"]
    assert main([*args, "--attack", "distraction"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: 3 of 3 pairs failed (first error: cannot reach")
    attacked = pd.read_csv(tmp_path / "att" / "attacked.csv")
    assert attacked.original_status.str.startswith("error").all()
    assert list(pd.read_csv(tmp_path / "att" / "comparisons.csv").judge) == ["missing"] * 3


def test_rows_without_a_judge_verdict_round_trip_and_are_excluded_and_counted(tmp_path):
    from puaudit_jax.datasets.exclusions import item_status
    from puaudit_jax.quantify.pipeline import quantify

    table = pd.DataFrame(
        dict(id=["1", "2", "3", "4"], question=[["turn 1", "turn 2"], "q, \"quoted\"", "q", "q4"],
             response_a=["line\nbreak", "a\r", "42", "y"], response_b=["b", "", "x", "z"],
             judge=["A", "missing", "tie", "B"], human=["A", "B", "missing", "A"], history_a=[["h"], None, None, None],
             history_b=[["g"], None, None, None],
             judge_status=["ok", "error: HTTP 500, again", "ok", "ok"])
    )  # fmt: skip
    save_comparisons(table, tmp_path / "judged.csv")
    back = load_comparisons(tmp_path / "judged.csv")
    assert list(back.judge) == ["A", "missing", "tie", "B"]  # never read as a tie
    assert item_status(back).set_index("id").loc["2", "reason"].endswith("no judge verdict")
    result = quantify(back, style=())
    assert result.no_judge_verdict == 1 and "1 rows without a judge verdict" in result.warnings[0]
    share = next(
        r.estimate for r in result.rows if r.target == "share of A wins" and r.estimate.estimator == "judge only"
    )
    assert share.n_labelled + share.n_unlabelled == 3
    with pytest.raises(ValueError, match="verdict is missing"):  # a blank judge cell is still an error
        load_comparisons_text(tmp_path / "blank.csv", "id,question,response_a,response_b,judge\n1,q,a,b,\n")


def load_comparisons_text(path, text: str):
    path.write_text(text)
    return load_comparisons(path)


# --------------------------------------------------------------------------------------------------
# the base URL and permanent errors


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "localhost:8000/v1", "ftp://127.0.0.1/v1", "http:///v1"])
def test_a_base_url_without_http_or_host_is_refused_up_front(tmp_path, url, capsys):
    with pytest.raises(ValueError, match="base_url .*http:// or https://"):
        ChatClient(url, "m", cache_dir=False)
    with pytest.raises(CommandError) as err:
        main(_judge_args(tmp_path, url))
    assert err.value.code == 2 and "error: --base-url" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything is written
    args = _judge_args(tmp_path, _dead_url(), out="att")
    args[0:1] = ["attack"]
    with pytest.raises(CommandError):
        main([*args, "--attack", "length", "--generator", "openai", "--gen-base-url", url])
    assert "error: --gen-base-url" in capsys.readouterr().err


def test_an_api_key_variable_that_is_not_set_is_refused_up_front(tmp_path, capsys, monkeypatch):
    """Before: --api-key-env naming an unset variable was accepted and the requests went without a key."""
    monkeypatch.delenv("PUAUDIT_TEST_KEY", raising=False)
    with pytest.raises(CommandError) as err:
        main(_judge_args(tmp_path, _dead_url(), 5, (), "out", "--api-key-env", "PUAUDIT_TEST_KEY"))
    assert err.value.code == 2 and "--api-key-env PUAUDIT_TEST_KEY: that environment variable is not set" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()


def test_a_url_urllib_cannot_open_is_not_retried(tmp_path):
    sleeps = []
    client = ChatClient(_dead_url(), "m", cache_dir=False, max_retries=4, backoff=0.01, sleep=sleeps.append)
    client.url = "nope://127.0.0.1/v1/chat/completions"  # past the check: the client still does not retry
    with pytest.raises(ChatAPIError, match="cannot open.*unknown url type") as err:
        client.complete([{"role": "user", "content": "hi"}])
    assert sleeps == [] and client.stats["requests"] == 1 and "attempts" not in str(err.value)
    with pytest.raises(ChatAPIError, match="not sent"):  # permanent: the later requests are not sent
        client.complete([{"role": "user", "content": "again"}])


def test_a_4xx_is_not_retried_but_408_is(tmp_path):
    calls = []

    def reply(user):
        calls.append(user)
        if "timeout" in user:
            return (408, "request timeout") if len(calls) == 1 else "ok\n[[A]]"
        return 422, "bad field"

    with chat_server(reply) as url:
        client = ChatClient(url, "m", cache_dir=False, max_retries=3, backoff=0.01, sleep=lambda s: None)
        assert client.complete([{"role": "user", "content": "timeout"}]).endswith("[[A]]")
        assert len(calls) == 2
        with pytest.raises(ChatAPIError, match="HTTP 422.*bad field"):
            client.complete([{"role": "user", "content": "x"}])
        assert len(calls) == 3


# --------------------------------------------------------------------------------------------------
# options


@pytest.mark.parametrize(
    "option, value",
    [("--limit", "-1"), ("--limit", "0"), ("--limit", "x"), ("--timeout", "0"), ("--timeout", "-1"),
     ("--timeout", "nan"), ("--concurrency", "0"), ("--max-retries", "-1"), ("--max-failures", "1.5"),
     ("--max-failures", "-0.1"), ("--top-logprobs", "0"), ("--max-length", "0")],
)  # fmt: skip
def test_bad_numeric_options_are_refused_naming_the_option(tmp_path, option, value, capsys):
    args = _judge_args(tmp_path, _dead_url())
    with pytest.raises(SystemExit) as err:
        main([*args, option, value])
    assert err.value.code == 2 and f"argument {option}: must be" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_limit_judges_exactly_the_first_rows(tmp_path, server):
    assert main(_judge_args(tmp_path, server, 5, (), "out", "--limit", "2")) == 0
    assert list(load_comparisons(tmp_path / "out" / "comparisons.csv").id) == ["0", "1"]


@pytest.mark.parametrize(
    "kw, name",
    [({"timeout": 0}, "timeout"), ({"timeout": -1.0}, "timeout"), ({"concurrency": 0}, "concurrency"),
     ({"max_retries": -1}, "max_retries"), ({"max_retries": 1.5}, "max_retries")],
)  # fmt: skip
def test_client_settings_are_checked_in_the_python_api(kw, name):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        ChatClient("http://127.0.0.1:9/v1", "m", cache_dir=False, **kw)


# --------------------------------------------------------------------------------------------------
# the output folder


def test_judge_writes_a_manifest_and_refuses_a_folder_another_run_writes(tmp_path, server, capsys):
    assert main(_judge_args(tmp_path, server, 3)) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [f["name"] for f in manifest["files"]] == ["comparisons.csv", "judge.json"]
    assert manifest["command"][:2] == ["puaudit", "judge"] and not (tmp_path / "out" / ".puaudit.lock").exists()

    lock = {"host": socket.gethostname(), "pid": os.getpid(), "command": ["puaudit", "judge"], "started": "now"}
    (tmp_path / "out" / ".puaudit.lock").write_text(json.dumps(lock))  # a live writer
    before = (tmp_path / "out" / "comparisons.csv").stat().st_mtime_ns
    time.sleep(0.01)
    with pytest.raises(CommandError):
        main(_judge_args(tmp_path, server, 3))
    assert "is being written by another run" in capsys.readouterr().err
    assert (tmp_path / "out" / "comparisons.csv").stat().st_mtime_ns == before


def test_attack_writes_a_manifest(tmp_path, server):
    args = _judge_args(tmp_path, server, 3, (), "att")
    args[0:1] = ["attack"]
    assert main([*args, "--attack", "distraction"]) == 0
    manifest = json.loads((tmp_path / "att" / "manifest.json").read_text())
    assert [f["name"] for f in manifest["files"]] == ["attacked.csv", "comparisons.csv", "attack.json"]
