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
    np.testing.assert_array_equal(fast.geom.certified("highest").cost_matrix(), full.geom.cost_matrix())
    out = PartialSinkhorn(epsilon=0.05, certify=True)(fast)
    on_full = with_certificate(full, out).certificate
    for name in ("upper", "lower", "gap"):
        assert float(getattr(out.certificate, name)) == pytest.approx(float(getattr(on_full, name)), abs=1e-6)


def test_the_certificate_precision_auto_is_highest_on_the_cpu_and_the_split_elsewhere(monkeypatch):
    """On the CPU a "default" geometry is certified as it is (its float32 product is float32's: no second
    matrix) and a "bfloat16" one at "highest"; off it float32 points get "bfloat16x3", float64 points and a
    given matrix keep theirs."""
    x, y = (jnp.asarray(z) for z in _cone(20, 30))
    default, fast = Geometry.from_points(x, y), Geometry.from_points(x, y, precision="bfloat16")
    assert default.certified() is default and fast.certified().precision == "highest"
    np.testing.assert_array_equal(fast.certified().matrix, Geometry.from_points(x, y, precision="highest").matrix)
    with pytest.raises(ValueError, match="'highest', 'bfloat16x3' or 'auto'"):
        default.certified("bfloat16")
    matrix = Geometry.from_matrix(default.matrix)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert default.certified().precision == "bfloat16x3" and matrix.certified() is matrix
    with jax.enable_x64(True):
        wide = Geometry.from_points(x.astype(jnp.float64), y.astype(jnp.float64))
        assert wide.certified().precision == "highest"
    with pytest.raises(ValueError, match="default precision has no known error bound"):
        default.cost_error()


def test_a_bad_cost_precision_is_refused_by_name():
    with pytest.raises(ValueError, match="cost_precision"):
        SolveOptions(cost_precision="tf32")
    with pytest.raises(ValueError, match="cost precision must be one of default, highest, bfloat16"):
        Geometry.from_points(jnp.ones((2, 3)), jnp.ones((2, 3)), precision="half")


_MESH_CODE = """
import numpy as np
from puaudit_runtime.mesh import make_mesh
from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_partial
from tests.ot.test_cost_precision import _cone

x, y = _cone(90, 150, d=32)
solver = PartialSinkhorn(epsilon=0.02, certify=True)
out = {}
for name, mesh in (("single", None), ("2x2", make_mesh(4, "2x2"))):
    for block in (None, 16):
        options = SolveOptions(method="sinkhorn", return_plan=False, block_size=block, cost_precision="bfloat16")
        r = solve_partial(x, y, 0.6, solver, options, mesh=mesh)
        c = r.certificate
        out[f"{name} {block}"] = dict(col=r.col_mass, it=r.iterations, cert=[c.upper, c.lower, c.gap])
emit(out)
"""


def test_a_bfloat16_solve_on_a_mesh_equals_the_one_device_solve():
    """On a 2 x 2 mesh of forced host devices (rows and columns split), dense and blocked: the same iterations,
    masses and certificate as on one device (both at "bfloat16"), to float32's summation order: the dual
    bound's quantile search compares float32 sums of the split rows' weights with m, and its lower bound moved by
    2.4e-5 (1.2e-5 at "default", where the same happens)."""
    from tests.multidevice import run_devices

    res = run_devices(_MESH_CODE, 4, timeout=240)
    for block in ("None", "16"):
        one, split = res[f"single {block}"], res[f"2x2 {block}"]
        assert abs(split["it"] - one["it"]) <= 1
        np.testing.assert_allclose(split["col"], one["col"], atol=2e-6, rtol=0)
        np.testing.assert_allclose(split["cert"], one["cert"], atol=5e-5, rtol=0)


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


@pytest.mark.parametrize("precision", ["bfloat16", "bfloat16x3"])
def test_the_accelerators_products_equal_the_cpus(monkeypatch, precision):
    """Off the CPU the bfloat16 operands are multiplied as bfloat16 arrays on the bf16 units, accumulating in
    float32: the same numbers as the CPU's float32 product of the rounded values, up to the order of the float32
    sums (a bfloat16 result, 3 significant digits, would be 1e-3 off; the split's lost low half 4e-3)."""
    rng = np.random.default_rng(4)
    x, y = (jnp.asarray(rng.normal(size=s).astype(np.float32)) for s in ((40, 96), (30, 96)))
    cpu = Geometry.from_points(x, y, precision=precision).matrix
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    fast = Geometry.from_points(x, y, precision=precision)
    assert fast.matrix.dtype == jnp.float32 and fast._operands(x, y)[0].dtype == jnp.bfloat16
    np.testing.assert_allclose(fast.matrix, cpu, rtol=0, atol=1e-5 if precision == "bfloat16" else 1e-6)


def _adversarial(n: int, d: int, seed: int) -> np.ndarray:
    """Rows whose every coordinate lies just past a bfloat16 rounding midpoint (all round up by ~2^-8 of
    themselves, and their low halves by ~2^-8 of those), of positive sign: the roundings add up instead of
    cancelling, the products' worst case."""
    rng = np.random.default_rng(seed)
    scale = 2.0 ** rng.integers(-6, -3, size=(n, d))
    return (scale * (1 + 2.0**-8 + 2.0**-16 + 2.0**-20)).astype(np.float32)


@pytest.mark.parametrize("kind", ["cosine", "sqeuclidean"])
@pytest.mark.parametrize("precision", ["highest", "bfloat16", "bfloat16x3"])
def test_the_cost_error_bounds_the_computed_costs(kind, precision):
    """Against the costs of the same float32 points in float64: random and adversarial rows (roundings of one
    sign), d 384 and 768. The bound is not vacuous: its float32 and split bounds are ~1e-4 (where a
    bfloat16 rounding is 4e-3), and the adversarial rows' error reaches a tenth of it at "bfloat16"."""
    rng = np.random.default_rng(7)
    for d, (x, y) in [(384, (rng.normal(size=(50, 384)), rng.normal(size=(70, 384)))),
                      (768, (_adversarial(50, 768, 1), _adversarial(70, 768, 2)))]:  # fmt: skip
        x, y = unit_rows(x.astype(np.float32), y.astype(np.float32), kind) if kind == "cosine" else (x, y)
        x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
        geom = Geometry.from_points(jnp.asarray(x), jnp.asarray(y), kind, normalised=True, precision=precision)
        x64, y64 = x.astype(np.float64), y.astype(np.float64)
        if kind == "cosine":
            exact = 1.0 - x64 @ y64.T
        else:
            exact = (x64**2).sum(1)[:, None] + (y64**2).sum(1)[None, :] - 2.0 * x64 @ y64.T
        error, bound = np.abs(np.asarray(geom.matrix, np.float64) - exact).max(), float(geom.cost_error())
        assert error <= bound, (d, error, bound)
        if kind == "cosine":
            assert bound < {"highest": 6e-5, "bfloat16": 1e-2, "bfloat16x3": 2.5e-4}[precision]
            if precision == "bfloat16" and d == 768:
                assert error > 0.1 * bound


@pytest.mark.parametrize("precision", ["bfloat16", "bfloat16x3"])
def test_the_rounding_of_the_inputs_is_bounded_and_reached(precision):
    """The inputs' share of the bound alone (the products of the rounded operands summed in float64): it holds,
    and the rows past rounding midpoints reach a quarter of it (its terms are not loose by more)."""
    from puaudit_jax.ot.geometry import _operand, _product_error

    x, y = _adversarial(20, 256, 5), _adversarial(30, 256, 6)
    xo, yo = (
        np.asarray(_operand(jnp.asarray(z), precision, side), np.float64) for z, side in ((x, "rows"), (y, "cols"))
    )
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    norms = np.linalg.norm(x64, axis=1)[:, None] * np.linalg.norm(y64, axis=1)[None, :]
    ratio = np.abs(xo @ yo.T - x64 @ y64.T) / (_product_error(precision, 256, np.float32)[0] * norms)
    assert ratio.max() <= 1.0 and ratio.max() > 0.25


def test_a_certificate_on_the_bfloat16_split_brackets_the_optimum_as_tightly():
    """The certificate on accelerators ("bfloat16x3", run here on the CPU with the same numbers) from a solve's
    potentials brackets the exact optimum, and its gap exceeds the "highest" one by at most its widening."""
    x, y = unit_rows(*_cone(120, 200, d=96), "cosine")
    a, b, m = jnp.full(120, 1 / 120), jnp.full(200, 1 / 200), jnp.asarray(0.6)
    geom = Geometry.from_points(jnp.asarray(x), jnp.asarray(y), normalised=True)
    out = PartialSinkhorn(epsilon=0.01, tol=1e-5)(PartialProblem(geom, a, b, m))
    certs = {p: with_certificate(PartialProblem(geom.certified(p), a, b, m), out).certificate
             for p in ("highest", "bfloat16x3")}  # fmt: skip
    exact = solve_partial(np.asarray(x, np.float64), np.asarray(y, np.float64), 0.6,
                          options=SolveOptions(method="exact", return_plan=False)).cost  # fmt: skip
    split = certs["bfloat16x3"]
    assert float(split.lower) <= exact <= float(split.upper)
    widening = 2 * 0.6 * float(geom.certified("bfloat16x3").cost_error())
    assert 0 < widening < 3e-4 and float(split.gap) <= float(certs["highest"].gap) + widening + 1e-6


def test_the_certificate_widens_its_bounds_by_the_cost_error():
    """All points equal, every coordinate just past a bfloat16 rounding midpoint: at "bfloat16" every computed
    cost is too low by nearly the whole error bound (the bound is within 1 % of this worst case), every plan
    of mass m is optimal, and the computed costs' own upper bound misses the exact optimum m C*; widened by
    m times the cost error, the certificate brackets it."""
    v = np.full((1, 60), 2.0**-3 * (1 + 2.0**-8 + 2.0**-16 + 2.0**-20), np.float32)
    geom = Geometry.from_points(jnp.asarray(np.repeat(v, 30, 0)), jnp.asarray(np.repeat(v, 40, 0)),
                                normalised=True, precision="bfloat16")  # fmt: skip
    out = PartialSinkhorn(epsilon=0.01, certify=True)(
        PartialProblem(geom, jnp.full(30, 1 / 30), jnp.full(40, 1 / 40), 0.5)
    )
    cert, delta = out.certificate, float(geom.cost_error())
    exact_cost = 1.0 - float(v[0].astype(np.float64) @ v[0].astype(np.float64))
    assert 0.99 * delta < exact_cost - float(geom.matrix[0, 0]) <= delta
    assert float(cert.lower) <= 0.5 * exact_cost <= float(cert.upper)
    assert float(cert.upper) - 0.5 * delta < 0.5 * exact_cost  # unwidened, the upper bound is below the optimum
