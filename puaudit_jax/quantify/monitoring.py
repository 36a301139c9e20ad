"""``monitor``: is the judge still as good as before? A judge's agreement followed as labels arrive.

The labelled rows are put in the order of a column (a time or a batch number: rows with the same
value arrive together, as one batch, in a seeded shuffle), and each one's value (1 where the judge
agrees with the human; or the human's A win, a tie 1/2) feeds two anytime-valid procedures of
:mod:`.betting`: a confidence sequence for the mean (valid at every n at once, so it may be read
after every batch) and, with a threshold A, an e-process against "the agreement stays >= A" whose
alarm rings the first time it reaches 1 / alpha. Rows that cannot take part (no human label, no
judge verdict, no order value) are counted with their reason, never dropped silently.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets.verdicts import TIE, A, B
from .betting import alarm_possible_from, drop_bets, e_process, hedged_cs
from .monitor_config import MonitorConfig

COLUMNS = ("n", "order", "id", "value", "estimate", "lower", "upper", "e_value")
"""Columns of :meth:`Monitoring.frame` (monitor.csv)."""
NO_LABEL, NO_VERDICT, NO_ORDER = "no human label", "no judge verdict", "no value in the order column"


@dataclass(frozen=True)
class Stream:
    """The labelled rows in stream order, and what was left out.

    Attributes:
        ids: (n,) str ids, in stream order.
        order: (n,) the order column's values, in stream order.
        values: (n,) float values in [0, 1]: agreement indicators or A-win scores.
        kind: how the order values were compared: "number", "time" or "text".
        batches: distinct order values (batches) in the stream.
        read: rows of the table.
        left_out: reason -> rows left out for it.
    """

    ids: np.ndarray
    order: np.ndarray
    values: np.ndarray
    kind: str
    batches: int
    read: int
    left_out: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Alarm:
    """Where the e-process first reached 1 / alpha.

    Attributes:
        n: labels seen when it rang (1-based).
        order: that label's order value.
        id: that label's id.
        e_value: the e-value then (>= 1 / alpha).
    """

    n: int
    order: object
    id: str
    e_value: float


@dataclass(frozen=True)
class Monitoring:
    """The result of :func:`monitor`.

    Attributes:
        stream: the rows in stream order and the counts.
        estimate: (n,) running mean after each label.
        lower: (n,) lower bound of the confidence sequence at each n (level 1 - alpha at every n at once).
        upper: (n,) upper bound.
        e_value: (n,) e-values against mean >= threshold, or None without a threshold.
        alarm: the first n with e-value >= 1 / alpha, or None.
        config: the settings.
        notes: what could not be said and why (e.g. too few labels for an alarm to be possible).
    """

    stream: Stream
    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    e_value: np.ndarray | None
    alarm: Alarm | None
    config: MonitorConfig
    notes: tuple[str, ...] = ()

    def frame(self) -> pd.DataFrame:
        """monitor.csv: one row per label, in stream order (:data:`COLUMNS`)."""
        s = self.stream
        e = np.full(len(s.ids), np.nan) if self.e_value is None else self.e_value
        columns = (np.arange(1, len(s.ids) + 1), s.order, s.ids, s.values, self.estimate, self.lower, self.upper, e)
        return pd.DataFrame(dict(zip(COLUMNS, columns)))

    def report(self, data: str) -> dict:
        """report.json: the alarm, the settings, the counts with reasons, the last bounds, the notes."""
        s, last = self.stream, len(self.stream.ids) - 1
        rows = {"read": s.read, "labelled": s.read - s.left_out.get(NO_LABEL, 0), "in_stream": len(s.ids),
                "left_out": s.left_out}  # fmt: skip
        e_last = None if self.e_value is None else self.e_value[last]
        at_last = {"n": last + 1, "estimate": self.estimate[last], "lower": self.lower[last],
                   "upper": self.upper[last], "e_value": e_last}  # fmt: skip
        return {"data": data, "settings": asdict(self.config),
                "alarm_at": None if self.alarm is None else asdict(self.alarm), "rows": rows, "batches": s.batches,
                "order_compared_as": s.kind, "within_batch_order": f"seeded shuffle (seed {self.config.seed})",
                "last": at_last, "alarm_possible_from_n": self._possible_from(), "notes": list(self.notes),
                "method": METHOD}  # fmt: skip

    def _possible_from(self) -> int | None:
        c = self.config
        return None if c.threshold is None else alarm_possible_from(c.threshold, c.alpha)


METHOD = ("confidence sequence: hedged capital with predictable plug-in bets (Waudby-Smith & Ramdas 2023, "
          "Theorem 3), on a grid of 1000 steps widened by one step; alarm: e-process of aGRAPA bets on "
          "discounted estimates, mixed over start times with weights 1/(s(s+1)) (design 'mixture') or from the "
          "first label (design 'single'); no PyPI library used (confseq 0.0.11: source only, needs a C++ "
          "compiler; expectation 0.6: Python >= 3.12; savvi: multinomial tests, needs cvxpy)")  # fmt: skip


def values_of(table: pd.DataFrame, target: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, labelled, judged) of every row: the target's value, and which rows can give one.

    Args:
        table: a comparison table (``judge``, ``human`` in normal form).
        target: "agreement" (1 where judge == human) or "a-share" (human A win 1, tie 1/2, B 0).

    Returns:
        ((n,) float values, NaN where not defined; (n,) bool has a human label; (n,) bool has a judge verdict).
    """
    judge, human = table["judge"].to_numpy(dtype=object), table["human"].to_numpy(dtype=object)
    labelled, judged = np.isin(human, (A, B, TIE)), np.isin(judge, (A, B, TIE))
    if target == "agreement":
        values = np.where(labelled & judged, (judge == human).astype(float), np.nan)
    else:
        values = np.where(labelled, np.where(human == A, 1.0, np.where(human == TIE, 0.5, 0.0)), np.nan)
    return values, labelled, judged if target == "agreement" else np.ones(len(table), bool)


def order_keys(values: pd.Series, column: str) -> tuple[np.ndarray, str]:
    """Dense ranks (1, 2, ...) of the order values and how they were compared ("number", "time", "text").

    Numbers compare as numbers, datetimes and ISO-8601 strings as times, other strings as text.

    Raises:
        ValueError: values of mixed kinds (numbers and text), which have no order.
    """
    kinds = {_kind(v) for v in values}
    if len(kinds) > 1:
        first = {k: next(i for i, v in values.items() if _kind(v) == k) for k in sorted(kinds)}
        said = ", ".join(f"{k} (e.g. {values[i]!r} at row {i + 1})" for k, i in first.items())
        raise ValueError(f"--order {column}: values of mixed kinds cannot be ordered: {said}")
    kind = kinds.pop() if kinds else "number"
    if kind not in ("number", "time", "text"):
        raise ValueError(f"--order {column}: values of type {kind} cannot be ordered (use numbers, times or text)")
    if kind == "text":
        try:
            values, kind = pd.to_datetime(values, format="ISO8601"), "time"
        except (ValueError, TypeError):
            pass
    return values.rank(method="dense").to_numpy(int), kind


def _kind(v) -> str:
    """The kind of one order value: "number", "time", "text" or its type's name."""
    if isinstance(v, (int, float, np.number)) and not isinstance(v, bool):
        return "number"
    if isinstance(v, (pd.Timestamp, np.datetime64)):
        return "time"
    return "text" if isinstance(v, str) else type(v).__name__


def stream_of(table: pd.DataFrame, config: MonitorConfig) -> Stream:
    """The rows that can take part, in the order of ``config.order``, batches in a seeded shuffle.

    Raises:
        ValueError: no such column, order values that cannot be ordered, or no row left to follow.
    """
    column = config.order
    if column not in table.columns:
        raise ValueError(f"--order {column}: no such column (columns: {', '.join(map(str, table.columns))})")
    values, labelled, judged = values_of(table, config.target)
    has_order = table[column].notna().to_numpy()
    left_out = {NO_LABEL: int((~labelled).sum()), NO_VERDICT: int((labelled & ~judged).sum()),
                NO_ORDER: int((labelled & judged & ~has_order).sum())}  # fmt: skip
    keep = labelled & judged & has_order
    if not keep.any():
        why = ", ".join(f"{k}: {v}" for k, v in left_out.items() if v)
        raise ValueError(f"not estimable: none of the {len(table)} rows can be followed ({why})")
    rows = table.loc[keep].reset_index(drop=True)
    keys, kind = order_keys(rows[column], column)
    shuffle = np.random.default_rng(config.seed).permutation(len(rows))
    ordered = np.lexsort((shuffle, keys))
    ids, order = rows["id"].astype(str).to_numpy()[ordered], rows[column].to_numpy(dtype=object)[ordered]
    said = {k: v for k, v in left_out.items() if v}
    return Stream(ids, order, values[keep][ordered], kind, int(keys.max()), len(table), said)


def monitor(table: pd.DataFrame, config: MonitorConfig) -> Monitoring:
    """Follow the target's mean as labels arrive: a confidence sequence and, with a threshold, an alarm.

    Args:
        table: a validated comparison table (``id``, ``judge``, ``human`` and the order column).
        config: the settings (:class:`~.monitor_config.MonitorConfig`).

    Returns:
        The :class:`Monitoring` (bounds in [0, 1], e-values >= 0, the alarm or None).

    Raises:
        ValueError: no order column, order values that cannot be ordered, or no labelled row.
    """
    stream = stream_of(table, config)
    x = stream.values
    estimate = np.cumsum(x) / np.arange(1, len(x) + 1)
    lower, upper = hedged_cs(x, config.alpha)
    notes, e_value, alarm = [], None, None
    empty = np.flatnonzero(np.isnan(lower))
    if empty.size:
        notes.append(f"the confidence sequence is empty at {empty.size} labels (first n={empty[0] + 1}): no constant "
                     "mean fits the labels (e.g. the judge changed); its bounds are empty cells there")  # fmt: skip
    if config.threshold is not None:
        log_e = e_process(x, config.threshold, drop_bets(x, config.threshold, config.memory), config.design)
        e_value = np.exp(log_e)
        rang = np.flatnonzero(log_e >= np.log(1 / config.alpha))
        if rang.size:
            k = int(rang[0])
            alarm = Alarm(k + 1, plain(stream.order[k]), str(stream.ids[k]), float(e_value[k]))
        needed = alarm_possible_from(config.threshold, config.alpha)
        if len(x) < needed:
            notes.append(f"no alarm possible yet: {len(x)} labels, at least {needed} needed to reach 1/alpha")
    else:
        notes.append("no threshold: the confidence sequence only, no alarm")
    return Monitoring(stream, estimate, lower, upper, e_value, alarm, config, tuple(notes))


def plain(value):
    """An order value as JSON writes it: a Python number, or a time or other value as its text."""
    if isinstance(value, np.generic):
        value = value.item()
    return value if isinstance(value, (int, float, str)) else str(value)


def write_monitoring(result: Monitoring, folder, *, data: str) -> list[str]:
    """Write monitor.csv and report.json in ``folder``; return the names written.

    Args:
        result: the monitoring.
        folder: the output folder.
        data: the data's name, recorded in report.json.
    """
    from puaudit_runtime.files import write_csv, write_json

    write_csv(result.frame(), Path(folder) / "monitor.csv")
    write_json(result.report(data), Path(folder) / "report.json")
    return ["monitor.csv", "report.json"]
