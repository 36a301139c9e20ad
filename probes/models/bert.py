"""BERT-family encoder (BertModel as used by all-MiniLM-L6-v2 and BGE) in flax.linen.

Absolute learned positions, token types, post-LayerNorm blocks, GELU. Parameter names follow the
Hugging Face checkpoint (`embeddings.word_embeddings.weight`, `encoder.layer.N.attention.self.query.weight`, ...);
the N layers are stacked on a leading axis and run with `nn.scan` (one compiled layer body).
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from .config import EncoderConfig
from .layers import Embed, LayerNorm, Linear, activation, attention, pool


class BertSelfAttention(nn.Module):
    """Query / key / value projections and multi-head attention (BertSelfAttention)."""

    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, h, mask):
        """Attend over h (B, T, D) with mask (B, T, T) bool -> (B, T, D), heads concatenated."""
        c = self.cfg
        b, t, _ = h.shape
        shape = (b, t, c.num_heads, c.head_dim)
        q = Linear(c.hidden_size, dtype=self.dtype, name="query")(h).reshape(shape)
        k = Linear(c.hidden_size, dtype=self.dtype, name="key")(h).reshape(shape)
        v = Linear(c.hidden_size, dtype=self.dtype, name="value")(h).reshape(shape)
        return attention(q, k, v, mask, kind=c.attention).reshape(b, t, c.hidden_size)


class BertDenseLN(nn.Module):
    """dense -> residual add -> LayerNorm (BertSelfOutput / BertOutput)."""

    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, residual):
        """Map x (B, T, F), residual (B, T, D) -> LayerNorm(dense(x) + residual) (B, T, D)."""
        y = Linear(self.cfg.hidden_size, dtype=self.dtype, name="dense")(x)
        return LayerNorm(self.cfg.layer_norm_eps, self.dtype, name="LayerNorm")(y + residual)


class BertAttention(nn.Module):
    """Self-attention followed by its dense -> residual -> LayerNorm output (BertAttention)."""

    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, h, mask):
        """Map h (B, T, D), mask (B, T, T) bool -> (B, T, D)."""
        a = BertSelfAttention(self.cfg, self.dtype, name="self")(h, mask)
        return BertDenseLN(self.cfg, self.dtype, name="output")(a, h)


class BertIntermediate(nn.Module):
    """The feed-forward block's expansion: dense to intermediate_size, then the activation."""

    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, h):
        """Map h (B, T, D) -> (B, T, intermediate_size)."""
        y = Linear(self.cfg.intermediate_size, dtype=self.dtype, name="dense")(h)
        return activation(self.cfg.hidden_act)(y)


class BertLayer(nn.Module):
    """One block; scan body: carry h (B, T, D) -> (h', pooled h' (B, P, D) or h')."""

    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, h, mask, pool_weights):
        """Map h (B, T, D), mask (B, T, T) bool, pool_weights (B, P, T) | None -> (h', pooled h')."""
        a = BertAttention(self.cfg, self.dtype, name="attention")(h, mask)
        i = BertIntermediate(self.cfg, self.dtype, name="intermediate")(a)
        out = BertDenseLN(self.cfg, self.dtype, name="output")(i, a)
        return out, pool(out, pool_weights)


class BertEmbeddings(nn.Module):
    """Word + absolute position + token type embeddings, then LayerNorm."""

    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, ids, token_type_ids):
        """ids, token_type_ids (B, T) int -> (B, T, D); ValueError when T > max_position_embeddings."""
        c = self.cfg
        t = ids.shape[1]
        if t > c.max_position_embeddings:
            raise ValueError(f"sequence length {t} exceeds max_position_embeddings={c.max_position_embeddings}")
        x = Embed(c.vocab_size, c.hidden_size, self.dtype, name="word_embeddings")(ids)
        x = x + Embed(c.max_position_embeddings, c.hidden_size, self.dtype, name="position_embeddings")(
            jnp.arange(t)[None, :]
        )
        x = x + Embed(c.type_vocab_size, c.hidden_size, self.dtype, name="token_type_embeddings")(token_type_ids)
        return LayerNorm(c.layer_norm_eps, self.dtype, name="LayerNorm")(x)


class BertEncoder(nn.Module):
    """The num_layers `BertLayer` blocks, stacked on a leading axis and run with `nn.scan`."""

    cfg: EncoderConfig
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, h, mask, pool_weights):
        """Map h (B, T, D) -> (last layer's output (B, T, D), every layer's pooled output (L, B, P|T, D))."""
        layers = nn.scan(
            BertLayer,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=(nn.broadcast, nn.broadcast),
            length=self.cfg.num_layers,
        )
        return layers(self.cfg, self.dtype, name="layer")(h, mask, pool_weights)


class Bert(nn.Module):
    """BertModel without the pooler.

    Call::

        __call__(ids (B, T) int, valid (B, T) bool, token_type_ids (B, T) | None, pool_weights (B, P, T) | None)
        -> dict(hidden=(L+1, B, P|T, D) float32: embeddings output then every layer's output,
                last=(B, T, D) final layer output).

    Right padding is expected (positions are 0..T-1 as in BertModel).
    """

    cfg: EncoderConfig
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, ids, valid, token_type_ids=None, pool_weights=None):
        """The forward pass; arguments and result as in the class docstring."""
        if token_type_ids is None:
            token_type_ids = jnp.zeros_like(ids)
        h = BertEmbeddings(self.cfg, self.dtype, name="embeddings")(ids, token_type_ids)
        b, t = ids.shape
        mask = jnp.broadcast_to(valid[:, None, :].astype(bool), (b, t, t))
        last, per_layer = BertEncoder(self.cfg, self.dtype, name="encoder")(h, mask, pool_weights)
        hidden = jnp.concatenate(
            [pool(h, pool_weights)[None].astype(jnp.float32), per_layer.astype(jnp.float32)], axis=0
        )
        return {"hidden": hidden, "last": last}
