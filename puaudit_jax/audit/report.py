"""Stage 8, ``report``: the run report as a dataclass, and its versioned JSON form (``report.json``).

:meth:`AuditReport.to_dict` writes the JSON layout every earlier version wrote (counts, m, eta,
scorer, rule, solver paths, denoising and scoring groups, the calibrated decision, timings) plus
``format_version``; :meth:`AuditReport.from_dict` reads it back. :meth:`AuditReport.summary`
is the text ``puaudit audit`` prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..datasets.exclusions import EXCLUDED, LABELLED
from ..quantify.sample_check import SampleCheck, check_from_dict
from ..quantify.targets import TargetEstimate
from .config import AuditConfig
from .crossfit import CrossfitSummary
from .evidence import UNEQUAL
from .guarantee import Guarantee
from .mass import MassEstimate
from .references import DenoisingGroup
from .rules import DecisionSummary
from .score import ScoringGroup

FORMAT_VERSION = 1
"""Version of the report.json layout; bump it when a key changes meaning or goes away."""


@dataclass(frozen=True)
class Counts:
    """Rows per status and role (input = labelled + unlabelled + excluded; labelled = P + holdout).

    Attributes:
        input: rows of the comparison table.
        labelled: usable human-labelled rows.
        unlabelled: usable judge-only rows.
        excluded: rows left out.
        exclusion_reasons: reason -> rows (a row may have several).
        P: positives (labelled rows not held out).
        P_denoised: ``|P'|``, positives kept by the denoising.
        holdout: labelled rows held out to estimate m.
        U: pool rows (= unlabelled).
        flipped: pool verdicts flipped.
        calibration: labelled rows that calibrated a guarantee (hidden from the audit; 0 without one).
    """

    input: int
    labelled: int
    unlabelled: int
    excluded: int
    exclusion_reasons: dict
    P: int
    P_denoised: int
    holdout: int
    U: int
    flipped: int
    calibration: int = 0

    @classmethod
    def of(cls, status: np.ndarray, reason: np.ndarray, roles: np.ndarray, flipped: np.ndarray) -> Counts:
        """Counts from the status, reason, role and flipped columns of the items.

        Args:
            status: each item's status (labelled / unlabelled / excluded), shape (n,).
            reason: each item's exclusion reasons ("; "-joined), shape (n,).
            roles: each item's role ("P", "P-filtered", "holdout", "U", "calibration", ...), shape (n,).
            flipped: whether each item was flipped, shape (n,) bool.
        """
        excluded = status == EXCLUDED
        reasons = (
            pd.Series(reason[excluded]).str.split("; ").explode().value_counts().astype(int).to_dict()
            if excluded.any()
            else {}
        )
        return cls(
            input=len(status),
            labelled=int((status == LABELLED).sum()),
            unlabelled=int((roles == "U").sum()),
            excluded=int(excluded.sum()),
            exclusion_reasons=reasons,
            P=int(np.isin(roles, ("P", "P-filtered")).sum()),
            P_denoised=int((roles == "P").sum()),
            holdout=int((roles == "holdout").sum()),
            U=int((roles == "U").sum()),
            flipped=int(flipped.sum()),
            calibration=int((roles == "calibration").sum()),
        )


@dataclass(frozen=True)
class HiddenLabels:
    """``puaudit audit --hide-labels``: the original / adjusted verdicts checked against hidden human labels.

    Attributes:
        share: the share of labelled rows audited with hidden human verdicts.
        consistency: the consistency of the original / adjusted verdicts with them (one row per type
            + all).
    """

    share: float
    consistency: tuple[dict, ...]

    def to_dict(self) -> dict:
        """JSON-able form."""
        return {"share": self.share, "consistency": [dict(r) for r in self.consistency]}

    @classmethod
    def from_dict(cls, data: dict) -> HiddenLabels:
        """Inverse of :meth:`to_dict`."""
        return cls(data["share"], tuple(data["consistency"]))

    def table(self) -> str:
        """The consistency rows as text, 4 decimals."""
        return pd.DataFrame(list(self.consistency)).to_string(index=False, float_format=lambda v: f"{v:.4f}")


@dataclass(frozen=True)
class AuditReport:
    """Everything one audit run decided and measured (see the module docstring).

    Attributes:
        counts: rows per status and role (:class:`Counts`).
        flip_rate: share of the pool whose verdict was flipped.
        m: the transported mass (:class:`~puaudit_jax.audit.mass.MassEstimate`).
        config: the audit's settings.
        scorer: the scorer's name.
        rule: the decision rule's name.
        embeddings: where the embeddings came from and the encoder's counts.
        denoising: one :class:`~puaudit_jax.audit.references.DenoisingGroup` per denoising group.
        groups: one :class:`~puaudit_jax.audit.score.ScoringGroup` per scoring group.
        decision: the calibrated rule's decision (None for score rules).
        crossfit: the cross-fitting summary (None without cross-fitted features).
        timings_s: stage -> seconds.
        hidden_labels: the ``--hide-labels`` check, or None.
        agreement: judge-human agreement estimates (PPI++ with the audit's predictions).
        sample_checks: checks that the labelled rows are a random sample.
        guarantee: what ``guarantee`` certified (trust / flip / escalate), or None.
        format_version: the report.json layout's version.
    """

    counts: Counts
    flip_rate: float
    m: MassEstimate
    config: AuditConfig
    scorer: str
    rule: str
    embeddings: dict
    denoising: tuple[DenoisingGroup, ...]
    groups: tuple[ScoringGroup, ...]
    decision: DecisionSummary | None = None
    crossfit: CrossfitSummary | None = None
    timings_s: dict = field(default_factory=dict)
    hidden_labels: HiddenLabels | None = None
    agreement: tuple[TargetEstimate, ...] = ()
    sample_checks: tuple[SampleCheck, ...] = ()
    guarantee: Guarantee | None = None
    format_version: int = FORMAT_VERSION

    @property
    def eta(self) -> float:
        """The flip threshold of the config."""
        return self.config.eta

    @property
    def solver_paths(self) -> dict:
        """Solver path -> number of scoring groups it scored."""
        return pd.Series([g.method for g in self.groups]).value_counts().to_dict()

    def to_dict(self) -> dict:
        """The JSON-able report (layout of report.json)."""
        cfg = self.config
        out = {
            "format_version": self.format_version,
            "counts": asdict(self.counts),
            "flip_rate": self.flip_rate,
            "m": self.m.to_dict(),
            "eta": cfg.eta,
            "alpha1": cfg.alpha1,
            "alpha2": cfg.alpha2,
            "scorer": self.scorer,
            "rule": self.rule,
            "group_by": cfg.group_by,
            "seed": cfg.seed,
            "config": cfg.to_dict(),
            "embeddings": dict(self.embeddings),
            "denoising": [g.to_dict() for g in self.denoising],
            "groups": [g.to_dict() for g in self.groups],
            "solver_paths": self.solver_paths,
            "decision": None if self.decision is None else self.decision.to_dict(),
            "crossfit": None if self.crossfit is None else self.crossfit.to_dict(),
            "timings_s": dict(self.timings_s),
        }
        if self.hidden_labels is not None:
            out["hidden_labels"] = self.hidden_labels.to_dict()
        if self.agreement:
            out["agreement"] = [row.to_dict() for row in self.agreement]
        if self.sample_checks:
            out["random_sample_checks"] = [c.to_dict() for c in self.sample_checks]
        if self.guarantee is not None:
            out["guarantee"] = self.guarantee.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict) -> AuditReport:
        """Read a report written by :meth:`to_dict` (any format_version up to :data:`FORMAT_VERSION`).

        Raises:
            ValueError: the report's format_version is newer than this puaudit's.
        """
        version = data.get("format_version", 0)
        if version > FORMAT_VERSION:
            raise ValueError(
                f"report format_version {version} is newer than this puaudit ({FORMAT_VERSION}): "
                "upgrade puaudit to read it"
            )
        optional = {"decision": DecisionSummary, "crossfit": CrossfitSummary, "hidden_labels": HiddenLabels,
                    "guarantee": Guarantee}  # fmt: skip
        return cls(
            counts=Counts(**data["counts"]),
            flip_rate=data["flip_rate"],
            m=MassEstimate.from_dict(data["m"]),
            config=AuditConfig.from_dict(data["config"]),
            scorer=data["scorer"],
            rule=data["rule"],
            embeddings=data["embeddings"],
            denoising=tuple(DenoisingGroup.from_dict(g) for g in data["denoising"]),
            groups=tuple(ScoringGroup.from_dict(g) for g in data["groups"]),
            timings_s=data.get("timings_s", {}),
            agreement=tuple(TargetEstimate.from_dict(r) for r in data.get("agreement", ())),
            sample_checks=tuple(check_from_dict(c) for c in data.get("random_sample_checks", ())),
            format_version=FORMAT_VERSION,
            **{k: None if data.get(k) is None else kind.from_dict(data[k]) for k, kind in optional.items()},
        )

    def evidence_warnings(self) -> list[str]:
        """Why evidence kinds were left out for missingness that differs with the label (one line each)."""
        skipped = (self.decision.judge_evidence or {}).get("skipped", {}) if self.decision is not None else {}
        return [f"evidence {kind!r} left out, {why}" for kind, why in skipped.items() if why.startswith(UNEQUAL)]

    def summary(self) -> str:
        """A few lines for people: counts, m, flips, solver, and the calibrated decision."""
        c, m = self.counts, self.m
        raw = "" if m.raw is None else f", raw {m.raw:.3f}"
        lines = [
            f"items {c.input}: labelled {c.labelled}, unlabelled {c.unlabelled}, excluded {c.excluded} "
            f"{c.exclusion_reasons}",
            f"P {c.P} -> P' {c.P_denoised}, holdout {c.holdout}, U {c.U}; m = {m.value:.3f} ({m.source}{raw}), "
            + ("" if self.decision is not None else f"eta = {self.eta}; ")  # eta: the score rules' threshold
            + f"flipped {c.flipped} ({self.flip_rate:.1%})"
            + ("" if self.guarantee is None else " by the guarantee"),
            f"scorer {self.scorer}, rule {self.rule}, solver paths {self.solver_paths}, "
            f"time {self.timings_s.get('total', float('nan')):.2f}s",
        ]
        if self.decision is not None:
            lines.append(_decision_line(self.decision, guaranteed=self.guarantee is not None))
            if self.decision.abstained and self.guarantee is None:
                lines.append("the judge's verdicts stand; `--guarantee A` (AuditConfig.guarantee) certifies which "
                             "of them agree with humans at least A of the time and names the rows a human must "
                             "see")  # fmt: skip
        for row in self.agreement:
            e = row.estimate
            lines.append(f"agreement m, {e.estimator}: " + (e.note if not e.estimable else
                         f"{e.estimate:.3f} [{e.lower:.3f}, {e.upper:.3f}] ({100 * e.level:.0f}% interval, "
                         f"{e.n_labelled} labelled, {e.n_unlabelled} pool items)"))  # fmt: skip
        lines += [f"warning: {c.warning}" for c in self.sample_checks if c.warning]
        lines += [f"warning: {w}" for w in self.evidence_warnings()]
        if self.guarantee is not None:
            lines += self.guarantee.lines()
        return "\n".join(lines)


def _decision_line(d: DecisionSummary, guaranteed: bool) -> str:
    """The calibrated rule's line; the flips it speaks of are the ones applied, or it says none of its own are.

    Args:
        d: the rule's decision.
        guaranteed: a guarantee decided the pool rows (trust, flip or escalate), not the rule.
    """
    state = f"ABSTAINED ({d.reason})" if d.abstained else "flipping"
    agrees = "n/a" if d.judge_agreement_labelled is None else f"{d.judge_agreement_labelled:.1%}"
    head = "calibrated rule (not applied: the guarantee decides every pool row)" if guaranteed else (
        "calibrated decision")  # fmt: skip
    line = f"{head}: {state}; {d.n_calibration} labelled items calibrate (judge agrees on {agrees})"
    e = d.evidence
    if e is None:
        return line
    line += (f"; out-of-fold gain {100 * e.crossfit_gain:+.2f} points (lower bound "
             f"{100 * e.crossfit_gain_lower_bound:+.2f})")  # fmt: skip
    return line + _pool_gain(d, e, guaranteed)


def _pool_gain(d: DecisionSummary, e, guaranteed: bool) -> str:
    """The expected gain on the pool of the rule's flips, said of the flips applied (none when it abstains)."""
    lo, hi = e.expected_gain_interval
    gain = f"{100 * e.expected_gain:+.2f} points [{100 * lo:+.2f}, {100 * hi:+.2f}]"
    if guaranteed:
        return "; alone it would flip none" if d.abstained else (
            f"; alone it would flip {d.n_flipped} pool rows, expected gain {gain}")  # fmt: skip
    if d.abstained:
        return (f"; no flip applied (it would have flipped the {e.n_flipped_if_not_abstaining} pool rows with "
                f"P(judge wrong) > {d.threshold:g}), so no gain is expected on the pool")  # fmt: skip
    return f"; expected gain of its {d.n_flipped} flips on the pool {gain}"
