"""The mass path (``puaudit_jax.ot.mass_path``): one compiled, warm-started call over a grid of
masses equals independent solves at the same tolerance, with a certificate per mass."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from puaudit_jax.ot import PartialSinkhorn, SolveOptions, solve_mass_path, solve_partial
from puaudit_jax.ot import exact as exact_lib
from tests.ot.ot_cases import cone_clouds, cosine_matrix

MASSES = np.array([0.1, 0.3, 0.5, 0.7, 0.9])


@pytest.fixture(scope="module")
def clouds():
    return cone_clouds(np.random.default_rng(0), 60, 90, 8)


def test_the_path_equals_independent_solves(clouds):
    x, y = clouds
    path = solve_mass_path(
        x, y, MASSES, solver=PartialSinkhorn(epsilon=0.01, tol=1e-6, relaxation="auto", certify=True), dtype="float64"
    )  # over-relaxed (auto)
    cold = solve_mass_path(
        x,
        y,
        MASSES,
        solver=PartialSinkhorn(epsilon=0.01, tol=1e-6, relaxation=1.0, certify=True),
        dtype="float64",
        warm_start=False,
    )
    assert path.converged.all() and path.col_mass.shape == (5, 90) and path.row_mass.shape == (5, 60)
    for i, m in enumerate(MASSES):
        one = solve_partial(
            x,
            y,
            m,
            solver=PartialSinkhorn(epsilon=0.01, tol=1e-6, certify=True),
            options=SolveOptions(method="sinkhorn", dtype="float64"),
        )
        np.testing.assert_allclose(path.col_mass[i], one.col_mass, atol=1e-6)
        assert path.cost[i] == pytest.approx(one.cost, abs=1e-6)
        assert path.upper[i] == pytest.approx(one.certificate.upper, abs=1e-6)
        assert one.iterations == cold.iterations[i]  # the cold path is the independent solves
    np.testing.assert_allclose(path.col_mass.sum(1), MASSES, atol=1e-5)
    assert path.iterations[1:].sum() < cold.iterations[1:].sum()  # warm start and relaxation save iterations


def test_the_path_certificates_bracket_the_exact_costs(clouds):
    x, y = clouds
    path = solve_mass_path(
        x, y, MASSES, solver=PartialSinkhorn(epsilon=0.005, tol=1e-6, relaxation="auto", certify=True), dtype="float64"
    )
    C, a, b = cosine_matrix(x, y), np.full(60, 1 / 60), np.full(90, 1 / 90)
    exact = np.array([exact_lib.solve_exact(C, a, b, m).cost for m in MASSES])
    assert (path.lower <= exact + 1e-9).all() and (exact <= path.upper + 1e-9).all()
    assert (path.gap == path.upper - path.lower).all() and np.diff(exact).min() > 0


def test_bad_grids_are_named(clouds):
    x, y = clouds
    with pytest.raises(ValueError, match="m must lie in"):
        solve_mass_path(x, y, [0.2, 1.5])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        solve_mass_path(x, y, [])
    with pytest.raises(ValueError, match="ms must be masses"):  # True was read as the mass 1.0
        solve_mass_path(x, y, [True, 0.5])
    with pytest.raises(ValueError, match="ms must be masses"):
        solve_mass_path(x, y, ["0.2", "0.5"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        # epsilon=0 gave NaN costs with only converged=False; float16 overflowed; strings were cast
        (dict(epsilon=0.0), r"epsilon must be positive and finite"),
        (dict(epsilon=float("inf")), r"epsilon must be positive and finite"),
        (dict(epsilon="0.01"), r"epsilon must be positive and finite"),
        (dict(tol=float("inf")), r"tol must be positive and finite"),
        (dict(tol="0.01"), r"tol must be positive and finite"),
        (dict(max_iter=0), r"max_iter must be a positive integer"),
        (dict(max_iter=10.5), r"max_iter must be a positive integer"),
        (dict(dtype="float16"), r"dtype must be one of \('float32', 'float64'\)"),
        (dict(certify="no"), r"certify must be True or False"),
        (dict(warm_start=None), r"warm_start must be True or False"),
        (dict(prepare="gpu"), r"prepare must be one of"),
        (dict(relaxation=0.5), r"relaxation must be 'auto' or a number in \[1, 2\)"),
        (dict(cost=np.ones((60, 90))), r"cost must be 'cosine', 'sqeuclidean' or a callable"),
    ],
)
def test_bad_settings_are_named(clouds, kwargs, match):
    """Every setting is checked before any solve: the solver's when it is built, the rest by the path."""
    x, y = clouds
    names = {f.name for f in dataclasses.fields(PartialSinkhorn)}
    with pytest.raises(ValueError, match=match):
        solver = PartialSinkhorn(**{k: v for k, v in kwargs.items() if k in names})
        solve_mass_path(x, y, MASSES[:2], solver, **{k: v for k, v in kwargs.items() if k not in names})


def test_the_cosine_path_ignores_the_length_of_the_rows(clouds):
    """Rows are scaled to unit norm on the host and the geometry skips its own normalisation
    (``normalised=True``): without the host step the cost would read 1 - <x, y> of raw rows."""
    x, y = clouds
    lengths = np.random.default_rng(1).uniform(0.1, 50.0, size=(len(x), 1))
    ref = solve_mass_path(
        x,
        y,
        MASSES[:2],
        solver=PartialSinkhorn(epsilon=0.02, tol=1e-6, certify=False, relaxation="auto"),
        dtype="float64",
    )
    res = solve_mass_path(
        x * lengths,
        y * 7.0,
        MASSES[:2],
        solver=PartialSinkhorn(epsilon=0.02, tol=1e-6, certify=False, relaxation="auto"),
        dtype="float64",
    )
    np.testing.assert_allclose(res.cost, ref.cost, atol=1e-9)
    np.testing.assert_allclose(res.col_mass, ref.col_mass, atol=1e-9)


@pytest.mark.parametrize("cost", ["cosine", "sqeuclidean"])
def test_jax_points_are_prepared_on_their_device_and_give_the_hosts_path(clouds, cost, monkeypatch):
    """float32 JAX arrays are checked and normalised where they are (``prepare="auto"``): the device pass receives
    the caller's arrays themselves, not host copies (the transfer guard, which bites on accelerators only, lets
    just the explicit reads of results and of the check's scalars through); the path equals the host-prepared
    one. A NaN is named as on the host."""
    import jax
    import jax.numpy as jnp

    import puaudit_jax.ot.solve as solve_module

    seen, real = [], solve_module.checked_on_device
    monkeypatch.setattr(solve_module, "checked_on_device", lambda x, y, c: seen.append((x, y)) or real(x, y, c))
    x, y = (z.astype(np.float32) * 3.0 for z in clouds)
    solver = PartialSinkhorn(epsilon=0.02, tol=1e-5, certify=True, relaxation="auto")
    ref = solve_mass_path(x, y, MASSES[:3], solver, cost=cost, prepare="host")
    assert not seen
    jx, jy = jnp.asarray(x), jnp.asarray(y)
    with jax.transfer_guard_device_to_host("disallow"):
        res = solve_mass_path(jx, jy, MASSES[:3], solver, cost=cost)
    assert len(seen) == 1 and seen[0][0] is jx and seen[0][1] is jy
    np.testing.assert_allclose(res.col_mass, ref.col_mass, atol=1e-6)
    np.testing.assert_allclose(res.upper, ref.upper, atol=1e-6)
    assert np.abs(res.iterations - ref.iterations).max() <= 1  # float32 rsqrt against float64 norms: last bits
    bad = y.copy()
    bad[4, 2] = np.inf
    for points, prepare in ((bad, "host"), (bad, "device"), (jnp.asarray(bad), "auto")):
        with pytest.raises(ValueError, match=r"y contains NaN or inf \(first at index \[4, 2\]\)"):
            solve_mass_path(x, points, MASSES[:2], solver, cost=cost, prepare=prepare)


def test_unsorted_repeated_and_full_masses_equal_lone_solves():
    """After m = |a| = |b| a dummy has no mass and potential -inf; the next mass warm-started from it came
    back NaN. Every mass of the path, in any order, equals its own solve."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(18, 3)), rng.normal(size=(27, 3))
    for ms in ([1.0, 0.5, 0.5], [0.2, 1.0, 0.3], [0.9, 0.1, 0.9]):  # one length: one compiled path
        path = solve_mass_path(x, y, ms, solver=PartialSinkhorn(epsilon=0.05, certify=False, relaxation="auto"))
        assert path.converged.all() and np.isfinite(path.col_mass).all(), ms
        for i, m in enumerate(ms):
            lone = solve_partial(
                x, y, m, solver=PartialSinkhorn(epsilon=0.05, certify=False), options=SolveOptions(method="sinkhorn")
            )
            np.testing.assert_allclose(path.col_mass[i], lone.col_mass, atol=2e-4, err_msg=f"{ms}, m = {m}")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(solver=PartialSinkhorn(epsilon=1e-40)), r"epsilon=1e-40 in float32 \(too small: .*larger epsilon"),
        (dict(solver=PartialSinkhorn(epsilon=1e300)), r"epsilon=1e\+300 in float32 \(too large: .*smaller epsilon"),
        (dict(cost="sqeuclidean", big=1e200), r"x, y: coordinates of magnitude 1.0e\+200 .* overflow"),
        (dict(cost="sqeuclidean", big=1e20), r"x, y: coordinates of magnitude 1.0e\+20 .* float32"),
    ],
)
def test_a_path_that_would_be_nan_is_an_error(kwargs, match):
    """Issue 40: an epsilon out of range gave costs [nan nan] (converged False), and a coordinate of 1e200
    (1e20 in float32) under sqeuclidean gave [nan], with converged True, where solve_partial names it."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(5, 3)), rng.normal(size=(6, 3))
    y[0, 0] = kwargs.pop("big", y[0, 0])
    with pytest.raises(ValueError, match=match):
        solve_mass_path(x, y, [0.5, 0.7], **kwargs)
