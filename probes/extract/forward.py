"""The jitted forward passes of extraction, and the batches that feed them.

One jitted forward per model config / dtype / layer selection / pooling (`pooled_forward`, cached);
token sequences are bucketed by length and padded (`run_batches`) so that jit compiles a handful
of shapes. Pooling: "last" (decoder default; the last real token whatever the padding side),
"mean" (encoders with sentence-transformers mean pooling, e.g. MiniLM), "cls". Layer indices
follow HF's `hidden_states`: 0 = embeddings, -1 = final (normed, for decoders) state.

Batches: `batch_size` rows are padded to a length bucket and sent together; on CPU each batch
runs as micro-batches of about `MICRO_BATCH_TOKENS` tokens inside the jitted call (see there).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from probes.encode_config import EncodeConfig
from probes.models.batching import bucket_length, pad_batch, pool_weights, positions_from_valid
from probes.models.layers import divisor_at_most
from probes.models.pretrained import Pretrained, build_model

from .data_parallel import data_parallel, padded_rows, params_on, rows_on

__all__ = ["pooled_forward"]

# On CPU a batch runs as micro-batches of about this many tokens, one after the other inside the
# jitted call (`lax.map`): one micro-batch's activations (MiniLM's FFN: 1024 x 1536 floats, 6 MB)
# stay in cache, where one pass over a large batch streams every activation through memory at every
# op (MiniLM, B=32, T=512, one core: 1.2x the throughput of a single pass; experiments/benchmarks/extract.py).
MICRO_BATCH_TOKENS = 1024


def resolve_micro_batch_tokens(value="auto") -> int | None:
    """The tokens per micro-batch that ``value`` stands for.

    "auto" -> MICRO_BATCH_TOKENS on CPU, None (the whole batch in one pass) on GPU/TPU, whose
    throughput comes from wide batches; an int >= 1 or None is returned as is.
    """
    if value == "auto":
        return MICRO_BATCH_TOKENS if jax.default_backend() == "cpu" else None
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"micro_batch_tokens must be 'auto', None or an int >= 1, not {value!r}")
    return value


def micro_batch_rows(b: int, t: int, micro_batch_tokens: int | None) -> int:
    """Rows per micro-batch for a (b, t) batch.

    The largest divisor of b with at most `micro_batch_tokens` tokens (at least one row); b when
    `micro_batch_tokens` is None.

    Args:
        b: rows of the batch.
        t: tokens per row (the padded length).
        micro_batch_tokens: about this many tokens per micro-batch, or None (one pass).
    """
    return b if micro_batch_tokens is None else divisor_at_most(b, micro_batch_tokens // t)


@functools.cache
def pooled_forward(
    config,
    dtype,
    layers: tuple[int, ...],
    pooling: str,
    micro_batch_tokens: int | None = MICRO_BATCH_TOKENS,
    mesh: Mesh | None = None,
):
    """The jitted extraction forward of a model, cached per argument tuple.

    Rows are independent, so the batch runs as micro-batches of `micro_batch_rows` rows
    (None: the whole batch at once); with a `mesh`, each device runs its B / mesh.size rows so
    (params replicated, ids / valid and the output split on rows).

    Args:
        config: the model's config (`Pretrained.config`).
        dtype: its compute dtype (`Pretrained.dtype`).
        layers: hidden-state indices to return (HF's numbering: 0 embeddings, -1 final).
        pooling: "last", "mean" or "cls".
        micro_batch_tokens: about this many tokens per micro-batch, or None (one pass).
        mesh: None (one device) or the mesh the rows are split over (`rows_on`, `params_on`).

    Returns:
        jit: (params, ids (B, T) int32, valid (B, T) bool) -> (B, len(layers), D) float32.
    """
    model = build_model(config, dtype)
    sel = np.asarray(layers)

    def rows(params, ids, valid):
        w = pool_weights(valid, pooling)
        if config.is_decoder:
            out = model.apply(params, ids, positions_from_valid(valid), valid, pool_weights=w)
        else:
            out = model.apply(params, ids, valid, pool_weights=w)
        return jnp.transpose(out["hidden"][sel, :, 0, :], (1, 0, 2))

    def fn(params, ids, valid):
        b, t = ids.shape
        c = micro_batch_rows(b, t, micro_batch_tokens)
        if c == b:
            return rows(params, ids, valid)
        out = jax.lax.map(lambda x: rows(params, *x), (ids.reshape(b // c, c, t), valid.reshape(b // c, c, t)))
        return out.reshape(b, *out.shape[2:])

    return data_parallel(fn, mesh, 1)


def run_batches(
    pre: Pretrained,
    seqs: list[list[int]],
    layers: tuple[int, ...],
    pooling: str,
    cap: int,
    config: EncodeConfig,
    mesh: Mesh | None = None,
    on_batch: Callable[[list[int]], None] | None = None,
) -> np.ndarray:
    """Pooled states (n, len(layers), D) of token sequences, bucketed by length.

    Long sequences go first, `config.batch_size` at a time, each batch padded to its length bucket.

    Args:
        pre: the loaded model.
        seqs: n token-id sequences, each at most `cap` tokens.
        layers: hidden-state indices (HF numbering).
        pooling: "last", "mean" or "cls".
        cap: the longest a sequence may be (the bucket's cap).
        config: the batch size, padding side and micro-batches.
        mesh: the mesh each batch's rows are split over, or None (one device).
        on_batch: called after every batch with the indices of its sequences, or None.
    """
    n = len(seqs)
    d = pre.config.hidden_size
    out = np.zeros((n, len(layers), d), np.float32)
    if n == 0:
        return out
    micro = resolve_micro_batch_tokens(config.micro_batch_tokens)
    fwd = pooled_forward(pre.config, pre.dtype, layers, pooling, micro, mesh)
    params = params_on(pre, mesh)
    pad_id = pre.tokenizer.pad_token_id if pre.tokenizer is not None else None
    pad_id = pad_id if pad_id is not None else 0
    order = sorted(range(n), key=lambda i: (-len(seqs[i]), i))  # long first: fewer, larger shapes
    batches = [order[i : i + config.batch_size] for i in range(0, n, config.batch_size)]
    for idx in batches:
        group = [seqs[i] for i in idx]
        length = bucket_length(max(len(s) for s in group), cap)
        rows = padded_rows(len(group), config.batch_size, mesh)
        ids, valid = pad_batch(group, length, rows, pad_id, config.padding_side)
        res = np.asarray(fwd(params, *rows_on(mesh, ids, valid)))
        out[idx] = res[: len(idx)]
        if on_batch is not None:
            on_batch(idx)
    return out
