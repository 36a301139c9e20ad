"""Ctrl-C ends a command with one line ``interrupted`` on stderr and exit status 130.

No traceback, and no crash in the interpreter's teardown afterwards (JAX's threads made 2 of 7
interrupted audits end in a segmentation fault, status 139): the process ends at once. One Ctrl-C
is enough also where the first KeyboardInterrupt is swallowed (it landed in JAX's gc callback in
1 of 3 interrupted audits: the audit then ran to its end with status 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from puaudit_jax.cli import main
from puaudit_jax.cli.run_folder import LOCK

ROOT = Path(__file__).resolve().parents[2]
START_S, END_S = 240, 60  # bounds on the command reaching its encoding, then on it ending after Ctrl-C


def _drain(stream, sink: list[bytes]) -> None:
    for chunk in iter(lambda: stream.read1(1 << 16), b""):
        sink.append(chunk)


def _wait_until(ready, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.05)


def _ctrl_c_as_at_a_terminal() -> None:
    """In the child before exec: SIGINT's default action, as a command started at a terminal has.

    A shell starts background jobs (CI runners, ``cmd &``) with SIGINT ignored, and Python then
    leaves it ignored: the child would never see the Ctrl-C this test sends.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ctrl_c_once(argv: list[str], env: dict, marker: bytes) -> tuple[int, str]:
    """(exit status, stderr) of the process ``argv`` sent SIGINT once ``marker`` is on its stderr.

    The process ends within END_S after the signal, or is killed (also when an assertion fails).
    """
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=_ctrl_c_as_at_a_terminal)  # fmt: skip
    err: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(proc.stderr, err), daemon=True)
    reader.start()
    try:
        _wait_until(lambda: marker in b"".join(err) or proc.poll() is not None, START_S)
        assert proc.poll() is None, f"it ended before it was interrupted:\n{b''.join(err).decode()[-3000:]}"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=END_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=END_S)
        reader.join(timeout=END_S)
    return proc.returncode, b"".join(err).decode(errors="replace")


def _interrupted_audit(out: Path) -> tuple[int, str]:
    """(exit status, stderr) of `puaudit audit mtbench` sent SIGINT once it is encoding (no cache: minutes of work)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    argv = ["audit", "mtbench", "--out", str(out), "--no-cache", "--batch-size", "4", "--no-figures"]
    return _ctrl_c_once([sys.executable, "-m", "puaudit_jax.cli", *argv], env, b"encoding:")


@pytest.mark.parametrize("attempt", range(3))  # the teardown crash came in 2 of 7 tries
def test_ctrl_c_during_an_audit_is_one_line_and_status_130(tmp_path, attempt):
    code, err = _interrupted_audit(tmp_path / "out")
    assert code == 130, f"exit status {code}:\n{err[-3000:]}"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert err.splitlines()[-1] == "interrupted" and err.count("interrupted") == 1
    assert not (tmp_path / "out" / LOCK).exists()


SWALLOWING_AUDIT = """
import sys, time
import puaudit_jax.cli.inputs as cli
from puaudit_jax.cli.main import main

class Finalised:
    def __del__(self):  # a KeyboardInterrupt raised here is "ignored", as in JAX's gc callback
        print("loading", file=sys.stderr, flush=True)  # here: the Ctrl-C the test sends on it lands in __del__
        time.sleep(60)

def load_data(*_, **__):
    if sys.argv[2] == "finaliser":
        Finalised()
    else:
        try:  # as JAX's bare `except:` does with a KeyboardInterrupt raised inside it
            print("loading", file=sys.stderr, flush=True)
            time.sleep(60)
        except BaseException:
            pass
    print("swallowed", file=sys.stderr, flush=True)
    time.sleep(60)  # the command works on: only a second delivery ends it

cli.load_data = load_data
sys.argv[1:] = ["audit", "mtbench", "--out", sys.argv[1]]
main()
"""


@pytest.mark.parametrize("where", ["except", "finaliser"])
def test_a_swallowed_ctrl_c_is_delivered_again(tmp_path, where):
    """One Ctrl-C ends the program even where a library swallows the first KeyboardInterrupt.

    In a bare ``except:`` or a finaliser (JAX's gc callback): the interrupt comes again, and the
    swallowed one is not reported.
    """
    argv = [sys.executable, "-c", SWALLOWING_AUDIT, str(tmp_path / "out"), where]
    code, text = _ctrl_c_once(argv, {**os.environ, "PYTHONUNBUFFERED": "1"}, b"loading")
    assert code == 130, f"exit status {code}:\n{text[-3000:]}"
    assert text.splitlines() == ["loading", "swallowed", "interrupted"], text[-3000:]
    assert not (tmp_path / "out" / LOCK).exists()


def _main_interrupted(argv, monkeypatch) -> int:
    """The exit status of ``main(argv)`` when Ctrl-C comes while it loads DATA (in this process)."""
    import puaudit_jax.cli.inputs as cli

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "load_data", interrupted)
    try:
        main(argv)
    except SystemExit as exit_:
        return exit_.code
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped main()")
    pytest.fail("main() returned after Ctrl-C")


def test_ctrl_c_in_process_exits_130_and_leaves_the_caller_running(tmp_path, capsys, monkeypatch):
    """Called with arguments (not as the program), main raises SystemExit(130): the caller's process lives on."""
    handler = signal.getsignal(signal.SIGINT)
    assert _main_interrupted(["audit", "mtbench", "--out", str(tmp_path / "out"), "--quiet"], monkeypatch) == 130
    assert capsys.readouterr().err == "interrupted\n"
    assert not (tmp_path / "out" / LOCK).exists()  # the output folder's lock went while unwinding
    assert signal.getsignal(signal.SIGINT) is handler  # Ctrl-C still works here


def test_ctrl_c_with_debug_shows_the_traceback_then_the_line(tmp_path, capsys, monkeypatch):
    assert _main_interrupted(["audit", "mtbench", "--out", str(tmp_path / "out"), "--debug"], monkeypatch) == 130
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("KeyboardInterrupt\ninterrupted\n")
