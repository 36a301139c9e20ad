"""The seed's evaluation protocol (seed 000 §5.1, §6, Appendix A.5; Tables 1, 4-7).

For each of ``seeds`` random splits of the human-labelled comparisons:

1. Per question type, a fraction ``p_ratio`` of the labelled rows stays labelled (floor, at least
   one, at least one left over); the other labelled rows form the **evaluation pool**: their human
   verdicts are hidden (set to "missing") during the audit and kept aside as the truth.
2. :func:`puaudit_jax.audit.audit` runs on the table with hidden labels (it estimates m from a
   held-out part of the visible labelled rows unless m is given, denoises P, scores U = evaluation
   pool + any genuinely unlabelled rows, and flips by its rule).
3. On the evaluation pool (rows the audit actually scored), per question type and overall ("all"):
   Cons_orig = mean(judge == truth), Cons_adj = mean(adjusted == truth) (Appendix A.5), the flip
   rate, and for the whole audit its wall time and peak memory.

Several scorers are compared on the same splits; several rules are applied to the same scores
(a rule only reads the normalised scores). Results: one row per (scorer, rule, seed, question
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

from .audit import AuditConfig, run_audit
from .datasets.exclusions import LABELLED, item_status
from .datasets.verdicts import MISSING
from .embed import PairEmbeddings
from .rules import RuleContext, get_rule, rule_name
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


def split_labels(table: pd.DataFrame, *, p_ratio: float, seed: int) -> Split:
    """Hide the human labels of all but a ``p_ratio`` share of each question type's labelled rows."""
    if not 0 < p_ratio < 1:
        raise ValueError(f"p_ratio must be in (0, 1), got {p_ratio!r}")
    table = table.reset_index(drop=True)
    status = item_status(table)["status"].to_numpy()
    labelled = np.flatnonzero(status == LABELLED)
    if len(labelled) < 2:
        raise ValueError(f"the protocol needs at least 2 labelled comparisons, have {len(labelled)}")
    types = table["question_type"].astype(object).where(table["question_type"].notna(), "(none)").to_numpy()
    rng = np.random.default_rng(seed)
    hidden = []
    for t in sorted(pd.unique(types[labelled]), key=str):
        rows = rng.permutation(labelled[types[labelled] == t])
        if len(rows) == 1:
            hidden.extend(rows)
            continue
        k = min(len(rows) - 1, max(1, int(np.floor(p_ratio * len(rows) + 1e-9))))
        hidden.extend(rows[k:])
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
        rows.append({"question_type": qt, "n_eval": len(part), "n_flipped": int(part["flipped"].sum()),
                     "cons_orig": part["orig"].mean() if len(part) else np.nan,
                     "cons_adj": part["adj"].mean() if len(part) else np.nan,
                     "flip_rate": part["flipped"].mean() if len(part) else np.nan})
    return pd.DataFrame(rows)


def reapply_rule(items: pd.DataFrame, rule, *, m: float, eta: float, seed: int) -> pd.DataFrame:
    """The audit's pool with flips / adjusted verdicts recomputed by another rule on the same scores."""
    from .audit import flip_verdict

    pool = items[items["role"] == "U"].copy()
    fn = get_rule(rule)
    for g, part in pool.groupby("group", sort=False):
        flips = np.asarray(fn(part["score"].to_numpy(), RuleContext(m=m, eta=eta, group=str(g), seed=seed)), bool)
        pool.loc[part.index, "flipped"] = flips
    pool["adjusted"] = np.where(pool["flipped"], flip_verdict(pool["judge"]), pool["judge"])
    return pool


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
    return out


def evaluate(comparisons: pd.DataFrame, embeddings: PairEmbeddings, *, scorers=("pot",), rules=("seed",),
             seeds=10, p_ratio: float = 0.2, config: AuditConfig | None = None, progress: bool = True,
             **audit_options) -> EvalResult:
    """Run the protocol. ``seeds``: a count (seeds 0..n-1) or a list of seeds. ``scorers`` and
    ``rules``: names or callables; the audit runs with the first rule and every other rule is
    re-applied to its scores. ``audit_options`` override ``config`` (e.g. m=0.9, holdout=0.3)."""
    t0 = time.perf_counter()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    scorers, rules = list(scorers), list(rules)
    base = replace(config or AuditConfig(), **audit_options)
    rows = []
    last = last_truth = None
    jobs = [(s, sc) for s in seed_list for sc in scorers]
    for seed, scorer in tqdm(jobs, desc="protocol", disable=not progress):
        split = split_labels(comparisons, p_ratio=p_ratio, seed=seed)
        cfg = replace(base, scorer=scorer, rule=rules[0], seed=seed)
        with PeakMemory() as mem:
            result = run_audit(split.table, embeddings, cfg)
        elapsed = result.report["timings_s"]["total"]
        m = result.report["m"]["value"]
        for r_i, rule in enumerate(rules):
            pool = result.pool if r_i == 0 else reapply_rule(result.items, rule, m=m, eta=cfg.eta, seed=seed)
            cons = consistency(pool, split.truth)
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
    meta = {"seeds": seed_list, "p_ratio": p_ratio, "scorers": [scorer_name(s) for s in scorers],
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
