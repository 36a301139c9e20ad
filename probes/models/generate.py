"""Greedy decoding with a KV cache, and next-token log-probabilities of candidate tokens.

Prompts are left-padded to a bucketed length P; the cache has P + max_new_tokens slots. The
prefill writes slots [0, P), each decoding step one more slot; the whole loop (`lax.scan`) is
one jitted program per (batch rows, P, max_new_tokens). Prompts may be strings (tokenised with
the model's special tokens; `chat=True` wraps them as one user turn) or chat message lists
(rendered with the chat template and the generation prompt).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .batching import batch_bucket, bucket_length, pad_batch, pool_weights, positions_from_valid, tokenize_inputs
from .llama import Llama
from .pretrained import Pretrained, build_model


def _prompt_ids(pre: Pretrained, prompts, chat: bool) -> list[list[int]]:
    if chat:
        prompts = [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in prompts]
    return tokenize_inputs(pre.tokenizer, prompts, add_generation_prompt=True)


@functools.cache
def _generate_fn(config, dtype, steps: int):
    """jit: (params, ids (B, P) left-padded, valid (B, P)) -> greedy tokens (B, steps) (cut at stop ids later)."""
    model = build_model(config, dtype, return_cache=True)

    def fn(params, ids, valid):
        b, p = ids.shape
        slots = p + steps
        cache = {
            "k": jnp.zeros((config.num_layers, b, slots, config.num_kv_heads, config.head_dim), dtype),
            "v": jnp.zeros((config.num_layers, b, slots, config.num_kv_heads, config.head_dim), dtype),
            "pos": jnp.zeros((b, slots), jnp.int32),
            "valid": jnp.zeros((b, slots), bool),
        }
        positions = positions_from_valid(valid)
        out = model.apply(params, ids, positions, valid, cache=cache, write_index=0)
        logits = model.apply(params, out["last"][:, -1], method=Llama.lm_logits)
        first = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        next_pos = positions[:, -1] + 1

        def step(carry, t):
            cache, tok, pos = carry
            o = model.apply(params, tok[:, None], pos[:, None], jnp.ones((b, 1), bool), cache=cache, write_index=p + t)
            lg = model.apply(params, o["last"][:, 0], method=Llama.lm_logits)
            nxt = jnp.argmax(lg, axis=-1).astype(jnp.int32)
            return (o["cache"], nxt, pos + 1), tok

        init = (out["cache"], first, next_pos)
        _, toks = jax.lax.scan(step, init, jnp.arange(steps, dtype=jnp.int32))
        return toks.T

    return jax.jit(fn)


def greedy_generate(
    pre: Pretrained,
    prompts,
    max_new_tokens: int = 32,
    *,
    chat: bool = False,
    stop_ids=None,
    batch_size: int = 8,
    return_ids: bool = False,
):
    """Greedy continuations of ``prompts``, stopped at the tokenizer's eos (or ``stop_ids``).

    Args:
        pre: a decoder with a language-model head.
        prompts: strings, chat message lists or token-id lists (as :func:`tokenize_inputs` takes them).
        max_new_tokens: tokens generated per prompt.
        chat: whether string prompts are wrapped as one user message and rendered by the chat template.
        stop_ids: token ids that end a continuation (None: the config's and the tokenizer's eos).
        batch_size: prompts per forward pass.
        return_ids: whether to return token ids instead of decoded strings.

    Returns:
        One continuation per prompt, without the stop token: strings, or lists of token ids when
        ``return_ids``.

    Raises:
        ValueError: a model that is not a decoder with a language-model head; a prompt longer than the
            window less ``max_new_tokens``.
    """
    cfg = pre.config
    if not cfg.is_decoder or cfg.head != "lm":
        raise ValueError("greedy_generate needs a decoder with a language-model head")
    seqs = _prompt_ids(pre, list(prompts), chat)
    if stop_ids is None:
        stop_ids = set(cfg.eos_token_ids)
        if pre.tokenizer is not None and pre.tokenizer.eos_token_id is not None:
            stop_ids.add(pre.tokenizer.eos_token_id)
    steps = int(max_new_tokens)
    fn = _generate_fn(cfg, pre.dtype, steps)
    pad_id = pre.tokenizer.pad_token_id if pre.tokenizer is not None else 0
    results = []
    for i in range(0, len(seqs), batch_size):
        group = seqs[i : i + batch_size]
        p = bucket_length(max(map(len, group)), cfg.window - steps)
        ids, valid = pad_batch(group, p, batch_bucket(len(group), batch_size), pad_id or 0, "left")
        toks = np.asarray(fn(pre.params, jnp.asarray(ids), jnp.asarray(valid)))[: len(group)]
        for row in toks.tolist():
            cut = next((j for j, t in enumerate(row) if t in stop_ids), len(row))
            results.append(row[:cut])
    if return_ids:
        return results
    return [pre.tokenizer.decode(r) for r in results]


@functools.cache
def _last_logprobs_fn(config, dtype):
    model = build_model(config, dtype)

    def fn(params, ids, valid, cand):
        out = model.apply(params, ids, positions_from_valid(valid), valid)
        w = pool_weights(valid, "last")[:, 0, :]  # (B, T)
        h = jnp.einsum("bt,btd->bd", w, out["last"].astype(jnp.float32)).astype(out["last"].dtype)
        logp = jax.nn.log_softmax(model.apply(params, h, method=Llama.lm_logits), axis=-1)
        return logp[:, cand]

    return jax.jit(fn)


def candidate_ids(pre: Pretrained, candidates) -> list[int]:
    """Token id of each candidate (an int, or a string that must be a single token)."""
    out = []
    for c in candidates:
        if isinstance(c, (int, np.integer)):
            out.append(int(c))
            continue
        ids = pre.tokenizer.encode(c, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(f"candidate {c!r} is {len(ids)} tokens {ids}; pass single-token strings or ids")
        out.append(ids[0])
    return out


def next_token_logprobs(
    pre: Pretrained, prompts, candidates, *, chat: bool = False, batch_size: int = 8, max_length: int | None = None
) -> np.ndarray:
    """Log-probabilities log p(candidate | prompt) of the next token: (n_prompts, n_candidates) float32.

    Used by the local judge (e.g. candidates ["A", "B"]).

    Args:
        pre: a decoder with a language-model head.
        prompts: strings, chat message lists or token-id lists (as :func:`tokenize_inputs` takes them).
        candidates: the next tokens to score, each an id or a string that is a single token.
        chat: whether string prompts are wrapped as one user message and rendered by the chat template.
        batch_size: prompts per forward pass.
        max_length: the longest prompt allowed, in tokens (None: the model's window).

    Returns:
        The natural-log probabilities, shape (n_prompts, n_candidates), float32.

    Raises:
        ValueError: a model that is not a decoder with a language-model head, or prompts longer than
            ``max_length`` (a judge must not read a silently shortened prompt).
    """
    cfg = pre.config
    if not cfg.is_decoder or cfg.head != "lm":
        raise ValueError("next_token_logprobs needs a decoder with a language-model head")
    seqs = _prompt_ids(pre, list(prompts), chat)
    cap = max_length or cfg.window
    too_long = [i for i, s in enumerate(seqs) if len(s) > cap]
    if too_long:
        raise ValueError(f"prompts {too_long[:10]} exceed {cap} tokens")
    cand = jnp.asarray(candidate_ids(pre, candidates), jnp.int32)
    fn = _last_logprobs_fn(cfg, pre.dtype)
    pad_id = pre.tokenizer.pad_token_id if pre.tokenizer is not None else 0
    out = np.zeros((len(seqs), len(cand)), np.float32)
    for i in range(0, len(seqs), batch_size):
        group = seqs[i : i + batch_size]
        ids, valid = pad_batch(
            group, bucket_length(max(map(len, group)), cap), batch_bucket(len(group), batch_size), pad_id or 0, "right"
        )
        out[i : i + len(group)] = np.asarray(fn(pre.params, jnp.asarray(ids), jnp.asarray(valid), cand))[: len(group)]
    return out
