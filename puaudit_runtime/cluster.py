"""Multi-process clusters: how this process joins a ``jax.distributed`` cluster.

ClusterConfig / initialize_cluster(...)  coordinator address, process count and id from
    arguments or the environment (PUAUDIT_COORDINATOR, PUAUDIT_NUM_PROCESSES,
    PUAUDIT_PROCESS_ID, PUAUDIT_CLUSTER_TIMEOUT), else JAX's own SLURM / TPU / MPI detection;
    gloo collectives on CPU; a bounded wait for the coordinator.
process_rows(n) -> the (start, stop) rows of an n-row corpus this process loads.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time

import jax

__all__ = ["ClusterConfig", "initialize_cluster", "process_rows"]


def process_rows(n: int, process_index: int | None = None, process_count: int | None = None) -> tuple[int, int]:
    """Rows [start, stop) of an n-row corpus that process ``process_index`` of ``process_count`` loads.

    Contiguous, as even as possible (the first n % count processes get one more row).
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


def initialize_cluster(config: ClusterConfig | None = None, *, auto_detect: bool = False) -> bool:
    """Join a ``jax.distributed`` cluster; call before any other JAX call in the process.

    With ``config.coordinator`` set, the explicit three settings are used. Otherwise, with
    ``auto_detect``, JAX's own detection runs (SLURM, TPU pods, Open MPI); else nothing happens.
    On CPU the cross-process collectives are set to ``config.cpu_collectives`` (gloo).
    Returns whether a cluster of more than one process was joined.

    Raises:
      ValueError for inconsistent settings; RuntimeError (naming the coordinator and the
      timeout) when the coordinator's port does not answer within ``config.timeout_s``. Past
      that point JAX enforces the same timeout itself and, when the other processes do not all
      arrive, aborts the process (XLA's DEADLINE_EXCEEDED) instead of raising.
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
    if config.coordinator is not None and config.process_id != 0:
        _wait_for_coordinator(config)
    # Past this point JAX itself enforces the timeout; when it expires (the coordinator lost, a
    # process missing) XLA aborts the process with DEADLINE_EXCEEDED rather than raising.
    print(
        f"[puaudit] joining the cluster at {config.coordinator or '(auto-detected)'} as process "
        f"{config.process_id} of {config.num_processes} (timeout {config.timeout_s} s)",
        flush=True,
    )
    try:
        if config.coordinator is not None:
            jax.distributed.initialize(config.coordinator, config.num_processes, config.process_id, **kwargs)
        else:
            jax.distributed.initialize(**kwargs)
    except Exception as err:  # JAX raises XlaRuntimeError / RuntimeError / ValueError here
        where = config.coordinator or "auto-detected coordinator"
        raise RuntimeError(
            f"could not join the cluster at {where} as process {config.process_id} of "
            f"{config.num_processes} within {config.timeout_s} s: {err}"
        ) from err
    return jax.process_count() > 1


def _wait_for_coordinator(config: ClusterConfig) -> None:
    """Poll the coordinator's TCP port until it accepts a connection.

    Raise a clear error at the timeout (JAX would abort the process instead).
    """
    host, _, port = config.coordinator.rpartition(":")
    deadline = time.monotonic() + config.timeout_s
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                return
        except OSError as err:
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"coordinator {config.coordinator} did not answer within {config.timeout_s} s "
                    f"(process {config.process_id} of {config.num_processes}): {err}. Is process 0 "
                    "running, and is the address reachable from this host?"
                ) from None
            time.sleep(0.2)
