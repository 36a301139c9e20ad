"""Style control on the bundled sets: what length and markdown are worth, and how the leaderboard moves.

For MT-Bench (GPT-4 judge) and LLMFAO (GPT-4 and GPT-3.5 judges), with every human label and the
judge-only pairs as the unlabelled pool: ``quantify`` with the default style features (normalised
A - B differences of tokens, headers, list items, bold). Reports each style coefficient by every
estimator (Elo points when only A has the feature; 90 % intervals), and per estimator the raw and
the style-controlled leaderboards side by side: Kendall tau between them and the models that move
most.

    OMP_NUM_THREADS=1 python -m experiments.reproductions.style_control      # ~2 min

Writes results/style_control.{csv,md,json} (csv: the two leaderboards of every model and estimator).
"""

from __future__ import annotations

import argparse

import pandas as pd
from scipy.stats import kendalltau

from experiments.common import RESULTS
from puaudit_jax.datasets import load_data
from puaudit_jax.quantify import quantify
from puaudit_jax.quantify.targets import STYLE_COEFFICIENT, STYLE_CONTROLLED
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

SETS = {"mtbench (GPT-4)": "mtbench", "llmfao (GPT-4)": "llmfao-gpt4", "llmfao (GPT-3.5)": "llmfao-gpt3"}


def boards(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (estimator, model): raw and style-controlled Elo and rank-sets."""
    ok = frame[frame["note"].fillna("") == ""]
    raw = ok[ok["target"].str.startswith("elo: ")].assign(model=lambda f: f["target"].str.removeprefix("elo: "))
    ctl = ok[ok["target"].str.startswith(STYLE_CONTROLLED)].assign(
        model=lambda f: f["target"].str.removeprefix(STYLE_CONTROLLED))  # fmt: skip
    cols = ["estimator", "model", "estimate", "lower", "upper", "rank_lower", "rank_upper"]
    both = raw[cols].merge(ctl[cols], on=["estimator", "model"], suffixes=("_raw", "_style"))
    both["rank_raw"] = both.groupby("estimator")["estimate_raw"].rank(ascending=False)
    both["rank_style"] = both.groupby("estimator")["estimate_style"].rank(ascending=False)
    return both.assign(moved=both["estimate_style"] - both["estimate_raw"])


def movement(both: pd.DataFrame) -> pd.DataFrame:
    """Per estimator: Kendall tau raw vs controlled, and the largest rise and fall in Elo points."""
    rows = []
    for est, part in both.groupby("estimator", sort=False):
        up, down = part.loc[part["moved"].idxmax()], part.loc[part["moved"].idxmin()]
        rows.append({"estimator": est, "models": len(part),
                     "kendall_tau": kendalltau(part["estimate_raw"], part["estimate_style"]).statistic,
                     "rank_changes": int((part["rank_raw"] != part["rank_style"]).sum()),
                     "top_raw": part.loc[part["rank_raw"].idxmin(), "model"],
                     "top_style": part.loc[part["rank_style"].idxmin(), "model"],
                     "largest_rise": f"{up['model']} {up['moved']:+.0f}",
                     "largest_fall": f"{down['model']} {down['moved']:+.0f}"})  # fmt: skip
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--out", default=str(RESULTS / "style_control"))
    args = parser.parse_args(argv)
    coefficients, moves, boards_all = [], [], []
    for label, source in SETS.items():
        frame = quantify(load_data(source, True), level=args.level).to_frame()
        coef = frame[frame["target"].str.startswith(STYLE_COEFFICIENT)]
        coefficients.append(coef[["target", "estimator", "estimate", "lower", "upper", "note"]].assign(set=label))
        both = boards(frame)
        boards_all.append(both.assign(set=label))
        moves.append(movement(both).assign(set=label))
        print(f"{label}: {len(both) // max(1, both['estimator'].nunique())} models", flush=True)
    coefficients, moves = pd.concat(coefficients, ignore_index=True), pd.concat(moves, ignore_index=True)
    write_csv(pd.concat(boards_all, ignore_index=True), f"{args.out}.csv")
    write_json({"level": args.level, "coefficients": coefficients.to_dict(orient="records"),
                "movement": moves.to_dict(orient="records")}, f"{args.out}.json")  # fmt: skip
    text = (f"# Style control on the bundled sets (level {args.level})\n\n## Coefficients: Elo points when only "
            "response A has the feature (normalised difference 1)\n\n" + markdown_table(coefficients) +
            "\n\n## Raw vs style-controlled leaderboard\n\n" + markdown_table(moves) + "\n")  # fmt: skip
    write_text(text, f"{args.out}.md")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(coefficients.to_string(index=False, float_format="{:.1f}".format))
        print(moves.to_string(index=False, float_format="{:.3f}".format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
