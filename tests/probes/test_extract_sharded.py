"""Data-parallel extraction (`mesh=`) and `encode_distributed`, in subprocesses with forced host
devices (XLA fixes the device count at start-up; see tests/multidevice.py)."""

import numpy as np
import pytest

from tests.multidevice import run_cluster, run_devices

TEXTS = [f"Sample {i}: the judge rated this answer " + "quite " * (i % 5) + "well." for i in range(13)]

_SHARDED = """
import jax
from tests.helpers import make_tiny_decoder
import re
import numpy as np
from probes import extract
from probes.extract import EncodeConfig
from puaudit_runtime.mesh import make_mesh
from probes.models import load_pretrained

texts = %r
meshes = {"4": make_mesh(4), "2x2": make_mesh(4, "2x2"), "3": make_mesh(3)}
minilm = load_pretrained("minilm")
config = EncodeConfig(batch_size=8, max_length=32)
enc = {name: extract.encode(minilm, texts, config, mesh=mesh)[0] for name, mesh in [("none", None), ("4", meshes["4"])]}

tiny = make_tiny_decoder()
rng = np.random.default_rng(0)
seqs = [rng.integers(2, 101, n).tolist() for n in rng.integers(1, 30, 13)]
dconfig = EncodeConfig(layers=[1, -1], pooling="last", padding_side="left", batch_size=8, micro_batch_tokens=32)
dec = {name: extract.encode_ids(tiny, seqs, dconfig, mesh=mesh)[0] for name, mesh in [("none", None), *meshes.items()]}
prefix, suffixes = seqs[0], seqs[1:6]
shared = {name: extract.encode_with_shared_prefix(tiny, prefix, suffixes, layers=-1, batch_size=4, mesh=mesh)
          for name, mesh in [("none", None), ("3", meshes["3"])]}

# micro-batches inside each device's rows: no collective in the compiled forward
fwd = extract.pooled_forward(tiny.config, tiny.dtype, (3,), "last", 32, meshes["4"])
ids, valid = extract.rows_on(meshes["4"], np.ones((16, 16), np.int32), np.ones((16, 16), bool))
hlo = fwd.lower(extract.params_on(tiny, meshes["4"]), ids, valid).compile().as_text()
emit(dict(enc=enc, dec=dec, shared=shared, devices=len(jax.devices()),
          collectives=len(re.findall("all-gather|all-reduce|all-to-all|collective-permute", hlo))))
"""


@pytest.mark.slow  # 4 devices, an encoder and a decoder compiled per layout (20-37 s); the two-process test below stays
def test_sharded_equals_single_device():
    res = run_devices(_SHARDED % (TEXTS,), 4, timeout=240)
    assert res["devices"] == 4 and res["collectives"] == 0
    enc = {k: np.asarray(v) for k, v in res["enc"].items()}
    assert enc["none"].shape == (13, 384)
    np.testing.assert_allclose(enc["4"], enc["none"], atol=1e-5, rtol=0)
    dec = {k: np.asarray(v) for k, v in res["dec"].items()}
    assert dec["none"].shape == (13, 2, 48)
    assert np.abs(dec["none"][0] - dec["none"][1]).max() > 1e-3  # rows differ: a misplaced row fails
    for name in ("4", "2x2", "3"):
        np.testing.assert_allclose(dec[name], dec["none"], atol=1e-5, rtol=0, err_msg=f"mesh {name}")
    np.testing.assert_allclose(res["shared"]["3"], res["shared"]["none"], atol=1e-5, rtol=0)


_CLUSTER = """
from pathlib import Path
import jax
from puaudit_runtime.cluster import initialize_cluster, process_rows
initialize_cluster()
from probes import extract
from probes.extract import EncodeConfig
from probes.models import load_pretrained

texts, cache = %r, Path(%r)
minilm = load_pretrained("minilm")
config = EncodeConfig(batch_size=8, max_length=32)
full, _ = extract.encode_distributed(minilm, texts, config, cache_dir=cache)
files = len(list(cache.rglob("part-*.npz")))  # the gather follows every process's write
again, report = extract.encode_distributed(minilm, texts[::-1], config, cache_dir=cache)
start, stop = process_rows(len(texts))
out = dict(rank=jax.process_index(), local_devices=jax.local_device_count(), full=full, again=again,
           files=files, n_cached=report.n_cached, share=stop - start)
if jax.process_index() == 0:
    out["reference"] = extract.encode(minilm, texts, config)[0]
emit(out)
"""


def test_encode_distributed_two_processes(tmp_path):
    results = run_cluster(_CLUSTER % (TEXTS, str(tmp_path / "cache")), 2, 2, timeout=240)
    reference = np.asarray(results[0]["reference"])
    assert reference.shape == (13, 384)
    for res in results:
        assert res["local_devices"] == 2 and res["files"] == 2
        np.testing.assert_allclose(res["full"], reference, atol=1e-5, rtol=0, err_msg=f"process {res['rank']}")
        np.testing.assert_allclose(res["again"], reference[::-1], atol=1e-5, rtol=0)
        assert res["n_cached"] == res["share"]  # reversed: each share was written by the other process
    assert sorted(r["share"] for r in results) == [6, 7]
