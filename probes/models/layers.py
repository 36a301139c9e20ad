"""Building blocks shared by the encoder and decoder ports (flax.linen, explicit params).

Parameters keep the Hugging Face layout and names (`weight` of a linear layer is (out, in)), so
loading a checkpoint is a rename plus stacking of the per-layer tensors. Shapes in docstrings:
B batch, T (query) length, K key length, H heads, Hkv key/value heads, Dh head dim, D model dim.
Numerically sensitive parts (norm statistics, softmax) run in float32 whatever the param dtype.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from .config import RopeConfig

MASK_VALUE = -1e30  # finite, so fully-masked (padding) query rows give finite garbage, never NaN


class Linear(nn.Module):
    """y = x W^T + b with W of shape (out, in) as in PyTorch; float32 accumulation, output in W's dtype."""

    features: int
    use_bias: bool = True
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        w = self.param("weight", nn.initializers.normal(0.02), (self.features, x.shape[-1]), self.dtype)
        y = jnp.einsum("...i,oi->...o", x.astype(w.dtype), w, preferred_element_type=jnp.float32).astype(w.dtype)
        if self.use_bias:
            y = y + self.param("bias", nn.initializers.zeros, (self.features,), self.dtype)
        return y


class Embed(nn.Module):
    """Token lookup table `weight` (V, D)."""

    num: int
    features: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, ids):
        w = self.param("weight", nn.initializers.normal(0.02), (self.num, self.features), self.dtype)
        return jnp.take(w, ids, axis=0)


class LayerNorm(nn.Module):
    """PyTorch LayerNorm with params `weight`, `bias`; statistics in float32."""

    eps: float = 1e-12
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        w = self.param("weight", nn.initializers.ones, (d,), self.dtype)
        b = self.param("bias", nn.initializers.zeros, (d,), self.dtype)
        xf = x.astype(jnp.float32)
        mu = xf.mean(-1, keepdims=True)
        var = jnp.square(xf - mu).mean(-1, keepdims=True)
        y = (xf - mu) * jax.lax.rsqrt(var + self.eps)
        return (y * w.astype(jnp.float32) + b.astype(jnp.float32)).astype(x.dtype)


class RMSNorm(nn.Module):
    """Llama RMSNorm: w * (x / rms(x)), statistics in float32, param `weight`."""

    eps: float = 1e-6
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        w = self.param("weight", nn.initializers.ones, (x.shape[-1],), self.dtype)
        xf = x.astype(jnp.float32)
        y = xf * jax.lax.rsqrt(jnp.mean(jnp.square(xf), -1, keepdims=True) + self.eps)
        return w * y.astype(w.dtype)


def activation(name: str):
    if name in ("gelu", "gelu_python"):
        return lambda x: jax.nn.gelu(x, approximate=False)
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return lambda x: jax.nn.gelu(x, approximate=True)
    if name in ("silu", "swish"):
        return jax.nn.silu
    if name == "relu":
        return jax.nn.relu
    raise ValueError(f"unsupported hidden_act {name!r}")


# ---------------------------------------------------------------------------------------------
# Rotary embeddings


def rope_inv_freq(rope: RopeConfig, head_dim: int) -> np.ndarray:
    """Inverse frequencies (Dh/2,) incl. linear and Llama-3 scaling (as transformers computes them)."""
    inv = 1.0 / (rope.theta ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / head_dim))
    if rope.rope_type == "linear":
        inv = inv / rope.factor
    elif rope.rope_type == "llama3":
        old = rope.original_max_position_embeddings
        low_wavelen = old / rope.low_freq_factor
        high_wavelen = old / rope.high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > low_wavelen, inv / rope.factor, inv)
        smooth = (old / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
        smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv = np.where(medium, smoothed, scaled)
    return inv.astype(np.float32)


def rope_cos_sin(positions, inv_freq: np.ndarray):
    """positions (B, T) int -> cos, sin (B, T, Dh) float32 (halves repeated, HF convention)."""
    ang = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)[None, None, :]
    ang = jnp.concatenate([ang, ang], axis=-1)
    return jnp.cos(ang), jnp.sin(ang)


def apply_rope(x, cos, sin):
    """x (B, T, H, Dh); cos/sin (B, T, Dh). Rotate-half formulation, computed in float32."""
    xf = x.astype(jnp.float32)
    half = x.shape[-1] // 2
    rot = jnp.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
    return (xf * cos[:, :, None, :] + rot * sin[:, :, None, :]).astype(x.dtype)


# ---------------------------------------------------------------------------------------------
# Attention


def attention(q, k, v, mask):
    """Grouped-query scaled dot-product attention.

    q (B, T, H, Dh); k, v (B, K, Hkv, Dh) with H a multiple of Hkv; mask (B, T, K) bool (True =
    may attend). Scores and softmax in float32. Returns (B, T, H, Dh) in q's dtype.
    """
    b, t, h, dh = q.shape
    hkv = k.shape[2]
    qg = q.reshape(b, t, hkv, h // hkv, dh)
    s = jnp.einsum("btkgd,bskd->bkgts", qg, k, preferred_element_type=jnp.float32) / math.sqrt(dh)
    s = jnp.where(mask[:, None, None, :, :], s, MASK_VALUE)
    p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
    o = jnp.einsum("bkgts,bskd->btkgd", p, v, preferred_element_type=jnp.float32)
    return o.reshape(b, t, h, dh).astype(q.dtype)


def causal_mask(q_pos, k_pos, k_valid, sliding_window: int | None = None):
    """Decoder mask from positions: key valid, key position <= query position (and within the window).

    q_pos (B, T), k_pos (B, K) int; k_valid (B, K) bool -> (B, T, K) bool. Working on positions
    rather than indices makes left padding, right padding, cached prefixes and decoding one rule.
    """
    m = k_valid[:, None, :] & (k_pos[:, None, :] <= q_pos[:, :, None])
    if sliding_window is not None:
        m = m & (q_pos[:, :, None] - k_pos[:, None, :] < sliding_window)
    return m


def pool(h, weights):
    """h (B, T, D), weights (B, P, T) -> (B, P, D): any linear pooling (last token, mean, CLS)."""
    if weights is None:
        return h
    return jnp.einsum("bpt,btd->bpd", weights.astype(jnp.float32), h.astype(jnp.float32))
