"""Record (or check) the audit's reference outputs: the numbers the audit-stages refactor
must not change.

    python tests/data/golden/record.py          # rewrite the files under tests/data/golden/
    python tests/data/golden/record.py --check  # compare a fresh run with them (what the test does)

Features are hashed character 4-grams of the paper's encoder input (no model, identical on every
machine), so the reference runs the whole audit on the real bundled tables in seconds. Each run is
``puaudit audit`` / ``puaudit evaluate`` through :func:`puaudit_jax.cli.main`, as a user calls it.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DIM = 64

# The Sinkhorn solves run in float64. In float32 the last bits of the solver's output depend on how
# XLA fuses the graph, so a change that leaves the mathematics alone (3b11149: the scorer stopped
# asking for a certificate) moved costs by 1e-7, score_raw on 11 % of the rows and n_flipped on 12 % of
# one evaluation's splits (items on a threshold's knife edge): CI failed on it. In float64 such noise
# stays far below the 1e-9 tolerance, so a difference here is a change of the audit itself.
POT = ["--scorer", "pot", "--rule", "paper", "--solver-dtype", "float64"]
AUDITS = {  # name -> (data, extra arguments)
    "mtbench-plain": ("mtbench", []),
    "mtbench-default": ("mtbench", ["--hide-labels", "0.5"]),
    "mtbench-paper": ("mtbench", ["--hide-labels", "0.5", *POT]),
    "llmfao-gpt4-default": ("llmfao-gpt4", ["--include-unlabelled"]),
    "llmfao-gpt4-paper": ("llmfao-gpt4", ["--include-unlabelled", *POT]),
    "llmfao-gpt3-default": ("llmfao-gpt3", ["--include-unlabelled", "--cluster-by", "prompt"]),
    "llmfao-gpt3-paper": ("llmfao-gpt3", ["--include-unlabelled", *POT]),
}
EVALUATIONS = {
    "mtbench": ("mtbench", []),
    "llmfao-gpt4": ("llmfao-gpt4", []),
    "llmfao-gpt3": ("llmfao-gpt3", ["--split-by", "prompt", "--cluster-by", "prompt"]),
}
EVALUATE_PAIRS = ["--scorers", "knn,pot", "--rules", "two-sided,paper", "--seeds", "2", "--solver-dtype", "float64"]
VOLATILE = ("timings_s", "time_s", "peak_rss_mb", "peak_delta_mb")  # they measure the machine, not the audit


def _hashed(text: str) -> np.ndarray:
    """(DIM,) unit vector of hashed character 4-gram counts of ``text``."""
    v = np.zeros(DIM)
    for i in range(max(len(text) - 3, 1)):
        v[zlib.crc32(text[i : i + 4].encode("utf-8")) % DIM] += 1.0
    return v / max(np.linalg.norm(v), 1e-12)


def hashed_embeddings(table: pd.DataFrame):
    """PairEmbeddings of every usable row from the paper's encoder inputs, hashed (no model)."""
    from puaudit_jax.audit.embed import PairEmbeddings, pair_inputs

    ids, inputs_a, inputs_b = pair_inputs(table)
    flat = lambda x: x if isinstance(x, str) else json.dumps(x, sort_keys=True)  # noqa: E731
    a = np.stack([_hashed(flat(x)) for x in inputs_a])
    b = np.stack([_hashed(flat(x)) for x in inputs_b])
    return PairEmbeddings(np.asarray(ids, str), a, b, source=f"hashed 4-grams d={DIM}")


def _embeddings_file(data: str, extra: list[str], folder: Path) -> Path:
    from puaudit_jax.audit.embed import save_embeddings
    from puaudit_jax.datasets import load_bundled

    include = True if "--include-unlabelled" in extra else None
    path = folder / f"{data}-{include}.npz"
    if not path.exists():
        save_embeddings(hashed_embeddings(load_bundled(data, include_unlabelled=include)), path)
    return path


def _stable_report(path: Path) -> dict:
    report = json.loads(path.read_text())
    for key in VOLATILE:
        report.pop(key, None)
    return report


def run_all(work: Path) -> dict[str, dict]:
    """name -> {file name: content} of every reference run, computed now."""
    from puaudit_jax.cli import main

    out = {}
    for name, (data, extra) in AUDITS.items():
        folder = work / name
        emb = _embeddings_file(data, extra, work)
        assert (
            main(["audit", data, "--embeddings", str(emb), "--no-figures", "--quiet", "--out", str(folder), *extra])
            == 0
        )
        out[name] = {
            "items.csv": (folder / "items.csv").read_text(),
            "report.json": _stable_report(folder / "report.json"),
        }
    for name, (data, extra) in EVALUATIONS.items():
        folder = work / f"evaluate-{name}"
        emb = _embeddings_file(data, extra, work)
        assert (
            main(
                [
                    "evaluate",
                    data,
                    "--embeddings",
                    str(emb),
                    "--no-figures",
                    "--quiet",
                    "--out",
                    str(folder),
                    *EVALUATE_PAIRS,
                    *extra,
                ]
            )
            == 0
        )
        results = pd.read_csv(folder / "results.csv").drop(columns=list(VOLATILE), errors="ignore")
        per_seed = pd.read_csv(folder / "per_seed.csv").drop(columns=list(VOLATILE), errors="ignore")
        out[f"evaluate-{name}"] = {
            "results.csv": results.to_csv(index=False),
            "per_seed.csv": per_seed.to_csv(index=False),
        }
    return out


def write(runs: dict[str, dict]) -> None:
    for name, files in runs.items():
        for file, content in files.items():
            target = HERE / name / (file + (".gz" if file.endswith(".csv") else ""))
            target.parent.mkdir(parents=True, exist_ok=True)
            if file.endswith(".csv"):
                target.write_bytes(gzip.compress(content.encode("utf-8"), mtime=0))
            else:
                target.write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")


def recorded(name: str, file: str):
    if file.endswith(".csv"):
        return gzip.decompress((HERE / name / (file + ".gz")).read_bytes()).decode("utf-8")
    return json.loads((HERE / name / file).read_text())


def differences(runs: dict[str, dict]) -> list[str]:
    """One line per file whose fresh content differs from the recorded one."""
    bad = []
    for name, files in runs.items():
        for file, content in files.items():
            expected = recorded(name, file)
            if file.endswith(".csv"):
                fresh, ref = pd.read_csv(io.StringIO(content)), pd.read_csv(io.StringIO(expected))
                try:
                    pd.testing.assert_frame_equal(fresh, ref, check_exact=False, rtol=1e-9, atol=1e-12)
                except AssertionError as err:
                    bad.append(f"{name}/{file}: {str(err).splitlines()[0:4]}")
            else:
                bad += [f"{name}/{file}: {line}" for line in _json_differences(content, expected)]
    return bad


def _json_differences(fresh, ref, where: str = "") -> list[str]:
    """Paths where two JSON values differ (floats to a relative 1e-9)."""
    if isinstance(fresh, dict) and isinstance(ref, dict):
        keys = sorted(set(fresh) | set(ref))
        return [
            d
            for k in keys
            for d in (_json_differences(fresh.get(k, "<absent>"), ref.get(k, "<absent>"), f"{where}.{k}"))
        ]
    if isinstance(fresh, list) and isinstance(ref, list) and len(fresh) == len(ref):
        return [d for i, (f, r) in enumerate(zip(fresh, ref)) for d in _json_differences(f, r, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(fresh, numbers) and isinstance(ref, numbers) and not isinstance(fresh, bool):
        return [] if np.isclose(fresh, ref, rtol=1e-9, atol=1e-12) else [f"{where}: {fresh!r} != {ref!r}"]
    return [] if fresh == ref else [f"{where}: {fresh!r} != {ref!r}"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = run_all(Path(tmp))
    if args.check:
        bad = differences(runs)
        print("\n".join(bad) or "identical")
        sys.exit(1 if bad else 0)
    write(runs)
