"""puaudit_runtime.cluster: a cluster that cannot form ends every process with one line, no traceback.

Real ``puaudit audit`` processes on 127.0.0.1 with a 6 s cluster timeout (the command joins the
cluster before it reads its data, so the data is never loaded): a worker whose coordinator never
answers, process 0 whose peers never come (it used to abort natively: SIGABRT, a C++ stack), and a
cluster of 3 with one process missing. The rendezvous itself is also run in threads.
"""

from __future__ import annotations

import functools
import socket
import threading

import pytest

from puaudit_runtime import launch
from puaudit_runtime.cluster import ClusterConfig, ClusterError, _rendezvous

from .test_launch import ROOT

TIMEOUT_S = 6


def _audit_process(coordinator: str, n: int, rank: int, out) -> launch.Finished:
    env = {
        "PUAUDIT_COORDINATOR": coordinator,
        "PUAUDIT_NUM_PROCESSES": str(n),
        "PUAUDIT_PROCESS_ID": str(rank),
        "PUAUDIT_CLUSTER_TIMEOUT": str(TIMEOUT_S),
        "JAX_PLATFORMS": "cpu",
        "OMP_NUM_THREADS": "1",
    }
    args = ["-m", "puaudit_jax.cli", "audit", "mtbench", "--out", str(out)]
    return launch.run_python(args, env=env, cwd=ROOT, timeout=150)


def _one_line_error(done: launch.Finished, coordinator: str) -> str:
    """The process ended by itself with status 2 and one ``error:`` line naming the coordinator."""
    assert not done.timed_out and done.returncode == 2, done.output
    assert "Traceback" not in done.output and "Check failure" not in done.output, done.output
    errors = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors == done.output.strip().splitlines()[-1:], done.output
    assert coordinator in errors[0] and f"{TIMEOUT_S} s" in errors[0]
    return errors[0]


def test_a_worker_whose_coordinator_never_answers_ends_with_one_line(tmp_path):
    coordinator = f"127.0.0.1:{launch.free_port()}"
    line = _one_line_error(_audit_process(coordinator, 2, 1, tmp_path / "out"), coordinator)
    assert "did not answer" in line and "is process 0 running" in line


def test_process_0_without_its_peers_ends_with_one_line_not_an_abort(tmp_path):
    coordinator = f"127.0.0.1:{launch.free_port()}"
    line = _one_line_error(_audit_process(coordinator, 2, 0, tmp_path / "out"), coordinator)
    assert "process id(s) [1] did not" in line and "are the other 1 processes started" in line


def test_a_cluster_with_a_missing_process_ends_every_process_with_one_line(tmp_path):
    coordinator = f"127.0.0.1:{launch.free_port()}"
    host, worker = _concurrently(
        [functools.partial(_audit_process, coordinator, 3, rank, tmp_path / f"out{rank}") for rank in (0, 1)]
    )
    for run in (host, worker):  # a launch that failed: its own traceback, not an AttributeError below
        if isinstance(run, BaseException):
            raise run
    assert "process id(s) [2] did not" in _one_line_error(host, coordinator)
    assert "are all 3 processes started" in _one_line_error(worker, coordinator)


def _concurrently(calls: list) -> list:
    """Run each call in its own thread; what each returned, or the exception it raised.

    Threads are started one at a time, each once the previous one runs: under line coverage on
    Python 3.11, two threads that start together can make one fail before its target runs ("Cannot
    install a trace function while another trace function is being installed", CPython issue 98257),
    and a cluster missing that process then times out (a CI failure of this file).
    """
    results: list = [RuntimeError("the thread never ran")] * len(calls)

    def run(i, started):
        started.set()
        try:
            results[i] = calls[i]()
        except BaseException as err:  # noqa: BLE001 - reported to the test
            results[i] = err

    threads = []
    for i in range(len(calls)):
        started = threading.Event()
        threads.append(threading.Thread(target=run, args=(i, started), daemon=True))
        threads[-1].start()
        assert started.wait(30), f"thread {i} did not start"
    for t in threads:
        t.join(170)
    assert not any(t.is_alive() for t in threads)
    return results


def _meet(configs: list[ClusterConfig]) -> list[BaseException | None]:
    """Run the rendezvous of each config in a thread; what each raised (None: it passed)."""
    return _concurrently([functools.partial(_rendezvous, c) for c in configs])


def test_the_rendezvous_lets_a_complete_cluster_go_and_frees_the_port():
    coordinator = f"127.0.0.1:{launch.free_port()}"
    configs = [ClusterConfig(coordinator, 3, rank, timeout_s=20) for rank in (2, 1, 0)]  # workers first
    assert _meet(configs) == [None, None, None]
    with socket.create_server(("127.0.0.1", int(coordinator.rsplit(":", 1)[1]))):  # JAX's service can bind it
        pass


def test_a_worker_told_another_cluster_size_is_named():
    coordinator = f"127.0.0.1:{launch.free_port()}"
    errors = _meet([ClusterConfig(coordinator, 2, 0, timeout_s=3), ClusterConfig(coordinator, 3, 1, timeout_s=3)])
    assert isinstance(errors[0], ClusterError) and "process id(s) [1] did not" in str(errors[0])
    assert isinstance(errors[1], ClusterError)
    with pytest.raises(ClusterError, match=r"runs 2 processes, this process \(process 1\) was told 3"):
        raise errors[1]
