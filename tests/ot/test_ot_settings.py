"""The OT settings enter through two frozen configs: every default is written once, the
configs check themselves, and the keywords of before still work for one release, with a warning."""

import ast
import dataclasses
import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from puaudit_jax.audit.scorers import BalancedOTScorer, POTScorer, UnbalancedOTScorer
from puaudit_jax.ot import PartialSinkhorn, SolveOptions, entropic_partial_cost, solve_mass_path, solve_partial
from puaudit_jax.ot.mass_path import PATH_SOLVER
from puaudit_jax.ot.settings import UNSET
from puaudit_jax.ot.solve import DEFAULT_SOLVER
from tests.ot.ot_cases import cone_clouds

ROOT = Path(__file__).resolve().parents[2]
SOLVER_FIELDS = {f.name for f in dataclasses.fields(PartialSinkhorn)}
OPTION_FIELDS = {f.name for f in dataclasses.fields(SolveOptions)}
OTT_NAMES = {"max_iterations", "threshold"}  # ott-jax's names of max_iter and tol
ENTRIES = (solve_partial, solve_mass_path, entropic_partial_cost, POTScorer, BalancedOTScorer, UnbalancedOTScorer)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.__name__)
def test_the_entry_points_take_a_partial_sinkhorn_and_repeat_no_default(entry):
    params = inspect.signature(entry).parameters
    assert isinstance(params["solver"].default, PartialSinkhorn)
    for name, param in params.items():
        if name in SOLVER_FIELDS | OPTION_FIELDS | OTT_NAMES:  # only the deprecated keywords, or one reference
            assert param.default is UNSET or param.default is getattr(SolveOptions, name), (name, param.default)


def test_the_default_solvers_differ_from_partial_sinkhorn_only_where_documented():
    def changed(solver):
        return {f.name for f in dataclasses.fields(solver) if getattr(solver, f.name) != f.default}

    assert changed(DEFAULT_SOLVER) == {"certify"}  # solve_partial reports bounds on the exact cost
    assert changed(PATH_SOLVER) == {"certify", "relaxation"}  # the mass path also over-relaxes
    assert POTScorer().solver == BalancedOTScorer().solver == PartialSinkhorn()
    assert changed(UnbalancedOTScorer().solver) == {"epsilon"}  # picked on the cone model


def _numeric_defaults(tree: ast.AST):
    """(owner, name) of every function argument and class field defaulting to a number, named as a setting."""
    names = SOLVER_FIELDS | OPTION_FIELDS | OTT_NAMES
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    yield from _numeric(node.name, item.target.id, item.value, names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args
            pairs = list(zip(args[len(args) - len(node.args.defaults) :], node.args.defaults))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
            for arg, default in pairs:
                yield from _numeric(node.name, arg.arg, default, names)


def _numeric(owner, name, value, names):
    if name in names and isinstance(value, ast.Constant) and type(value.value) in (int, float):
        yield owner, name


def test_every_numeric_solver_default_is_written_once():
    """0.01, 1e-4, 5000, ...: in PartialSinkhorn's fields, nowhere else in the OT layer or the scorers."""
    paths = sorted((ROOT / "puaudit_jax" / "ot").glob("*.py")) + [ROOT / "puaudit_jax" / "audit" / "scorers.py"]
    found = [hit for path in paths for hit in _numeric_defaults(ast.parse(path.read_text()))]
    assert found and {owner for owner, _ in found} == {"PartialSinkhorn"}, found


@pytest.fixture(scope="module")
def clouds():
    return cone_clouds(np.random.default_rng(3), 30, 40, 6)


def test_the_old_keywords_warn_name_the_replacement_and_give_the_same_result(clouds):
    x, y = clouds
    new = solve_partial(x, y, 0.5, PartialSinkhorn(epsilon=0.05, tol=1e-6, certify=True),
                        SolveOptions(method="sinkhorn", dtype="float64"))  # fmt: skip
    expected = ("solver=PartialSinkhorn(epsilon=0.05, tol=1e-06, certify=True), "
                "options=SolveOptions(method='sinkhorn', dtype='float64')")  # fmt: skip
    with pytest.warns(DeprecationWarning, match=r"solve_partial\(epsilon=\.\.\., tol=\.\.\.") as record:
        old = solve_partial(x, y, 0.5, epsilon=0.05, tol=1e-6, method="sinkhorn", dtype="float64")
    assert expected in str(record[0].message) and record[0].filename == __file__
    np.testing.assert_array_equal(old.col_mass, new.col_mass)
    assert (old.cost, old.iterations, old.certificate) == (new.cost, new.iterations, new.certificate)

    ms = [0.3, 0.5]
    new_path = solve_mass_path(x, y, ms, PartialSinkhorn(epsilon=0.05, certify=True, relaxation="auto"))
    with pytest.warns(DeprecationWarning, match=r"PartialSinkhorn\(epsilon=0.05, certify=True, relaxation='auto'\)"):
        old_path = solve_mass_path(x, y, ms, epsilon=0.05)
    np.testing.assert_array_equal(old_path.col_mass, new_path.col_mass)
    np.testing.assert_array_equal(old_path.gap, new_path.gap)


def test_unknown_keywords_and_wrong_configs_are_type_errors(clouds):
    x, y = clouds
    with pytest.raises(TypeError, match="unexpected keyword argument 'epsilom'"):
        solve_partial(x, y, 0.5, epsilom=0.05)
    with pytest.raises(TypeError, match="solver must be a PartialSinkhorn"):
        solve_partial(x, y, 0.5, 0.05)
    with pytest.raises(TypeError, match="options must be a SolveOptions"):
        solve_partial(x, y, 0.5, PartialSinkhorn(), "exact")
    with pytest.raises(TypeError, match="solver must be a PartialSinkhorn"):
        solve_mass_path(x, y, [0.5], {"epsilon": 0.05})


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: SolveOptions(gap_tol=0.0), r"^gap_tol must be positive and finite"),
        (lambda: SolveOptions(exact_backend="lp"), r"^exact_backend must be one of \('emd', 'highs'\)"),
        (lambda: SolveOptions(return_plan=1), r"^return_plan must be True or False"),
        (lambda: PartialSinkhorn(eps_decay=1.0), r"^eps_decay must lie in \(0, 1\)"),
        (lambda: dataclasses.replace(PartialSinkhorn(), tol=-1.0), r"^tol must be positive and finite"),
        # before: accepted, then the solve never returned (its epoch loop ran no iteration, forever)
        (lambda: PartialSinkhorn(absorb_threshold=0.5), r"^absorb_threshold must be a finite number > 1"),
        (lambda: PartialSinkhorn(eps_init=float("nan"), eps_decay=0.5), r"^eps_init must be positive and finite"),
        # before: accepted, and the solve returned an all-zero plan, mass 0
        (lambda: PartialSinkhorn(eps_steps=0, eps_decay=0.5), r"^eps_steps must be a positive integer"),
        # before: a 0-d array, a list or a type passed every check (converged=True at epsilon -1)
        (lambda: PartialSinkhorn(epsilon=np.array(-1.0)), r"^epsilon must be positive and finite .*got -1.0"),
        (lambda: PartialSinkhorn(tol=jnp.asarray(np.inf)), r"^tol must be positive and finite"),
        (lambda: SolveOptions(method=["exact"]), r"^method must be one of"),
        (lambda: SolveOptions(dtype=np.float64), r"^dtype must be one of \('float32', 'float64'\)"),
    ],
)
def test_the_configs_check_their_fields_when_built(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_jax_rebuilds_the_solver_with_tracers_unchecked():
    """Under jit / vmap, and in tree maps, the numeric fields are tracers or other leaves: not checked."""
    solver = PartialSinkhorn(epsilon=0.05)
    assert jax.tree.map(lambda v: 2 * v, solver).epsilon == 0.1  # rebuilt through __init__, checked
    x = jnp.asarray(np.random.default_rng(0).normal(size=(6, 3)), jnp.float32)

    @jax.jit
    def cost(solver, x):
        return entropic_partial_cost(x, x + 1.0, 0.5, solver=solver)

    assert np.isfinite(float(cost(solver, x)))
    eps = jnp.asarray([0.05, 0.1])
    costs = jax.vmap(lambda e: cost(dataclasses.replace(solver, epsilon=e), x))(eps)
    assert costs.shape == (2,) and np.isfinite(costs).all()
    assert PartialSinkhorn(epsilon=np.array(0.05)).epsilon == 0.05  # a 0-d array is checked as its number
