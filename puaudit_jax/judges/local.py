r"""In-process judge and generator on a Flax decoder port (default: SmolLM2-135M-Instruct).

:class:`LocalJudge` reads the paper's Figure 10 prompt (system = instruction, user = the
question / Assistant A / Assistant B block) and takes its verdict from the next-token
log-probabilities of "A", "B" and "C" after an assistant turn that starts with ``[[`` (where the
verdict letter goes; in the SmolLM2 tokenizer ``[[`` is one token, 32803, and "A"/"B"/"C" are the
single tokens 49/50/51, distinct from " A" = 330). It skips the explanation the prompt asks for
(optional greedy explanation with ``explain=True``). Both presentation orders are scored, (A, B)
and (B, A); the (B, A) log-probabilities are swapped back and the two orders averaged. The
verdict is the sign of the margin logp(A) - logp(B) (nats; per order for ``verdict_ab`` /
``verdict_ba``, averaged for the final winner); a tie when ``|margin|`` < ``tie_margin`` (default 0:
never), or, with ``c_is_tie=True``, when "C" is more likely than both letters (a 135M model puts
much mass on "C" whatever the pair, so this is off by default). Position consistency = the two
per-order winners agree after swapping back.

Question type (``predict_type=True``): the Figure 10 prompt asks for ``[[TYPE:X]]``, X in A..F,
after the verdict. The judge writes its (averaged) verdict line and opens the type line, i.e. the
order-(A, B) prompt continued with ``X]]\n[[TYPE:`` (X = A | B | C for a tie), and takes the most
likely of the next tokens "A".."F" (one more forward pass per item; ``details["logp_type"]``).

Cost: one forward pass per order. The instruction (the system turn, ~400 tokens) is a shared
prefix whose KV cache is computed once; the rest is padded to a multiple of ``bucket`` tokens
(128: few jit shapes, little padding). Log-probabilities are cached on disk by content hash of
(model fingerprint, token ids), so an interrupted run resumes where it stopped.

Long prompts: the model window (8192 for SmolLM2) or ``max_length`` caps the prompt. With
``long_inputs="middle_out"`` (default) the responses' middles are cut (the longer one first) and
replaced by ``[... N tokens omitted ...]``; the count is in ``Verdict.details["omitted_tokens"]``.
``long_inputs="error"`` raises instead. Nothing is shortened silently.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from probes.extract import broadcast_prefix_cache
from probes.models import load_pretrained
from probes.models.batching import (
    batch_bucket,
    bucket_length,
    pad_batch,
    pool_weights,
    positions_from_valid,
    tokenize_inputs,
)
from probes.models.generate import candidate_ids, greedy_generate
from probes.models.llama import Llama
from probes.models.pretrained import Pretrained, build_model

from ..datasets.verdicts import MISSING, TIE, A, B
from .base import (
    NO_MARGIN,
    OK,
    QUESTION_TYPES,
    UNPARSED,
    ResponseCache,
    Verdict,
    content_key,
    default_cache_dir,
    judge_messages,
    progress_iter,
    two_order_verdict,
)

VERDICT_LETTER = {A: "A", B: "B", TIE: "C"}  # verdict -> the paper's prompt's letter ([[C]] = tie)
TYPE_CONTINUATION = "{}]]\n[[TYPE:"  # after the assistant prefix "[[": the verdict line, then the type line


@functools.cache
def _prefix_fn(config, dtype):
    """jit: (params, ids (1, P), valid (1, P)) -> the prefix's KV cache (P slots)."""
    model = build_model(config, dtype, return_cache=True)
    return jax.jit(lambda params, ids, valid: model.apply(params, ids, positions_from_valid(valid), valid)["cache"])


@functools.cache
def _suffix_logprobs_fn(config, dtype):
    """The jitted log p(cand | prefix + suffix) at each row's last real suffix token: (B, K) float32.

    Its arguments: (params, prefix cache (1 row, P slots), prefix length, ids (B, S), valid (B, S), cand (K,)).
    """
    model = build_model(config, dtype)

    def fn(params, prefix_cache, prefix_len, ids, valid, cand):
        b, s = ids.shape
        p = prefix_cache["k"].shape[2]
        cache = broadcast_prefix_cache(prefix_cache, b, s)
        out = model.apply(
            params, ids, positions_from_valid(valid, offset=prefix_len), valid, cache=cache, write_index=p
        )
        w = pool_weights(valid, "last")[:, 0, :]  # (B, S)
        h = jnp.einsum("bt,btd->bd", w, out["last"].astype(jnp.float32)).astype(out["last"].dtype)
        logp = jax.nn.log_softmax(model.apply(params, h, method=Llama.lm_logits).astype(jnp.float32), axis=-1)
        return logp[:, cand]

    return jax.jit(fn)


def _round_up(n: int, step: int) -> int:
    return max(step, -(-n // step) * step)


class LocalJudge:
    """Seed Figure 10 judge on an in-process decoder; verdict from next-token log-probabilities.

    In both presentation orders (module docstring). ``judge_many`` returns one :class:`Verdict` per
    item with ``details`` = {verdict_ab, verdict_ba (in original labels), logp_ab (A, B, C),
    logp_ba (swapped back), margin (nats, averaged logp(A) - logp(B)), consistent, omitted_tokens,
    prompt_tokens, logp_type (A..F, with ``predict_type``)}. ``question_type`` is the most likely
    ``[[TYPE:X]]`` letter with ``predict_type=True``, else None.
    """

    def __init__(
        self,
        model: str = "smollm2",
        *,
        pre: Pretrained | None = None,
        max_length: int | None = None,
        long_inputs: str = "middle_out",
        tie_margin: float = 0.0,
        explain: bool = False,
        explain_tokens: int = 128,
        cache_dir=None,
        bucket: int = 128,
        batch_size: int = 1,
        assistant_prefix: str = "[[",
        c_is_tie: bool = False,
        predict_type: bool = False,
    ):
        if long_inputs not in ("middle_out", "error"):
            raise ValueError("long_inputs must be 'middle_out' or 'error'")
        self.pre = pre if pre is not None else load_pretrained(model)
        cfg = self.pre.config
        if not cfg.is_decoder or cfg.head != "lm":
            raise ValueError("LocalJudge needs a decoder with a language-model head")
        self.name = f"local:{model}"
        self.max_length = min(max_length or cfg.window, cfg.window)
        self.long_inputs, self.tie_margin, self.c_is_tie = long_inputs, float(tie_margin), bool(c_is_tie)
        self.explain, self.explain_tokens = explain, int(explain_tokens)
        self.bucket, self.batch_size, self.assistant_prefix = int(bucket), int(batch_size), assistant_prefix
        self.cand = candidate_ids(self.pre, ["A", "B", "C"])
        self.predict_type = bool(predict_type)
        self.type_cand = candidate_ids(self.pre, list(QUESTION_TYPES))
        # room the type continuation "X]]\n[[TYPE:" needs beyond the verdict prompt
        self._type_tokens = len(self.pre.tokenizer.encode(TYPE_CONTINUATION.format("A"), add_special_tokens=False))
        self.cache = (
            None
            if cache_dir is False
            else ResponseCache((default_cache_dir() / "local") if cache_dir is None else cache_dir)
        )
        self._prefix = None
        self.stats = {"forward_passes": 0, "cache_hits": 0, "forward_seconds": 0.0}

    # -- prompts ---------------------------------------------------------------------------------
    def prompt_ids(self, question: str, response_a: str, response_b: str, continuation: str = "") -> list[int]:
        """Token ids of the chat-templated Figure 10 prompt + the assistant prefix ``[[`` (+ continuation).

        Args:
            question: the user question (the judge prompt's question text).
            response_a: the answer shown as assistant A.
            response_b: the answer shown as assistant B.
            continuation: text appended after the assistant prefix.
        """
        tok = self.pre.tokenizer
        text = tok.apply_chat_template(judge_messages(question, response_a, response_b), add_generation_prompt=True)
        return tok.encode(text + self.assistant_prefix + continuation, add_special_tokens=False)

    def type_prompt_ids(self, question: str, response_a: str, response_b: str, verdict: str) -> list[int]:
        r"""The prompt with the verdict line written and the type line opened: ... ``[[X]]\n[[TYPE:``.

        Args:
            question: the user question (the judge prompt's question text).
            response_a: the answer shown as assistant A.
            response_b: the answer shown as assistant B.
            verdict: the verdict written ("A", "B" or "tie", as its letter A / B / C).
        """
        return self.prompt_ids(question, response_a, response_b, TYPE_CONTINUATION.format(VERDICT_LETTER[verdict]))

    def _fit(self, question: str, a: str, b: str) -> tuple[str, str, int]:
        """Middle-out the responses until the prompt fits ``max_length``: (a, b, omitted tokens).

        The type continuation counts too, when predicted.
        """
        limit = self.max_length - (self._type_tokens if self.predict_type else 0)
        cap = f"max_length {self.max_length}" + (
            f" less {self._type_tokens} tokens for the type line" if self.predict_type else ""
        )
        n = len(self.prompt_ids(question, a, b))
        if n <= limit:
            return a, b, 0
        if self.long_inputs == "error":
            raise ValueError(f"judge prompt has {n} tokens > {cap}")
        tok = self.pre.tokenizer
        ta, tb = tok.encode(a, add_special_tokens=False), tok.encode(b, add_special_tokens=False)
        excess = n - limit + 32  # 32: room for the two omission markers
        for _ in range(4):
            la, lb = len(ta), len(tb)
            if la + lb <= excess:
                raise ValueError(f"judge prompt has {n} tokens; the question alone exceeds {cap}")
            cut_a = int(np.ceil(excess * la / (la + lb)))
            cut_b = excess - cut_a

            def cut(ids, k):
                if k <= 0:
                    return tok.decode(ids), 0
                head = (len(ids) - k) // 2
                return (tok.decode(ids[:head]) + f"\n[... {k} tokens omitted ...]\n" + tok.decode(ids[head + k :])), k

            sa, ka = cut(ta, cut_a)
            sb, kb = cut(tb, cut_b)
            m = len(self.prompt_ids(question, sa, sb))
            if m <= limit:
                return sa, sb, ka + kb
            excess += m - limit + 16
        raise ValueError(f"could not fit the judge prompt within {cap}")

    # -- scoring ---------------------------------------------------------------------------------
    def _prefix_state(self):
        """(prefix ids, KV cache) of the system turn, computed once."""
        if self._prefix is None:
            tok = self.pre.tokenizer
            sys_only = [judge_messages("", "", "")[0]]
            ids = tok.encode(tok.apply_chat_template(sys_only, add_generation_prompt=False), add_special_tokens=False)
            padded, valid = pad_batch([ids], bucket_length(len(ids)), 1)
            cache = _prefix_fn(self.pre.config, self.pre.dtype)(
                self.pre.params, jnp.asarray(padded), jnp.asarray(valid)
            )
            self._prefix = (ids, cache)
        return self._prefix

    def order_logprobs(self, seqs: Sequence[list[int]], *, progress: bool = False) -> np.ndarray:
        """Log-probabilities log p("A"), log p("B"), log p("C") as the next token of each prompt: (n, 3) float32."""
        return self.next_logprobs(seqs, self.cand, progress=progress)

    def next_logprobs(self, seqs: Sequence[list[int]], cand: Sequence[int], *, progress: bool = False) -> np.ndarray:
        """Log-probabilities log p(c) of each candidate token id c as the next token of each prompt.

        Cached on disk by content.

        Args:
            seqs: the n prompts' token ids, each starting with the judge's system turn.
            cand: the candidate token ids.
            progress: whether to show a progress bar.

        Returns:
            The natural-log probabilities, shape (n, len(cand)), float32.

        Raises:
            RuntimeError: a prompt that does not start with the judge's system prefix tokens.
        """
        cand = [int(c) for c in cand]
        out = np.zeros((len(seqs), len(cand)), np.float32)
        keys = [content_key("local-judge-v1", self.pre.fingerprint, list(map(int, s)), cand) for s in seqs]
        todo = []
        for i, key in enumerate(keys):
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is not None:
                out[i] = hit["logprobs"]
                self.stats["cache_hits"] += 1
            else:
                todo.append(i)
        if not todo:
            return out
        p_ids, p_cache = self._prefix_state()
        fn = _suffix_logprobs_fn(self.pre.config, self.pre.dtype)
        cand_ids = jnp.asarray(cand, jnp.int32)
        pad_id = self.pre.tokenizer.pad_token_id or 0
        todo.sort(key=lambda i: len(seqs[i]))
        groups = [todo[i : i + self.batch_size] for i in range(0, len(todo), self.batch_size)]
        for group in progress_iter(groups, len(groups), progress, "judge forward"):
            suffixes = []
            for i in group:
                s = list(map(int, seqs[i]))
                if s[: len(p_ids)] != p_ids:
                    raise RuntimeError("prompt does not start with the judge's system prefix tokens")
                suffixes.append(s[len(p_ids) :])
            s_len = _round_up(max(map(len, suffixes)), self.bucket)
            ids, valid = pad_batch(suffixes, s_len, batch_bucket(len(group), self.batch_size), pad_id, "right")
            t = time.perf_counter()
            res = np.asarray(
                fn(self.pre.params, p_cache, jnp.int32(len(p_ids)), jnp.asarray(ids), jnp.asarray(valid), cand_ids)
            )[: len(group)]
            self.stats["forward_seconds"] += time.perf_counter() - t
            self.stats["forward_passes"] += len(group)
            for j, i in enumerate(group):
                out[i] = res[j]
                if self.cache is not None:
                    self.cache.put(keys[i], {"logprobs": [float(x) for x in res[j]], "n_tokens": len(seqs[i])})
        return out

    # -- judging ---------------------------------------------------------------------------------
    def judge(self, question: str, response_a: str, response_b: str) -> Verdict:
        """The verdict on one pair (:meth:`judge_many` of one item).

        Args:
            question: the user question (the judge prompt's question text).
            response_a: the answer shown as assistant A.
            response_b: the answer shown as assistant B.
        """
        return self.judge_many([(question, response_a, response_b)])[0]

    def judge_many(self, items: Sequence[tuple[str, str, str]], *, progress: bool = False) -> list[Verdict]:
        """Verdicts of (question, response_a, response_b) items, both orders each.

        2 forward passes per item; a third with ``predict_type``.
        """
        fitted, seqs = [], []
        for q, a, b in items:
            a2, b2, omitted = self._fit(q, a, b)
            fitted.append((q, a2, b2, omitted))
            seqs += [self.prompt_ids(q, a2, b2), self.prompt_ids(q, b2, a2)]
        lp = self.order_logprobs(seqs, progress=progress)
        lp_ab, lp_ba = lp[0::2], lp[1::2][:, [1, 0, 2]]  # swap back: original A's logp first
        rule = {"tie_margin": self.tie_margin, "c_is_tie": self.c_is_tie}
        decided = [two_order_verdict(ab, ba, **rule) for ab, ba in zip(lp_ab, lp_ba)]
        winners = [w for w, _ in decided]
        lp_type = (
            self.next_logprobs(
                [self.type_prompt_ids(q, a, b, w if w != MISSING else TIE) for (q, a, b, _), w in zip(fitted, winners)],
                self.type_cand,
                progress=progress,
            )
            if self.predict_type
            else None
        )
        verdicts = []
        for k, (q, a, b, omitted) in enumerate(fitted):
            ab, ba, (winner, details) = lp_ab[k], lp_ba[k], decided[k]
            margin = details["margin"]
            details.update(omitted_tokens=omitted, prompt_tokens=len(seqs[2 * k]))
            raw = (
                f"logp(A,B,C) order AB {np.round(ab, 3).tolist()}, order BA (swapped back) "
                f"{np.round(ba, 3).tolist()}; margin {margin:+.3f}"
            )
            if self.explain:
                text = greedy_generate(self.pre, [judge_messages(q, a, b)], self.explain_tokens)[0]
                details["explanation"] = text
                raw = text + "\n" + raw
            qtype = None
            if lp_type is not None:
                qtype = QUESTION_TYPES[int(np.argmax(lp_type[k]))]
                details["logp_type"] = lp_type[k].tolist()
                raw += f"; type {qtype} (logp A..F {np.round(lp_type[k], 3).tolist()})"
            if winner == MISSING:  # a NaN margin: no verdict to record
                verdicts.append(Verdict(None, None, raw, UNPARSED, {**details, "reason": NO_MARGIN}))
                continue
            verdicts.append(Verdict(winner, qtype, raw, OK, details))
        return verdicts


class LocalGenerator:
    """Greedy text generator on an in-process decoder (for the length / sentiment rewrites of seed Figures 8-9).

    ``generate_many(conversations)`` -> one completion string per chat (or the exception that item
    raised, e.g. a prompt longer than window - max_new_tokens). Completions are cached on disk by content
    hash of (model fingerprint, messages, max_new_tokens).
    """

    def __init__(
        self,
        model: str = "smollm2",
        *,
        pre: Pretrained | None = None,
        max_new_tokens: int = 256,
        batch_size: int = 4,
        cache_dir=None,
    ):
        self.pre = pre if pre is not None else load_pretrained(model)
        self.name = f"local:{model}"
        self.max_new_tokens, self.batch_size = int(max_new_tokens), int(batch_size)
        self.cache = (
            None
            if cache_dir is False
            else ResponseCache((default_cache_dir() / "local-gen") if cache_dir is None else cache_dir)
        )
        self.stats = {"generated": 0, "cache_hits": 0, "seconds": 0.0}

    def generate(self, messages: list[dict]) -> str:
        """The completion of one chat; raises what generating it raised."""
        res = self.generate_many([messages])[0]
        if isinstance(res, Exception):
            raise res
        return res

    def generate_many(self, conversations: Sequence[list[dict]], *, progress: bool = False) -> list[str | Exception]:
        """One completion string per chat, or the exception that item raised (cached on disk)."""
        out: list = [None] * len(conversations)
        keys = [content_key("local-gen-v1", self.pre.fingerprint, list(c), self.max_new_tokens) for c in conversations]
        cap = self.pre.config.window - self.max_new_tokens
        todo = []
        for i, c in enumerate(conversations):
            hit = self.cache.get(keys[i]) if self.cache is not None else None
            if hit is not None:
                out[i] = hit["text"]
                self.stats["cache_hits"] += 1
                continue
            n = len(tokenize_inputs(self.pre.tokenizer, [list(c)], add_generation_prompt=True)[0])
            if n > cap:
                out[i] = ValueError(f"generation prompt has {n} tokens > window - max_new_tokens = {cap}")
            else:
                todo.append((n, i))
        todo.sort()
        order = [i for _, i in todo]
        groups = [order[j : j + self.batch_size] for j in range(0, len(order), self.batch_size)]
        for group in progress_iter(groups, len(groups), progress, "generate"):
            t = time.perf_counter()
            texts = greedy_generate(
                self.pre, [list(conversations[i]) for i in group], self.max_new_tokens, batch_size=self.batch_size
            )
            self.stats["seconds"] += time.perf_counter() - t
            for i, text in zip(group, texts):
                text = text.strip()
                out[i] = text
                self.stats["generated"] += 1
                if self.cache is not None:
                    self.cache.put(keys[i], {"text": text})
        return out
