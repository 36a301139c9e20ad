"""Trust, flip or escalate: pool verdicts with a guaranteed agreement with humans.

A user with a strong judge asks which verdicts can be used without review. With
``AuditConfig.guarantee`` = A and ``delta`` = D, every pool row gets a ``decision``:

- ``trust``: the judge's verdict is kept;
- ``flip``: the audit's flipped verdict is used;
- ``escalate``: a human must look,

such that, with probability at least 1 - D over the labelled sample, the agreement with humans of the
final verdicts of the trusted and flipped rows is at least A (the selective guarantee of Jung, Brahman &
Choi, "Trust or Escalate: LLM Judges with Provable Guarantees for Human Agreement", ICLR 2025, §3,
arXiv 2407.18370). One idea per module, pure numpy:

======================  ===================================================================================
``roles.py``            which labelled rows calibrate, which are hidden from the audit (:class:`RowRoles`)
``testing.py``          exact binomial tests of thresholds in a fallback sequence (:func:`select`)
``semi_supervised.py``  prediction-powered p-values from the pool's predictions (:func:`ppi_curve`)
``candidates.py``       the scores to certify by, label-free and fitted, and the valid choice among them
``certify.py``          the seam: ``certify(stages, roles, human, settings) -> Certification`` (cascade)
``stages.py``           the judges of a run and each one's candidates (:func:`stages_of`)
``needed.py``           how many more labels would certify something, by simulation (:class:`LabelsNeeded`)
``report.py``           :class:`Guarantee`, the report's section, and its prose
``assumptions.py``      the balance checks of every value the scores read
======================  ===================================================================================

Assumptions, checked where the data allow: the labelled rows are a random sample of the pool (the
audit's chi-square checks of the labelled share by question type, by the judge's verdict within types and
by cluster, and a permutation test of every evidence value the scores read, within types); when one
fails no row is trusted or flipped. Rows are independent (with ``cluster_by`` the binomial test treats
rows of one cluster as independent, which they are not: the report says so).
"""

from ..names import CERTIFY
from .assumptions import balance_checks, evidence_values
from .candidates import Candidate, Choice, choose, final_verdicts, fitted, label_free, try_candidate
from .certify import Certification, Settings, Stage, certify
from .needed import LabelsNeeded, labels_needed
from .report import DECISIONS, Guarantee, coverage_by_type, guarantee_of, notes_for, probability, tie_notes
from .roles import TIE_REASONS, RowRoles, calibrating_status, calibration_rows, cascade_status, hidden_rows, row_roles
from .semi_supervised import ppi_curve
from .stages import judge_candidates, stages_of
from .testing import (
    GRID,
    ONE_SEQUENCE,
    START,
    WEIGHTS,
    Curve,
    CurveRow,
    Selection,
    binomial_curve,
    confidence,
    fallback,
    min_rows,
    place,
    plug_in,
    select,
    select_on,
)

__all__ = [
    "CERTIFY",
    "DECISIONS",
    "GRID",
    "ONE_SEQUENCE",
    "START",
    "TIE_REASONS",
    "WEIGHTS",
    "Candidate",
    "Certification",
    "Choice",
    "Curve",
    "CurveRow",
    "Guarantee",
    "LabelsNeeded",
    "RowRoles",
    "Selection",
    "Settings",
    "Stage",
    "balance_checks",
    "binomial_curve",
    "calibrating_status",
    "calibration_rows",
    "cascade_status",
    "certify",
    "choose",
    "confidence",
    "coverage_by_type",
    "evidence_values",
    "fallback",
    "final_verdicts",
    "fitted",
    "guarantee_of",
    "hidden_rows",
    "judge_candidates",
    "label_free",
    "labels_needed",
    "min_rows",
    "notes_for",
    "place",
    "plug_in",
    "ppi_curve",
    "probability",
    "row_roles",
    "select",
    "select_on",
    "stages_of",
    "tie_notes",
    "try_candidate",
]
