"""The audit with a guarantee (``AuditConfig.guarantee``), as a chain of named stages.

    hide half of the labels (roles) -> the audit, once per judge of the cascade -> candidates per judge
    -> certify (trust / flip / escalate) -> assumption checks -> the items table, assembled once -> report

:func:`audit_with_guarantee` takes the plain audit's chain as a callable (``audit``), so this module sits
beside :mod:`.pipeline` without importing it. See :mod:`puaudit_jax.audit.guarantee` for the method.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..datasets.comparisons import EVIDENCE_COLUMNS, other_judge_verdicts
from ..datasets.exclusions import EXCLUDED, LABELLED, UNLABELLED, item_status
from ..datasets.verdicts import MISSING, TIE, question_types
from ..quantify.sample_check import audit_sample_checks
from . import guarantee as g
from .config import AuditConfig
from .guarantee.assumptions import balance_checks
from .prepare import check_labelled
from .report import Counts

#: The cascade's audits of the other judges see the first judge's verdicts in this column (as one more judge).
FIRST_JUDGE = "cascade_first_judge"


def audit_with_guarantee(comparisons: pd.DataFrame, features, config: AuditConfig, audit):
    """``run_audit`` with ``config.guarantee``: trust, flip or escalate every pool row.

    Args:
        comparisons: the comparison table.
        features: pair embeddings or an encoder (as ``run_audit`` takes).
        config: the validated settings, with a guarantee.
        audit: the plain audit's chain, ``audit(table, features, config) -> AuditResult``.

    Returns:
        The ``AuditResult`` with the decided items and the report's ``guarantee`` section.
    """
    table = normal_other_judges(comparisons.reset_index(drop=True), config.other_judges)
    check_labelled(table)  # a table without human labels is said to be one (before any rows are counted)
    truth, types = table["human"].to_numpy(dtype=object), question_types(table["question_type"])
    judges = config.other_judges if config.cascade else ()
    calibrating = g.calibrating_status(table, judges, config.human_ties)
    hidden = g.hidden_rows(calibrating, types, table, config)
    shown = table.assign(human=np.where(np.isin(np.arange(len(table)), hidden), MISSING, truth))
    result = audit(shown, features, replace(config, other_judges=()) if config.cascade else config)
    others = cascade_audits(shown, features, config, audit)
    role = cascade_roles(result.items["role"].to_numpy(dtype=object), [it for _, it, *_ in others])
    roles = g.row_roles(calibrating, hidden, role, truth)
    stages = g.stages_of(table, result.items, others, roles, config)
    certification = g.certify(stages, roles, truth, g.Settings(config.guarantee, config.delta))
    status = g.cascade_status(table, judges)
    checks = audit_sample_checks(types, status, table, config.cluster_by) + balance_checks(
        table, status, types, result.items["p_wrong"].to_numpy(float), roles, config)  # fmt: skip
    if any(c.warning for c in checks):  # the guarantee does not apply: no row is trusted or flipped
        certification = replace(certification, stage=np.full(len(table), -1), final=stages[0].judge.copy())
    given = item_status(table)["reason"].to_numpy(dtype=object)  # a hidden human tie takes its own reason back
    items = certified_items(result.items, role, certification, roles, stages, truth, given)
    report = _report(result, items, certification, roles, stages, checks, truth, config)
    kept = items["role"].to_numpy() == "U"
    return replace(result, items=items, report=report, config=config,
                   u_z=result.u_z[kept[result.items["role"].to_numpy() == "U"]])  # fmt: skip


def normal_other_judges(table: pd.DataFrame, names: tuple[str, ...]) -> pd.DataFrame:
    """``table`` with the other judges' columns ``names`` in normal form ("A" | "B" | "tie" | "missing").

    A cascade makes their verdicts a judge column and a final verdict, so a spelling ("a", "C") or a null
    must not pass as it is. Raises the ``ComparisonValidationError`` of a value that is no verdict (its row).
    """
    if not names:
        return table
    verdicts = other_judge_verdicts(table, names, source="other judges")
    return table.assign(**{name: verdicts[:, k] for k, name in enumerate(names)})


def on_judge(table: pd.DataFrame, k: int, config: AuditConfig) -> tuple[pd.DataFrame, AuditConfig]:
    """(table, config) of the audit of the cascade's judge ``config.other_judges[k]``.

    Its verdicts become the judge's. The judges before it in the cascade (the first one's verdicts in the
    column ``FIRST_JUDGE``) are its evidence, the judges after it are not: they are the more expensive ones,
    asked only for the rows that reach them. The first judge's own tells (both orders, confidence) are left out.

    Args:
        table: the comparison table (the hidden labels missing).
        k: the index of the judge in ``config.other_judges``.
        config: the guaranteed audit's settings.

    Raises:
        ValueError: the table has a column ``FIRST_JUDGE`` already.
    """
    if FIRST_JUDGE in table.columns:
        raise ValueError(f"cascade: the comparisons already have a column {FIRST_JUDGE!r}, which the cascade needs")
    tells = [c for c in EVIDENCE_COLUMNS if c in table.columns]
    name = config.other_judges[k]
    shown = table.drop(columns=tells).assign(judge=table[name], **{FIRST_JUDGE: table["judge"]})
    evidence = tuple(kind for kind in config.evidence if kind not in ("swapped", "confidence"))
    return shown, replace(config, other_judges=(FIRST_JUDGE, *config.other_judges[:k]), evidence=evidence,
                          guarantee=None, cascade=False)  # fmt: skip


def cascade_audits(shown: pd.DataFrame, features, config: AuditConfig, audit) -> list:
    """Per later judge of the cascade: (name, its audit's items, its audit's table, the judges before it).

    Args:
        shown: the comparison table with the hidden labels missing.
        features: pair embeddings or an encoder (as ``run_audit`` takes).
        config: the guaranteed audit's settings (none without ``config.cascade``).
        audit: the plain audit's chain, ``audit(table, features, config) -> AuditResult``.

    Raises:
        ValueError: a later judge's audit failed (that judge named).
    """
    out = []
    for k in range(len(config.other_judges) if config.cascade else 0):
        judged, judged_config = on_judge(shown, k, config)
        try:
            items = audit(judged, features, judged_config).items
        except ValueError as err:  # say which judge's audit failed: its verdicts are the judge column there
            raise ValueError(f"cascade: the audit of other judge {config.other_judges[k]!r}: {err}") from err
        out.append((config.other_judges[k], items, judged, judged_config.other_judges))
    return out


def cascade_roles(role: np.ndarray, later: list[pd.DataFrame]) -> np.ndarray:
    """(n,) the first judge's audit roles; a row it left out takes its role in the first later audit that used it."""
    role = np.asarray(role, dtype=object).copy()
    for items in later:
        theirs = items["role"].to_numpy(dtype=object)
        take = (role == "excluded") & (theirs != "excluded")
        role[take] = theirs[take]
    return role


def certified_items(items: pd.DataFrame, role: np.ndarray, certification, roles, stages, truth: np.ndarray,
                    given_reason: np.ndarray) -> pd.DataFrame:  # fmt: skip
    """The audit's items with the hidden labels back, role "calibration" on them, and every pool row decided.

    Adds ``decision`` (trust | flip | escalate on pool rows, "" elsewhere), ``adjusted`` / ``flipped`` from
    the decisions and, with a cascade, ``decided_by`` (the judge whose verdict a certified row takes,
    "human" when escalated) and ``p_wrong[NAME]`` (the later judges' P(judge wrong)). A row only a later judge
    has a verdict for takes its status there; a hidden human tie ("disagree") stays excluded with its reason.

    Args:
        items: the first judge's audit's item table.
        role: each row's role across the cascade's audits, shape (n,).
        certification: what :func:`~.guarantee.certify` decided.
        roles: the guarantee's :class:`~.guarantee.roles.RowRoles`.
        stages: the cascade's stages (the judge first).
        truth: every row's human verdict as given, shape (n,).
        given_reason: each row's ``item_status`` reason with the labels as given, shape (n,).
    """
    status, reason = items["status"].to_numpy(dtype=object).copy(), items["reason"].to_numpy(dtype=object).copy()
    usable = (status == EXCLUDED) & (role != "excluded")  # rows a later judge of the cascade has a verdict for
    status[usable], reason[usable] = np.where(truth[usable] == MISSING, UNLABELLED, LABELLED), ""
    status[roles.hidden], role = LABELLED, role.copy()
    tied = np.flatnonzero(np.isin(np.arange(len(items)), roles.hidden) & (truth == TIE))
    status[tied], reason[tied] = (
        EXCLUDED,
        np.where(np.isin(given_reason[tied], g.TIE_REASONS), given_reason[tied], g.TIE_REASONS[0]),
    )
    role[roles.hidden] = "calibration"
    pool, stage = roles.pool, certification.stage
    decision, judge = np.full(len(items), "", dtype=object), stages[0].judge
    adjusted = judge.copy()
    decision[pool], adjusted[pool] = "escalate", certification.final[pool]
    taken = pool[stage[pool] >= 0]
    own = np.array([stages[k].judge[row] for k, row in zip(stage[taken], taken)], dtype=object)
    decision[taken] = np.where(certification.final[taken] != own, "flip", "trust")
    extra = {}
    if len(stages) > 1:
        by = np.where(role == "U", "human", "").astype(object)
        by[taken] = [stages[k].name for k in stage[taken]]
        extra = {"decided_by": by, **{f"p_wrong[{s.name}]": s.p_wrong for s in stages[1:]}}
    return items.assign(human=truth, status=status, reason=reason, role=role, adjusted=adjusted,
                        flipped=decision == "flip", decision=decision, **extra)  # fmt: skip


def _report(result, items, certification, roles, stages, checks, truth, config):
    """The report of a guaranteed audit: counts and flip rate of the decided items, the guarantee section."""
    flipped, role = items["flipped"].to_numpy(bool), items["role"].to_numpy()
    counts = Counts.of(items["status"].to_numpy(), items["reason"].to_numpy(), role, flipped)
    flip_rate = float(flipped[role == "U"].mean()) if (role == "U").any() else float("nan")  # NaN: no pool
    section = g.guarantee_of(certification, roles, stages, items, checks, truth, config)
    return replace(result.report, counts=counts, flip_rate=flip_rate, guarantee=section, sample_checks=checks,
                   config=config)  # fmt: skip
