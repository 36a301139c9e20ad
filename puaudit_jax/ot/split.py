"""How a problem's rows and columns are split across mesh axes, seen from inside ``shard_map``.

A sharded solve (``puaudit_jax.ot.sharded``) gives each device one block of the cost matrix:
rows (the source points, PUAudit's P) split over the mesh axis ``rows``, columns (the pool U)
over ``cols``. Every reduction of the solver is computed on the local block and then combined
with a collective over the axis that split the reduced index:

    sum over columns j (K v, row sums of the plan)  -> psum over ``cols``   (O(n_P / D_rows) floats)
    sum over rows i (K^T u, column sums)            -> psum over ``rows``   (O(n_U / D_cols) floats)
    sums of scalars over the whole block            -> psum over both       (one float)

A log-sum-exp is combined from local ones (max, then sum of exp), and loop conditions are
all-reduced so that every device takes the same branch and the same number of iterations.
With both axes None (the default) every method is the identity: the single-device solver
runs unchanged.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

_OVER = ("rows", "cols", "all")


@dataclasses.dataclass(frozen=True)
class Split:
    """Mesh axes that split the rows (``rows``) and the columns (``cols``) of a problem.

    ``over`` names the index a partial result was reduced over: "rows" (i), "cols" (j) or "all".
    """

    rows: str | None = None
    cols: str | None = None

    def names(self, over: str) -> tuple[str, ...]:
        """The mesh axes that split the index ``over``."""
        if over not in _OVER:
            raise ValueError(f"over must be one of {_OVER}; got {over!r}")
        axes = {"rows": (self.rows,), "cols": (self.cols,), "all": (self.rows, self.cols)}[over]
        return tuple(a for a in axes if a is not None)

    def sum(self, x: jax.Array, over: str) -> jax.Array:
        """Combine partial sums over the index ``over`` (local block -> whole problem)."""
        names = self.names(over)
        return jax.lax.psum(x, names) if names else x

    def max(self, x: jax.Array, over: str) -> jax.Array:
        """Combine partial maxima over the index ``over``."""
        names = self.names(over)
        return jax.lax.pmax(x, names) if names else x

    def any(self, x: jax.Array) -> jax.Array:
        """True on every device when ``x`` (a scalar bool) is True on any device."""
        names = self.names("all")
        return jax.lax.pmax(x.astype(jnp.int32), names) > 0 if names else x

    def all(self, x: jax.Array) -> jax.Array:
        """True on every device when ``x`` (a scalar bool) is True on every device."""
        return ~self.any(~x)

    def logsumexp(self, local: jax.Array, over: str) -> jax.Array:
        """Combine local log-sum-exps over the index ``over``: max first, so nothing overflows."""
        names = self.names(over)
        if not names:
            return local
        top = jax.lax.pmax(local, names)
        top = jnp.where(jnp.isfinite(top), top, 0.0)
        return top + jnp.log(jax.lax.psum(jnp.exp(local - top), names))

    def vary(self, x: jax.Array, over: str) -> jax.Array:
        """Mark an array as differing across the axes that split ``over`` (those it does not differ across already).

        shard_map's type check needs loop carries typed as what the loop body returns.
        """
        names = tuple(a for a in self.names(over) if a not in _varying(x))
        return jax.lax.pcast(x, names, to="varying") if names else x


def _varying(x: jax.Array) -> frozenset:
    """The mesh axes ``x`` already differs across (inside shard_map)."""
    aval = jax.typeof(x)
    return frozenset(aval.manual_axis_type.varying if hasattr(aval, "manual_axis_type") else aval.vma)
