"""Suffix-only probing (BoRP §3.4): a shared prefix's KV cache computed once, only the suffixes run.

`encode_with_shared_prefix(pre, prefix, suffixes)` gives the last-token states of prefix + suffix_i
for every suffix; the suffix keys attend to the prefix's cached keys/values, so the result equals
encoding the concatenated ids (up to fp rounding).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from tqdm.auto import tqdm

from probes.models.batching import (
    bucket_length,
    pad_batch,
    pool_weights,
    positions_from_valid,
    resolve_layers,
    tokenize_inputs,
)
from probes.models.pretrained import Pretrained, build_model

from .data_parallel import data_parallel, padded_rows, params_on, rows_on

__all__ = ["encode_with_shared_prefix"]


@functools.cache
def _prefix_forward(config, dtype):
    """jit: (params, ids (1, P), valid (1, P)) -> KV cache of the prefix."""
    model = build_model(config, dtype, return_cache=True)

    def fn(params, ids, valid):
        return model.apply(params, ids, positions_from_valid(valid), valid)["cache"]

    return jax.jit(fn)


def broadcast_prefix_cache(prefix_cache: dict, b: int, s: int) -> dict:
    """A batch-1 prefix KV cache broadcast to ``b`` rows, with ``s`` empty slots for the suffixes.

    Args:
        prefix_cache: k, v: (L, 1, P, Hkv, Dh) and pos, valid: (1, P).
        b: the suffix rows.
        s: the slots of each suffix, written at index P.

    Returns:
        The cache with k, v: (L, b, P + s, Hkv, Dh) and pos, valid: (b, P + s).
    """
    k, v = prefix_cache["k"], prefix_cache["v"]
    L, _, p, hkv, dh = k.shape
    zeros = jnp.zeros((L, b, s, hkv, dh), k.dtype)
    return {
        "k": jnp.concatenate([jnp.broadcast_to(k, (L, b, p, hkv, dh)), zeros], axis=2),
        "v": jnp.concatenate([jnp.broadcast_to(v, (L, b, p, hkv, dh)), zeros], axis=2),
        "pos": jnp.concatenate([jnp.broadcast_to(prefix_cache["pos"], (b, p)), jnp.zeros((b, s), jnp.int32)], 1),
        "valid": jnp.concatenate([jnp.broadcast_to(prefix_cache["valid"], (b, p)), jnp.zeros((b, s), bool)], 1),
    }


@functools.cache
def _suffix_forward(config, dtype, layers: tuple[int, ...], mesh: Mesh | None = None):
    """The jitted suffix forward after a shared prefix.

    jit: (params, prefix cache (batch 1, P slots), prefix length, ids (B, S), valid (B, S))
    -> last-token states (B, len(layers), D). The prefix cache is broadcast to the B suffixes and
    the suffix keys are written after its P slots. With a `mesh`: params, cache and length
    replicated, the suffix rows split over the devices.
    """
    model = build_model(config, dtype)
    sel = np.asarray(layers)

    def fn(params, prefix_cache, prefix_len, ids, valid):
        b, s = ids.shape
        p = prefix_cache["k"].shape[2]
        cache = broadcast_prefix_cache(prefix_cache, b, s)
        positions = positions_from_valid(valid, offset=prefix_len)
        out = model.apply(
            params, ids, positions, valid, cache=cache, write_index=p, pool_weights=pool_weights(valid, "last")
        )
        return jnp.transpose(out["hidden"][sel, :, 0, :], (1, 0, 2))

    return data_parallel(fn, mesh, 3)


def encode_with_shared_prefix(
    pre: Pretrained,
    prefix,
    suffixes,
    *,
    layers=-1,
    batch_size: int = 8,
    progress: bool = False,
    mesh: Mesh | None = None,
) -> np.ndarray:
    """Last-token states of prefix + suffix_i for every suffix, the prefix encoded once.

    The suffix keys attend to the prefix's cached keys/values, so the result equals encoding the
    concatenated ids (up to fp rounding). Note that tokenising prefix and suffix separately may split
    the text at the join differently from tokenising the concatenation.

    Args:
        pre: a loaded decoder.
        prefix: a string (tokenised with the model's special tokens, e.g. BOS) or token ids.
        suffixes: n strings (tokenised without special tokens) or token-id sequences.
        layers: an int or a sequence of hidden-state indices (HF numbering, -1 = final).
        batch_size: suffixes per forward.
        progress: a progress bar over the batches.
        mesh: None (one device), or a mesh: the prefix runs on one device and its cache is
            replicated; each batch of suffixes is split over the mesh devices (as in `encode`).

    Returns:
        The states, (n, d) float32 for an int `layers`, else (n, len(layers), d).
    """
    cfg = pre.config
    if not cfg.is_decoder:
        raise ValueError("encode_with_shared_prefix needs a decoder (causal attention)")
    layer_idx, squeeze = resolve_layers(layers, cfg.num_layers + 1)
    p_ids, s_ids = _prefix_and_suffix_ids(pre, prefix, suffixes)
    p_len = bucket_length(len(p_ids), cfg.window)
    ids, valid = pad_batch([p_ids], p_len, 1)
    prefix_cache = _prefix_forward(cfg, pre.dtype)(pre.params, jnp.asarray(ids), jnp.asarray(valid))
    if mesh is not None:
        prefix_cache = jax.device_put(prefix_cache, NamedSharding(mesh, P()))
    fwd = _suffix_forward(cfg, pre.dtype, layer_idx, mesh)
    params = params_on(pre, mesh)
    out = np.zeros((len(s_ids), len(layer_idx), cfg.hidden_size), np.float32)
    batches = [list(range(i, min(i + batch_size, len(s_ids)))) for i in range(0, len(s_ids), batch_size)]
    pad_id = pre.tokenizer.pad_token_id if pre.tokenizer is not None else 0
    for idx in tqdm(batches, desc="suffixes", disable=not progress, unit="batch"):
        group = [s_ids[i] for i in idx]
        s_len = bucket_length(max(map(len, group)))
        rows = padded_rows(len(group), batch_size, mesh)
        sids, svalid = pad_batch(group, s_len, rows, pad_id or 0, "right")
        res = fwd(params, prefix_cache, jnp.int32(len(p_ids)), *rows_on(mesh, sids, svalid))
        out[idx] = np.asarray(res)[: len(idx)]
    return out[:, 0] if squeeze else out


def _prefix_and_suffix_ids(pre: Pretrained, prefix, suffixes) -> tuple[list[int], list[list[int]]]:
    """(prefix ids, suffix ids) of `encode_with_shared_prefix`'s inputs, checked to fit the window together."""
    p_ids = tokenize_inputs(pre.tokenizer, [prefix])[0] if isinstance(prefix, str) else list(map(int, prefix))
    s_ids = [
        tokenize_inputs(pre.tokenizer, [s], special=False)[0] if isinstance(s, str) else list(map(int, s))
        for s in suffixes
    ]
    if not p_ids or any(len(s) == 0 for s in s_ids):
        raise ValueError("prefix and every suffix need at least one token")
    longest = len(p_ids) + max(len(s) for s in s_ids)
    if longest > pre.config.window:
        raise ValueError(
            f"prefix ({len(p_ids)} tokens) + longest suffix exceed the window {pre.config.window}; "
            "shorten the prefix (e.g. middle-out) first"
        )
    return p_ids, s_ids
