"""Row-sharded PLS (`PLSRegression(mesh=...)`, `pls_fit(mesh=)`) and the probe CLI's --devices / --mesh,
in subprocesses with forced host devices (XLA fixes the device count at start-up; see
tests/multidevice.py).

Data: MiniLM embeddings (d = 384) of real dialogue responses with their human ratings (USR /
Topical-Chat, bundled). 181 training rows: not a multiple of 8 or 3, so every mesh pads its last
shard; 59 held-out rows for the predictions. One MiniLM dimension is ~1e-32 on every input, so with
scale=True its coefficient is ~1e31 (in sklearn too): coef_ is compared with a relative tolerance
per entry.
"""

import json

import jax
import numpy as np
import pandas as pd
import pytest

from tests.multidevice import run_devices

sklearn = pytest.importorskip("sklearn")
from sklearn.cross_decomposition import PLSRegression as SkPLS  # noqa: E402

from probes.pls import PLSRegression  # noqa: E402
from puaudit_runtime.mesh import make_mesh  # noqa: E402

N_FIT, N_ALL = 181, 240
SCORES = ["overall", "naturalness", "coherence", "engagingness", "understandability", "groundedness"]
CASES = {"pls1": 4, "pls2": 3}  # n_components; PLS1: y = "overall" (1-d), PLS2: Y = all six scores
MESHES = ("8", "3", "2x4")
TOL = 1e-6

_SHARDED = """
import re
import jax, numpy as np
from probes import extract
from puaudit_runtime.mesh import make_mesh
from probes.models import load_pretrained
from probes.pls import PLSRegression, _on_devices, pls_fit
from puaudit_jax.datasets import load_usr_topicalchat

out_path, n_fit, n_all, scores, cases = %r, %r, %r, %r, %r
table = load_usr_topicalchat().iloc[:n_all]
X = extract.encode(load_pretrained("minilm"), table["system_output"].tolist(),
                   extract.EncodeConfig(batch_size=32, max_length=128))[0].astype(np.float64)
Y = table[scores].to_numpy(np.float64)
meshes = {"none": None, "8": make_mesh(8), "3": make_mesh(3), "2x4": make_mesh(8, "2x4")}
res = dict(X=X, Y=Y)
n_iter = {}
with jax.enable_x64(True):
    for case, k in cases.items():
        y = Y[:n_fit, 0] if case == "pls1" else Y[:n_fit]
        for name, mesh in meshes.items():
            m = PLSRegression(k, mesh=mesh).fit(X[:n_fit], y)
            for attr in ("coef_", "x_scores_", "y_scores_", "x_weights_"):
                res[f"{case}/{name}/{attr}"] = getattr(m, attr)
            res[f"{case}/{name}/pred"] = m.predict(X)
            n_iter[f"{case}/{name}"] = m.n_iter_
    for name, mesh in meshes.items():  # float32 X: standardised on the mesh's devices
        m = PLSRegression(4, dtype="float32", mesh=mesh).fit(X[:n_fit].astype(np.float32), Y[:n_fit, 0])
        res[f"f32/{name}/pred"] = m.predict(X)

    def collectives(n):
        # every collective of the compiled sharded fit: (op, inside the loop over components, elements)
        mesh = meshes["8"]
        Xn, Yn = np.resize(X, (n, X.shape[1])), np.resize(Y, (n, Y.shape[1]))
        hlo = pls_fit.lower(_on_devices(Xn, mesh), _on_devices(Yn, mesh), 3, capacity=8, mesh=mesh,
                            n_rows=n).compile().as_text()
        ops = []
        for line in hlo.splitlines():
            hit = re.search(r"= (\\(.*?\\)|\\S+) (all-reduce|all-gather|all-to-all|collective-permute|"
                            r"reduce-scatter)(-start)?\\(", line)
            if hit:
                dims = re.findall(r"\\[([0-9,]*)\\]", hit.group(1))
                size = sum(int(np.prod([int(v) for v in d.split(",") if v])) for d in dims)
                ops.append((hit.group(2), "while/body" in line, size))
        return sorted(ops)

    comm = {str(n): collectives(n) for n in (n_fit, 2 * n_fit + 1)}
np.savez(out_path, **res)
emit(dict(devices=len(jax.devices()), n_iter=n_iter, comm=comm))
"""


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    path = tmp_path_factory.mktemp("pls_sharded") / "fits.npz"
    meta = run_devices(_SHARDED % (str(path), N_FIT, N_ALL, SCORES, CASES), 8, timeout=240)
    with np.load(path) as z:
        return meta, dict(z)


# slow: one 8-device interpreter fits every case (32 s); test_probe_cli_devices_flag_reaches_extraction_and_pls
# keeps sharded PLS in the default set
@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_sharded_fit_equals_single_device_and_sklearn(sharded, case):
    meta, res = sharded
    assert meta["devices"] == 8
    X, Y = res["X"], res["Y"]
    y = Y[:N_FIT, 0] if case == "pls1" else Y[:N_FIT]
    assert X.shape == (N_ALL, 384) and np.ptp(X[:, 0]) > 0
    single = {attr: res[f"{case}/none/{attr}"] for attr in ("coef_", "x_scores_", "y_scores_", "x_weights_", "pred")}
    assert single["pred"].shape == ((N_ALL,) if case == "pls1" else (N_ALL, len(SCORES)))
    for name in MESHES:
        for attr, ref in single.items():
            np.testing.assert_allclose(
                res[f"{case}/{name}/{attr}"], ref, atol=TOL, rtol=TOL, err_msg=f"{case} mesh {name}: {attr}"
            )
        assert meta["n_iter"][f"{case}/{name}"] == meta["n_iter"][f"{case}/none"]
    with jax.enable_x64(True):
        ref = SkPLS(CASES[case]).fit(X[:N_FIT], y)
    np.testing.assert_allclose(res[f"{case}/8/pred"], ref.predict(X), atol=TOL, rtol=0)
    np.testing.assert_allclose(res[f"{case}/2x4/coef_"], ref.coef_, atol=TOL, rtol=TOL)
    np.testing.assert_allclose(res[f"{case}/3/x_scores_"], ref.x_scores_, atol=TOL, rtol=TOL)


@pytest.mark.slow  # the same 8-device fits as above
def test_sharded_float32_input_fit_equals_single_device_and_float64(sharded):
    """float32 X with the float32 compute dtype is standardised on the device, row-sharded on a mesh:
    the predictions equal the single-device ones and the float64 fit's within float32 rounding."""
    res = sharded[1]
    scale = np.std(res["Y"][:N_FIT, 0])
    for name in MESHES:
        np.testing.assert_allclose(res[f"f32/{name}/pred"], res["f32/none/pred"], atol=1e-5 * scale, err_msg=name)
    np.testing.assert_allclose(res["f32/none/pred"], res["pls1/none/pred"], atol=1e-3 * scale)


@pytest.mark.slow  # the same 8-device fits as above
def test_sharded_fit_communicates_per_component_vectors_only(sharded):
    """Inside the loop over components only all-reduces of O(d + q + capacity) numbers, the same
    for 181 and 363 rows; rows never move except the final scores (n x capacity) gathered once."""
    comm = sharded[0]["comm"]
    d, q, capacity = 384, len(SCORES), 8
    for n, ops in comm.items():
        pad = -(-int(n) // 8) * 8
        body = [(op, size) for op, in_body, size in ops if in_body]
        assert body and all(op == "all-reduce" for op, _ in body), ops
        assert sum(size for _, size in body) <= d + 2 * q + capacity + 1, body
        outside = [(op, size) for op, in_body, size in ops if not in_body]
        assert {op for op, _ in outside} <= {"all-reduce", "all-gather"}, ops
        assert all(size <= d * q for op, size in outside if op == "all-reduce"), ops  # column statistics, X^T Y
        assert [size for op, size in outside if op == "all-gather"] in ([], [pad * capacity] * 2), ops
    assert [o for o in comm[str(N_FIT)] if o[1]] == [o for o in comm[str(2 * N_FIT + 1)] if o[1]]


def test_bad_mesh_is_a_clear_error():
    X = np.random.default_rng(0).normal(size=(12, 4))
    with pytest.raises(ValueError, match="mesh must be a jax.sharding.Mesh.*got str: 'nonsense'"):
        PLSRegression(2, mesh="nonsense").fit(X, X[:, 0])
    with pytest.raises(ValueError, match="devices=2 asks for more devices than JAX sees: 1"):
        make_mesh(2)
    with pytest.raises(ValueError, match="mesh must look like"):
        make_mesh(None, "two")


_CLI = """
import contextlib, io, pickle
from puaudit_jax.cli import main

data, root = %r, %r
runs = {"none": [], "2": ["--devices", "2"], "1x2": ["--mesh", "1x2"]}
out = {}
for name, flags in runs.items():
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        main(["probe", "fit", "--data", data, "--target", "overall", "--encoder", "minilm", "--components", "3",
              "--resample", "none", "--out", f"{root}/{name}.pkl", *flags])
        main(["probe", "predict", "--model", f"{root}/{name}.pkl", "--data", data, "--out", f"{root}/{name}.csv",
              *flags])
    with open(f"{root}/{name}.pkl", "rb") as f:
        head = pickle.load(f)["head"]
    out[name] = dict(log=log.getvalue(), meshes=[m.mesh for m in head.models_])
try:
    main(["probe", "predict", "--model", f"{root}/none.pkl", "--data", data, "--out", f"{root}/x.csv",
          "--devices", "3"])
except SystemExit as err:
    out["too_many"] = str(err)
emit(out)
"""


def test_probe_cli_devices_flag_reaches_extraction_and_pls(tmp_path):
    from puaudit_jax.datasets import load_usr_topicalchat

    table = load_usr_topicalchat().iloc[:45]
    rows = [
        dict(id=r.id, prompt=r.source[-300:], response=r.system_output, overall=r.overall) for r in table.itertuples()
    ]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = run_devices(_CLI % (str(data), str(tmp_path)), 2, timeout=240)
    assert "on one device" in res["none"]["log"]
    assert "on a mesh of 2 devices (2)" in res["2"]["log"] and "on a mesh of 2 devices (1x2)" in res["1x2"]["log"]
    assert all(m is None for run in ("none", "2", "1x2") for m in res[run]["meshes"])  # the probe keeps no mesh
    assert "asks for more devices than JAX sees: 2" in res["too_many"]
    ref = pd.read_csv(tmp_path / "none.csv")
    assert ref["id"].tolist() == table["id"].tolist() and ref["prediction"].std() > 0.05
    for name in ("2", "1x2"):
        got = pd.read_csv(tmp_path / f"{name}.csv")
        np.testing.assert_allclose(got["prediction"], ref["prediction"], atol=1e-4, rtol=0, err_msg=name)
