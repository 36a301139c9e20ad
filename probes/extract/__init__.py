"""Hidden-state extraction from the Flax ports: one module per concern, the public names here.

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

Modules, each read top to bottom::

    encoding       the encode API above (tokenise, cut, run, pool, normalise; the cache on request)
    long_inputs    the long-input rule, `plan_pieces` (inputs -> pieces) and `pool_pieces` (back)
    forward        the jitted pooled forward, micro-batches, length-bucketed batches
    data_parallel  a batch's rows split over a device mesh, the weights replicated once
    cache          the content-hash disk cache (checked npz shards) and its key
    shared_prefix  suffix-only probing: a prefix's KV cache computed once
    report         `EncodeReport`, what a call did to its inputs

Settings: every extraction setting (layers, pooling, batch size, token cap, long-input policy,
normalisation, micro-batches, progress, cache shard size) is a field of the frozen
`EncodeConfig` (`probes.encode_config`, re-exported here) with its one default; what a call
runs on (the model, the inputs, `cache_dir`, `mesh`) is passed beside it.
"""

from probes.encode_config import EncodeConfig
from probes.models.batching import format_chat, format_puaudit
from probes.models.generate import greedy_generate, next_token_logprobs

# The names after "as" are importable from here as before, documented where they are defined.
from .cache import STALE_TEMP_S as STALE_TEMP_S
from .cache import EmbeddingCache, cache_namespace
from .cache import shard_checksum as shard_checksum
from .data_parallel import params_on, rows_on
from .encoding import encode, encode_distributed, encode_ids, encode_pairs
from .forward import MICRO_BATCH_TOKENS as MICRO_BATCH_TOKENS
from .forward import micro_batch_rows as micro_batch_rows
from .forward import pooled_forward
from .forward import resolve_micro_batch_tokens as resolve_micro_batch_tokens
from .long_inputs import DECODER_MAX_LENGTH as DECODER_MAX_LENGTH
from .long_inputs import LongInputRule, Pieces, long_input_rule, middle_out_split, plan_pieces, pool_pieces
from .report import EncodeReport
from .shared_prefix import broadcast_prefix_cache as broadcast_prefix_cache
from .shared_prefix import encode_with_shared_prefix

__all__ = [
    "EmbeddingCache",
    "EncodeConfig",
    "EncodeReport",
    "LongInputRule",
    "Pieces",
    "cache_namespace",
    "encode",
    "encode_distributed",
    "encode_ids",
    "encode_pairs",
    "encode_with_shared_prefix",
    "format_chat",
    "format_puaudit",
    "greedy_generate",
    "long_input_rule",
    "middle_out_split",
    "next_token_logprobs",
    "params_on",
    "plan_pieces",
    "pool_pieces",
    "pooled_forward",
    "rows_on",
]
