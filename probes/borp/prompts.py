"""1. Prompts of contrastive probing (BoRP §3.2 Phase 1, §3.3, §3.4).

A dialogue (chat messages, the rated response last) is the shared prefix; a probe is a pair of
suffix prompts: the same user instruction followed by a positive or a negative verdict
("Performance is Excellent" / "Performance is Terrible", the paper's generic wording, §3.2 Phase 1).
`blind_probe()` is the generic blind prompt, `rubric_probe(criterion, rubric)` adds a
behaviour-oriented rubric to the instruction (§3.3 "Refined Extraction"); the verdicts are the
same, so blind vs rubric differ only in the instruction. `compress_middle_out` drops middle turns
of long histories (§3.4).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["ProbePrompt", "blind_probe", "rubric_probe", "render_prefix", "render_suffix", "compress_middle_out"]


POSITIVE_VERDICT = "Performance is Excellent"
NEGATIVE_VERDICT = "Performance is Terrible"
BLIND_INSTRUCTION = "Evaluate the assistant's performance in the conversation above."
RUBRIC_INSTRUCTION = (
    "Evaluate the assistant's last response in the conversation above on {criterion}, "
    "using this rubric (score: behaviour):\n{rubric}\nThen give your verdict."
)


@dataclass(frozen=True)
class ProbePrompt:
    """A contrastive probe: one user instruction, a positive and a negative verdict.

    scale: (low, high) of the rubric's scores (predictions are clipped to it).
    """

    name: str
    instruction: str
    positive: str = POSITIVE_VERDICT
    negative: str = NEGATIVE_VERDICT
    scale: tuple[float, float] = (1.0, 5.0)


def blind_probe(scale=(1.0, 5.0)) -> ProbePrompt:
    """The generic blind-probe prompt (PUAudit §3.2 Phase 1: "Performance is Excellent/Terrible")."""
    return ProbePrompt("blind", BLIND_INSTRUCTION, scale=tuple(map(float, scale)))


def rubric_probe(criterion: str, rubric: str | dict, scale=(1.0, 5.0), name: str | None = None) -> ProbePrompt:
    """A rubric prompt (BoRP §3.3 "Refined Extraction"): the blind verdicts after a rubric instruction.

    Args:
        criterion: what the rubric rates (e.g. "overall quality").
        rubric: text, or {score: description} (written highest score first).
        scale: (low, high) of the scores (predictions are clipped to it).
        name: the probe's name (default "rubric:<criterion>").
    """
    if isinstance(rubric, dict):
        rubric = "\n".join(f"{k}: {v}" for k, v in sorted(rubric.items(), key=lambda kv: -float(kv[0])))
    return ProbePrompt(
        name or f"rubric:{criterion}",
        RUBRIC_INSTRUCTION.format(criterion=criterion, rubric=rubric),
        scale=tuple(map(float, scale)),
    )


def _has_template(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def render_prefix(tokenizer, messages: Sequence[dict]) -> str:
    """The dialogue rendered as text (no generation prompt).

    With the model's chat template, or as PUAudit-style ``"<|role|>content"`` segments for tokenizers without a
    template.
    """
    if _has_template(tokenizer):
        return tokenizer.apply_chat_template(list(messages), add_generation_prompt=False)
    return "".join(f"<|{m['role']}|>{m['content']}" for m in messages)


def render_suffix(tokenizer, messages: Sequence[dict], instruction: str, verdict: str) -> str:
    """Text that continues `render_prefix(messages)` with the instruction and the verdict.

    The instruction is a user turn and the verdict the start of the assistant turn (no end-of-turn token:
    the verdict's last token is the probed position).

    Args:
        tokenizer: the model's tokenizer (its chat template, if any, renders the turns).
        messages: the dialogue, chat messages with the rated response last.
        instruction: the probe's user instruction.
        verdict: the positive or negative verdict that opens the assistant turn.
    """
    if _has_template(tokenizer):
        prefix = tokenizer.apply_chat_template(list(messages), add_generation_prompt=False)
        full = tokenizer.apply_chat_template(
            list(messages) + [{"role": "user", "content": instruction}], add_generation_prompt=True
        )
        if not full.startswith(prefix):
            raise ValueError("the chat template does not render the dialogue as a prefix of dialogue + instruction")
        return full[len(prefix) :] + verdict
    return f"<|user|>{instruction}<|assistant|>{verdict}"


def compress_middle_out(
    messages: Sequence[dict], max_tokens: int, count: Callable[[str], int] | None = None, keep_head: int = 1
) -> tuple[list[dict], int]:
    """Middle-out context compression (PUAudit §3.4): drop whole turns from the middle of the history.

    Turns are dropped until the dialogue fits `max_tokens` (counted by `count`, default whitespace words).
    System messages, the first `keep_head` other turns and the last turn (the rated response) are kept;
    the oldest turns after the head go first (recency bias).

    Args:
        messages: the dialogue, chat messages with the rated response last.
        max_tokens: the size the dialogue must fit (in `count`'s units).
        count: text -> its size (default: whitespace words).
        keep_head: the first non-system turns always kept.

    Returns:
        (messages kept, in order; the number of turns dropped).
    """
    count = count or (lambda s: len(s.split()))
    msgs = list(messages)
    sizes = [count(m["content"]) for m in msgs]
    head = [i for i, m in enumerate(msgs) if m["role"] != "system"][:keep_head]
    protected = {i for i, m in enumerate(msgs) if m["role"] == "system"} | set(head) | {len(msgs) - 1}
    droppable = [i for i in range(len(msgs)) if i not in protected]
    dropped = set()
    total = sum(sizes)
    for i in droppable:
        if total <= max_tokens:
            break
        dropped.add(i)
        total -= sizes[i]
    return [m for i, m in enumerate(msgs) if i not in dropped], len(dropped)
