"""Entropic partial OT: convergence to the exact cost, agreement with POT's entropic solver
and ott-jax's balanced Sinkhorn, blocked vs dense, vmap, float32, gradients, fallback."""

import jax
import jax.numpy as jnp
import numpy as np
import ot
import pytest

from puaudit_jax.ot import (
    Geometry,
    PartialProblem,
    PartialSinkhorn,
    SolveOptions,
    entropic_partial_cost,
    solve_partial,
    solve_partial_batch,
)
from tests.ot.ot_cases import cone_clouds, cosine_matrix


def _solve(x, y, m, a=None, b=None, cost="cosine", block_size=None, **kw):
    x, y = jnp.asarray(x), jnp.asarray(y)
    a = jnp.full(x.shape[0], 1 / x.shape[0], x.dtype) if a is None else jnp.asarray(a)
    b = jnp.full(y.shape[0], 1 / y.shape[0], y.dtype) if b is None else jnp.asarray(b)
    geom = Geometry.from_points(x, y, cost, block_size=block_size)
    return PartialSinkhorn(**kw)(PartialProblem(geom, a, b, jnp.asarray(m, x.dtype)))


def test_entropic_cost_converges_to_exact(x64):
    rng = np.random.default_rng(0)
    x, y = cone_clouds(rng, 40, 60, 8)
    exact = solve_partial(x, y, 0.5, options=SolveOptions(method="exact")).cost
    gaps = []
    for eps in (0.1, 0.03, 0.01, 0.003, 0.001):
        r = solve_partial(
            x,
            y,
            0.5,
            solver=PartialSinkhorn(epsilon=eps, tol=1e-9, max_iter=100_000),
            options=SolveOptions(method="sinkhorn", dtype="float64"),
        )
        assert r.converged and abs(r.mass - 0.5) < 1e-8
        gaps.append(r.cost - exact)
    # The entropic plan is feasible, so its cost is above the optimum; the gap shrinks
    # with eps (roughly linearly: eps * entropy of the plan).
    assert all(g > -1e-9 for g in gaps)
    assert all(g2 < g1 for g1, g2 in zip(gaps, gaps[1:]))
    assert gaps[-1] / exact < 2e-3 and gaps[0] / exact > 0.05


@pytest.mark.parametrize("binding", ["rows", "columns"])
@pytest.mark.parametrize("m", [0.05, 0.4, 0.7])
@pytest.mark.parametrize("reg", [0.2, 0.05])
def test_plan_entropy_matches_pot_entropic_partial(x64, m, reg, binding):
    """entropy="plan" solves POT's regularised problem; the plans agree.

    ``binding`` "columns": uniform weights of full mass, where the column caps bind. Before, the loop's
    error was the row side's alone, and it stopped after 3 iterations with the caps violated by 2e-3.
    """
    rng = np.random.default_rng(1)
    if binding == "rows":
        x, y = rng.normal(size=(25, 5)), rng.normal(size=(35, 5))
        a, b = rng.random(25) + 0.2, rng.random(35) + 0.2
        a, b = a / a.sum(), b / b.sum() * 0.9
    else:
        rng = np.random.default_rng(3)
        x, y = rng.normal(size=(6, 4)), rng.normal(size=(9, 4))
        a, b = np.full(6, 1 / 6), np.full(9, 1 / 9)
    C = cosine_matrix(x, y)
    pot_plan = ot.partial.entropic_partial_wasserstein(a, b, C, reg=reg, m=m, numItermax=100_000, stopThr=1e-15)
    out = _solve(x, y, m, a, b, epsilon=reg, tol=1e-13, max_iter=100_000, entropy="plan")
    ours = np.exp((np.asarray(out.f)[:, None] + np.asarray(out.g)[None, :] - C) / reg)
    assert bool(out.converged)
    np.testing.assert_allclose(ours, pot_plan, atol=1e-10, rtol=1e-7)
    assert abs(float(out.cost) - (pot_plan * C).sum()) < 1e-10


def test_augmented_and_plan_entropy_differ_but_share_the_limit(x64):
    """The two regularised problems are different (slack entropy), and meet as eps -> 0."""
    rng = np.random.default_rng(2)
    x, y = cone_clouds(rng, 20, 30, 6)
    kw = dict(tol=1e-11, max_iter=200_000)
    big = [_solve(x, y, 0.4, epsilon=0.1, entropy=e, **kw).cost for e in ("augmented", "plan")]
    small = [_solve(x, y, 0.4, epsilon=0.002, entropy=e, **kw).cost for e in ("augmented", "plan")]
    assert abs(big[0] - big[1]) > 1e-3
    assert abs(small[0] - small[1]) < 0.1 * abs(big[0] - big[1])


def test_full_mass_equals_balanced_ott_sinkhorn(x64):
    from ott.geometry import pointcloud
    from ott.problems.linear import linear_problem
    from ott.solvers.linear import sinkhorn

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(30, 4)), rng.normal(size=(30, 4))
    eps = 0.5  # costs up to ~30: both solvers converge well within 50k
    ours = _solve(x, y, 1.0, cost="sqeuclidean", epsilon=eps, tol=1e-12, max_iter=50_000)
    geom = pointcloud.PointCloud(jnp.asarray(x), jnp.asarray(y), epsilon=eps)
    ref = sinkhorn.Sinkhorn(threshold=1e-12, max_iterations=50_000)(linear_problem.LinearProblem(geom))
    assert bool(ours.converged) and bool(ref.converged)
    plan = np.exp((np.asarray(ours.f)[:, None] + np.asarray(ours.g)[None, :] - np.asarray(geom.cost_matrix)) / eps)
    np.testing.assert_allclose(plan, np.asarray(ref.matrix), atol=1e-10)
    assert abs(float(ours.cost) - float(jnp.sum(ref.matrix * geom.cost_matrix))) < 1e-9


@pytest.mark.parametrize("cost", ["cosine", "sqeuclidean"])
def test_blocked_equals_dense(x64, cost):
    rng = np.random.default_rng(4)
    x, y = cone_clouds(rng, 37, 53, 10)
    kw = dict(epsilon=0.02, tol=1e-11, max_iter=20_000)
    dense = _solve(x, y, 0.6, cost=cost, **kw)
    for bs in (8, 37, 64):  # remainder blocks, exact fit, one oversized block
        blocked = _solve(x, y, 0.6, cost=cost, block_size=bs, **kw)
        np.testing.assert_allclose(blocked.col_mass, dense.col_mass, atol=1e-10)
        np.testing.assert_allclose(blocked.row_mass, dense.row_mass, atol=1e-10)
        assert abs(float(blocked.cost) - float(dense.cost)) < 1e-10


def test_scaling_and_log_modes_agree(x64):
    rng = np.random.default_rng(5)
    x, y = cone_clouds(rng, 30, 45, 6)
    kw = dict(epsilon=0.005, tol=1e-10, max_iter=50_000)
    outs = [
        _solve(x, y, 0.3, mode=mode, one_pass=op, **kw)
        for mode, op in (("scaling", True), ("log", True), ("log", False))
    ]
    for o in outs[1:]:
        np.testing.assert_allclose(o.col_mass, outs[0].col_mass, atol=1e-9)
    assert all(bool(o.converged) for o in outs)


def test_stable_paths_give_the_same_answer():
    """float32, eps = 3e-4: the one-pass log reductions underflow at the start, and with
    absorption effectively disabled the scalings overflow; both stable paths are taken."""
    rng = np.random.default_rng(5)
    x, y = (z.astype(np.float32) for z in cone_clouds(rng, 60, 80, 16))
    kw = dict(epsilon=3e-4, tol=1e-4, max_iter=50_000)
    scaling = _solve(x, y, 0.3, mode="scaling", absorb_threshold=1e38, **kw)
    log = _solve(x, y, 0.3, mode="log", **kw)
    assert int(scaling.stable_steps) > 1 and int(log.stable_steps) >= 1
    assert bool(scaling.converged) and bool(log.converged)
    # both stop at an L1 marginal error below tol = 1e-4 (2.0e-6 apart since the stable step stopped
    # measuring its error: one more scaling iteration, 707 instead of 706; 1.3e-6 before)
    np.testing.assert_allclose(scaling.col_mass, log.col_mass, atol=5e-6)


def test_vmap_equals_loop():
    rng = np.random.default_rng(6)
    pairs = [cone_clouds(rng, 20, 30, 8) for _ in range(4)]
    xs = jnp.asarray(np.stack([p[0] for p in pairs]), jnp.float32)
    ys = jnp.asarray(np.stack([p[1] for p in pairs]), jnp.float32)
    ms = jnp.asarray([0.2, 0.4, 0.6, 0.8], jnp.float32)
    solver = PartialSinkhorn(epsilon=0.02, tol=1e-5, mode="log", one_pass=False)
    batch = solve_partial_batch(xs, ys, ms, solver=solver)
    for i in range(4):
        single = _solve(xs[i], ys[i], ms[i], epsilon=0.02, tol=1e-5, mode="log", one_pass=False)
        # tol 1e-5 bounds the L1 marginal error; the batched program sums in another order (float32)
        np.testing.assert_allclose(batch.col_mass[i], single.col_mass, rtol=5e-5, atol=1e-7)
        assert abs(int(batch.iterations[i]) - int(single.iterations)) <= 1  # f32 rounding at tol


@pytest.mark.parametrize("eps", [0.01, 0.003, 0.001])
def test_float32_finite_at_small_epsilon(eps):
    rng = np.random.default_rng(7)
    x, y = cone_clouds(rng, 150, 200, 32)
    r32 = solve_partial(
        x.astype(np.float32),
        y.astype(np.float32),
        0.6,
        solver=PartialSinkhorn(epsilon=eps, tol=1e-4, max_iter=20_000),
        options=SolveOptions(method="sinkhorn"),
    )
    assert np.isfinite(r32.cost) and np.all(np.isfinite(r32.col_mass)) and r32.converged
    r64 = solve_partial(
        x,
        y,
        0.6,
        solver=PartialSinkhorn(epsilon=eps, tol=1e-9, max_iter=50_000),
        options=SolveOptions(method="sinkhorn", dtype="float64"),
    )
    assert abs(r32.cost - r64.cost) / r64.cost < 2e-3
    assert abs(r32.mass - 0.6) < 1e-4


@pytest.mark.parametrize("cost", ["cosine", "sqeuclidean"])
@pytest.mark.parametrize("block_size", [None, 5])
def test_gradient_matches_finite_differences(x64, cost, block_size):
    rng = np.random.default_rng(8)
    x, y = jnp.asarray(rng.normal(size=(9, 3))), jnp.asarray(rng.normal(size=(12, 3)))
    solver = PartialSinkhorn(epsilon=0.1, tol=1e-13, max_iter=100_000)

    @jax.jit
    def f(x, y):
        return entropic_partial_cost(x, y, 0.5, cost=cost, solver=solver, block_size=block_size)

    gx, gy = jax.jit(jax.grad(f, argnums=(0, 1)))(x, y)
    h = 1e-5
    for arg, g in ((0, gx), (1, gy)):
        base = [x, y]
        for idx in [(0, 0), (3, 1), (7 if arg == 0 else 11, 2)]:
            e = jnp.zeros_like(base[arg]).at[idx].set(h)
            plus = list(base)
            plus[arg] = base[arg] + e
            minus = list(base)
            minus[arg] = base[arg] - e
            fd = (f(*plus) - f(*minus)) / (2 * h)
            assert abs(float(g[idx]) - float(fd)) < 1e-6 * max(1.0, abs(float(fd)))


def test_gradients_in_the_weights_and_the_mass_match_finite_differences(x64):
    """The regularised cost's gradient in a, b and m (envelope theorem: f + gd, g + fd, -(fd + gd)),
    and jax.grad through solve_partial_batch equal to the single problems' gradients."""
    rng = np.random.default_rng(11)
    x, y = jnp.asarray(rng.normal(size=(9, 3))), jnp.asarray(rng.normal(size=(12, 3)))
    a, b = jnp.asarray(rng.uniform(0.5, 1.5, 9)), jnp.asarray(rng.uniform(0.5, 1.5, 12))
    a, b = a / a.sum(), b / b.sum() * 1.2
    solver = PartialSinkhorn(epsilon=0.1, tol=1e-13, max_iter=100_000)

    @jax.jit
    def f(a, b, m):
        return entropic_partial_cost(x, y, m, a=a, b=b, solver=solver)

    ga, gb, gm = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(a, b, 0.6)
    h = 1e-6
    for arg, grad, idx in ((0, ga, 2), (0, ga, 7), (1, gb, 0), (1, gb, 11)):
        e = jnp.zeros_like((a, b)[arg]).at[idx].set(h)
        args_p, args_m = [a, b, 0.6], [a, b, 0.6]
        args_p[arg], args_m[arg] = args_p[arg] + e, args_m[arg] - e
        fd = (f(*args_p) - f(*args_m)) / (2 * h)
        assert abs(float(grad[idx]) - float(fd)) < 1e-6 * max(1.0, abs(float(fd)))
    fd_m = (f(a, b, 0.6 + h) - f(a, b, 0.6 - h)) / (2 * h)
    assert abs(float(gm) - float(fd_m)) < 1e-6 * max(1.0, abs(float(fd_m)))

    xs, ys = jnp.stack([x, x + 0.1]), jnp.stack([y, y - 0.2])
    batch_solver = PartialSinkhorn(epsilon=0.1, tol=1e-13, max_iter=100_000, one_pass=False)
    total = jax.grad(lambda xs: solve_partial_batch(xs, ys, 0.5, solver=batch_solver).reg_cost.sum())(xs)
    for i in range(2):
        one = jax.grad(lambda x, y: entropic_partial_cost(x, y, 0.5, solver=batch_solver))(xs[i], ys[i])
        np.testing.assert_allclose(total[i], one, atol=1e-9)


def test_auto_falls_back_to_exact_when_sinkhorn_stops_early():
    rng = np.random.default_rng(9)
    x, y = cone_clouds(rng, 20, 25, 5)
    sk = solve_partial(
        x, y, 0.5, solver=PartialSinkhorn(epsilon=0.001, max_iter=3), options=SolveOptions(method="sinkhorn")
    )
    assert not sk.converged and sk.method == "sinkhorn"
    auto = solve_partial(
        x, y, 0.5, solver=PartialSinkhorn(epsilon=0.001, max_iter=3), options=SolveOptions(method="auto")
    )
    exact = solve_partial(x, y, 0.5, options=SolveOptions(method="exact"))
    assert auto.method == "exact-emd" and "did not converge in 3 iterations" in auto.fallback_reason
    assert auto.cost == pytest.approx(exact.cost, abs=1e-12)


def test_memory_budget_switches_to_blocked_mode():
    rng = np.random.default_rng(10)
    x, y = cone_clouds(rng, 60, 80, 8)
    dense = solve_partial(x, y, 0.5, solver=PartialSinkhorn(epsilon=0.05), options=SolveOptions(method="sinkhorn"))
    small = solve_partial(
        x,
        y,
        0.5,
        solver=PartialSinkhorn(epsilon=0.05),
        options=SolveOptions(method="sinkhorn", memory_budget=4 * 60 * 10),
    )
    assert not dense.blocked and dense.plan is not None and dense.plan.shape == (60, 80)
    assert small.blocked and small.plan is None
    np.testing.assert_allclose(small.col_mass, dense.col_mass, atol=2e-6)


class _Device:
    """A stand-in for a JAX device: its platform and memory_stats() (None where it reports none)."""

    def __init__(self, platform, limit=None):
        self.platform, self._limit = platform, limit

    def memory_stats(self):
        return None if self._limit is None else {"bytes_limit": self._limit, "bytes_in_use": 0}


def test_auto_memory_budget_is_a_share_of_the_accelerators_memory():
    from puaudit_jax.ot.solve import DEVICE_MEMORY_SHARE, HOST_MEMORY_BUDGET, memory_budget_of

    gpu80, gpu40 = _Device("gpu", 80 << 30), _Device("gpu", 40 << 30)
    assert memory_budget_of([gpu80]) == int(DEVICE_MEMORY_SHARE * (80 << 30))
    assert memory_budget_of([gpu80, gpu40]) == int(DEVICE_MEMORY_SHARE * (40 << 30))  # the smallest device
    assert memory_budget_of([_Device("cpu", 64 << 30)]) == HOST_MEMORY_BUDGET  # host memory is shared
    assert memory_budget_of([gpu80, _Device("tpu")]) == HOST_MEMORY_BUDGET  # a device that reports no limit
    assert memory_budget_of(jax.devices()) == HOST_MEMORY_BUDGET  # the tests run on the CPU


@pytest.mark.parametrize("mode", ["scaling", "log"])
def test_epsilon_scaling_reaches_the_same_solution(x64, mode):
    rng = np.random.default_rng(11)
    x, y = cone_clouds(rng, 30, 40, 6)
    kw = dict(epsilon=0.003, tol=1e-10, max_iter=50_000, mode=mode)
    plain = _solve(x, y, 0.5, **kw)
    scaled = _solve(x, y, 0.5, eps_decay=0.5, eps_steps=5, **kw)
    assert bool(plain.converged) and bool(scaled.converged)
    assert float(scaled.epsilon) == pytest.approx(0.003)
    np.testing.assert_allclose(scaled.col_mass, plain.col_mass, atol=1e-9)


@pytest.mark.parametrize(
    "kw",
    [
        dict(mode="scaling"),
        dict(mode="log"),
        dict(mode="log", one_pass=False),
        dict(mode="log", block=8),
        dict(entropy="plan"),
    ],
)
def test_zero_weight_padding_changes_nothing(x64, kw):
    """Points with zero weight (how the audit pads problems to a few compiled shapes) get no mass
    and leave the solution, the costs and the iteration path of the real points unchanged."""
    rng = np.random.default_rng(11)
    x, y = cone_clouds(rng, 13, 29, 6)
    kw = dict(kw)
    block = kw.pop("block", None)
    opts = dict(epsilon=0.02, tol=1e-11, max_iter=20_000, **kw)
    plain = _solve(x, y, 0.6, block_size=block, **opts)
    xp = np.concatenate([x, x[:3]])  # 3 padded rows, 7 padded columns
    yp = np.concatenate([y, y[:7]])
    a = np.r_[np.full(13, 1 / 13), np.zeros(3)]
    b = np.r_[np.full(29, 1 / 29), np.zeros(7)]
    padded = _solve(xp, yp, 0.6, a, b, block_size=block, **opts)
    assert bool(padded.converged)
    np.testing.assert_allclose(padded.col_mass[:29], plain.col_mass, atol=1e-10)
    np.testing.assert_allclose(padded.row_mass[:13], plain.row_mass, atol=1e-10)
    assert float(jnp.abs(padded.col_mass[29:]).max()) == 0 and float(jnp.abs(padded.row_mass[13:]).max()) == 0
    for field in ("cost", "reg_cost", "mass"):
        assert float(getattr(padded, field)) == pytest.approx(float(getattr(plain, field)), abs=1e-10)
    exact_plain = solve_partial(x, y, 0.6, options=SolveOptions(method="exact"))
    exact_padded = solve_partial(xp, yp, 0.6, options=SolveOptions(method="exact"), a=a, b=b)
    assert float(exact_padded.cost) == pytest.approx(float(exact_plain.cost), abs=1e-9)
