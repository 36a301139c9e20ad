"""Benchmark: what the ``puaudit`` command costs before and around its work, in fresh processes.

    OMP_NUM_THREADS=1 python -m experiments.benchmarks.startup [--repeats 5]

Commands, each run in a fresh process, interleaved round by round (a slow moment of the machine
hits every row alike), the median of ``--repeats`` rounds:

- ``python -c "import jax"``: the reference the issue set for ``--help``;
- ``puaudit --help``: the parser alone (it imports no numerical library);
- ``puaudit audit mtbench`` warm: every embedding in the cache and every program in the persistent
  compilation cache (both filled by one run before the rounds, under a temporary ``$PUAUDIT_CACHE``),
  figures written; the audit's work left is the decision rule, the report and the figures;
- the same with ``--no-figures``.

Prints the medians and their ratios to ``import jax``; writes results/bench_startup.{md,json}
atomically. A script, not a test: no timed assertions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from experiments.common import RESULTS, ROOT, dump_json, machine, machine_header
from puaudit_runtime.files import write_text

PUAUDIT = [sys.executable, "-m", "puaudit_jax.cli"]


def _commands(out: str) -> dict[str, list[str]]:
    return {
        "python -c 'import jax'": [sys.executable, "-c", "import jax"],
        "puaudit --help": [*PUAUDIT, "--help"],
        "puaudit audit mtbench, warm": [*PUAUDIT, "audit", "mtbench", "--out", f"{out}/figures", "--quiet"],
        "puaudit audit mtbench, warm, --no-figures": [
            *PUAUDIT,
            "audit",
            "mtbench",
            "--out",
            f"{out}/plain",
            "--quiet",
            "--no-figures",
        ],  # fmt: skip
    }


def _seconds(argv: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=600)  # fmt: skip
    return time.perf_counter() - t


def main() -> None:
    """Fill the caches once, time every command ``--repeats`` times interleaved, write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="rounds (fresh processes per command)")
    args = parser.parse_args()
    info = machine()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PUAUDIT_CACHE": f"{tmp}/cache", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        commands = _commands(f"{tmp}/out")
        for argv in commands.values():  # fills the embedding and compilation caches
            _seconds(argv, env)
        times = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, argv in commands.items():
                times[name].append(_seconds(argv, env))
    base = statistics.median(times["python -c 'import jax'"])
    medians = {name: statistics.median(t) for name, t in times.items()}
    rows = [{"command": name, "median_s": medians[name], "runs_s": t, "over_import_jax": medians[name] / base}
            for name, t in times.items()]  # fmt: skip
    lines = [machine_header(info, "experiments.benchmarks.startup"), "",
             f"Fresh processes, median of {args.repeats} interleaved rounds (s)", "",
             "| command | median (s) | / import jax |", "|---|---|---|"]  # fmt: skip
    lines += [f"| {r['command']} | {r['median_s']:.2f} | {r['over_import_jax']:.2f} |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    write_text(text, RESULTS / "bench_startup.md")
    dump_json({"machine": info, "repeats": args.repeats, "rows": rows}, RESULTS / "bench_startup.json")


if __name__ == "__main__":
    main()
