"""Which devices a computation runs on: device meshes.

The one place where a device choice becomes a JAX ``Mesh``; every layer above (extraction, PLS,
the partial OT solver, the CLIs) takes the resulting ``Mesh``.

Functions::

    make_mesh(devices="all" | N | [Device, ...] | None, shape=None | (r, c) | "2x4",
              axis_names=None) -> Mesh | None
        None / 1 device -> None: callers then run their ordinary single-device code path.
    data_axes(mesh) -> the tuple of all axis names (a PartitionSpec entry that splits one array
        axis over every device of the mesh: data parallelism).
    pad_to_multiple(n, k) -> the smallest multiple of k that is >= n.
    describe_mesh(mesh) -> one line naming the devices and the axes.

Nothing here is device-specific: a mesh of GPUs, TPU cores or forced host CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``, set before JAX starts) is built the
same way. Clusters of processes: :mod:`puaudit_runtime.cluster`; the command-line flags:
:mod:`puaudit_runtime.flags`.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh

__all__ = [
    "COLS",
    "ROWS",
    "data_axes",
    "describe_mesh",
    "make_mesh",
    "pad_to_multiple",
    "parse_devices",
    "parse_mesh_shape",
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
      ValueError: naming the setting when it does not match the devices this process sees.
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
    """All axis names of ``mesh``, as one PartitionSpec entry that splits an array axis over every device.

    Data parallelism over a mesh of any shape.
    """
    return tuple(mesh.axis_names)


def pad_to_multiple(n: int, k: int) -> int:
    """The smallest multiple of k that is >= n (n >= 0, k >= 1)."""
    return -(-int(n) // int(k)) * int(k)


def describe_mesh(mesh: Mesh) -> str:
    """One line: how many devices of which platform, and the mesh's axes."""
    return f"{mesh.size} {mesh.devices.flat[0].platform} devices, shape {dict(mesh.shape)}"
