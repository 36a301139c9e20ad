"""Coverage and width of every quantify estimator on real data, side by side; rank-set coverage.

For each judge -- MT-Bench GPT-4 (bundled), LLMFAO GPT-4 and GPT-3.5 (bundled), the local SmolLM2-135M
judge on 240 MT-Bench pairs (results/local_judge/mtbench_local.csv) -- and each labelled fraction
(10 %, 20 %, 50 %), ``--splits`` random splits of the human-labelled rows
(:func:`puaudit_jax.quantify.coverage.coverage_study`): the truth is the all-label estimate; every
estimator's coverage, mean width, and its width relative to human-only (the effective number of
human labels it is worth: n (w_human / w)^2). ``ppi++ (audit)`` runs the default audit (MiniLM
embeddings, knn scorer, the default calibrated rule) on each split's labels alone. Leaderboards:
Kendall tau with the all-label ranking, and the simultaneous rank-sets' coverage of the all-label
ranks (every model's rank in its set at once) with their mean size.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.quantify_coverage            # ~30 min
    OMP_NUM_THREADS=1 python -m experiments.reproductions.quantify_coverage --splits 50 --no-audit     # a quick look

Writes results/quantify_coverage.{csv,md,json} and results/quantify_coverage_ranks.csv.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from experiments.common import LOCAL_JUDGE_CSV, RESULTS
from puaudit_jax.audit.predictions import audit_split_predictions
from puaudit_jax.datasets import load_data
from puaudit_jax.datasets.verdicts import MISSING
from puaudit_jax.quantify import AUDIT_PPI, HUMAN_ONLY
from puaudit_jax.quantify.coverage import CoverageConfig, coverage_study, population, split_masks
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

JUDGES = {
    "mtbench (GPT-4)": "mtbench",
    "llmfao (GPT-4)": "llmfao-gpt4",
    "llmfao (GPT-3.5)": "llmfao-gpt3",
    "mtbench (SmolLM2-135M local)": str(LOCAL_JUDGE_CSV),
}


def kind(target: str) -> str:
    return target.split(":")[0]


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (judge, fraction, target kind, estimator): mean coverage, share of targets whose coverage
    reaches the binomial bound, mean width, width ratio to human-only and effective labels."""
    rows = rows.assign(kind=rows["target"].map(kind), valid=rows["coverage"] >= rows["bound"])
    human = rows[rows["estimator"] == HUMAN_ONLY].set_index(["judge", "fraction", "target"])["mean_width"]
    rows["ratio"] = rows["mean_width"].to_numpy() / human.reindex(
        pd.MultiIndex.from_frame(rows[["judge", "fraction", "target"]])).to_numpy()  # fmt: skip
    keys = ["judge", "fraction", "kind", "estimator"]
    return rows.groupby(keys, sort=False).agg(
        targets=("target", "size"), coverage=("coverage", "mean"), min_coverage=("coverage", "min"),
        valid=("valid", "mean"), width=("mean_width", "mean"), width_ratio=("ratio", "median"),
        estimable=("estimable", "mean"),
    ).reset_index()  # fmt: skip


def run_judge(label: str, source: str, args) -> tuple[pd.DataFrame, pd.DataFrame]:
    table = population(load_data(source))
    features = None
    if not args.no_audit:
        from puaudit_jax.audit.embed import EmbedConfig, table_embeddings

        features = table_embeddings(table.assign(human=MISSING), EmbedConfig(), progress=False)
    rows, ranks = [], []
    for fraction in args.fractions:
        config = CoverageConfig(fraction=fraction, splits=args.splits, level=args.level, seed=args.seed)
        start = time.time()
        predictions = None
        if features is not None:
            masks = split_masks(len(table), fraction, args.splits, args.seed)
            predictions = {AUDIT_PPI: audit_split_predictions(table, features, masks)}
        study = coverage_study(table, config, predictions=predictions)
        rows.append(study.rows.assign(judge=label, n_population=len(table)))
        ranks.append(study.ranks.assign(judge=label))
        print(f"{label}: {fraction:.0%} labelled, {args.splits} splits, {time.time() - start:.0f} s", flush=True)
    return pd.concat(rows), pd.concat(ranks)


def markdown(summary: pd.DataFrame, ranks: pd.DataFrame, args) -> str:
    lines = [f"# Coverage of the quantify intervals ({args.splits} splits, level {args.level}, seed {args.seed})", "",
             "coverage: mean over targets; valid: share of targets at or above the binomial bound "
             "level - 3 sqrt(level (1 - level) / splits); width_ratio: median over targets of width / "
             "human-only width (effective human labels = n / ratio^2).", ""]  # fmt: skip
    cols = ["judge", "fraction", "kind", "estimator", "targets", "coverage", "min_coverage", "valid", "width",
            "width_ratio", "estimable"]  # fmt: skip
    lines += [markdown_table(summary[cols]), "", "## Leaderboards: Kendall tau with the all-label Bradley-Terry "
              "ranking, and the rank-sets' simultaneous coverage of the all-label ranks (mean over estimable "
              "splits; rank_set_bound = level - 3 binomial standard errors)", "",
              markdown_table(ranks)]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=500)
    parser.add_argument("--fractions", type=lambda s: [float(v) for v in s.split(",")], default=[0.1, 0.2, 0.5])
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judges", default=",".join(JUDGES), help="comma list of " + ", ".join(JUDGES))
    parser.add_argument("--no-audit", action="store_true", help="skip the audit-powered estimator (no encoder)")
    parser.add_argument("--out", default=str(RESULTS / "quantify_coverage"))
    args = parser.parse_args(argv)
    rows, ranks = zip(*(run_judge(j, JUDGES[j], args) for j in args.judges.split(",")))
    rows, ranks = pd.concat(rows, ignore_index=True), pd.concat(ranks, ignore_index=True)
    summary = summarise(rows)
    write_csv(rows, f"{args.out}.csv")
    write_csv(ranks, f"{args.out}_ranks.csv")
    write_json({"splits": args.splits, "fractions": args.fractions, "level": args.level, "seed": args.seed,
                "summary": summary.to_dict(orient="records"), "ranks": ranks.to_dict(orient="records")},
               f"{args.out}.json")  # fmt: skip
    write_text(markdown(summary, ranks, args), f"{args.out}.md")
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(summary.to_string(index=False, float_format="{:.3f}".format))
        print(ranks.to_string(index=False, float_format="{:.3f}".format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
