"""Data parallelism over a mesh: every batch's rows split over the devices, the weights replicated.

`mesh=` (a `jax.sharding.Mesh`, from `puaudit_runtime.mesh.make_mesh`) splits every batch's rows
over the mesh devices (all axes: `puaudit_runtime.mesh.data_axes`), the batch padded with empty
rows to a multiple of the device count; the weights are replicated once per mesh. Each device runs
the forward (and its micro-batches) on its own rows under `jax.shard_map`: rows are independent, so
there is no communication, and the result equals one device's up to float rounding. (A plain jit
with sharded inputs would all-gather the batch for the micro-batch `lax.map`.) `mesh=None` is the
single-device path.
"""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from probes.models.batching import batch_bucket
from probes.models.pretrained import Pretrained
from puaudit_runtime.mesh import data_axes, pad_to_multiple

__all__ = ["params_on", "rows_on"]

_REPLICATED = weakref.WeakKeyDictionary()  # Pretrained -> {Mesh: its params replicated on the mesh}


def params_on(pre: Pretrained, mesh: Mesh | None):
    """The model's weights where a forward on `mesh` reads them.

    Args:
        pre: the loaded model.
        mesh: a mesh of this process's devices, or None (one device).

    Returns:
        `pre.params` (a pytree of arrays, shapes as in the model) with mesh=None; otherwise the
        same replicated on every device of `mesh` (sent once per model and mesh, then cached).

    Raises:
        ValueError: `mesh` spans the devices of several processes.
    """
    if mesh is None:
        return pre.params
    if mesh.is_multi_process:
        raise ValueError(
            "mesh spans the devices of several processes; extraction takes a mesh of this "
            "process's devices (jax.local_devices()): use encode_distributed, where each "
            "process encodes its share of the inputs"
        )
    per_mesh = _REPLICATED.setdefault(pre, {})
    if mesh not in per_mesh:
        per_mesh[mesh] = jax.device_put(pre.params, NamedSharding(mesh, P()))
    return per_mesh[mesh]


def rows_on(mesh: Mesh | None, *arrays):
    """Host batches -> device arrays, their rows split over `mesh`.

    Args:
        mesh: the mesh (rows split over all its axes), or None (one device).
        *arrays: host arrays (B, T), e.g. token ids and the valid mask; B a multiple of the
            mesh size.

    Returns:
        A tuple of device arrays (B, T), one per input, in order.
    """
    if mesh is None:
        return tuple(jnp.asarray(a) for a in arrays)
    return tuple(jax.device_put(a, NamedSharding(mesh, P(data_axes(mesh), None))) for a in arrays)


def data_parallel(fn, mesh: Mesh | None, n_replicated: int):
    """The jit of `fn(*replicated, *rows)`, data-parallel over `mesh`.

    With a mesh, each device runs `fn` on its own rows (`shard_map`: the first `n_replicated`
    arguments whole, the rest and the output split on axis 0).

    Args:
        fn: the function of the replicated arguments then two row arrays (ids, valid: (B, T)).
        mesh: the mesh the rows are split over, or None (a plain jit on one device).
        n_replicated: how many leading arguments every device gets whole.
    """
    if mesh is None:
        return jax.jit(fn)
    rows = P(data_axes(mesh))
    in_specs = (P(),) * n_replicated + (rows, rows)
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=rows))


def padded_rows(n: int, batch_size: int, mesh: Mesh | None) -> int:
    """Rows of a batch holding n inputs: `batch_bucket`, rounded up to a multiple of the mesh size.

    Args:
        n: the inputs of the batch.
        batch_size: the most inputs of a batch.
        mesh: the mesh the rows are split over, or None (one device).
    """
    return pad_to_multiple(batch_bucket(n, batch_size), 1 if mesh is None else mesh.size)
