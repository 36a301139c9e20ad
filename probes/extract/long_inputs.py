"""Long inputs: how token sequences are cut into the pieces the forward pass sees, and pooled back.

Long inputs are never cut silently. `EncodeConfig.long_inputs` picks the policy for inputs longer
than the token cap `max_length` (default: the model window, at most `DECODER_MAX_LENGTH` for
decoders)::

    "chunk"       (encoder default) overlapping windows, each pooled, averaged weighted by tokens;
    "middle_out"  (decoder default) keep the first `head_fraction` and the end, cut the middle
                  (the response at the end of "<|user|>x<|assistant|>o" survives);
    "truncate"    keep the beginning;   "error"  raise.

Three steps, the last two testable without a model::

    rule = long_input_rule(model_config, tokenizer, config)   # LongInputRule: every setting resolved
    pieces = plan_pieces(seqs, rule)                           # Pieces: the token ids to encode
    rows = pool_pieces(states, pieces)                         # (k, L, D) piece states -> (n, L, D)

`length_report` counts what exceeded the cap (the `EncodeReport` returned with the states).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from probes.encode_config import LONG_INPUTS, EncodeConfig

from .report import EncodeReport

__all__ = ["LongInputRule", "Pieces", "long_input_rule", "middle_out_split", "plan_pieces", "pool_pieces"]

DECODER_MAX_LENGTH = 4096  # default cap for decoders with very long windows (CPU memory)


# ---------------------------------------------------------------------------------------------
# 1. The rule: every long-input setting resolved for one model


@dataclass(frozen=True)
class LongInputRule:
    """How the inputs of one model and `EncodeConfig` are cut, every default filled in.

    It is all `plan_pieces` reads, and part of the disk cache's key: a default that changes here
    (the decoder cap, the overlap of windows) changes the key with it.

    Attributes:
        cap: the most tokens of one piece (>= 1, within the model window).
        policy: "chunk", "middle_out", "truncate" or "error".
        head_fraction: under "middle_out", the share of `cap` kept from the start (0 to 1).
        overlap: under "chunk", the tokens shared by neighbouring windows (>= 0).
        lead: under "chunk", the special token ids opening every window (e.g. (CLS,)), or ().
        trail: under "chunk", the special token ids closing every window (e.g. (SEP,)), or ().
    """

    cap: int
    policy: str
    head_fraction: float = 0.25
    overlap: int = 0
    lead: tuple[int, ...] = ()
    trail: tuple[int, ...] = ()

    def __post_init__(self):
        if self.cap < 1:
            raise ValueError(f"cap must be >= 1, not {self.cap}")
        if self.policy not in LONG_INPUTS:
            raise ValueError(f"policy must be one of {LONG_INPUTS}, not {self.policy!r}")


def long_input_rule(model_config, tokenizer, config: EncodeConfig) -> LongInputRule:
    """The `LongInputRule` of `config` for a model (defaults filled, both checked).

    Args:
        model_config: the model's config (`Pretrained.config`: `window`, `is_decoder`).
        tokenizer: its tokenizer (`cls_token_id` / `sep_token_id` wrap chunked windows), or None.
        config: the extraction settings (`max_length`, `long_inputs`, `head_fraction`, `chunk_overlap`).

    Raises:
        ValueError: `max_length` beyond the model window, or "chunk" asked of a decoder.
    """
    cap = config.max_length or (
        min(model_config.window, DECODER_MAX_LENGTH) if model_config.is_decoder else model_config.window
    )
    if cap > model_config.window:
        raise ValueError(f"max_length={cap} exceeds the model window {model_config.window}")
    policy = config.long_inputs or ("middle_out" if model_config.is_decoder else "chunk")
    if policy == "chunk" and model_config.is_decoder:
        raise ValueError("chunked encoding is for encoders; decoders use 'middle_out' or 'truncate'")
    special = lambda name: (getattr(tokenizer, name),) if getattr(tokenizer, name, None) is not None else ()  # noqa: E731
    lead, trail = special("cls_token_id"), special("sep_token_id")
    width = cap - len(lead) - len(trail)
    overlap = config.chunk_overlap if config.chunk_overlap is not None else width // 4
    return LongInputRule(cap=cap, policy=policy, head_fraction=config.head_fraction, overlap=overlap,
                         lead=lead, trail=trail)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# 2. The pieces: token sequences cut by the rule


@dataclass(frozen=True, eq=False)
class Pieces:
    """The k pieces the forward pass encodes for n inputs (k = n unless "chunk" split some).

    Attributes:
        ids: (T,) int64, every piece's token ids, one piece after the other (T tokens in all).
        offsets: (k + 1,) int64, piece j is `ids[offsets[j]:offsets[j + 1]]`; offsets[0] = 0.
        owner: (k,) int64, the input (0 to n - 1) each piece comes from, non-decreasing.
        lengths: (n,) int64, every input's length in tokens before it was cut.
        cap: the most tokens of one piece.
        policy: the rule's policy; under "chunk" `pool_pieces` averages an input's windows.
    """

    ids: np.ndarray
    offsets: np.ndarray
    owner: np.ndarray
    lengths: np.ndarray
    cap: int
    policy: str

    def __post_init__(self):
        k, n = len(self.owner), len(self.lengths)
        if len(self.offsets) != k + 1 or self.offsets[0] != 0 or self.offsets[-1] != len(self.ids):
            raise ValueError(f"offsets {np.shape(self.offsets)} do not cut {len(self.ids)} ids into {k} pieces")
        if k and (np.min(self.owner) < 0 or np.max(self.owner) >= n):
            raise ValueError(f"owner indices outside 0..{n - 1} (the inputs)")

    @property
    def n_inputs(self) -> int:
        """n, the inputs the pieces were cut from."""
        return len(self.lengths)

    def piece_lengths(self) -> np.ndarray:
        """(k,) int64: the tokens of every piece."""
        return np.diff(self.offsets)

    def as_lists(self) -> list[list[int]]:
        """The k pieces as lists of Python ints (what the batches are padded from)."""
        return [self.ids[a:b].tolist() for a, b in zip(self.offsets[:-1], self.offsets[1:])]


def plan_pieces(seqs, rule: LongInputRule) -> Pieces:
    """Cut n token sequences into the pieces the forward pass sees.

    An input within `rule.cap` tokens is one piece as it is. A longer one is, by `rule.policy`:
    "chunk", overlapping windows of at most `cap` tokens (its special tokens removed, each window
    re-wrapped in `lead` ... `trail`, the last window aligned to the end); "middle_out", its first
    `int(cap * head_fraction)` and its last `cap - head` tokens; "truncate", its first `cap`.

    Args:
        seqs: n token-id sequences (ints).
        rule: the resolved settings (`long_input_rule`).

    Returns:
        The `Pieces` (ids flat, offsets (k + 1,), owner (k,), lengths (n,)).

    Raises:
        ValueError: policy "error" and some input longer than the cap (the first indices named).
    """
    seqs = [list(map(int, s)) for s in seqs]
    over = [i for i, s in enumerate(seqs) if len(s) > rule.cap]
    if over and rule.policy == "error":
        raise ValueError(
            f"{len(over)} inputs exceed {rule.cap} tokens (first indices {over[:10]}); "
            "choose long_inputs='chunk'/'middle_out'/'truncate'"
        )
    cut = _windows if rule.policy == "chunk" else lambda s, r: [_cut(s, r)]
    parts = [(i, piece) for i, s in enumerate(seqs) for piece in cut(s, rule)]
    sizes = [len(piece) for _, piece in parts]
    return Pieces(
        ids=np.fromiter(itertools.chain.from_iterable(p for _, p in parts), np.int64, sum(sizes)),
        offsets=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64),
        owner=np.asarray([i for i, _ in parts], np.int64),
        lengths=np.asarray([len(s) for s in seqs], np.int64),
        cap=rule.cap,
        policy=rule.policy,
    )


def middle_out_split(max_length: int, head_fraction: float) -> tuple[int, int]:
    """(head, tail): the tokens "middle_out" keeps from the start and from the end of a long input."""
    head = int(max_length * head_fraction)
    return head, max_length - head


def _cut(ids: list[int], rule: LongInputRule) -> list[int]:
    """One input as one piece: as it is within the cap, else its head and end ("middle_out") or its beginning."""
    if len(ids) <= rule.cap:
        return ids
    if rule.policy == "middle_out":
        head, tail = middle_out_split(rule.cap, rule.head_fraction)
        return ids[:head] + ids[len(ids) - tail :]
    return ids[: rule.cap]


def _windows(ids: list[int], rule: LongInputRule) -> list[list[int]]:
    """One input as "chunk" pieces: itself within the cap, else its body's windows wrapped in lead/trail."""
    if len(ids) <= rule.cap:
        return [ids]
    lead, trail = list(rule.lead), list(rule.trail)
    body = ids[len(lead) : len(ids) - len(trail)] if (lead or trail) else ids
    return [lead + c + trail for c in _chunks(body, rule.cap - len(lead) - len(trail), rule.overlap)]


def _chunks(body: list[int], width: int, overlap: int) -> list[list[int]]:
    """Overlapping windows of `width` tokens covering `body` (the last one aligned to the end)."""
    if len(body) <= width:
        return [body]
    step = max(1, width - overlap)
    starts = list(range(0, len(body) - width, step)) + [len(body) - width]
    return [body[s : s + width] for s in starts]


# ---------------------------------------------------------------------------------------------
# 3. Pooling the pieces' states back to one row per input


def pool_pieces(states: np.ndarray, pieces: Pieces) -> np.ndarray:
    """One row per input from the pieces' pooled states.

    Under "chunk" an input's row is the mean of its windows' states weighted by their token counts
    (one window: its state, up to float rounding); under the other policies every input is one
    piece, whose state is its row (returned as is).

    Args:
        states: (k, L, D) float, the pooled states of the k pieces in order (L layers, D hidden).
        pieces: the `Pieces` they were computed from.

    Returns:
        (n, L, D) float32.

    Raises:
        ValueError: `states` does not have one row per piece.
    """
    k = len(pieces.owner)
    if len(states) != k:
        raise ValueError(f"{len(states)} state rows for {k} pieces")
    if pieces.policy != "chunk":
        return states
    weights = pieces.piece_lengths().astype(np.float32)
    out = np.zeros((pieces.n_inputs,) + states.shape[1:], np.float32)
    np.add.at(out, pieces.owner, states * weights[:, None, None])
    out /= np.bincount(pieces.owner, weights=weights, minlength=pieces.n_inputs)[:, None, None]
    return out


def length_report(seqs: list[list[int]], rule: LongInputRule, n_cached: int) -> EncodeReport:
    """What `rule` does to the token sequences `seqs` (windows encoded: filled in by the caller).

    Args:
        seqs: n token-id sequences.
        rule: the resolved settings (cap and policy).
        n_cached: how many of them the disk cache served.
    """
    cap, policy = rule.cap, rule.policy
    over = [i for i, s in enumerate(seqs) if len(s) > cap]
    cut = sum(len(seqs[i]) - cap for i in over) if policy in ("middle_out", "truncate") else 0
    longest = max((len(s) for s in seqs), default=0)
    return EncodeReport(n_inputs=len(seqs), max_length=cap, policy=policy, n_over_window=len(over),
                        n_tokens_cut=cut, over_window=over, n_cached=n_cached, longest=longest)  # fmt: skip
