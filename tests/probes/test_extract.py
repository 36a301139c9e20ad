"""probes.extract on a tiny random decoder (fast) and on MiniLM (chunking, disk cache)."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from probes import extract
from probes.models.batching import bucket_length, pool_weights

# fixtures (tests/conftest.py): tiny_decoder, the 3-layer random decoder (d = 48, vocab 101,
# tests.helpers.make_tiny_decoder); minilm, the bundled MiniLM port


def _random_ids(rng, lengths, vocab=101):
    return [rng.integers(2, vocab, n).tolist() for n in lengths]


def test_left_and_right_padding_agree(tiny_decoder):
    seqs = _random_ids(np.random.default_rng(0), [5, 17, 9, 30, 1])
    right = extract.encode_ids(tiny_decoder, seqs, layers=[0, 1, 2, 3], padding_side="right")
    left = extract.encode_ids(tiny_decoder, seqs, layers=[0, 1, 2, 3], padding_side="left")
    alone = np.stack([extract.encode_ids(tiny_decoder, [s], layers=[0, 1, 2, 3])[0] for s in seqs])
    assert right.shape == (5, 4, 48)
    np.testing.assert_allclose(left, right, atol=1e-5, rtol=0)
    np.testing.assert_allclose(alone, right, atol=1e-5, rtol=3e-5)  # other bucket length: fp32 rounding
    # last-token state really depends on the last token
    other = extract.encode_ids(tiny_decoder, [seqs[1][:-1] + [seqs[1][-1] % 50 + 3]], layers=-1)
    assert np.abs(other[0] - right[1, -1]).max() > 1e-3


def test_shared_prefix_equals_full_recomputation(tiny_decoder):
    rng = np.random.default_rng(1)
    prefix = _random_ids(rng, [37])[0]  # not a bucket size: the prefix cache has padding
    suffixes = _random_ids(rng, [4, 11, 1, 7, 20])
    shared = extract.encode_with_shared_prefix(tiny_decoder, prefix, suffixes, layers=[1, -1], batch_size=4)
    full = extract.encode_ids(tiny_decoder, [prefix + s for s in suffixes], layers=[1, -1])
    assert shared.shape == (5, 2, 48)
    np.testing.assert_allclose(shared, full, atol=1e-5, rtol=0)
    # and differs from the suffix alone (the prefix is really attended to)
    alone = extract.encode_ids(tiny_decoder, suffixes, layers=[1, -1])
    assert np.abs(alone - shared).max() > 1e-3


def test_middle_out_is_reported_and_keeps_both_ends(tiny_decoder):
    rng = np.random.default_rng(2)
    seqs = _random_ids(rng, [50, 10])
    with pytest.warns(UserWarning, match="1/2 inputs exceed 32"):
        out, rep = extract.encode_ids(tiny_decoder, seqs, max_length=32, return_report=True)
    assert rep.n_over_window == 1 and rep.over_window == [0] and rep.n_tokens_cut == 18
    expected = extract.encode_ids(tiny_decoder, [seqs[0][:8] + seqs[0][-24:]], max_length=32)
    np.testing.assert_allclose(out[0], expected[0], atol=1e-6)
    with pytest.raises(ValueError, match="exceed 32 tokens"):
        extract.encode_ids(tiny_decoder, seqs, max_length=32, long_inputs="error")


def test_generation_and_logprobs_consistent(tiny_decoder):
    seqs = _random_ids(np.random.default_rng(3), [6, 13])
    gen = extract.greedy_generate(tiny_decoder, seqs, max_new_tokens=5, stop_ids=set(), return_ids=True)
    assert [len(g) for g in gen] == [5, 5]
    # greedy step t must be the argmax of a full forward pass over prompt + previous tokens
    from probes.models.llama import Llama

    for s, g in zip(seqs, gen):
        full = s + g
        t = len(full)
        model, params = tiny_decoder.model, tiny_decoder.params
        out = model.apply(params, jnp.asarray([full]), jnp.arange(t)[None], jnp.ones((1, t), bool))
        logits = np.asarray(model.apply(params, out["last"], method=Llama.lm_logits))[0]
        assert logits[len(s) - 1 : -1].argmax(-1).tolist() == g
    lp = extract.next_token_logprobs(tiny_decoder, seqs, [5, 7, 9])
    assert lp.shape == (2, 3) and np.all(lp < 0)


def test_pool_weights_and_buckets():
    valid = jnp.asarray([[0, 0, 1, 1], [1, 1, 1, 0]], bool)
    np.testing.assert_array_equal(np.asarray(pool_weights(valid, "last"))[:, 0], [[0, 0, 0, 1], [0, 0, 1, 0]])
    np.testing.assert_array_equal(np.asarray(pool_weights(valid, "cls"))[:, 0], [[0, 0, 1, 0], [1, 0, 0, 0]])
    np.testing.assert_allclose(np.asarray(pool_weights(valid, "mean"))[1, 0], [1 / 3, 1 / 3, 1 / 3, 0])
    assert [bucket_length(n, 512) for n in (1, 16, 17, 300, 512)] == [16, 16, 32, 512, 512]
    with pytest.raises(ValueError):
        bucket_length(513, 512)


@pytest.mark.parametrize("b,micro", [(8, 64), (6, 64), (5, 16)])  # 2-row steps x4 / x3; 1-row steps (t > micro)
def test_micro_batches_equal_one_pass(tiny_decoder, b, micro):
    rng = np.random.default_rng(2)
    ids = rng.integers(2, 101, (b, 32)).astype(np.int32)
    valid = np.ones((b, 32), bool)
    valid[1, 20:] = False  # right padding
    valid[-1, :9] = False  # left padding
    args = (tiny_decoder.params, jnp.asarray(ids), jnp.asarray(valid))
    layers, cfg, dtype = (0, 2, 3), tiny_decoder.config, tiny_decoder.dtype
    one = extract.pooled_forward(cfg, dtype, layers, "last", micro_batch_tokens=None)(*args)
    out = extract.pooled_forward(cfg, dtype, layers, "last", micro_batch_tokens=micro)(*args)
    assert out.shape == (b, 3, 48)
    # float32 sums in other block shapes: 1.03e-5 seen on one CPU (values ~1); a wrong row would be off by O(1)
    np.testing.assert_allclose(out, one, atol=3e-5, rtol=0)
    assert np.abs(np.asarray(one)[0] - np.asarray(one)[1]).max() > 1e-3  # rows differ: a misplaced row fails


def test_micro_batches_equal_one_pass_encoder(minilm):
    rng = np.random.default_rng(3)
    seqs = [rng.integers(1000, 20000, n).tolist() for n in (16, 16, 10, 16)]
    one = extract.encode_ids(minilm, seqs, batch_size=4, micro_batch_tokens=None)
    for micro in (32, 1, "auto"):  # 2-row steps, 1-row steps (fewer tokens than a row), the default
        np.testing.assert_allclose(
            extract.encode_ids(minilm, seqs, batch_size=4, micro_batch_tokens=micro), one, atol=1e-5, rtol=0
        )
    assert extract.resolve_micro_batch_tokens("auto") == extract.MICRO_BATCH_TOKENS  # tests run on CPU
    for bad in (0, -5, 1.5, True, "all"):
        with pytest.raises(ValueError, match="micro_batch_tokens"):
            extract.encode_ids(minilm, seqs, micro_batch_tokens=bad)


def test_chunked_encoding_is_token_weighted_mean_of_windows(minilm):
    text = "Auditing judges with partial optimal transport. " * 6  # ~50 tokens
    with pytest.warns(UserWarning, match="exceed 24 tokens"):
        out, rep = extract.encode(
            minilm, [text, "short"], max_length=24, chunk_overlap=4, progress=False, return_report=True
        )
    assert rep.n_over_window == 1 and rep.n_tokens_cut == 0 and rep.n_chunks > 3
    ids = minilm.tokenizer.encode(text)
    body = ids[1:-1]
    starts = list(range(0, len(body) - 22, 18)) + [len(body) - 22]
    pieces = [[ids[0]] + body[s : s + 22] + [ids[-1]] for s in starts]
    states = extract.encode_ids(minilm, pieces)
    expected = (states * 24).sum(0) / (24 * len(pieces))
    np.testing.assert_allclose(out[0], expected, atol=1e-5)
    # batched beside a long text vs alone: float32 rounding only (1.1e-6 seen on one CPU)
    np.testing.assert_allclose(out[1], extract.encode(minilm, ["short"], progress=False)[0], atol=5e-6)


def test_disk_cache_reuses_embeddings(minilm, tmp_path):
    texts = ["first text", "second text", "first text"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, r1 = extract.encode(minilm, texts, cache_dir=tmp_path, progress=False, return_report=True)
    assert r1.n_cached == 0
    b, r2 = extract.encode(minilm, texts + ["third"], cache_dir=tmp_path, progress=False, return_report=True)
    assert r2.n_cached == 3
    np.testing.assert_array_equal(a, b[:3])
    np.testing.assert_allclose(b[3], extract.encode(minilm, ["third"], progress=False)[0], atol=1e-6)
    c = extract.encode(minilm, texts, cache_dir=tmp_path, layers=[1, -1], progress=False)  # other settings
    assert c.shape == (3, 2, 384)
    assert len(list(tmp_path.rglob("part-*.npz"))) == 3


def test_encode_pairs_formats(minilm):
    qs, os_ = ["What is 2+2?", [{"role": "user", "content": "Hi"}]], ["4", "Hello!"]
    got = extract.encode_pairs(minilm, qs, os_, progress=False)
    want = extract.encode(
        minilm, ["<|user|>What is 2+2?<|assistant|>4", "<|user|>Hi<|assistant|>Hello!"], progress=False
    )
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="no chat template"):
        extract.encode_pairs(minilm, qs, os_, style="chat", progress=False)
