"""Llama-family decoder (Llama 1-3, Mistral, Qwen2, Qwen3) in flax.linen, with a KV cache.

Parameter names follow Hugging Face (`embed_tokens.weight`, `layers.self_attn.q_proj.weight`, ...,
`norm.weight`, `lm_head.weight` or `score.weight`), the `model.` prefix dropped and the layers
stacked on a leading axis (`nn.scan`: one compiled layer body whatever the depth).

Masking works on token *positions*: a query at position p sees the valid keys at positions <= p.
Left padding, right padding, a cached prefix and one-token decoding steps are the same rule.

KV cache (a dict, all arrays)::

    k, v   (L, B, K, Hkv, Dh)   keys (after RoPE) and values
    pos    (B, K) int32         position of each cached key
    valid  (B, K) bool          which cache slots hold real tokens

New keys are written at slot `write_index` (a traced int32 scalar), so decoding keeps static shapes.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from .config import DecoderConfig
from .layers import (
    Embed,
    Linear,
    RMSNorm,
    activation,
    apply_rope,
    attention,
    causal_mask,
    pool,
    rope_cos_sin,
    rope_inv_freq,
)


class LlamaAttention(nn.Module):
    """Grouped-query self-attention with RoPE (and Qwen3's q/k RMSNorm), writing into the KV cache."""

    cfg: DecoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, cos, sin, mask, cache_kv, write_index):
        """Attention of x (B, T, D) given cos/sin (B, T, Dh), mask (B, T, K), cache_kv.

        cache_kv is None or (k, v) (B, K, Hkv, Dh); new keys/values go to slot `write_index`.
        Returns the attention output (B, T, D) and the keys/values attended to (B, K, Hkv, Dh).
        """
        c = self.cfg
        b, t, _ = x.shape
        q = Linear(c.num_heads * c.head_dim, c.qkv_bias, self.dtype, name="q_proj")(x)
        k = Linear(c.num_kv_heads * c.head_dim, c.qkv_bias, self.dtype, name="k_proj")(x)
        v = Linear(c.num_kv_heads * c.head_dim, c.qkv_bias, self.dtype, name="v_proj")(x)
        q = q.reshape(b, t, c.num_heads, c.head_dim)
        k = k.reshape(b, t, c.num_kv_heads, c.head_dim)
        v = v.reshape(b, t, c.num_kv_heads, c.head_dim)
        if c.qk_norm:  # Qwen3: RMSNorm over the head dim before RoPE
            q = RMSNorm(c.rms_norm_eps, self.dtype, name="q_norm")(q)
            k = RMSNorm(c.rms_norm_eps, self.dtype, name="k_norm")(k)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        if cache_kv is not None:
            k_buf, v_buf = cache_kv
            k = jax.lax.dynamic_update_slice_in_dim(k_buf, k.astype(k_buf.dtype), write_index, axis=1)
            v = jax.lax.dynamic_update_slice_in_dim(v_buf, v.astype(v_buf.dtype), write_index, axis=1)
        o = attention(q, k, v, mask, kind=c.attention).reshape(b, t, c.num_heads * c.head_dim)
        return Linear(c.hidden_size, c.o_bias, self.dtype, name="o_proj")(o), (k, v)


class LlamaMLP(nn.Module):
    """Gated feed-forward block: down_proj(act(gate_proj(x)) * up_proj(x))."""

    cfg: DecoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x):
        """Map x (..., D) -> (..., D)."""
        c = self.cfg
        g = Linear(c.intermediate_size, c.mlp_bias, self.dtype, name="gate_proj")(x)
        u = Linear(c.intermediate_size, c.mlp_bias, self.dtype, name="up_proj")(x)
        return Linear(c.hidden_size, c.mlp_bias, self.dtype, name="down_proj")(activation(c.hidden_act)(g) * u)


class LlamaLayer(nn.Module):
    """Scan body. carry h (B, T, D); per-layer input cache_kv; broadcast cos, sin, mask, write_index, pool.

    Emits (pooled output (B, P|T, D) float32, (k, v) if return_cache else None).
    """

    cfg: DecoderConfig
    dtype: jnp.dtype
    return_cache: bool = False

    @nn.compact
    def __call__(self, h, cache_kv, cos, sin, mask, write_index, pool_weights):
        """One pre-norm block; carry and outputs as in the class docstring."""
        c = self.cfg
        a, kv = LlamaAttention(c, self.dtype, name="self_attn")(
            RMSNorm(c.rms_norm_eps, self.dtype, name="input_layernorm")(h), cos, sin, mask, cache_kv, write_index
        )
        h = h + a
        h = h + LlamaMLP(c, self.dtype, name="mlp")(
            RMSNorm(c.rms_norm_eps, self.dtype, name="post_attention_layernorm")(h)
        )
        return h, (pool(h, pool_weights).astype(jnp.float32), kv if self.return_cache else None)


class Llama(nn.Module):
    """Llama-family decoder body + head parameters.

    Call::

        __call__(ids (B, T), positions (B, T), valid (B, T) bool, cache=None, write_index=0, pool_weights=None)
        -> dict:
            hidden (L+1, B, P|T, D) float32 -- HF `hidden_states` convention: entry i < L is the input
                   of layer i (0 = embeddings), entry L the final RMSNorm of the last layer's output;
            last   (B, T, D) final normed hidden states (feed to `lm_logits` / `score_logits`);
            cache  updated cache dict when `return_cache`, else None.

    `return_cache` (module attribute) also returns a fresh cache when `cache` is None.
    """

    cfg: DecoderConfig
    dtype: jnp.dtype = jnp.float32
    return_cache: bool = False

    def setup(self):
        """Create the embeddings, the scanned layers, the final norm and the head."""
        c = self.cfg
        self.embed_tokens = Embed(c.vocab_size, c.hidden_size, self.dtype)
        self.layers = nn.scan(
            LlamaLayer,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=(0, nn.broadcast, nn.broadcast, nn.broadcast, nn.broadcast, nn.broadcast),
            length=c.num_layers,
        )(c, self.dtype, self.return_cache)
        self.norm = RMSNorm(c.rms_norm_eps, self.dtype)
        if c.head == "score":
            self.score = Linear(c.num_labels, False, self.dtype)
        elif not c.tie_word_embeddings:
            self.lm_head = Linear(c.vocab_size, False, self.dtype)

    def __call__(self, ids, positions, valid, cache=None, write_index=0, pool_weights=None):
        """The forward pass; arguments and result as in the class docstring."""
        c = self.cfg
        valid = valid.astype(bool)
        positions = positions.astype(jnp.int32)
        write_index = jnp.asarray(write_index, jnp.int32)
        if cache is None:
            k_pos, k_valid, cache_kv = positions, valid, None
        else:
            k_pos = jax.lax.dynamic_update_slice_in_dim(cache["pos"], positions, write_index, axis=1)
            k_valid = jax.lax.dynamic_update_slice_in_dim(cache["valid"], valid, write_index, axis=1)
            cache_kv = (cache["k"], cache["v"])
        mask = causal_mask(positions, k_pos, k_valid, c.sliding_window)
        cos, sin = rope_cos_sin(positions, rope_inv_freq(c.rope, c.head_dim))
        h = self.embed_tokens(ids)
        h_last, (per_layer, kv) = self.layers(h, cache_kv, cos, sin, mask, write_index, pool_weights)
        final = self.norm(h_last)
        if self.is_initializing():  # create the head's parameters too
            self.score_logits(final) if c.head == "score" else self.lm_logits(final)
        hidden = jnp.concatenate(
            [
                pool(h, pool_weights)[None].astype(jnp.float32),
                per_layer[:-1],
                pool(final, pool_weights)[None].astype(jnp.float32),
            ],
            axis=0,
        )
        new_cache = None
        if self.return_cache:
            new_cache = {"k": kv[0], "v": kv[1], "pos": k_pos, "valid": k_valid}
        return {"hidden": hidden, "last": final, "cache": new_cache}

    def lm_logits(self, h):
        """Language-model logits (..., V) float32 of h (..., D) (tied: h E^T)."""
        if not self.cfg.tie_word_embeddings:
            return self.lm_head(h).astype(jnp.float32)
        w = self.embed_tokens.variables["params"]["weight"]
        return jnp.einsum("...d,vd->...v", h.astype(w.dtype), w, preferred_element_type=jnp.float32)

    def score_logits(self, h):
        """Sequence-classification head: h (..., D) -> (..., num_labels) float32."""
        return self.score(h).astype(jnp.float32)
