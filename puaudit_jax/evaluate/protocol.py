"""The paper's evaluation protocol (PUAudit §5.1, §6, Appendix A.5; Tables 1, 4-7).

For each of ``seeds`` random splits of the human-labelled comparisons (:func:`split_labels`):
the audit runs on the table with most labels hidden, and on the evaluation pool (the hidden rows)
:func:`consistency` measures Cons_orig / Cons_adj, flip rate and precision per question type and
overall, with the audit's wall time and peak memory. Calibrated rules add whether they abstained
and their estimated gains. ``ceiling`` adds the row ``hindsight`` (:func:`hindsight_flips`).

What is compared are (scorer, rule) pairs. By default the two that mean something: the default
audit (``knn`` scores, the ``evidence`` calibrated rule) and the paper's configuration (``pot`` scores,
``paper`` rule). ``scorers=`` / ``rules=`` ask for their full grid instead. Each scorer's audit runs
once per split with its first rule; its other rules are re-applied to the same scores (or
cross-fitted features). Results: one row per (scorer, rule, seed, question type) in ``per_seed``;
``summary`` has mean and std (ddof = 1, as over repeated runs) over seeds. :func:`sweep` repeats
the protocol over values of p_ratio or m (the paper's Tables 6 and 7).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field, replace

import pandas as pd

from puaudit_runtime.deprecation import replace_deprecated

from ..audit import AuditConfig, AuditResult, apply_rule, run_audit, with_flips
from ..audit.embed import PairEmbeddings
from ..audit.rules import get_rule, needs_crossfit, rule_feature, rule_name
from ..audit.scorers import scorer_name
from ..datasets.exclusions import LABELLED, item_status
from .config import DEFAULT_PAIRS, GRID_RULES, GRID_SCORERS, Protocol  # light, for the CLI
from .consistency import consistency, hindsight_flips
from .memory import PeakMemory
from .splits import split_labels

try:
    from tqdm.auto import tqdm
except ImportError:  # pragma: no cover

    def tqdm(x, **_):
        """No progress bar: ``x`` as is."""
        return x


@dataclass(frozen=True)
class EvalResult:
    """The protocol's result tables and what its figures need.

    per_seed: one row per (scorer, rule, seed, question_type); summary: mean / std over seeds;
    meta: the protocol settings (seeds, p_ratio, pairs, audit config) and total wall time;
    first_audit / first_truth: the first scorer's audit on the first seed and that split's hidden
    labels (for figures).
    """

    per_seed: pd.DataFrame
    summary: pd.DataFrame
    meta: dict = field(default_factory=dict)
    first_audit: AuditResult | None = field(default=None, repr=False)
    first_truth: pd.Series | None = field(default=None, repr=False)


def reapply_rule(result: AuditResult, rule, *, seed: int | None = None):
    """The pool of an audit result with flips / adjusted verdicts recomputed by another rule.

    On the same scores (or cross-fitted features).

    Args:
        result: the audit's result.
        rule: a rule name, a :class:`~puaudit_jax.audit.rules.CalibratedRule` or a score-rule callable.
        seed: seed of the calibrated rule's bootstrap (None: the audit's).

    Returns:
        (pool rows of the items, the calibrated rule's decision summary or None).
    """
    cfg = result.config
    items, info = apply_rule(
        result.items,
        rule,
        crossfit=result.crossfit,
        m=result.report.m.value,
        eta=cfg.eta,
        seed=cfg.seed if seed is None else seed,
    )
    return items[items["role"] == "U"], info


def summarize_runs(per_seed: pd.DataFrame, by=("scorer", "rule", "question_type")) -> pd.DataFrame:
    """Mean and std (ddof = 1) over seeds of the consistency columns; time / memory means."""
    by = list(by)
    per_seed = per_seed.assign(m_used=per_seed["m"])
    g = per_seed.groupby(by, sort=False)
    out = g.agg(
        n=("n_eval", "mean"),
        seeds=("seed", "nunique"),
        cons_orig_mean=("cons_orig", "mean"),
        cons_orig_std=("cons_orig", "std"),
        cons_adj_mean=("cons_adj", "mean"),
        cons_adj_std=("cons_adj", "std"),
        flip_rate=("flip_rate", "mean"),
        m_mean=("m_used", "mean"),
        time_s=("time_s", "mean"),
        peak_rss_mb=("peak_rss_mb", "max"),
        peak_delta_mb=("peak_delta_mb", "max"),
    ).reset_index()
    out["gain_mean"] = out["cons_adj_mean"] - out["cons_orig_mean"]
    extra = {c: (c, "mean") for c in ("flip_precision", "abstained", "crossfit_gain", "expected_gain", "coverage",
                                      "certified_agreement") if c in per_seed}  # fmt: skip
    if "violated" in per_seed:  # the share of splits whose certified rows fell below the guarantee
        extra["violation_rate"] = ("violated", "mean")
    if extra:
        means = g.agg(**extra).reset_index()
        out = out.merge(means, on=by, how="left")
    return out


def pairs_by_scorer(pairs=None, scorers=None, rules=None) -> list[tuple[object, list]]:
    """[(scorer, [rules])] in order of first appearance.

    Args:
        pairs: (scorer, rule) pairs, or None.
        scorers: the grid's scorers (None with ``rules`` given: :data:`GRID_SCORERS`).
        rules: the grid's rules (None with ``scorers`` given: :data:`GRID_RULES`); with neither given,
            ``pairs`` or :data:`DEFAULT_PAIRS`.

    Returns:
        One (scorer, rules) entry per scorer name.

    Raises:
        ValueError: both pairs and a grid, an unknown rule, or no pair.
    """
    if scorers is not None or rules is not None:
        if pairs is not None:
            raise ValueError("give either pairs or scorers/rules (their grid), not both")
        pairs = list(itertools.product(scorers or GRID_SCORERS, rules or GRID_RULES))
    out: dict[str, tuple[object, list]] = {}
    for scorer, rule in DEFAULT_PAIRS if pairs is None else pairs:
        get_rule(rule)  # unknown names fail here, before any audit runs
        out.setdefault(scorer_name(scorer), (scorer, []))[1].append(rule)
    if not out:
        raise ValueError("nothing to evaluate: no (scorer, rule) pair")
    return list(out.values())


def settings_of(
    entry: str, protocol: Protocol | None, config: AuditConfig | None, options: dict, stacklevel: int = 4
) -> tuple[Protocol, AuditConfig]:
    """The protocol and the audit's settings of a call, its deprecated keyword ``options`` set on them.

    Args:
        entry: the function called, for the messages ("evaluate").
        protocol: the :class:`Protocol` given (None: its defaults).
        config: the :class:`~puaudit_jax.audit.AuditConfig` given (None: its defaults).
        options: the keywords the function took before these objects (fields of either); each given one
            is set on its object with a DeprecationWarning naming the objects to pass instead
            (:func:`~puaudit_runtime.deprecation.replace_deprecated`; for one release).
        stacklevel: of the warning: the frames up to the user's call.

    Returns:
        ``(protocol, config)``.

    Raises:
        TypeError: a keyword that is a field of neither.
    """
    proto = {f.name for f in dataclasses.fields(Protocol)}
    audit = {f.name for f in dataclasses.fields(AuditConfig)}
    unknown = set(options) - proto - audit
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}: neither Protocol nor AuditConfig fields")
    configs = {"protocol": protocol or Protocol(), "config": config or AuditConfig()}
    out = replace_deprecated(entry, configs, options, stacklevel=stacklevel)
    return out["protocol"], out["config"]


def _outcome_rows(result: AuditResult, rules: list, truth: pd.Series, ceiling: bool) -> list[tuple]:
    """[(rule, pool after the rule, decision summary or None)] of one audit."""
    outcomes = [(rules[0], result.pool, result.report.decision)]
    plain = result.pool.drop(columns=["decision"], errors="ignore")  # the guarantee certified the first rule only
    outcomes += [(rule, pool.drop(columns=["decision"], errors="ignore"), info)
                 for rule in rules[1:] for pool, info in [reapply_rule(result, rule)]]  # fmt: skip
    if ceiling:
        outcomes.append(("hindsight", with_flips(plain, hindsight_flips(plain, truth)), None))
    return outcomes


def guaranteed_first(rules: list, guarantee: float | None) -> list:
    """``rules`` with, under a ``guarantee``, the first calibrated one moved first (the audit certifies by its rule)."""
    calibrated = [r for r in rules if needs_crossfit(r)]
    if guarantee is None or not calibrated:
        return list(rules)
    return [calibrated[0], *(r for r in rules if r is not calibrated[0])]


def guarantee_scope(groups: list[tuple[object, list]], guarantee: float | None) -> dict | None:
    """``{"A", "applies_to", "not_applicable"}``: the ``scorer:rule`` pairs a guarantee certifies and the others.

    Each scorer's audit is certified by its first calibrated rule; the other pairs are compared uncertified.

    Args:
        groups: [(scorer, [rules])] as :func:`pairs_by_scorer` gives them.
        guarantee: the agreement A, or None (no guarantee: None is returned).

    Raises:
        ValueError: a guarantee where no rule compared is calibrated (none gives a P(judge wrong)).
    """
    if guarantee is None:
        return None
    pairs = [(scorer_name(s), rule_name(r), r) for s, rules in groups for r in rules]
    certified = {(scorer_name(s), rule_name(guaranteed_first(rules, guarantee)[0])) for s, rules in groups
                 if any(needs_crossfit(r) for r in rules)}  # fmt: skip
    if not certified:
        raise ValueError(f"guarantee {guarantee:g} needs a calibrated rule (it certifies by P(judge wrong)); the rules "
                         f"compared, {sorted({n for _, n, _ in pairs})}, give none: add one (evidence, calibrated, "
                         "calibrated-platt, two-sided, two-sided-platt), e.g. --rules evidence,paper")  # fmt: skip
    return {
        "A": guarantee,
        "applies_to": [f"{s}:{n}" for s, n, _ in pairs if (s, n) in certified],
        "not_applicable": [f"{s}:{n}" for s, n, _ in pairs if (s, n) not in certified],
    }


def uncertified(config: AuditConfig) -> AuditConfig:
    """``config`` without its guarantee and the settings that only a guarantee reads."""
    keys = ("guarantee", "delta", "cascade", "human_ties", "certify", "spot_checks")
    return replace(config, **{k: getattr(AuditConfig, k) for k in keys})


def _measure(
    result: AuditResult, scorer, rules: list, split, seed: int, mem: PeakMemory, ceiling: bool
) -> list[pd.DataFrame]:
    """One consistency frame per rule of one audit on one split, with the run's columns.

    The audit ran with the first of ``rules``; the frames come in the order of ``rules``.
    """
    frames = []
    paths = ",".join(f"{k}x{v}" for k, v in result.report.solver_paths.items())
    for rule, pool, info in _outcome_rows(result, rules, split.truth, ceiling):
        cons = consistency(pool, split.truth, result.config.guarantee)
        if info is not None:
            evidence = info.evidence
            cons["abstained"] = float(info.abstained)
            cons["crossfit_gain"] = float("nan") if evidence is None else evidence.crossfit_gain
            cons["expected_gain"] = float("nan") if evidence is None else evidence.expected_gain
        cons.insert(0, "seed", seed)
        cons.insert(0, "rule", rule_name(rule))
        cons.insert(0, "scorer", scorer_name(scorer))
        cons["m"] = result.report.m.value
        cons["time_s"] = result.report.timings_s["total"]
        cons["peak_rss_mb"], cons["peak_delta_mb"] = mem.peak_mb, mem.delta_mb
        cons["solver_paths"] = paths
        frames.append(cons)
    return frames


def _in_order(frames: list[pd.DataFrame], rules: list) -> list[pd.DataFrame]:
    """``frames`` (one per rule, then the hindsight one) in the order of ``rules``."""
    position = {rule_name(r): i for i, r in enumerate(rules)}
    return sorted(frames, key=lambda f: position.get(f["rule"].iloc[0], len(rules)))


def evaluate(
    comparisons: pd.DataFrame,
    embeddings: PairEmbeddings,
    *,
    pairs=None,
    scorers=None,
    rules=None,
    protocol: Protocol | None = None,
    config: AuditConfig | None = None,
    progress: bool = True,
    **options,
) -> EvalResult:
    """Run the protocol (module docstring) on the (scorer, rule) pairs or the grid of scorers x rules.

    With a guarantee, each scorer's audit runs with its first calibrated rule, which the guarantee
    certifies; the pairs of a rule that gives no P(judge wrong) (``paper``, ``budget``) are compared
    uncertified, their coverage columns NaN; ``meta["guarantee"]`` names both (:func:`guarantee_scope`).

    Args:
        comparisons: the comparison table.
        embeddings: its pair embeddings.
        pairs: (scorer, rule) pairs (default :data:`DEFAULT_PAIRS`); scorers and rules are names,
            callables or :class:`~puaudit_jax.audit.rules.CalibratedRule` objects.
        scorers: the grid's scorers, instead of ``pairs``.
        rules: the grid's rules, instead of ``pairs``.
        protocol: the protocol's settings (None: :class:`Protocol`'s defaults).
        config: the audit's settings (None: :class:`~puaudit_jax.audit.AuditConfig`'s defaults).
        progress: whether to show a progress bar.
        **options: deprecated (for one release, with a DeprecationWarning): fields of :class:`Protocol`
            (seeds, p_ratio, split_by, ceiling) or of :class:`~puaudit_jax.audit.AuditConfig` (m, holdout,
            cluster_by, ...), set on ``protocol`` and ``config``; pass those objects instead.

    Returns:
        The :class:`EvalResult` (agreements in [0, 1]; ``meta["wall_time_s"]`` in seconds).

    Raises:
        ValueError: a setting out of range, or a guarantee where no rule compared is calibrated.
    """
    t0 = time.perf_counter()
    proto, base = settings_of("evaluate", protocol, config, options)
    proto.validate()
    groups = pairs_by_scorer(pairs, scorers, rules)
    scope = guarantee_scope(groups, base.guarantee)
    frames, first = [], None
    jobs = [(seed, scorer, rules_) for seed in proto.seed_list for scorer, rules_ in groups]
    for seed, scorer, rules_ in tqdm(jobs, desc="protocol", disable=not progress):
        split = split_labels(comparisons, p_ratio=proto.p_ratio, seed=seed, split_by=proto.split_by)
        features = set(base.crossfit_features) | {rule_feature(r) for r in rules_ if needs_crossfit(r)}
        ordered = guaranteed_first(rules_, base.guarantee)
        cfg = base if needs_crossfit(ordered[0]) else uncertified(base)
        cfg = replace(cfg, scorer=scorer, rule=ordered[0], seed=seed, crossfit_features=tuple(sorted(features)))
        with PeakMemory() as mem:
            result = run_audit(split.table, embeddings, cfg)
        frames += _in_order(_measure(result, scorer, ordered, split, seed, mem, proto.ceiling), rules_)
        first = first or (result, split.truth)
    per_seed = pd.concat(frames, ignore_index=True)
    meta = {
        "seeds": proto.seed_list,
        "p_ratio": proto.p_ratio,
        "split_by": proto.split_by,
        "ceiling": proto.ceiling,
        "pairs": [[scorer_name(s), rule_name(r)] for s, rs in groups for r in rs],
        "scorers": [scorer_name(s) for s, _ in groups],
        "rules": list(dict.fromkeys(rule_name(r) for _, rs in groups for r in rs)),
        "audit_config": base.to_dict(),
        "embeddings": {"source": embeddings.source, "dim": embeddings.dim},
        "n_labelled": int((item_status(comparisons)["status"] == LABELLED).sum()),
        "wall_time_s": time.perf_counter() - t0,
        **({"guarantee": scope} if scope else {}),
    }
    return EvalResult(per_seed, summarize_runs(per_seed), meta, *(first or (None, None)))


def sweep(
    comparisons: pd.DataFrame,
    embeddings: PairEmbeddings,
    *,
    param: str,
    values,
    protocol: Protocol | None = None,
    config: AuditConfig | None = None,
    progress: bool = True,
    **kwargs,
) -> EvalResult:
    """The protocol for each value of ``param``; results carry a ``param`` column.

    Args:
        comparisons: the comparison table.
        embeddings: its pair embeddings.
        param: "p_ratio" or "m".
        values: the values of ``param`` to run.
        protocol: the protocol's settings (its ``p_ratio`` replaced by each value when that is swept).
        config: the audit's settings (its ``m`` replaced by each value when that is swept).
        progress: whether to show a progress bar over the values.
        **kwargs: :func:`evaluate`'s pairs, scorers or rules; and deprecated (with a DeprecationWarning, for
            one release) the fields of :class:`Protocol` and :class:`~puaudit_jax.audit.AuditConfig`.

    Returns:
        The :class:`EvalResult` of all values (summary by param, scorer, rule, question type; no figures'
        inputs).

    Raises:
        ValueError: another ``param``, or what :func:`evaluate` raises.
    """
    if param not in ("p_ratio", "m"):
        raise ValueError(f"param must be 'p_ratio' or 'm', got {param!r}")
    per_seed, metas = [], []
    kwargs.pop(param, None)  # the swept value wins
    compared = {key: kwargs.pop(key) for key in ("pairs", "scorers", "rules") if key in kwargs}
    protocol, config = settings_of("sweep", protocol, config, kwargs)
    for value in tqdm(list(values), desc=f"sweep {param}", disable=not progress):
        settings = ({"protocol": replace(protocol, p_ratio=value), "config": config} if param == "p_ratio" else
                    {"protocol": protocol, "config": replace(config, m=value)})  # fmt: skip
        res = evaluate(comparisons, embeddings, progress=False, **settings, **compared)
        part = res.per_seed.copy()
        if param == "m":  # the per-seed m column is the given m itself
            part = part.drop(columns="m")
        part.insert(0, param, value)
        per_seed.append(part)
        metas.append(res.meta)
    per_seed = pd.concat(per_seed, ignore_index=True)
    summary = summarize_runs(per_seed, by=(param, "scorer", "rule", "question_type"))
    return EvalResult(per_seed, summary, {"param": param, "values": list(values), "runs": metas})
