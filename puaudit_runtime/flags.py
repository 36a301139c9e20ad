"""The device and cluster flags of every command line and benchmark: one definition.

add_device_arguments(parser)   ``--devices``, ``--mesh`` and the cluster flags
mesh_from_args(args)           join the cluster the flags name, then build the mesh
"""

from __future__ import annotations

import functools

import jax
from jax.sharding import Mesh

from .cluster import ClusterConfig, initialize_cluster
from .mesh import make_mesh, parse_devices

__all__ = ["add_device_arguments", "mesh_from_args"]


def add_device_arguments(parser, *, cluster: bool = True, what: str = "the work") -> None:
    """Add ``--devices``, ``--mesh`` and (``cluster``) the cluster flags to an argparse parser.

    ``what`` names what the devices share in the group's help.
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
    """Join the cluster the flags (or the environment) describe, then build the mesh of the flags.

    The mesh is that of ``--devices`` / ``--mesh`` (None: one device). ValueError names the flag that
    is wrong. ``join_cluster=False`` (commands that run in one process): no cluster is joined, whatever
    the environment says, and the mesh is of this process's devices. ``fail`` (e.g. a parser's
    ``error``): called with "--devices / --mesh: <the ValueError>" instead of raising.
    """
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
