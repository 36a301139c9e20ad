"""The device and cluster flags of every command line and benchmark: one definition.

add_device_arguments(parser)   ``--devices``, ``--mesh`` and the cluster flags
DeviceFlags                    their values
build_mesh(flags)              join the cluster the flags name, then build the mesh
mesh_from_args(args)           build_mesh of the flags read from a parsed argparse namespace
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jax.sharding import Mesh

__all__ = ["DeviceFlags", "add_device_arguments", "build_mesh", "mesh_from_args"]


@dataclass(frozen=True)
class DeviceFlags:
    """The values of the flags :func:`add_device_arguments` adds (None: not given).

    Attributes:
        devices: "all" or N (the first N devices JAX sees); None: one device
        mesh: mesh shape, N or RxC; None: one axis over ``devices``
        coordinator: host:port of process 0 of a jax.distributed cluster
        num_processes: processes in the cluster
        process_id: this process's rank
        cluster_auto: let JAX detect the cluster (SLURM, TPU pods, Open MPI)
        cluster_timeout: seconds to wait for the coordinator and the other processes
    """

    devices: str | None = None
    mesh: str | None = None
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    cluster_auto: bool = False
    cluster_timeout: int | None = None


def add_device_arguments(parser, *, cluster: bool = True, what: str = "the work") -> None:
    """Add ``--devices``, ``--mesh`` and (``cluster``) the cluster flags to an argparse parser.

    Args:
        parser: the ``argparse.ArgumentParser`` the "devices" group is added to.
        cluster: whether to add the jax.distributed flags too (``--coordinator``, ``--num-processes``,
            ``--process-id``, ``--cluster-auto``, ``--cluster-timeout``).
        what: names what the devices share, in the group's help.
    """
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
    """:func:`build_mesh` of the device flags of a parsed namespace ``args`` (only read; absent flags: None).

    Args:
        args: a parsed ``argparse.Namespace`` (flags of :func:`add_device_arguments`; absent ones take
            :class:`DeviceFlags`'s defaults).
        join_cluster: passed to :func:`build_mesh` (join the jax.distributed cluster the flags name).
        fail: called with "--devices / --mesh: <the ValueError>" instead of raising (e.g. a parser's
            ``error``); None raises.

    Returns:
        The mesh, or None for one device (or what ``fail`` returns).

    Raises:
        ValueError: bad device flags, when ``fail`` is None.
    """
    flags = DeviceFlags(**{f.name: getattr(args, f.name, f.default) for f in dataclasses.fields(DeviceFlags)})
    try:
        return build_mesh(flags, join_cluster=join_cluster)
    except ValueError as err:
        if fail is None:
            raise
        return fail(f"--devices / --mesh: {err}")


def build_mesh(flags: DeviceFlags, *, join_cluster: bool = True) -> Mesh | None:
    """Join the cluster the flags (or the environment) describe, then build the mesh of the flags.

    The mesh is that of ``--devices`` / ``--mesh`` (None: one device). ValueError names the flag that
    is wrong. ``join_cluster=False`` (commands that run in one process): no cluster is joined, whatever
    the environment says, and the mesh is of this process's devices.
    """
    import jax  # here, not above: a command line's parser reads these flags without loading JAX

    from .cluster import ClusterConfig, initialize_cluster
    from .mesh import make_mesh, parse_devices

    if not join_cluster:
        return make_mesh(parse_devices(flags.devices), flags.mesh)
    config = ClusterConfig.from_env(coordinator=flags.coordinator, num_processes=flags.num_processes,
                                    process_id=flags.process_id, timeout_s=flags.cluster_timeout)  # fmt: skip
    clustered = initialize_cluster(config, auto_detect=flags.cluster_auto)
    devices = parse_devices(flags.devices)
    if clustered and devices is None:
        devices = "all"  # a cluster is joined to use its devices
    mesh = make_mesh(devices, flags.mesh)
    if clustered and mesh is not None:
        missing = set(range(jax.process_count())) - {d.process_index for d in mesh.devices.flat}
        if missing:
            raise ValueError(
                f"--devices {flags.devices} / --mesh {flags.mesh} leave processes {sorted(missing)} of "
                f"the cluster without a device (the first N of {len(jax.devices())} devices belong "
                "to the first processes): use --devices all, or N covering every process"
            )
    return mesh
