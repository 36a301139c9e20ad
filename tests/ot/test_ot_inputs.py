"""Bad input raises ValueError naming the argument; property tests of the constraints."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from puaudit_jax.ot import Geometry, PartialProblem, PartialSinkhorn, SolveOptions, solve_partial

rng = np.random.default_rng(0)
X, Y = rng.normal(size=(5, 3)), rng.normal(size=(7, 3))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(m=0.0), r"m must lie in \(0, min"),
        (dict(m=-0.1), r"m must lie in \(0, min"),
        (dict(m=1.5), r"m must lie in \(0, min"),
        (dict(m=float("nan")), r"m must lie in"),
        (dict(m="half"), r"m must be a number"),
        # a bool and a numeric string were read as masses (float(True) == 1.0, float("0.5") == 0.5)
        (dict(m=True), r"m must be a number \(the mass to transport\); got True"),
        (dict(m="0.5"), r"m must be a number \(the mass to transport\); got '0.5'"),
        # 1e200 squared overflowed with an OverflowError naming nothing
        (dict(x=X * 1e200, cost="sqeuclidean"), r"x, y: coordinates of magnitude .* above the largest float32"),
        (dict(x=X * 1e200, cost="sqeuclidean", method="exact"), r"above the largest float64"),
        # potentials of order epsilon overflow float32: NaN results came back as a plain result
        (dict(epsilon=1e38, method="sinkhorn"), r"Sinkhorn produced non-finite values at epsilon=1e\+38 in float32"),
        (dict(m=0.6, a=np.full(5, 0.1)), r"\(0, 0.5\]"),
        (dict(x=np.vstack([X[:4], [np.nan, 0, 0]])), r"x contains NaN or inf \(first at index \[4, 0\]\)"),
        (dict(y=np.vstack([Y[:6], [0, np.inf, 0]])), r"y contains NaN or inf"),
        (dict(x=np.vstack([X[:4], [0, 0, 0]])), r"x row 4 is a zero vector"),
        (dict(y=np.vstack([[0, 0, 0], Y[1:]])), r"y row 0 is a zero vector"),
        (dict(y=rng.normal(size=(7, 4))), r"dimension mismatch: x has d=3, y has d=4"),
        (dict(x=X[0]), r"x must be 2-D"),
        (dict(x=np.zeros((0, 3))), r"x: empty point cloud"),
        (dict(a=-np.full(5, 0.2)), r"a has negative entries"),
        (dict(b=np.zeros(7)), r"b sums to zero"),
        (dict(a=np.full(4, 0.25)), r"a must have shape \(5,\)"),
        (dict(a=np.array([0.2, 0.2, np.nan, 0.2, 0.2])), r"a contains NaN"),
        (dict(cost="manhattan"), r"cost must be 'cosine', 'sqeuclidean'"),
        (dict(method="lp"), r"method must be one of"),
        (dict(epsilon=0.0), r"epsilon must be positive"),
        (dict(dtype="float16"), r"dtype must be"),
        # an infinite tol called any plan converged (marginal error 0.71, converged=True)
        (dict(tol=float("inf")), r"tol must be positive and finite"),
        (dict(tol=float("nan")), r"tol must be positive and finite"),
        (dict(tol=0.0), r"tol must be positive and finite"),
        # a string where a number belongs was a TypeError from a comparison
        (dict(gap_tol="0.01"), r"gap_tol must be positive and finite"),
        (dict(epsilon="0.01"), r"epsilon must be positive and finite"),
        (dict(gap_tol=float("inf")), r"gap_tol must be positive and finite"),
        (dict(memory_budget=0), r"memory_budget must be 'auto' or a positive integer"),
        (dict(memory_budget="big"), r"memory_budget must be 'auto' or a positive integer"),
        (dict(certify="yes"), r"certify must be True or False"),
        (dict(relaxation=2.5), r"relaxation must be 'auto' or a number in \[1, 2\)"),
        (dict(prepare="gpu"), r"prepare must be one of"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = dict(x=X, y=Y, m=0.5)
    args.update(kwargs)
    x, y, m = args.pop("x"), args.pop("y"), args.pop("m")
    with pytest.raises(ValueError, match=match):  # the settings' errors come from building their configs
        solve_partial(x, y, m, **_configs(args))


def _configs(kwargs: dict) -> dict:
    """``solve_partial``'s keywords with the settings built into ``solver=`` / ``options=``."""
    out = {}
    for arg, config in (("solver", PartialSinkhorn), ("options", SolveOptions)):
        names = {f.name for f in dataclasses.fields(config)}
        if names & kwargs.keys():
            out[arg] = config(**{k: kwargs.pop(k) for k in names & kwargs.keys()})
    return {**out, **kwargs}


def test_zero_rows_are_fine_for_sqeuclidean():
    x = np.vstack([X[:4], [0, 0, 0]])
    assert solve_partial(x, Y, 0.5, options=SolveOptions(method="exact"), cost="sqeuclidean").mass == pytest.approx(0.5)


def test_bad_cost_matrix():
    with pytest.raises(ValueError, match="cost contains NaN"):
        solve_partial(None, None, 0.5, cost=np.array([[0.0, np.nan], [1.0, 2.0]]))
    with pytest.raises(ValueError, match="cost matrix must be 2-D"):
        solve_partial(None, None, 0.5, cost=np.ones(3))
    with pytest.raises(ValueError, match="does not match x rows"):
        solve_partial(X, None, 0.5, cost=np.ones((4, 7)))


def test_bad_solver_settings():
    with pytest.raises(ValueError, match="mode must be"):
        PartialSinkhorn(mode="fast")
    with pytest.raises(ValueError, match="entropy must be"):
        PartialSinkhorn(entropy="kl")
    with pytest.raises(ValueError, match="matmul_precision must be"):
        PartialSinkhorn(matmul_precision="tf32")
    for kwargs, match in [
        (dict(max_iter=0), "max_iter must be a positive integer"),
        (dict(max_iter=2.5), "max_iter must be a positive integer"),
        (dict(block_size=0), "block_size must be a positive integer"),
        (dict(eps_decay=1.5), "eps_decay must lie in"),
    ]:
        with pytest.raises(ValueError, match=match):
            solve_partial(X, Y, 0.5, **_configs(kwargs))


@pytest.mark.parametrize("mode", ["scaling", "log"])
def test_converged_means_the_constraints_hold_after_an_epsilon_jump(mode):
    """A steep epsilon schedule (2 -> 0.01 after 10 iterations): the error measured at eps = 2
    must not count as convergence at eps = 0.01 (it once returned converged=True with mass 0)."""
    solver = PartialSinkhorn(epsilon=0.01, eps_decay=1e-3, mode=mode)
    geom = Geometry.from_points(jnp.asarray(X, jnp.float32), jnp.asarray(Y, jnp.float32))
    a, b = jnp.full(len(X), 1.0 / len(X)), jnp.full(len(Y), 1.0 / len(Y))
    out = solver(PartialProblem(geom, a, b, jnp.float32(0.5)))
    assert int(out.iterations) > 10
    assert bool(out.converged) and float(out.marginal_error) < 10 * solver.tol
    assert float(out.mass) == pytest.approx(0.5, abs=1e-3)
    res = solve_partial(X, Y, 0.5, solver=PartialSinkhorn(eps_decay=1e-3))
    assert res.converged and res.mass == pytest.approx(0.5, abs=1e-3) and res.marginal_error < 1e-3


def test_m_at_the_full_mass_is_accepted():
    res = solve_partial(
        X, Y, 1.0, solver=PartialSinkhorn(epsilon=0.05, tol=1e-6), options=SolveOptions(method="sinkhorn")
    )
    assert res.converged and res.mass == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(res.row_mass, 0.2, atol=1e-5)  # every row is saturated


problems = st.tuples(
    st.integers(2, 9),
    st.integers(2, 9),
    st.integers(1, 4),
    st.floats(0.02, 1.0),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)


@settings(max_examples=40, deadline=None)
@given(problems)
def test_exact_plan_satisfies_the_constraints(p):
    n, k, d, m_frac, uniform, seed = p
    r = np.random.default_rng(seed)
    x, y = r.normal(size=(n, d)), r.normal(size=(k, d))
    a = np.full(n, 1 / n) if uniform else r.random(n) + 0.05
    b = np.full(k, 1 / k) if uniform else r.random(k) + 0.05
    m = m_frac * min(a.sum(), b.sum())
    res = solve_partial(x, y, m, options=SolveOptions(method="exact"), a=a, b=b, cost="sqeuclidean")
    assert np.all(res.plan >= -1e-15)
    assert np.all(res.row_mass <= a + 1e-12) and np.all(res.col_mass <= b + 1e-12)
    assert res.mass == pytest.approx(m, abs=1e-10)
    # Optimality against the LP written directly (no dummy points).
    lp = solve_partial(
        x, y, m, options=SolveOptions(method="exact", exact_backend="highs"), a=a, b=b, cost="sqeuclidean"
    )
    assert res.cost == pytest.approx(lp.cost, abs=1e-7 * max(1.0, abs(lp.cost)))


# A few fixed shapes: each new shape is a new compilation of the jitted solver.
sinkhorn_problems = st.tuples(
    st.sampled_from([(3, 4), (7, 5)]), st.floats(0.02, 1.0), st.booleans(), st.integers(0, 2**31 - 1)
)


@settings(max_examples=30, deadline=None)
@given(sinkhorn_problems)
def test_sinkhorn_plan_satisfies_the_constraints(p):
    (n, k), m_frac, uniform, seed = p
    d = 3
    r = np.random.default_rng(seed)
    x, y = r.normal(size=(n, d)), r.normal(size=(k, d))
    a = np.full(n, 1 / n) if uniform else (r.random(n) + 0.05) / n
    b = np.full(k, 1 / k) if uniform else (r.random(k) + 0.05) / k
    m = m_frac * min(a.sum(), b.sum())
    res = solve_partial(
        x,
        y,
        m,
        solver=PartialSinkhorn(epsilon=0.05, tol=1e-9, max_iter=50_000),
        options=SolveOptions(method="sinkhorn", dtype="float64"),
        a=a,
        b=b,
    )
    assert res.converged
    assert res.marginal_error < 1e-7
    assert np.all(res.plan >= 0) and abs(res.mass - m) < 1e-8
    exact = solve_partial(x, y, m, options=SolveOptions(method="exact"), a=a, b=b)
    assert res.cost >= exact.cost - 1e-7  # a feasible plan cannot beat the optimum


def _as(kind: str, z: np.ndarray):
    """``z`` as float64 numpy, float32 numpy or a float32 JAX array."""
    return {"float64": z, "float32": z.astype(np.float32), "jax": jnp.asarray(z, jnp.float32)}[kind]


# (points, SolveOptions.prepare): float32 points are checked and normalised where ``prepare`` says
KINDS = [("float64", "auto"), ("float32", "host"), ("float32", "device"), ("jax", "auto")]


# float32 points are checked where they are solved; the errors are the host's, word for word
DEVICE_CASES = [
    (dict(x=np.vstack([X[:4], [np.nan, 0, 0]])), r"x contains NaN or inf \(first at index \[4, 0\]\)"),
    (dict(y=np.vstack([Y[:6], [0, np.inf, np.nan]])), r"y contains NaN or inf \(first at index \[6, 1\]\)"),
    (dict(x=np.vstack([X[:2], [0, 0, 0], X[3:4], [0, 0, 0]])), r"x row 2 is a zero vector: .* \(2 zero rows\)"),
    (dict(y=np.vstack([[0, 0, 0], Y[1:]])), r"y row 0 is a zero vector"),
    (dict(x=X * 1e-30, y=Y * 1e-30, cost="sqeuclidean"), r"every cost would read 0"),
    (dict(x=X * 1e30, cost="sqeuclidean"), r"above the largest float32"),
]


@pytest.mark.parametrize("kind, prepare", KINDS)
@pytest.mark.parametrize("kwargs, match", DEVICE_CASES)
def test_bad_points_raise_the_same_error_on_the_host_and_on_the_device(kwargs, match, kind, prepare):
    args = dict(x=X, y=Y, m=0.5, prepare=prepare)
    args.update(kwargs)
    x, y, m = _as(kind, args.pop("x")), _as(kind, args.pop("y")), args.pop("m")
    with pytest.raises(ValueError, match=match):
        solve_partial(x, y, m, **_configs(args))


def test_float32_points_are_not_copied_to_the_host_to_be_checked():
    """A JAX array passes validation untouched (the same object) and is checked and normalised on its device: no
    implicit device-to-host transfer, only the explicit read of a few scalars (the transfer guard bites on
    accelerators only: a CPU array is host memory, so here the identity carries the test)."""
    import jax

    from puaudit_jax.ot.problem import checked_on_device, validate

    x, y = _as("jax", X), _as("jax", Y)
    with jax.transfer_guard_device_to_host("disallow"):
        vx, vy, _, _, _, _ = validate(x, y, 0.5, on_device=True)
        ux, uy, scale = checked_on_device(vx, vy, "cosine")
    assert vx is x and vy is y and isinstance(ux, jax.Array)
    np.testing.assert_allclose(np.asarray(ux), X / np.linalg.norm(X, axis=1, keepdims=True), rtol=0, atol=2e-7)
    assert scale == pytest.approx(max(np.abs(X).max(), np.abs(Y).max()), rel=1e-6)


@pytest.mark.parametrize("kind, prepare", KINDS)
@pytest.mark.parametrize("scale", [1e20, 1e-30])
def test_cosine_cost_ignores_the_scale_of_the_rows(scale, kind, prepare):
    """Rows are normalised before the float32 solve, on the host in float64 or on the device after an exact
    power-of-two scaling: scaled by 1e20 their float32 norm overflowed (every cosine read 0: a wrong cost,
    converged=True), by 1e-30 it underflowed (NaN)."""
    ref = solve_partial(X, Y, 0.5, options=SolveOptions(method="sinkhorn"))
    options = SolveOptions(method="sinkhorn", prepare=prepare)
    res = solve_partial(_as(kind, X * scale), _as(kind, Y), 0.5, options=options)
    assert res.converged and res.method == "sinkhorn"
    assert res.cost == pytest.approx(ref.cost, abs=1e-6)
    np.testing.assert_allclose(res.col_mass, ref.col_mass, atol=1e-6)


def test_sqeuclidean_costs_that_vanish_in_float32_are_an_error_not_a_zero_cost():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(6, 3)) * 1e-30, rng.normal(size=(7, 3)) * 1e-30
    with pytest.raises(ValueError, match="every cost would read 0"):
        solve_partial(x, y, 0.5, cost="sqeuclidean")
    assert solve_partial(x, y, 0.5, options=SolveOptions(method="exact"), cost="sqeuclidean").cost > 0


@pytest.mark.parametrize(
    "kind, prepare, on_device",
    [
        ("float32", "auto", False),
        ("jax", "auto", True),
        ("float32", "device", True),
        ("jax", "host", False),
        ("float64", "device", False),
    ],  # fmt: skip
)
def test_prepare_auto_keeps_jax_arrays_on_the_device_and_numpy_on_the_cpus_host(monkeypatch, kind, prepare, on_device):
    """ "auto" on the CPU: a JAX array is checked where it is, numpy points on the host (no program to compile
    for one solve); "device" and "host" force; float64 points always go to the host."""
    import puaudit_jax.ot.solve as solve_module

    calls = []
    real = solve_module.checked_on_device
    monkeypatch.setattr(solve_module, "checked_on_device", lambda *a: calls.append(a) or real(*a))
    ref = solve_partial(X, Y, 0.5, options=SolveOptions(method="sinkhorn", prepare="host"))
    res = solve_partial(_as(kind, X), _as(kind, Y), 0.5, options=SolveOptions(method="sinkhorn", prepare=prepare))
    assert bool(calls) == on_device
    assert res.cost == pytest.approx(ref.cost, abs=1e-6)


def test_prepare_auto_on_an_accelerator_takes_the_device_for_large_numpy_points(monkeypatch):
    """On an accelerator "auto" sends numpy points to the device pass once they are large enough to repay its
    compilation (``DEVICE_PREPARE_ELEMENTS`` in all); a mesh across processes, float64 or the exact solver always
    go to the host."""
    import types

    import jax

    from puaudit_jax.ot.problem import DEVICE_PREPARE_ELEMENTS
    from puaudit_jax.ot.problem import prepare_on_device as _prepare_on_device

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    half = -(-DEVICE_PREPARE_ELEMENTS // (2 * 768))  # rows per cloud that reach it
    small, large = (np.broadcast_to(np.float32(1), (rows, 768)) for rows in (half - 1, half))
    assert not _prepare_on_device("auto", None, "float32", "sinkhorn", small, small)
    assert _prepare_on_device("auto", None, "float32", "sinkhorn", large, large)
    assert not _prepare_on_device("auto", None, "float64", "sinkhorn", large, large)
    assert not _prepare_on_device("auto", None, "float32", "exact", large, large)
    assert not _prepare_on_device("host", None, "float32", "sinkhorn", large, large)

    def layout(*processes):  # a layout of a mesh whose devices belong to these processes
        devices = np.array([types.SimpleNamespace(process_index=p) for p in processes])
        return types.SimpleNamespace(mesh=types.SimpleNamespace(devices=devices))

    here = jax.process_index()
    assert _prepare_on_device("device", layout(here, here), "float32", "sinkhorn", large, large)
    assert not _prepare_on_device("device", layout(here, here + 1), "float32", "sinkhorn", large, large)
