"""Which devices a computation runs on: device meshes and multi-process clusters.

The one place where ``--devices`` / ``--mesh`` and the cluster flags become JAX objects; every
layer above (extraction, PLS, the partial OT solver, the CLIs) takes the resulting ``Mesh``.

    make_mesh(devices="all" | N | [Device, ...] | None, shape=None | (r, c) | "2x4",
              axis_names=None) -> Mesh | None
        None / 1 device -> None: callers then run their ordinary single-device code path.
    data_axes(mesh) -> the tuple of all axis names (a PartitionSpec entry that splits one array
        axis over every device of the mesh: data parallelism).
    pad_to_multiple(n, k) -> the smallest multiple of k that is >= n.
    ClusterConfig / initialize_cluster(...)  jax.distributed for multi-process runs: coordinator
        address, process count and id from arguments or the environment (PUAUDIT_COORDINATOR,
        PUAUDIT_NUM_PROCESSES, PUAUDIT_PROCESS_ID), else JAX's own SLURM / TPU / MPI detection;
        gloo collectives on CPU; a bounded wait for the coordinator.
    process_rows(n) -> the (start, stop) rows of an n-row corpus this process loads.
    add_device_arguments(parser) / mesh_from_args(args)   the same flags on every CLI and benchmark.
    forced_devices_env(n) -> the environment of a child process with n forced host devices.

Nothing here is device-specific: a mesh of GPUs, TPU cores or forced host CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``, set before JAX starts) is built the
same way.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
import time
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh

__all__ = [
    "ClusterConfig",
    "add_device_arguments",
    "data_axes",
    "describe_mesh",
    "forced_devices_env",
    "initialize_cluster",
    "make_mesh",
    "mesh_from_args",
    "pad_to_multiple",
    "parse_devices",
    "parse_mesh_shape",
    "process_rows",
]

#: Default axis names: rows of a problem (PUAudit's P) and columns (the unlabelled pool U).
ROWS, COLS = "p", "u"


def parse_devices(value) -> str | int | None:
    """``--devices``: "all", a positive int (as int or str), or None."""
    if value is None or value == "all":
        return value
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"devices must be 'all' or a positive integer; got {value!r}")
    return int(value)


def parse_mesh_shape(value) -> tuple[int, ...] | None:
    """``--mesh``: "4", "2x4" (rows x columns) or a tuple of positive ints; None passes through."""
    if value is None:
        return None
    if isinstance(value, str):
        parts = value.lower().replace("*", "x").split("x")
        try:
            value = tuple(int(p) for p in parts)
        except ValueError:
            raise ValueError(f"mesh must look like '8' or '2x4' (rows x columns); got {value!r}") from None
    value = tuple(value)
    if not 1 <= len(value) <= 2 or any(isinstance(v, bool) or int(v) != v or v < 1 for v in value):
        raise ValueError(f"mesh must be one or two positive sizes, e.g. '8' or '2x4'; got {value!r}")
    return tuple(int(v) for v in value)


def make_mesh(devices="all", shape=None, axis_names: Sequence[str] | None = None) -> Mesh | None:
    """A ``Mesh`` over the chosen devices, or None for a single device.

    Args:
      devices: "all" (every device of every process: ``jax.devices()``), N (the first N), an
        explicit list of devices, a ``Mesh`` (returned as is), or None (no mesh).
      shape: mesh shape; default (N,) one axis. Two sizes (r, c): r devices split the rows,
        c the columns; their product must equal the number of devices.
      axis_names: default ("u",) for one axis, ("p", "u") for two.
    Returns:
      ``Mesh``, or None when the choice amounts to one device and no shape was asked for.
    Raises:
      ValueError naming the setting when it does not match the devices this process sees.
    """
    if isinstance(devices, Mesh):
        return devices
    shape = parse_mesh_shape(shape)
    if devices is None:
        if shape is None:
            return None
        devices = int(np.prod(shape))
    available = jax.devices()
    if not isinstance(devices, (str, int, np.integer)):
        chosen = list(devices)
        if not chosen:
            raise ValueError("devices: an empty list of devices")
    else:
        count = len(available) if devices == "all" else parse_devices(devices)
        if count > len(available):
            raise ValueError(
                f"devices={count} asks for more devices than JAX sees: {len(available)} "
                f"({available[0].platform}; on CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N "
                "set before JAX starts makes N host devices)"
            )
        chosen = available[:count]
    shape = shape or (len(chosen),)
    if int(np.prod(shape)) != len(chosen):
        raise ValueError(
            f"mesh shape {'x'.join(map(str, shape))} has {int(np.prod(shape))} devices but devices gives {len(chosen)}"
        )
    names = tuple(axis_names) if axis_names is not None else ((COLS,) if len(shape) == 1 else (ROWS, COLS))
    if len(names) != len(shape) or len(set(names)) != len(names):
        raise ValueError(f"axis_names {names} must be {len(shape)} distinct names for mesh shape {shape}")
    if len(chosen) == 1 and axis_names is None and len(shape) == 1:
        return None
    return Mesh(np.asarray(chosen, dtype=object).reshape(shape), names)


def data_axes(mesh: Mesh) -> tuple[str, ...]:
    """All axis names of ``mesh``: as one PartitionSpec entry, it splits an array axis over every
    device (data parallelism over a mesh of any shape)."""
    return tuple(mesh.axis_names)


def pad_to_multiple(n: int, k: int) -> int:
    """The smallest multiple of k that is >= n (n >= 0, k >= 1)."""
    return -(-int(n) // int(k)) * int(k)


def process_rows(n: int, process_index: int | None = None, process_count: int | None = None) -> tuple[int, int]:
    """Rows [start, stop) of an n-row corpus that process ``process_index`` of ``process_count``
    loads: contiguous, as even as possible (the first n % count processes get one more row)."""
    i = jax.process_index() if process_index is None else int(process_index)
    k = jax.process_count() if process_count is None else int(process_count)
    base, extra = divmod(int(n), k)
    start = i * base + min(i, extra)
    return start, start + base + (i < extra)


# ---------------------------------------------------------------------------------------------
# Multi-process clusters

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
        """Fields from PUAUDIT_COORDINATOR / PUAUDIT_NUM_PROCESSES / PUAUDIT_PROCESS_ID /
        PUAUDIT_CLUSTER_TIMEOUT, then the non-None ``overrides`` (command-line flags win over the
        environment)."""
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
    """Poll the coordinator's TCP port until it accepts a connection; raise a clear error at
    the timeout (JAX would abort the process instead)."""
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


# ---------------------------------------------------------------------------------------------
# Command-line flags (one definition for every CLI and benchmark)


def add_device_arguments(parser, *, cluster: bool = True, what: str = "the work") -> None:
    """``--devices``, ``--mesh`` and (``cluster``) the cluster flags on an argparse parser;
    ``what`` names what the devices share in the group's help."""
    g = parser.add_argument_group(
        "devices", f"spread {what} over several devices" + (" or processes" if cluster else "") + " (jax.sharding)"
    )
    g.add_argument(
        "--devices",
        default=None,
        help="'all' or N: run on all / the first N devices JAX sees (default: one device). "
        "On CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N makes N host devices",
    )
    g.add_argument(
        "--mesh",
        default=None,
        help="mesh shape: N, or RxC (the partial-OT solver splits its P side over the R rows and "
        "its U side over the C columns; data-parallel work uses all R x C); default: one axis "
        "over --devices",
    )
    if not cluster:
        return
    g.add_argument(
        "--coordinator",
        default=None,
        help="host:port of process 0 of a jax.distributed cluster (env PUAUDIT_COORDINATOR)",
    )
    g.add_argument(
        "--num-processes", type=int, default=None, help="processes in the cluster (env PUAUDIT_NUM_PROCESSES)"
    )
    g.add_argument("--process-id", type=int, default=None, help="this process's rank (env PUAUDIT_PROCESS_ID)")
    g.add_argument(
        "--cluster-auto",
        action="store_true",
        help="let JAX detect the cluster (SLURM, TPU pods, Open MPI) instead of the three flags above",
    )
    g.add_argument(
        "--cluster-timeout",
        type=int,
        default=None,
        help="seconds to wait for the coordinator and the other processes (default 120)",
    )


def mesh_from_args(args, *, join_cluster: bool = True, fail=None) -> Mesh | None:
    """Join the cluster the flags (or the environment) describe, then build the mesh of
    ``--devices`` / ``--mesh`` (None: one device). ValueError names the flag that is wrong.
    ``join_cluster=False`` (commands that run in one process): no cluster is joined, whatever
    the environment says, and the mesh is of this process's devices. ``fail`` (e.g. a parser's
    ``error``): called with "--devices / --mesh: <the ValueError>" instead of raising."""
    if fail is not None:
        try:
            return mesh_from_args(args, join_cluster=join_cluster)
        except ValueError as err:
            return fail(f"--devices / --mesh: {err}")
    if not join_cluster:
        return make_mesh(parse_devices(args.devices), args.mesh)
    flag = functools.partial(getattr, args)
    config = ClusterConfig.from_env(
        coordinator=flag("coordinator", None),
        num_processes=flag("num_processes", None),
        process_id=flag("process_id", None),
        timeout_s=flag("cluster_timeout", None),
    )
    clustered = initialize_cluster(config, auto_detect=flag("cluster_auto", False))
    devices = parse_devices(args.devices)
    if clustered and devices is None:
        devices = "all"  # a cluster is joined to use its devices
    mesh = make_mesh(devices, args.mesh)
    if clustered and mesh is not None:
        missing = set(range(jax.process_count())) - {d.process_index for d in mesh.devices.flat}
        if missing:
            raise ValueError(
                f"--devices {args.devices} / --mesh {args.mesh} leave processes {sorted(missing)} of "
                f"the cluster without a device (the first N of {len(jax.devices())} devices belong "
                "to the first processes): use --devices all, or N covering every process"
            )
    return mesh


def describe_mesh(mesh: Mesh) -> str:
    """One line: how many devices of which platform, and the mesh's axes."""
    return f"{mesh.size} {mesh.devices.flat[0].platform} devices, shape {dict(mesh.shape)}"


def forced_devices_env(n_devices: int, extra: dict | None = None, *, path: str | os.PathLike | None = None) -> dict:
    """The environment of a child process that sees ``n_devices`` forced host CPU devices
    (``XLA_FLAGS``, read when JAX starts: a running process cannot change its count). Other XLA
    flags are kept; OMP_NUM_THREADS=1 and HF_HUB_OFFLINE=1 unless set; ``path`` is put first on
    PYTHONPATH; ``extra`` is applied last."""
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={int(n_devices)}"])
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    if path is not None:
        env["PYTHONPATH"] = str(path) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env
