"""Trust, flip or escalate: pool verdicts with a guaranteed agreement with humans.

A user with a strong judge asks which verdicts can be used without review. With
``AuditConfig.guarantee`` = A and ``delta`` = D, every pool row gets a ``decision``:

- ``trust``: the judge's verdict is kept;
- ``flip``: the audit's flipped verdict is used;
- ``escalate``: a human must look,

such that, with probability at least 1 - D over the labelled sample, the agreement with humans of
the final verdicts of the trusted and flipped rows is at least A (the selective guarantee of Jung,
Brahman & Choi, "Trust or Escalate: LLM Judges with Provable Guarantees for Human Agreement",
ICLR 2025, §3, arXiv 2407.18370).

How (all in this module, pure numpy):

1. **Split.** Half of the labelled rows (per question type; a ``cluster_by`` group stays whole) are
   the *calibration* rows. Their human verdicts are hidden from the audit, which fits everything it
   fits (references, cross-fitted features, the P(judge wrong) map) on the other half. The calibration
   rows are then pool rows whose labels the audit never saw: their P(judge wrong) is the same
   function of the data as the pool's, so (when the labelled rows are a random sample of the pool)
   calibration and pool rows are exchangeable.
2. **Final verdict and confidence.** p = P(judge wrong); the final verdict is the judge's where
   p <= 1/2 and the flipped one otherwise; its confidence is q = max(p, 1 - p). A row without p
   (left unscored) has no confidence and is escalated.
3. **Fixed-sequence testing** (Learn then Test, Angelopoulos, Bates, Candès, Jordan & Lei 2021, §4;
   Jung et al. Alg. 1) over thresholds t_1 > t_2 > ... on q, taken from the pool's quantiles (the
   grid never looks at a calibration label). At t, the n calibration rows with q >= t make e errors;
   the null "agreement among rows with q >= t is below A" has the exact binomial p-value
   P(Binomial(n, 1 - A) <= e). A sequence tests thresholds in order, looser and looser, while the
   null is rejected, and controls the family-wise error at its level. One sequence from the
   strictest threshold (Jung et al.) fails at its first unlucky threshold: where the score ranks
   verdicts weakly (a strong judge) it often certifies nothing though the judge's overall agreement
   is well above A. So sequences start at the strictest testable threshold and at the pool
   coverages ``STARTS`` (25, 50, 75 and 100 %), each at level D / (number of sequences)
   (Bonferroni); the loosest threshold any of them rejected is kept, and with probability >= 1 - D
   every rejection is right, so the kept set's agreement is >= A. Testable: the pool coverage times
   the number of calibration rows reaches ``START`` x n_min (or all of them, when fewer, but no
   fewer than n_min), where n_min = ceil(log D / log A) is the fewest rows that can reject (with no
   error); a start at n_min itself fails at the first error. Measured by simulation (500
   calibration rows, 300 splits): a calibrated score certifies 65 % of the pool at A = 0.8 with one
   sequence and 60 % with five; a flat score on a judge right 87 % of the time, 15 % with one and
   99.7 % with five (``experiments/reproductions/guarantee.py`` compares both on real judges).

4. **A cascade** (``cascade``, :func:`cascade`): the other judges, cheapest first, each audited on its own
   verdicts, try the rows no earlier judge was certified for; judge k's threshold is tested on the
   calibration rows no earlier judge certified, at level D / (number of judges) (Jung et al. §4).

**Human ties** (``AuditConfig.human_ties``). A pool row's final verdict picks a side, and a human may
have called it a tie. With "exclude" (the default, as Jung et al., who leave ties out) the labelled ties
do not calibrate, so the guarantee covers the pool rows a human would pick a side on; the report says how
many labelled rows are ties. With "disagree" they calibrate as rows whose every final verdict disagrees
(their labels hidden from the audit as the others'), so the guarantee covers every pool row, a human tie
counting as disagreement (``quantify``'s agreement).

Assumptions, checked where the data allow: the labelled rows are a random sample of the pool (the
audit's chi-square checks of the labelled share by question type, by the judge's verdict within types, and
by cluster); rows are independent (with ``cluster_by``
the binomial test treats rows of one cluster as independent, which they are not: the report says the
guarantee does not apply).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd
from scipy.special import bdtr, betaincinv  # binom.cdf and beta.ppf without scipy.stats' 0.6 s import

from ..datasets.exclusions import EXCLUDED, LABELLED, UNLABELLED, item_status
from ..datasets.verdicts import MISSING, TIE, flip_verdict
from ..quantify.targets import usable_rows
from .calibration import crossfit_folds

DECISIONS = ("trust", "flip", "escalate")
GRID = 200  # thresholds: pool quantiles at coverages 1/GRID, 2/GRID, ..., 1
START = 2  # the strictest sequence starts where the calibration rows expected above it reach START x n_min
STARTS = (0.25, 0.5, 0.75, 1.0)  # more sequences start at these pool coverages (see the module docstring)
#: The exclusion reasons of a row whose only fault is that a human tied (``item_status``).
TIE_REASONS = ("human tie", "human split vote")


def min_rows(agreement: float, delta: float) -> int:
    """Fewest calibration rows that can certify ``agreement`` at level ``delta`` (all of them agreeing)."""
    return math.ceil(math.log(delta) / math.log(agreement))


def calibration_rows(types: np.ndarray, clusters: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """(n_L,) bool: the half of the labelled rows that calibrates (step 1 of the module docstring).

    Args:
        types: (n_L,) question type of each labelled row (each type split in half).
        clusters: (n_L,) cluster of each labelled row (kept whole), or None.
        rng: the generator that draws the split.
    """
    return crossfit_folds(types, clusters, 2, rng) == 0


def confidence(p_wrong: np.ndarray) -> np.ndarray:
    """(n,) q = max(p, 1 - p), the probability that the final verdict is right; -inf where p is NaN."""
    p = np.asarray(p_wrong, float)
    return np.where(np.isfinite(p), np.maximum(p, 1.0 - p), -np.inf)


@dataclass(frozen=True)
class Selection:
    """The fixed-sequence test's outcome (step 3 of the module docstring).

    Attributes:
        threshold: the kept threshold on the confidence q (rows with q >= threshold are certified), or
            None when nothing was certified.
        curve: one row per grid threshold tested or not, strictest first: (threshold, pool coverage,
            calibration rows n, their errors e, one-sided Clopper-Pearson lower bound of their agreement
            at the sequences' level, p-value, tested).
        starts: indices in ``curve`` where the sequences started.
    """

    threshold: float | None
    curve: tuple[tuple[float, float, int, int, float, float, bool], ...]
    starts: tuple[int, ...]

    @property
    def row(self) -> tuple | None:
        """The curve's row of the kept threshold, or None."""
        return None if self.threshold is None else next(r for r in self.curve if r[0] == self.threshold)


def select(q_cal: np.ndarray, correct: np.ndarray, q_pool: np.ndarray, agreement: float, delta: float,
           starts: tuple[float, ...] = STARTS) -> Selection:  # fmt: skip
    """Fixed-sequence testing of thresholds on the confidence q, from several starts (step 3 of the module docstring).

    Args:
        q_cal: (n_cal,) confidence of the calibration rows' final verdicts (-inf: never selected).
        correct: (n_cal,) bool, the final verdict agrees with the human one.
        q_pool: (n_pool,) confidence of the pool rows (the grid of thresholds is theirs).
        agreement: A in (0, 1), the agreement to guarantee.
        delta: D in (0, 1), the probability the guarantee may fail.
        starts: pool coverages where more sequences start, besides the strictest testable threshold
            (``()``: one sequence, Jung et al.'s Alg. 1).

    Returns:
        The :class:`Selection`.
    """
    q_cal, correct, q_pool = np.asarray(q_cal, float), np.asarray(correct, bool), np.asarray(q_pool, float)
    finite = q_pool[np.isfinite(q_pool)]
    if len(finite) == 0:
        return Selection(None, (), ())
    grid = np.unique(np.quantile(finite, 1.0 - np.arange(1, GRID + 1) / GRID, method="higher"))[::-1]
    coverage = 1.0 - np.searchsorted(np.sort(q_pool), grid, side="left") / len(q_pool)
    order = np.argsort(-q_cal, kind="stable")
    n = np.searchsorted(-q_cal[order], -grid, side="right")  # calibration rows with q >= t
    e = np.concatenate([[0], np.cumsum(~correct[order])])[n]
    p = np.where(n > 0, bdtr(e, n, 1.0 - agreement), 1.0)
    first = _starts(coverage, len(q_cal), min_rows(agreement, delta), starts)
    level = delta / max(1, len(first))  # Bonferroni over the sequences
    tested, kept = np.zeros(len(grid), bool), -1
    for i in first:
        passed = np.flatnonzero(p[i:] > level)
        stop = i + (int(passed[0]) if len(passed) else len(grid) - i)  # the first threshold not certified
        tested[i : stop + 1] = True
        kept = max(kept, stop - 1) if stop > i else kept  # the loosest threshold this sequence certified
    lower = np.where(n - e > 0, betaincinv(np.maximum(n - e, 1), e + 1, level), 0.0)  # Clopper-Pearson at the level
    threshold = float(grid[kept]) if kept >= 0 else None
    rows = zip(grid.tolist(), coverage.tolist(), n.tolist(), e.tolist(), lower.tolist(), p.tolist(), tested.tolist())
    return Selection(threshold, tuple(rows), tuple(first))


def _starts(coverage: np.ndarray, n_cal: int, need: int, starts: tuple[float, ...]) -> list[int]:
    """Grid indices where sequences start: the strictest testable threshold, then each of ``starts``'s coverages.

    Testable: the pool coverage times ``n_cal`` reaches ``START`` x ``need`` (or all the calibration rows, when
    fewer, but never fewer than ``need``). Label-free: only the pool's coverage and the row count decide.
    """
    enough = coverage * n_cal >= max(need, min(START * need, n_cal))
    if not enough.any():
        return []
    first = [int(np.argmax(enough))]
    for c in starts:
        at = np.flatnonzero(enough & (coverage >= c - 1e-12))
        if len(at):
            first.append(int(at[0]))
    return sorted(set(first))


def plug_in(q_cal: np.ndarray, correct: np.ndarray, q_pool: np.ndarray, agreement: float) -> float | None:
    """The naive threshold: the loosest grid threshold whose calibration agreement is >= A (no correction).

    A baseline for comparisons only: it ignores sampling error, so its guarantee fails about half the time
    where the agreement curve crosses A (``tests/audit/test_guarantee.py`` shows it).
    """
    curve = select(q_cal, correct, q_pool, agreement, 0.5, starts=()).curve
    ok = [t for t, _, n, e, *_ in curve if n and (n - e) / n >= agreement]
    return min(ok) if ok else None


def cascade(stages, cal: np.ndarray, pool: np.ndarray, human: np.ndarray, agreement: float,
            delta: float) -> tuple[np.ndarray, list[Selection]]:  # fmt: skip
    """The judge certified for each row, judges tried in order (Jung et al. §4, the cascade).

    Judge k's threshold is tested on the calibration rows no earlier judge certified, with the pool rows
    no earlier judge certified as its grid, at level ``delta`` / (number of judges): with probability
    >= 1 - delta every judge's certified rows agree with humans at least A of the time, and so does their
    union. A row goes to the first judge certified for it; a row no judge is certified for is escalated.
    One judge: :func:`select` at level ``delta``, unchanged.

    Args:
        stages: per judge, cheapest first, (P(judge k wrong) (n,), judge k's verdicts (n,)); NaN where
            judge k has no P (no verdict, or left out of its audit): never certified there.
        cal: calibration row indices (into the n rows).
        pool: pool row indices (into the n rows).
        human: (n,) the human verdicts (read on ``cal`` only).
        agreement: A in (0, 1).
        delta: D in (0, 1), for the whole cascade.

    Returns:
        (stage (n,): index of the judge certified for each calibration and pool row, -1 elsewhere or
        escalated; each judge's :class:`Selection`).
    """
    chosen = np.full(len(human), -1)
    left_cal, left_pool, selections = np.asarray(cal), np.asarray(pool), []
    for k, (p_wrong, judge) in enumerate(stages):
        q = confidence(p_wrong)
        correct = final_verdicts(p_wrong[left_cal], judge[left_cal]) == human[left_cal]
        selection = select(q[left_cal], correct, q[left_pool], agreement, delta / len(stages))
        selections.append(selection)
        if selection.threshold is None:
            continue
        taken_cal, taken_pool = q[left_cal] >= selection.threshold, q[left_pool] >= selection.threshold
        chosen[left_cal[taken_cal]], chosen[left_pool[taken_pool]] = k, k
        left_cal, left_pool = left_cal[~taken_cal], left_pool[~taken_pool]
    return chosen, selections


def labels_needed(selection: Selection, n_cal: int, n_labelled: int, agreement: float, delta: float) -> int | None:
    """More labelled rows that would likely certify something, when nothing was; None if more labels won't help.

    At the grid threshold with the best observed calibration agreement r (among those with at least 10
    rows), the smallest n whose binomial test rejects at the sequences' level with a share 1 - r of
    errors; scaled by the share of the ``n_cal`` calibration rows above it and doubled (half of the
    labelled rows calibrate), less the ``n_labelled`` at hand. None when no threshold's observed
    agreement exceeds A (better evidence is needed, not more labels). It reads the best observed rate,
    so it is a median, not a guarantee: about half of the samples of that size certify (a test measures it).
    """
    candidates = [r for r in selection.curve if r[2] >= 10]
    if not candidates:
        candidates = [r for r in selection.curve if r[2] > 0]
    if not candidates:
        return None
    t, _, n, e, _, _, _ = max(candidates, key=lambda r: ((r[2] - r[3]) / r[2], r[2]))
    rate = (n - e) / n
    if rate <= agreement:
        return None
    sizes, level = np.arange(1, 10**6 + 1), delta / max(1, len(selection.starts))  # the sequences' level
    rejects = np.flatnonzero(bdtr(np.floor(sizes * (1 - rate)), sizes, 1 - agreement) <= level)
    if len(rejects) == 0:
        return None
    return max(0, 2 * math.ceil(int(sizes[rejects[0]]) * n_cal / n) - n_labelled)


def decisions(p_wrong: np.ndarray, judge: np.ndarray, threshold: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(decision (n,), final verdict (n,)) of rows with P(judge wrong) p and judge verdicts ``judge``.

    Rows with confidence >= ``threshold`` are ``flip`` when p > 1/2 changes the verdict, else ``trust``;
    the others ``escalate`` (their final verdict is the judge's, unchanged). No threshold: all escalated.
    """
    p = np.asarray(p_wrong, float)
    judge = np.asarray(judge, dtype=object)
    flipped = final_verdicts(p, judge)
    certified = np.zeros(len(p), bool) if threshold is None else confidence(p) >= threshold
    decision = np.where(certified, np.where(flipped != judge, "flip", "trust"), "escalate").astype(object)
    return decision, np.where(certified, flipped, judge)


@dataclass(frozen=True)
class Guarantee:
    """What ``--guarantee`` certified (the report's ``guarantee`` section).

    Attributes:
        agreement: A, the guaranteed agreement of the trusted and flipped verdicts with humans.
        delta: D, the probability that the guarantee fails.
        n_calibration: labelled rows that calibrated (their labels hidden from the audit; human ties among
            them with human_ties "disagree").
        n_fit: labelled rows the audit fitted on.
        threshold: the kept threshold on the confidence max(p, 1 - p), or None (nothing certified).
        coverage: share of the pool certified (trust or flip).
        coverage_by_type: question type -> (pool rows, share certified).
        counts: decision -> pool rows.
        lower_bound: one-sided (1 - D) Clopper-Pearson lower bound of the calibration agreement above
            the threshold (>= A when certified), or None.
        calibration_agreement: the calibration rows' agreement of the final verdicts above the threshold,
            or None.
        judge_agreement: the judge's agreement on the calibration rows (every row, no selection).
        labels_needed: when nothing was certified, about how many more labelled rows would (in about half of the draws)
            certify some (None: more labels would not help at this A, or something was certified).
        applies: whether the guarantee's assumptions hold as far as the data show.
        notes: why it does not apply, or what to do next.
        curve: the fixed-sequence test's grid (see :class:`Selection`), for the risk-coverage figure.
        stages: with a cascade, one (judge, threshold or None, pool rows it decides, calibration rows that
            reached it) per judge in order; () with one judge.
        human_ties: what a human tie meant ("exclude": the rows a human tied neither calibrate nor are
            covered; "disagree": they calibrate as disagreement, every pool row is covered).
        human_tie_rows: rows a human tied that the guarantee would otherwise use (labelled, judge verdict, texts).
    """

    agreement: float
    delta: float
    n_calibration: int
    n_fit: int
    threshold: float | None
    coverage: float
    coverage_by_type: dict
    counts: dict
    lower_bound: float | None
    calibration_agreement: float | None
    judge_agreement: float
    labels_needed: int | None
    applies: bool
    notes: tuple[str, ...]
    curve: tuple = ()
    stages: tuple = ()
    human_ties: str = "exclude"
    human_tie_rows: int = 0

    def to_dict(self) -> dict:
        """JSON-able form."""
        out = asdict(self)
        out["coverage_by_type"] = {k: list(v) for k, v in self.coverage_by_type.items()}
        out["notes"], out["curve"] = list(self.notes), [list(r) for r in self.curve]
        out["stages"] = [list(r) for r in self.stages]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Guarantee:
        """Inverse of :meth:`to_dict`."""
        by_type = {k: (int(v[0]), float(v[1])) for k, v in data["coverage_by_type"].items()}
        curve = tuple(tuple(r) for r in data.get("curve", ()))
        stages = tuple(tuple(r) for r in data.get("stages", ()))
        return cls(**{**data, "coverage_by_type": by_type, "notes": tuple(data["notes"]), "curve": curve,
                      "stages": stages})  # fmt: skip

    def thresholds(self) -> dict:
        """Every judge's threshold: {P column of the items: threshold or None}.

        "p_wrong" is the judge's, "p_wrong[J]" a cascade's judge J's.
        """
        if not self.stages:
            return {"p_wrong": self.threshold}
        return {"p_wrong" if k == 0 else f"p_wrong[{judge}]": t for k, (judge, t, *_) in enumerate(self.stages)}

    def lines(self) -> list[str]:
        """The report's text: what was certified, or why nothing was and what would help."""
        head = (f"guarantee: agreement >= {self.agreement:g} with probability >= {probability(self.delta)} "
                f"({self.n_calibration} labelled rows calibrate, {self.n_fit} fit the audit)")  # fmt: skip
        c = self.counts
        if sum(c.values()) == 0:
            out = [head + ": no pool rows to decide"]
        elif c["trust"] + c["flip"] == 0:
            out = [head + f": nothing certified; every pool row is escalated (judge agrees on "
                   f"{self.judge_agreement:.1%} of the calibration rows)"]  # fmt: skip
        else:
            at = "" if self.threshold is None else (
                f"; the judge: confidence >= {self.threshold:.3f}, calibration agreement "
                f"{self.calibration_agreement:.1%}, lower bound {self.lower_bound:.3f}")  # fmt: skip
            out = [head + f": {self.coverage:.1%} of the pool certified (trust {c['trust']}, flip {c['flip']}, "
                   f"escalate {c['escalate']}){at}"]  # fmt: skip
        for judge, threshold, decided, reached in self.stages:
            at = "nothing certified" if threshold is None else f"confidence >= {threshold:.3f}"
            out.append(f"guarantee: cascade: {judge}: {at}, decides {decided} pool rows ({reached} calibration rows "
                       "reached it)")  # fmt: skip
        return out + [f"guarantee: {note}" for note in self.notes]


def probability(delta: float) -> str:
    """1 - ``delta`` as text that is never rounded up to a false "1" (``1 - 1e-12``)."""
    text = f"{1 - delta:g}"
    return f"1 - {delta:g}" if text == "1" else text


def notes_for(certified: bool, labels: int | None, judge_agreement: float, agreement: float,
              warnings: list[str], pool: int = 1) -> tuple[str, ...]:  # fmt: skip
    """The report's advice: broken assumptions first, then (nothing ``certified``) what would certify some.

    ``pool``: the number of pool rows; with none there is nothing to decide, which is all it says then.
    """
    notes = [f"does not apply: {w}" for w in warnings]
    if pool == 0:
        return (*notes, "there are no unlabelled rows to decide: every usable row is labelled (the guarantee "
                        "decides the verdicts no human gave)")  # fmt: skip
    if not certified:
        if labels is not None:
            notes.append(f"about {labels} more labelled rows (a random sample) would certify some rows, in about half "
                         "of the draws")  # fmt: skip
        else:
            notes.append(f"no confidence level reaches {agreement:g} on the calibration rows: more labels will "
                         "not help; give the audit evidence (both presentation orders, a second judge's "
                         "verdicts: --other-judges) or ask for a lower --guarantee")  # fmt: skip
        if judge_agreement >= agreement:
            notes.append(f"the judge agrees on {judge_agreement:.1%} of the calibration rows, above {agreement:g}, "
                         "but too few rows calibrate to certify it")  # fmt: skip
    return tuple(notes)


def tie_notes(human_ties: str, ties: int, tie_calibration: int, sided: int) -> tuple[str, ...]:
    """What the guarantee means for human ties: ``ties`` rows a human tied, ``sided`` rows a human picked a side on."""
    if human_ties == "disagree":
        return (f"a human tie counts as disagreement: {tie_calibration} of the calibration rows are human ties",)
    if not ties:
        return ()
    return (f"it covers the pool rows a human would pick a side on: {ties} of the {ties + sided} labelled rows "
            f"({ties / (ties + sided):.0%}) are human ties, which it leaves out; --human-ties disagree counts a tie as "
            "disagreement and covers every pool row",)  # fmt: skip


def coverage_by_type(types: np.ndarray, decision: np.ndarray) -> dict:
    """Question type -> (pool rows, share certified), of the pool rows' (n_U,) types and decisions."""
    types, certified = np.asarray(types, dtype=object).astype(str), np.asarray(decision) != "escalate"
    return {t: (int((types == t).sum()), float(certified[types == t].mean())) for t in sorted(set(types))}


def final_verdicts(p_wrong: np.ndarray, judge: np.ndarray) -> np.ndarray:
    """(n,) the judge's verdict where P(judge wrong) <= 1/2 (or unknown), the flipped one where it is above."""
    judge = np.asarray(judge, dtype=object)
    return np.where(np.asarray(p_wrong, float) > 0.5, flip_verdict(judge), judge)


def escalation_plan(items: pd.DataFrame, thresholds) -> pd.DataFrame:
    """The escalated rows as a label plan, in ``puaudit plan-labels``' format (``quantify.plan.PLAN_COLUMNS``).

    Every usable row (a judge verdict; a human one or none) is in the plan. Unlabelled rows are
    ``pool`` rows: selected with probability 1 when escalated or left out of the audit (no certified
    verdict), with probability 0 when certified. Rows labelled before the plan carry the probability
    the same rule would have given them: 0 where some judge's confidence reaches its threshold, else 1.
    Once humans have labelled the selected rows, ``puaudit quantify DATA --plan DIR`` weights every
    label by its inclusion probability r + (1 - r) pi, where r is the share of rows labelled before the
    plan (a random sample, as the guarantee assumes): r > 0 keeps every row's probability positive, so
    the intervals stay valid although certified rows are never drawn.

    Args:
        items: a guaranteed audit's item table (``decision``, ``p_wrong``, ``p_wrong_cross``, a cascade's
            ``p_wrong[J]``, the verdicts).
        thresholds: the threshold on the confidence of each judge, as {P column: threshold or None}
            (:meth:`Guarantee.thresholds`); a number or None: the judge's alone ({"p_wrong": t}).

    Returns:
        One row per usable item: id, role (labelled | pool), p_wrong, sampling_prob, selected.
    """
    if not isinstance(thresholds, dict):
        thresholds = {"p_wrong": thresholds}
    labelled, unlabelled = usable_rows(items)
    used = labelled | unlabelled
    p = items["p_wrong"].to_numpy(float)
    if "p_wrong_cross" in items.columns:  # the labelled rows the audit fitted on: their out-of-fold P
        p = np.where(np.isfinite(p), p, items["p_wrong_cross"].to_numpy(float))
    certified = np.zeros(len(items), bool)
    for column, threshold in thresholds.items():
        if threshold is not None:
            q = confidence(p if column == "p_wrong" else items[column].to_numpy(float))
            certified |= q >= threshold
    if "decision" in items.columns:  # pool rows: the audit's own decision
        decision = items["decision"].to_numpy(dtype=object)
        certified = np.where(unlabelled, np.isin(decision, ("trust", "flip")), certified)
    pi = np.where(certified, 0.0, 1.0)
    return pd.DataFrame({"id": items["id"].astype(str).to_numpy()[used],
                         "role": np.where(unlabelled, "pool", "labelled")[used], "p_wrong": p[used],
                         "sampling_prob": pi[used], "selected": (unlabelled & ~certified)[used]})  # fmt: skip


def cascade_status(table: pd.DataFrame, judges: tuple[str, ...] = ()) -> np.ndarray:
    """(n,) ``item_status`` of every row for a cascade whose later judges' verdicts are the columns ``judges``.

    A row is usable (labelled or unlabelled) when any judge of the cascade has a verdict for it: where the
    first judge said tie, the next ones decide. Without ``judges``, the first judge's status.
    """
    status = item_status(table)["status"].to_numpy(dtype=object)
    for name in judges:
        later = item_status(table.assign(judge=table[name]))["status"].to_numpy(dtype=object)
        status = np.where(status == EXCLUDED, later, status)
    return status


def calibrating_status(table: pd.DataFrame, judges: tuple[str, ...], human_ties: str) -> np.ndarray:
    """(n,) :func:`cascade_status`, where a row a human tied counts as labelled with ``human_ties`` "disagree".

    Such a row is one the cascade decides (it would be in the pool without its label) that a human labelled
    without picking a side: with "disagree" it calibrates as a row every final verdict disagrees with.
    """
    status = cascade_status(table, judges)
    if human_ties != "disagree":
        return status
    blind = cascade_status(table.assign(human=MISSING), judges)
    tied = (blind == UNLABELLED) & (table["human"].to_numpy(dtype=object) == TIE)
    return np.where(tied, LABELLED, status)


def hidden_rows(status: np.ndarray, types: np.ndarray, table, config) -> np.ndarray:
    """Row indices of the labelled rows whose labels calibrate (hidden from the audit), sorted.

    Args:
        status: (n,) :func:`calibrating_status` of every row of the comparison table.
        types: (n,) question types.
        table: the comparison table (its ``config.cluster_by`` column, when set).
        config: the audit's settings (``seed``, ``cluster_by``, ``guarantee``, ``delta``).

    Raises:
        ValueError: fewer labelled rows than the guarantee needs.
    """
    labelled = np.flatnonzero(np.asarray(status) == LABELLED)
    need = min_rows(config.guarantee, config.delta)
    if len(labelled) < 2 * need:
        raise ValueError(f"guarantee {config.guarantee:g} at delta {config.delta:g} needs at least {need} calibration "
                         f"rows, i.e. {2 * need} labelled rows (half calibrate); the data have {len(labelled)}: "
                         "label more rows, or ask for a lower guarantee or a larger delta")  # fmt: skip
    clusters = None
    if config.cluster_by is not None:
        clusters = table[config.cluster_by].astype(str).to_numpy(dtype=object)[labelled]
    rng = np.random.default_rng([config.seed, 2407_18370])  # its own stream: the audit's splits are unchanged
    return np.sort(labelled[calibration_rows(np.asarray(types, dtype=object)[labelled], clusters, rng)])


def certify_items(items: pd.DataFrame, hidden: np.ndarray, truth: np.ndarray, checks, config, others=(),
                  truth_reason: np.ndarray | None = None):  # fmt: skip
    """Trust, flip or escalate every pool row of an audit run with the ``hidden`` rows' labels hidden.

    Args:
        items: the audit's item table (calibration rows among the pool, role U, human "missing").
        hidden: (k,) row indices whose human verdicts were hidden (:func:`hidden_rows`).
        truth: (n,) the human verdicts of every row before hiding.
        checks: the random-sample checks of the labels as given (``quantify.sample_check.audit_sample_checks``):
            a failed one says the guarantee does not apply.
        config: the audit's settings.
        others: the cascade's later judges, in order: (name, the item table of the same audit run on that
            judge's verdicts, same rows in the same order); () without a cascade. A row the first judge has
            no verdict for (a tie) and a later one has takes its role and status in the first such judge's
            audit: a pool or calibration row of the cascade, or a labelled row that audit used.
        truth_reason: (n,) each row's ``item_status`` reason with the labels as given: a calibrating human
            tie takes it back ("human tie" or "human split vote"); None: "human tie".

    Returns:
        (items with the hidden labels back, role "calibration" on the calibration rows, a ``decision``
        column ("" off the pool), ``adjusted`` / ``flipped`` from the decisions and, with a cascade,
        ``decided_by`` (the judge whose verdict a certified row takes, "human" when escalated) and
        ``p_wrong[NAME]`` (the later judges' P(judge wrong)); the :class:`Guarantee`).

    Raises:
        ValueError: every row has the same P(judge wrong) (nothing to rank by).
    """
    role, status = items["role"].to_numpy(dtype=object).copy(), items["status"].to_numpy(dtype=object).copy()
    reason = items["reason"].to_numpy(dtype=object).copy()
    human, judge = items["human"].to_numpy(dtype=object).copy(), items["judge"].to_numpy(dtype=object)
    p = items["p_wrong"].to_numpy(float)
    for _, judged in others:  # rows only a later judge has a verdict for: the first such judge's to use
        their_role, their_status = (judged[c].to_numpy(dtype=object) for c in ("role", "status"))
        take = (status == EXCLUDED) & (their_status != EXCLUDED)
        role[take], status[take], reason[take] = their_role[take], their_status[take], ""
    human[hidden] = np.asarray(truth, dtype=object)[hidden]
    status[hidden[status[hidden] != EXCLUDED]] = LABELLED
    tied = hidden[human[hidden] == TIE]  # human_ties="disagree": they calibrate, and stay excluded from the rest
    status[tied] = EXCLUDED
    given = np.full(len(items), TIE_REASONS[0], dtype=object) if truth_reason is None else np.asarray(truth_reason)
    reason[tied] = np.where(np.isin(given[tied], TIE_REASONS), given[tied], TIE_REASONS[0])
    cal = hidden[role[hidden] == "U"]
    role[cal] = "calibration"
    pool = np.flatnonzero(role == "U")
    known = p[np.concatenate([cal, pool])]
    known = known[np.isfinite(known)]
    if len(known) > 1 and np.ptp(known) == 0:
        raise ValueError("guarantee: every row has the same P(judge wrong) (everything tied): the audit cannot rank "
                         "verdicts by it; give it evidence (--other-judges, both orders) or more labels")  # fmt: skip
    stages = [(p, judge)] + [(it["p_wrong"].to_numpy(float), it["judge"].to_numpy(dtype=object)) for _, it in others]
    chosen, selections = cascade(stages, cal, pool, human, config.guarantee, config.delta)
    decision, adjusted = np.full(len(items), "", dtype=object), judge.copy()
    decision[pool], by = "escalate", np.where(role == "U", "human", "").astype(object)
    for k, (p_k, judge_k) in enumerate(stages):
        rows = pool[chosen[pool] == k]
        adjusted[rows] = final_verdicts(p_k[rows], judge_k[rows])
        decision[rows] = np.where(adjusted[rows] != judge_k[rows], "flip", "trust")
        by[rows] = "judge" if k == 0 else others[k - 1][0]
    later = {f"p_wrong[{name}]": stages[k][0] for k, (name, _) in enumerate(others, start=1)}
    items = items.assign(human=human, status=status, reason=reason, role=role, adjusted=adjusted,
                         flipped=decision == "flip", decision=decision, **({"decided_by": by} if others else {}),
                         **later)  # fmt: skip
    types = items["question_type"].to_numpy(dtype=object)
    correct = final_verdicts(p[cal], judge[cal]) == human[cal]
    rows = dict(
        n_fit=int(((status == LABELLED) & (role != "calibration")).sum()),
        tie_rows=int(np.isin(reason, TIE_REASONS).sum()),
        tie_calibration=int((human[cal] == TIE).sum()),
    )
    built = _guarantee(selections[0], decision[pool], types[pool], correct, judge[cal] == human[cal], rows, checks,
                       config)  # fmt: skip
    if others:
        names = ["judge"] + [name for name, _ in others]
        reached = len(cal) - np.concatenate([[0], np.cumsum([(chosen[cal] == k).sum() for k in range(len(stages))])])
        built = replace(built, stages=tuple((names[k], sel.threshold, int((chosen[pool] == k).sum()), int(reached[k]))
                                            for k, sel in enumerate(selections)))  # fmt: skip
    return items, built


def _guarantee(selection, decision, pool_types, correct, judge_correct, rows: dict, checks, config) -> Guarantee:
    """The report's :class:`Guarantee` of a :class:`Selection`, the pool's decisions and the random-sample checks.

    ``rows``: n_fit (labelled rows the audit fitted on), tie_rows (rows a human tied, otherwise usable) and
    tie_calibration (those among the calibration rows).
    """
    n_cal, ties = len(correct), rows["tie_rows"]
    n_labelled = rows["n_fit"] + n_cal + (ties - rows["tie_calibration"] if config.human_ties == "disagree" else 0)
    row, a, d = selection.row, config.guarantee, config.delta
    certified = bool((decision != "escalate").any())
    labels = None if certified or not len(decision) else labels_needed(selection, max(1, n_cal), n_labelled, a, d)
    judge_agreement = float(np.mean(judge_correct)) if n_cal else float("nan")
    warnings = [c.warning for c in checks if c.warning]
    if config.cluster_by is not None:
        warnings.append(f"rows of one {config.cluster_by!r} group are not independent, which the binomial test "
                        "assumes")  # fmt: skip
    return Guarantee(
        agreement=a,
        delta=d,
        n_calibration=n_cal,
        n_fit=rows["n_fit"],
        threshold=selection.threshold,
        coverage=float(np.mean(decision != "escalate")) if len(decision) else 0.0,
        coverage_by_type=coverage_by_type(pool_types, decision),
        counts={k: int((decision == k).sum()) for k in DECISIONS},
        lower_bound=None if row is None else row[4],
        calibration_agreement=None if row is None else (row[2] - row[3]) / row[2],
        judge_agreement=judge_agreement,
        labels_needed=labels,
        applies=not warnings,
        notes=notes_for(certified, labels, judge_agreement, a, warnings, pool=len(decision))
        + tie_notes(config.human_ties, ties, rows["tie_calibration"], rows["n_fit"] + n_cal - rows["tie_calibration"]),
        human_ties=config.human_ties,
        human_tie_rows=ties,
        curve=selection.curve,
    )
