"""Does the #1 survive dropping a handful of comparisons? The fewest drops that change the leaderboard.

Broderick, Giordano & Meager's approximate maximum influence perturbation (AMIP; "An automatic
finite-sample robustness metric", arXiv:2011.14999), as Broderick et al. apply it to LLM leaderboards
("Dropping just a handful of preferences can change top large language model rankings",
arXiv:2508.11847): for the difference delta = theta_a - theta_b of two Bradley-Terry strengths, the
first-order effect of removing each comparison, then the fewest removals whose summed effect turns
delta's sign, confirmed by an exact refit.

Each Bradley-Terry fit of :mod:`.leaderboard` is the M-estimate of :mod:`.m_estimation`,

    F(beta) = 1/n sum_lab [l(beta; x, y) - lam l(beta; x, yhat)] + lam/N sum_unl l(beta; x, yhat),

(judge only: y = the judge's verdict on every row, lam = 0; human only: the labelled rows, lam = 0;
PPI++: the tuned lam). Its estimating equation is grad F(beta) = A + B = 0 with A = the mean over the
labelled rows of g_i = x_i [(mu_i - y_i) - lam (mu_i - yhat_i)] and B = lam/N sum_unl x_i (mu_i - yhat_i).
Dropping labelled comparison i removes both its terms and renormalises 1/n: the gradient at beta-hat
becomes (A - g_i) / (n - 1), so to first order (one Newton step, H = the Hessian of F)

    d beta_i = H^-1 (g_i - A) / n        (labelled),   d beta_i = H^-1 (g_i - B') / N   (unlabelled),

g_i = lam x_i (mu_i - yhat_i) and B' = N B / lam their mean for an unlabelled row (A = 0 for the
judge-only and human-only fits, whose equation is A = 0 alone). lam is held at its value (the refits
tune it again). The effect on delta is v . d beta_i, v = C_a - C_b the rows of the contrast; for every
target at once it is one product with H^-1 V. Removals add to first order: the approximate set is the
comparisons of most negative effect, taken until the linearised delta reaches 0.

The approximation is then checked: the estimator is refitted without those comparisons (the same
M-estimation, :func:`.m_estimation.logistic_refit` at the fit's lam, warm-started at the fit). When the
order did not flip, the influences are recomputed at the refit and the next first-order set is dropped
(where no set reaches 0, a damped step: the most influential half), up to :data:`MAX_REFITS` refits; once
it flipped, the comparisons whose return keeps the linearised delta <= 0 (at the flipped refit) are put
back and the smaller set refitted (:data:`SHRINK` tries). PPI++'s set is finally refitted with lam
re-tuned, its estimator exactly. ``verified`` says that this last refit really flipped the order (the
challenger level with or ahead of the leader, within :data:`LEVEL` nats). A refit that does not
converge, or leaves a model without comparisons or the graph in pieces, is no leaderboard and flips
nothing. For the #1, every challenger's first-order count is computed and the :data:`CANDIDATES` lowest
are searched; the fewest verified count is reported, with the challenger (``overtaken_by``). The
count is an upper bound on the fewest drops (a set that works); on small random sets it
was within one of a brute-force search (tests/quantify/test_robustness.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from .estimators import HUMAN_ONLY, JUDGE_ONLY
from .leaderboard import _bt_fits, _fit_or_note, _Fits, contrast, design
from .m_estimation import logistic_refit

MAX_REFITS = 12  # refits per target to reach a flip: first-order steps, each from the last refit's influences
SHRINK = 2  # refits per target that try a smaller set (comparisons put back by the flipped refit's influences)
LEVEL = 1e-9  # nats: a challenger this close to the leader is level with it (the order no longer holds)
CANDIDATES = 3  # challengers of the #1 whose sets are refitted (the fewest first-order drops first)
TOP = "#1: "
COLUMNS = ("estimator", "target", "dropped", "share", "ids", "verified", "first_order", "refits", "overtaken_by",
           "comparisons", "note")  # fmt: skip


@dataclass(frozen=True)
class RobustnessRow:
    """The fewest comparisons whose removal changes one order of one estimator's leaderboard.

    Attributes:
        estimator: the estimator whose fit this is (judge only, human only, ppi++, ...).
        target: "#1: <model>" (overtaken by anyone) or "<model_k> > <model_k+1>" (adjacent ranks).
        dropped: how many comparisons were dropped, or None when not estimable.
        comparisons: the comparisons that fit reads (labelled and unlabelled; one per row of the table).
        ids: the dropped comparisons' ``id`` values, in the order they were chosen.
        verified: whether the refit without ``ids`` really flips the order.
        first_order: the count of the first-order approximation alone (None: it finds no set).
        refits: how many refits checked and corrected the count.
        overtaken_by: the model that overtakes (for "#1" rows, the challenger the count is for).
        note: why it is not estimable, or how the count was reached when not by first order alone.
    """

    estimator: str
    target: str
    dropped: int | None
    comparisons: int
    ids: tuple[str, ...] = ()
    verified: bool = False
    first_order: int | None = None
    refits: int = 0
    overtaken_by: str = ""
    note: str = ""

    @property
    def share(self) -> float:
        """The share dropped: dropped / comparisons (NaN when not estimable)."""
        return self.dropped / self.comparisons if self.dropped is not None and self.comparisons else float("nan")

    def to_dict(self) -> dict:
        """The row as the columns of robustness.csv (ids joined by ``;``)."""
        return {"estimator": self.estimator, "target": self.target, "dropped": self.dropped, "share": self.share,
                "ids": ";".join(self.ids), "verified": self.verified, "first_order": self.first_order,
                "refits": self.refits, "overtaken_by": self.overtaken_by, "comparisons": self.comparisons,
                "note": self.note}  # fmt: skip

    def summary(self) -> str:
        """One line: "#1 (human only): gpt-4 survives until 7 of 1,234 comparisons (0.57 %) are dropped (verified)"."""
        what = self.target.removeprefix(TOP)
        head = f"#1 ({self.estimator}): {what}" if self.target.startswith(TOP) else f"{self.target} ({self.estimator})"
        if self.dropped is None:
            return f"{head}: not estimable ({self.note})"
        check = "verified" if self.verified else "not verified by refit"
        by = f", overtaken by {self.overtaken_by}" if self.overtaken_by else ""
        return (f"{head} survives until {self.dropped:,} of {self.comparisons:,} comparisons "
                f"({100 * self.share:.2f} %) are dropped ({check}{by})")  # fmt: skip


@dataclass(frozen=True)
class Robustness:
    """Every estimator's robustness rows: the #1 first, then each adjacent pair from the top.

    Attributes:
        rows: the :class:`RobustnessRow` of each (estimator, target).
    """

    rows: tuple[RobustnessRow, ...] = field(default_factory=tuple)

    def to_frame(self) -> pd.DataFrame:
        """robustness.csv's table: one row per (estimator, target), the columns of :data:`COLUMNS`."""
        return pd.DataFrame([r.to_dict() for r in self.rows], columns=list(COLUMNS))

    def summary(self) -> list[str]:
        """The "#1" rows as lines for the terminal."""
        return [r.summary() for r in self.rows if r.target.startswith(TOP)]


@dataclass(frozen=True)
class _Problem:
    """One estimator's fit as an M-estimation over its m comparisons (the rows of the table it reads).

    X (m, d) design; y / yhat (m,) outcome and prediction; lab / unl (m,) bool; lam the fit's lam;
    models (K,) the leaderboard's models; code_a / code_b (m,) their indices in it; ids (m,) str; beta (d,) the fit;
    tuned: whether the fit tunes lam (PPI++) or holds it at 0 (judge only, human only).
    """

    estimator: str
    X: np.ndarray
    y: np.ndarray
    yhat: np.ndarray
    lab: np.ndarray
    unl: np.ndarray
    lam: float
    models: list
    code_a: np.ndarray
    code_b: np.ndarray
    ids: np.ndarray
    beta: np.ndarray
    tuned: bool


def influences(p: _Problem, beta: np.ndarray, kept: np.ndarray, V: np.ndarray) -> np.ndarray:
    """First-order change of each v . beta when each comparison is dropped (module docstring).

    Args:
        p: the estimator's problem.
        beta: (d,) the fit on the ``kept`` comparisons.
        kept: (m,) bool, the comparisons the fit reads; for the others the value is minus the change of
            putting them back.
        V: (d, T) one column v = C_a - C_b per target.

    Returns:
        (m, T) the change of each target's delta (nats) when the comparison is dropped.
    """
    lab, unl = p.lab & kept, p.unl & kept
    n, big_n = max(lab.sum(), 1), max(unl.sum(), 1)
    mu = 1.0 / (1.0 + np.exp(-(p.X @ beta)))
    resid = np.where(p.lab, (mu - p.y) - p.lam * (mu - p.yhat), p.lam * (mu - p.yhat))
    weight = np.where(p.lab, (1 - p.lam) / n, p.lam / big_n) * (lab | unl)
    hess = (p.X.T * (weight * mu * (1 - mu))) @ p.X
    U = np.linalg.solve(hess + 1e-12 * np.eye(len(beta)), V)
    scores = resid[:, None] * (p.X @ U)  # g_i . u for every target
    mean_lab = scores[lab].mean(axis=0) if lab.any() else 0.0
    mean_unl = scores[unl].mean(axis=0) if unl.any() else 0.0
    return np.where(p.lab[:, None], (scores - mean_lab) / n, (scores - mean_unl) / big_n)


def first_order_set(effect: np.ndarray, delta: float, allowed: np.ndarray) -> np.ndarray | None:
    """The fewest ``allowed`` comparisons whose summed ``effect`` brings ``delta`` to <= 0, most negative first.

    Args:
        effect: (m,) first-order change of delta when each comparison is dropped.
        delta: the current difference (nats, > 0).
        allowed: (m,) bool, the comparisons that may be dropped.

    Returns:
        Their indices in the order taken, or None when even every negative one is not enough.
    """
    candidates = np.flatnonzero(allowed & (effect < 0))
    order = candidates[np.argsort(effect[candidates], kind="stable")]
    reached = np.flatnonzero(delta + np.cumsum(effect[order]) <= 0)
    return order[: reached[0] + 1] if len(reached) else None


def _step(effect: np.ndarray, delta: float, allowed: np.ndarray) -> np.ndarray:
    """The next comparisons to drop: the first-order set, or a damped step where none reaches 0.

    The damped step: the most negative ones that give half of the linearised reduction available (a
    refit follows, and its own influences take the next step).
    """
    found = first_order_set(effect, delta, allowed)
    if found is not None:
        return found
    candidates = np.flatnonzero(allowed & (effect < 0))
    order = candidates[np.argsort(effect[candidates], kind="stable")]
    cum = np.cumsum(effect[order])
    return order[: int(np.argmax(cum <= cum[-1] / 2)) + 1] if len(order) else order


def _linked(p: _Problem, kept: np.ndarray) -> bool:
    """Whether the ``kept`` (m,) comparisons link every model (one component, as :func:`.leaderboard.components`)."""
    k = len(p.models)
    graph = csr_matrix((np.ones(int(kept.sum())), (p.code_a[kept], p.code_b[kept])), shape=(k, k))
    return connected_components(graph, directed=False)[0] == 1


def _refit(p: _Problem, order: list, beta0: np.ndarray, tuned: bool = False) -> np.ndarray | None:
    """The fit's beta (d,) refitted without the comparisons ``order``, or None when that is no leaderboard.

    At the fit's lam, warm-started at ``beta0`` (:func:`.m_estimation.logistic_refit`); ``tuned``: the
    estimator's own fit, lam re-tuned (:func:`.leaderboard._fit_or_note`, PPI++). No leaderboard: fewer
    than 2 labelled comparisons, a model left without comparisons or the graph in pieces, no convergence.
    """
    kept = np.ones(len(p.ids), bool)
    kept[order] = False
    lab, unl = p.lab & kept, p.unl & kept
    if lab.sum() < 2 or not _linked(p, kept):
        return None
    if tuned:
        fit, _ = _fit_or_note(p.X, p.y, p.yhat, lab, unl, None, None) if unl.any() else (None, "")
        return None if fit is None else fit.theta
    beta, ok = logistic_refit(p.X, p.y, p.yhat, lab, unl, p.lam, beta0)
    return beta if ok and np.isfinite(beta).all() else None


def _put_back(p: _Problem, beta: np.ndarray, order: list, v: np.ndarray) -> list:
    """``order`` less the comparisons whose return keeps the linearised delta <= 0 at the refit ``beta``."""
    kept = np.ones(len(p.ids), bool)
    kept[order] = False
    back = -influences(p, beta, kept, v[:, None])[:, 0]  # change of delta when each comes back
    idx = np.asarray(order)
    returned = idx[np.argsort(back[idx], kind="stable")]
    fits = np.flatnonzero(float(v @ beta) + np.cumsum(back[returned]) <= -LEVEL)
    out = set(returned[fits[-1] + 1 :].tolist()) if len(fits) else set(order)
    return [i for i in order if i in out]


@dataclass(frozen=True)
class _Found:
    """One target's search: the dropped indices (None: none found), verified, first-order count, refits, note."""

    order: list | None
    verified: bool
    first_order: int | None
    refits: int
    note: str = ""


def _reach(p: _Problem, v: np.ndarray, effect: np.ndarray) -> tuple[list | None, np.ndarray | None, int, str]:
    """Drop first-order steps, each refitted, until the order flips: (set, its refit, refits, why not)."""
    order, beta, step, refits = [], p.beta, _step(effect, float(v @ p.beta), np.ones(len(effect), bool)), 0
    while refits < MAX_REFITS:
        if not len(step):
            return None, None, refits, f"no comparison left to drop lowers the difference (after {len(order)})"
        refit, refits = _refit(p, order + step.tolist(), beta), refits + 1
        if refit is None and len(step) > 1:
            step = step[: len(step) // 2]  # no leaderboard: a smaller step
            continue
        if refit is None:
            return None, None, refits, f"dropping {len(order) + 1} comparisons leaves no leaderboard"
        order, beta = order + step.tolist(), refit
        if float(v @ beta) <= LEVEL:
            return order, beta, refits, ""
        kept = np.ones(len(effect), bool)
        kept[order] = False
        step = _step(influences(p, beta, kept, v[:, None])[:, 0], float(v @ beta), kept)
    return None, None, refits, f"not flipped after {refits} refits ({len(order)} comparisons dropped)"


def search(p: _Problem, v: np.ndarray, effect: np.ndarray) -> _Found:
    """The fewest comparisons whose removal turns delta = v . beta to <= 0: first order, then refits.

    Drops first-order steps until a refit flips the order (:func:`_reach`), puts back what the refit's
    own influences say is not needed while a refit confirms it (:func:`_put_back`), and for PPI++
    checks the set with lam re-tuned.

    Args:
        p: the estimator's problem (its fit ``p.beta`` has delta > 0).
        v: (d,) the target's contrast, C_a - C_b.
        effect: (m,) first-order change of delta when each comparison is dropped, at ``p.beta``.

    Returns:
        The :class:`_Found`.
    """
    first = first_order_set(effect, float(v @ p.beta), np.ones(len(effect), bool))
    first = None if first is None else len(first)
    best, beta, refits, why = _reach(p, v, effect)
    if best is None:
        return _Found(None, False, first, refits, why)
    for _ in range(SHRINK):
        fewer = _put_back(p, beta, best, v)
        if len(fewer) >= len(best):
            break
        refit, refits = _refit(p, fewer, beta), refits + 1
        if refit is None or float(v @ refit) > LEVEL:
            break
        best, beta = fewer, refit
    if p.tuned:
        refit, refits = _refit(p, best, beta, tuned=True), refits + 1
        if refit is None or float(v @ refit) > LEVEL:
            return _Found(best, False, first, refits, f"flips at lam = {p.lam:.3f}, not with lam re-tuned")
    return _Found(best, True, first, refits)


def _row(p: _Problem, target: str, found: _Found, by: str = "") -> RobustnessRow:
    """The :class:`RobustnessRow` of one search (``by``: the challenger, for the #1)."""
    order = found.order or []
    how = "" if not found.verified or len(order) == found.first_order else (
        f"first order {found.first_order or 'found no set'}; {found.refits} refits reached {len(order)}")  # fmt: skip
    note = found.note or how
    if not found.verified and found.order is None:
        return RobustnessRow(p.estimator, target, None, len(p.ids), (), False, found.first_order, found.refits, by,
                             note or "no set of drops found")  # fmt: skip
    return RobustnessRow(p.estimator, target, len(order), len(p.ids), tuple(p.ids[order]), found.verified,
                         found.first_order, found.refits, by, note)  # fmt: skip


def _size(found: _Found) -> float:
    """How many comparisons ``found`` drops (inf when it found none)."""
    return np.inf if found.order is None else len(found.order)


def estimator_rows(p: _Problem) -> list[RobustnessRow]:
    """The #1 (over every challenger) and each adjacent pair of one estimator's leaderboard.

    Args:
        p: the estimator's problem, its fit converged.

    Returns:
        The "#1: <model>" row, then "<model_k> > <model_k+1>" from the top.
    """
    c = contrast(len(p.models))
    theta = c @ p.beta
    rank = sorted(range(len(p.models)), key=lambda k: (-theta[k], p.models[k]))
    pairs = list(zip(rank[:-1], rank[1:])) + [(rank[0], k) for k in rank[2:]]
    V = np.stack([c[a] - c[b] for a, b in pairs], axis=1)
    effects = influences(p, p.beta, np.ones(len(p.ids), bool), V)
    found = {}

    def solve(j):
        if j not in found:
            level = float(V[:, j] @ p.beta) <= LEVEL
            found[j] = _Found([], True, 0, 0, "level already") if level else search(p, V[:, j], effects[:, j])
        return found[j]

    adjacent = len(rank) - 1
    challengers = [0, *range(adjacent, len(pairs))]  # the #1 against #2, #3, ...
    firsts = [first_order_set(effects[:, j], float(V[:, j] @ p.beta), np.ones(len(p.ids), bool)) for j in challengers]
    sizes = [np.inf if f is None else len(f) for f in firsts]
    candidates = [challengers[i] for i in np.argsort(sizes, kind="stable")[:CANDIDATES]]
    best = min(candidates, key=lambda j: (not solve(j).verified, _size(solve(j))))
    top = p.models[rank[0]]
    rows = [_row(p, TOP + top, solve(best), p.models[pairs[best][1]])]
    return rows + [_row(p, f"{p.models[a]} > {p.models[b]}", solve(j)) for j, (a, b) in enumerate(pairs[:adjacent])]


def not_estimable(estimator: str, why: str, comparisons: int = 0) -> RobustnessRow:
    """An explicit "#1" row without a count, saying ``why``.

    Args:
        estimator: the estimator whose leaderboard has no count.
        why: the reason (one model, a disconnected graph, a fit that is not estimable, ...).
        comparisons: the comparisons its fit would read (0 when none).
    """
    return RobustnessRow(estimator, TOP.rstrip(": "), None, comparisons, note=why)


def _problem(est: str, fits: _Fits, fit, model_a, model_b, inp, ids) -> _Problem:
    """The M-estimation of estimator ``est`` over the rows its fit read (``fits.rows``; human only: labelled)."""
    rows = fits.rows & (inp.labelled if est == HUMAN_ONLY else True)
    judge = np.asarray(next(iter(inp.predictions.values())), float)[rows]
    X, y = design(model_a[rows], model_b[rows], fits.models), np.nan_to_num(np.asarray(inp.y, float)[rows])
    every, none = np.ones(int(rows.sum()), bool), np.zeros(int(rows.sum()), bool)
    if est == JUDGE_ONLY:
        parts = (judge, judge, every, none, False)
    elif est == HUMAN_ONLY:
        parts = (y, y, every, none, False)
    else:
        parts = (y, np.asarray(inp.predictions[est], float)[rows], inp.labelled[rows], inp.unlabelled[rows], True)
    y, yhat, lab, unl, tuned = parts
    codes = pd.Categorical(np.concatenate([model_a[rows], model_b[rows]]), categories=fits.models).codes
    return _Problem(est, X, y, yhat, lab, unl, fit.lam if tuned else 0.0, list(fits.models), codes[: len(y)],
                    codes[len(y) :], ids[rows], np.asarray(fit.theta, float), tuned)  # fmt: skip


def leaderboard_robustness(model_a, model_b, ids, inp) -> Robustness:
    """How many comparisons must be dropped to change each estimator's #1 and each adjacent pair.

    The Bradley-Terry fits are the leaderboard's (:func:`.leaderboard._bt_fits`, with the same rows left
    out); for each converged fit, :func:`estimator_rows`; otherwise an explicit not-estimable row.

    Args:
        model_a: (R,) names of the models whose response is A (self-comparisons already out of ``inp``).
        model_b: (R,) names of the models whose response is B.
        ids: (R,) the comparisons' ids.
        inp: the :class:`~puaudit_jax.quantify.targets.Inputs` of the table.

    Returns:
        The :class:`Robustness`, the judge-only rows first, then human only, then each PPI++.
    """
    estimators = (JUDGE_ONLY, HUMAN_ONLY, *inp.predictions)
    if inp.probability is not None:
        why = "under a label plan (weighted fits): the influence of a weighted comparison is not derived here"
        return Robustness(tuple(not_estimable(e, why) for e in estimators))
    model_a, model_b = np.asarray(model_a).astype(str), np.asarray(model_b).astype(str)
    fits = _bt_fits(model_a, model_b, inp.y, inp.predictions, inp.labelled, inp.unlabelled, None, None)
    rows = []
    for est in estimators:
        source = fits.judge if est == JUDGE_ONLY and isinstance(fits.judge, _Fits) else fits
        few = f"fewer than two models with >= 2 labelled comparisons ({source.models})"
        fit, why = source.fits.get(est, (None, few))
        if fit is None:
            rows.append(not_estimable(est, why))
            continue
        rows += estimator_rows(_problem(est, source, fit, model_a, model_b, inp, np.asarray(ids).astype(str)))
    return Robustness(tuple(rows))


def write_robustness(result: Robustness, folder) -> str:
    """Write robustness.csv (atomically) in ``folder``: :meth:`Robustness.to_frame`.

    Args:
        result: the robustness rows.
        folder: the output folder.

    Returns:
        The file's name.
    """
    from puaudit_runtime.files import write_csv

    write_csv(result.to_frame(), Path(folder) / "robustness.csv")
    return "robustness.csv"


def table_robustness(table: pd.DataFrame, inp) -> Robustness:
    """:func:`leaderboard_robustness` of a comparison table (self-comparisons left out, as the leaderboard does).

    Args:
        table: the comparison table (``id``, ``model_a``, ``model_b``).
        inp: its :class:`~puaudit_jax.quantify.targets.Inputs`.

    Returns:
        The :class:`Robustness`; without model columns, a not-estimable row per estimator.
    """
    from .targets import MODEL_COLUMNS, _between_models, _models

    if not all(c in table.columns for c in MODEL_COLUMNS):
        why = f"the table names no models (columns {list(MODEL_COLUMNS)}): there is no leaderboard"
        return Robustness(tuple(not_estimable(e, why) for e in (JUDGE_ONLY, HUMAN_ONLY, *inp.predictions)))
    ma, mb = _models(table)
    inp, _ = _between_models(ma, mb, inp)
    return leaderboard_robustness(ma, mb, table["id"].astype(str).to_numpy(), inp)
