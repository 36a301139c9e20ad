"""The attack-judge protocol (PUAudit §5.2, Algorithm 2 Phase 2, Appendix B.2).

For every comparison whose original verdict is A or B, the judge's *losing* response is attacked
and the pair re-judged by the same judge; the flip-under-attack rate is the share of attacked
pairs whose verdict changed. Operators (frozen dataclasses, :data:`ATTACKS` by name):

- :class:`Distraction` (seed Figure 7): the fixed paragraph "Assistant {A/B} loves eating pasta..."
  appended to the loser (the name is the loser's label in the original order), no generation.
- :class:`LengthExpansion` (seed Figure 8): the loser rewritten by a generator with the paper's
  length-expansion prompt.
- :class:`SentimentRestyle` (seed Figure 9): the loser rewritten with a given ``emotion`` tone.

Multi-turn comparisons: only the judged (last) answer is attacked; the earlier answers are kept.
Every input id appears in :attr:`AttackResult.table`, with a ``status`` ("attacked" or "skipped")
and a ``reason`` (original tie / unparsed / error, missing text, generation error / empty
generation); rows whose attacked verdict is unparsed or an error are attacked rows with that
reason and are left out of the flip rate's denominator, with a count. :func:`attack_failures`
counts the pairs where a request failed (the clean judgement, the rewrite or the attacked
judgement); ``puaudit attack`` exits non-zero when they are too many.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from puaudit_runtime.files import write_csv, write_json

from ..datasets import save_comparisons
from ..datasets.verdicts import MISSING, TIE, A, flip_verdict
from .base import ERROR, OK, Verdict, fill, row_inputs, template
from .run import Failures, first_error, has_text, verdict_status


@dataclass(frozen=True)
class Distraction:
    """Seed Figure 7: append the fixed irrelevant paragraph (naming the loser's assistant label)."""

    separator: str = "\n\n"
    name: ClassVar[str] = "distraction"
    needs_generator: ClassVar[bool] = False

    def paragraph(self, side: str) -> str:
        """The distraction paragraph naming assistant ``side``."""
        return fill(template("distraction"), assistant=side)

    def apply(self, response: str, side: str, generator=None) -> str:
        """``response`` with the paragraph appended (no generator needed).

        Args:
            response: the loser's answer.
            side: the loser's assistant label ("A" or "B"), named in the paragraph.
            generator: unused (the operators share one signature).
        """
        return response.rstrip() + self.separator + self.paragraph(side)


@dataclass(frozen=True)
class LengthExpansion:
    """Seed Figure 8: rewrite the loser longer with semantically redundant text (generator)."""

    name: ClassVar[str] = "length"
    needs_generator: ClassVar[bool] = True

    def messages(self, response: str, side: str) -> list[dict]:
        """The generator's chat messages asking for a longer rewrite of ``response``."""
        return [
            {"role": "system", "content": template("length_system")},
            {"role": "user", "content": fill(template("length_user"), original_answer=response)},
        ]


@dataclass(frozen=True)
class SentimentRestyle:
    """Seed Figure 9: rewrite the loser with an ``emotion`` tone (e.g. "cheerful", "angry")."""

    emotion: str = "cheerful"
    name: ClassVar[str] = "sentiment"
    needs_generator: ClassVar[bool] = True

    def messages(self, response: str, side: str) -> list[dict]:
        """The generator's chat messages asking for a rewrite of ``response`` in the ``emotion`` tone."""
        return [
            {"role": "system", "content": fill(template("sentiment_system"), emotion=self.emotion)},
            {
                "role": "user",
                "content": fill(template("sentiment_user"), original_answer=response, emotion=self.emotion),
            },
        ]


RESULT_COLUMNS = (
    "id",
    "question_type",
    "human",
    "original",
    "original_status",
    "loser",
    "attacked",
    "attacked_status",
    "attacked_text",
    "flipped",
    "to_loser",
    "status",
    "reason",
)

ATTACKS = {"distraction": Distraction, "length": LengthExpansion, "sentiment": SentimentRestyle}


def get_attack(name: str, **params):
    """An attack operator by name (:data:`ATTACKS`), with its parameters (e.g. ``emotion``)."""
    if name not in ATTACKS:
        raise ValueError(f"unknown attack {name!r}; use one of {sorted(ATTACKS)}")
    return ATTACKS[name](**params)


@dataclass(frozen=True)
class AttackResult:
    """Outcome of :func:`run_attack`.

    ``table``: one row per input comparison, input order: id, question_type, human, original
    (verdict before the attack), original_status, loser ("A" | "B" | None), attacked (verdict after),
    attacked_status, attacked_text (the loser's new text, None if not attacked), flipped (bool or
    None), to_loser (the attacked loser now wins), status ("attacked" | "skipped"), reason.
    ``counts``: input, attacked, judged (attacked with a parsed verdict), flipped, skipped by reason,
    attacked-but-unjudged by reason. ``flip_rate`` = flipped / judged (NaN if none);
    ``to_loser_rate`` = share of judged pairs the attacked loser now wins.
    """

    attack: str
    judge: str
    table: pd.DataFrame
    counts: Mapping[str, object] = field(default_factory=dict)
    flip_rate: float = float("nan")
    to_loser_rate: float = float("nan")
    params: Mapping[str, object] = field(default_factory=dict)

    def comparisons(self, source: pd.DataFrame) -> pd.DataFrame:
        """``source`` (the attacked comparisons) with ``judge`` = the attacked verdict, the attacked text in place.

        Also the columns ``judge_original`` (the verdict before the attack, as :meth:`original_comparisons`)
        and ``attack_status``; rows without an attacked verdict keep the original verdict (or, when
        there is none, "missing", which the audit excludes with a count), ``attack_status`` says which.
        """
        out = source.copy().reset_index(drop=True)
        out = out.drop(columns=[c for c in ("judge_original", "attack_status") if c in out.columns])
        t = self.table.set_index("id").loc[out["id"].astype(str)]
        out.insert(out.columns.get_loc("judge") + 1, "judge_original", self.original_comparisons(source)["judge"])
        judge, status = [], []
        for i, r in enumerate(t.itertuples()):
            if r.status == "attacked" and r.attacked_status == OK:
                judge.append(r.attacked)
                status.append("attacked")
                out.at[i, response_column(r.loser)] = r.attacked_text
            elif r.original_status == OK:
                judge.append(r.original)
                status.append(f"original verdict kept: {r.reason}")
            else:
                judge.append(MISSING)
                what = "failed judgement" if str(r.original_status).startswith(ERROR) else "unparsed"
                status.append(f"no verdict ({what}): {r.reason}")
        out["judge"], out["attack_status"] = judge, status
        return out

    def original_comparisons(self, source: pd.DataFrame) -> pd.DataFrame:
        """``source`` with ``judge`` = the verdict before the attack, "missing" where there is none.

        The "before" of an audit when the judge re-judged the clean pairs itself; the audit excludes
        the rows without a verdict with a count.
        """
        out = source.copy().reset_index(drop=True)
        t = self.table.set_index("id").loc[out["id"].astype(str)]
        out["judge"] = [r.original if r.original_status == OK else MISSING for r in t.itertuples()]
        return out


def response_column(side: str) -> str:
    """The comparison-table column of a side's response: A -> "response_a", B -> "response_b"."""
    return "response_a" if side == A else "response_b"


def _replace_response(row: dict, side: str, text: str) -> dict:
    new = dict(row)
    new[response_column(side)] = text
    return new


def _clean_rows(records: list[dict], ids: list[str], usable: set[int], original: Mapping[str, Verdict]) -> list[dict]:
    """One result row (RESULT_COLUMNS) per comparison, from its clean verdict.

    The side to attack (``loser``, the clean verdict's loser) where the pair can be attacked, otherwise
    status "skipped" with the reason (missing text, no / failed original verdict, original tie).
    """
    rows = []
    for i, r in enumerate(records):
        v = original.get(ids[i])
        row = {
            "id": ids[i],
            "question_type": r.get("question_type"),
            "human": r.get("human"),
            "original": v.winner if v is not None else None,
            "original_status": (verdict_status(v) if v is not None else None),
            "loser": None,
            "attacked": None,
            "attacked_status": None,
            "attacked_text": None,
            "flipped": None,
            "to_loser": None,
            "status": "skipped",
            "reason": None,
        }
        if i not in usable:
            row["reason"] = "missing text"
        elif v is None:
            row["reason"] = "no original verdict"
        elif v.status != OK:
            row["reason"] = f"original {v.status}"
        elif v.winner == TIE:
            row["reason"] = "original tie"
        else:
            row["loser"] = str(flip_verdict([v.winner])[0])
        rows.append(row)
    return rows


def _attacked_texts(
    attack, generator, records: list[dict], rows: list[dict], targets: list[int], progress: bool
) -> dict[int, str]:
    """The attacked loser response of every target row: index -> text.

    Generated attacks that fail or come back empty are left out, their row's reason set.
    """
    losers = {i: records[i][response_column(rows[i]["loser"])] for i in targets}
    if not attack.needs_generator:
        return {i: attack.apply(losers[i], rows[i]["loser"]) for i in targets}
    outs = generator.generate_many([attack.messages(losers[i], rows[i]["loser"]) for i in targets], progress=progress)
    texts = {}
    for i, o in zip(targets, outs):
        if isinstance(o, Exception):
            rows[i]["reason"] = f"generation error: {o}"[:300]
        elif not str(o).strip():
            rows[i]["reason"] = "empty generation"
        else:
            texts[i] = str(o).strip()
    return texts


def _record_attacked(rows: list[dict], judged: list[int], attacked, texts: dict[int, str]) -> None:
    """Write the verdicts on the attacked pairs into their rows (in place).

    Status "attacked", and for a judged verdict whether it flipped and whether it went to the attacked
    (losing) side.
    """
    for i, v in zip(judged, attacked):
        row = rows[i]
        row.update(status="attacked", attacked_text=texts[i], attacked=v.winner, attacked_status=verdict_status(v))
        if v.status == OK:
            row["flipped"] = v.winner != row["original"]
            row["to_loser"] = v.winner == row["loser"]
            row["reason"] = "flipped" if row["flipped"] else "unchanged"
        else:
            row["reason"] = f"attacked {v.status}"


def _attack_counts(table: pd.DataFrame) -> dict:
    """AttackResult.counts of a result table.

    input, attacked, judged, flipped, to_loser (ints), skipped and attacked_unjudged (reason -> count).
    """
    ok = table[(table.status == "attacked") & (table.attacked_status == OK)] if len(table) else table
    skipped = table[table.status == "skipped"] if len(table) else table
    return {
        "input": len(table),
        "attacked": int((table.status == "attacked").sum()) if len(table) else 0,
        "judged": len(ok),
        "flipped": int(ok.flipped.astype(bool).sum()) if len(ok) else 0,
        "to_loser": int(ok.to_loser.astype(bool).sum()) if len(ok) else 0,
        "skipped": skipped.reason.value_counts().to_dict() if len(skipped) else {},
        "attacked_unjudged": (
            table[(table.status == "attacked") & (table.attacked_status != OK)].reason.value_counts().to_dict()
            if len(table)
            else {}
        ),
    }


def run_attack(
    comparisons: pd.DataFrame,
    judge,
    attack,
    generator=None,
    *,
    original: Mapping[str, Verdict] | None = None,
    progress: bool = False,
) -> AttackResult:
    """Seed Algorithm 2, Phase 2 on ``comparisons`` (a comparison table).

    Args:
        comparisons: the comparison table (unique ids; rows without texts are skipped, with the reason).
        judge: the judge that judges the attacked pairs (and the clean ones when ``original`` is None).
        attack: an operator or its name.
        generator: the text generator the operator rewrites with (needed by length / sentiment), or None.
        original: id -> the judge's verdict on the clean pair; None -> judged here with ``judge``
            (the protocol compares a judge with itself; the table's ``judge`` column may come from another
            judge).
        progress: whether to show progress bars.

    Returns:
        The :class:`AttackResult` (one row per input comparison, the counts and the flip rates in [0, 1]).

    Raises:
        ValueError: an attack that needs a generator without one, repeated ids, or an unknown attack name.
    """
    if isinstance(attack, str):
        attack = get_attack(attack)
    if attack.needs_generator and generator is None:
        raise ValueError(f"attack {attack.name!r} needs a generator")
    records = comparisons.to_dict(orient="records")
    ids = [str(r["id"]) for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError("comparison ids must be unique")
    usable = [i for i, r in enumerate(records) if has_text(r)]
    if original is None:
        verdicts = judge.judge_many([row_inputs(records[i]) for i in usable], progress=progress)
        original = {ids[i]: v for i, v in zip(usable, verdicts)}
    rows = _clean_rows(records, ids, set(usable), original)
    targets = [i for i, row in enumerate(rows) if row["loser"] is not None]
    texts = _attacked_texts(attack, generator, records, rows, targets, progress)
    judged = sorted(texts)
    attacked = judge.judge_many(
        [row_inputs(_replace_response(records[i], rows[i]["loser"], texts[i])) for i in judged], progress=progress
    )
    _record_attacked(rows, judged, attacked, texts)
    table = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    return _result(attack.name, getattr(judge, "name", type(judge).__name__), table, _params(attack))


def _params(attack) -> dict:
    """An attack operator's parameters (its dataclass fields)."""
    return {k: getattr(attack, k) for k in getattr(attack, "__dataclass_fields__", {})}


def _result(attack: str, judge: str, table: pd.DataFrame, params: Mapping[str, object]) -> AttackResult:
    """An AttackResult whose counts and rates are computed from ``table``."""
    counts = _attack_counts(table)
    n = counts["judged"]
    return AttackResult(
        attack=attack,
        judge=judge,
        table=table,
        counts=counts,
        flip_rate=counts["flipped"] / n if n else float("nan"),
        to_loser_rate=counts["to_loser"] / n if n else float("nan"),
        params=dict(params),
    )


def combine_results(earlier: AttackResult, later: AttackResult) -> AttackResult:
    """One result from two runs of the same attack and judge on disjoint rows (a run extended by more rows).

    ``earlier``'s rows, then ``later``'s; counts and rates recomputed. Raises if the attack, the judge,
    the parameters or the row sets disagree.
    """
    for what in ("attack", "judge", "params"):
        if getattr(earlier, what) != getattr(later, what):
            raise ValueError(
                f"cannot combine attack results with different {what}: "
                f"{getattr(earlier, what)!r} vs {getattr(later, what)!r}"
            )
    both = set(earlier.table.id.astype(str)) & set(later.table.id.astype(str))
    if both:
        raise ValueError(f"cannot combine attack results that share rows, e.g. {sorted(both)[:3]}")
    table = pd.concat([earlier.table, later.table], ignore_index=True)
    return _result(earlier.attack, earlier.judge, table, earlier.params)


def read_result(table: pd.DataFrame, attack, judge: str) -> AttackResult:
    """An AttackResult from a result table read back from a file (``RESULT_COLUMNS``).

    E.g. the rows of an earlier run.

    Args:
        table: the result table (the columns of ``RESULT_COLUMNS``; others are dropped).
        attack: the operator instance of the run (its name and parameters are recorded).
        judge: the judge's name.

    Returns:
        The :class:`AttackResult`, its counts and rates recomputed from the table.

    Raises:
        ValueError: a missing column.
    """
    missing = [c for c in RESULT_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"attack result table lacks columns {missing}")
    t = table[list(RESULT_COLUMNS)].reset_index(drop=True)
    return _result(attack.name, judge, t.astype({"id": str}), _params(attack))


def flip_rates_by(result: AttackResult, column: str = "question_type") -> pd.DataFrame:
    """Flip-under-attack rate per value of ``column``: n_attacked, n_judged, flip_rate, to_loser_rate."""
    t = result.table
    out = []
    for key, g in t.groupby(column, dropna=False):
        ok = g[(g.status == "attacked") & (g.attacked_status == OK)]
        out.append(
            {
                column: key,
                "n": len(g),
                "n_attacked": int((g.status == "attacked").sum()),
                "n_judged": len(ok),
                "flip_rate": float(ok.flipped.astype(bool).mean()) if len(ok) else np.nan,
                "to_loser_rate": float(ok.to_loser.astype(bool).mean()) if len(ok) else np.nan,
            }
        )
    return pd.DataFrame(out)


@dataclass(frozen=True)
class AttackReport:
    """What one attack run did (``attack.json`` of ``puaudit attack``).

    Attributes:
        data: the attacked table (file or bundled set).
        attack / params / judge: the operator, its parameters and the judge's name.
        generator: the rewriting generator's name (None for distraction).
        original: where the verdicts before the attack came from ("rejudge" or "column").
        counts / flip_rate / to_loser_rate: as :class:`AttackResult`.
        by_question_type: :func:`flip_rates_by` per question type, one dict per type.
        seconds: wall time of the run.
    """

    data: str
    attack: str
    params: dict
    judge: str
    generator: str | None
    original: str
    counts: dict
    flip_rate: float
    to_loser_rate: float
    by_question_type: list
    seconds: float

    def summary(self) -> str:
        """One line: rows attacked, re-judged, flipped, and the rates."""
        c = self.counts
        return (
            f"{self.attack} attack on {self.judge}: {c['input']} rows, {c['attacked']} attacked, {c['judged']} "
            f"re-judged, {c['flipped']} flipped -> flip-under-attack rate {self.flip_rate:.3f} "
            f"(attacked loser now wins: {self.to_loser_rate:.3f}); skipped {c['skipped']}"
        )


def attack_report(
    res: AttackResult, *, data: str, generator: str | None, original: str, seconds: float
) -> AttackReport:
    """The :class:`AttackReport` of a :func:`run_attack` result.

    Args:
        res: the attack's result.
        data: the attacked table (file or bundled set).
        generator: the rewriting generator's name (None for distraction).
        original: where the verdicts before the attack came from ("rejudge" or "column").
        seconds: wall time of the run, in seconds.
    """
    by_type = flip_rates_by(res) if "question_type" in res.table else pd.DataFrame()
    return AttackReport(
        data=data,
        attack=res.attack,
        params=dict(res.params),
        judge=res.judge,
        generator=generator,
        original=original,
        counts=dict(res.counts),
        flip_rate=res.flip_rate,
        to_loser_rate=res.to_loser_rate,
        by_question_type=by_type.to_dict(orient="records"),
        seconds=seconds,
    )


def _row_error(row) -> str | None:
    """The failed request of a result row (clean judgement, rewrite, attacked judgement), or None."""
    for status in (row.original_status, row.attacked_status):
        if isinstance(status, str) and status.startswith(ERROR):
            return status.removeprefix(f"{ERROR}: ")
    reason = row.reason if isinstance(row.reason, str) else ""
    return reason if reason.startswith("generation error") else None


def attack_failures(res: AttackResult, rejudged: bool = True) -> Failures:
    """The pairs of an attack whose requests failed, of the pairs sent to the judge or the generator.

    Args:
        res: the :func:`run_attack` result.
        rejudged: whether the clean pairs were judged in this run (every pair with text was sent),
            or their verdicts came from the table (only the pairs attacked were sent).
    """
    t = res.table
    sent = (t.reason != "missing text") if rejudged else t.loser.notna()
    errors = [e for e in (_row_error(r) for r in t[sent].itertuples()) if e is not None]
    return Failures(len(errors), int(sent.sum()), first_error(errors))


def write_attack(res: AttackResult, source: pd.DataFrame, report: AttackReport, out: str | Path) -> list[str]:
    """Write an attack's files into ``out``; returns their names.

    ``out``/attacked.csv (the result table), ``out``/comparisons.csv (``source`` with the attacked
    verdicts and texts: an input of ``puaudit evaluate``) and ``out``/attack.json.

    Args:
        res: the attack's result.
        source: the comparison table that was attacked.
        report: the run's :class:`AttackReport`.
        out: the output folder.
    """
    out = Path(out)
    write_csv(res.table, out / "attacked.csv")
    save_comparisons(res.comparisons(source), out / "comparisons.csv")
    write_json(asdict(report), out / "attack.json")
    return ["attacked.csv", "comparisons.csv", "attack.json"]
