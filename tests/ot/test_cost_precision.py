"""Costs at a faster precision during the solve, certified at full precision (``SolveOptions.cost_precision``).

"bfloat16" is emulated exactly on the CPU (inputs rounded to bfloat16 on their bits, float32 products), so
these tests check on the CPU the numbers an accelerator's fast units give.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial
from puaudit_jax.ot.geometry import Geometry, _bfloat16_values
from puaudit_jax.ot.problem import PartialProblem, unit_rows
from puaudit_jax.ot.sinkhorn import with_certificate


def _cone(n: int, k: int, d: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    axis = rng.normal(size=d)
    x = axis + 0.6 * rng.normal(size=(n, d))
    y = np.where(rng.random((k, 1)) < 0.8, axis + 0.6 * rng.normal(size=(k, d)), rng.normal(size=(k, d)))
    return x.astype(np.float32), y.astype(np.float32)


def test_rounding_to_bfloat16_on_the_bits_is_round_to_nearest_even():
    z = np.random.default_rng(0).normal(size=10_000).astype(np.float32) * np.float32(3.0)
    z[:4] = [1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -(1.0 + 2.0**-8), 0.0]  # two ties (to even) and a zero
    ours = np.asarray(jax.jit(_bfloat16_values)(jnp.asarray(z)))
    reference = np.asarray(jnp.asarray(z).astype(jnp.bfloat16).astype(jnp.float32))
    np.testing.assert_array_equal(ours, reference)
    assert ours[0] == 1.0 and ours[1] == 1.0 + 2.0**-6 and np.any(ours != z)


@pytest.mark.parametrize("block_size", [None, 32])
def test_a_bfloat16_solve_converges_like_a_full_one_and_its_certificate_holds_for_the_true_costs(block_size):
    """Dense and blocked (the blocked passes recompute the cost each time, and must agree with each other):
    the same iterations to the same tolerance, masses within bfloat16's rounding, and a certified interval
    that holds the exact optimum of the true problem."""
    x, y = _cone(150, 220)
    solver = PartialSinkhorn(epsilon=0.02, certify=True)
    options = SolveOptions(method="sinkhorn", return_plan=False, block_size=block_size)
    full = solve_partial(x, y, 0.6, solver, options)
    fast = solve_partial(x, y, 0.6, solver, SolveOptions(**{**options.__dict__, "cost_precision": "bfloat16"}))
    exact = solve_partial(x, y, 0.6, options=SolveOptions(method="exact", return_plan=False)).cost
    assert fast.converged and fast.iterations <= full.iterations + 2
    assert np.abs(fast.col_mass - full.col_mass).max() < 5e-2 * full.col_mass.max()  # costs off by ~2^-9
    c = fast.certificate
    assert c.lower <= exact + 1e-6 and exact <= c.upper + 1e-6 and c.violation < 1e-5
    assert c.gap < 2 * full.certificate.gap + 1e-4


def test_the_certificate_evaluates_the_costs_at_full_precision():
    """A bfloat16 geometry's certificate equals the one computed from the same potentials on the full-precision
    geometry, and not the one on its own rounded costs (which differ: the rounding is real)."""
    x, y = (jnp.asarray(z) for z in unit_rows(*_cone(60, 90), "cosine"))
    a, b, m = jnp.full(60, 1 / 60), jnp.full(90, 1 / 90), jnp.asarray(0.6)
    fast = PartialProblem(Geometry.from_points(x, y, normalised=True, precision="bfloat16"), a, b, m)
    full = PartialProblem(Geometry.from_points(x, y, normalised=True, precision="highest"), a, b, m)
    assert float(jnp.abs(fast.geom.cost_matrix() - full.geom.cost_matrix()).max()) > 1e-4
    np.testing.assert_array_equal(fast.geom.exact().cost_matrix(), full.geom.cost_matrix())
    out = PartialSinkhorn(epsilon=0.05, certify=True)(fast)
    on_full = with_certificate(full, out).certificate
    for name in ("upper", "lower", "gap"):
        assert float(getattr(out.certificate, name)) == pytest.approx(float(getattr(on_full, name)), abs=1e-6)


def test_a_bad_cost_precision_is_refused_by_name():
    with pytest.raises(ValueError, match="cost_precision"):
        SolveOptions(cost_precision="tf32")
    with pytest.raises(ValueError, match="cost precision must be one of default, highest, bfloat16"):
        Geometry.from_points(jnp.ones((2, 3)), jnp.ones((2, 3)), precision="half")
    from puaudit_jax.ot.sharded import Layout

    x, y = _cone(8, 12)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("u",))
    with pytest.raises(ValueError, match="one-device solves"):
        solve_partial(x, y, 0.5, options=SolveOptions(cost_precision="bfloat16"), mesh=Layout.of(mesh))


@pytest.mark.parametrize("precision", ["highest", "bfloat16"])
def test_the_blocked_cost_matvec_equals_the_dense_product(precision):
    """The blocked cosine geometry's ``C v`` (low rank: ``sum(v) - x (y^T v)``, no pass over C) equals the
    materialised matrix's, at the precision the geometry's costs are computed in."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(37, 16)).astype(np.float32), rng.normal(size=(53, 16)).astype(np.float32)
    v = jnp.asarray(rng.uniform(-1.0, 1.0, 53).astype(np.float32))
    blocked = Geometry.from_points(jnp.asarray(x), jnp.asarray(y), block_size=8, precision=precision)
    dense = Geometry.from_points(jnp.asarray(x), jnp.asarray(y), precision=precision)
    np.testing.assert_allclose(blocked.cost_matvec(v), dense.matrix @ v, rtol=0, atol=2e-5)
    np.testing.assert_allclose(dense.cost_matvec(v), dense.matrix @ v, rtol=0, atol=1e-6)


def test_the_accelerators_bfloat16_product_equals_the_cpus(monkeypatch):
    """Off the CPU "bfloat16" multiplies bfloat16 arrays on the bf16 units, accumulating in float32: the same
    numbers as the CPU's float32 product of the rounded values, up to the order of the float32 sums (a
    bfloat16 result, 3 significant digits, would be 1e-3 off)."""
    from puaudit_jax.ot.geometry import _inner

    rng = np.random.default_rng(4)
    x, y = (jnp.asarray(rng.normal(size=s).astype(np.float32)) for s in ((40, 96), (30, 96)))
    cpu = _inner(x, y, "bfloat16")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    fast = _inner(x, y, "bfloat16")
    assert fast.dtype == jnp.float32
    np.testing.assert_allclose(fast, cpu, rtol=0, atol=1e-5)
