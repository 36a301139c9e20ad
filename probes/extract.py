"""Hidden-state extraction from the Flax ports.

Entry points::

    encode(pre, texts_or_chats, config=EncodeConfig(), *, cache_dir=None, mesh=None)
        -> (states, EncodeReport): states (n, d) for an int `config.layers`, (n, len(layers), d)
        for a sequence; float32, deterministic.
    encode_ids(pre, token_id_seqs, config=EncodeConfig(), *, mesh=None)   the same on token ids.
    encode_with_shared_prefix(pre, prefix, suffixes, layers=-1)
        -> last-token states of prefix+suffix_i, the prefix's KV cache computed once (BoRP §3.4).
    encode_pairs(pre, questions, answers, config, style="puaudit"|"chat", ...)   PUAudit's F(x, o);
    encode_distributed(pre, inputs, config, ...)   `encode` over a jax.distributed cluster: every
        process passes the same inputs, encodes its share, and gets the full result;
    format_puaudit(x, o) / format_chat(x, o)   the formatted inputs themselves.
    greedy_generate, next_token_logprobs        re-exported from probes.models.generate.

Settings: every extraction setting (layers, pooling, batch size, token cap, long-input policy,
normalisation, micro-batches, progress, cache shard size) is a field of the frozen
`EncodeConfig` (`probes.encode_config`, re-exported here) with its one default; what a call
runs on (the model, the inputs, `cache_dir`, `mesh`) is passed beside it.

Batches: `batch_size` rows are padded to a length bucket and sent together; on CPU each batch
runs as micro-batches of about `MICRO_BATCH_TOKENS` tokens inside the jitted call (see there).

Data parallelism: `mesh=` (a `jax.sharding.Mesh`, from `puaudit_runtime.mesh.make_mesh`) splits every batch's
rows over the mesh devices (all axes: `puaudit_runtime.mesh.data_axes`), the batch padded with empty rows to
a multiple of the device count; the weights are replicated once per mesh. Each device runs the
forward (and its micro-batches) on its own rows under `jax.shard_map`: rows are independent, so
there is no communication, and the result equals one device's up to float rounding. (A plain jit
with sharded inputs would all-gather the batch for the micro-batch `lax.map`.) `mesh=None` is the
single-device path.

Pooling: "last" (decoder default; the last real token whatever the padding side), "mean"
(encoders with sentence-transformers mean pooling, e.g. MiniLM), "cls". Layer indices follow HF's
`hidden_states`: 0 = embeddings, -1 = final (normed, for decoders) state.

Long inputs are never cut silently. `long_inputs` picks the policy for inputs longer than
`max_length` (default: the model window)::

    "chunk"       (encoder default) overlapping windows, each pooled, averaged weighted by tokens;
    "middle_out"  (decoder default) keep the first `head_fraction` and the end, cut the middle
                  (the response at the end of "<|user|>x<|assistant|>o" survives);
    "truncate"    keep the beginning;   "error"  raise.

Every call counts what exceeded the window (the `EncodeReport` returned with the states) and
warns when anything was cut or chunked.

`cache_dir`: a content-hash embedding cache on disk (npz shards, written atomically), keyed by the
model fingerprint, the settings that change the vectors (`EncodeConfig.cache_settings`) and each
input's content, so repeated audits do not re-encode.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
import uuid
import warnings
import weakref
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from tqdm.auto import tqdm

from probes.encode_config import EncodeConfig
from probes.models.batching import (
    batch_bucket,
    bucket_length,
    format_chat,
    format_puaudit,
    pad_batch,
    pool_weights,
    positions_from_valid,
    resolve_layers,
    tokenize_inputs,
)
from probes.models.generate import greedy_generate, next_token_logprobs
from probes.models.layers import divisor_at_most
from probes.models.pretrained import Pretrained, build_model
from puaudit_runtime.cluster import process_rows
from puaudit_runtime.files import atomic_path
from puaudit_runtime.mesh import data_axes, make_mesh, pad_to_multiple

__all__ = [
    "EncodeConfig",
    "EncodeReport",
    "EmbeddingCache",
    "encode",
    "encode_distributed",
    "encode_ids",
    "encode_pairs",
    "encode_with_shared_prefix",
    "format_chat",
    "format_puaudit",
    "greedy_generate",
    "middle_out_split",
    "next_token_logprobs",
    "params_on",
    "pooled_forward",
    "rows_on",
]

DECODER_MAX_LENGTH = 4096  # default cap for decoders with very long windows (CPU memory)


@dataclass
class EncodeReport:
    """What happened to the inputs of one `encode` call."""

    n_inputs: int = 0
    max_length: int = 0
    policy: str = ""
    n_over_window: int = 0  # inputs longer than max_length
    n_tokens_cut: int = 0  # tokens dropped (middle_out / truncate)
    over_window: list = field(default_factory=list)  # their indices
    n_chunks: int = 0  # windows encoded (chunk policy), incl. single-window inputs
    n_cached: int = 0  # served from the disk cache
    longest: int = 0  # longest input in tokens

    def summary(self) -> str:
        """One line: how many inputs exceeded the window, the policy, tokens cut and windows encoded."""
        return (
            f"{self.n_over_window}/{self.n_inputs} inputs exceed {self.max_length} tokens "
            f"(longest {self.longest}); policy {self.policy!r}: {self.n_tokens_cut} tokens cut, "
            f"{self.n_chunks} windows encoded"
        )


# ---------------------------------------------------------------------------------------------
# Jitted forward passes (one per model config / dtype / layer selection; shapes bucketed)


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
    """
    return b if micro_batch_tokens is None else divisor_at_most(b, micro_batch_tokens // t)


# ---------------------------------------------------------------------------------------------
# Data parallelism over a mesh

_REPLICATED = weakref.WeakKeyDictionary()  # Pretrained -> {Mesh: its params replicated on the mesh}


def params_on(pre: Pretrained, mesh: Mesh | None):
    """The model's weights where a forward on `mesh` reads them.

    Args:
        pre: the loaded model.
        mesh: a mesh of this process's devices, or None (one device).

    Returns:
        `pre.params` (a pytree of arrays, shapes as in the model) with mesh=None; otherwise the
        same replicated on every device of `mesh` (sent once per model and mesh, then cached).

    Raises:
        ValueError: `mesh` spans the devices of several processes.
    """
    if mesh is None:
        return pre.params
    if mesh.is_multi_process:
        raise ValueError(
            "mesh spans the devices of several processes; extraction takes a mesh of this "
            "process's devices (jax.local_devices()): use encode_distributed, where each "
            "process encodes its share of the inputs"
        )
    per_mesh = _REPLICATED.setdefault(pre, {})
    if mesh not in per_mesh:
        per_mesh[mesh] = jax.device_put(pre.params, NamedSharding(mesh, P()))
    return per_mesh[mesh]


def rows_on(mesh: Mesh | None, *arrays):
    """Host batches -> device arrays, their rows split over `mesh`.

    Args:
        mesh: the mesh (rows split over all its axes), or None (one device).
        *arrays: host arrays (B, T), e.g. token ids and the valid mask; B a multiple of the
            mesh size.

    Returns:
        A tuple of device arrays (B, T), one per input, in order.
    """
    if mesh is None:
        return tuple(jnp.asarray(a) for a in arrays)
    return tuple(jax.device_put(a, NamedSharding(mesh, P(data_axes(mesh), None))) for a in arrays)


def _data_parallel(fn, mesh: Mesh | None, n_replicated: int):
    """The jit of `fn(*replicated, *rows)`, data-parallel over `mesh`.

    With a mesh, each device runs `fn` on its own rows (`shard_map`: the first `n_replicated`
    arguments whole, the rest and the output split on axis 0).
    """
    if mesh is None:
        return jax.jit(fn)
    rows = P(data_axes(mesh))
    in_specs = (P(),) * n_replicated + (rows, rows)
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=rows))


def _padded_rows(n: int, batch_size: int, mesh: Mesh | None) -> int:
    """Rows of a batch holding n inputs: `batch_bucket`, rounded up to a multiple of the mesh size."""
    return pad_to_multiple(batch_bucket(n, batch_size), 1 if mesh is None else mesh.size)


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

    return _data_parallel(fn, mesh, 1)


@functools.cache
def _prefix_forward(config, dtype):
    """jit: (params, ids (1, P), valid (1, P)) -> KV cache of the prefix."""
    model = build_model(config, dtype, return_cache=True)

    def fn(params, ids, valid):
        return model.apply(params, ids, positions_from_valid(valid), valid)["cache"]

    return jax.jit(fn)


def broadcast_prefix_cache(prefix_cache: dict, b: int, s: int) -> dict:
    """A batch-1 prefix KV cache broadcast to ``b`` rows, with ``s`` empty slots for the suffixes.

    The cache holds k, v: (L, 1, P, Hkv, Dh) and pos, valid: (1, P); the suffixes are written at
    index P.
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

    return _data_parallel(fn, mesh, 3)


# ---------------------------------------------------------------------------------------------
# Long inputs


def middle_out_split(max_length: int, head_fraction: float) -> tuple[int, int]:
    """(head, tail): the tokens "middle_out" keeps from the start and from the end of a long input."""
    head = int(max_length * head_fraction)
    return head, max_length - head


def _middle_out(ids: list[int], max_length: int, head_fraction: float) -> list[int]:
    head, tail = middle_out_split(max_length, head_fraction)
    return ids[:head] + ids[len(ids) - tail :]


def _chunks(body: list[int], width: int, overlap: int) -> list[list[int]]:
    """Overlapping windows of `width` tokens covering `body` (the last one aligned to the end)."""
    if len(body) <= width:
        return [body]
    step = max(1, width - overlap)
    starts = list(range(0, len(body) - width, step)) + [len(body) - width]
    return [body[s : s + width] for s in starts]


# ---------------------------------------------------------------------------------------------
# Disk cache


_HEX_KEY = re.compile(r"^[0-9a-f]{64}$")
STALE_TEMP_S = 3600  # a temporary shard older than this belongs to a killed writer


def shard_checksum(keys: list[str], values: np.ndarray) -> str:
    """The sha256 hex digest of a shard's keys (k,) and values (k, ...): their bytes, dtype and shape."""
    values = np.ascontiguousarray(values)
    h = hashlib.sha256()
    h.update("\n".join(keys).encode())
    h.update(f"|{values.dtype.str}|{values.shape}|".encode())
    h.update(values.tobytes())
    return h.hexdigest()


def _read_shard(path: Path, row_shape: tuple | None) -> tuple[list[str], np.ndarray]:
    """(keys, values (k, *row_shape)) of one shard; ValueError saying what is wrong with it.

    The shard's ``checksum`` (:func:`shard_checksum`, written with it) must match its keys and values:
    values rewritten with other well-formed numbers are damage too. A shard without a checksum
    (written before checksums were) counts as damaged: it is recomputed once, then has one.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            if "keys" not in z or "values" not in z:
                raise ValueError(f"arrays {sorted(z.files)}, need keys and values")
            if "checksum" not in z:
                raise ValueError("no checksum (written before checksums were, or rewritten)")
            keys, values, checksum = z["keys"].tolist(), np.asarray(z["values"]), str(z["checksum"])
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as err:
        raise ValueError(f"unreadable: {type(err).__name__}: {err}") from None
    if values.ndim < 1 or len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but values of shape {values.shape}")
    if row_shape is not None and values.shape[1:] != tuple(row_shape):
        raise ValueError(f"rows of shape {values.shape[1:]}, this model and setting give {tuple(row_shape)}")
    if not all(isinstance(k, str) and _HEX_KEY.match(k) for k in keys):
        raise ValueError("keys are not content hashes")
    if not np.isfinite(values).all():
        raise ValueError("non-finite values")
    if shard_checksum(keys, values) != checksum:
        raise ValueError("checksum mismatch: the keys or values changed after the shard was written")
    return keys, values


class EmbeddingCache:
    """Content-hash cache: `root/<namespace>/part-*.npz`, each with `keys` (str) and `values`.

    Every shard is written with a ``checksum`` (:func:`shard_checksum`: sha256 of its keys and
    values) and checked when read (:func:`_read_shard`: readable, keys are hashes, one row per
    key of ``row_shape`` when given, finite, the checksum matches); a damaged one is reported with
    its path (a RuntimeWarning), removed, and its rows are recomputed by the caller. Shards
    written before checksums (none stored) are treated as damaged the same way: recomputed once.
    Temporary shards left by writers killed more than :data:`STALE_TEMP_S` seconds ago are removed.
    """

    def __init__(self, root: str | Path, namespace: str, row_shape: tuple | None = None):
        self.dir = Path(root) / namespace
        self.row_shape = None if row_shape is None else tuple(row_shape)
        self._mem: dict[str, np.ndarray] | None = None

    @staticmethod
    def key(item) -> str:
        """The cache key of ``item`` (JSON-serialisable): its sha256 hex digest."""
        return hashlib.sha256(json.dumps(item, sort_keys=True, default=str).encode()).hexdigest()

    def load(self) -> dict[str, np.ndarray]:
        """All cached rows {key: row}, read from the shards once (damaged shards removed)."""
        if self._mem is None:
            self._mem = {}
            if self.dir.is_dir():
                for f in sorted(self.dir.glob("part-*.npz")):
                    self._load_shard(f)
                self._remove_stale_temporaries()
        return self._mem

    def _load_shard(self, path: Path) -> None:
        try:
            keys, values = _read_shard(path, self.row_shape)
        except ValueError as err:
            warnings.warn(f"probes.extract: damaged cache shard {path} ({err}); removed, its rows are recomputed",
                          RuntimeWarning, stacklevel=4)  # fmt: skip
            path.unlink(missing_ok=True)
            return
        self._mem.update(zip(keys, values))

    def _remove_stale_temporaries(self) -> None:
        now = time.time()
        for f in self.dir.glob(".part-*"):
            try:
                if now - f.stat().st_mtime > STALE_TEMP_S:
                    f.unlink()
            except FileNotFoundError:  # its writer finished or another reader removed it
                pass

    def put(self, keys: list[str], values: np.ndarray) -> None:
        """Store ``values`` (one row per key) as a new shard, atomically, and in memory."""
        if not keys:
            return
        # a new shard under a unique name: concurrent writers never replace each other's shards
        values = np.asarray(values)
        with atomic_path(self.dir / f"part-{uuid.uuid4().hex}.npz", prefix=".part-") as tmp:
            np.savez(tmp, keys=np.asarray(keys), values=values, checksum=np.asarray(shard_checksum(keys, values)))
        self.load().update(zip(keys, values))


# ---------------------------------------------------------------------------------------------
# encode


def _run_batches(
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

    `config` gives the batch size, padding side and micro-batches; each batch's rows are split over
    `mesh`; `on_batch`, when given, is called after every batch with the indices of its sequences.
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
        rows = _padded_rows(len(group), config.batch_size, mesh)
        ids, valid = pad_batch(group, length, rows, pad_id, config.padding_side)
        res = np.asarray(fwd(params, *rows_on(mesh, ids, valid)))
        out[idx] = res[: len(idx)]
        if on_batch is not None:
            on_batch(idx)
    return out


def _input_bar(n: int, config: EncodeConfig):
    """The progress bar of one encoding: ``n`` inputs, shown when ``config.progress`` (stderr)."""
    return tqdm(total=n, desc="encoding", unit="input", disable=not config.progress)


def _inputs_done(bar, owner: list[int]) -> Callable[[list[int]], None]:
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


def _long_input_policy(cfg, max_length: int | None, long_inputs: str | None) -> tuple[int, str]:
    """The token cap and the long-input policy for a model config (defaults filled, both checked).

    Returns (cap, policy): cap in tokens (<= cfg.window), policy one of chunk/middle_out/truncate/error
    (`EncodeConfig` checked the name).
    """
    cap = max_length or (min(cfg.window, DECODER_MAX_LENGTH) if cfg.is_decoder else cfg.window)
    if cap > cfg.window:
        raise ValueError(f"max_length={cap} exceeds the model window {cfg.window}")
    policy = long_inputs or ("middle_out" if cfg.is_decoder else "chunk")
    if policy == "chunk" and cfg.is_decoder:
        raise ValueError("chunked encoding is for encoders; decoders use 'middle_out' or 'truncate'")
    return cap, policy


def _chunk_pieces(tok, seqs: list[list[int]], cap: int, chunk_overlap: int | None) -> tuple[list[list[int]], list[int]]:
    """Split every input longer than `cap` into overlapping windows of at most `cap` tokens.

    Each long input's body (special tokens removed) is cut by `_chunks` and every window re-wrapped
    in [CLS] ... [SEP]; inputs that fit are one piece as they are. Returns (pieces, owner): the
    token lists to encode and, per piece, the index of the input it came from.
    """
    lead = [tok.cls_token_id] if tok is not None and tok.cls_token_id is not None else []
    trail = [tok.sep_token_id] if tok is not None and tok.sep_token_id is not None else []
    width = cap - len(lead) - len(trail)
    overlap = chunk_overlap if chunk_overlap is not None else width // 4
    pieces, owner = [], []
    for i, s in enumerate(seqs):
        if len(s) <= cap:
            pieces.append(s)
            owner.append(i)
            continue
        body = s[len(lead) : len(s) - len(trail)] if (lead or trail) else s
        for c in _chunks(body, width, overlap):
            pieces.append(lead + c + trail)
            owner.append(i)
    return pieces, owner


def _pool_chunks(states: np.ndarray, pieces: list[list[int]], owner: list[int], n: int) -> np.ndarray:
    """Average the windows' states (n_pieces, L, D) per input -> (n, L, D) float32.

    Each window is weighted by its token count.
    """
    weights = np.asarray([len(p) for p in pieces], np.float32)
    owner = np.asarray(owner, dtype=np.int64)  # an empty list must still index
    out = np.zeros((n,) + states.shape[1:], np.float32)
    np.add.at(out, owner, states * weights[:, None, None])
    out /= np.bincount(owner, weights=weights, minlength=n)[:, None, None]
    return out


def _cut_long(seqs: list[list[int]], cap: int, policy: str, head_fraction: float) -> list[list[int]]:
    """Every input longer than `cap` tokens cut to `cap` (the report counts the cut tokens).

    "middle_out": keep the first `head_fraction` and the end; otherwise keep the beginning.
    """
    cut = lambda s: _middle_out(s, cap, head_fraction) if policy == "middle_out" else s[:cap]
    return [cut(s) if len(s) > cap else s for s in seqs]


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
    cap, policy = _long_input_policy(cfg, config.max_length, config.long_inputs)
    seqs = [list(map(int, s)) for s in seqs]
    report = _length_report(seqs, cap, policy, n_cached=0)
    if report.over_window and policy == "error":
        raise ValueError(
            f"{report.n_over_window} inputs exceed {cap} tokens (first indices {report.over_window[:10]}); "
            "choose long_inputs='chunk'/'middle_out'/'truncate'"
        )
    run = functools.partial(_run_batches, pre, layers=layer_idx, pooling=pooling, cap=cap, config=config, mesh=mesh)
    if policy == "chunk":
        pieces, owner = _chunk_pieces(pre.tokenizer, seqs, cap, config.chunk_overlap)
        out = _pool_chunks(run(pieces, on_batch=_inputs_done(bar, owner)), pieces, owner, len(seqs))
    else:
        pieces = _cut_long(seqs, cap, policy, config.head_fraction)
        out = run(pieces, on_batch=_inputs_done(bar, list(range(len(pieces)))))
    report.n_chunks = len(pieces)
    if config.normalised:
        out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return (out[:, 0] if squeeze else out), report


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


def _row_shape(pre: Pretrained, layers) -> tuple[int, ...]:
    """Shape of one pooled output row: (d,) for an int ``layers``, else (len(layers), d)."""
    d = pre.config.hidden_size
    return (d,) if isinstance(layers, int) else (len(list(layers)), d)


def _encode_cached(pre: Pretrained, inputs: list, config: EncodeConfig, cache_dir, mesh: Mesh | None):
    """``encode`` through the disk cache, storing a shard every ``config.cache_every`` new inputs.

    An interrupted run keeps what it encoded. Returns ((n, ...) rows in input order, EncodeReport);
    the report counts the long inputs of every input, cached or not.
    """
    cache, keys, n_cached, todo = _open_cache(pre, config, cache_dir, inputs)
    cap, policy = _long_input_policy(pre.config, config.max_length, config.long_inputs)
    seqs = tokenize_inputs(pre.tokenizer, inputs)
    report = _length_report(seqs, cap, policy, n_cached)
    parts = [todo[k : k + config.cache_every] for k in range(0, len(todo), config.cache_every)]
    with _input_bar(len(todo), config) as bar:  # one bar over the cache shards, moving after every batch
        for part in parts:
            new, rep = _encode_ids(pre, [seqs[i] for i in part], config, mesh, bar)
            cache.put([keys[i] for i in part], new)
            report.n_chunks += rep.n_chunks
    stored = cache.load()
    return np.stack([stored[k] for k in keys]), report


def _length_report(seqs: list[list[int]], cap: int, policy: str, n_cached: int) -> EncodeReport:
    """What ``cap`` and ``policy`` do to the token sequences ``seqs`` (windows encoded: filled in later)."""
    over = [i for i, s in enumerate(seqs) if len(s) > cap]
    cut = sum(len(seqs[i]) - cap for i in over) if policy in ("middle_out", "truncate") else 0
    longest = max((len(s) for s in seqs), default=0)
    return EncodeReport(n_inputs=len(seqs), max_length=cap, policy=policy, n_over_window=len(over),
                        n_tokens_cut=cut, over_window=over, n_cached=n_cached, longest=longest)  # fmt: skip


def _open_cache(pre: Pretrained, config: EncodeConfig, cache_dir, inputs: list):
    """The embedding cache of `pre` + `config.cache_settings()` under `cache_dir`, and what it lacks.

    Returns (cache, keys, n_cached, todo): keys, one per input (n,); n_cached, how many of them
    are stored; todo, the sorted first index of every distinct key not stored (each encoded once).
    """
    namespace = EmbeddingCache.key([pre.fingerprint, config.cache_settings()])[:24]
    cache = EmbeddingCache(cache_dir, namespace, row_shape=_row_shape(pre, config.layers))
    keys = [EmbeddingCache.key(x) for x in inputs]
    stored = cache.load()
    n_cached = sum(k in stored for k in keys)
    todo = sorted({k: i for i, k in reversed(list(enumerate(keys))) if k not in stored}.values())
    return cache, keys, n_cached, todo


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

    `style` "puaudit" (``"<|user|>" + x + "<|assistant|>" + o``) or "chat" (the tokenizer's chat
    template, x as user turn(s), o as the assistant turn). `config`, `cache_dir` and `mesh` go to
    `encode`.
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
    as indices into `inputs`; `on_long_inputs` as for `encode`). One process: plain `encode`.
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
# Shared prefix (suffix-only probing)


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

    prefix: a string (tokenised with the model's special tokens, e.g. BOS) or token ids;
    suffixes: strings (tokenised without special tokens) or token ids. The suffix keys attend to
    the prefix's cached keys/values, so the result equals encoding the concatenated ids (up to fp
    rounding). Note that tokenising prefix and suffix separately may split the text at the join
    differently from tokenising the concatenation. Returns (n, d) or (n, len(layers), d).
    `mesh`: the prefix runs on one device and its cache is replicated; each batch of suffixes is
    split over the mesh devices (as in `encode`).
    """
    cfg = pre.config
    if not cfg.is_decoder:
        raise ValueError("encode_with_shared_prefix needs a decoder (causal attention)")
    layer_idx, squeeze = resolve_layers(layers, cfg.num_layers + 1)
    p_ids = tokenize_inputs(pre.tokenizer, [prefix])[0] if isinstance(prefix, str) else list(map(int, prefix))
    s_ids = [
        tokenize_inputs(pre.tokenizer, [s], special=False)[0] if isinstance(s, str) else list(map(int, s))
        for s in suffixes
    ]
    if not p_ids or any(len(s) == 0 for s in s_ids):
        raise ValueError("prefix and every suffix need at least one token")
    longest = len(p_ids) + max(len(s) for s in s_ids)
    if longest > cfg.window:
        raise ValueError(
            f"prefix ({len(p_ids)} tokens) + longest suffix exceed the window {cfg.window}; "
            "shorten the prefix (e.g. middle-out) first"
        )
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
        rows = _padded_rows(len(group), batch_size, mesh)
        sids, svalid = pad_batch(group, s_len, rows, pad_id or 0, "right")
        res = fwd(params, prefix_cache, jnp.int32(len(p_ids)), *rows_on(mesh, sids, svalid))
        out[idx] = np.asarray(res)[: len(idx)]
    return out[:, 0] if squeeze else out
