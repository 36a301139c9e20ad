"""probes.pls.PLSRegression against scikit-learn's PLSRegression (float64 to 1e-6), sklearn's own
reference values (Linnerud, checked there against the R packages plspm / mixOmics / pls) and the
documented behaviour on bad and degenerate input."""

import warnings

import jax
import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn.cross_decomposition import PLSRegression as SkPLS  # noqa: E402
from sklearn.datasets import load_linnerud  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

from probes.pls import PLSRegression  # noqa: E402

ATTRS = (
    "x_weights_",
    "y_weights_",
    "x_loadings_",
    "y_loadings_",
    "x_scores_",
    "y_scores_",
    "x_rotations_",
    "y_rotations_",
    "coef_",
    "intercept_",
)
TOL = 1e-6


pytestmark = pytest.mark.usefixtures("x64")  # every test in float64 (fixture in tests/conftest.py)


def _assert_same(ours, ref, X, y, tol=TOL):
    for name in ATTRS:
        a, b = getattr(ours, name), getattr(ref, name)
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, atol=tol, rtol=tol, err_msg=name)  # y_scores reach 1e7
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=tol, rtol=0)
    np.testing.assert_allclose(ours.transform(X), ref.transform(X), atol=tol, rtol=0)
    for a, b in zip(ours.transform(X, y), ref.transform(X, y)):
        np.testing.assert_allclose(a, b, atol=tol, rtol=0)
    assert ours.n_iter_ == ref.n_iter_


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("scale", [True, False])
def test_linnerud_equals_sklearn(k, scale):
    X, y = load_linnerud(return_X_y=True)
    ours = PLSRegression(k, scale=scale).fit(X, y)
    assert ours.x_weights_.dtype == np.float64
    _assert_same(ours, SkPLS(k, scale=scale).fit(X, y), X, y)


def test_linnerud_single_target_pls1():
    X, Y = load_linnerud(return_X_y=True)
    for j in range(3):
        ours = PLSRegression(3).fit(X, Y[:, j])
        _assert_same(ours, SkPLS(3).fit(X, Y[:, j]), X, Y[:, j])
        assert ours.predict(X).shape == (20,)
        # (n, 1) y gives the same model with 2-d predictions
        two_d = PLSRegression(3).fit(X, Y[:, [j]])
        np.testing.assert_allclose(two_d.predict(X)[:, 0], ours.predict(X), atol=1e-12)


def test_sklearn_reference_values_linnerud():
    """The numbers of sklearn's test_sanity_check_pls_regression (up to a common sign)."""
    X, y = load_linnerud(return_X_y=True)
    pls = PLSRegression(n_components=X.shape[1])
    x_trans, _ = pls.fit_transform(X, y)
    np.testing.assert_allclose(x_trans, pls.x_scores_, atol=1e-10)
    xw = np.array(
        [
            [-0.61330704, -0.00443647, 0.78983213],
            [-0.74697144, -0.32172099, -0.58183269],
            [-0.25668686, 0.94682413, -0.19399983],
        ]
    )
    xl = np.array(
        [
            [-0.61470416, -0.24574278, 0.78983213],
            [-0.65625755, -0.14396183, -0.58183269],
            [-0.51733059, 1.00609417, -0.19399983],
        ]
    )
    yw = np.array(
        [
            [0.32456184, 0.29892183, 0.20316322],
            [0.42439636, 0.61970543, 0.19320542],
            [-0.13143144, -0.26348971, -0.17092916],
        ]
    )
    for got, exp in ((pls.x_loadings_, xl), (pls.x_weights_, xw), (pls.y_loadings_, yw), (pls.y_weights_, yw)):
        np.testing.assert_allclose(np.abs(got), np.abs(exp), atol=1e-6)
    np.testing.assert_array_equal(np.sign(pls.x_loadings_ / xl), np.sign(pls.x_weights_ / xw))
    np.testing.assert_array_equal(np.sign(pls.y_loadings_ / yw), np.sign(pls.y_weights_ / yw))


def test_sklearn_reference_values_constant_y_column():
    """sklearn's test_sanity_check_pls_regression_constant_column_y (plsdepot values)."""
    X, y = load_linnerud(return_X_y=True)
    y = y.copy()
    y[:, 0] = 1
    pls = PLSRegression(n_components=3).fit(X, y)
    xw = np.array(
        [
            [-0.6273573, 0.007081799, 0.7786994],
            [-0.7493417, -0.277612681, -0.6011807],
            [-0.2119194, 0.960666981, -0.1794690],
        ]
    )
    xl = np.array(
        [
            [-0.6273512, -0.22464538, 0.7786994],
            [-0.6643156, -0.09871193, -0.6011807],
            [-0.5125877, 1.01407380, -0.1794690],
        ]
    )
    yl = np.array([[0.0, 0.0, 0.0], [0.4357300, 0.5828479, 0.2174802], [-0.1353739, -0.2486423, -0.1810386]])
    np.testing.assert_allclose(np.abs(pls.x_weights_), np.abs(xw), atol=1e-6)
    np.testing.assert_allclose(np.abs(pls.x_loadings_), np.abs(xl), atol=1e-6)
    np.testing.assert_allclose(np.abs(pls.y_loadings_), np.abs(yl), atol=1e-6)
    np.testing.assert_allclose(np.abs(pls.y_weights_), np.abs(yl), atol=1e-6)
    _assert_same(pls, SkPLS(3).fit(X, y), X, y)


@pytest.mark.parametrize("n, d, q, kmax", [(20, 50, 1, 8), (20, 50, 3, 6), (200, 10, 1, 10), (200, 10, 4, 10)])
def test_random_wide_and_tall_equal_sklearn(n, d, q, kmax):
    rng = np.random.default_rng(n * 1000 + d + q)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 5, d) + rng.normal(0, 3, d)
    beta = rng.normal(size=(d, q))
    Y = X @ beta + rng.normal(size=(n, q)) * 2
    y = Y[:, 0] if q == 1 else Y
    for k in sorted({1, 2, kmax // 2, kmax}):
        _assert_same(PLSRegression(k).fit(X, y), SkPLS(k).fit(X, y), X, y)


def test_scaling_coef_recovers_linear_map():
    """sklearn's test_pls_regression_scaling_coef."""
    rng = np.random.RandomState(0)
    coef = rng.uniform(size=(3, 5))
    X = rng.normal(scale=10, size=(30, 5))
    y = X @ coef.T
    pls = PLSRegression(n_components=5, scale=True).fit(X, y)
    np.testing.assert_allclose(pls.coef_, coef, rtol=1e-7)
    np.testing.assert_allclose(pls.predict(X), y, rtol=1e-7)


def test_float32_default_without_x64_is_close():
    X, y = load_linnerud(return_X_y=True)
    with jax.enable_x64(False):
        ours = PLSRegression(2).fit(X, y)
    assert ours.compute_dtype_ == np.float32 and ours.coef_.dtype == np.float64  # attributes float64, as sklearn
    assert ours.predict(X).dtype == np.float64 and ours.predict(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(ours.predict(X), SkPLS(2).fit(X, y).predict(X), rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# bad and degenerate input


def test_bad_input_errors():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(10, 4)), rng.normal(size=10)
    with pytest.raises(ValueError, match="`n_components` upper bound is 4. Got 5 instead"):
        PLSRegression(5).fit(X, y)
    with pytest.raises(ValueError, match="upper bound is 3"):
        PLSRegression(4).fit(X[:3], y[:3])
    with pytest.raises(ValueError, match="n_components must be >= 1"):
        PLSRegression(0).fit(X, y)
    with pytest.raises(ValueError, match=r"n_components must be >= 1 \(an integer\), got 1.5"):
        PLSRegression(1.5).fit(X, y)
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"X contains NaN \(first at index \(3, 2\)\)"):
        PLSRegression(2).fit(Xn, y)
    with pytest.raises(ValueError, match="y contains infinity"):
        PLSRegression(2).fit(X, np.r_[y[:-1], np.inf])
    with pytest.raises(ValueError, match=r"1 sample\(s\) .* a minimum of 2 is required"):
        PLSRegression(1).fit(X[:1], y[:1])
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[10, 9\]"):
        PLSRegression(1).fit(X, y[:9])
    with pytest.raises(NotFittedError, match="not fitted"):
        PLSRegression(1).predict(X)
    with pytest.raises(ValueError, match="X has 3 features, but PLSRegression is expecting 4"):
        PLSRegression(1).fit(X, y).predict(X[:, :3])


def test_constant_x_column_gets_exact_zero_and_rest_matches_sklearn():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(25, 5))
    X[:, 2] = 0.1  # 0.1 is not exactly representable: mean(x) - x may be a few ulps in sklearn
    y = X @ rng.normal(size=5) + rng.normal(size=25)
    ours, ref = PLSRegression(3).fit(X, y), SkPLS(3).fit(X, y)
    assert np.all(ours.x_weights_[2] == 0) and np.all(ours.coef_[:, 2] == 0)
    assert ours._x_std[2] == 1.0
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=TOL)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=TOL)


def test_constant_y_warns_and_gives_zero_rotations():
    """sklearn's test_pls_constant_y."""
    rng = np.random.RandomState(42)
    x = rng.rand(100, 3)
    with pytest.warns(UserWarning, match="y residual is constant at iteration 0"):
        pls = PLSRegression().fit(x, np.zeros(100))
    np.testing.assert_allclose(pls.x_rotations_, 0)
    np.testing.assert_allclose(pls.predict(x), 0)


def test_more_components_than_rank_stops_at_rank():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2)) @ rng.normal(size=(2, 5))  # rank 2
    y = X @ rng.normal(size=5) + 0.1 * rng.normal(size=30)
    with pytest.warns(UserWarning, match="exhausted at component 2"):
        pls = PLSRegression(4).fit(X, y)
    assert pls.n_components_fitted_ == 2
    assert np.all(pls.x_weights_[:, 2:] == 0)
    two = PLSRegression(2).fit(X, y)
    np.testing.assert_allclose(pls.predict(X), two.predict(X), atol=1e-10)
    np.testing.assert_allclose(two.predict(X), SkPLS(2).fit(X, y).predict(X), atol=TOL)
    # wide: the centred X of n rows has rank n - 1; after 5 components y is fitted exactly
    Xw, Yw = rng.normal(size=(6, 40)), rng.normal(size=(6, 2))
    with pytest.warns(UserWarning, match="y residual is constant at iteration 5|exhausted at component 5"):
        wide = PLSRegression(6).fit(Xw, Yw)
    assert wide.n_components_fitted_ == 5
    np.testing.assert_allclose(wide.predict(Xw), Yw, atol=1e-8)


def test_sklearn_model_selection_interop():
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_predict, cross_val_score

    X, y = load_linnerud(return_X_y=True)
    est = PLSRegression(2)
    assert clone(est).get_params() == est.get_params()
    ours = cross_val_predict(est, X, y[:, 0], cv=4)
    ref = cross_val_predict(SkPLS(2), X, y[:, 0], cv=4)
    np.testing.assert_allclose(ours, ref, atol=TOL)
    np.testing.assert_allclose(cross_val_score(est, X, y, cv=4), cross_val_score(SkPLS(2), X, y, cv=4), atol=TOL)


def test_power_method_max_iter_warns():
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(40, 6)), rng.normal(size=(40, 3))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        pls = PLSRegression(2, max_iter=2, tol=0.0).fit(X, Y)
    assert any("Maximum number of iterations" in str(w.message) for w in rec)
    assert pls.n_iter_ == [2, 2]


@pytest.mark.parametrize("factor", [1e20, 1e-30])
@pytest.mark.parametrize("scale", [True, False])
def test_extreme_magnitudes_fit_like_the_unscaled_data_in_float32(factor, scale):
    """float32 moments of 1e20 (squares overflow) or 1e-30 (squares vanish) used to give constant
    predictions with a rank warning; the fit now divides by an exact power of two and undoes it."""

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 6))
    y = X @ rng.normal(size=6) + 0.1 * rng.normal(size=80)
    with jax.enable_x64(False):
        ref = PLSRegression(n_components=3, scale=scale).fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            big = PLSRegression(n_components=3, scale=scale).fit(X * factor, y * factor)
        np.testing.assert_allclose(big.predict(X * factor) / factor, ref.predict(X), rtol=1e-3, atol=1e-3)
        assert big.score(X * factor, y * factor) == pytest.approx(ref.score(X, y), abs=1e-4)


def test_a_model_pickled_before_the_sklearn_estimator_still_predicts():
    """Probe files hold fitted PLSRegression objects: one without the attributes added since unpickles and predicts."""
    X, y = load_linnerud(return_X_y=True)
    pls = PLSRegression(2).fit(X, y)
    state = {k: v for k, v in pls.__dict__.items() if k not in ("_coef_std", "compute_dtype_", "_n_features_out")}
    old = PLSRegression.__new__(PLSRegression)
    old.__setstate__(state)
    np.testing.assert_allclose(old.predict(X), pls.predict(X), rtol=1e-12)
    assert old.compute_dtype_ == pls.compute_dtype_ and old.get_feature_names_out().tolist()[-1] == "plsregression1"


# ---------------------------------------------------------------------------------------------
# float32 input with the float32 compute dtype: standardised on the device


def _f32_data(n=600, d=24, q=1, seed=3):
    """float32 X (n, d) with offsets up to 1e4 (std ~1) and scales 0.5..5; y (n,) or (n, q) float64."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 5, d) + rng.normal(0, 3, d)
    X[:, 0] += 1e4  # a float32 mean taken as one running sum would be off by ~n ulps of 1e4
    Y = X @ rng.normal(size=(d, q)) + rng.normal(size=(n, q))
    return X.astype(np.float32), (Y[:, 0] if q == 1 else Y)


@pytest.fixture
def x_on_host(monkeypatch):
    """The names (X / y) standardised by the host float64 path during the test."""
    import probes.pls as pls

    names = []
    host = pls._host_standardize

    def spy(A, scale, name):
        names.append(name)
        return host(A, scale, name)

    monkeypatch.setattr(pls, "_host_standardize", spy)
    return names


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("q", [1, 3])
def test_float32_input_is_standardised_on_the_device_and_predicts_as_the_float64_path(scale, q, x_on_host):
    X, y = _f32_data(q=q)
    X64 = X.astype(np.float64)
    ref = PLSRegression(4, scale=scale, dtype="float64").fit(X64, y)
    assert x_on_host == ["X", "y"]  # float64 input: the host path
    for Xin in (X, jax.numpy.asarray(X)):
        x_on_host.clear()
        ours = PLSRegression(4, scale=scale, dtype="float32").fit(Xin, y)
        assert x_on_host == ["y"]  # X went to the device
        assert ours.compute_dtype_ == np.float32 and ours.coef_.dtype == ours._x_mean.dtype == np.float64
        assert ours.n_features_in_ == 24 and not hasattr(ours, "feature_names_in_")
        np.testing.assert_allclose((ours._x_mean - ref._x_mean) / ref._x_std, 0, atol=1e-5)
        np.testing.assert_allclose(ours._x_std, ref._x_std, rtol=1e-5)
        np.testing.assert_allclose(ours.predict(X64), ref.predict(X64), rtol=0, atol=1e-4 * np.std(y))
        np.testing.assert_allclose(ours.x_scores_, ref.x_scores_, rtol=0, atol=1e-4 * np.abs(ref.x_scores_).max())


def test_float32_dataframe_keeps_its_feature_names_and_is_standardised_on_the_device(x_on_host):
    pd = pytest.importorskip("pandas")
    X, y = _f32_data(d=5)
    frame = pd.DataFrame(X, columns=list("abcde"))
    ours = PLSRegression(2, dtype="float32").fit(frame, y)
    assert x_on_host == ["y"] and ours.feature_names_in_.tolist() == list("abcde")
    np.testing.assert_array_equal(ours.predict(frame), PLSRegression(2, dtype="float32").fit(X, y).predict(X))


@pytest.mark.parametrize("as_jax", [False, True])
def test_float32_nan_and_inf_are_named_by_their_first_index(as_jax):
    X, y = _f32_data(n=50, d=6)
    X[7, 4], X[30, 1], X[31, 0] = np.nan, np.inf, -np.inf
    Xin = jax.numpy.asarray(X) if as_jax else X
    with pytest.raises(ValueError, match=r"X contains NaN \(first at index \(7, 4\)\); 3 non-finite entries in total"):
        PLSRegression(2, dtype="float32").fit(Xin, y)
    X[7, 4] = 1.0
    with pytest.raises(ValueError, match=r"X contains infinity \(first at index \(30, 1\)\); 2 non-finite"):
        PLSRegression(2, dtype="float32").fit(jax.numpy.asarray(X) if as_jax else X, y)


def test_float32_columns_of_1e20_and_1e_20_fit_like_the_ordinary_columns(x_on_host):
    """float32 holds 1e20 and 1e-20, not their squares (overflow, underflow): the per-column power of two."""
    X, y = _f32_data(n=300, d=8)
    X[:, 0] -= 1e4  # ordinary offsets
    ref = PLSRegression(3, dtype="float32").fit(X, y)
    Xs = X.copy()
    Xs[:, 2] *= np.float32(1e20)
    Xs[:, 5] *= np.float32(1e-20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither a rank nor an overflow warning
        ours = PLSRegression(3, dtype="float32").fit(Xs, y)
    assert "X" not in x_on_host
    np.testing.assert_allclose(ours.predict(Xs), ref.predict(X), rtol=0, atol=1e-4 * np.std(y))
    np.testing.assert_allclose(ours.coef_[:, [2, 5]] * [1e20, 1e-20], ref.coef_[:, [2, 5]], rtol=1e-4)
    np.testing.assert_allclose(ours._x_std[[2, 5]] / [1e20, 1e-20], ref._x_std[[2, 5]], rtol=1e-6)


@pytest.mark.parametrize("factor", [1e30, 1e-30])
def test_float32_input_without_scaling_is_equivariant_at_extreme_magnitudes(factor):
    X, y = _f32_data(n=300, d=8)
    X[:, 0] -= 1e4
    ref = PLSRegression(3, scale=False, dtype="float32").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = PLSRegression(3, scale=False, dtype="float32").fit(X * np.float32(factor), y * factor)
    np.testing.assert_allclose(ours.predict(X * np.float32(factor)) / factor, ref.predict(X), atol=1e-4 * np.std(y))


def test_float32_constant_columns_get_exact_zero_weights_and_std_one(x_on_host):
    X, y = _f32_data(n=100, d=6)
    X[:, 2] = np.float32(0.1)  # not a power of two: its mean is rounded, its centred column must still be 0
    X[:, 4] = 0.0
    X64 = X.astype(np.float64)
    ours = PLSRegression(3, dtype="float32").fit(X, y)
    ref = PLSRegression(3, dtype="float64").fit(X64, y)
    assert x_on_host == ["y", "X", "y"]
    for j in (2, 4):
        assert np.all(ours.x_weights_[j] == 0) and np.all(ours.x_loadings_[j] == 0) and np.all(ours.coef_[:, j] == 0)
        assert ours._x_std[j] == 1.0
    assert ours._x_mean[4] == 0.0 and ours._x_mean[2] == pytest.approx(X64[0, 2], rel=1e-7)
    np.testing.assert_allclose(ours.predict(X64), ref.predict(X64), rtol=0, atol=1e-4 * np.std(y))
