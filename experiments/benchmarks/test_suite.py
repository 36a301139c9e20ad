"""Where the test suite's time goes: the slowest tests and the time grouped by cause, in one run.

Runs pytest with the plugin :mod:`experiments.benchmarks.suite_meter`, then writes
``results/test_suite/<name>.md`` and ``.json``: the wall time, the tests run, the 50 slowest tests
(setup + call + teardown) and every test's seconds split into

- ``compile``: JAX compilation in the test's process;
- ``children``: waiting for child interpreters (forced-device subprocesses, clusters, CLI runs);
- ``loading``: fixture setup that is neither (models, bundled tables, synthetic data);
- ``sleep``: ``time.sleep`` in the test's process;
- ``rest``: everything else (the computation itself, statistics, I/O).

    python -m experiments.benchmarks.test_suite                       # as `make test` runs it
    python -m experiments.benchmarks.test_suite --name serial -- -n 0 -p no:xdist   # one process
    python -m experiments.benchmarks.test_suite --name all -- -m ""   # every tier

Arguments after ``--`` go to pytest (after the defaults ``-q -n auto --dist loadscope``). Set
OMP_NUM_THREADS=1 and HF_HUB_OFFLINE=1 as the Makefile does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from experiments.common import RESULTS, ROOT, dump_json, machine, machine_header
from puaudit_runtime.files import write_text

CAUSES = ("compile", "children", "loading", "sleep", "rest")
PHASES = ("setup", "call", "teardown")


def run_suite(pytest_args: list[str], meter: Path) -> tuple[float, int, str]:
    """(wall seconds, exit status, pytest's last line) of one metered pytest run."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "auto", "--dist", "loadscope", "-p",
           "experiments.benchmarks.suite_meter", *pytest_args]  # fmt: skip
    env = dict(os.environ, PUAUDIT_SUITE_METER=str(meter))
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.strip().splitlines() if line.strip()]
    return time.monotonic() - t0, done.returncode, lines[-1] if lines else done.stderr[-2000:]


def causes(record: Counter) -> dict[str, float]:
    """One test's seconds, in all and by cause (see the module docstring; the causes add up to the total)."""
    total = sum(record.get(f"seconds_{p}", 0.0) for p in PHASES)
    compile_s = sum(record.get(f"compile_{p}", 0.0) for p in PHASES)
    children = sum(record.get(f"children_{p}", 0.0) for p in PHASES)
    sleep = sum(record.get(f"sleep_{p}", 0.0) for p in PHASES)
    setup = record.get("seconds_setup", 0.0)
    loading = max(0.0, setup - record.get("compile_setup", 0.0) - record.get("children_setup", 0.0))
    rest = max(0.0, total - compile_s - children - sleep - loading)
    return dict(
        failed=bool(record.get("failed")),
        total=total,
        compile=compile_s,
        children=children,
        loading=loading,
        sleep=sleep,
        rest=rest,
    )


def read_meter(meter: Path) -> tuple[dict[str, Counter], list[dict]]:
    """(nodeid -> counters, fixture setups over 0.5 s) from every process's lines."""
    tests, fixtures = {}, []
    for path in meter.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if "fixture" in row:
                fixtures.append(row)
            else:
                tests.setdefault(row.pop("test"), Counter()).update(row)
    return tests, fixtures


def table(rows: list[tuple], header: tuple) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def report(name: str, wall: float, status: int, last: str, metered: dict, fixtures: list) -> dict:
    """The summary written to results/test_suite/<name>.json."""
    per_test = {nodeid: causes(record) for nodeid, record in metered.items()}
    by_cause = {c: sum(t[c] for t in per_test.values()) for c in CAUSES}
    by_module = Counter()
    for nodeid, t in per_test.items():
        by_module[nodeid.split("::")[0]] += t["total"]
    by_fixture = Counter()
    for f in fixtures:
        by_fixture[f"{f['fixture']} ({f['scope']})"] += f["seconds"]
    return dict(name=name, wall_s=wall, exit_status=status, pytest=last, tests=len(per_test),
                failed=sorted(k for k, t in per_test.items() if t["failed"]),
                test_seconds=sum(t["total"] for t in per_test.values()), by_cause=by_cause,
                by_module=dict(by_module.most_common()), by_fixture=dict(by_fixture.most_common()),
                tests_by_time=dict(sorted(per_test.items(), key=lambda kv: -kv[1]["total"])))  # fmt: skip


def markdown(summary: dict, info: dict, command: str) -> str:
    slow = list(summary["tests_by_time"].items())[:50]
    total = summary["test_seconds"] or 1.0
    parts = [
        f"# Test suite time: {summary['name']}",
        machine_header(info, "measured").replace("# ", "", 1).replace("\n# ", "\n\n"),
        f"Command: `{command}`\n\npytest: {summary['pytest']}\n\nWall: {summary['wall_s']:.0f} s; "
        f"{summary['tests']} tests; test time summed over processes: {summary['test_seconds']:.0f} s."
        + "".join(f"\n\nFailed: `{k}`" for k in summary["failed"]),
        "## By cause\n\n"
        + table(
            [(c, f"{s:.0f}", f"{100 * s / total:.0f} %") for c, s in summary["by_cause"].items()],
            ("cause", "seconds", "share"),
        ),  # fmt: skip
        "## The 50 slowest tests (setup + call + teardown)\n\n"
        + table(
            [(f"`{k}`", f"{v['total']:.1f}", *(f"{v[c]:.1f}" for c in CAUSES)) for k, v in slow], ("test", "s", *CAUSES)
        ),  # fmt: skip
        "## By module\n\n"
        + table(
            [(f"`{m}`", f"{s:.0f}") for m, s in list(summary["by_module"].items())[:25]], ("module", "seconds")
        ),  # fmt: skip
        "## Fixture setups over 0.5 s (summed over the processes that built them)\n\n"
        + table([(f"`{f}`", f"{s:.1f}") for f, s in list(summary["by_fixture"].items())[:15]], ("fixture", "seconds")),
    ]
    return "\n\n".join(parts) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="default", help="results/test_suite/<name>.md and .json")
    args, pytest_args = parser.parse_known_args(argv)
    pytest_args = [a for a in pytest_args if a != "--"]
    info = machine()
    with tempfile.TemporaryDirectory() as tmp:
        wall, status, last = run_suite(pytest_args, Path(tmp))
        metered, fixtures = read_meter(Path(tmp))
    if not metered:
        raise SystemExit(f"no test was metered (pytest exit {status}): {last}")
    summary = report(args.name, wall, status, last, metered, fixtures)
    command = "python -m experiments.benchmarks.test_suite " + " ".join(sys.argv[1:])
    out = RESULTS / "test_suite"
    dump_json(dict(summary, machine=info, command=command), out / f"{args.name}.json")
    text = markdown(summary, info, command)
    write_text(text, out / f"{args.name}.md")
    print(text)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
