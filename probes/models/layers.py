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
        """Map x (..., in) -> (..., features)."""
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
        """Look up ids (...) int -> (..., D)."""
        w = self.param("weight", nn.initializers.normal(0.02), (self.num, self.features), self.dtype)
        return jnp.take(w, ids, axis=0)


class LayerNorm(nn.Module):
    """PyTorch LayerNorm with params `weight`, `bias`; statistics in float32."""

    eps: float = 1e-12
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        """Normalise x (..., D) over its last axis; output in x's dtype."""
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
        """Normalise x (..., D) over its last axis; output in the param's dtype."""
        w = self.param("weight", nn.initializers.ones, (x.shape[-1],), self.dtype)
        xf = x.astype(jnp.float32)
        y = xf * jax.lax.rsqrt(jnp.mean(jnp.square(xf), -1, keepdims=True) + self.eps)
        return w * y.astype(w.dtype)


def activation(name: str):
    """The activation function of HF's ``hidden_act`` name (gelu, gelu_new / tanh forms, silu, relu)."""
    if name in ("gelu", "gelu_python"):
        # Keep jax.nn.gelu (erfc form). A hand-written 0.5 x (1 + erf(x / sqrt 2)) is 3x faster in
        # isolation, but XLA:CPU then pulls dense -> GELU -> dense -> LayerNorm into one YNNPACK
        # fusion that ran the MiniLM layer ~7% slower end to end (measured at B=8, T=512).
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
    """Rotary cos, sin (B, T, Dh) float32 of positions (B, T) int (halves repeated, HF convention)."""
    ang = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)[None, None, :]
    ang = jnp.concatenate([ang, ang], axis=-1)
    return jnp.cos(ang), jnp.sin(ang)


def apply_rope(x, cos, sin):
    """Rotate x by cos/sin: rotate-half formulation, computed in float32.

    Args:
        x: queries or keys, shape (B, T, H, Dh).
        cos: cosines of the positions' angles, shape (B, T, Dh).
        sin: sines of the positions' angles, shape (B, T, Dh).

    Returns:
        The rotated x, shape (B, T, H, Dh), in x's dtype.
    """
    xf = x.astype(jnp.float32)
    half = x.shape[-1] // 2
    rot = jnp.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
    return (xf * cos[:, :, None, :] + rot * sin[:, :, None, :]).astype(x.dtype)


# ---------------------------------------------------------------------------------------------
# Attention


# Scores of one loop step: at most this many bytes, so that scores -> exp -> P V stay in cache
# (L2 is 0.5-2 MiB per core on current x86). Materialising all (B, H, T, K) scores at once made
# attention memory-bound: at B=8, T=512 the score tensor is 100 MB and every softmax pass streams it.
ATTENTION_BLOCK_BYTES = 1 << 20


def divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of n that is <= cap (at least 1): block sizes that tile n exactly."""
    cap = max(1, min(n, cap))
    while n % cap:
        cap -= 1
    return cap


#: How :func:`attention` runs: "auto" ("blocked" on the CPU, "fused" on any other backend), "blocked"
#: (a loop over cache-sized blocks: the CPU's), "fused" (``jax.nn.dot_product_attention``: cuDNN's fused
#: kernel where the backend and dtype have one, e.g. bf16 / fp16 on NVIDIA GPUs, else XLA's one program,
#: which a GPU runs as a few large kernels instead of the blocked loop's many small ones).
ATTENTION_KINDS = ("auto", "blocked", "fused")


def attention_kind(kind: str = "auto") -> str:
    """The kind of attention that runs: ``kind``, with "auto" resolved by JAX's default backend."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention: {kind!r} is not one of {', '.join(ATTENTION_KINDS)}")
    if kind == "auto":
        return "blocked" if jax.default_backend() == "cpu" else "fused"
    return kind


def attention(q, k, v, mask, block_bytes: int = ATTENTION_BLOCK_BYTES, kind: str = "auto"):
    """Grouped-query scaled dot-product attention: blocked on the CPU, fused elsewhere (:data:`ATTENTION_KINDS`).

    The fused kind is ``jax.nn.dot_product_attention`` (scores and softmax in float32 there too); the
    blocked kind is written below, blocked over (batch, kv heads, query rows).

    Scores and softmax in float32.

    Performance notes (XLA:CPU, measured against torch's fused SDPA kernel):

    * heads go in front of the sequence axes before the dots ('bhgtd,bhsd->bhgts', then
      'bhgts,bhsd->bhgtd'): asking the P V dot for a (T, H, Dh) output directly made XLA
      transpose the whole (H, T, K) probability matrix first (2-3x slower attention);
    * a `lax.map` computes one block of (sequences, kv heads, query rows) per step, at most
      `block_bytes` of scores, so that scores -> exp -> P V stay in cache (the flash-attention
      idea, without the online softmax since a block holds whole key rows);
    * the softmax is normalised after P V (divide (T, Dh) outputs, not (T, K) probabilities).

    Args:
        q: queries, shape (B, T, H, Dh), H a multiple of Hkv.
        k: keys, shape (B, K, Hkv, Dh).
        v: values, shape (B, K, Hkv, Dh).
        mask: which keys each query may attend to, shape (B, T, K) bool (True = may attend).
        block_bytes: the most bytes of float32 scores one step of the loop holds (blocked kind).
        kind: one of :data:`ATTENTION_KINDS`.

    Returns:
        The attention output, shape (B, T, H, Dh), in q's dtype.
    """
    if attention_kind(kind) == "fused":
        return jax.nn.dot_product_attention(q, k, v, mask=mask[:, None], implementation=None).astype(q.dtype)
    b, t, h, dh = q.shape
    s, hkv = k.shape[1], k.shape[2]
    g = h // hkv
    row = g * s * 4  # score bytes per (sequence, kv head, query position)
    tq = divisor_at_most(t, block_bytes // row)  # query rows per step
    hc = divisor_at_most(hkv, block_bytes // (row * tq))  # kv heads per step
    bc = divisor_at_most(b, block_bytes // (row * tq * hc))  # sequences per step
    nb, nh, nq = b // bc, hkv // hc, t // tq
    qh = (q.astype(jnp.float32) * (1.0 / math.sqrt(dh))).astype(q.dtype)
    qh = qh.reshape(b, t, hkv, g, dh).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, T, Dh)
    kh, vh = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # (B, Hkv, K, Dh)

    def block(qb, kb, vb, mb):  # (bc, hc, G, tq, Dh), (bc, hc, K, Dh) x2, (bc, tq, K) -> like qb, f32
        sc = jnp.einsum("bhgtd,bhsd->bhgts", qb, kb, preferred_element_type=jnp.float32)
        sc = jnp.where(mb[:, None, None], sc, MASK_VALUE)
        e = jnp.exp(sc - sc.max(-1, keepdims=True))
        o = jnp.einsum("bhgts,bhsd->bhgtd", e.astype(vb.dtype), vb, preferred_element_type=jnp.float32)
        return o / e.sum(-1, keepdims=True)

    if nb * nh * nq == 1:  # a single block: no loop
        o = block(qh, kh, vh, mask)
    else:

        def step(i):
            bi, hi, qi = (i // (nh * nq)) * bc, ((i // nq) % nh) * hc, (i % nq) * tq
            return block(
                jax.lax.dynamic_slice(qh, (bi, hi, 0, qi, 0), (bc, hc, g, tq, dh)),
                jax.lax.dynamic_slice(kh, (bi, hi, 0, 0), (bc, hc, s, dh)),
                jax.lax.dynamic_slice(vh, (bi, hi, 0, 0), (bc, hc, s, dh)),
                jax.lax.dynamic_slice(mask, (bi, qi, 0), (bc, tq, s)),
            )

        o = jax.lax.map(step, jnp.arange(nb * nh * nq, dtype=jnp.int32))  # (nb*nh*nq, bc, hc, G, tq, Dh)
    o = o.reshape(nb, nh, nq, bc, hc, g, tq, dh).transpose(0, 3, 2, 6, 1, 4, 5, 7)
    return o.reshape(b, t, h, dh).astype(q.dtype)


def causal_mask(q_pos, k_pos, k_valid, sliding_window: int | None = None):
    """Decoder mask from positions: key valid, key position <= query position (and within the window).

    Working on positions rather than indices makes left padding, right padding, cached prefixes and
    decoding one rule.

    Args:
        q_pos: the queries' positions, shape (B, T) int.
        k_pos: the keys' positions, shape (B, K) int.
        k_valid: which keys are real tokens, shape (B, K) bool.
        sliding_window: a query sees only keys fewer than this many positions back (None: all).

    Returns:
        The mask, shape (B, T, K) bool (True = may attend).
    """
    m = k_valid[:, None, :] & (k_pos[:, None, :] <= q_pos[:, :, None])
    if sliding_window is not None:
        m = m & (q_pos[:, :, None] - k_pos[:, None, :] < sliding_window)
    return m


def pool(h, weights):
    """Pool h (B, T, D) with weights (B, P, T) -> (B, P, D): any linear pooling (last token, mean, CLS)."""
    if weights is None:
        return h
    return jnp.einsum("bpt,btd->bpd", weights.astype(jnp.float32), h.astype(jnp.float32))
