"""The PUAudit pipeline (seed 000 §3, Appendix A.4, Algorithm 1), one audit run.

    audit(comparisons, embeddings | encoder, *, m=None, eta=0.5, alpha1=0.7, alpha2=0.7,
          group_by="question_type", scorer="pot", rule="seed", holdout=0.25, seed=0) -> AuditResult

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
   one group, the union of every P'). Scorer from :mod:`puaudit_jax.scorers` (default: entropic
   partial OT, s_j = mass received). Normalised s̄_j = s_j / max_k s_k within the group.
7. **Decision** by a rule from :mod:`puaudit_jax.rules` (default the seed's: flip where s̄_j < eta).
   A group with a single U item has s̄ = 1 and is never flipped by the seed rule.

Output: :class:`AuditResult` with ``items`` (one row per input row, input order: id,
question_type, group, judge, human, status, reason, role, score_raw, score, adjusted, flipped)
and ``report`` (counts, m, eta, scorer, rule, solver path per group, denoising sizes, timings).
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
from .rules import RuleContext, get_rule, rule_name
from .scorers import get_scorer, scorer_name

ZERO_DIFF = "zero difference embedding"
POOLED_TYPE = "(pooled small types)"
NO_TYPE = "(none)"
ROLES = ("P", "P-filtered", "holdout", "U", "excluded")


@dataclass(frozen=True)
class AuditConfig:
    """Every knob of one audit (seed defaults). ``scorer`` / ``rule`` are names or callables."""

    m: float | None = None
    eta: float = 0.5
    alpha1: float = 0.7
    alpha2: float = 0.7
    group_by: str | None = "question_type"
    scorer: str | Callable = "pot"
    scorer_options: tuple = ()
    rule: str | Callable = "seed"
    holdout: float = 0.25
    m_clip: tuple[float, float] = (0.05, 0.99)
    min_group_size: int = 5
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.scorer_options, dict):
            object.__setattr__(self, "scorer_options", tuple(sorted(self.scorer_options.items())))

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
        get_rule(self.rule)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["scorer"], out["rule"] = scorer_name(self.scorer), rule_name(self.rule)
        out["scorer_options"] = {k: v for k, v in self.scorer_options}
        out["m_clip"] = list(self.m_clip)
        return out


@dataclass(frozen=True)
class AuditResult:
    """items: one row per input comparison; report: JSON-able run report; u_z: (n_U, d) unit
    difference vectors of the pool in ``items[items.role == "U"]`` order (for figures)."""

    items: pd.DataFrame
    report: dict
    config: AuditConfig
    u_z: np.ndarray = field(repr=False, default=None)

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
          scorer: str | Callable = "pot", scorer_options: dict | tuple = (), rule: str | Callable = "seed",
          holdout: float = 0.25, m_clip: tuple[float, float] = (0.05, 0.99), min_group_size: int = 5,
          seed: int = 0) -> AuditResult:
    """Audit the judge verdicts of the unlabelled rows of ``comparisons`` (see the module docstring).

    ``features``: :class:`PairEmbeddings` or an :data:`Encoder` callable. The keywords are the
    fields of :class:`AuditConfig`; :func:`run_audit` takes a config object instead.
    """
    config = AuditConfig(m=m, eta=eta, alpha1=alpha1, alpha2=alpha2, group_by=group_by, scorer=scorer,
                         scorer_options=scorer_options, rule=rule, holdout=holdout, m_clip=tuple(m_clip),
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
    kept = np.zeros(n, bool)
    own_reference: dict[str, np.ndarray] = {}
    denoising = []
    small = [ty for ty in pd.unique(types[positives]) if (types[positives] == ty).sum() < cfg.min_group_size]
    groups_p = [(ty, positives[types[positives] == ty]) for ty in pd.unique(types[positives]) if ty not in small]
    if small:
        groups_p.append((POOLED_TYPE, positives[np.isin(types[positives], small)]))
    for ty, rows in groups_p:
        res = denoise(e_winner[rows], z[rows], alpha1=cfg.alpha1, alpha2=cfg.alpha2)
        keep = rows[res.keep]
        kept[keep] = True
        if ty != POOLED_TYPE:
            own_reference[ty] = keep
        denoising.append({"question_type": ty, "n_P": res.n, "n_core": res.n_core, "n_kept": res.n_kept,
                          "types": sorted(small) if ty == POOLED_TYPE else [ty]})
    union_reference = np.flatnonzero(kept)
    timings["denoise"] = time.perf_counter() - t

    # 6-7. scores and decisions per scoring group ------------------------------------------------------
    t = time.perf_counter()
    scorer = get_scorer(cfg.scorer, **dict(cfg.scorer_options))
    rule = get_rule(cfg.rule)
    score_raw = np.full(n, np.nan)
    score = np.full(n, np.nan)
    flipped = np.zeros(n, bool)
    group = np.array([""] * n, dtype=object)
    groups_report = []
    solver_time = 0.0
    pool_groups = (list(pd.unique(types[unlabelled])) if cfg.group_by == "question_type" else ["all"])
    for g in pool_groups:
        rows = unlabelled[types[unlabelled] == g] if cfg.group_by == "question_type" else unlabelled
        if cfg.group_by == "question_type" and g in own_reference:
            ref, reference = own_reference[g], "own type"
        else:
            ref = union_reference
            reference = "pooled" if cfg.group_by == "question_type" else "all"
        group[rows] = g
        ts = time.perf_counter()
        result = scorer(z[ref], z[rows], m)
        solver_time += time.perf_counter() - ts
        s = np.asarray(result.scores, np.float64)
        if s.shape != (len(rows),) or not np.isfinite(s).all() or (s < 0).any():
            raise ValueError(f"scorer {scorer_name(cfg.scorer)!r} returned invalid scores for group {g!r} "
                             f"(need {len(rows)} finite values >= 0)")
        top = s.max()
        all_zero = not top > 0
        if all_zero:
            warnings.warn(f"group {g!r}: every score is 0; normalised scores set to 0", RuntimeWarning)
        normalised = s / top if not all_zero else np.zeros_like(s)
        flips = np.asarray(rule(normalised, RuleContext(m=m, eta=cfg.eta, group=str(g), seed=cfg.seed)), bool)
        if flips.shape != (len(rows),):
            raise ValueError(f"rule {rule_name(cfg.rule)!r} returned shape {flips.shape}, need ({len(rows)},)")
        score_raw[rows], score[rows], flipped[rows] = s, normalised, flips
        groups_report.append({"group": str(g), "n_U": int(len(rows)), "n_reference": int(len(ref)),
                              "reference": reference, "n_flipped": int(flips.sum()), "all_zero_scores": all_zero,
                              "method": result.method, "solver": result.info})
    timings["score"] = time.perf_counter() - t
    timings["solver"] = solver_time

    # outputs ----------------------------------------------------------------------------------------
    role = np.array(["excluded"] * n, dtype=object)
    role[positives] = "P-filtered"
    role[kept] = "P"
    role[held] = "holdout"
    role[unlabelled] = "U"
    adjusted = np.where(flipped, flip_verdict(judge), judge)
    items = pd.DataFrame({
        "id": ids, "question_type": table["question_type"].to_numpy(dtype=object), "group": group,
        "judge": judge, "human": human, "status": status, "reason": reason, "role": role,
        "score_raw": score_raw, "score": score, "adjusted": adjusted, "flipped": flipped,
    })
    methods = pd.Series([g["method"] for g in groups_report]).value_counts().to_dict()
    timings["total"] = time.perf_counter() - t0
    report = {
        "counts": {
            "input": n, "labelled": int((status == LABELLED).sum()), "unlabelled": int(len(unlabelled)),
            "excluded": int((status == EXCLUDED).sum()),
            "exclusion_reasons": pd.Series(reason[status == EXCLUDED]).str.split("; ").explode()
            .value_counts().astype(int).to_dict() if (status == EXCLUDED).any() else {},
            "P": int(len(positives)), "P_denoised": int(kept.sum()), "holdout": int(len(held)),
            "U": int(len(unlabelled)), "flipped": int(flipped.sum()),
        },
        "flip_rate": float(flipped[unlabelled].mean()),
        "m": m_info, "eta": cfg.eta, "alpha1": cfg.alpha1, "alpha2": cfg.alpha2,
        "scorer": scorer_name(cfg.scorer), "rule": rule_name(cfg.rule), "group_by": cfg.group_by,
        "seed": cfg.seed, "config": cfg.to_dict(),
        "embeddings": {"source": emb.source, "dim": emb.dim},
        "denoising": denoising, "groups": groups_report, "solver_paths": methods,
        "timings_s": timings,
    }
    u_z = z[role == "U"].astype(np.float32)
    return AuditResult(items=items, report=report, config=cfg, u_z=u_z)
