"""Multi-process clusters: how this process joins a ``jax.distributed`` cluster.

Entry points::

    ClusterConfig / initialize_cluster(...)  coordinator address, process count and id from
        arguments or the environment (PUAUDIT_COORDINATOR, PUAUDIT_NUM_PROCESSES,
        PUAUDIT_PROCESS_ID, PUAUDIT_CLUSTER_TIMEOUT), else JAX's own SLURM / TPU / MPI detection;
        gloo collectives on CPU; a bounded rendezvous of all the processes at the coordinator's port
        before JAX's own join, so a missing process is a one-line ClusterError, not a native abort.
    process_rows(n) -> the (start, stop) rows of an n-row corpus this process loads.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time

import jax

__all__ = ["ClusterConfig", "ClusterError", "initialize_cluster", "process_rows"]


def process_rows(n: int, process_index: int | None = None, process_count: int | None = None) -> tuple[int, int]:
    """Rows [start, stop) of an n-row corpus that process ``process_index`` of ``process_count`` loads.

    Contiguous, as even as possible (the first n % count processes get one more row).

    Args:
        n: rows in the corpus.
        process_index: this process's rank (None: ``jax.process_index()``).
        process_count: processes in the cluster (None: ``jax.process_count()``).

    Returns:
        (start, stop), row indices with ``0 <= start <= stop <= n``.
    """
    i = jax.process_index() if process_index is None else int(process_index)
    k = jax.process_count() if process_count is None else int(process_count)
    base, extra = divmod(int(n), k)
    start = i * base + min(i, extra)
    return start, start + base + (i < extra)


_ENV = dict(
    coordinator="PUAUDIT_COORDINATOR",
    num_processes="PUAUDIT_NUM_PROCESSES",
    process_id="PUAUDIT_PROCESS_ID",
    timeout_s="PUAUDIT_CLUSTER_TIMEOUT",
)


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """How this process joins a ``jax.distributed`` cluster.

    Attributes:
      coordinator: "host:port" of process 0's coordination service; None = auto-detection
        (SLURM, TPU pods, Open MPI: JAX's ``cluster_detection_method``) or no cluster.
      num_processes, process_id: the cluster's size and this process's rank (0-based).
      timeout_s: how long to wait for the coordinator and the other processes (seconds).
      cpu_collectives: the CPU cross-process collectives ("gloo"; "mpi" where built).
      local_device_ids: restrict this process to these local devices (GPU nodes: one process
        per GPU), or None for all of them.
    """

    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    timeout_s: int = 120
    cpu_collectives: str = "gloo"
    local_device_ids: tuple[int, ...] | None = None

    @classmethod
    def from_env(cls, **overrides) -> ClusterConfig:
        """The config of the environment's PUAUDIT_* variables, then the non-None ``overrides``.

        Fields from PUAUDIT_COORDINATOR / PUAUDIT_NUM_PROCESSES / PUAUDIT_PROCESS_ID /
        PUAUDIT_CLUSTER_TIMEOUT, then the non-None ``overrides`` (command-line flags win over the
        environment).
        """
        env = {}
        for field, var in _ENV.items():
            raw = os.environ.get(var)
            if raw is None or raw == "":
                continue
            if field == "coordinator":
                env[field] = raw
            else:
                try:
                    env[field] = int(raw)
                except ValueError:
                    raise ValueError(f"{var}={raw!r} is not an integer") from None
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**env)

    def validate(self) -> None:
        """Raise ValueError naming the field when the settings are malformed or incomplete."""
        if self.coordinator is not None:
            host, sep, port = self.coordinator.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"coordinator must be 'host:port'; got {self.coordinator!r}")
        given = [self.coordinator is not None, self.num_processes is not None, self.process_id is not None]
        if any(given) and not all(given):
            raise ValueError(
                "a cluster needs all three of coordinator, num_processes and process_id "
                f"(got coordinator={self.coordinator!r}, num_processes={self.num_processes!r}, "
                f"process_id={self.process_id!r}); give none to let JAX detect SLURM / TPU"
            )
        if self.num_processes is not None and self.num_processes < 1:
            raise ValueError(f"num_processes must be >= 1; got {self.num_processes}")
        if self.process_id is not None and not 0 <= self.process_id < self.num_processes:
            raise ValueError(f"process_id must lie in [0, num_processes={self.num_processes}); got {self.process_id}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive; got {self.timeout_s!r}")


class ClusterError(ValueError):
    """This process could not join the cluster.

    Its message is one line naming the coordinator, the timeout and what to check. A ValueError, so
    the command line prints it as ``error: ...`` (exit status 2), without a traceback.
    """


def initialize_cluster(config: ClusterConfig | None = None, *, auto_detect: bool = False) -> bool:
    """Join a ``jax.distributed`` cluster; call before any other JAX call in the process.

    With ``config.coordinator`` set, the explicit three settings are used, and the processes first
    meet at the coordinator's port (:func:`_rendezvous`: process 0 listens there until the other
    ``num_processes - 1`` have said hello, then lets them all go and starts JAX's coordination
    service on that port). Each process waits at most ``config.timeout_s`` seconds; a process that
    is missing then is a :class:`ClusterError` in every process, not XLA's native abort (which is
    what ``jax.distributed.initialize`` does when a process never arrives: SIGABRT and a C++ stack).
    Otherwise, with ``auto_detect``, JAX's own detection runs (SLURM, TPU pods, Open MPI); else
    nothing happens. On CPU the cross-process collectives are set to ``config.cpu_collectives``.
    Returns whether a cluster of more than one process was joined.

    Raises:
      ValueError for inconsistent settings; :class:`ClusterError` (a ValueError, one line naming
      the coordinator, the timeout and what to check) when the coordinator does not answer, the
      other processes do not all arrive within ``config.timeout_s``, or JAX's own join fails.
    """
    config = config or ClusterConfig.from_env()
    config.validate()
    if config.coordinator is None and not auto_detect:
        return False
    if config.num_processes == 1:
        return False
    jax.config.update("jax_cpu_collectives_implementation", config.cpu_collectives)
    kwargs = dict(
        initialization_timeout=int(config.timeout_s),
        heartbeat_timeout_seconds=max(10, int(config.timeout_s)),
        shutdown_timeout_seconds=max(10, int(config.timeout_s)),
    )
    if config.local_device_ids is not None:
        kwargs["local_device_ids"] = list(config.local_device_ids)
    print(
        f"[puaudit] joining the cluster at {config.coordinator or '(auto-detected)'} as process "
        f"{config.process_id} of {config.num_processes} (timeout {config.timeout_s} s)",
        flush=True,
    )
    if config.coordinator is not None:
        _rendezvous(config)
    try:
        if config.coordinator is not None:
            jax.distributed.initialize(config.coordinator, config.num_processes, config.process_id, **kwargs)
        else:
            jax.distributed.initialize(**kwargs)
    except Exception as err:  # JAX raises XlaRuntimeError / RuntimeError / ValueError here
        where = config.coordinator or "auto-detected coordinator"
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ClusterError(
            f"could not join the cluster at {where} as process {config.process_id} of "
            f"{config.num_processes} within {config.timeout_s} s ({first}): are all "
            f"{config.num_processes or 'the'} processes started with the same coordinator?"
        ) from err
    return jax.process_count() > 1


# ---------------------------------------------------------------------------------------------
# rendezvous: every process is known to be there before JAX's coordination service starts

_HELLO = "puaudit-cluster"
_GO = "go"
_POLL_S = 0.2


def _rendezvous(config: ClusterConfig) -> None:
    """Meet the other processes at the coordinator's port, at most ``config.timeout_s`` seconds.

    Protocol (one TCP connection per worker, lines of text): the worker sends
    ``"puaudit-cluster <process_id> <num_processes>"``; process 0 answers ``"go"`` once all
    ``num_processes - 1`` workers have said hello (or ``"mismatch <num_processes>"``), and closes
    its listener before starting JAX's service on the same port.

    Raises:
      ClusterError: naming the coordinator, the timeout and what to check.
    """
    deadline = time.monotonic() + config.timeout_s
    if config.process_id == 0:
        _host_rendezvous(config, deadline)
    else:
        _join_rendezvous(config, deadline)


def _address(config: ClusterConfig) -> tuple[str, int]:
    host, _, port = config.coordinator.rpartition(":")
    return host.strip("[]"), int(port)


def _read_line(conn: socket.socket, deadline: float) -> str | None:
    """The next text line from ``conn`` before ``deadline`` (monotonic s), or None (EOF, timeout, error)."""
    data = b""
    try:
        while b"\n" not in data and len(data) < 256:
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = conn.recv(256)
            if not chunk:
                return None
            data += chunk
    except OSError:
        return None
    return data.split(b"\n", 1)[0].decode(errors="replace").strip()


def _join_rendezvous(config: ClusterConfig, deadline: float) -> None:
    """A worker: say hello to process 0 and wait for its "go" (reconnecting until ``deadline``)."""
    host, port = _address(config)
    hello = f"{_HELLO} {config.process_id} {config.num_processes}\n".encode()
    answered = False
    while time.monotonic() < deadline:
        reply = None
        try:
            with socket.create_connection((host, port), timeout=1.0) as conn:
                answered = True
                conn.sendall(hello)
                reply = _read_line(conn, deadline)
        except OSError:
            pass
        if reply == _GO:
            return
        if reply is not None and reply.startswith("mismatch"):
            raise ClusterError(
                f"cluster: process 0 at {config.coordinator} runs {reply.split()[-1]} processes, this process "
                f"(process {config.process_id}) was told {config.num_processes}: give every process the same "
                "--num-processes"
            )
        time.sleep(_POLL_S)
    n = config.num_processes
    if answered:
        raise ClusterError(
            f"cluster: coordinator {config.coordinator} answered, but the other processes did not all join within "
            f"{config.timeout_s} s (this is process {config.process_id} of {n}): are all {n} processes started, "
            f"with --coordinator {config.coordinator} and --num-processes {n}?"
        )
    raise ClusterError(
        f"cluster: coordinator {config.coordinator} did not answer within {config.timeout_s} s (this is process "
        f"{config.process_id} of {n}): is process 0 running, with --coordinator {config.coordinator}, and is "
        f"port {port} of {host} reachable from this host?"
    )


def _listen(config: ClusterConfig) -> socket.socket:
    """Process 0's listener on the coordinator's port, on every address (as JAX's service binds it)."""
    _, port = _address(config)
    try:
        if socket.has_dualstack_ipv6():
            return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
        return socket.create_server(("", port))
    except OSError as err:
        raise ClusterError(
            f"cluster: process 0 cannot listen on the coordinator's port {port} ({config.coordinator}): {err}; "
            "is another process using it?"
        ) from None


def _hello(conn: socket.socket, config: ClusterConfig) -> int | None:
    """The process id a new connection says hello with, or None (not a worker of this cluster)."""
    words = (_read_line(conn, time.monotonic() + 2.0) or "").split()
    if len(words) != 3 or words[0] != _HELLO or not (words[1].isdigit() and words[2].isdigit()):
        return None
    if int(words[2]) != config.num_processes:
        try:
            conn.sendall(f"mismatch {config.num_processes}\n".encode())
        except OSError:
            pass
        return None
    pid = int(words[1])
    return pid if 0 < pid < config.num_processes else None


def _host_rendezvous(config: ClusterConfig, deadline: float) -> None:
    """Process 0: wait until every other process has said hello, then answer "go" to each."""
    joined: dict[int, socket.socket] = {}
    try:
        with _listen(config) as server:
            while len(joined) < config.num_processes - 1 and time.monotonic() < deadline:
                server.settimeout(max(0.01, min(_POLL_S * 5, deadline - time.monotonic())))
                try:
                    conn, _ = server.accept()
                except OSError:  # a timeout: look at the deadline again
                    continue
                pid = _hello(conn, config)
                if pid is None:
                    conn.close()
                    continue
                if pid in joined:  # the same process again (it reconnected): keep the newer connection
                    joined[pid].close()
                joined[pid] = conn
            if len(joined) < config.num_processes - 1:
                raise ClusterError(_missing_message(config, joined))
            _release(joined.values())
    finally:
        for conn in joined.values():
            conn.close()


def _release(conns) -> None:
    """Send "go" to every worker, then wait (briefly) until each has closed its end first.

    The workers close first so that no connection of the port lingers on this side (TIME_WAIT)
    when JAX's service binds it.
    """
    for conn in conns:
        try:
            conn.sendall(f"{_GO}\n".encode())
        except OSError:
            pass
    for conn in conns:
        _read_line(conn, time.monotonic() + 2.0)


def _missing_message(config: ClusterConfig, joined: dict) -> str:
    n = config.num_processes
    missing = sorted(set(range(1, n)) - set(joined))
    _, port = _address(config)
    return (
        f"cluster: process 0 at {config.coordinator} waited {config.timeout_s} s for the other {n - 1} "
        f"process(es); {len(joined)} joined, process id(s) {missing} did not: are the other {n - 1} processes "
        f"started, with --coordinator {config.coordinator} and --num-processes {n}, and can they reach port {port}?"
    )
