"""What ``--guarantee`` certified, as the report's ``guarantee`` section: :class:`Guarantee` and its prose.

guarantee_of(certification, roles, ...) -> Guarantee     the report of a certification
Guarantee.lines()                                      what was certified, or why nothing was
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .certify import Certification
from .needed import LabelsNeeded, labels_needed
from .roles import TIE_REASONS, RowRoles
from .testing import CurveRow

DECISIONS = ("trust", "flip", "escalate")


@dataclass(frozen=True)
class Guarantee:
    """What ``--guarantee`` certified (the report's ``guarantee`` section).

    Attributes:
        agreement: A, the guaranteed agreement of the trusted and flipped verdicts with humans.
        delta: D, the probability that the guarantee fails.
        certify: the candidates tried (``AuditConfig.certify``).
        candidate: the candidate whose threshold certified the pool rows (the judge's), or None.
        n_calibration: labelled rows whose labels were hidden from the audit (they test the fitted
            candidates).
        n_labelled: labelled rows that test the label-free candidate (all that calibrate).
        n_fit: labelled rows the audit fitted on.
        threshold: the kept candidate's threshold on its confidence, or None.
        coverage: share of the pool certified (trust or flip).
        coverage_by_type: question type -> (pool rows, share certified).
        counts: decision -> pool rows.
        lower_bound: one-sided Clopper-Pearson lower bound of the kept candidate's calibration agreement above
            its threshold, at the level it was tested at (>= A when certified), or None.
        calibration_agreement: that agreement, or None.
        judge_agreement: the judge's agreement on every calibrating labelled row.
        labels_needed: when nothing was certified, (low, high) more labelled rows with which half and 90 %
            of simulated samples certify some (high None: not even the whole pool), or None.
        applies: whether the guarantee's assumptions hold as far as the data show; when not, no row is
            trusted or flipped.
        notes: why it does not apply, or what to do next.
        candidates: per candidate of the judge, (name, level, calibration rows, threshold or None, coverage).
        curves: candidate -> its tested grid (:class:`~.testing.CurveRow` tuples), for the figure.
        stages: with a cascade, one (judge, candidate or None, threshold or None, pool rows it decides, pool
            rows that reached it) per judge in order; () with one judge.
        human_ties: what a human tie meant ("exclude": the rows a human tied neither calibrate nor are
            covered; "disagree": they calibrate as disagreement, every pool row is covered).
        human_tie_rows: labelled rows a human tied that the guarantee would otherwise use.
    """

    agreement: float
    delta: float
    certify: str
    candidate: str | None
    n_calibration: int
    n_labelled: int
    n_fit: int
    threshold: float | None
    coverage: float
    coverage_by_type: dict
    counts: dict
    lower_bound: float | None
    calibration_agreement: float | None
    judge_agreement: float
    labels_needed: tuple | None
    applies: bool
    notes: tuple[str, ...]
    candidates: tuple = ()
    curves: dict | None = None
    stages: tuple = ()
    human_ties: str = "exclude"
    human_tie_rows: int = 0

    def to_dict(self) -> dict:
        """JSON-able form."""
        out = asdict(self)
        out["coverage_by_type"] = {k: list(v) for k, v in self.coverage_by_type.items()}
        out["notes"], out["candidates"] = list(self.notes), [list(r) for r in self.candidates]
        out["curves"] = {k: [list(r) for r in rows] for k, rows in (self.curves or {}).items()}
        out["stages"] = [list(r) for r in self.stages]
        out["labels_needed"] = None if self.labels_needed is None else list(self.labels_needed)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Guarantee:
        """Inverse of :meth:`to_dict`."""
        by_type = {k: (int(v[0]), float(v[1])) for k, v in data["coverage_by_type"].items()}
        curves = {k: tuple(CurveRow(*r) for r in rows) for k, rows in (data.get("curves") or {}).items()}
        needed = data.get("labels_needed")
        return cls(**{**data, "coverage_by_type": by_type, "notes": tuple(data["notes"]), "curves": curves,
                      "candidates": tuple(tuple(r) for r in data.get("candidates", ())),
                      "stages": tuple(tuple(r) for r in data.get("stages", ())),
                      "labels_needed": None if needed is None else tuple(needed)})  # fmt: skip

    @property
    def curve(self) -> tuple:
        """The kept candidate's curve (the first candidate's when none was kept), or ()."""
        curves = self.curves or {}
        name = self.candidate if self.candidate in curves else next(iter(curves), None)
        return curves.get(name, ())

    def thresholds(self) -> dict:
        """Every judge's (candidate, threshold), keyed by judge: "judge" first, then a cascade's later judges."""
        if not self.stages:
            return {"judge": (self.candidate, self.threshold)}
        return {judge: (candidate, t) for judge, candidate, t, *_ in self.stages}

    def lines(self) -> list[str]:
        """The report's text: what was certified, or why nothing was and what would help."""
        head = (f"guarantee: agreement >= {self.agreement:g} with probability >= {probability(self.delta)} "
                f"({self.n_labelled} labelled rows calibrate, {self.n_calibration} of them hidden from the audit, "
                f"which fitted on {self.n_fit})")  # fmt: skip
        c = self.counts
        if sum(c.values()) == 0:
            out = [head + ": no pool rows to decide"]
        elif c["trust"] + c["flip"] == 0:
            out = [head + f": nothing certified; every pool row is escalated (judge agrees on "
                   f"{self.judge_agreement:.1%} of the calibrating rows)"]  # fmt: skip
        else:
            at = "" if self.threshold is None else (
                f"; {_rule(self.candidate, self.threshold)}, calibration agreement "
                f"{self.calibration_agreement:.1%}, lower bound {self.lower_bound:.3f}")  # fmt: skip
            out = [head + f": {self.coverage:.1%} of the pool certified (trust {c['trust']}, flip {c['flip']}, "
                   f"escalate {c['escalate']}){at}"]  # fmt: skip
        for judge, candidate, threshold, decided, reached in self.stages:
            at = "nothing certified" if threshold is None else _rule(candidate, threshold)
            out.append(f"guarantee: cascade: {judge}: {at}, decides {decided} of the {reached} pool rows that reach "
                       "it")  # fmt: skip
        return out + [f"guarantee: {note}" for note in self.notes]


def _rule(candidate: str, threshold: float) -> str:
    """A candidate's certified threshold in words: the label-free one's is a score, the fitted ones' a probability."""
    what = "score (the judge's agreements)" if candidate == "label-free" else "confidence"
    return f"{candidate} {what} >= {threshold:.3f}"


def probability(delta: float) -> str:
    """1 - ``delta`` as text that is never rounded up to a false "1" (``1 - 1e-12``)."""
    text = f"{1 - delta:g}"
    return f"1 - {delta:g}" if text == "1" else text


def notes_for(certified: bool, needed: LabelsNeeded | None, judge_agreement: float, agreement: float,
              warnings: list[str], pool: int = 1, other_judges: bool = False) -> tuple[str, ...]:  # fmt: skip
    """The report's advice: broken assumptions first, then (nothing ``certified``) what would certify some.

    Args:
        certified: whether some pool row was certified.
        needed: the extra labels that would certify some rows, or None when not even labelling the whole
            pool would (in most simulated samples).
        judge_agreement: the judge's agreement on the calibrating rows, in [0, 1].
        agreement: the target A, in (0, 1).
        warnings: the broken assumptions (each voids the guarantee).
        pool: the number of pool rows; with none there is nothing to decide, which is all it says then.
        other_judges: the audit has other judges' verdicts already (the advice then asks for more evidence).

    Returns:
        The notes, one sentence each.
    """
    notes = [f"does not apply: {w}; no row is trusted or flipped" for w in warnings]
    if pool == 0:
        return (*notes, "there are no unlabelled rows to decide: every usable row is labelled (the guarantee "
                        "decides the verdicts no human gave)")  # fmt: skip
    if not certified and not warnings:
        if needed is not None:
            notes.append(needed.text())
        else:
            evidence = ("more evidence (both presentation orders, more judges' verdicts)" if other_judges else
                        "evidence (both presentation orders, a second judge's verdicts: --other-judges)")  # fmt: skip
            notes.append("labelling the whole pool would certify nothing in most simulated samples: more labels "
                         f"will not help at this A; give the audit {evidence} or ask for a lower "
                         "--guarantee")  # fmt: skip
        if judge_agreement >= agreement:
            why = ("too few rows calibrate to certify it" if needed is not None else "too little above it for a lower "
                   "confidence bound to clear it, even with every pool row labelled")  # fmt: skip
            notes.append(f"the judge agrees on {judge_agreement:.1%} of the calibrating rows, above {agreement:g}, "
                         f"but {why}")  # fmt: skip
    return tuple(notes)


def tie_notes(human_ties: str, ties: int, tie_calibration: int, sided: int) -> tuple[str, ...]:
    """What the guarantee means for human ties.

    Args:
        human_ties: the setting ("disagree" counts a human tie as disagreement; else ties are left out).
        ties: the labelled rows a human tied.
        tie_calibration: the calibrating rows that are human ties (with "disagree").
        sided: the labelled rows a human picked a side on.

    Returns:
        The notes (none when there are no ties to speak of).
    """
    if human_ties == "disagree":
        return (f"a human tie counts as disagreement: {tie_calibration} of the calibrating rows are human ties",)
    if not ties:
        return ()
    return (f"it covers the pool rows a human would pick a side on: {ties} of the {ties + sided} labelled rows "
            f"({ties / (ties + sided):.0%}) are human ties, which it leaves out; --human-ties disagree counts a tie as "
            "disagreement and covers every pool row",)  # fmt: skip


def coverage_by_type(types: np.ndarray, decision: np.ndarray) -> dict:
    """Question type -> (pool rows, share certified), of the pool rows' (n_U,) types and decisions."""
    types, certified = np.asarray(types, dtype=object).astype(str), np.asarray(decision) != "escalate"
    return {t: (int((types == t).sum()), float(certified[types == t].mean())) for t in sorted(set(types))}


def candidate_rows(choice) -> tuple:
    """Per candidate of a :class:`~.candidates.Choice`: (name, level, calibration rows, threshold, coverage)."""
    return tuple((name, sel.level, choice.n_calibration[name], sel.threshold, sel.coverage)
                 for name, sel in choice.selections.items())  # fmt: skip


def stage_rows(names: list[str], certification: Certification, pool: np.ndarray) -> tuple:
    """Per stage of a cascade: (judge, candidate, threshold, pool rows it decides, pool rows that reached it).

    Args:
        names: the stages' judge names, in cascade order.
        certification: what :func:`~.certify.certify` decided.
        pool: the pool rows' indices.
    """
    return tuple((names[k], choice.kept, None if choice.selection is None else choice.selection.threshold,
                  int((certification.stage[pool] == k).sum()), certification.reached[k])
                 for k, choice in enumerate(certification.choices))  # fmt: skip


def guarantee_of(certification: Certification, roles: RowRoles, stages, items, checks, truth: np.ndarray,
                 config) -> Guarantee:  # fmt: skip
    """The report's :class:`Guarantee` of a certification, the decided ``items`` and the assumption checks.

    Args:
        certification: what :func:`~.certify.certify` decided.
        roles: the rows' roles.
        stages: the judges certified by (:func:`~.stages.stages_of`).
        items: the decided items (``decision``, ``question_type``, ``reason``).
        checks: the random-sample checks (a warning: the guarantee does not apply).
        truth: (n,) the human verdicts.
        config: the audit's settings.
    """
    pool, choice = roles.pool, certification.choices[0]
    decision = items["decision"].to_numpy(dtype=object)[pool]
    row, certified = (None if choice.selection is None else choice.selection.row), bool((decision != "escalate").any())
    judge = stages[0].judge
    sided = roles.labelled[np.isin(judge[roles.labelled], ("A", "B"))]  # a cascade's later judges decide the rest
    agree = float(np.mean(judge[sided] == truth[sided])) if len(sided) else float("nan")
    warnings = [c.warning for c in checks if c.warning]
    needed = None
    if not certified and not warnings and len(pool):
        needed = labels_needed(list(stages[0].candidates), pool, truth, len(roles.labelled), config.guarantee,
                               config.delta / len(stages), config.seed)  # fmt: skip
    ties = int(np.isin(items["reason"].to_numpy(dtype=object), TIE_REASONS).sum())
    tie_calibration = len(roles.ties) if config.human_ties == "disagree" else 0
    notes = (
        notes_for(
            certified, needed, agree, config.guarantee, warnings, pool=len(pool), other_judges=bool(config.other_judges)
        )
        + tie_notes(config.human_ties, ties, tie_calibration, len(roles.labelled) - tie_calibration)
        + _cluster_note(config)
    )
    return Guarantee(
        agreement=config.guarantee, delta=config.delta, certify=config.certify,
        candidate=choice.kept if certified else None, n_calibration=len(roles.hidden),
        n_labelled=len(roles.labelled), n_fit=len(roles.fit),
        threshold=None if row is None or not certified else row.threshold,
        coverage=float(np.mean(decision != "escalate")) if len(decision) else 0.0,
        coverage_by_type=coverage_by_type(items["question_type"].to_numpy(dtype=object)[pool], decision),
        counts={k: int((decision == k).sum()) for k in DECISIONS},
        lower_bound=None if row is None or not certified else row.lower,
        calibration_agreement=None if row is None or not certified else row.agreement,
        judge_agreement=agree, labels_needed=None if needed is None else (needed.low, needed.high),
        applies=not warnings, notes=notes, candidates=candidate_rows(choice),
        curves={name: sel.curve for name, sel in choice.selections.items()},
        stages=stage_rows([s.name for s in stages], certification, pool) if len(stages) > 1 else (),
        human_ties=config.human_ties, human_tie_rows=ties,
    )  # fmt: skip


def _cluster_note(config) -> tuple[str, ...]:
    """With ``cluster_by``: the binomial test takes the rows of one group as independent, which they are not."""
    if config.cluster_by is None:
        return ()
    return (f"caveat: rows of one {config.cluster_by!r} group are not independent, which the binomial test assumes: "
            "the guarantee is approximate",)  # fmt: skip
