"""Re-judging a comparison table (seed Algorithm 2, Phase 1) with any :class:`~.base.Judge`.

:func:`judge_table` returns the table with the new verdicts in ``judge`` (so every downstream
command, e.g. ``puaudit evaluate``, reads them) and the previous ones in ``judge_original``. Rows
without a verdict get ``judge = "missing"``, never a tie: the request failed (unreachable server,
HTTP error, timeout), the judge answered without a verdict (unparsed), or the row was not sent
(missing text). ``judge_status`` says which ("ok" | "unparsed: ..." | "error: ..." | "skipped:
missing text"); the audit excludes such rows with the reason "no judge verdict" and quantify counts
them, so nothing is dropped silently. :func:`judge_failures` counts the failed requests; ``puaudit
judge`` exits non-zero when they are too many (after writing what it has: answered requests are
cached, so a rerun resumes).

Both orders are judged by default, so the table carries the judge's own tells for the audit:
``judge_swapped`` (the verdict with the responses swapped, in the original frame) and
``judge_confidence`` (a two-order logprob judge's probability of its verdict). A judge that reads
both orders itself (the local judge, the logprob judge) costs nothing more; a text judge makes twice
the calls (``both_orders=False``, CLI ``--single-order``, halves them and leaves the columns missing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from puaudit_runtime.files import write_json

from ..datasets import save_comparisons
from ..datasets.verdicts import JUDGE_VERDICTS, MISSING, TIE, A, B, is_null
from .base import ERROR, OK, UNPARSED, Verdict, progress_iter, row_inputs

JUDGE_COLUMNS = (
    "judge_original",
    "judge_status",
    "judge_type",
    "judge_text",
    "verdict_ab",
    "verdict_ba",
    "margin",
    "consistent",
    "omitted_tokens",
    "judge_swapped",
    "judge_swapped_status",
    "judge_confidence",
)


def has_text(row) -> bool:
    """True when question, response_a and response_b are all present (non-empty)."""

    def ok(v):
        if isinstance(v, (list, tuple, np.ndarray)):
            return len(v) > 0 and all(isinstance(x, str) and x.strip() for x in v)
        return not is_null(v) and str(v).strip() != ""

    return all(ok(row.get(c)) for c in ("question", "response_a", "response_b"))


def verdict_status(v: Verdict) -> str:
    """``"ok"``, or the verdict's status with its reason (or the start of its raw text)."""
    if v.status == OK:
        return OK
    reason = v.details.get("reason") if v.details else None
    return f"{v.status}: {reason or v.raw[:200]}"


def swapped_inputs(inputs: tuple[str, str, str]) -> tuple[str, str, str]:
    """The judge inputs with the two responses in the other order (question, response_b, response_a)."""
    question, a, b = inputs
    return question, b, a


def _other_order(v: Verdict | None) -> str:
    """The verdict of the swapped order, in the original frame ("missing" when there is none)."""
    if v is None or v.status != OK:
        return MISSING
    return {A: B, B: A}.get(v.winner, v.winner)


def evidence_columns(v: Verdict | None, swapped: Verdict | None = None) -> dict:
    """``judge_swapped`` and ``judge_confidence`` of one judged row.

    A judge that judges both orders itself (the local and the logprob judges: ``details`` holds
    ``verdict_ba`` and the averaged ``margin`` in nats) gives its swapped-order verdict and the
    probability of its verdict, ``sigmoid(|margin|)`` in [0.5, 1]; a text judge gives the verdict of its
    second call with the responses swapped (``swapped``) and no confidence.
    """
    d = (v.details or {}) if v is not None and v.status == OK else {}
    if d.get("verdict_ba") in (A, B, TIE):
        margin = float(d.get("margin", np.nan))
        confidence = 1.0 / (1.0 + np.exp(-abs(margin))) if np.isfinite(margin) else np.nan
        return {"judge_swapped": d["verdict_ba"], "judge_swapped_status": OK, "judge_confidence": confidence}
    status = verdict_status(swapped) if swapped is not None else ("not asked" if v is not None else "skipped")
    return {"judge_swapped": _other_order(swapped) if v is not None else MISSING, "judge_swapped_status": status,
            "judge_confidence": np.nan}  # fmt: skip


def table_verdict(v: Verdict) -> str:
    """The ``judge`` cell of a verdict: its winner, or "missing" when it has none (failed or unparsed)."""
    return v.winner if v.status == OK else MISSING


def verdict_columns(v: Verdict | None, skipped: str | None = None) -> dict:
    """The :data:`JUDGE_COLUMNS` values (except judge_original) of one verdict."""
    if v is None:
        return {
            "judge": MISSING,
            "judge_status": f"skipped: {skipped}",
            "judge_type": None,
            "judge_text": None,
            "verdict_ab": None,
            "verdict_ba": None,
            "margin": np.nan,
            "consistent": None,
            "omitted_tokens": 0,
            "judge_swapped": MISSING,
            "judge_swapped_status": f"skipped: {skipped}",
            "judge_confidence": np.nan,
        }
    d = v.details or {}
    return {
        "judge": table_verdict(v),
        "judge_status": verdict_status(v),
        "judge_type": v.question_type,
        "judge_text": v.raw,
        "verdict_ab": d.get("verdict_ab"),
        "verdict_ba": d.get("verdict_ba"),
        "margin": d.get("margin", np.nan),
        "consistent": d.get("consistent"),
        "omitted_tokens": d.get("omitted_tokens", 0),
    }


def _judged(judge, inputs: list, both_orders: bool) -> list[dict]:
    """:func:`verdict_columns` and :func:`evidence_columns` of a batch (swapped calls when needed).

    A single-order judge is called a second time with the responses swapped when ``both_orders``.
    """
    verdicts = judge.judge_many(inputs)
    two_order = all((v.details or {}).get("verdict_ba") is not None for v in verdicts if v.status == OK)
    swapped = [None] * len(inputs)
    if both_orders and not (two_order and any(v.status == OK for v in verdicts)):
        swapped = judge.judge_many([swapped_inputs(x) for x in inputs])
    columns = [{**verdict_columns(v), **evidence_columns(v, w)} for v, w in zip(verdicts, swapped)]
    if not both_orders:
        for c in columns:
            c["judge_swapped_status"] = "not asked (single order)"
    return columns


def judge_table(
    table: pd.DataFrame,
    judge,
    *,
    both_orders: bool = True,
    chunk: int = 16,
    progress: bool = True,
    on_chunk: Callable[[pd.DataFrame], None] | None = None,
) -> pd.DataFrame:
    """``table`` re-judged by ``judge`` (see module docstring); one output row per input row, same order.

    Args:
        table: the comparison table.
        judge: a :class:`~.base.Judge`.
        both_orders: also judge every pair with the responses swapped, for ``judge_swapped`` (a
            judge that judges both orders itself, e.g. the local judge, costs nothing more; a text
            judge costs twice the calls).
        chunk: rows per batch.
        progress: show a progress bar.
        on_chunk: called after every ``chunk`` rows with the rows done so far (for incremental
            writing of long runs).

    Returns:
        The re-judged table (module docstring), with ``judge_swapped`` and ``judge_confidence``.
    """
    records = table.to_dict(orient="records")
    out = [None] * len(records)
    todo = []
    for i, r in enumerate(records):
        if has_text(r):
            todo.append(i)
        else:
            out[i] = verdict_columns(None, "missing text")
    chunks = [todo[k : k + chunk] for k in range(0, len(todo), chunk)]
    done = [i for i in range(len(records)) if out[i] is not None]

    def frame(rows):
        base = table.iloc[rows].copy()
        base = base.drop(columns=[c for c in JUDGE_COLUMNS if c in base.columns])  # re-judging a judged table
        base.insert(base.columns.get_loc("judge") + 1, "judge_original", base["judge"])
        cols = pd.DataFrame([out[i] for i in rows], index=base.index)
        for c in cols.columns:
            base[c] = cols[c].values
        return base.reset_index(drop=True)

    for group in progress_iter(chunks, len(chunks), progress, f"judging ({getattr(judge, 'name', 'judge')})"):
        for i, columns in zip(group, _judged(judge, [row_inputs(records[i]) for i in group], both_orders)):
            out[i] = columns
        done += group
        if on_chunk is not None:
            on_chunk(frame(sorted(done)))
    return frame(list(range(len(records))))


@dataclass(frozen=True)
class JudgeReport:
    """What one re-judging run did (``judge.json`` of ``puaudit judge``).

    Attributes:
        data: the judged table (file or bundled set).
        judge: the judge's name.
        rows: rows judged (every input row).
        status: rows per status kind ("ok", "unparsed", "error", "skipped").
        agreement_with_human / agreement_original_with_human: share of the labelled rows (human
            A | B | tie, new verdict ok) where the new / previous verdict equals the human one;
            None without such rows.
        n_labelled: those rows.
        seconds: wall time of the run.
        position_consistency: share of pairs judged the same in both orders (judges that judge
            both orders), else None.
        judge_types: rows per question-type letter the judge wrote (``[[TYPE:X]]``), else None.
        errors: {"id", "status"} of every failed row, and {"id", "status", "order": "swapped"} of every row
            whose swapped-order request failed.
    """

    data: str
    judge: str
    rows: int
    status: dict
    agreement_with_human: float | None
    agreement_original_with_human: float | None
    n_labelled: int
    seconds: float
    position_consistency: float | None = None
    judge_types: dict | None = None
    errors: list = field(default_factory=list)

    def to_json(self) -> dict:
        """The report as ``judge.json`` holds it (the optional entries only where known)."""
        out = asdict(self)
        for key in ("position_consistency", "judge_types"):
            if out[key] is None:
                del out[key]
        out["errors"] = out.pop("errors")
        return out

    def summary(self) -> str:
        """One line: status counts and agreement with the human verdicts."""
        return (
            f"{self.judge} judged {self.rows} comparisons: status {self.status}; agreement with human "
            f"{self.agreement_with_human} (previous judge {self.agreement_original_with_human}) "
            f"on {self.n_labelled} labelled rows"
        )


def _agreement(labelled: pd.DataFrame, column: str) -> float | None:
    return float((labelled[column] == labelled.human).mean()) if len(labelled) else None


def judge_report(result: pd.DataFrame, judge: str, data: str, seconds: float) -> JudgeReport:
    """The :class:`JudgeReport` of a :func:`judge_table` result.

    Args:
        result: the re-judged table (:func:`judge_table`).
        judge: the judge's name.
        data: the judged table (file or bundled set).
        seconds: wall time of the run, in seconds.
    """
    labelled = result[result.human.isin(JUDGE_VERDICTS) & (result.judge_status == "ok")]
    failed = result[result.judge_status.str.startswith("error")]
    swapped = result["judge_swapped_status"].astype(str) if "judge_swapped_status" in result else None
    failed_swapped = result[swapped.str.startswith("error")] if swapped is not None else result.iloc[:0]
    consistency = types = None
    if result.consistent.notna().any():
        consistency = float(result.consistent.dropna().astype(bool).mean())
    if result.judge_type.notna().any():  # the judge's [[TYPE:X]] letters; "none" where it gave none
        types = result.judge_type.fillna("none").value_counts().sort_index().to_dict()
    return JudgeReport(
        data=data,
        judge=judge,
        rows=len(result),
        status=result.judge_status.str.split(":").str[0].value_counts().to_dict(),
        agreement_with_human=_agreement(labelled, "judge"),
        agreement_original_with_human=_agreement(labelled, "judge_original"),
        n_labelled=len(labelled),
        seconds=seconds,
        position_consistency=consistency,
        judge_types=types,
        errors=[{"id": str(r.id), "status": r.judge_status} for r in failed.itertuples()]
        + [
            {"id": str(r.id), "status": r.judge_swapped_status, "order": "swapped"} for r in failed_swapped.itertuples()
        ],
    )


@dataclass(frozen=True)
class Failures:
    """The failed judgements of a run: ``failed`` of the ``sent`` pairs, and the first error's message.

    ``answered``: the sent pairs with a verdict (None: not counted); when it is 0 the run failed
    however few requests errored (every reply without a verdict), and ``first_unparsed`` says why.
    """

    failed: int
    sent: int
    first_error: str | None = None
    answered: int | None = None
    first_unparsed: str | None = None

    def too_many(self, max_fraction: float) -> bool:
        """Whether every sent pair failed or none got a verdict, or more than ``max_fraction`` of them failed."""
        if self.answered == 0 and self.sent > 0:
            return True
        return self.failed > 0 and (self.failed == self.sent or self.failed > max_fraction * self.sent)

    def message(self) -> str:
        """``N of M pairs failed (first error: ...)``, or why no pair got a verdict."""
        if self.answered == 0 and self.sent > 0 and self.failed < self.sent:
            return (f"no pair got a verdict: {self.sent - self.failed} of {self.sent} replies had none (first: "
                    f"{self.first_unparsed})" + (f", {self.failed} failed (first error: {self.first_error})"
                                                 if self.failed else ""))  # fmt: skip
        return f"{self.failed} of {self.sent} pairs failed (first error: {self.first_error})"


def judge_failures(result: pd.DataFrame) -> Failures:
    """The :class:`Failures` of a :func:`judge_table` result, of the rows sent.

    A pair fails when its request, or its swapped-order request, ended in an ``error``; ``answered``
    counts the pairs with a verdict.
    """
    status = result.judge_status.astype(str)
    swapped = result.get("judge_swapped_status", pd.Series("", index=result.index)).astype(str)  # older tables lack it
    bad = status.str.startswith(ERROR) | swapped.str.startswith(ERROR)
    failed = [s.removeprefix(f"{ERROR}: ") for s in np.where(status.str.startswith(ERROR), status, swapped)[bad]]
    sent = int((~status.str.startswith("skipped")).sum())
    unparsed = status[status.str.startswith(UNPARSED)].str.removeprefix(f"{UNPARSED}: ").tolist()
    return Failures(len(failed), sent, first_error(failed), int((status == OK).sum()), (unparsed or [None])[0])


def first_error(messages: list[str]) -> str | None:
    """The first error message that says why (a request the client did not send repeats another's reason)."""
    sent = [m for m in messages if not m.startswith("not sent: ")]
    return (sent or messages or [None])[0]


def write_judging(result: pd.DataFrame, report: JudgeReport, out: str | Path) -> list[str]:
    """Write ``out``/comparisons.csv (the re-judged table) and ``out``/judge.json; return their names.

    Args:
        result: the re-judged table (:func:`judge_table`).
        report: the run's :class:`JudgeReport`.
        out: the output folder.
    """
    out = Path(out)
    save_comparisons(result, out / "comparisons.csv")
    write_json(report.to_json(), out / "judge.json")
    return ["comparisons.csv", "judge.json"]
