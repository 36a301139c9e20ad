"""Turning texts into padded, bucketed batches (shared by extraction and generation).

Shapes are bucketed (powers of two, capped at the model window) so that `jax.jit` compiles a
handful of programs whatever the input lengths. Padding may be on either side: positions are
derived from the validity mask (`cumsum - 1`), so a left-padded and a right-padded row give the
same states for their real tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

MIN_BUCKET = 16

Message = dict  # {"role": ..., "content": ...}


def bucket_length(n: int, cap: int | None = None, minimum: int = MIN_BUCKET) -> int:
    """Smallest power of two >= n (at least ``minimum``), capped at ``cap``.

    Args:
        n: the length to fit, in tokens.
        cap: the largest length allowed (>= n required), or None for no cap.
        minimum: the smallest bucket.

    Returns:
        The padded length, in tokens.

    Raises:
        ValueError: ``n`` exceeds ``cap``.
    """
    b = max(minimum, 1 << max(0, int(n - 1).bit_length()))
    if cap is not None:
        if n > cap:
            raise ValueError(f"length {n} exceeds the cap {cap}")
        b = min(b, cap)
    return b


def batch_bucket(n: int, batch_size: int) -> int:
    """Rows of a batch: the next power of two >= n, at most batch_size."""
    return min(batch_size, 1 << max(0, int(n - 1).bit_length()))


def pad_batch(seqs: Sequence[Sequence[int]], length: int, rows: int, pad_id: int = 0, side: str = "right"):
    """Padded ids (rows, length) int32 and valid (rows, length) bool; extra rows are fully padded.

    Args:
        seqs: the token-id sequences (at most ``rows``, each at most ``length`` tokens).
        length: the padded length, in tokens.
        rows: the padded batch size.
        pad_id: the id that fills the padding.
        side: where the padding goes: "right" or "left".

    Returns:
        (ids, valid): ids (rows, length) int32, valid (rows, length) bool (True on real tokens).

    Raises:
        ValueError: a sequence longer than ``length``, or another ``side``.
    """
    ids = np.full((rows, length), pad_id, np.int32)
    valid = np.zeros((rows, length), bool)
    for i, s in enumerate(seqs):
        n = len(s)
        if n > length:
            raise ValueError(f"sequence {i} has {n} tokens > padded length {length}")
        if side == "right":
            ids[i, :n], valid[i, :n] = s, True
        elif side == "left":
            ids[i, length - n :], valid[i, length - n :] = s, True
        else:
            raise ValueError(f"padding side must be 'left' or 'right', not {side!r}")
    return ids, valid


def positions_from_valid(valid, offset=0):
    """(B, T) bool -> positions (B, T) int32: 0, 1, ... over the real tokens (pads get a clipped value)."""
    return jnp.maximum(jnp.cumsum(valid.astype(jnp.int32), axis=1) - 1, 0) + offset


def pool_weights(valid, pooling: str):
    """(B, T) bool -> (B, 1, T) float32 weights for "last", "mean" or "cls" pooling."""
    v = valid.astype(jnp.float32)
    t = valid.shape[1]
    idx = jnp.arange(t)
    if pooling == "last":
        w = idx[None, :] == jnp.argmax(jnp.where(valid, idx[None, :], -1), axis=1)[:, None]
    elif pooling == "cls":
        w = idx[None, :] == jnp.argmax(valid, axis=1)[:, None]
    elif pooling == "mean":
        return (v / jnp.maximum(v.sum(1, keepdims=True), 1.0))[:, None, :]
    else:
        raise ValueError(f"pooling must be 'last', 'mean' or 'cls', not {pooling!r}")
    return w.astype(jnp.float32)[:, None, :]


def resolve_layers(layers, n_hidden: int) -> tuple[tuple[int, ...], bool]:
    """Layer indices, an int or a sequence (negative allowed, HF hidden_states indexing) -> (tuple, squeeze?).

    The tuple holds non-negative indices; squeeze is True for an int.
    """
    squeeze = isinstance(layers, (int, np.integer))
    seq = (int(layers),) if squeeze else tuple(int(x) for x in layers)
    out = []
    for x in seq:
        y = x + n_hidden if x < 0 else x
        if not 0 <= y < n_hidden:
            raise ValueError(f"layer {x} out of range: the model has {n_hidden} hidden states (0..{n_hidden - 1})")
        out.append(y)
    return tuple(out), squeeze


def format_puaudit(question, answer: str) -> str:
    """PUAudit's decoder input: ``"<|user|>" + x + "<|assistant|>" + o`` (chat turns of x are joined)."""
    if not isinstance(question, str):
        question = "\n".join(m["content"] if isinstance(m, dict) else str(m) for m in question)
    return "<|user|>" + question + "<|assistant|>" + answer


def format_chat(question, answer: str | None = None) -> list[Message]:
    """(x, o) as chat messages: x a string or a list of messages, o the assistant turn."""
    msgs = [{"role": "user", "content": question}] if isinstance(question, str) else list(question)
    if answer is not None:
        msgs = msgs + [{"role": "assistant", "content": answer}]
    return msgs


def tokenize_inputs(tokenizer, inputs, add_generation_prompt: bool = False, special: bool = True) -> list[list[int]]:
    """Token ids of each input: a string, a list of chat messages or token ids.

    Strings -> ids; chat message lists -> the chat template rendered, then ids without extra special
    tokens (as transformers does). The texts are tokenised in two batches (strings, rendered chats), in
    parallel by the backend.

    Args:
        tokenizer: the model's tokenizer, or None (then every input must be token ids).
        inputs: the inputs, each a string, a list of ``{"role", "content"}`` messages, or token ids.
        add_generation_prompt: passed to the chat template (append the assistant's turn header).
        special: whether strings get the tokenizer's special tokens.

    Returns:
        One list of token ids per input, in order.

    Raises:
        ValueError: an input that is not token ids when there is no tokenizer.
        TypeError: an input of another kind.
    """
    out: list = [None] * len(inputs)
    texts: dict[bool, list[tuple[int, str]]] = {True: [], False: []}  # add special tokens -> (position, text)
    for k, x in enumerate(inputs):
        if tokenizer is None and not _is_ids(x):
            raise ValueError("this model has no tokenizer files; pass token ids instead")
        if isinstance(x, str):
            texts[special].append((k, x))
        elif isinstance(x, (list, tuple)) and all(isinstance(m, dict) for m in x):
            rendered = tokenizer.apply_chat_template(list(x), add_generation_prompt=add_generation_prompt)
            texts[False].append((k, rendered))
        elif _is_ids(x):
            out[k] = [int(t) for t in x]
        else:
            kind = type(x).__name__
            raise TypeError(f"input {k}: expected a string, a list of chat messages or token ids, got {kind}")
    for add, batch in texts.items():
        if batch:
            for (k, _), row in zip(batch, _encode_texts(tokenizer, [t for _, t in batch], add)):
                out[k] = row
    return out


def _encode_texts(tokenizer, texts: list[str], add_special_tokens: bool) -> list[list[int]]:
    """Ids of ``texts``: one ``encode_batch`` call where the tokenizer has it (a stand-in may not)."""
    if hasattr(tokenizer, "encode_batch"):
        return tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)
    return [tokenizer.encode(t, add_special_tokens=add_special_tokens) for t in texts]


def _is_ids(x) -> bool:
    return isinstance(x, (list, tuple, np.ndarray)) and all(isinstance(t, (int, np.integer)) for t in x)
