"""``--devices`` / ``--mesh`` and the cluster flags of ``puaudit audit``: the same items.csv on one
device, on four forced host devices and on a two-process jax.distributed cluster (subprocesses;
see tests/multidevice.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from puaudit_jax.audit.synthetic import cone_comparisons
from puaudit_jax.datasets import save_comparisons
from tests.multidevice import run_cluster, run_devices

# fixture cone_files_devices (tests/conftest.py): (folder, data), cone_comparisons(150, 450, d=16,
# neg_range=(0.2, 0.6), seed=3) saved there as cmp.jsonl and emb.npz


_AUDIT = """
import sys
from puaudit_jax.cli import main
args = ["audit", %r, "--embeddings", %r, "--scorer", "pot", "--rule", "paper", "--solver-dtype", "float64",
        "--no-figures", "--quiet", "--out", %r] + %r
emit(dict(rc=main(args)))
"""


def _audit(root, out, flags, devices):
    return run_devices(
        _AUDIT % (str(root / "cmp.jsonl"), str(root / "emb.npz"), str(root / out), flags), devices, timeout=300
    )


def test_audit_on_devices_and_mesh_equals_one_device(cone_files_devices):
    root, _ = cone_files_devices
    assert _audit(root, "one", [], 1)["rc"] == 0
    assert _audit(root, "four", ["--devices", "4"], 4)["rc"] == 0
    assert _audit(root, "mesh", ["--mesh", "2x2"], 4)["rc"] == 0
    ref = pd.read_csv(root / "one" / "items.csv")
    assert ref["flipped"].sum() > 0
    for out in ("four", "mesh"):
        items = pd.read_csv(root / out / "items.csv")
        pd.testing.assert_frame_equal(
            items.drop(columns=["score", "score_raw"]), ref.drop(columns=["score", "score_raw"]), obj=out
        )
        for col in ("score", "score_raw"):
            assert (items[col] - ref[col]).abs().max() < 1e-9, (out, col)


def test_audit_devices_errors_name_the_flag(cone_files_devices):
    root, _ = cone_files_devices
    code = _AUDIT.replace(
        "emit(dict(rc=main(args)))",
        """
try:
    main(args)
except SystemExit as e:
    emit(dict(msg=str(e)))
""",
    )
    res = run_devices(
        code % (str(root / "cmp.jsonl"), str(root / "emb.npz"), str(root / "bad"), ["--devices", "8"]), 2, timeout=120
    )
    assert "devices=8" in res["msg"] and "2" in res["msg"]
    res = run_devices(
        code % (str(root / "cmp.jsonl"), str(root / "emb.npz"), str(root / "bad"), ["--mesh", "3x2", "--devices", "2"]),
        2,
        timeout=120,
    )
    assert "3x2" in res["msg"]
    res = run_devices(
        code
        % (
            str(root / "cmp.jsonl"),
            str(root / "emb.npz"),
            str(root / "bad"),
            ["--coordinator", "127.0.0.1:1", "--num-processes", "2"],
        ),
        1,
        timeout=120,
    )
    assert "process_id" in res["msg"]


_CLUSTER = """
import jax
from puaudit_jax.cli import main
args = ["audit", %r, "--embeddings", %r, "--scorer", "pot", "--rule", "paper", "--solver-dtype", "float64",
        "--no-figures", "--quiet", "--out", %r]
rc = main(args)
emit(dict(rc=rc, rank=jax.process_index(), devices=len(jax.devices())))
"""


def test_audit_on_a_two_process_cluster(cone_files_devices):
    """Both processes run the audit over the 4 devices of the cluster (the flags come from the
    PUAUDIT_* environment); process 0 writes items.csv, equal to one device's."""
    root, _ = cone_files_devices
    if not (root / "one" / "items.csv").exists():
        assert _audit(root, "one", [], 1)["rc"] == 0
    results = run_cluster(
        _CLUSTER % (str(root / "cmp.jsonl"), str(root / "emb.npz"), str(root / "cluster")), 2, 2, timeout=300
    )
    assert [r["devices"] for r in results] == [4, 4] and all(r["rc"] == 0 for r in results)
    ref = pd.read_csv(root / "one" / "items.csv")
    items = pd.read_csv(root / "cluster" / "items.csv")
    pd.testing.assert_frame_equal(items.drop(columns=["score", "score_raw"]), ref.drop(columns=["score", "score_raw"]))
    assert (items["score"] - ref["score"]).abs().max() < 1e-9


_CLUSTER_ENCODE = """
import jax
from puaudit_jax.cli import main
args = ["audit", %r, "--encoder", "minilm", "--no-cache", "--scorer", "pot", "--rule", "paper",
        "--solver-dtype", "float64", "--no-figures", "--quiet", "--out", %r]
emit(dict(rc=main(args), rank=jax.process_index()))
"""


# slow (43 s; CI runs it): the real MiniLM end to end, once alone and once in a cluster. The default set keeps
# encode_distributed on a real two-process cluster (tests/probes/test_extract_sharded.py::
# test_encode_distributed_two_processes) and the audit command on a cluster (test_audit_on_a_two_process_cluster)
@pytest.mark.slow
def test_audit_embeds_on_a_two_process_cluster(tmp_path):
    """Embedding in a cluster: each process encodes its share of the texts on its own devices
    (probes.extract.encode_distributed) and every process audits all of them."""
    data = cone_comparisons(40, 60, d=8, seed=5)
    save_comparisons(data.table, tmp_path / "cmp.jsonl")
    one = run_devices(_CLUSTER_ENCODE % (str(tmp_path / "cmp.jsonl"), str(tmp_path / "one")), 1, timeout=300)
    assert one["rc"] == 0
    results = run_cluster(_CLUSTER_ENCODE % (str(tmp_path / "cmp.jsonl"), str(tmp_path / "cluster")), 2, 2, timeout=300)
    assert all(r["rc"] == 0 for r in results)
    ref, items = (pd.read_csv(tmp_path / out / "items.csv") for out in ("one", "cluster"))
    assert items["id"].tolist() == ref["id"].tolist() and items["status"].tolist() == ref["status"].tolist()
    assert (items["score"] - ref["score"]).abs().max() < 1e-3  # float32 embeddings, other batches
