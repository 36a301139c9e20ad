"""Judge-side evidence: what the judge itself reveals about where it errs, as features of each row.

The embedding says where a pair sits; the judge's own tells say where it errs: a verdict that changes
when the responses swap places (Wang et al. 2023, "Large Language Models are not Fair Evaluators"),
a low confidence, disagreement with other judges, and a taste for the longer, better-formatted
answer (Chatbot Arena's style control). Every feature is signed by the judge's verdict, so it reads
"the judge picked the longer one", "its swapped verdict agrees", "judge k agrees with it".

=============================  ===============================================================
feature                        value on a row whose judge said A or B (0 on the other rows)
=============================  ===============================================================
``style:<count>``              s (a - b) / (a + b) of the two responses' counts (tokens,
                               headers, list_items, bold, code_blocks;
                               :mod:`puaudit_jax.datasets.style`), s = +1 for A, -1 for B
``swapped:agrees``             +1 the swapped-order verdict is the same, -1 the other side,
                               0 a tie or missing
``swapped:missing``            1 where ``judge_swapped`` is missing (only when some are)
``confidence``                 ``judge_confidence`` minus its mean; 0 where missing
``confidence:missing``         1 where ``judge_confidence`` is missing (only when some are)
``others:agree``               the mean over the other judges with an A or B verdict of +1 (it
                               agrees) / -1 (it chose the other side); 0 where none has one
=============================  ===============================================================

Kinds (``--evidence``): ``embedding`` (the audit's PU score; not computed here), ``style``,
``swapped``, ``confidence``, ``others``. A kind the data lacks, or that is switched off, is left out
and the report says why; a feature that is constant over the table (e.g. no response has a code
block) is left out too, and so is a kind present at different rates on the labelled rows and the pool
(:func:`_missing_unequally`: it would tell the model which rows a human saw).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..datasets.comparisons import other_judge_verdicts
from ..datasets.style import style_differences
from ..datasets.verdicts import MISSING, TIE, A, B
from ..quantify.sample_check import fisher_exact_p
from .names import EVIDENCE_KINDS, check_kinds  # defined with the other light names the CLI reads

__all__ = [
    "EVIDENCE_KINDS",
    "JUDGE_SIDE",
    "LABEL_FREE",
    "STYLE_COUNTS",
    "JudgeEvidence",
    "check_kinds",
    "judge_evidence",
    "label_free_score",
    "preference_certainty",
    "signed_agreement",
]

JUDGE_SIDE = ("style", "swapped", "confidence", "others")
STYLE_COUNTS = ("tokens", "headers", "list_items", "bold", "code_blocks")  # chars would repeat tokens


@dataclass(frozen=True)
class JudgeEvidence:
    """The judge-side features of every row of a table.

    Attributes:
        features: (n, p) float64, one column per name (module docstring), 0 on rows whose judge
            verdict is not A or B.
        names: (p,) feature names, e.g. "style:tokens", "swapped:agrees", "others:gpt4".
        kinds: (p,) the kind of each feature ("style", "swapped", "confidence", "others").
        rows: kind -> rows (with an A or B verdict) where that evidence is present.
        skipped: kind -> why it is not used (switched off, absent from the data, constant).
    """

    features: np.ndarray
    names: tuple[str, ...]
    kinds: tuple[str, ...]
    rows: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)

    def select(self, kinds: Sequence[str]) -> np.ndarray:
        """(p,) bool: the columns whose kind is in ``kinds``."""
        return np.isin(np.asarray(self.kinds, dtype=object), list(kinds))


def _sign(judge: np.ndarray) -> np.ndarray:
    return np.where(judge == A, 1.0, np.where(judge == B, -1.0, 0.0))


def signed_agreement(judge: np.ndarray, other: np.ndarray) -> np.ndarray:
    """+1 same side, -1 the other side, 0 a tie or missing (or no A/B judge verdict)."""
    decided = np.isin(other, (A, B)) & np.isin(judge, (A, B))
    return np.where(decided, np.where(other == judge, 1.0, -1.0), 0.0)


def _style(table: pd.DataFrame, sign: np.ndarray) -> tuple[list, list]:
    diff = style_differences(table)
    return [f"style:{c}" for c in STYLE_COUNTS], [sign * diff[c].to_numpy(float) for c in STYLE_COUNTS]


def _swapped(table: pd.DataFrame, judge: np.ndarray, decided: np.ndarray) -> tuple[list, list, np.ndarray]:
    swapped = table["judge_swapped"].to_numpy(dtype=object)
    present = decided & np.isin(swapped, (A, B, TIE))
    names, cols = ["swapped:agrees"], [signed_agreement(judge, swapped)]
    if (decided & ~present).any():
        names.append("swapped:missing")
        cols.append((decided & (swapped == MISSING)).astype(float))
    return names, cols, present


def _confidence(table: pd.DataFrame, decided: np.ndarray) -> tuple[list, list, np.ndarray]:
    conf = table["judge_confidence"].to_numpy(float)
    present = decided & np.isfinite(conf)
    mean = conf[present].mean() if present.any() else 0.0
    names, cols = ["confidence"], [np.where(present, conf - mean, 0.0)]
    if (decided & ~present).any():
        names.append("confidence:missing")
        cols.append((decided & ~present).astype(float))
    return names, cols, present


def _others(table: pd.DataFrame, judge: np.ndarray, decided: np.ndarray, columns: Sequence[str]):
    """One feature, the mean agreement: one weight for k judges (per-judge weights need far more labels)."""
    verdicts = other_judge_verdicts(table, columns, source="--other-judges")
    present = decided & np.isin(verdicts, (A, B, TIE)).any(axis=1)
    return ["others:agree"], [_mean_agreement(judge, verdicts)], present


def _mean_agreement(judge: np.ndarray, verdicts: np.ndarray) -> np.ndarray:
    """(n,) the mean of :func:`signed_agreement` over the (n, k) ``verdicts`` with an A or B (0 where none has)."""
    agree = np.column_stack([signed_agreement(judge, verdicts[:, k]) for k in range(verdicts.shape[1])])
    n = np.isin(verdicts, (A, B)).sum(axis=1)
    return np.divide(agree.sum(axis=1), n, out=np.zeros(len(judge)), where=n > 0)


#: The start of the reason an evidence kind is left out for missingness that differs with the label.
UNEQUAL = "missing unequally"
LEAK_LEVEL = 1e-3  # the two-sided Fisher test's level: a difference this unlikely by chance is not chance


def _missing_unequally(present: np.ndarray, decided: np.ndarray, labelled: np.ndarray | None) -> str | None:
    """Why a kind must be left out when it is present at different rates on the labelled rows and the pool.

    Evidence filled where a human looked and missing elsewhere tells the model which rows are labelled:
    its weights, fitted on the labelled rows, then read the pool through a feature they never saw vary,
    and PPI++'s correction, which assumes the same features on both sides, no longer removes the bias
    (once seen as an agreement interval of [0.492, 0.605] around a true 0.675). A two-sided Fisher exact test
    of the 2 x 2 table (present or not, labelled or not) below :data:`LEAK_LEVEL` leaves the kind out.
    """
    if labelled is None:
        return None
    lab, pool = decided & labelled, decided & ~labelled
    if not lab.any() or not pool.any():
        return None
    table = [[int((present & lab).sum()), int((~present & lab).sum())],
             [int((present & pool).sum()), int((~present & pool).sum())]]  # fmt: skip
    if table[0][1] + table[1][1] == 0:  # present everywhere
        return None
    p_value = fisher_exact_p(table)
    if p_value >= LEAK_LEVEL:
        return None
    share_lab, share_pool = table[0][0] / lab.sum(), table[1][0] / pool.sum()
    return (f"{UNEQUAL}: present on {share_lab:.0%} of the labelled rows and {share_pool:.0%} of the pool "
            f"(Fisher p = {p_value:.1e}); used, it would tell the model which rows a human saw and bias the "
            "audit")  # fmt: skip


def _gather(table, judge, decided, kinds, other_judges) -> tuple[list, list, list, dict, dict]:
    names, kinds_of, cols, rows, skipped = [], [], [], {}, {}
    labelled = np.isin(table["human"].to_numpy(dtype=object), (A, B, TIE)) if "human" in table.columns else None
    for kind in JUDGE_SIDE:
        if kind not in kinds:
            skipped[kind] = "switched off"
            continue
        if kind == "style":
            n, c = _style(table, _sign(judge))
            present = decided
        elif kind == "swapped":
            if "judge_swapped" not in table.columns:
                skipped[kind] = "no judge_swapped column"
                continue
            n, c, present = _swapped(table, judge, decided)
        elif kind == "confidence":
            if "judge_confidence" not in table.columns:
                skipped[kind] = "no judge_confidence column"
                continue
            n, c, present = _confidence(table, decided)
        else:
            if not other_judges:
                skipped[kind] = "no other judges named (--other-judges)"
                continue
            n, c, present = _others(table, judge, decided, other_judges)
        count = int(present.sum())
        if count == 0:
            skipped[kind] = "no row has it"
            continue
        unequal = _missing_unequally(present, decided, labelled)
        if unequal is not None:
            skipped[kind] = unequal
            continue
        names += n
        cols += c
        kinds_of += [kind] * len(n)
        rows[kind] = count
    return names, kinds_of, cols, rows, skipped


def judge_evidence(table: pd.DataFrame, kinds: Sequence[str] = JUDGE_SIDE, other_judges: Sequence[str] = ()):
    """The judge-side features of every row of ``table`` (module docstring).

    Args:
        table: a validated comparison table, n rows (``judge_swapped`` / ``judge_confidence`` and the
            ``other_judges`` columns are read when present).
        kinds: the kinds to compute (of :data:`JUDGE_SIDE`; "embedding" is ignored here).
        other_judges: the columns holding other judges' verdicts.

    Returns:
        :class:`JudgeEvidence` with features (n, p).

    Raises:
        ValueError: an unknown kind; ComparisonValidationError: a bad other-judge column (named).
    """
    kinds = check_kinds(kinds)
    judge = table["judge"].to_numpy(dtype=object)
    decided = np.isin(judge, (A, B))
    names, kinds_of, cols, rows, skipped = _gather(table, judge, decided, kinds, tuple(other_judges))
    X = np.column_stack(cols) if cols else np.zeros((len(table), 0))
    constant = np.ptp(X[decided], axis=0) == 0 if decided.any() else np.ones(X.shape[1], bool)
    for kind in set(kinds_of):
        own = np.asarray(kinds_of, dtype=object) == kind
        if constant[own].all():
            skipped[kind] = "the same value on every row"
            rows.pop(kind, None)
    keep = ~constant
    X = X[:, keep]
    return JudgeEvidence(
        np.where(decided[:, None], X, 0.0),
        tuple(np.asarray(names, dtype=object)[keep]),
        tuple(np.asarray(kinds_of, dtype=object)[keep]),
        rows,
        skipped,
    )


#: The evidence a label-free score reads: what the judge reveals without any label to weigh it.
LABEL_FREE = ("swapped", "confidence", "others")


def preference_certainty(confidence: np.ndarray) -> np.ndarray:
    """(n,) 1 - H(c) / log 2 of the judge's probability c of its verdict: 0 at c = 1/2, 1 at c = 0 or 1.

    SCOPE's bidirectional preference entropy (arXiv 2602.13110) is H of the preference averaged over both
    presentation orders; ``judge_confidence`` holds that average where the judge gives both orders
    (``puaudit judge``'s local and logprob judges), so this is its certainty. NaN stays NaN.
    """
    c = np.clip(np.asarray(confidence, np.float64), 1e-12, 1 - 1e-12)
    return 1.0 + (c * np.log2(c) + (1 - c) * np.log2(1 - c))


def label_free_score(table: pd.DataFrame, other_judges: Sequence[str] = (), kinds: Sequence[str] = LABEL_FREE):
    """(n,) a confidence in the judge's verdict that no label fitted: the sum of the judge's agreements.

    Each present kind adds one term in [-1, 1], 0 where its value is missing: the swapped-order verdict
    (+1 the same side, -1 the other side, 0 a tie), the mean agreement of the other judges with an A or B
    verdict, and :func:`preference_certainty` of ``judge_confidence``. Equal weights: without labels there
    is nothing to weigh them by, and every label is left to test the thresholds. A table with none of them
    scores 0 everywhere (one level: the whole pool). Rows whose judge picked no side get -inf.

    Args:
        table: a validated comparison table, n rows.
        other_judges: the columns of other judges' verdicts.
        kinds: the kinds to read, of :data:`LABEL_FREE` (those the table lacks are skipped).

    Returns:
        (n,) float64 scores, larger = the judge's verdict more likely right.
    """
    judge = table["judge"].to_numpy(dtype=object)
    score = np.zeros(len(table))
    if "swapped" in kinds and "judge_swapped" in table.columns:
        score += signed_agreement(judge, table["judge_swapped"].to_numpy(dtype=object))
    if "others" in kinds and other_judges:
        score += _mean_agreement(judge, other_judge_verdicts(table, other_judges, source="--other-judges"))
    if "confidence" in kinds and "judge_confidence" in table.columns:
        certainty = preference_certainty(pd.to_numeric(table["judge_confidence"], errors="coerce").to_numpy(float))
        score += np.where(np.isfinite(certainty), certainty, 0.0)
    return np.where(np.isin(judge, (A, B)), score, -np.inf)
