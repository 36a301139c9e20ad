"""The label planner against random sampling at equal budgets: interval widths and coverage on real data.

For each judge (MT-Bench GPT-4, LLMFAO GPT-4 and GPT-3.5; their human-labelled rows) and each of
``--splits`` splits: a random ``--first`` share of the rows is labelled; the default audit (MiniLM
embeddings, the default calibrated rule, tie labels hidden) runs on those labels alone; two plans
of the same expected budget (``--budget`` share of the rows) draw from the rest: ``planned``
(:func:`puaudit_jax.quantify.plan.plan_labels` with the audit's P(judge wrong)) and ``random``
(uniform, mix 1); the drawn rows' held labels are revealed, and ``quantify(..., plan=...)`` estimates
the agreement m, the A share, every model's win rate and Elo score with every estimator. Truth: the same
targets on all the labelled rows. Coverage and mean width per design, and the width of planned over
random per target (< 1: the planner helps).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.label_planner    # ~30 min

Writes results/label_planner.{csv,md,json} (csv: one row per target, estimator and design).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from tqdm import tqdm

from experiments.common import LOCAL_JUDGE_CSV, RESULTS
from puaudit_jax.audit.embed import EmbedConfig, table_embeddings
from puaudit_jax.audit.predictions import audit_for_quantify
from puaudit_jax.datasets import load_data
from puaudit_jax.datasets.verdicts import MISSING
from puaudit_jax.quantify import quantify
from puaudit_jax.quantify.coverage import population
from puaudit_jax.quantify.plan import PlanConfig, plan_labels
from puaudit_jax.quantify.targets import audit_p_wrong
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

JUDGES = {
    "mtbench (GPT-4)": "mtbench",
    "llmfao (GPT-4)": "llmfao-gpt4",
    "llmfao (GPT-3.5)": "llmfao-gpt3",
    "mtbench (SmolLM2-135M local)": str(LOCAL_JUDGE_CSV),
    "synthetic (oracle P(judge wrong))": "synthetic",
}
DESIGNS = {"planned": None, "random": 1.0}  # mix: None = the default PlanConfig.mix
KEEP = ("agreement m", "share of A wins", "win rate: ", "elo: ")


def _kind(target: str) -> str:
    return target.split(":")[0]


def _estimates(frame: pd.DataFrame) -> pd.DataFrame:
    keep = frame["target"].str.startswith(KEEP) & (frame["estimator"] != "judge only")
    return frame.loc[keep, ["target", "estimator", "estimate", "lower", "upper", "note"]]


def synthetic(rows: int = 2000, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """A judge wrong with a known probability: 0.45 on a fifth of the items, 0.03 elsewhere.

    What the planner gains when P(judge wrong) separates items sharply (an oracle audit).
    """
    rng = np.random.default_rng(seed)
    p_wrong = np.where(rng.random(rows) < 0.2, 0.45, 0.03)
    human = np.where(rng.random(rows) < 0.5, "A", "B")
    judge = np.where(rng.random(rows) < p_wrong, np.where(human == "A", "B", "A"), human)
    return pd.DataFrame({"id": [f"s{i}" for i in range(rows)], "judge": judge, "human": human}), p_wrong


def run_split(table, features, rng_seed: int, args, oracle=None) -> list[pd.DataFrame]:
    """One split: the first labels, the audit (or the oracle's P(judge wrong)), both plans revealed and quantified."""
    rng = np.random.default_rng(rng_seed)
    first = rng.random(len(table)) < args.first
    shown = table.assign(human=np.where(first, table["human"].to_numpy(dtype=object), MISSING))
    items = None if oracle is not None else audit_for_quantify(shown, features)
    if items is not None and not np.isfinite(items["p_wrong"].to_numpy(float)).any():
        items = None  # too few labels for a calibrated P(judge wrong): both designs are random sampling
    p_wrong = oracle if oracle is not None else None if items is None else audit_p_wrong(shown, items)
    budget = max(1, int(round(args.budget * len(table))))
    out = []
    for design, mix in DESIGNS.items():
        # the draw's own seed: the split's stream would draw the first labels' rows again
        config = PlanConfig(budget=budget, seed=10_000 + rng_seed, **({} if mix is None else {"mix": mix}))
        report = plan_labels(shown, p_wrong, config)
        drawn = report.frame.set_index("id")["selected"].reindex(table["id"].astype(str)).fillna(False)
        revealed = shown.assign(human=np.where(drawn.to_numpy(bool) | first, table["human"].to_numpy(dtype=object),
                                               MISSING))  # fmt: skip
        frame = quantify(revealed, plan=report.frame, audit_items=items, style=(), level=args.level).to_frame()
        pool = report.frame.loc[report.frame["role"] == "pool", "sampling_prob"]
        out.append(_estimates(frame).assign(design=design, split=rng_seed, drawn=int(drawn.sum()),
                                            spread=pool.max() / pool.min(), audited=p_wrong is not None))  # fmt: skip
    return out


def per_target(rows: pd.DataFrame, truth: pd.Series, splits: int, level: float) -> pd.DataFrame:
    """Per (judge, target, estimator, design): coverage of ``truth``, mean width, planned / random width."""
    rows = rows[rows["note"].fillna("") == ""].copy()
    t = truth.reindex(rows["target"]).to_numpy()
    rows["covered"] = (rows["lower"] <= t) & (t <= rows["upper"])
    rows["width"] = rows["upper"] - rows["lower"]
    out = rows.groupby(["judge", "target", "estimator", "design"]).agg(
        coverage=("covered", "mean"), width=("width", "mean"), estimable=("width", "size"),
        spread=("spread", "median"), audited=("audited", "mean")).reset_index()  # fmt: skip
    wide = out.pivot_table(index=["judge", "target", "estimator"], columns="design", values="width")
    ratio = (wide["planned"] / wide["random"]).rename("width_ratio").reset_index()
    out = out.merge(ratio, on=["judge", "target", "estimator"], how="left")
    out["kind"] = out["target"].map(_kind)
    out["valid"] = out["coverage"] >= level - 3 * np.sqrt(level * (1 - level) / splits)
    return out


def summarise(targets: pd.DataFrame) -> pd.DataFrame:
    """Per (judge, target kind, estimator, design): the :func:`per_target` rows aggregated."""
    return targets.groupby(["judge", "kind", "estimator", "design"], sort=False).agg(
        targets=("target", "size"), coverage=("coverage", "mean"), min_coverage=("coverage", "min"),
        valid=("valid", "mean"), width=("width", "mean"), width_ratio=("width_ratio", "median"),
        best_ratio=("width_ratio", "min"), worst_ratio=("width_ratio", "max"),
        pi_spread=("spread", "median"), audited=("audited", "mean")).reset_index()  # fmt: skip


def run_judge(label: str, source: str, args) -> tuple[pd.DataFrame, pd.Series]:
    oracle, features = None, None
    if source == "synthetic":
        table, oracle = synthetic(seed=args.seed)
    else:
        table = population(load_data(source))
        features = table_embeddings(table.assign(human=MISSING), EmbedConfig(), progress=False)
    truth_frame = quantify(table, style=(), level=args.level).to_frame()
    truth = truth_frame[truth_frame["estimator"] == "human only"].set_index("target")["estimate"]
    start, rows = time.time(), []
    for s in tqdm(range(args.splits), desc=label):
        rows += run_split(table, features, args.seed + s, args, oracle)
    print(f"{label}: {args.splits} splits, {time.time() - start:.0f} s", flush=True)
    return pd.concat(rows).assign(judge=label), truth


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--first", type=float, default=0.1, help="share labelled before the plan")
    parser.add_argument("--budget", type=float, default=0.1, help="expected share of rows the plan labels")
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judges", default=",".join(JUDGES), help="comma list of " + ", ".join(JUDGES))
    parser.add_argument("--out", default=str(RESULTS / "label_planner"))
    args = parser.parse_args(argv)
    targets = []
    for judge in args.judges.split(","):
        rows, truth = run_judge(judge, JUDGES[judge], args)
        targets.append(per_target(rows, truth, args.splits, args.level))
    targets = pd.concat(targets, ignore_index=True)
    summary = summarise(targets)
    write_csv(targets, f"{args.out}.csv")
    settings = {k: getattr(args, k) for k in ("splits", "first", "budget", "level", "seed")}
    write_json({**settings, "summary": summary.to_dict(orient="records")}, f"{args.out}.json")
    head = (f"# Label planner vs random sampling ({args.splits} splits; {args.first:.0%} labelled first, a plan of "
            f"{args.budget:.0%} of the rows; level {args.level})\n\nwidth_ratio: median over targets of the planned "
            "width / the random width (best / worst: min / max); valid: share of targets whose coverage reaches "
            "level - 3 binomial standard errors; pi_spread: median over splits of the largest / the smallest "
            "sampling probability of the pool (1: the plan is random sampling); audited: share of splits whose audit "
            "gave a P(judge wrong) (the others sample at random).\n\n")  # fmt: skip
    write_text(head + markdown_table(summary) + "\n", f"{args.out}.md")
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(summary.to_string(index=False, float_format="{:.3f}".format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
