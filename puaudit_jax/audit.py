"""The PUAudit pipeline (seed 000 §3, Appendix A.4, Algorithm 1), one audit run.

    audit(comparisons, embeddings | encoder, *, m=None, eta=0.5, alpha1=0.7, alpha2=0.7,
          group_by="question_type", scorer="knn", rule="two-sided", holdout=0.25, seed=0) -> AuditResult

Steps, top to bottom in :func:`audit`:

1. **Status.** :func:`puaudit_jax.datasets.item_status` marks every row labelled (human A/B,
   judge A/B), unlabelled (human missing, judge A/B) or excluded (ties, missing text, identical
   responses). Rows whose two embeddings coincide (zero difference vector) are excluded here too,
   with reason ``"zero difference embedding"``. Nothing is dropped from the output.
2. **Embeddings.** F(x, o_A), F(x, o_B) per usable row, from a :class:`PairEmbeddings` or an
   :data:`Encoder` (:mod:`puaudit_jax.embed`). Every usable id must have embeddings, every embedded
   id must be in the table, and usable rows must be finite: anything else is an error naming ids.
3. **m.** Given, or estimated (seed §5.1) as the judge-human agreement on a held-out part of the
   labelled rows (``holdout`` fraction per question type, floor, at least one row overall); those
   rows are not used as positives. The estimate is clipped to ``m_clip`` (both numbers reported).
4. **Orientation** (§3.1, Eq. 1/3). Positives P = the other labelled rows, winner by the human;
   the pool U = unlabelled rows, winner by the judge. z = (F(x,o_w) - F(x,o_l)) / ||.||.
5. **Denoising** per question type (:mod:`puaudit_jax.denoise`, alpha1 = alpha2 = 0.7). A type
   with fewer than ``min_group_size`` positives is not denoised on its own: its positives join one
   pooled group of all such small types (reported).
6. **Scores** per scoring group (``group_by="question_type"``: each type's U against that type's
   P'; a type whose P' came from the pooled small-type group, or that has no positive at all, is
   scored against the union of every P' -- reported as ``reference="pooled"``; ``group_by=None``:
   one group, the union of every P'). Scorer from :mod:`puaudit_jax.scorers` (the seed's: entropic
   partial OT, s_j = mass received; default: kNN, see DEFAULT_SCORER). Normalised
   s̄_j = s_j / max_k s_k within the group.
7. **Decision** by a rule from :mod:`puaudit_jax.rules` (:func:`apply_rule`). Score rules (the
   seed's: flip where s̄_j < eta) read each group's normalised scores; a group with a single U item
   has s̄ = 1 and is never flipped by the seed rule. Calibrated rules (issue 9) need step 6b:
6b. **Cross-fitting** (only when the rule or ``crossfit_features`` asks for it). The labelled rows
   (positives and holdout) are split into ``folds`` folds, stratified by question type and grouped
   by the ``cluster_by`` column when given. For fold k, P'_k is denoised from the positives outside
   it; each group's pool rows and fold-k labelled rows (oriented by the judge) are scored together
   against P'_k. Labelled rows thus get out-of-fold features with known judge correctness; the pool
   gets one feature per fold. The rule calibrates on the former and decides on the latter.

Output: :class:`AuditResult` with ``items`` (one row per input row, input order: id,
question_type, group, judge, human, status, reason, role, score_raw, score, adjusted, flipped,
p_wrong, p_wrong_lo, p_wrong_hi -- P(judge wrong) and its bootstrap interval from a calibrated rule:
pool rows, and out-of-fold for labelled rows; NaN otherwise) and ``report`` (counts, m, eta, scorer,
rule, solver path per group, denoising sizes, the calibrated rule's decision, timings).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from .datasets.exclusions import EXCLUDED, LABELLED, UNLABELLED, item_status
from .datasets.verdicts import A, B
from .denoise import denoise
from .embed import Encoder, PairEmbeddings, embed_comparisons
from .calibration import crossfit_folds
from .rules import FEATURES, CrossFit, RuleContext, get_rule, needs_crossfit, rule_name
from .scorers import get_scorer, scorer_name

ZERO_DIFF = "zero difference embedding"
POOLED_TYPE = "(pooled small types)"
NO_TYPE = "(none)"
ROLES = ("P", "P-filtered", "holdout", "U", "excluded")
# Picked by the data (experiments/puaudit_rules.py, README "Decision rules"): over MT-Bench and
# LLMFAO (GPT-4, GPT-3.5), random and prompt-grouped splits, kNN scores with the two-sided
# calibrated rule never lost more than 0.3 points and had the best mean gain. The seed's
# configuration is scorer="pot", rule="seed".
DEFAULT_SCORER, DEFAULT_RULE = "knn", "two-sided"


@dataclass(frozen=True)
class AuditConfig:
    """Every knob of one audit (seed defaults). ``scorer`` / ``rule`` are names or callables."""

    m: float | None = None
    eta: float = 0.5
    alpha1: float = 0.7
    alpha2: float = 0.7
    group_by: str | None = "question_type"
    scorer: str | Callable = DEFAULT_SCORER
    scorer_options: tuple = ()
    rule: str | Callable = DEFAULT_RULE
    rule_options: tuple = ()
    crossfit_features: tuple = ()
    folds: int = 5
    cluster_by: str | None = None
    holdout: float = 0.25
    m_clip: tuple[float, float] = (0.05, 0.99)
    min_group_size: int = 5
    seed: int = 0

    def __post_init__(self):
        for key in ("scorer_options", "rule_options"):
            if isinstance(getattr(self, key), dict):
                object.__setattr__(self, key, tuple(sorted(getattr(self, key).items())))
        object.__setattr__(self, "crossfit_features", tuple(self.crossfit_features))

    def validate(self) -> None:
        if self.m is not None and not (np.isfinite(self.m) and 0 < self.m <= 1):
            raise ValueError(f"m must be in (0, 1] (the share of mass transported), got {self.m!r}")
        if not (np.isfinite(self.eta) and 0 <= self.eta <= 1):
            raise ValueError(f"eta must be in [0, 1] (a threshold on normalised scores), got {self.eta!r}")
        for name in ("alpha1", "alpha2"):
            value = getattr(self, name)
            if not (np.isfinite(value) and 0 < value <= 1):
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if not 0 <= self.holdout < 1:
            raise ValueError(f"holdout must be in [0, 1), got {self.holdout!r}")
        lo, hi = self.m_clip
        if not 0 < lo <= hi <= 1:
            raise ValueError(f"m_clip must satisfy 0 < low <= high <= 1, got {self.m_clip!r}")
        if self.group_by not in ("question_type", None):
            raise ValueError(f"group_by must be 'question_type' or None, got {self.group_by!r}")
        if self.min_group_size < 1:
            raise ValueError(f"min_group_size must be >= 1, got {self.min_group_size!r}")
        get_scorer(self.scorer, **dict(self.scorer_options))
        get_rule(self.rule, **dict(self.rule_options))
        unknown = set(self.crossfit_features) - set(FEATURES)
        if unknown:
            raise ValueError(f"crossfit_features must be among {FEATURES}, got {sorted(unknown)}")
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2 (cross-fitting), got {self.folds!r}")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["scorer"], out["rule"] = scorer_name(self.scorer), rule_name(self.rule)
        out["scorer_options"] = {k: v for k, v in self.scorer_options}
        out["rule_options"] = {k: v for k, v in self.rule_options}
        out["crossfit_features"] = list(self.crossfit_features)
        out["m_clip"] = list(self.m_clip)
        return out


@dataclass(frozen=True)
class AuditResult:
    """items: one row per input comparison; report: JSON-able run report; u_z: (n_U, d) unit
    difference vectors of the pool in ``items[items.role == "U"]`` order (for figures); crossfit:
    the cross-fitted features when computed (other calibrated rules can be applied to them)."""

    items: pd.DataFrame
    report: dict
    config: AuditConfig
    u_z: np.ndarray = field(repr=False, default=None)
    crossfit: CrossFit | None = field(repr=False, default=None)

    @property
    def pool(self) -> pd.DataFrame:
        """The audited rows (role U)."""
        return self.items[self.items["role"] == "U"]


def flip_verdict(verdicts) -> np.ndarray:
    """A <-> B (ties and other values unchanged)."""
    v = np.asarray(verdicts, dtype=object)
    return np.where(v == A, B, np.where(v == B, A, v))


def _unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _check_embeddings(emb: PairEmbeddings, table_ids: pd.Index, usable_ids: list[str]) -> None:
    """Mismatched id sets and non-finite vectors are errors that name the ids."""
    emb_index = pd.Index(emb.ids)
    extra = emb_index.difference(table_ids)
    if len(extra):
        raise ValueError(f"embeddings have {len(extra)} ids that are not in the comparisons, "
                         f"e.g. {list(extra[:3])} (mismatched id sets)")
    missing = pd.Index(usable_ids).difference(emb_index)
    if len(missing):
        raise ValueError(f"{len(missing)} usable comparisons have no embeddings, e.g. {list(missing[:3])} "
                         "(mismatched id sets)")
    ea, eb = emb.take(usable_ids)
    bad = ~(np.isfinite(ea).all(1) & np.isfinite(eb).all(1))
    if bad.any():
        ids = [usable_ids[i] for i in np.flatnonzero(bad)[:3]]
        raise ValueError(f"{int(bad.sum())} comparisons have NaN or inf embeddings, e.g. {ids}")


def _holdout_rows(labelled: np.ndarray, types: np.ndarray, fraction: float, rng) -> np.ndarray:
    """Per type floor(fraction * n) random labelled rows; at least one overall (needs >= 2)."""
    chosen = []
    for t in pd.unique(types[labelled]):
        rows = labelled[types[labelled] == t]
        k = int(np.floor(fraction * len(rows) + 1e-9))
        if k:
            chosen.append(rng.choice(rows, size=k, replace=False))
    chosen = np.sort(np.concatenate(chosen)) if chosen else np.array([], int)
    if len(chosen) == 0 and fraction > 0:
        if len(labelled) < 2:
            raise ValueError(f"estimating m needs at least 2 labelled comparisons (one held out, one "
                             f"positive); have {len(labelled)}. Give m explicitly.")
        chosen = np.array([rng.choice(labelled)])
    return chosen


def audit(comparisons: pd.DataFrame, features: PairEmbeddings | Encoder, *, m: float | None = None,
          eta: float = 0.5, alpha1: float = 0.7, alpha2: float = 0.7, group_by: str | None = "question_type",
          scorer: str | Callable = DEFAULT_SCORER, scorer_options: dict | tuple = (), rule: str | Callable = DEFAULT_RULE,
          rule_options: dict | tuple = (), crossfit_features: tuple = (), folds: int = 5,
          cluster_by: str | None = None, holdout: float = 0.25, m_clip: tuple[float, float] = (0.05, 0.99),
          min_group_size: int = 5, seed: int = 0) -> AuditResult:
    """Audit the judge verdicts of the unlabelled rows of ``comparisons`` (see the module docstring).

    ``features``: :class:`PairEmbeddings` or an :data:`Encoder` callable. The keywords are the
    fields of :class:`AuditConfig`; :func:`run_audit` takes a config object instead.
    """
    config = AuditConfig(m=m, eta=eta, alpha1=alpha1, alpha2=alpha2, group_by=group_by, scorer=scorer,
                         scorer_options=scorer_options, rule=rule, rule_options=rule_options,
                         crossfit_features=tuple(crossfit_features), folds=folds, cluster_by=cluster_by,
                         holdout=holdout, m_clip=tuple(m_clip),
                         min_group_size=min_group_size, seed=seed)
    return run_audit(comparisons, features, config)


def run_audit(comparisons: pd.DataFrame, features: PairEmbeddings | Encoder, config: AuditConfig) -> AuditResult:
    """:func:`audit` with its settings in one :class:`AuditConfig`."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    cfg = config
    cfg.validate()
    table = comparisons.reset_index(drop=True)
    n = len(table)
    if n == 0:
        raise ValueError("the comparison table is empty")
    if cfg.cluster_by is not None and cfg.cluster_by not in table.columns:
        raise ValueError(f"cluster_by={cfg.cluster_by!r} is not a column of the comparisons "
                         f"(columns: {list(table.columns)})")
    ids = table["id"].astype(str).to_numpy()
    if pd.Index(ids).duplicated().any():
        raise ValueError(f"repeated comparison ids, e.g. {pd.Index(ids)[pd.Index(ids).duplicated()][0]!r}")

    # 1. status ---------------------------------------------------------------------------------
    status_frame = item_status(table)
    status = status_frame["status"].to_numpy(dtype=object).copy()
    reason = status_frame["reason"].to_numpy(dtype=object).copy()
    types = np.array([NO_TYPE if t is None or (isinstance(t, float) and np.isnan(t)) else str(t)
                      for t in table["question_type"]], dtype=object)
    judge = table["judge"].to_numpy(dtype=object)
    human = table["human"].to_numpy(dtype=object)
    usable = np.flatnonzero(status != EXCLUDED)
    timings["status"] = time.perf_counter() - t0

    # 2. embeddings -------------------------------------------------------------------------------
    t = time.perf_counter()
    if isinstance(features, PairEmbeddings):
        emb = features
    elif callable(features):
        emb = embed_comparisons(table.iloc[usable], features, source=getattr(features, "__name__", "encoder"))
    else:
        raise TypeError(f"features must be PairEmbeddings or an encoder callable, got {type(features).__name__}")
    _check_embeddings(emb, pd.Index(ids), list(ids[usable]))
    ea = np.zeros((n, emb.dim), np.float64)
    eb = np.zeros((n, emb.dim), np.float64)
    if len(usable):
        a_rows, b_rows = emb.take(list(ids[usable]))
        ea[usable], eb[usable] = a_rows, b_rows
    diff = ea - eb
    scale = np.maximum(np.linalg.norm(ea, axis=1), np.linalg.norm(eb, axis=1))
    zero = (np.linalg.norm(diff, axis=1) <= 1e-6 * np.maximum(scale, 1e-30)) & (status != EXCLUDED)
    for row in np.flatnonzero(zero):
        status[row] = EXCLUDED
        reason[row] = ZERO_DIFF
    timings["embed"] = time.perf_counter() - t

    labelled = np.flatnonzero(status == LABELLED)
    unlabelled = np.flatnonzero(status == UNLABELLED)
    if len(labelled) == 0:
        raise ValueError(f"no usable human-labelled comparison (P would be empty): {n} rows, "
                         f"{int((status == EXCLUDED).sum())} excluded, {len(unlabelled)} unlabelled")
    if len(unlabelled) == 0:
        raise ValueError(f"no usable unlabelled comparison to audit (U is empty): {n} rows, "
                         f"{len(labelled)} labelled, {int((status == EXCLUDED).sum())} excluded")

    # 3. m ----------------------------------------------------------------------------------------
    rng = np.random.default_rng(cfg.seed)
    if cfg.m is None:
        held = _holdout_rows(labelled, types, cfg.holdout, rng)
        if len(held) == 0:
            raise ValueError("m is not given and holdout = 0: nothing to estimate m from")
        m_raw = float(np.mean(judge[held] == human[held]))
        m = float(np.clip(m_raw, *cfg.m_clip))
        m_info = {"value": m, "source": "estimated", "raw": m_raw, "n_holdout": int(len(held)),
                  "clip": list(cfg.m_clip), "clipped": m != m_raw}
    else:
        held = np.array([], int)
        m = float(cfg.m)
        m_info = {"value": m, "source": "given", "raw": None, "n_holdout": 0, "clip": None, "clipped": False}
    positives = np.setdiff1d(labelled, held)
    if len(positives) == 0:
        raise ValueError("every labelled comparison was held out to estimate m; P is empty "
                         f"({len(labelled)} labelled, holdout={cfg.holdout}). Lower holdout or give m.")

    # 4. orientation: P by the human, U by the judge ------------------------------------------------
    winner = np.where(np.isin(np.arange(n), positives), human, judge)
    sign = np.where(winner == A, 1.0, -1.0)[:, None]
    z = np.zeros_like(diff)
    oriented = np.concatenate([positives, unlabelled])
    z[oriented] = _unit_rows(sign[oriented] * diff[oriented])
    e_winner = np.where(winner[:, None] == A, ea, eb)

    # 5. denoising per question type ----------------------------------------------------------------
    t = time.perf_counter()
    refs = _references(positives, types, e_winner, z, cfg)
    timings["denoise"] = time.perf_counter() - t

    # 6. scores per scoring group ----------------------------------------------------------------------
    t = time.perf_counter()
    scorer = get_scorer(cfg.scorer, **dict(cfg.scorer_options))
    rule = get_rule(cfg.rule, **dict(cfg.rule_options))
    score_raw = np.full(n, np.nan)
    score = np.full(n, np.nan)
    group = np.array([""] * n, dtype=object)
    groups_report = []
    solver_time = 0.0
    for g in _group_names(unlabelled, types, cfg):
        rows = _members(unlabelled, g, types, cfg)
        ref, reference = _reference_for(g, refs, cfg)
        group[rows] = g
        ts = time.perf_counter()
        s, normalised, result = _scored(scorer, z[ref], z[rows], m, cfg, g)
        solver_time += time.perf_counter() - ts
        score_raw[rows], score[rows] = s, normalised
        groups_report.append({"group": str(g), "n_U": int(len(rows)), "n_reference": int(len(ref)),
                              "reference": reference, "all_zero_scores": not s.max() > 0,
                              "method": result.method, "solver": result.info})
    timings["score"] = time.perf_counter() - t
    timings["solver"] = solver_time

    # 6b. cross-fitted features of the labelled rows (calibrated rules, issue 9) --------------------------
    features = tuple(sorted(set(cfg.crossfit_features) | ({rule.feature} if needs_crossfit(rule) else set())))
    crossfit, crossfit_report = None, None
    if features:
        t = time.perf_counter()
        crossfit, crossfit_report = _crossfit(table, labelled, positives, unlabelled, types, judge, human, diff,
                                              e_winner, z, m, scorer, features, cfg, rng)
        timings["crossfit"] = time.perf_counter() - t

    # outputs ----------------------------------------------------------------------------------------
    role = np.array(["excluded"] * n, dtype=object)
    role[positives] = "P-filtered"
    role[refs.kept] = "P"
    role[held] = "holdout"
    role[unlabelled] = "U"
    nan = np.full(n, np.nan)
    items = pd.DataFrame({
        "id": ids, "question_type": table["question_type"].to_numpy(dtype=object), "group": group,
        "judge": judge, "human": human, "status": status, "reason": reason, "role": role,
        "score_raw": score_raw, "score": score, "adjusted": judge.copy(), "flipped": np.zeros(n, bool),
        "p_wrong": nan, "p_wrong_lo": nan.copy(), "p_wrong_hi": nan.copy(),
    })

    # 7. decision -------------------------------------------------------------------------------------
    items, decision = apply_rule(items, rule, crossfit=crossfit, m=m, eta=cfg.eta, seed=cfg.seed)
    flipped = items["flipped"].to_numpy(bool)
    for entry in groups_report:
        entry["n_flipped"] = int(flipped[group == entry["group"]].sum())
    methods = pd.Series([g["method"] for g in groups_report]).value_counts().to_dict()
    timings["total"] = time.perf_counter() - t0
    report = {
        "counts": {
            "input": n, "labelled": int((status == LABELLED).sum()), "unlabelled": int(len(unlabelled)),
            "excluded": int((status == EXCLUDED).sum()),
            "exclusion_reasons": pd.Series(reason[status == EXCLUDED]).str.split("; ").explode()
            .value_counts().astype(int).to_dict() if (status == EXCLUDED).any() else {},
            "P": int(len(positives)), "P_denoised": int(refs.kept.sum()), "holdout": int(len(held)),
            "U": int(len(unlabelled)), "flipped": int(flipped.sum()),
        },
        "flip_rate": float(flipped[unlabelled].mean()),
        "m": m_info, "eta": cfg.eta, "alpha1": cfg.alpha1, "alpha2": cfg.alpha2,
        "scorer": scorer_name(cfg.scorer), "rule": rule_name(rule), "group_by": cfg.group_by,
        "seed": cfg.seed, "config": cfg.to_dict(),
        "embeddings": {"source": emb.source, "dim": emb.dim},
        "denoising": refs.report, "groups": groups_report, "solver_paths": methods,
        "decision": decision, "crossfit": crossfit_report,
        "timings_s": timings,
    }
    u_z = z[role == "U"].astype(np.float32)
    return AuditResult(items=items, report=report, config=cfg, u_z=u_z, crossfit=crossfit)


@dataclass(frozen=True)
class _References:
    """Denoised positives: ``own`` type -> rows (types denoised on their own), ``union`` every kept
    row, ``kept`` (n,) mask, ``report`` one entry per denoising group."""

    own: dict
    union: np.ndarray
    kept: np.ndarray
    report: list


def _references(positives, types, e_winner, z, cfg: AuditConfig) -> _References:
    """Step 5: denoise P per question type; types with < min_group_size positives are pooled."""
    kept = np.zeros(len(types), bool)
    own, report = {}, []
    present = pd.unique(types[positives])
    small = [ty for ty in present if (types[positives] == ty).sum() < cfg.min_group_size]
    groups_p = [(ty, positives[types[positives] == ty]) for ty in present if ty not in small]
    if small:
        groups_p.append((POOLED_TYPE, positives[np.isin(types[positives], small)]))
    for ty, rows in groups_p:
        res = denoise(e_winner[rows], z[rows], alpha1=cfg.alpha1, alpha2=cfg.alpha2)
        keep = rows[res.keep]
        kept[keep] = True
        if ty != POOLED_TYPE:
            own[ty] = keep
        report.append({"question_type": ty, "n_P": res.n, "n_core": res.n_core, "n_kept": res.n_kept,
                       "types": sorted(small) if ty == POOLED_TYPE else [ty]})
    return _References(own, np.flatnonzero(kept), kept, report)


def _group_names(rows, types, cfg: AuditConfig) -> list:
    return list(pd.unique(types[rows])) if cfg.group_by == "question_type" else ["all"]


def _members(rows, g, types, cfg: AuditConfig) -> np.ndarray:
    return rows[types[rows] == g] if cfg.group_by == "question_type" else rows


def _reference_for(g, refs: _References, cfg: AuditConfig) -> tuple[np.ndarray, str]:
    """A type's own P' when it was denoised on its own, else the union of every P' (step 6)."""
    if cfg.group_by == "question_type" and g in refs.own:
        return refs.own[g], "own type"
    return refs.union, ("pooled" if cfg.group_by == "question_type" else "all")


def _scored(scorer, zp, zu, m, cfg: AuditConfig, g, warn: bool = True) -> tuple[np.ndarray, np.ndarray, object]:
    """Raw scores (checked), normalised scores s / max s (all zero -> zeros, with a warning), result."""
    result = scorer(zp, zu, m)
    s = np.asarray(result.scores, np.float64)
    if s.shape != (len(zu),) or not np.isfinite(s).all() or (s < 0).any():
        raise ValueError(f"scorer {scorer_name(cfg.scorer)!r} returned invalid scores for group {g!r} "
                         f"(need {len(zu)} finite values >= 0)")
    top = s.max()
    if not top > 0:
        if warn:
            warnings.warn(f"group {g!r}: every score is 0; normalised scores set to 0", RuntimeWarning)
        return s, np.zeros_like(s), result
    return s, s / top, result


def _features(scorer, zp, zu, m, kinds, cfg: AuditConfig, g) -> dict:
    """Per kind, (k,) features of the rows ``zu`` (larger = the judge's orientation is better aligned):
    "score" = s̄(z_j); "two-sided" = s̄(z_j) - s̄(-z_j), both orientations scored in one problem
    with m = 1/2 (exactly one orientation of each item can be the human's)."""
    out = {}
    if "score" in kinds:
        out["score"] = _scored(scorer, zp, zu, m, cfg, g, warn=False)[1]
    if "two-sided" in kinds:
        both = _scored(scorer, zp, np.concatenate([zu, -zu]), 0.5, cfg, g, warn=False)[1]
        out["two-sided"] = both[:len(zu)] - both[len(zu):]
    return out


def _crossfit(table, labelled, positives, unlabelled, types, judge, human, diff, e_winner, z, m, scorer,
              kinds, cfg: AuditConfig, rng) -> tuple[CrossFit, dict]:
    """Step 6b: every labelled row scored as a pool item (oriented by the judge) against P'_k, the
    reference denoised from the positives outside its fold; the pool scored against every P'_k.

    Each fold's problem is the pool plus that fold's labelled rows of the group, so a labelled
    row's feature comes from the same kind of problem (same normaliser, same competitors for mass)
    as the pool's features it is used to calibrate. Labelled human labels enter only through the
    other folds' P' orientation and the 0/1 targets, never the pool's."""
    clusters = None
    if cfg.cluster_by is not None:
        col = table[cfg.cluster_by]
        missing = np.flatnonzero(col.isna().to_numpy()[labelled])
        if len(missing):
            raise ValueError(f"cluster column {cfg.cluster_by!r} is missing on labelled rows "
                             f"{[str(table['id'].iloc[r]) for r in labelled[missing[:3]]]}")
        clusters = col.astype(str).to_numpy(dtype=object)[labelled]
    fold = crossfit_folds(types[labelled], clusters, cfg.folds, rng)
    n_folds = int(fold.max()) + 1
    fold_of = np.full(len(types), -1)
    fold_of[labelled] = fold
    zj = np.zeros_like(z)
    sign = np.where(judge[labelled] == A, 1.0, -1.0)[:, None]
    zj[labelled] = _unit_rows(sign * diff[labelled])
    zj[unlabelled] = z[unlabelled]
    pool_feat = {k: np.full((len(unlabelled), n_folds), np.nan) for k in kinds}
    lab_feat = {k: np.full(len(types), np.nan) for k in kinds}
    pool_pos = {row: i for i, row in enumerate(unlabelled)}
    empty_folds = []
    for k in range(n_folds):
        train = positives[fold_of[positives] != k]
        if len(train) == 0:
            empty_folds.append(k)
            continue
        refs = _references(train, types, e_winner, z, cfg)
        in_fold = labelled[fold == k]
        for g in _group_names(np.concatenate([unlabelled, in_fold]), types, cfg):
            u_rows, l_rows = _members(unlabelled, g, types, cfg), _members(in_fold, g, types, cfg)
            rows = np.concatenate([u_rows, l_rows])
            ref, _ = _reference_for(g, refs, cfg)
            feats = _features(scorer, z[ref], zj[rows], m, kinds, cfg, g)
            for kind, f in feats.items():
                pool_feat[kind][[pool_pos[r] for r in u_rows], k] = f[:len(u_rows)]
                lab_feat[kind][l_rows] = f[len(u_rows):]
    if empty_folds:  # a fold that held every positive: its pool column is filled by the other folds' mean
        for kind in kinds:
            mean = np.nanmean(np.delete(pool_feat[kind], empty_folds, axis=1), axis=1)
            pool_feat[kind][:, empty_folds] = mean[:, None]
    cf = CrossFit(pool=pool_feat, labelled={k: v[labelled] for k, v in lab_feat.items()},
                  correct=(judge[labelled] == human[labelled]), fold=fold,
                  pool_group=np.asarray(types[unlabelled], dtype=object),
                  labelled_group=np.asarray(types[labelled], dtype=object),
                  labelled_ids=np.asarray(table["id"].astype(str).to_numpy()[labelled], dtype=object),
                  cluster=clusters)
    report = {"folds": n_folds, "features": list(kinds), "cluster_by": cfg.cluster_by,
              "n_labelled": int(len(labelled)), "n_clusters": None if clusters is None else int(len(set(clusters))),
              "unscored_labelled": {k: int(np.isnan(v).sum()) for k, v in cf.labelled.items()},
              "folds_without_positives": empty_folds}
    return cf, report


def apply_rule(items: pd.DataFrame, rule, *, crossfit: CrossFit | None, m: float, eta: float,
               seed: int) -> tuple[pd.DataFrame, dict | None]:
    """Flips, adjusted verdicts and (calibrated rules) P(judge wrong) of the pool rows of ``items``
    by ``rule``: a score rule per scoring group on the normalised scores, or a
    :class:`~puaudit_jax.rules.CalibratedRule` on the audit's cross-fitted features. Returns a copy
    of ``items`` and the calibrated rule's decision summary (None for score rules)."""
    rule = get_rule(rule)
    items = items.copy()
    pool = np.flatnonzero(items["role"].to_numpy() == "U")
    flips = np.zeros(len(items), bool)
    info = None
    if needs_crossfit(rule):
        if crossfit is None:
            raise ValueError(f"rule {rule_name(rule)!r} needs the audit's cross-fitted features: run the audit "
                             f"with this rule or with crossfit_features=({rule.feature!r},)")
        if rule.feature not in crossfit.pool:
            raise ValueError(f"the audit computed cross-fitted features {sorted(crossfit.pool)}; "
                             f"rule {rule_name(rule)!r} needs {rule.feature!r}")
        decision = rule.decide(crossfit, seed=seed)
        flips[pool] = decision.flips
        labelled = np.flatnonzero(items["status"].to_numpy() == LABELLED)
        for col, pool_values, lab_values in (("p_wrong", decision.p_wrong, decision.labelled_p_wrong),
                                             ("p_wrong_lo", decision.p_wrong_lo, None),
                                             ("p_wrong_hi", decision.p_wrong_hi, None)):
            values = np.full(len(items), np.nan)
            values[pool] = pool_values
            if lab_values is not None:
                values[labelled] = lab_values
            items[col] = values
        info = decision.info
    else:
        scores = items["score"].to_numpy()
        groups = items["group"].to_numpy()
        for g in pd.unique(groups[pool]):
            rows = pool[groups[pool] == g]
            f = np.asarray(rule(scores[rows], RuleContext(m=m, eta=eta, group=str(g), seed=seed)), bool)
            if f.shape != (len(rows),):
                raise ValueError(f"rule {rule_name(rule)!r} returned shape {f.shape}, need ({len(rows)},)")
            flips[rows] = f
        for col in ("p_wrong", "p_wrong_lo", "p_wrong_hi"):
            items[col] = np.nan
    return with_flips(items, flips), info


def with_flips(items: pd.DataFrame, flips: np.ndarray) -> pd.DataFrame:
    """``items`` with ``flipped`` = flips and ``adjusted`` = the judge verdict flipped where flips."""
    judge = items["judge"].to_numpy(dtype=object)
    return items.assign(flipped=np.asarray(flips, bool), adjusted=np.where(flips, flip_verdict(judge), judge))
