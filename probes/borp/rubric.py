"""6. Rubric bootstrapping (BoRP §3.2 Phase 3, Appendix A Figures 5-6).

The mined extremes (`geometry.mine_polarized`) go to a generator callable `generate(prompt) -> text`
(a teacher LLM client; `probes` never imports puaudit_jax) with a reverse-engineering prompt per
draft (ensemble over disjoint subsets), then a fusion prompt. The figures' text is lost; these
prompts follow the paper's description: reverse-engineer behaviour-oriented criteria with
observable signal features from extreme cases, then fuse several drafts into one standard.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["REVERSE_PROMPT", "FUSION_PROMPT", "bootstrap_rubric", "BootstrappedRubric", "parse_rubric"]


REVERSE_PROMPT = """You are an expert in conversation quality evaluation. Below are real conversations that \
were rated at the two extremes of "{criterion}" on a {low}-{high} scale.

=== Extremely HIGH cases ===
{high_cases}

=== Extremely LOW cases ===
{low_cases}

Reverse-engineer a detailed, behaviour-oriented scoring rubric for "{criterion}" from these cases. \
For every score from {high} down to {low}, describe the observable behaviour that earns it and list its \
signal features (concrete, checkable cues in the text). Do not describe the specific topics of the \
cases; describe behaviours that generalise.
Answer with one line per score, formatted exactly as "<score>: <criteria> (Signal features: ...)"."""

FUSION_PROMPT = """You are given {n} draft rubrics for "{criterion}" on a {low}-{high} scale, written \
independently from different samples of extreme cases.

{drafts}

Fuse them into one final standard: keep the criteria the drafts agree on, resolve conflicts in \
favour of the most specific observable behaviour, and make adjacent scores clearly distinguishable.
Answer with one line per score from {high} down to {low}, formatted exactly as \
"<score>: <criteria> (Signal features: ...)"."""


@dataclass(frozen=True)
class BootstrappedRubric:
    """The fused rubric ({score: text}), its raw text, the drafts, and every prompt sent."""

    criterion: str
    rubric: dict
    text: str
    drafts: tuple[str, ...]
    prompts: tuple[str, ...] = field(default=())


def parse_rubric(text: str, scores: Sequence[int]) -> dict:
    """{score: description} from lines "<score>: ..." (also "Score 5 -", "5." ...); missing -> ""."""
    import re

    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(?:score\s*)?\**\s*(\d+)\s*\**\s*[:.)\-]\s*(.+)$", line, flags=re.I)
        if m and int(m.group(1)) in scores and int(m.group(1)) not in out:
            out[int(m.group(1))] = m.group(2).strip()
    return {s: out.get(s, "") for s in scores}


def bootstrap_rubric(
    generate: Callable[[str], str],
    high_cases: Sequence[str],
    low_cases: Sequence[str],
    *,
    criterion: str,
    scale=(1, 5),
    n_drafts: int = 3,
    cases_per_draft: int = 5,
    seed: int = 0,
) -> BootstrappedRubric:
    """Probe-guided rubric bootstrapping: `n_drafts` reverse-engineering prompts, then one fusion prompt.

    Each draft's prompt sees a disjoint random subset of the mined high / low cases (ensemble).

    Args:
        generate: prompt -> completion (e.g. an OpenAI-compatible client's chat call).
        high_cases: texts of the mined high extremes (e.g. `mine_polarized` of the blind-probe PI).
        low_cases: texts of the mined low extremes.
        criterion: what the rubric rates.
        scale: (low, high) integer scores of the rubric.
        n_drafts: reverse-engineering drafts fused into the rubric.
        cases_per_draft: high and low cases each draft's prompt sees.
        seed: seed of the numpy Generator that deals the cases to the drafts.

    Returns:
        The `BootstrappedRubric` (fused rubric, its text, the drafts, every prompt sent).
    """
    low, high = int(scale[0]), int(scale[1])
    rng = np.random.default_rng(seed)
    hi_order, lo_order = rng.permutation(len(high_cases)), rng.permutation(len(low_cases))
    fmt = lambda cases: "\n\n".join(f"[{j + 1}] {c}" for j, c in enumerate(cases))  # noqa: E731
    prompts, drafts = [], []
    for k in range(n_drafts):
        hi = [high_cases[i] for i in hi_order[k * cases_per_draft : (k + 1) * cases_per_draft]] or list(high_cases[:1])
        lo = [low_cases[i] for i in lo_order[k * cases_per_draft : (k + 1) * cases_per_draft]] or list(low_cases[:1])
        prompt = REVERSE_PROMPT.format(criterion=criterion, low=low, high=high, high_cases=fmt(hi), low_cases=fmt(lo))
        prompts.append(prompt)
        drafts.append(generate(prompt))
    joined = "\n\n".join(f"--- Draft {k + 1} ---\n{d}" for k, d in enumerate(drafts))
    fusion = FUSION_PROMPT.format(n=n_drafts, criterion=criterion, low=low, high=high, drafts=joined)
    prompts.append(fusion)
    text = generate(fusion)
    return BootstrappedRubric(
        criterion=criterion,
        rubric=parse_rubric(text, list(range(high, low - 1, -1))),
        text=text,
        drafts=tuple(drafts),
        prompts=tuple(prompts),
    )
