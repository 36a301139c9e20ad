"""The solver's programs take XLA:CPU's fast-compile options (``puaudit_runtime.jit``) below a size only."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from puaudit_jax.ot import PartialSinkhorn
from puaudit_jax.ot.problem import FAST_COMPILE_CELLS, compiles_fast
from puaudit_jax.ot.solve import run_points


@pytest.mark.parametrize("n", [256, FAST_COMPILE_CELLS // 256 + 1])
def test_the_solver_compiles_fast_only_below_its_size_threshold(n):
    """A 256 x n problem's program takes the options where ``compiles_fast`` says so, and only there."""
    x, y = jax.ShapeDtypeStruct((256, 4), jnp.float32), jax.ShapeDtypeStruct((n, 4), jnp.float32)
    w = jax.ShapeDtypeStruct((256,), jnp.float32), jax.ShapeDtypeStruct((n,), jnp.float32)
    low = run_points.lower(x, y, *w, jax.ShapeDtypeStruct((), jnp.float32), None, PartialSinkhorn(),
                           cost="cosine", block_size=None, with_plan=False)  # fmt: skip
    assert ("reduce-window" in low.compile().as_text()) == (not compiles_fast(256, n))
