"""Parity of the Flax ports with PyTorch transformers on random tiny configs of every family.

Each model is built by transformers from a random config, saved with `save_pretrained` (safetensors)
and loaded back through `probes.models.load_pretrained`, so the loader is exercised too.
Every layer's hidden states within 1e-4 (fp32), logits within 1e-4; padded batches included.
"""

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing reaches the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402

from probes.models import load_pretrained  # noqa: E402
from probes.models.llama import Llama  # noqa: E402

TOL = 1e-4
SMALL = dict(
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=3,
    num_attention_heads=4,
    vocab_size=97,
    max_position_embeddings=128,
)


def _batch(rng, vocab, lengths, pad_id=0):
    """Right-padded ids (B, T) and valid mask."""
    t = max(lengths)
    ids = np.full((len(lengths), t), pad_id, np.int64)
    valid = np.zeros((len(lengths), t), bool)
    for i, n in enumerate(lengths):
        ids[i, :n] = rng.integers(3, vocab, n)
        valid[i, :n] = True
    return ids, valid


def _save(model, tmp_path):
    model.save_pretrained(tmp_path, safe_serialization=True)
    return load_pretrained(tmp_path)


def _torch_model(cls, cfg, seed=0):
    torch.manual_seed(seed)
    m = cls(cfg).eval()
    with torch.no_grad():  # non-trivial norms and biases so that they matter in the comparison
        for name, p in m.named_parameters():
            if name.endswith("norm.weight") or "LayerNorm.weight" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    return m


def _compare_hidden(ours, theirs, valid):
    assert ours.shape[0] == len(theirs)
    for i, h in enumerate(theirs):
        d = np.abs(np.asarray(ours[i]) - h.numpy()) * valid[..., None]
        assert d.max() < TOL, f"hidden state {i}: max diff {d.max():.3g}"


def test_bert_parity(tmp_path):
    cfg = transformers.BertConfig(**SMALL, type_vocab_size=2, attn_implementation="eager")
    tm = _torch_model(transformers.BertModel, cfg)
    pre = _save(tm, tmp_path)
    ids, valid = _batch(np.random.default_rng(0), 97, [11, 7, 3])
    types = (np.arange(ids.shape[1])[None] >= 4).astype(np.int64) * valid
    out = pre.model.apply(pre.params, jnp.asarray(ids), jnp.asarray(valid), jnp.asarray(types))
    with torch.no_grad():
        ref = tm(
            torch.tensor(ids),
            attention_mask=torch.tensor(valid.astype(np.int64)),
            token_type_ids=torch.tensor(types),
            output_hidden_states=True,
        )
    _compare_hidden(out["hidden"], ref.hidden_states, valid)


DECODERS = {
    "llama3_rope_scaling_untied": (
        transformers.LlamaConfig,
        dict(
            num_key_value_heads=2,
            tie_word_embeddings=False,
            rope_theta=5e5,
            rope_scaling=dict(
                rope_type="llama3",
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=16,
            ),
            attention_bias=True,
        ),
    ),
    "llama_tied": (transformers.LlamaConfig, dict(num_key_value_heads=1, tie_word_embeddings=True, rope_theta=1e5)),
    "mistral_sliding": (transformers.MistralConfig, dict(num_key_value_heads=2, sliding_window=5)),
    "qwen2_bias": (transformers.Qwen2Config, dict(num_key_value_heads=2, tie_word_embeddings=False)),
    "qwen3_qknorm": (transformers.Qwen3Config, dict(num_key_value_heads=2, head_dim=16, tie_word_embeddings=True)),
}


@pytest.mark.parametrize("family", sorted(DECODERS))
def test_decoder_parity(family, tmp_path):
    cfg_cls, extra = DECODERS[family]
    cfg = cfg_cls(**SMALL, **extra, attn_implementation="eager")
    model_cls = transformers.AutoModelForCausalLM.from_config(cfg).__class__
    tm = _torch_model(model_cls, cfg, seed=1)
    pre = _save(tm, tmp_path)
    assert pre.config.model_type == cfg.model_type
    ids, valid = _batch(np.random.default_rng(1), 97, [12, 9, 4])
    pos = np.maximum(np.cumsum(valid, 1) - 1, 0)
    out = pre.model.apply(pre.params, jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(valid))
    logits = pre.model.apply(pre.params, out["last"], method=Llama.lm_logits)
    with torch.no_grad():
        ref = tm(torch.tensor(ids), attention_mask=torch.tensor(valid.astype(np.int64)), output_hidden_states=True)
    _compare_hidden(out["hidden"], ref.hidden_states, valid)
    d = np.abs(np.asarray(logits) - ref.logits.numpy()) * valid[..., None]
    assert d.max() < TOL, f"logits max diff {d.max():.3g}"


def test_reward_head_parity(tmp_path):
    cfg = transformers.LlamaConfig(
        **SMALL, num_key_value_heads=2, num_labels=1, pad_token_id=0, attn_implementation="eager"
    )
    tm = _torch_model(transformers.LlamaForSequenceClassification, cfg, seed=2)
    pre = _save(tm, tmp_path)
    assert pre.config.head == "score"
    ids, valid = _batch(np.random.default_rng(2), 97, [10, 6, 8], pad_id=0)
    pos = np.maximum(np.cumsum(valid, 1) - 1, 0)
    out = pre.model.apply(pre.params, jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(valid))
    scores = np.asarray(pre.model.apply(pre.params, out["last"], method=Llama.score_logits))
    last = valid.sum(1) - 1
    ours = scores[np.arange(len(last)), last]
    with torch.no_grad():
        ref = tm(torch.tensor(ids), attention_mask=torch.tensor(valid.astype(np.int64))).logits.numpy()
    assert ours.shape == ref.shape == (3, 1)
    np.testing.assert_allclose(ours, ref, atol=TOL)


# with these shapes: one block; 2 sequences x 2 kv heads per step; 1 kv head per step; 1 query row per step;
# and the fused kind (jax.nn.dot_product_attention: XLA's on the CPU)
@pytest.mark.parametrize(("block_bytes", "kind"), [(1 << 30, "blocked"), (1200, "blocked"), (300, "blocked"),
                                                   (48, "blocked"), (1 << 20, "fused")])  # fmt: skip
def test_blocked_and_fused_attention_match_dense(block_bytes, kind):
    """`attention` loops over (sequence, kv-head, query-row) blocks sized by `block_bytes`; every
    split (one block, head/batch chunks, query chunks down to single rows) and the fused kind equal
    dense softmax attention, with GQA, padding and a fully masked query row."""
    from probes.models.layers import attention, causal_mask

    rng = np.random.default_rng(0)
    b, t, h, hkv, dh = 4, 6, 4, 2, 8
    q, k, v = (rng.standard_normal((b, t, n, dh)).astype(np.float32) for n in (h, hkv, hkv))
    valid = np.ones((b, t), bool)
    valid[1, 4:] = False
    valid[2, :2] = False
    pos = np.maximum(np.cumsum(valid, 1) - 1, 0)
    mask = np.array(causal_mask(jnp.asarray(pos), jnp.asarray(pos), jnp.asarray(valid)))
    mask[0, 2] = False  # a query that sees nothing must stay finite
    kr, vr = np.repeat(k, h // hkv, axis=2), np.repeat(v, h // hkv, axis=2)
    s = np.einsum("bthd,bshd->bhts", q, kr) / np.sqrt(dh)
    s = np.where(mask[:, None], s, -1e30)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("bhts,bshd->bthd", p / p.sum(-1, keepdims=True), vr)
    out = np.asarray(attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), jnp.asarray(mask), block_bytes, kind))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, ref, atol=1e-5)


def test_attention_auto_is_blocked_on_the_cpu_and_a_bad_kind_is_refused():
    from probes.models.layers import attention_kind

    assert attention_kind("auto") == "blocked" and attention_kind("fused") == "fused"
    with pytest.raises(ValueError, match="'flash' is not one of auto, blocked, fused"):
        attention_kind("flash")


@pytest.mark.parametrize("family", ["bert", "mistral_sliding"])
def test_the_fused_attention_keeps_parity_with_pytorch(family, tmp_path):
    """The whole model with ``attention="fused"`` (the accelerators' default) against transformers."""
    import dataclasses

    if family == "bert":
        cfg = transformers.BertConfig(**SMALL, type_vocab_size=2, attn_implementation="eager")
        tm = _torch_model(transformers.BertModel, cfg)
    else:
        cfg_cls, extra = DECODERS[family]
        cfg = cfg_cls(**SMALL, **extra, attn_implementation="eager")
        tm = _torch_model(transformers.AutoModelForCausalLM.from_config(cfg).__class__, cfg, seed=1)
    pre = _save(tm, tmp_path)
    model = pre.model.clone(cfg=dataclasses.replace(pre.model.cfg, attention="fused"))
    ids, valid = _batch(np.random.default_rng(3), 97, [12, 9, 4])
    with torch.no_grad():
        ref = tm(torch.tensor(ids), attention_mask=torch.tensor(valid.astype(np.int64)), output_hidden_states=True)
    if family == "bert":
        out = model.apply(pre.params, jnp.asarray(ids), jnp.asarray(valid), jnp.zeros_like(jnp.asarray(ids)))
    else:
        pos = np.maximum(np.cumsum(valid, 1) - 1, 0)
        out = model.apply(pre.params, jnp.asarray(ids), jnp.asarray(pos), jnp.asarray(valid))
    _compare_hidden(out["hidden"], ref.hidden_states, valid)
