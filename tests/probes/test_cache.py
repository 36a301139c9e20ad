"""The embedding disk cache (probes.extract): damaged shards are found, named and recomputed;
encoding writes the cache as it goes, so a killed run leaves what it encoded for the next one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from probes.extract import EmbeddingCache, EncodeConfig, encode

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [f"text number {i} " + "abc " * (i % 7) for i in range(24)]
BATCH_4 = EncodeConfig(batch_size=4)


def _shards(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.rglob("part-*.npz"))


@pytest.fixture(scope="module")
def fresh(tiny_char_decoder):
    """The vectors of TEXTS without any cache."""
    return encode(tiny_char_decoder, TEXTS, BATCH_4)[0]


def _damage(shard: Path, how: str) -> None:
    if how == "truncated":
        shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    elif how == "garbage":
        shard.write_bytes(b"not a zip file at all")
    elif how == "empty":
        shard.write_bytes(b"")
    else:
        with np.load(shard) as z:
            keys, values, z_checksum = z["keys"], z["values"], z["checksum"]
        arrays = {
            "wrong-dimension": dict(keys=keys, values=np.zeros((len(keys), 100), np.float32)),
            "no-values": dict(keys=keys),
            "nan": dict(keys=keys, values=np.full_like(values, np.nan)),
            "length-mismatch": dict(keys=keys, values=values[:-1]),
            # well-formed values of the right shape, dtype and key count: only the checksum tells
            "rewritten": dict(
                keys=keys,
                values=np.random.default_rng(0).normal(size=values.shape).astype(values.dtype),
                checksum=z_checksum,
            ),
        }[how]
        with open(shard, "wb") as fh:
            np.savez(fh, **arrays)


@pytest.mark.parametrize(
    "how", ["truncated", "garbage", "empty", "wrong-dimension", "no-values", "nan", "length-mismatch", "rewritten"]
)
def test_a_damaged_shard_is_reported_with_its_path_removed_and_recomputed(tmp_path, tiny_char_decoder, fresh, how):
    encode(tiny_char_decoder, TEXTS, EncodeConfig(batch_size=4, cache_every=8), cache_dir=tmp_path)
    shards = _shards(tmp_path)
    assert len(shards) == 3
    _damage(shards[1], how)
    with pytest.warns(RuntimeWarning, match=f"damaged cache shard {shards[1]}"):
        out, report = encode(tiny_char_decoder, TEXTS, BATCH_4, cache_dir=tmp_path)
    assert report.n_cached == 16 and not shards[1].exists()
    np.testing.assert_allclose(out, fresh, atol=2e-5)
    with warnings_as_errors():  # the recomputed rows were stored again: a third run is clean
        again, _ = encode(tiny_char_decoder, TEXTS, BATCH_4, cache_dir=tmp_path)
    np.testing.assert_array_equal(again, out)


def warnings_as_errors():
    import warnings

    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("error")

    class _Exit:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            ctx.__exit__(*exc)

    return _Exit()


def test_cache_keys_are_checked_too(tmp_path):
    cache = EmbeddingCache(tmp_path, "ns", row_shape=(3,))
    cache.put([EmbeddingCache.key("x")], np.ones((1, 3), np.float32))
    with open(tmp_path / "ns" / "part-bad.npz", "wb") as fh:
        np.savez(fh, keys=np.array(["not-a-hash"]), values=np.ones((1, 3), np.float32))
    with pytest.warns(RuntimeWarning, match="part-bad.npz"):
        stored = EmbeddingCache(tmp_path, "ns", row_shape=(3,)).load()
    assert list(stored) == [EmbeddingCache.key("x")]


def test_values_rewritten_with_random_numbers_fail_the_checksum(tmp_path):
    """A shard whose values were replaced by well-formed random ones (same shape, dtype, keys and
    stored checksum) is named, removed and not served."""
    keys = [EmbeddingCache.key(i) for i in range(4)]
    EmbeddingCache(tmp_path, "ns", row_shape=(3,)).put(keys, np.ones((4, 3), np.float32))
    (shard,) = _shards(tmp_path)
    with np.load(shard) as z:
        stored = dict(z)
    with open(shard, "wb") as fh:
        np.savez(fh, **{**stored, "values": np.random.default_rng(1).random((4, 3)).astype(np.float32)})
    with pytest.warns(RuntimeWarning, match=f"damaged cache shard {shard} .*checksum mismatch"):
        assert EmbeddingCache(tmp_path, "ns", row_shape=(3,)).load() == {}
    assert not shard.exists()


def test_a_shard_without_a_checksum_is_recomputed(tmp_path):
    """Shards written before checksums carry none: treated as damaged (removed, recomputed once)."""
    (tmp_path / "ns").mkdir()
    old = tmp_path / "ns" / "part-old.npz"
    with open(old, "wb") as fh:
        np.savez(fh, keys=np.array([EmbeddingCache.key("x")]), values=np.ones((1, 3), np.float32))
    with pytest.warns(RuntimeWarning, match="part-old.npz .*no checksum"):
        assert EmbeddingCache(tmp_path, "ns", row_shape=(3,)).load() == {}
    cache = EmbeddingCache(tmp_path, "ns", row_shape=(3,))
    cache.put([EmbeddingCache.key("x")], np.ones((1, 3), np.float32))
    with warnings_as_errors():
        stored = EmbeddingCache(tmp_path, "ns", row_shape=(3,)).load()
    np.testing.assert_array_equal(stored[EmbeddingCache.key("x")], np.ones(3, np.float32))


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("batch_size", 0, "batch_size"),
        ("batch_size", -3, "batch_size"),
        ("max_length", 0, "max_length"),
        ("cache_every", 0, "cache_every"),
    ],
)
def test_bad_settings_are_rejected_before_any_work(tmp_path, tiny_char_decoder, option, value, message):
    with pytest.raises(ValueError, match=message):
        encode(tiny_char_decoder, TEXTS, EncodeConfig(**{option: value}), cache_dir=tmp_path)
    assert not _shards(tmp_path)


KILLED = """
import sys
from probes.extract import EncodeConfig, encode
from tests.helpers import make_tiny_char_decoder
texts = [f"text number {i} " + "abc " * (i % 7) for i in range(int(sys.argv[2]))]
encode(make_tiny_char_decoder(), texts, EncodeConfig(batch_size=2, cache_every=4), cache_dir=sys.argv[1])
"""


def test_a_killed_encoding_leaves_what_it_encoded_for_the_rerun(tmp_path, tiny_char_decoder):
    n = 4000
    env = {**os.environ, "OMP_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path), str(n)], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 240
        while len(_shards(tmp_path)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the encoding finished before it could be killed: raise n"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    shards = _shards(tmp_path)
    stored = sum(len(np.load(s)["keys"]) for s in shards)
    assert len(shards) >= 2 and stored >= 8
    texts = [f"text number {i} " + "abc " * (i % 7) for i in range(stored + 6)]
    out, report = encode(tiny_char_decoder, texts, EncodeConfig(batch_size=2), cache_dir=tmp_path)
    assert report.n_cached == stored
    # float32 rows batched with other neighbours agree to rounding
    np.testing.assert_allclose(out, encode(tiny_char_decoder, texts, EncodeConfig(batch_size=2))[0], atol=2e-5)


def test_long_input_counts_are_reported_every_time_cached_or_not(tmp_path, tiny_char_decoder, monkeypatch, capsys):
    """The audit's report gets the encoder's counts of cut inputs on a cold and on a cached run alike."""
    import probes.models
    from puaudit_jax.audit.embed import embed_comparisons, probes_encoder
    from puaudit_jax.audit.synthetic import cone_comparisons

    monkeypatch.setattr(probes.models, "load_pretrained", lambda name: tiny_char_decoder)
    table = cone_comparisons(6, 4, d=4, seed=0).table
    runs = []
    for _ in range(2):
        encoder = probes_encoder("tiny", cache_dir=tmp_path, max_length=40, long_inputs="truncate", progress=False)
        runs.append(embed_comparisons(table, encoder).encoding)
        assert "texts were longer than 40 tokens" in capsys.readouterr().err
    cold, warm = runs
    assert cold["over_max_length"] > 0 and cold["tokens_cut"] > 0 and cold["cached"] == 0
    assert {k: v for k, v in warm.items() if k != "cached"} == {k: v for k, v in cold.items() if k != "cached"}
    assert warm["cached"] == warm["inputs"]
