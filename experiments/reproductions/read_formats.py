"""Judge files read as their authors wrote them: does a PPI++ win rate from a few reference labels cover
the reference's full-set win rate?

    python -m experiments.reproductions.read_formats --alpaca DIR [--draws 200] [--labels 50,100,200]
        [--level 0.9] [--out results]

DIR holds AlpacaEval annotation files of one run (``<annotator>.json``, e.g. ``results/
gpt-3.5-turbo-0301/*/annotations.json`` of github.com/tatsu-lab/alpaca_eval, renamed by annotator),
the first of ``--reference`` the reference judge. Not bundled: the sample in ``puaudit_jax/data/
formats/`` is 80 of the 805 instructions. Per cheap judge and label count n, each draw gives n random
rows the reference's verdict as a label (``--labels`` file, joined on ids) and reads the cheap judge's
file as it is; ``quantify`` then gives the win rate of the evaluated model by the judge alone, the
labels alone and PPI++. Reported: how often each interval covers the reference's win rate on all
rows (from its verdicts, ties 1/2), and its mean width. Writes ``results/read_formats.{md,csv}``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import RESULTS
from puaudit_jax.datasets import ReadConfig, read_comparisons
from puaudit_jax.quantify import quantify
from puaudit_runtime.files import markdown_table, write_csv, write_text

ESTIMATORS = ("judge only", "human only", "ppi++")


def win_rate(verdicts: pd.Series) -> float:
    """The share of B wins, ties counted 1/2 (the evaluated model is generator_2, response_b)."""
    return float((verdicts == "B").mean() + 0.5 * (verdicts == "tie").mean())


def one_draw(judge_file: Path, reference: pd.DataFrame, n: int, rng, level: float, work: Path) -> pd.DataFrame:
    """The win-rate rows of ``quantify`` with ``n`` random reference labels joined to the judge's file."""
    rows = rng.choice(len(reference), n, replace=False)
    labels = reference.iloc[rows][["id", "judge"]].rename(columns={"judge": "human"})
    labels.to_csv(work / "labels.csv", index=False)
    table = read_comparisons(judge_file, ReadConfig(labels=str(work / "labels.csv"))).table
    model = table["model_b"].iloc[0]
    frame = quantify(table.assign(question_type=None), level=level, style=()).to_frame()
    return frame[(frame["target"] == f"win rate: {model}") & frame["estimator"].isin(ESTIMATORS)]


def measure(folder: Path, reference_name: str, counts, draws: int, level: float) -> pd.DataFrame:
    """Coverage and width per cheap judge, label count and estimator."""
    files = sorted(folder.glob("*.json"))
    reference = read_comparisons(folder / f"{reference_name}.json").table
    truth = win_rate(reference["judge"])
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for judge_file in (f for f in files if f.stem != reference_name):
            judge = read_comparisons(judge_file)
            print("\n".join(judge.report.lines()))
            for n in counts:
                rng = np.random.default_rng(n)
                rows = pd.concat([one_draw(judge_file, reference, n, rng, level, Path(tmp)) for _ in range(draws)])
                for estimator, part in rows.groupby("estimator"):
                    covered = (part["lower"] <= truth) & (truth <= part["upper"])
                    out.append({"judge": judge_file.stem, "labels": n, "estimator": estimator, "draws": len(part),
                                "coverage": covered.mean(), "mean width": (part["upper"] - part["lower"]).mean(),
                                "mean estimate": part["estimate"].mean(), "reference win rate": truth})  # fmt: skip
    return pd.DataFrame(out)


def main(argv=None) -> None:
    """Measure and write the results (module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--alpaca", type=Path, required=True, help="folder of one run's annotation files")
    p.add_argument("--reference", default="weighted_alpaca_eval_gpt4_turbo", help="the reference annotator")
    p.add_argument("--labels", default="50,100,200", help="label counts, comma-separated")
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--level", type=float, default=0.9)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    counts = [int(v) for v in args.labels.split(",")]
    frame = measure(args.alpaca, args.reference, counts, args.draws, args.level)
    write_csv(frame, args.out / "read_formats.csv")
    text = (f"# AlpacaEval files read as written: win-rate intervals against the reference judge\n\n"
            f"`python -m experiments.reproductions.read_formats --alpaca {args.alpaca.name} --draws {args.draws} "
            f"--labels {args.labels} --level {args.level}`\n\n{markdown_table(frame, digits=3)}\n")  # fmt: skip
    write_text(text, args.out / "read_formats.md")
    print(text)


if __name__ == "__main__":
    main()
