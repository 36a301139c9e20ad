"""Small helpers shared by the tests (plain functions; the fixtures built on them are in conftest.py).

    unit(z)                    rows scaled to unit length
    read_jsonl(path)           a JSON-lines file as a list of objects (json only, no package code)
    make_tiny_decoder()        3-layer random decoder, d = 48, no tokenizer (probes.extract tests)
    make_tiny_char_decoder()   3-layer random Llama, d = 32, character tokenizer (probes.borp tests)
    CharTokenizer, ChatMLTokenizer   stand-in tokenizers for the tiny models

The model builders import JAX and probes lazily, so importing this module (subprocesses do:
``from tests.helpers import make_tiny_decoder``) costs nothing until a model is built.
"""

from __future__ import annotations

import json

import numpy as np


def unit(z):
    """Row-normalise: every row of ``z`` scaled to unit Euclidean length."""
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


class CharTokenizer:
    """Character-level stand-in tokenizer for the tiny model (no chat template)."""

    chat_template = None
    pad_token_id = 0

    def encode(self, text, add_special_tokens=True):
        return ([1] if add_special_tokens else []) + [2 + ord(c) % 97 for c in text]


class ChatMLTokenizer(CharTokenizer):
    chat_template = "chatml"

    def apply_chat_template(self, messages, add_generation_prompt=False):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def make_tiny_decoder():
    """A 3-layer random decoder (d = 48, vocab 101, qk-norm), weights doubled for sharper attention."""
    import jax
    import jax.numpy as jnp

    from probes.models import DecoderConfig, Pretrained, RopeConfig, build_model

    cfg = DecoderConfig(
        vocab_size=101,
        hidden_size=48,
        num_layers=3,
        num_heads=6,
        num_kv_heads=2,
        head_dim=8,
        intermediate_size=96,
        rope=RopeConfig(theta=1e4),
        max_position_embeddings=256,
        tie_word_embeddings=True,
        qk_norm=True,
        eos_token_ids=(1,),
    )
    model = build_model(cfg)
    ids = jnp.zeros((1, 4), jnp.int32)
    params = model.init(jax.random.PRNGKey(0), ids, ids, jnp.ones((1, 4), bool))
    params = jax.tree.map(lambda a: a * 2.0 if a.ndim >= 2 else a, params)  # sharper attention
    return Pretrained(model=model, params=params, tokenizer=None, config=cfg, source="tiny", fingerprint="tiny")


def make_tiny_char_decoder():
    """A 3-layer random Llama (d = 32, vocab 101) with the character tokenizer; normal random weights."""
    import jax
    import jax.numpy as jnp

    from probes.models import DecoderConfig, Pretrained, RopeConfig, build_model

    cfg = DecoderConfig(
        vocab_size=101,
        hidden_size=32,
        num_layers=3,
        num_heads=4,
        num_kv_heads=2,
        head_dim=8,
        intermediate_size=64,
        rope=RopeConfig(theta=1e4),
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_ids=(1,),
    )
    model = build_model(cfg)
    ids = jnp.zeros((1, 4), jnp.int32)
    # random parameters from the shapes alone (tracing is much faster than an eager `init`)
    shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), ids, ids, jnp.ones((1, 4), bool))
    rng = np.random.default_rng(0)
    params = jax.tree_util.tree_map_with_path(
        lambda path, x: jnp.asarray(
            1 + 0.1 * rng.normal(size=x.shape)
            if "norm" in jax.tree_util.keystr(path).lower()
            else 0.2 * rng.normal(size=x.shape),
            x.dtype,
        ),
        shapes,
    )
    return Pretrained(
        model=model, params=params, tokenizer=CharTokenizer(), config=cfg, source="tiny", fingerprint="tiny"
    )
