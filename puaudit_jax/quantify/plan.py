"""``plan_labels``: the next items to send to humans, their probabilities, and what the labels will buy.

A plan covers every usable row of a comparison table: rows labelled before the plan (role
``labelled``) and the unlabelled pool (role ``pool``), each pool item with its sampling probability and
whether it was drawn (:mod:`.active`). Written as ``plan.csv``, it is read back by
:func:`planned_probabilities` when the labels have come back, so that :func:`~puaudit_jax.quantify.
quantify` weights every label by 1 / its probability of being labelled and its intervals stay valid.
Its ``design`` says how the earlier labels count:

- ``two-phase`` (``plan-labels``): the earlier labels were a random sample (a share r) and the plan's
  probabilities barely depend on them; every row's probability is r + (1 - r) pi, the earlier rows with
  the pi they would have had;
- ``conditional`` (:func:`escalation_plan`, a guaranteed audit's rows to label): the plan was chosen on the
  earlier labels (the certified rows are those whose labelled neighbours agreed), so the earlier rows
  count as themselves (probability 1) and the plan's rows have their pi: escalated rows 1, and a random
  share of the certified ones (spot checks), so that every row the plan speaks for has a known, non-zero
  probability.

    plan_labels(table, p_wrong (R,) or None, config) -> LabelPlanReport
    escalation_plan(items, spot_checks, seed) -> plan frame
    planned_probabilities(table, plan frame) -> (R,) pi of every planned row (1 before the plan)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..datasets.verdicts import MISSING
from .active import inclusion_probability, predicted_half_width, sampling_probabilities, uncertainty
from .config import TARGETS, PlanConfig  # noqa: F401  (TARGETS re-exported; both light, for the CLI)
from .estimators import z_value
from .targets import agreement_inputs, inputs, usable_rows

PLAN_COLUMNS = ("id", "role", "p_wrong", "sampling_prob", "selected")
DESIGNS = ("two-phase", "conditional")  # the optional ``design`` column of a plan (module docstring); the first: absent


@dataclass(frozen=True)
class LabelPlanReport:
    """A drawn plan and its power analysis.

    Attributes:
        frame: one row per usable table row (:data:`PLAN_COLUMNS` and ``design``; on rows labelled before the
            plan, ``sampling_prob`` is the probability they would have had: the estimator weighs them too).
        power: predicted half-widths of ``target`` at several budgets: columns ``budget``,
            ``planned`` and ``random`` (uniform sampling), in the outcome's units.
        needed: labels needed for a half-width ``width`` with the plan's weighting (None without a
            width; 0 when the labels at hand reach it; the pool size + 1 when even labelling all of it
            does not).
        target: the power analysis' target.
        informative: whether the probabilities differ from uniform (the audit gave P(judge wrong)).
        current: the predicted half-width with the labels at hand (inf without any).
        note: how the power analysis departed from the plain variance estimate (labelled outcomes that
            never vary), or ''.
    """

    frame: pd.DataFrame
    power: pd.DataFrame
    needed: int | None
    target: str
    informative: bool
    current: float = np.inf
    note: str = ""

    @property
    def selected(self) -> pd.DataFrame:
        """The rows to send to humans."""
        return self.frame[self.frame["selected"]]


def _residual_variance(table: pd.DataFrame, p_wrong: np.ndarray, target: str, level: float):
    """(sigma2 (R,) expected squared residual per row, var_y, labelled, pool) for the power analysis.

    With a P(judge wrong) p: sigma2 = p (1 - p); without: the labelled items' mean squared residual
    of the judge's prediction. var_y: the labelled outcomes' variance (when they never vary, that of
    the Agresti-Coull estimate, as the Wilson interval quantify then gives; note says so, else '').
    """
    inp = inputs(table, level)
    if target == "agreement":
        inp = agreement_inputs(inp)
    y, yhat = inp.y[inp.labelled], next(iter(inp.predictions.values()))[inp.labelled]
    var_y, note = (float(np.var(y)), "") if len(y) > 1 else (0.25, "")
    if len(y) > 1 and var_y == 0:  # all outcomes equal: 0 would predict a zero-width interval
        z2 = z_value(level) ** 2
        p = (y.sum() + z2 / 2) / (len(y) + z2)  # Agresti-Coull: the Wilson interval's centre
        var_y = float(p * (1 - p))
        note = (f"the {len(y)} labelled outcomes never vary (all {y[0]:g}): the power analysis uses the "
                f"variance {var_y:.3g} of the Agresti-Coull estimate {p:.3f} instead of 0")  # fmt: skip
    fallback = float(np.mean((y - yhat) ** 2)) if target != "agreement" and len(y) else var_y
    sigma2 = np.where(np.isfinite(p_wrong), p_wrong * (1 - p_wrong), fallback)
    return sigma2, var_y, inp.labelled, inp.unlabelled, note


def plan_labels(table: pd.DataFrame, p_wrong, config: PlanConfig = PlanConfig()) -> LabelPlanReport:
    """Draw the next items to label from the table's unlabelled pool, and the power analysis.

    Args:
        table: a validated comparison table (R rows; the pool: rows with a judge verdict and no human
            one).
        p_wrong: (R,) the audit's P(judge wrong) (NaN where it has none), or None (random sampling).
        config: the :class:`PlanConfig`.

    Returns:
        The :class:`LabelPlanReport`.

    Raises:
        ValueError: a bad setting, an empty pool, or a budget larger than the pool.
    """
    config.validate()
    p = np.full(len(table), np.nan) if p_wrong is None else np.asarray(p_wrong, np.float64)
    sigma2, var_y, labelled, pool, note = _residual_variance(table, p, config.target, config.level)
    used, n_pool = labelled | pool, int(pool.sum())
    if n_pool == 0:
        unjudged = int(((table["human"].to_numpy(dtype=object) == MISSING) & ~used).sum())
        why = (f"the {unjudged} rows without a human label have no judge verdict either (judge = missing: did the "
               "judge run fail?)" if unjudged else "every usable row already has a human label")  # fmt: skip
        raise ValueError(f"no unlabelled item to plan: {why}")
    if config.budget > n_pool:
        raise ValueError(f"--budget {config.budget} is larger than the pool of {n_pool} unlabelled items")
    u = uncertainty(p[used])
    in_pool, share = pool[used], float(labelled.sum() / used.sum())

    def probabilities(budget: float, mix: float) -> np.ndarray:
        """(used rows,) plan probabilities: drawn ones for the pool, would-have-been ones for the rest."""
        out = np.empty(len(u))
        out[in_pool], out[~in_pool] = sampling_probabilities(u[in_pool], budget, mix, others=u[~in_pool])
        return out

    pi = probabilities(config.budget, config.mix)
    drawn = np.random.default_rng(config.seed).random(len(pi)) < pi
    frame = pd.DataFrame({"id": table["id"].astype(str).to_numpy()[used], "role": np.where(in_pool, "pool", "labelled"),
                          "p_wrong": p[used], "sampling_prob": pi, "selected": drawn & in_pool,
                          "design": DESIGNS[0]})  # fmt: skip
    half = lambda b, m: predicted_half_width(inclusion_probability(probabilities(b, m), share), sigma2[used],  # noqa: E731
                                             config.level)  # fmt: skip
    budgets = sorted({int(b) for b in np.linspace(1, n_pool, 9).round()} | {config.budget})
    power = pd.DataFrame({"budget": budgets, "planned": [half(b, config.mix) for b in budgets],
                          "random": [half(b, 1.0) for b in budgets]})  # fmt: skip
    now = _random_half_width(share, sigma2[used], var_y, config.level) if share > 0 else np.inf
    needed = None if config.width is None else (
        0 if now <= config.width else _labels_needed(lambda b: half(b, config.mix), n_pool, config.width))  # fmt: skip
    return LabelPlanReport(frame, power, needed, config.target, bool(np.ptp(u[in_pool]) > 0), float(now), note)


def _random_half_width(share: float, sigma2: np.ndarray, var_y: float, level: float) -> float:
    """The half-width of PPI++ on a random sample of a ``share`` of the rows (quantify without a plan).

    Var = (var_y + (1 / share - 1) mean(sigma2)) / R, R = len(sigma2): the outcome's spread over the rows,
    and the residuals' over the labelled share.
    """
    var = (var_y + (1 / share - 1) * float(np.mean(sigma2))) / len(sigma2)
    return float(z_value(level) * np.sqrt(var))


def _labels_needed(half_width, n_pool: int, width: float) -> int:
    """The smallest budget in [1, n_pool] whose predicted half-width is <= width (n_pool + 1: none is)."""
    if half_width(n_pool) > width:
        return n_pool + 1
    lo, hi = 1, n_pool
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if half_width(mid) <= width else (mid + 1, hi)
    return lo


def planned_probabilities(table: pd.DataFrame, plan: pd.DataFrame) -> np.ndarray:
    """The probability every planned row of ``table`` had of being labelled, by the plan's ``design``.

    Args:
        table: the comparison table after the planned labels came back (R rows).
        plan: a plan frame (:data:`PLAN_COLUMNS`, optionally ``design``; e.g. ``plan.csv`` read back).

    Returns:
        (R,) float (module docstring): ``two-phase`` (or no ``design``): r + (1 - r) pi on every planned row;
        ``conditional``: 1 on the rows labelled before the plan, pi on its pool rows. Labelled now or not
        (:func:`.active.active_mean` needs to know what was left unseen); NaN on rows outside the plan.

    Raises:
        ValueError: the plan lacks a column, repeats an id or has a role / selected value it never writes; a
            usable row is not in the plan, or a plan id not in the table; labels came back for items never
            planned; a planned item has no label or no valid sampling probability.
    """
    missing = [c for c in PLAN_COLUMNS if c not in plan.columns]
    if missing:
        raise ValueError(f"the label plan lacks the columns {missing} (write it with `puaudit plan-labels`)")
    plan = plan.assign(id=plan["id"].astype(str))
    twice = plan["id"].duplicated(keep=False).to_numpy()
    _check(plan["id"].to_numpy(), twice, "the label plan lists {n} rows under an id that is not unique")
    odd = ~plan["role"].astype(str).isin(["pool", "labelled"]).to_numpy()
    _check(plan["id"].to_numpy(), odd, "the label plan has {n} rows whose role is neither pool nor labelled")
    odd = ~plan["selected"].astype(str).str.lower().isin(["true", "false", "1", "0"]).to_numpy()
    _check(plan["id"].to_numpy(), odd, "the label plan has {n} rows whose selected is neither True nor False")
    plan = plan.set_index("id")
    labelled, unlabelled = usable_rows(table)
    ids = table["id"].astype(str).to_numpy()
    absent = ~np.isin(ids, plan.index) & (labelled | unlabelled)
    if absent.any():
        raise ValueError(f"{int(absent.sum())} rows are not in the label plan, e.g. id {ids[absent][0]!r}: "
                         "quantify the table the plan was drawn from")  # fmt: skip
    extra = ~plan.index.isin(ids)  # its sampling probabilities describe that table, with these rows
    _check(plan.index.to_numpy(), extra, "the label plan lists {n} ids that are not in the table: quantify the table "
           "the plan was drawn from, with every row")  # fmt: skip
    rows = plan.reindex(ids)
    role, chosen = rows["role"].astype(str).to_numpy(), rows["selected"].astype(str).str.lower().isin(["true", "1"])
    chosen = chosen.to_numpy()
    _check(ids, labelled & (role == "pool") & ~chosen, "labels came back for {n} items the plan never selected")
    _check(ids, unlabelled & chosen, "{n} planned items have no human label: IPW needs every planned label "
           "(label them, or re-plan without them)")  # fmt: skip
    pi = pd.to_numeric(rows["sampling_prob"], errors="coerce").to_numpy(float)
    bad = labelled & chosen & ~((pi > 0) & (pi <= 1))
    _check(ids, bad, "{n} planned items have no valid sampling probability in (0, 1]")
    bad = unlabelled & (role == "pool") & ~((pi >= 0) & (pi <= 1))
    _check(ids, bad, "{n} pool items have no valid sampling probability in [0, 1]")
    _check(ids, unlabelled & (role == "pool") & (pi == 0), "the label plan gives {n} pool rows probability 0 of being "
           "labelled: no weighting can stand for rows a plan never draws (a plan of escalated rows alone); "
           "re-run `puaudit audit --guarantee` with --spot-checks above 0 (a random share of the certified rows "
           "is labelled too), or plan with `puaudit plan-labels`")  # fmt: skip
    _check(ids, unlabelled & (role == "labelled"), "{n} items the plan lists as labelled before it have no label")
    if _design(plan) == "conditional":
        return np.where(role == "labelled", 1.0, np.where(labelled | unlabelled, pi, np.nan))
    bad = labelled & (role == "labelled") & ~((pi >= 0) & (pi <= 1))
    _check(ids, bad, "{n} items labelled before the plan have no valid sampling probability in [0, 1]")
    share = float((plan["role"].astype(str) == "labelled").mean())
    return np.where(labelled | unlabelled, inclusion_probability(pi, share), np.nan)


def _design(plan: pd.DataFrame) -> str:
    """The plan's ``design`` (one of :data:`DESIGNS`; absent: the first), or ValueError naming a bad one."""
    if "design" not in plan.columns:
        return DESIGNS[0]
    values = set(plan["design"].astype(str))
    if len(values) != 1 or not values <= set(DESIGNS):
        raise ValueError(f"the label plan's design column must hold one of {', '.join(DESIGNS)} on every row, got "
                         f"{sorted(values)}")  # fmt: skip
    return values.pop()


def escalation_plan(items: pd.DataFrame, spot_checks: float, seed: int = 0) -> pd.DataFrame:
    """A guaranteed audit's rows to label, as a plan: the escalated ones, and spot checks of the certified ones.

    Every usable row is in the plan, its ``design`` ``conditional`` (module docstring): the certified rows were
    chosen on the earlier labels. Rows labelled before it are ``labelled`` (probability 1). Pool rows
    escalated, or left out of the audit (no certified verdict), are drawn with probability 1; certified
    (trusted or flipped) pool rows with probability ``spot_checks``, each independently. Once humans have
    labelled the drawn rows, ``puaudit quantify DATA --plan DIR`` weights every label by 1 / its probability
    (:func:`.active.active_mean`): the certified rows' share of the estimate rests on their spot checks.

    Args:
        items: a guaranteed audit's item table (``decision`` on the pool rows, ``p_wrong``, the verdicts).
        spot_checks: the share of certified rows drawn, in [0, 1] (0: a plan ``quantify`` refuses).
        seed: the seed of the draws.

    Returns:
        One row per usable item: id, role (labelled | pool), p_wrong, sampling_prob, selected, why
        (escalated | spot check | left out of the audit | labelled before) and design (conditional).
    """
    labelled, unlabelled = usable_rows(items)
    used = labelled | unlabelled
    decision = items["decision"].to_numpy(dtype=object) if "decision" in items.columns else np.full(len(items), "")
    certified = unlabelled & np.isin(decision, ("trust", "flip"))
    pi = np.where(certified, float(spot_checks), 1.0)
    drawn = unlabelled & (np.random.default_rng([seed, 1]).random(len(items)) < pi)
    p = items["p_wrong"].to_numpy(float)
    if "p_wrong_cross" in items.columns:  # the labelled rows the audit fitted on: their out-of-fold P
        p = np.where(np.isfinite(p), p, items["p_wrong_cross"].to_numpy(float))
    why = np.where(labelled, "labelled before", np.where(certified, "spot check",
                   np.where(decision == "escalate", "escalated", "left out of the audit")))  # fmt: skip
    return pd.DataFrame({"id": items["id"].astype(str).to_numpy()[used],
                         "role": np.where(unlabelled, "pool", "labelled")[used], "p_wrong": p[used],
                         "sampling_prob": pi[used], "selected": drawn[used], "why": why[used],
                         "design": DESIGNS[1]})  # fmt: skip


def _check(ids: np.ndarray, bad: np.ndarray, message: str) -> None:
    if bad.any():
        raise ValueError(message.format(n=int(bad.sum())) + f", e.g. id {ids[bad][0]!r}")
