"""puaudit_runtime.launch: fresh interpreters with forced devices, and clusters that end by themselves."""

from __future__ import annotations

import os
import socket
import time

import pytest

from puaudit_runtime import launch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_forced_devices_env_replaces_only_the_device_count(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_foo=1 --xla_force_host_platform_device_count=2")
    env = launch.forced_devices_env(5, {"A": "1"}, path="/some/where")
    assert env["XLA_FLAGS"].split() == ["--xla_cpu_foo=1", "--xla_force_host_platform_device_count=5"]
    assert env["A"] == "1" and env["PYTHONPATH"].startswith("/some/where" + os.pathsep)
    assert os.environ["XLA_FLAGS"].endswith("=2")  # the caller's environment is left alone


def test_free_port_can_be_bound():
    port = launch.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_child_sees_its_forced_devices_and_reports_a_result():
    done = launch.run_python(["-c", "import jax, numpy as np\nemit({'n': jax.device_count(), 'a': np.arange(3)})"],
                             devices=3, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.ok and done.result == {"n": 3, "a": [0, 1, 2]}
    assert done.peak_rss_mb > 10 and 0 < done.wall_s < 120


def test_a_failing_child_is_reported_not_raised():
    done = launch.run_python(["-c", "import sys\nprint('partial output')\nsys.exit(3)"], timeout=60)
    assert not done.ok and done.returncode == 3 and not done.timed_out
    assert done.result is None and "partial output" in done.tail()


def test_a_child_past_its_limit_is_killed():
    t0 = time.monotonic()
    done = launch.run_python(["-c", "import time\ntime.sleep(60)"], timeout=2)
    assert done.timed_out and not done.ok and time.monotonic() - t0 < 20


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform (macOS, Windows)")
def test_a_pinned_child_runs_on_its_cores():
    core = min(os.sched_getaffinity(0))
    done = launch.run_python(["-c", "import os\nemit(sorted(os.sched_getaffinity(0)))"], cores=[core], timeout=60)
    assert done.result == [core]


def test_a_cluster_is_killed_when_one_process_fails(tmp_path):
    """Process 1 exits with 3 while process 0 would sleep a minute: both are gone within seconds,
    each process saw the cluster's environment, and the output of both is kept."""
    code = (
        "import os, sys, time\n"
        "rank = int(os.environ['PUAUDIT_PROCESS_ID'])\n"
        "env = os.environ\n"
        "print('rank', rank, 'of', env['PUAUDIT_NUM_PROCESSES'], env['PUAUDIT_COORDINATOR'], flush=True)\n"
        "time.sleep(0.5) if rank else time.sleep(60)\n"
        "sys.exit(3)\n"
    )
    t0 = time.monotonic()
    why, done = launch.run_cluster(["-c", code], 2, 1, timeout=120, log_dir=tmp_path)
    assert why == "process 1 exited with 3" and time.monotonic() - t0 < 30
    assert done[1].returncode == 3 and done[0].returncode != 0
    assert "rank 0 of 2 127.0.0.1:" in done[0].output and "rank 1 of 2" in done[1].output


def test_a_cluster_that_finishes_reports_every_result():
    code = "import os\nemit(int(os.environ['PUAUDIT_PROCESS_ID']))"
    why, done = launch.run_cluster(["-c", code], 3, 1, timeout=120)
    assert why is None and [d.result for d in done] == [0, 1, 2] and all(d.ok for d in done)
