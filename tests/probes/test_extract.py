"""probes.extract on a tiny random decoder (fast) and on MiniLM (chunking, disk cache)."""

import warnings
from dataclasses import FrozenInstanceError, replace

import jax.numpy as jnp
import numpy as np
import pytest

from probes import extract
from probes.extract import EncodeConfig
from probes.models.batching import bucket_length, pool_weights, tokenize_inputs

# fixtures (tests/conftest.py): tiny_decoder, the 3-layer random decoder (d = 48, vocab 101,
# tests.helpers.make_tiny_decoder); minilm, the bundled MiniLM port


def _random_ids(rng, lengths, vocab=101):
    return [rng.integers(2, vocab, n).tolist() for n in lengths]


def test_left_and_right_padding_agree(tiny_decoder):
    seqs = _random_ids(np.random.default_rng(0), [5, 17, 9, 30, 1])
    every = EncodeConfig(layers=[0, 1, 2, 3])
    right, _ = extract.encode_ids(tiny_decoder, seqs, every)
    left, _ = extract.encode_ids(tiny_decoder, seqs, replace(every, padding_side="left"))
    alone = np.stack([extract.encode_ids(tiny_decoder, [s], every)[0][0] for s in seqs])
    assert right.shape == (5, 4, 48)
    np.testing.assert_allclose(left, right, atol=1e-5, rtol=0)
    np.testing.assert_allclose(alone, right, atol=1e-5, rtol=3e-5)  # other bucket length: fp32 rounding
    # last-token state really depends on the last token
    other, _ = extract.encode_ids(tiny_decoder, [seqs[1][:-1] + [seqs[1][-1] % 50 + 3]])
    assert np.abs(other[0] - right[1, -1]).max() > 1e-3


def test_shared_prefix_equals_full_recomputation(tiny_decoder):
    rng = np.random.default_rng(1)
    prefix = _random_ids(rng, [37])[0]  # not a bucket size: the prefix cache has padding
    suffixes = _random_ids(rng, [4, 11, 1, 7, 20])
    shared = extract.encode_with_shared_prefix(tiny_decoder, prefix, suffixes, layers=[1, -1], batch_size=4)
    full, _ = extract.encode_ids(tiny_decoder, [prefix + s for s in suffixes], EncodeConfig(layers=[1, -1]))
    assert shared.shape == (5, 2, 48)
    np.testing.assert_allclose(shared, full, atol=1e-5, rtol=0)
    # and differs from the suffix alone (the prefix is really attended to)
    alone, _ = extract.encode_ids(tiny_decoder, suffixes, EncodeConfig(layers=[1, -1]))
    assert np.abs(alone - shared).max() > 1e-3


def test_middle_out_is_reported_and_keeps_both_ends(tiny_decoder):
    rng = np.random.default_rng(2)
    seqs = _random_ids(rng, [50, 10])
    with pytest.warns(UserWarning, match="1/2 inputs exceed 32"):
        out, rep = extract.encode_ids(tiny_decoder, seqs, EncodeConfig(max_length=32))
    assert rep.n_over_window == 1 and rep.over_window == [0] and rep.n_tokens_cut == 18
    expected, _ = extract.encode_ids(tiny_decoder, [seqs[0][:8] + seqs[0][-24:]], EncodeConfig(max_length=32))
    np.testing.assert_allclose(out[0], expected[0], atol=1e-6)
    with pytest.raises(ValueError, match="exceed 32 tokens"):
        extract.encode_ids(tiny_decoder, seqs, EncodeConfig(max_length=32, long_inputs="error"))


@pytest.mark.parametrize(
    "field, value",
    [
        ("layers", []),
        ("layers", 1.5),
        ("layers", [0, "1"]),
        ("pooling", "max"),
        ("batch_size", 0),
        ("batch_size", True),
        ("max_length", 0),
        ("long_inputs", "drop"),
        ("head_fraction", 1.5),
        ("head_fraction", -0.1),
        ("chunk_overlap", -1),
        ("padding_side", "top"),
        ("normalised", 1),
        ("micro_batch_tokens", 0),
        ("progress", "yes"),
        ("cache_every", 0),
    ],
)
def test_encode_config_rejects_a_bad_value_naming_its_field(field, value):
    with pytest.raises(ValueError, match=f"^{field} must be"):
        EncodeConfig(**{field: value})


def test_encode_config_is_frozen_and_hashable():
    config = EncodeConfig(layers=[1, np.int64(-1)], max_length=np.int64(64))
    assert config.layers == (1, -1) and hash(config) == hash(EncodeConfig(layers=(1, -1), max_length=64))
    with pytest.raises(FrozenInstanceError):
        config.layers = 0
    numpy_ints = EncodeConfig(layers=np.int64(2), batch_size=np.int32(4), micro_batch_tokens=np.int64(64))
    assert all(type(getattr(numpy_ints, k)) is int for k in ("layers", "batch_size", "micro_batch_tokens"))
    assert EncodeConfig().cache_settings() == dict(layers=-1, pooling=None, max_length=None, long_inputs=None,
                                                   head_fraction=0.25, chunk_overlap=None, normalize=False)  # fmt: skip


def test_every_vector_changing_setting_reaches_the_forward(tiny_decoder):
    """layers, pooling, max_length / long_inputs / head_fraction and normalised each change the result
    exactly as they say: a setting ignored on the way to the forward fails here."""
    seqs = _random_ids(np.random.default_rng(4), [40, 12, 25])
    enc = lambda config, ids=seqs: extract.encode_ids(tiny_decoder, ids, config)[0]  # noqa: E731
    both = enc(EncodeConfig(layers=(0, -1)))
    assert both.shape == (3, 2, 48)
    np.testing.assert_array_equal(enc(EncodeConfig(layers=0)), both[:, 0])
    np.testing.assert_array_equal(enc(EncodeConfig()), both[:, 1])
    assert np.abs(both[:, 0] - both[:, 1]).max() > 1e-3
    # causal attention: the first token's state is that token's alone
    first = np.stack([enc(EncodeConfig(), [s[:1]])[0] for s in seqs])
    np.testing.assert_allclose(enc(EncodeConfig(pooling="cls")), first, atol=1e-5, rtol=3e-5)  # other buckets
    assert np.abs(enc(EncodeConfig(pooling="mean")) - both[:, 1]).max() > 1e-3
    with pytest.warns(UserWarning, match="exceed 16 tokens"):
        truncated = enc(EncodeConfig(max_length=16, long_inputs="truncate"))
        halves = enc(EncodeConfig(max_length=16, head_fraction=0.5))
    np.testing.assert_allclose(truncated, enc(EncodeConfig(), [s[:16] for s in seqs]), atol=1e-5, rtol=0)
    cut = [s[:8] + s[-8:] if len(s) > 16 else s for s in seqs]
    np.testing.assert_allclose(halves, enc(EncodeConfig(), cut), atol=1e-5, rtol=0)
    unit_rows = enc(EncodeConfig(normalised=True))
    np.testing.assert_allclose(unit_rows, both[:, 1] / np.linalg.norm(both[:, 1], axis=-1, keepdims=True), atol=1e-6)


def test_batch_settings_reach_the_batches(tiny_decoder, monkeypatch):
    """batch_size, padding_side, micro_batch_tokens and progress (which change no value) reach the
    padding, the jitted forward and the progress bar."""
    seen = dict(pad=[], micro=[], bars=[])
    pad, forward, bar = extract.forward.pad_batch, extract.forward.pooled_forward, extract.encoding.tqdm

    def spy_pad(group, length, rows, pad_id, side):
        seen["pad"].append((rows, side))
        return pad(group, length, rows, pad_id, side)

    def spy_forward(config, dtype, layers, pooling, micro, mesh):
        seen["micro"].append(micro)
        return forward(config, dtype, layers, pooling, micro, mesh)

    def spy_bar(*args, **kwargs):
        seen["bars"].append(kwargs["disable"])
        return bar(*args, **kwargs)

    monkeypatch.setattr(extract.forward, "pad_batch", spy_pad)
    monkeypatch.setattr(extract.forward, "pooled_forward", spy_forward)
    monkeypatch.setattr(extract.encoding, "tqdm", spy_bar)
    seqs = _random_ids(np.random.default_rng(5), [5] * 8)
    config = EncodeConfig(batch_size=4, padding_side="left", micro_batch_tokens=32, progress=True)
    extract.encode_ids(tiny_decoder, seqs, config)
    assert seen == dict(pad=[(4, "left"), (4, "left")], micro=[32], bars=[False])
    extract.encode_ids(tiny_decoder, seqs)
    assert seen["pad"][2:] == [(8, "right")] and seen["micro"][1:] == [extract.MICRO_BATCH_TOKENS]
    assert seen["bars"][1:] == [True]


class _RecordingBar:
    """A stand-in for tqdm that records its total and every step."""

    bars: list = []

    def __init__(self, iterable=(), *, total=None, disable=False, **kwargs):
        self.iterable, self.total, self.disable, self.steps = iterable, total, disable, []
        _RecordingBar.bars.append(self)

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update()

    def update(self, n=1):
        self.steps.append(n)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@pytest.mark.parametrize("cache", [False, True])
def test_the_progress_bar_moves_after_every_batch(tiny_char_decoder, tmp_path, monkeypatch, cache):
    """One bar counts the inputs and moves after every batch of the encoder, cache shards or not."""
    monkeypatch.setattr(extract.encoding, "tqdm", _RecordingBar)
    monkeypatch.setattr(_RecordingBar, "bars", [])
    texts = [f"text number {k} " + "x" * (3 * k) for k in range(12)]
    config = EncodeConfig(batch_size=2, cache_every=5, max_length=20, long_inputs="middle_out", progress=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the long inputs' warning: not what this test is about
        extract.encode(tiny_char_decoder, texts, config, cache_dir=tmp_path if cache else None)
    shown = [b for b in _RecordingBar.bars if not b.disable]
    assert len(shown) == 1 and shown[0].total == 12 and sum(shown[0].steps) == 12
    assert max(shown[0].steps) <= 2 and len(shown[0].steps) >= 6  # a batch of 2 at a time, never a shard of 5


def test_chunked_inputs_advance_the_bar_when_their_last_window_is_encoded():
    bar = _RecordingBar(total=3)
    on_batch = extract.encoding._inputs_done(bar, [0, 0, 0, 1, 2, 2])  # input 0: three windows, 2: two
    for batch in ([0, 1], [2, 3], [4, 5]):
        on_batch(batch)
    assert bar.steps == [0, 2, 1]


def test_encode_passes_its_config_through_with_and_without_the_cache(tiny_char_decoder, tmp_path):
    texts = ["a first text", "the second, longer text", "third"]
    ids = tokenize_inputs(tiny_char_decoder.tokenizer, texts)
    for config in (EncodeConfig(), EncodeConfig(layers=[1, -1], pooling="mean", normalised=True)):
        want, _ = extract.encode_ids(tiny_char_decoder, ids, config)
        got, report = extract.encode(tiny_char_decoder, texts, config)
        np.testing.assert_array_equal(got, want)
        cached, _ = extract.encode(tiny_char_decoder, texts, config, cache_dir=tmp_path)
        np.testing.assert_allclose(cached, want, atol=1e-6, rtol=0)
        again, report = extract.encode(tiny_char_decoder, texts, config, cache_dir=tmp_path)
        assert report.n_cached == 3 and report.n_inputs == 3
        np.testing.assert_array_equal(again, cached)
    assert len(list(tmp_path.iterdir())) == 2  # the two configs: two cache namespaces


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
    one, _ = extract.encode_ids(minilm, seqs, EncodeConfig(batch_size=4, micro_batch_tokens=None))
    for micro in (32, 1, "auto"):  # 2-row steps, 1-row steps (fewer tokens than a row), the default
        out, _ = extract.encode_ids(minilm, seqs, EncodeConfig(batch_size=4, micro_batch_tokens=micro))
        np.testing.assert_allclose(out, one, atol=1e-5, rtol=0)
    assert extract.resolve_micro_batch_tokens("auto") == extract.MICRO_BATCH_TOKENS  # tests run on CPU
    for bad in (0, -5, 1.5, True, "all"):
        with pytest.raises(ValueError, match="micro_batch_tokens"):
            EncodeConfig(micro_batch_tokens=bad)


def test_chunked_encoding_is_token_weighted_mean_of_windows(minilm):
    text = "Auditing judges with partial optimal transport. " * 6  # ~50 tokens
    with pytest.warns(UserWarning, match="exceed 24 tokens"):
        out, rep = extract.encode(minilm, [text, "short"], EncodeConfig(max_length=24, chunk_overlap=4))
    assert rep.n_over_window == 1 and rep.n_tokens_cut == 0 and rep.n_chunks > 3
    ids = minilm.tokenizer.encode(text)
    body = ids[1:-1]
    starts = list(range(0, len(body) - 22, 18)) + [len(body) - 22]
    pieces = [[ids[0]] + body[s : s + 22] + [ids[-1]] for s in starts]
    states, _ = extract.encode_ids(minilm, pieces)
    expected = (states * 24).sum(0) / (24 * len(pieces))
    np.testing.assert_allclose(out[0], expected, atol=1e-5)
    # batched beside a long text vs alone: float32 rounding only (1.1e-6 seen on one CPU)
    np.testing.assert_allclose(out[1], extract.encode(minilm, ["short"])[0][0], atol=5e-6)


def test_disk_cache_reuses_embeddings(minilm, tmp_path):
    texts = ["first text", "second text", "first text"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, r1 = extract.encode(minilm, texts, cache_dir=tmp_path)
    assert r1.n_cached == 0
    b, r2 = extract.encode(minilm, texts + ["third"], cache_dir=tmp_path)
    assert r2.n_cached == 3
    np.testing.assert_array_equal(a, b[:3])
    np.testing.assert_allclose(b[3], extract.encode(minilm, ["third"])[0][0], atol=1e-6)
    c, _ = extract.encode(minilm, texts, EncodeConfig(layers=[1, -1]), cache_dir=tmp_path)  # other settings
    assert c.shape == (3, 2, 384)
    assert len(list(tmp_path.rglob("part-*.npz"))) == 3


def test_tokenised_in_batches_each_input_in_its_place(smollm2):
    tok = smollm2.tokenizer
    chat = [{"role": "user", "content": "hi"}]
    inputs = ["hello there", chat, [5, 6, 7], "world", np.array([1, 2])]
    assert tokenize_inputs(tok, inputs) == [
        tok.encode("hello there"), tok.encode(tok.apply_chat_template(chat), add_special_tokens=False), [5, 6, 7],
        tok.encode("world"), [1, 2]]  # fmt: skip
    assert tokenize_inputs(tok, ["hello there"], special=False) == [tok.encode("hello there", add_special_tokens=False)]
    with pytest.raises(TypeError, match="input 1: expected a string"):
        tokenize_inputs(tok, ["ok", 3.5])


def test_inputs_served_from_the_cache_read_no_weight(tmp_path):
    """A run whose every input is in the disk cache never matches the weights to the model."""
    from probes.models import load_pretrained

    texts = ["first text", "a second, longer text"]
    cached, _ = extract.encode(load_pretrained("minilm"), texts, cache_dir=tmp_path)
    fresh = load_pretrained("minilm")
    again, report = extract.encode(fresh, texts[::-1], cache_dir=tmp_path)
    assert not fresh.params_loaded and report.n_cached == 2
    np.testing.assert_array_equal(again, cached[::-1])
    extract.encode(fresh, ["not cached"], cache_dir=tmp_path)
    assert fresh.params_loaded


def test_encode_pairs_formats(minilm):
    qs, os_ = ["What is 2+2?", [{"role": "user", "content": "Hi"}]], ["4", "Hello!"]
    got, _ = extract.encode_pairs(minilm, qs, os_)
    want, _ = extract.encode(minilm, ["<|user|>What is 2+2?<|assistant|>4", "<|user|>Hi<|assistant|>Hello!"])
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="no chat template"):
        extract.encode_pairs(minilm, qs, os_, style="chat")
