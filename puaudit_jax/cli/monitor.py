"""``puaudit monitor DATA --order COLUMN``: is the judge still as good as before, as labels arrive?

    puaudit monitor DATA --order COLUMN [--threshold A] [--alpha 0.05] [--target agreement] [--out DIR]

Puts the labelled rows in the order of COLUMN (rows with the same value form a batch, shuffled with
--seed) and follows the judge's agreement with an anytime-valid confidence sequence; with
--threshold, an e-process alarm rings the first time the agreement is shown to be below A
(:mod:`puaudit_jax.quantify.monitoring`). Writes ``monitor.csv`` (one row per label), ``report.json``
(the alarm, the settings, the rows left out and why) and ``monitor.png``.
"""

from __future__ import annotations

from ..quantify.monitor_config import MonitorConfig
from . import inputs
from .options import add_options
from .requests import MonitorRequest, monitor_request
from .run_folder import wrote


def cmd_monitor(args) -> int:
    """``puaudit monitor``: the request read from the command line (:func:`~.requests.monitor_request`), then run."""
    return run_monitor(monitor_request(args))


def run_monitor(request: MonitorRequest) -> int:
    """DATA read, the stream followed, the files written (the settings were checked when the request was made)."""
    from ..quantify.monitoring import monitor, write_monitoring

    config, data, output = request.monitor, request.data.name, request.output
    inputs.check_out(output.out)
    with inputs.output_folder(output) as run:
        table = inputs.data_table(request.data, output.quiet, include_unlabelled=False)
        result = monitor(table, config)
        files = write_monitoring(result, run.path, data=data)
        if not output.no_figures:
            import matplotlib.pyplot as plt

            from ..quantify.plots import monitor_plot

            plt.close(monitor_plot(result, run.path / "monitor.png", title=f"{data}: {config.target}"))
            files.append("monitor.png")
        run.finish(files)
    print(summary(result))
    print(wrote(output.out, files))
    return 0


def summary(result) -> str:
    """The printed summary: the last bounds, the alarm (or the last e-value), the rows left out, the notes."""
    c, s = result.config, result.stream
    n = len(s.ids)
    lines = [f"{c.target} over {n} labels in {s.batches} batches (order: {c.order}, compared as {s.kind}): "
             f"{result.estimate[-1]:.4f}, {1 - c.alpha:.0%} confidence sequence [{result.lower[-1]:.4f}, "
             f"{result.upper[-1]:.4f}]"]  # fmt: skip
    if result.alarm is not None:
        a = result.alarm
        lines.append(f"ALARM: {c.target} below {c.threshold:g} shown at label {a.n} (order {a.order}, id {a.id}): "
                     f"e-value {a.e_value:.3g} >= 1/alpha = {1 / c.alpha:g}")  # fmt: skip
    elif result.e_value is not None:
        lines.append(f"no alarm: {c.target} >= {c.threshold:g} not rejected (e-value now {result.e_value[-1]:.3g}, "
                     f"largest {result.e_value.max():.3g}; alarm at 1 / alpha = {1 / c.alpha:g})")  # fmt: skip
    lines += [f"left out: {k} rows ({reason})" for reason, k in s.left_out.items()]
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def add_monitor_parser(sub) -> None:
    """Register ``monitor`` on a subparsers object."""
    p = sub.add_parser("monitor", help="follow a judge's agreement as labels arrive: anytime-valid confidence "
                       "sequence and an e-process alarm")  # fmt: skip
    inputs.add_read_options(p)
    add_options(p, MonitorConfig, overrides={"order": {"metavar": "COLUMN"}, "threshold": {"metavar": "A"}})
    p.add_argument("--quiet", action="store_true", help="no read report")
    p.add_argument("--no-figures", action="store_true", help="write no figures")
    p.add_argument("--out", default="puaudit-monitor", help="output folder (monitor.csv, report.json, monitor.png)")
    p.set_defaults(func=cmd_monitor)
