"""probes.pls.PLSRegression as a scikit-learn estimator (check_estimator, clone, Pipeline, GridSearchCV),
its float64 host-side scaling against scikit-learn's PLSRegression on badly scaled data, and the probe
CLI's --components limit and unreadable --model files (`puaudit probe fit | predict`)."""

import json
import pickle
import warnings

import jax
import numpy as np
import pandas as pd
import pytest

sklearn = pytest.importorskip("sklearn")
from scipy import sparse  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.cross_decomposition import PLSRegression as SkPLS  # noqa: E402
from sklearn.datasets import load_linnerud  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

from probes import borp, fitted  # noqa: E402
from probes.pls import PLSRegression  # noqa: E402
from puaudit_jax.cli import CommandError, main  # noqa: E402


def _data(n=80, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)


# ---------------------------------------------------------------------------------------------
# a scikit-learn estimator


def test_check_estimator_passes_every_check():
    """All of sklearn's estimator checks (float32 compute, JAX's default); none is expected to fail."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(PLSRegression(), on_fail=None)
    failed = {r["check_name"]: repr(r["exception"])[:300] for r in results if r["status"] == "failed"}
    assert failed == {}
    assert sum(r["status"] == "passed" for r in results) >= 50, [(r["check_name"], r["status"]) for r in results]


def test_sklearn_input_semantics():
    X, y = _data()
    est = PLSRegression(2)
    with pytest.raises(NotFittedError):
        est.predict(X)
    with pytest.raises(NotFittedError):
        est.transform(X)
    with pytest.raises(ValueError, match="Complex data not supported"):
        est.fit(X + 1j, y)
    with pytest.raises(ValueError, match="could not convert string to float"):
        est.fit(np.full((10, 3), "a", dtype=object), y[:10])
    with pytest.raises(TypeError, match="Sparse data was passed .* dense data is required"):
        est.fit(sparse.csr_matrix(X), y)
    with pytest.raises(ValueError, match=r"0 sample\(s\)"):
        est.fit(np.empty((0, 3)), np.empty(0))
    with pytest.raises(ValueError, match=r"1 sample\(s\) \(shape=\(1, 6\)\) while a minimum of 2"):
        est.fit(X[:1], y[:1])
    est.fit(X, y)
    with pytest.raises(ValueError, match="X has 5 features, but PLSRegression is expecting 6"):
        est.predict(X[:, :5])
    with pytest.raises(ValueError, match="X has 7 features, but PLSRegression is expecting 6"):
        est.transform(np.c_[X, X[:, 0]])
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[5, 40\]"):
        est.score(X[:40], y[:5])
    with pytest.raises(NotFittedError):
        clone(est).predict(X)


def test_output_dtypes_follow_the_input_and_attributes_are_float64():
    X, y = _data()
    with jax.enable_x64(False):
        est = PLSRegression(2).fit(X, y)
    assert est.compute_dtype_ == np.float32
    assert est.coef_.dtype == est.x_rotations_.dtype == np.float64
    assert est.predict(X).dtype == est.transform(X).dtype == np.float64
    assert est.predict(X.astype(np.float32)).dtype == est.transform(X.astype(np.float32)).dtype == np.float32
    assert est.predict(X.astype(np.int64)).dtype == np.float64
    assert isinstance(est.n_iter_, list) and all(type(i) is int for i in est.n_iter_)


def test_column_target_is_multi_output_without_warning():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        two_d = PLSRegression(2).fit(X, y[:, None])
    assert two_d.predict(X).shape == (len(X), 1)
    np.testing.assert_allclose(two_d.predict(X)[:, 0], PLSRegression(2).fit(X, y).predict(X), rtol=1e-6, atol=1e-6)
    assert two_d.__sklearn_tags__().target_tags.multi_output


@pytest.mark.usefixtures("x64")
def test_clone_pipeline_and_grid_search_equal_sklearn():
    X, Y = load_linnerud(return_X_y=True)
    est = PLSRegression(2, scale=False)
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params() and not hasattr(twin, "coef_")
    ours = make_pipeline(StandardScaler(), PLSRegression(2)).fit(X, Y)
    ref = make_pipeline(StandardScaler(), SkPLS(2)).fit(X, Y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=1e-8)
    cv = KFold(4, shuffle=True, random_state=0)
    grid = {"n_components": [1, 2, 3]}
    ours = GridSearchCV(PLSRegression(), grid, cv=cv).fit(X, Y[:, 0])
    ref = GridSearchCV(SkPLS(), grid, cv=cv).fit(X, Y[:, 0])
    assert ours.best_params_ == ref.best_params_
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"], atol=1e-8)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=1e-8)


# ---------------------------------------------------------------------------------------------
# scaling in float64 before the cast to the compute dtype


@pytest.mark.parametrize("factor", [1e20, 1e-20])
def test_one_badly_scaled_column_matches_sklearn_in_float32(factor):
    """One X column times 1e20 or 1e-20 (scale=True): the float32 fit equals sklearn's float64 fit."""
    X, y = _data()
    X[:, 0] *= factor
    ref = SkPLS(3).fit(X, y)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")  # neither a rank nor an overflow warning
        ours = PLSRegression(3).fit(X, y)
    assert ours.score(X, y) == pytest.approx(ref.score(X, y), abs=1e-5)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-4, atol=1e-4 * np.std(y))
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-3)


@pytest.mark.parametrize("factor", [1e300, 1e-300])
@pytest.mark.parametrize("scale", [True, False])
def test_extreme_finite_values_fit_like_the_unscaled_data(factor, scale):
    """All of X times 1e300 or 1e-300 (finite, but their squares are not): no NaN, no "infinity"
    error; the predictions equal sklearn's on the unscaled X (sklearn itself fails on these)."""
    X, y = _data()
    ref = SkPLS(3, scale=scale).fit(X, y).predict(X)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = PLSRegression(3, scale=scale).fit(X * factor, y)
        pred = ours.predict(X * factor)
    assert np.all(np.isfinite(pred))
    np.testing.assert_allclose(pred, ref, rtol=1e-4, atol=1e-4 * np.std(y))


def test_extreme_targets_fit_like_the_unscaled_targets():
    X, y = _data()
    ref = SkPLS(2).fit(X, y).predict(X)
    with jax.enable_x64(False):
        for factor in (1e300, 1e-300):
            pred = PLSRegression(2).fit(X, y * factor).predict(X) / factor
            np.testing.assert_allclose(pred, ref, rtol=1e-4, atol=1e-4 * np.std(y), err_msg=str(factor))


def test_a_column_too_large_for_float64_statistics_is_named():
    X, y = _data()
    X[:, 3] = np.where(np.arange(len(X)) % 2, 1.79e308, -1.79e308)  # finite, its std is not
    with pytest.raises(ValueError, match="X column 3: its standard deviation overflows float64"):
        PLSRegression(2).fit(X, y)


# ---------------------------------------------------------------------------------------------
# puaudit probe fit | predict: the components' limit and unreadable probe files


def _dialogue_file(tmp_path, n):
    rng = np.random.default_rng(n)
    rows = [dict(id=f"r{i}", prompt=f"q{i}", response=f"a{i}", score=float(rng.integers(1, 6))) for i in range(n)]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def fake_features(monkeypatch):
    """probes.fitted.dialogue_features -> random (n, 20) features, no encoder loaded."""

    def features(spec, dialogues, mesh=None):
        return np.random.default_rng(len(dialogues)).normal(size=(len(dialogues), 20))

    monkeypatch.setattr(fitted, "dialogue_features", features)


def _fail(argv, capsys) -> str:
    with pytest.raises(CommandError) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and err.count("\n") == 1
    return err


def test_cli_refuses_components_above_the_rows_before_loading_a_model(tmp_path, capsys, monkeypatch):
    data = _dialogue_file(tmp_path, 18)

    def no_model(*_, **__):
        raise AssertionError("features were extracted before --components was checked")

    monkeypatch.setattr(fitted, "dialogue_features", no_model)
    argv = ["probe", "fit", "--data", str(data), "--target", "score", "--out", str(tmp_path / "p.pkl")]
    err = _fail([*argv, "--components", "1000"], capsys)
    assert "--components=1000" in err and "the maximum is 17" in err and "train.jsonl" in err
    assert "--components=0" in _fail([*argv, "--components", "0"], capsys)
    assert not (tmp_path / "p.pkl").exists()


def test_fit_probe_refuses_components_above_the_head_features(fake_features):
    table = pd.DataFrame({"score": np.arange(40.0) % 5})
    dialogues = [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]] * 40
    spec = dict(encoder="none")
    with pytest.raises(ValueError, match=r"n_components=23 is outside \[1, 22\]: the maximum is 22 .*features = 22"):
        fitted.fit_probe(table, dialogues, "score", spec, borp.HeadConfig(n_components=23))  # 20 + 2 geometric
    with pytest.raises(ValueError, match=r"n_components=40 is outside \[1, 39\]"):
        fitted.fit_probe(table, dialogues, "score", spec, borp.HeadConfig(n_components=40, geometric=False))
    probe = fitted.fit_probe(table, dialogues, "score", spec, borp.HeadConfig(n_components=22, resample=None))
    assert probe.components == (22,)


def test_fit_config_defaults_are_the_head_config_defaults():
    """probes.config keeps scikit-learn out of the parser: its head defaults are a copy, checked here."""
    from probes.config import FitConfig

    assert FitConfig().head_config() == borp.HeadConfig()
    assert FitConfig(n_components=3, resample=None, scale=(0.0, 1.0), seed=2).head_config() == borp.HeadConfig(
        n_components=3, resample=None, scale=(0.0, 1.0), seed=2
    )


def test_the_layer_reaches_an_encoders_features_and_a_layer_the_model_lacks_is_an_error(tmp_path, capsys, minilm):
    """Before: with an encoder (MiniLM) --layer was ignored, and --layer 99 fitted on the last layer."""
    from probes.extract import EncodeConfig, encode

    dialogues = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}] for i in range(3)]
    spec = fitted.prompt_spec("minilm", 3, (1.0, 5.0), None, "quality")
    got = fitted.dialogue_features(spec, dialogues)
    want, _ = encode(minilm, [f"q{i} a{i}" for i in range(3)], EncodeConfig(layers=3))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, fitted.dialogue_features({**spec, "layer": -1}, dialogues), atol=1e-3)
    capsys.readouterr()  # the progress bars so far
    argv = [
        "probe",
        "fit",
        "--data",
        str(_dialogue_file(tmp_path, 12)),
        "--target",
        "score",
        "--out",
        str(tmp_path / "p.pkl"),
    ]
    assert "layer 99 out of range: the model has 7 hidden states" in _fail(
        [*argv, "--encoder", "minilm", "--layer", "99"], capsys
    )
    assert not (tmp_path / "p.pkl").exists()


def test_cli_says_when_resampling_lowers_the_components(tmp_path, capsys, fake_features):
    data = _dialogue_file(tmp_path, 12)
    out = tmp_path / "p.pkl"
    argv = ["probe", "fit", "--data", str(data), "--target", "score", "--components", "11", "--out", str(out)]
    assert main([*argv, "--resample", "label"]) == 0
    captured = capsys.readouterr()
    k = fitted.load_probe(out).components
    assert min(k) < 11  # a bootstrap of 12 rows has fewer than 12 distinct rows
    assert f"warning: --components 11: the resampled training sets have too few distinct rows; the heads were " \
        f"fitted with {min(k)} to {max(k)} components" in captured.err  # fmt: skip
    assert f"{min(k)} components" in captured.out
    assert main([*argv, "--resample", "none"]) == 0
    assert "warning" not in capsys.readouterr().err and fitted.load_probe(out).components == (11,)
    assert main(["probe", "predict", "--model", str(out), "--data", str(data), "--out", str(tmp_path / "p.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "p.csv")) == 12


@pytest.mark.parametrize(
    "content, detail",
    [
        (b"id,prediction\n1,2\n", "UnpicklingError"),
        (b"", "EOFError"),
        (pickle.dumps([1, 2, 3]), "a pickled list without spec, head and n_train"),
        (pickle.dumps(dict(spec={}, head="x", n_train=3)), "its head is a str, not a BorpHead"),
    ],
    ids=["csv text", "empty", "pickled list", "foreign head"],
)
def test_cli_predict_with_a_file_that_is_not_a_probe(tmp_path, capsys, content, detail):
    model = tmp_path / "model.pkl"
    model.write_bytes(content)
    data = _dialogue_file(tmp_path, 3)
    err = _fail(["probe", "predict", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o")], capsys)
    assert f"error: {model}: not a fitted probe written by `puaudit probe fit`" in err and detail in err
    with pytest.raises(ValueError, match="not a fitted probe"):
        fitted.load_probe(model)
