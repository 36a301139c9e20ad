"""What a check of a float array on its device needs: the first NaN or infinity, an exact scaling.

The checks on a device (``puaudit_jax.ot.problem.checked_on_device``, ``probes.pls``'s float32 path)
first learn whether anything is non-finite from a reduction they compute anyway (a maximum of
``|value|`` carries a NaN or an inf through); only then is the position looked for
(:func:`first_nonfinite`). They divide rows or columns by the power of two below their largest
``|value|`` (:func:`power_of_two_below`), an exact scaling after which no square overflows or vanishes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["first_nonfinite", "power_of_two_below"]


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


def power_of_two_below(top: jax.Array) -> jax.Array:
    """2**floor(log2(top)) of float32 ``top`` >= 0, exactly (its exponent bits); 1 where top == 0.

    A subnormal top gets 2**-126 (the smallest normal power of two), so dividing by it never overflows.

    Args:
        top: float32 magnitudes, any shape (e.g. (p,) column maxima of ``|value|``).

    Returns:
        float32 powers of two, ``top``'s shape: ``top / it`` lies in [1, 2) for normal ``top``.
    """
    bits = jax.lax.bitcast_convert_type(top, jnp.int32) & 0x7F800000
    p = jax.lax.bitcast_convert_type(bits, jnp.float32)
    return jnp.where(top == 0, jnp.float32(1), jnp.where(bits == 0, jnp.finfo(jnp.float32).tiny, p))
