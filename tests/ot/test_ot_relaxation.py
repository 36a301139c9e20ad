"""Over-relaxed Sinkhorn (``puaudit_jax.ot.relaxation``): the same solution as plain Sinkhorn in
every mode, far fewer iterations where plain Sinkhorn crawls, and a controller that follows
Young's SOR relation and backs off when the error blows up."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from puaudit_jax.ot import Geometry, PartialProblem, PartialSinkhorn, SolveOptions, solve_partial, solve_partial_batch
from puaudit_jax.ot import relaxation as rx
from tests.ot.ot_cases import cone_clouds


@functools.partial(jax.jit, static_argnames=("solver", "block_size"))
def _jitted(x, y, a, b, m, solver, block_size):
    return solver(PartialProblem(Geometry.from_points(x, y, "cosine", block_size=block_size), a, b, m))


def _solve(x, y, m, a=None, b=None, block_size=None, **kw):
    """One compiled solve (uniform weights unless a, b are given)."""
    x, y = jnp.asarray(x), jnp.asarray(y)
    a = jnp.full(x.shape[0], 1 / x.shape[0], x.dtype) if a is None else jnp.asarray(a, x.dtype)
    b = jnp.full(y.shape[0], 1 / y.shape[0], y.dtype) if b is None else jnp.asarray(b, x.dtype)
    return _jitted(x, y, a, b, jnp.asarray(m, x.dtype), PartialSinkhorn(**kw), block_size)


#: a slow problem: m near the fraction of U in P's cone (0.7), small eps
SLOW = dict(m=0.75, epsilon=0.005)


@pytest.fixture(scope="module")
def slow_clouds():
    return cone_clouds(np.random.default_rng(3), 60, 90, 8)


@pytest.mark.parametrize(
    ("kw", "relaxation"),
    [(dict(mode="scaling"), "auto"), (dict(mode="log", block_size=16), "auto"), (dict(mode="log"), 1.5)],
)
def test_relaxed_sinkhorn_reaches_the_plain_solution(x64, slow_clouds, kw, relaxation):
    x, y = slow_clouds
    opts = dict(epsilon=SLOW["epsilon"], tol=1e-10, max_iter=50_000, **kw)
    plain = _solve(x, y, SLOW["m"], **opts)
    fast = _solve(x, y, SLOW["m"], relaxation=relaxation, **opts)
    assert bool(plain.converged) and bool(fast.converged)
    np.testing.assert_allclose(fast.col_mass, plain.col_mass, atol=1e-9)
    np.testing.assert_allclose(fast.row_mass, plain.row_mass, atol=1e-9)
    assert float(fast.cost) == pytest.approx(float(plain.cost), abs=1e-9)
    assert int(fast.iterations) < int(plain.iterations)


def test_auto_relaxation_cuts_the_iterations_of_a_slow_problem(x64, slow_clouds):
    x, y = slow_clouds
    opts = dict(epsilon=SLOW["epsilon"], tol=1e-8, max_iter=50_000)
    plain = _solve(x, y, SLOW["m"], **opts)
    auto = _solve(x, y, SLOW["m"], relaxation="auto", **opts)
    assert int(plain.iterations) > 500  # measured 855
    assert int(auto.iterations) < int(plain.iterations) / 4  # measured 119


def test_a_fast_problem_stays_plain(x64, slow_clouds):
    """A solve that converges within two windows never measures a rate: bit-identical to plain."""
    x, y = slow_clouds
    plain = _solve(x, y, 0.3, epsilon=0.05, tol=1e-4)
    auto = _solve(x, y, 0.3, epsilon=0.05, tol=1e-4, relaxation="auto")
    assert int(plain.iterations) < 2 * rx.WINDOW
    np.testing.assert_array_equal(np.asarray(auto.col_mass), np.asarray(plain.col_mass))


@pytest.mark.parametrize("mode", ["scaling", "log"])
def test_full_mass_and_zero_weight_padding_with_relaxation(x64, mode):
    """m = min(|a|, |b|) (empty dummies, pinned scalings) and zero-weight points (pinned to 1)."""
    rng = np.random.default_rng(11)
    x, y = cone_clouds(rng, 13, 29, 6)
    xp, yp = np.concatenate([x, x[:3]]), np.concatenate([y, y[:7]])
    a = np.r_[np.full(13, 1 / 13), np.zeros(3)]
    b = np.r_[np.full(29, 1 / 29), np.zeros(7)]
    opts = dict(epsilon=0.005, tol=1e-10, max_iter=50_000, mode=mode)
    for m in (1.0, 0.6):
        plain = _solve(x, y, m, **opts)
        padded = _solve(xp, yp, m, a, b, relaxation="auto", **opts)
        assert bool(padded.converged)
        np.testing.assert_allclose(padded.col_mass[:29], plain.col_mass, atol=1e-9)
        assert float(jnp.abs(padded.col_mass[29:]).max()) == 0 and float(jnp.abs(padded.row_mass[13:]).max()) == 0


def test_vmapped_relaxed_solves_equal_single_ones():
    rng = np.random.default_rng(6)
    pairs = [cone_clouds(rng, 20, 30, 8) for _ in range(3)]
    xs = jnp.asarray(np.stack([p[0] for p in pairs]), jnp.float32)
    ys = jnp.asarray(np.stack([p[1] for p in pairs]), jnp.float32)
    ms = jnp.asarray([0.3, 0.7, 0.9], jnp.float32)
    opts = dict(epsilon=0.005, tol=1e-5, max_iter=20_000, mode="log", one_pass=False, relaxation="auto")
    batch = solve_partial_batch(xs, ys, ms, solver=PartialSinkhorn(**opts))
    assert bool(batch.converged.all())
    for i in range(3):
        single = _solve(xs[i], ys[i], ms[i], **opts)
        np.testing.assert_allclose(batch.col_mass[i], single.col_mass, atol=2e-6)


def test_solve_partial_passes_the_relaxation_on(x64, slow_clouds):
    x, y = slow_clouds
    solver = PartialSinkhorn(epsilon=SLOW["epsilon"], tol=1e-8, max_iter=50_000)
    options = SolveOptions(method="sinkhorn", dtype="float64")
    plain = solve_partial(x, y, SLOW["m"], solver, options)
    auto = solve_partial(x, y, SLOW["m"], dataclasses.replace(solver, relaxation="auto"), options)
    assert auto.iterations < plain.iterations / 4
    assert auto.cost == pytest.approx(plain.cost, abs=1e-7)


def _sor_rate(eta, omega):
    """The largest root mu of Young's relation (mu + omega - 1)^2 = omega^2 eta mu (real when
    omega <= omega*(eta))."""
    p = omega**2 * eta - 2 * (omega - 1)
    return (p + np.sqrt(max(p**2 - 4 * (omega - 1) ** 2, 0.0))) / 2


@pytest.mark.parametrize(("eta", "omega"), [(0.5, 1.0), (0.5, 1.1), (0.9, 1.0), (0.9, 1.4), (0.99, 1.0), (0.99, 1.7)])
def test_the_controller_inverts_youngs_relation(x64, eta, omega):
    assert omega <= 2 / (1 + np.sqrt(1 - eta))  # below omega*, where the rate is real
    mu = _sor_rate(eta, omega)
    assert float(rx.plain_rate(jnp.asarray(mu), jnp.asarray(omega))) == pytest.approx(eta, rel=1e-9)
    w = 2 / (1 + np.sqrt(1 - eta))  # omega*: the discriminant vanishes and the rate is omega* - 1
    assert float(rx.optimal_omega(jnp.asarray(eta))) == pytest.approx(min(w, rx.OMEGA_MAX), rel=1e-12)
    assert _sor_rate(eta, w) == pytest.approx(w - 1, abs=1e-6) and _sor_rate(eta, omega) > w - 1 - 1e-12


def test_the_controller_acts_at_checkpoints_raises_omega_and_backs_off(x64):
    state = rx.start("auto", jnp.float64)
    w = rx.WINDOW
    state = rx.update(state, jnp.asarray(w), jnp.asarray(1.0))  # first mark
    assert float(state.omega) == 1.0 and float(state.mark) == 1.0
    off = rx.update(state, jnp.asarray(w + 3), jnp.asarray(0.5))  # not a checkpoint
    assert off == state
    state = rx.update(state, jnp.asarray(2 * w), jnp.asarray(0.99**w))  # plain rate 0.99
    assert float(state.omega) == pytest.approx(float(rx.optimal_omega(jnp.asarray(0.99))))
    raised = float(state.omega)
    blown = rx.update(state, jnp.asarray(3 * w), jnp.asarray(rx.BLOWUP * 0.99**w * 1.01))
    assert float(blown.omega) == pytest.approx(1 + (raised - 1) / 2)
    fixed = rx.update(rx.start(1.5, jnp.float64), jnp.asarray(w), jnp.asarray(1.0))
    fixed = rx.update(fixed, jnp.asarray(2 * w), jnp.asarray(0.01))
    assert float(fixed.omega) == 1.5  # a fixed omega is not raised


@pytest.mark.parametrize("bad", [2.0, 0.9, "fast", True, None])
def test_bad_relaxations_are_named(bad):
    with pytest.raises(ValueError, match="relaxation"):
        PartialSinkhorn(relaxation=bad)


def test_plan_entropy_refuses_relaxation():
    with pytest.raises(ValueError, match="relaxation"):
        PartialSinkhorn(entropy="plan", relaxation="auto")
