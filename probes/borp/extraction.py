"""2. Extraction of contrastive vectors (BoRP §3.2, §3.4).

`contrastive_vectors`: v = h(prefix + positive) - h(prefix + negative), the hidden state of the
final token at any set of layers; the prefix's KV cache is computed once per dialogue and shared by
all 2 x n_probes suffixes (`probes.extract.encode_with_shared_prefix`, §3.4); `reuse_prefix=False`
recomputes prefix + suffix for every suffix (same token ids, same result) for the throughput
comparison.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .prompts import ProbePrompt, render_prefix, render_suffix

__all__ = ["contrastive_vectors", "ExtractionStats"]


@dataclass
class ExtractionStats:
    """What an extraction run cost: items, forward tokens, seconds, and sessions per hour.

    Attributes:
        n_items: dialogues encoded.
        n_suffixes: suffixes per dialogue (2 per probe).
        prefix_tokens: tokens of all prefixes (each once).
        suffix_tokens: tokens of all suffixes.
        computed_tokens: tokens actually run through the model.
        seconds: wall-clock time of the run (seconds).
        reuse_prefix: whether each prefix's KV cache was shared by its suffixes.
    """

    n_items: int = 0
    n_suffixes: int = 0
    prefix_tokens: int = 0  # tokens of all prefixes (each once)
    suffix_tokens: int = 0  # tokens of all suffixes
    computed_tokens: int = 0  # tokens actually run through the model
    seconds: float = 0.0
    reuse_prefix: bool = True

    @property
    def sessions_per_hour(self) -> float:
        """Dialogues encoded per hour of wall-clock time (NaN when no time was measured)."""
        return 3600.0 * self.n_items / self.seconds if self.seconds > 0 else float("nan")


def contrastive_vectors(
    pre,
    dialogues: Sequence[Sequence[dict]],
    probes: Sequence[ProbePrompt],
    *,
    layers=-1,
    reuse_prefix: bool = True,
    batch_size: int = 8,
    progress: bool = False,
    mesh=None,
) -> tuple[np.ndarray, ExtractionStats]:
    """Contrastive hidden states v = h(prefix + positive) - h(prefix + negative), and their cost.

    Each dialogue's prefix is encoded once and its KV cache shared by the 2T suffixes
    (`reuse_prefix=True`), or prefix + suffix are recomputed for every suffix
    (`reuse_prefix=False`): same token ids, same states up to fp rounding.

    Args:
        pre: a decoder `Pretrained`.
        dialogues: n lists of chat messages (rated response last).
        probes: T prompts.
        layers: an int or a sequence of L hidden-state indices (HF numbering, -1 = final).
        reuse_prefix: share each prefix's KV cache among its suffixes.
        batch_size: suffixes per forward.
        progress: a progress bar over the dialogues.
        mesh: a jax.sharding.Mesh each batch of suffixes is split over, or None (one device).

    Returns:
        (V, stats): V (n, T, d) float32 for an int `layers`, (n, T, L, d) for a sequence; the
        `ExtractionStats` of the run (tokens, seconds).
    """
    from tqdm.auto import tqdm

    if not pre.config.is_decoder:
        raise ValueError("contrastive probing needs a decoder (final-token states of a causal model)")
    squeeze = isinstance(layers, (int, np.integer))
    lay = [int(layers)] if squeeze else [int(x) for x in layers]
    stats = ExtractionStats(n_items=len(dialogues), n_suffixes=2 * len(probes), reuse_prefix=reuse_prefix)
    out = np.zeros((len(dialogues), len(probes), len(lay), pre.config.hidden_size), np.float32)
    t0 = time.perf_counter()
    for i, msgs in enumerate(tqdm(dialogues, desc="contrastive", disable=not progress, unit="dialogue")):
        p_ids, s_ids = _dialogue_ids(pre.tokenizer, msgs, probes)
        stats.prefix_tokens += len(p_ids)
        stats.suffix_tokens += sum(map(len, s_ids))
        h, computed = _suffix_states(pre, p_ids, s_ids, lay, reuse_prefix, batch_size, mesh)
        stats.computed_tokens += computed
        h = h.reshape(len(probes), 2, len(lay), -1)
        out[i] = h[:, 0] - h[:, 1]
    stats.seconds = time.perf_counter() - t0
    return (out[:, :, 0] if squeeze else out), stats


def _dialogue_ids(tok, msgs: Sequence[dict], probes: Sequence[ProbePrompt]) -> tuple[list[int], list[list[int]]]:
    """Token ids of one dialogue: the prefix and its 2T suffixes.

    The prefix is `render_prefix` (special tokens included), the suffixes `render_suffix` (no special
    tokens), ordered probe by probe, positive then negative.
    """
    from probes.models.batching import tokenize_inputs

    p_ids = tokenize_inputs(tok, [render_prefix(tok, msgs)])[0]
    s_texts = [render_suffix(tok, msgs, p.instruction, verdict) for p in probes for verdict in (p.positive, p.negative)]
    return p_ids, tokenize_inputs(tok, s_texts, special=False)


def _suffix_states(pre, p_ids: list[int], s_ids: list[list[int]], lay: list[int], reuse_prefix: bool, batch_size, mesh):
    """Final-token states of prefix + every suffix, and the number of tokens run through the model.

    The states are (2T, L, d) float32 for the 2T `s_ids` and the L layers `lay`; the prefix is run once
    with `reuse_prefix`, else once per suffix.
    """
    from probes.extract import EncodeConfig, encode_ids, encode_with_shared_prefix

    if reuse_prefix:
        h = encode_with_shared_prefix(pre, p_ids, s_ids, layers=lay, batch_size=batch_size, mesh=mesh)
        return h, len(p_ids) + sum(map(len, s_ids))
    config = EncodeConfig(layers=tuple(lay), pooling="last", batch_size=batch_size, long_inputs="error")
    h, _ = encode_ids(pre, [p_ids + s for s in s_ids], config, mesh=mesh)
    return h, sum(len(p_ids) + len(s) for s in s_ids)
