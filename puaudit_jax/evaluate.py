"""The seed's evaluation protocol (seed 000 §5.1, §6, Appendix A.5; Tables 1, 4-7).

For each of ``seeds`` random splits of the human-labelled comparisons:

1. Per question type, a fraction ``p_ratio`` of the labelled rows stays labelled (floor, at least
   one, at least one left over); the other labelled rows form the **evaluation pool**: their human
   verdicts are hidden (set to "missing") during the audit and kept aside as the truth. With
   ``split_by`` (a column, e.g. LLMFAO's ``prompt``) whole groups of rows are hidden or kept, so the
   labelled rows and the pool never share a prompt's responses (a random split lets them share).
2. :func:`puaudit_jax.audit.audit` runs on the table with hidden labels (it estimates m from a
   held-out part of the visible labelled rows unless m is given, denoises P, scores U = evaluation
   pool + any genuinely unlabelled rows, and flips by its rule).
3. On the evaluation pool (rows the audit actually scored), per question type and overall ("all"):
   Cons_orig = mean(judge == truth), Cons_adj = mean(adjusted == truth) (Appendix A.5), the flip
   rate, the flip precision (share of flips that fixed a wrong verdict), and for the whole audit its
   wall time and peak memory. Calibrated rules add whether they abstained and their estimated gains.
4. ``ceiling=True`` adds the row ``hindsight``: per scoring group, the best number of flips of the
   lowest-scored items chosen *with the hidden labels* -- not a rule, the most any budget could gain.

Several scorers are compared on the same splits; several rules are applied to the same scores
(score rules read the normalised scores, calibrated rules the audit's cross-fitted features,
computed once per audit for every feature the rules need). Results: one row per (scorer, rule, seed, question
type) in ``per_seed``; ``summary`` has mean and std (ddof = 1, as over repeated runs) over seeds.
:func:`sweep` repeats the protocol over values of p_ratio or m (the seed's Tables 6 and 7).

Peak memory is the peak resident set size of the process while the audit ran (sampled every 2 ms
from /proc; ``peak_rss_mb``) and its increase over the RSS just before (``peak_delta_mb``).
"""
from __future__ import annotations

import resource
import threading
import time
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .audit import DEFAULT_RULE, DEFAULT_SCORER, AuditConfig, apply_rule, run_audit, with_flips
from .datasets.exclusions import LABELLED, item_status
from .datasets.verdicts import MISSING
from .embed import PairEmbeddings
from .rules import get_rule, needs_crossfit, rule_feature, rule_name
from .scorers import scorer_name

try:
    from tqdm.auto import tqdm
except ImportError:  # pragma: no cover
    def tqdm(x, **_):
        return x

ALL = "all"


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:  # not Linux: the process peak so far
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PeakMemory:
    """Context manager sampling the process RSS in a thread; ``peak_mb``, ``delta_mb`` after exit."""

    def __init__(self, interval: float = 0.002):
        self.interval, self.peak_mb, self.start_mb = interval, 0.0, 0.0
        self._stop = threading.Event()

    def _run(self):
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, _rss_mb())
            self._stop.wait(self.interval)

    def __enter__(self):
        self.start_mb = self.peak_mb = _rss_mb()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, _rss_mb())

    @property
    def delta_mb(self) -> float:
        return self.peak_mb - self.start_mb


@dataclass(frozen=True)
class Split:
    """One protocol split: the table with hidden labels, the evaluation pool ids and their truth."""

    table: pd.DataFrame
    eval_ids: np.ndarray
    truth: pd.Series  # index: eval id -> hidden human verdict


def split_labels(table: pd.DataFrame, *, p_ratio: float, seed: int, split_by: str | None = None) -> Split:
    """Hide the human labels of all but a ``p_ratio`` share of each question type's labelled rows
    (``split_by``: of each type's groups of rows sharing that column's value; the share is then
    counted in groups, floor, at least one kept and one hidden when the type has two groups)."""
    if not 0 < p_ratio < 1:
        raise ValueError(f"p_ratio must be in (0, 1), got {p_ratio!r}")
    table = table.reset_index(drop=True)
    if split_by is not None:
        if split_by not in table.columns:
            raise ValueError(f"split_by={split_by!r} is not a column of the comparisons")
        if table[split_by].isna().any():
            bad = table.loc[table[split_by].isna(), "id"].astype(str).tolist()[:3]
            raise ValueError(f"split_by column {split_by!r} is missing on rows {bad}")
    status = item_status(table)["status"].to_numpy()
    labelled = np.flatnonzero(status == LABELLED)
    if len(labelled) < 2:
        raise ValueError(f"the protocol needs at least 2 labelled comparisons, have {len(labelled)}")
    types = table["question_type"].astype(object).where(table["question_type"].notna(), "(none)").to_numpy()
    unit = table[split_by].astype(str).to_numpy(dtype=object) if split_by is not None else np.arange(len(table))
    # a group belongs to the type of its first labelled row (groups that straddle types stay whole)
    first = pd.Series(labelled).groupby(unit[labelled]).first()
    unit_type = pd.Series(types[first.to_numpy()], index=first.index)
    rng = np.random.default_rng(seed)
    hidden = []
    for t in sorted(pd.unique(unit_type.to_numpy()), key=str):
        groups = rng.permutation(np.sort(unit_type.index[unit_type.to_numpy() == t].to_numpy()))
        k = 0 if len(groups) == 1 else min(len(groups) - 1, max(1, int(np.floor(p_ratio * len(groups) + 1e-9))))
        hidden.extend(labelled[np.isin(unit[labelled], groups[k:])])
    hidden = np.sort(np.asarray(hidden, int))
    out = table.copy()
    truth = pd.Series(out.loc[hidden, "human"].to_numpy(), index=out.loc[hidden, "id"].astype(str).to_numpy())
    out.loc[hidden, "human"] = MISSING
    return Split(out, truth.index.to_numpy(), truth)


def consistency(pool: pd.DataFrame, truth: pd.Series) -> pd.DataFrame:
    """Cons_orig, Cons_adj and the flip rate of ``pool`` (audit items) against ``truth`` per type + all."""
    pool = pool[pool["id"].isin(truth.index)]
    t = truth.loc[pool["id"]].to_numpy()
    frame = pd.DataFrame({
        "question_type": pool["question_type"].astype(object).where(pool["question_type"].notna(), "(none)").to_numpy(),
        "orig": (pool["judge"].to_numpy() == t), "adj": (pool["adjusted"].to_numpy() == t),
        "flipped": pool["flipped"].to_numpy(bool),
    })
    rows = []
    for qt, part in list(frame.groupby("question_type", sort=True)) + [(ALL, frame)]:
        flipped = part["flipped"].to_numpy(bool)
        rows.append({"question_type": qt, "n_eval": len(part), "n_flipped": int(flipped.sum()),
                     "cons_orig": part["orig"].mean() if len(part) else np.nan,
                     "cons_adj": part["adj"].mean() if len(part) else np.nan,
                     "flip_rate": flipped.mean() if len(part) else np.nan,
                     "flip_precision": (~part["orig"].to_numpy()[flipped]).mean() if flipped.any() else np.nan})
    return pd.DataFrame(rows)


def hindsight_flips(pool: pd.DataFrame, truth: pd.Series) -> np.ndarray:
    """(n_pool,) flips of the best budget per scoring group chosen with the hidden labels: flip the
    k lowest-scored items, k maximising agreement with ``truth`` (items not in ``truth`` never flip)."""
    flips = np.zeros(len(pool), bool)
    known = pool["id"].isin(truth.index).to_numpy()
    wrong = np.zeros(len(pool), bool)
    wrong[known] = pool["judge"].to_numpy()[known] != truth.loc[pool["id"][known]].to_numpy()
    groups, scores = pool["group"].to_numpy(), pool["score"].to_numpy()
    for g in pd.unique(groups):
        rows = np.flatnonzero((groups == g) & known)
        order = rows[np.argsort(scores[rows], kind="stable")]
        gain = np.cumsum(np.where(wrong[order], 1, -1))
        best = int(np.argmax(gain)) + 1 if len(gain) and gain.max() > 0 else 0
        flips[order[:best]] = True
    return flips


def reapply_rule(result, rule, *, seed: int | None = None) -> tuple[pd.DataFrame, dict | None]:
    """The pool of an audit result with flips / adjusted verdicts recomputed by another rule on the
    same scores (or cross-fitted features): (pool rows of the items, calibrated decision summary)."""
    cfg = result.config
    items, info = apply_rule(result.items, rule, crossfit=result.crossfit, m=result.report["m"]["value"],
                             eta=cfg.eta, seed=cfg.seed if seed is None else seed)
    return items[items["role"] == "U"], info


@dataclass(frozen=True)
class EvalResult:
    """per_seed: one row per (scorer, rule, seed, question_type); summary: mean / std over seeds;
    meta: the protocol settings (seeds, p_ratio, audit config) and total wall time."""

    per_seed: pd.DataFrame
    summary: pd.DataFrame
    meta: dict = field(default_factory=dict)
    last_audit: object = field(default=None, repr=False)
    last_truth: pd.Series = field(default=None, repr=False)


def summarize_runs(per_seed: pd.DataFrame, by=("scorer", "rule", "question_type")) -> pd.DataFrame:
    """Mean and std (ddof = 1) over seeds of the consistency columns; time / memory means."""
    by = list(by)
    per_seed = per_seed.assign(m_used=per_seed["m"])
    g = per_seed.groupby(by, sort=False)
    out = g.agg(n=("n_eval", "mean"), seeds=("seed", "nunique"),
                cons_orig_mean=("cons_orig", "mean"), cons_orig_std=("cons_orig", "std"),
                cons_adj_mean=("cons_adj", "mean"), cons_adj_std=("cons_adj", "std"),
                flip_rate=("flip_rate", "mean"), m_mean=("m_used", "mean"),
                time_s=("time_s", "mean"), peak_rss_mb=("peak_rss_mb", "max"),
                peak_delta_mb=("peak_delta_mb", "max")).reset_index()
    out["gain_mean"] = out["cons_adj_mean"] - out["cons_orig_mean"]
    extra = {c: (c, "mean") for c in ("flip_precision", "abstained", "crossfit_gain", "expected_gain")
             if c in per_seed}
    if extra:
        means = g.agg(**extra).reset_index()
        out = out.merge(means, on=by, how="left")
    return out


def evaluate(comparisons: pd.DataFrame, embeddings: PairEmbeddings, *, scorers=(DEFAULT_SCORER,),
             rules=(DEFAULT_RULE, "seed"),
             seeds=10, p_ratio: float = 0.2, split_by: str | None = None, ceiling: bool = False,
             config: AuditConfig | None = None, progress: bool = True, **audit_options) -> EvalResult:
    """Run the protocol. ``seeds``: a count (seeds 0..n-1) or a list of seeds. ``scorers`` and
    ``rules``: names, callables or :class:`~puaudit_jax.rules.CalibratedRule` objects; the audit
    runs with the first rule and every other rule is re-applied to its scores / cross-fitted
    features. ``split_by``: hide labels by groups of this column (see :func:`split_labels`); pass
    ``cluster_by`` too to keep the cross-fitting folds grouped the same way. ``ceiling``: add the
    ``hindsight`` row. ``audit_options`` override ``config`` (e.g. m=0.9, holdout=0.3)."""
    t0 = time.perf_counter()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    scorers, rules = list(scorers), list(rules)
    for r in rules:  # unknown names fail here, before any audit runs
        get_rule(r)
    base = replace(config or AuditConfig(), **audit_options)
    features = set(base.crossfit_features) | {rule_feature(r) for r in rules if needs_crossfit(r)}
    base = replace(base, crossfit_features=tuple(sorted(features)))
    rows = []
    last = last_truth = None
    jobs = [(s, sc) for s in seed_list for sc in scorers]
    for seed, scorer in tqdm(jobs, desc="protocol", disable=not progress):
        split = split_labels(comparisons, p_ratio=p_ratio, seed=seed, split_by=split_by)
        cfg = replace(base, scorer=scorer, rule=rules[0], seed=seed)
        with PeakMemory() as mem:
            result = run_audit(split.table, embeddings, cfg)
        elapsed = result.report["timings_s"]["total"]
        m = result.report["m"]["value"]
        outcomes = [(rule, *((result.pool, result.report["decision"]) if r_i == 0 else reapply_rule(result, rule)))
                    for r_i, rule in enumerate(rules)]
        if ceiling:
            outcomes.append(("hindsight", with_flips(result.pool, hindsight_flips(result.pool, split.truth)), None))
        for rule, pool, info in outcomes:
            cons = consistency(pool, split.truth)
            if info is not None:
                cons["abstained"] = float(info["abstained"])
                cons["crossfit_gain"] = info.get("crossfit_gain", np.nan)
                cons["expected_gain"] = info.get("expected_gain", np.nan)
            cons.insert(0, "seed", seed)
            cons.insert(0, "rule", rule_name(rule))
            cons.insert(0, "scorer", scorer_name(scorer))
            cons["m"] = m
            cons["time_s"] = elapsed
            cons["peak_rss_mb"] = mem.peak_mb
            cons["peak_delta_mb"] = mem.delta_mb
            cons["solver_paths"] = ",".join(f"{k}x{v}" for k, v in result.report["solver_paths"].items())
            rows.append(cons)
        last, last_truth = result, split.truth
    per_seed = pd.concat(rows, ignore_index=True)
    meta = {"seeds": seed_list, "p_ratio": p_ratio, "split_by": split_by, "ceiling": ceiling,
            "scorers": [scorer_name(s) for s in scorers],
            "rules": [rule_name(r) for r in rules], "audit_config": base.to_dict(),
            "embeddings": {"source": embeddings.source, "dim": embeddings.dim},
            "n_labelled": int((item_status(comparisons)["status"] == LABELLED).sum()),
            "wall_time_s": time.perf_counter() - t0}
    return EvalResult(per_seed, summarize_runs(per_seed), meta, last, last_truth)


def sweep(comparisons: pd.DataFrame, embeddings: PairEmbeddings, *, param: str, values, progress: bool = True,
          **kwargs) -> EvalResult:
    """The protocol for each value of ``param`` ("p_ratio" or "m"); results carry a ``param`` column."""
    if param not in ("p_ratio", "m"):
        raise ValueError(f"param must be 'p_ratio' or 'm', got {param!r}")
    per_seed, metas = [], []
    for value in tqdm(list(values), desc=f"sweep {param}", disable=not progress):
        res = evaluate(comparisons, embeddings, progress=False, **{**kwargs, param: value})
        part = res.per_seed.copy()
        if param == "m":  # the per-seed m column is the given m itself
            part = part.drop(columns="m")
        part.insert(0, param, value)
        per_seed.append(part)
        metas.append(res.meta)
    per_seed = pd.concat(per_seed, ignore_index=True)
    summary = summarize_runs(per_seed, by=(param, "scorer", "rule", "question_type"))
    return EvalResult(per_seed, summary, {"param": param, "values": list(values), "runs": metas})
