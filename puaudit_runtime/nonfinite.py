"""Where a device array's first NaN or infinity is: what an input check reports after a cheap test failed.

The checks on a device (``puaudit_jax.ot.problem.checked_on_device``, ``probes.pls``'s float32 path)
first learn whether anything is non-finite from a reduction they compute anyway (a maximum of
``|value|`` carries a NaN or an inf through); only then is the position looked for, here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["first_nonfinite"]


@jax.jit
def first_nonfinite(z: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """The NaN / inf entries of a 2-D array: how many, the first one's row and column, and whether it is NaN.

    Row first, then the column within it: a flat index of a 10^6 x 4096 array would pass int32.

    Args:
        z: (n, d) float array.

    Returns:
        (count, row, column, is_nan): int32 scalars and a bool scalar (row 0, column 0 when none).
    """
    bad = ~jnp.isfinite(z)
    row = jnp.argmax(jnp.any(bad, axis=1))
    col = jnp.argmax(bad[row])
    return jnp.sum(bad, dtype=jnp.int32), row, col, jnp.isnan(z[row, col])
