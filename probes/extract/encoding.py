"""The encode API: inputs -> pooled hidden states, with the long-input report and the disk cache.

    encode(pre, texts_or_chats, config=EncodeConfig(), *, cache_dir=None, mesh=None)
        -> (states, EncodeReport): states (n, d) for an int `config.layers`, (n, len(layers), d)
        for a sequence; float32, deterministic.
    encode_ids(pre, token_id_seqs, config=EncodeConfig(), *, mesh=None)   the same on token ids.
    encode_pairs(pre, questions, answers, config, style="puaudit"|"chat", ...)   PUAudit's F(x, o).
    encode_distributed(pre, inputs, config, ...)   `encode` over a jax.distributed cluster: every
        process passes the same inputs, encodes its share, and gets the full result.

One call: the inputs are tokenised, cut into pieces by the long-input rule (`long_inputs`), run in
length-bucketed batches (`forward`, rows split over `mesh` by `data_parallel`), pooled back to one
row per input, normalised on request; with `cache_dir`, rows already stored (`cache`) are read
instead. Every call counts what exceeded the cap and warns when anything was cut or chunked.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from tqdm.auto import tqdm

from probes.encode_config import EncodeConfig
from probes.models.batching import format_chat, format_puaudit, resolve_layers, tokenize_inputs
from probes.models.pretrained import Pretrained
from puaudit_runtime.cluster import process_rows
from puaudit_runtime.mesh import make_mesh

from .cache import EmbeddingCache, cache_namespace
from .forward import run_batches
from .long_inputs import length_report, long_input_rule, plan_pieces, pool_pieces
from .report import EncodeReport

__all__ = ["encode", "encode_distributed", "encode_ids", "encode_pairs"]


# ---------------------------------------------------------------------------------------------
# 1. Token ids -> rows


def encode_ids(
    pre: Pretrained, seqs, config: EncodeConfig = EncodeConfig(), *, mesh: Mesh | None = None
) -> tuple[np.ndarray, EncodeReport]:
    """`encode` on token ids (lists of ints, special tokens included).

    Args:
        pre: the loaded model.
        seqs: n token-id sequences.
        config: the extraction settings (`EncodeConfig`).
        mesh: a mesh of this process's devices each batch's rows are split over, or None (one device).

    Returns:
        (states, report): states (n, d) float32 for an int `config.layers`, else (n, len(layers), d);
        the `EncodeReport` of the inputs (warned about when any exceeded the cap).
    """
    out, report = _encode_ids(pre, seqs, config, mesh)
    if report.n_over_window:
        warnings.warn(f"probes.extract: {report.summary()}", stacklevel=2)
    return out, report


def _encode_ids(pre: Pretrained, seqs, config: EncodeConfig, mesh: Mesh | None, bar=None):
    """`encode_ids` without the warning (`encode` warns once for all its parts instead): (states, report).

    ``bar``: the progress bar (in inputs) to advance after every batch; None: one of its own.
    """
    own_bar = bar is None
    bar = _input_bar(len(seqs), config) if own_bar else bar
    try:
        return _encode_ids_into(pre, seqs, config, mesh, bar)
    finally:
        if own_bar:
            bar.close()


def _encode_ids_into(pre: Pretrained, seqs, config: EncodeConfig, mesh: Mesh | None, bar):
    """`_encode_ids` with its progress bar given: (states, report)."""
    cfg = pre.config
    layer_idx, squeeze = resolve_layers(config.layers, cfg.num_layers + 1)
    pooling = config.pooling or ("last" if cfg.is_decoder else cfg.pooling)
    rule = long_input_rule(cfg, pre.tokenizer, config)
    seqs = [list(map(int, s)) for s in seqs]
    report = length_report(seqs, rule, n_cached=0)
    pieces = plan_pieces(seqs, rule)
    states = run_batches(pre, pieces.as_lists(), layer_idx, pooling, rule.cap, config, mesh,
                         on_batch=_inputs_done(bar, pieces.owner))  # fmt: skip
    out = pool_pieces(states, pieces)
    report.n_chunks = len(pieces.owner)
    if config.normalised:
        out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return (out[:, 0] if squeeze else out), report


# ---------------------------------------------------------------------------------------------
# 2. Inputs -> rows, through the disk cache


def encode(
    pre: Pretrained,
    inputs,
    config: EncodeConfig = EncodeConfig(),
    *,
    cache_dir: str | Path | None = None,
    mesh: Mesh | None = None,
    on_long_inputs: Callable[[EncodeReport], None] | None = None,
) -> tuple[np.ndarray, EncodeReport]:
    """Pooled hidden states of texts or chat conversations.

    For PUAudit's F(x, o) pass `format_puaudit(x, o)` strings or `format_chat(x, o)`
    conversations. Results agree to float rounding whatever the batch, micro-batch or mesh split.
    Inputs cut to the cap are counted in the report and said once: a warning, or `on_long_inputs`.
    With `config.progress` one bar counts the inputs, moving after every batch.

    Args:
        pre: the loaded model.
        inputs: n strings (tokenised with the model's special tokens) or chat message lists
            (rendered with the chat template).
        config: the extraction settings (`EncodeConfig`: layers, pooling, batches, long inputs...).
        cache_dir: a folder for the content-hash disk cache (:class:`EmbeddingCache`), written
            every `config.cache_every` new inputs (an interrupted run keeps what it encoded;
            damaged shards are reported and recomputed), or None (no cache).
        mesh: a mesh of this process's devices each batch's rows are split over (data parallel),
            or None (one device).
        on_long_inputs: called once with the report when any input exceeded the cap (a caller's
            own message), or None: a `UserWarning` with `EncodeReport.summary`.

    Returns:
        (states, report): states (n, d) float32 for an int `config.layers`, else
        (n, len(layers), d); the `EncodeReport` (long inputs, windows, rows served from the cache).
    """
    inputs = list(inputs)
    if cache_dir is None or not inputs:
        out, report = _encode_ids(pre, tokenize_inputs(pre.tokenizer, inputs), config, mesh)
    else:
        out, report = _encode_cached(pre, inputs, config, cache_dir, mesh)
    if report.n_over_window and on_long_inputs is not None:
        on_long_inputs(report)
    elif report.n_over_window:
        warnings.warn(f"probes.extract: {report.summary()}", stacklevel=2)
    return out, report


def _encode_cached(pre: Pretrained, inputs: list, config: EncodeConfig, cache_dir, mesh: Mesh | None):
    """``encode`` through the disk cache, storing a shard every ``config.cache_every`` new inputs.

    An interrupted run keeps what it encoded. Returns ((n, ...) rows in input order, EncodeReport);
    the report counts the long inputs of every input, cached or not.
    """
    rule = long_input_rule(pre.config, pre.tokenizer, config)
    cache, keys, n_cached, todo = _open_cache(pre, config, rule, cache_dir, inputs)
    seqs = tokenize_inputs(pre.tokenizer, inputs)
    report = length_report(seqs, rule, n_cached)
    parts = [todo[k : k + config.cache_every] for k in range(0, len(todo), config.cache_every)]
    with _input_bar(len(todo), config) as bar:  # one bar over the cache shards, moving after every batch
        for part in parts:
            new, rep = _encode_ids(pre, [seqs[i] for i in part], config, mesh, bar)
            cache.put([keys[i] for i in part], new)
            report.n_chunks += rep.n_chunks
    stored = cache.load()
    return np.stack([stored[k] for k in keys]), report


def _open_cache(pre: Pretrained, config: EncodeConfig, rule, cache_dir, inputs: list):
    """The embedding cache of `pre`, `config` and its long-input `rule` under `cache_dir`, and what it lacks.

    Returns (cache, keys, n_cached, todo): keys, one per input (n,); n_cached, how many of them
    are stored; todo, the sorted first index of every distinct key not stored (each encoded once).
    """
    namespace = cache_namespace(pre.fingerprint, config, rule)
    cache = EmbeddingCache(cache_dir, namespace, row_shape=_row_shape(pre, config.layers))
    keys = [EmbeddingCache.key(x) for x in inputs]
    stored = cache.load()
    n_cached = sum(k in stored for k in keys)
    todo = sorted({k: i for i, k in reversed(list(enumerate(keys))) if k not in stored}.values())
    return cache, keys, n_cached, todo


def _row_shape(pre: Pretrained, layers) -> tuple[int, ...]:
    """Shape of one pooled output row: (d,) for an int ``layers``, else (len(layers), d)."""
    d = pre.config.hidden_size
    return (d,) if isinstance(layers, int) else (len(list(layers)), d)


# ---------------------------------------------------------------------------------------------
# 3. PUAudit's pairs, and a cluster of processes


def encode_pairs(
    pre: Pretrained,
    questions,
    answers,
    config: EncodeConfig = EncodeConfig(),
    *,
    style: str = "puaudit",
    cache_dir: str | Path | None = None,
    mesh: Mesh | None = None,
) -> tuple[np.ndarray, EncodeReport]:
    """PUAudit's F(x, o) for every pair: `encode` of the formatted pairs, (states, report).

    Args:
        pre: the loaded model.
        questions: n prompts x (text, or chat turns for "chat").
        answers: n responses o.
        config: the extraction settings (`EncodeConfig`).
        style: "puaudit" (``"<|user|>" + x + "<|assistant|>" + o``) or "chat" (the tokenizer's chat
            template, x as user turn(s), o as the assistant turn).
        cache_dir: the disk cache folder, or None (as for `encode`).
        mesh: the mesh each batch's rows are split over, or None (as for `encode`).
    """
    questions, answers = list(questions), list(answers)
    if len(questions) != len(answers):
        raise ValueError(f"{len(questions)} questions but {len(answers)} answers")
    if style == "puaudit":
        inputs = [format_puaudit(x, o) for x, o in zip(questions, answers)]
    elif style == "chat":
        inputs = [format_chat(x, o) for x, o in zip(questions, answers)]
    else:
        raise ValueError(f"style must be 'puaudit' or 'chat', not {style!r}")
    return encode(pre, inputs, config, cache_dir=cache_dir, mesh=mesh)


def encode_distributed(
    pre: Pretrained,
    inputs,
    config: EncodeConfig = EncodeConfig(),
    *,
    cache_dir: str | Path | None = None,
    mesh: Mesh | None = None,
    on_long_inputs: Callable[[EncodeReport], None] | None = None,
) -> tuple[np.ndarray, EncodeReport]:
    """`encode` over the processes of a jax.distributed cluster (`puaudit_runtime.cluster.initialize_cluster`).

    Every process passes the same n `inputs` and encodes only its rows `process_rows(n)`, on
    `mesh` (default: a mesh of all its local devices); the shares are gathered, so every process
    returns the full (n, d) / (n, len(layers), d) states. With `cache_dir` each process writes its
    own rows and reads whatever is there. The report covers this process's share (`over_window`
    as indices into `inputs`). One process: plain `encode`.

    Args:
        pre: the loaded model.
        inputs: the n inputs, the same on every process.
        config: the extraction settings (`EncodeConfig`).
        cache_dir: the disk cache folder, or None (as for `encode`).
        mesh: a mesh of this process's devices, or None (all of them).
        on_long_inputs: as for `encode`.

    Returns:
        (states, report): all n rows on every process; this process's `EncodeReport`.
    """
    inputs = list(inputs)
    if jax.process_count() == 1 or not inputs:
        return encode(pre, inputs, config, cache_dir=cache_dir, mesh=mesh, on_long_inputs=on_long_inputs)
    mesh = make_mesh(jax.local_devices()) if mesh is None else mesh
    start, stop = process_rows(len(inputs))
    local, report = encode(pre, inputs[start:stop], config, cache_dir=cache_dir, mesh=mesh,
                           on_long_inputs=on_long_inputs)  # fmt: skip
    report.over_window = [start + i for i in report.over_window]
    return _gather_rows(local, len(inputs)), report


def _gather_rows(local: np.ndarray, n: int) -> np.ndarray:
    """This process's rows (stop - start, ...) of `process_rows(n)` -> all n rows (n, ...).

    The rows come from every process, each share zero-padded to the largest for the all-gather.
    """
    k = jax.process_count()
    width = process_rows(n, 0, k)[1]  # process 0 has the largest share
    padded = np.zeros((width,) + local.shape[1:], local.dtype)
    padded[: len(local)] = local
    every = np.asarray(multihost_utils.process_allgather(padded))  # (k, width, ...)
    shares = [process_rows(n, i, k) for i in range(k)]
    return np.concatenate([every[i, : stop - start] for i, (start, stop) in enumerate(shares)])


# ---------------------------------------------------------------------------------------------
# 4. Progress


def _input_bar(n: int, config: EncodeConfig):
    """The progress bar of one encoding: ``n`` inputs, shown when ``config.progress`` (stderr)."""
    return tqdm(total=n, desc="encoding", unit="input", disable=not config.progress)


def _inputs_done(bar, owner) -> Callable[[list[int]], None]:
    """A batch callback advancing ``bar`` by the inputs whose last piece the batch encoded.

    ``owner``: per piece (window or whole input), the index of the input it belongs to; the bar
    moves after every batch, by whole inputs.
    """
    owner = np.asarray(owner, dtype=np.int64)
    left = np.bincount(owner) if len(owner) else np.zeros(0, np.int64)

    def on_batch(idx: list[int]) -> None:
        mine = owner[np.asarray(idx, dtype=np.int64)]
        np.subtract.at(left, mine, 1)
        bar.update(int((left[np.unique(mine)] == 0).sum()))

    return on_batch
