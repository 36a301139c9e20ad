"""Decision rules on the bundled real sets: scorer x rule grids with the hindsight ceiling.

    python -m experiments.reproductions.puaudit_rules [--sets mtbench,llmfao-gpt4,llmfao-gpt3] [--seeds 10]
        [--scorers pot-exact,centroid,knn,pu-logistic] [--splits random,grouped] [--embeddings-dir DIR]
        [--data-file NAME=PATH ...]

For every set and split mode, :func:`puaudit_jax.evaluate.evaluate` runs the paper's protocol
(p_ratio 0.2, m estimated on a 25% holdout) once per scorer and applies every rule to the same
scores / cross-fitted features: ``none`` (the raw judge), ``paper`` (the paper's rule, the comparison
row), ``budget``, the calibrated rules (``calibrated``, ``calibrated-platt``, ``two-sided``,
``two-sided-platt``) and the ``hindsight`` ceiling (best per-type budget chosen with the hidden
labels: not a rule). ``grouped`` hides labels by prompt (LLMFAO ``prompt``, MT-Bench
``question_id``) and groups the cross-fitting folds and the bootstrap the same way, so labelled
items and the pool never share a prompt's responses; ``random`` is the paper's split.

Writes ``results/puaudit_rules.csv`` (one row per set, split, scorer, rule, question type),
``results/puaudit_rules.json`` (with settings) and ``results/puaudit_rules.md`` (the overall grids),
and prints the grids. ``--data-file NAME=PATH`` adds a comparison file (e.g. the local judge's
verdicts) as a set; its embeddings are computed with MiniLM like the bundled sets.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from experiments.common import RESULTS
from experiments.reproductions.puaudit_protocol import embeddings_for
from puaudit_jax.audit import AuditConfig
from puaudit_jax.datasets import load_bundled, load_comparisons
from puaudit_jax.evaluate import Protocol, evaluate
from puaudit_runtime.files import write_csv, write_json, write_text

RULES = ("none", "paper", "budget", "calibrated", "calibrated-platt", "two-sided", "two-sided-platt")
CLUSTER = {"mtbench": "question_id", "llmfao-gpt4": "prompt", "llmfao-gpt3": "prompt"}


def grid_markdown(summary: pd.DataFrame, name: str, split: str) -> str:
    """Cons_adj (flip rate, flip precision) per scorer x rule, overall, with Cons_orig in the title."""
    part = summary[summary.question_type == "all"]
    orig = part.cons_orig_mean.iloc[0]
    rules = [r for r in list(RULES) + ["hindsight"] if r in set(part.rule)]
    lines = [
        f"**{name}, {split} split** (Cons_orig {100 * orig:.1f}; cells: Cons_adj mean (std) over seeds / "
        "flip rate % / flip precision % / share of seeds abstained)",
        "",
        "| scorer | " + " | ".join(rules) + " |",
        "|---|" + "---|" * len(rules),
    ]
    for scorer, rows in part.groupby("scorer", sort=False):
        cells = []
        for rule in rules:
            r = rows[rows.rule == rule]
            if r.empty:
                cells.append("")
                continue
            r = r.iloc[0]
            cell = f"{100 * r.cons_adj_mean:.1f} ({100 * r.cons_adj_std:.1f}) / {100 * r.flip_rate:.1f}"
            if r.flip_rate > 0 and pd.notna(r.get("flip_precision")):
                cell += f" / {100 * r.flip_precision:.0f}"
            if pd.notna(r.get("abstained")):
                cell += f" / ab {r.abstained:.1f}"
            cells.append(cell)
        lines.append(f"| {scorer} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def selection_markdown(summary: pd.DataFrame) -> str:
    """Every (scorer, rule) over every set and split: worst and mean gain in points (the default is
    the rule with the best worst case among those that never lose more than 0.3 points)."""
    part = summary[(summary.question_type == "all") & (summary.rule != "hindsight")]
    gain = 100 * (part.cons_adj_mean - part.cons_orig_mean)
    table = part.assign(gain=gain).groupby(["scorer", "rule"]).gain.agg(["min", "mean", "max", "count"])
    table = table.sort_values(["min", "mean"], ascending=False)
    lines = [
        "**Selection** (gain = Cons_adj - Cons_orig in points, over every set x split above; sorted by the worst case)",
        "",
        "| scorer | rule | worst | mean | best | runs |",
        "|---|---|---|---|---|---|",
    ]
    for (scorer, rule), r in table.iterrows():
        lines.append(
            f"| {scorer} | {rule} | {r['min']:+.2f} | {r['mean']:+.2f} | {r['max']:+.2f} | {int(r['count'])} |"
        )
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="mtbench,llmfao-gpt4,llmfao-gpt3")
    p.add_argument("--data-file", action="append", default=[], help="NAME=PATH of a comparison file")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--p-ratio", type=float, default=0.2)
    p.add_argument("--scorers", default="pot-exact,centroid,knn,pu-logistic")
    p.add_argument("--rules", default=",".join(RULES))
    p.add_argument("--splits", default="random,grouped")
    p.add_argument("--embeddings-dir", default=None)
    p.add_argument("--cache-dir", default="default")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--name", default="puaudit_rules", help="output file stem")
    args = p.parse_args(argv)
    sets = {name: load_bundled(name) for name in args.sets.split(",") if name}
    for spec in args.data_file:
        name, _, path = spec.partition("=")
        sets[name] = load_comparisons(path)
    frames, meta = [], {}
    md = ["# Decision rules on real sets (measured by `experiments/reproductions/puaudit_rules.py`)\n"]
    for name, table in sets.items():
        emb, t_embed = embeddings_for(name, table, args.embeddings_dir, args.cache_dir)
        cluster = CLUSTER.get(name, "question_id" if "question_id" in table else None)
        for split in args.splits.split(","):
            grouped = split == "grouped"
            if grouped and cluster is None:
                print(f"skip {name} grouped: no prompt column", file=sys.stderr)
                continue
            t = time.perf_counter()
            res = evaluate(
                table,
                emb,
                scorers=args.scorers.split(","),
                rules=args.rules.split(","),
                protocol=Protocol(seeds=args.seeds, p_ratio=args.p_ratio, ceiling=True,
                                  split_by=cluster if grouped else None),
                config=AuditConfig(cluster_by=cluster if grouped else None),
            )  # fmt: skip
            summary = res.summary.assign(data=name, split=split)
            frames.append(summary)
            meta[f"{name}/{split}"] = {**res.meta, "embed_time_s": t_embed, "wall_s": time.perf_counter() - t}
            md.append(grid_markdown(summary, name, split) + "\n")
            print("\n" + md[-1], flush=True)
    summary = pd.concat(frames, ignore_index=True)
    md.append(selection_markdown(summary) + "\n")
    print("\n" + md[-1])
    out = Path(args.out)
    write_csv(summary, out / f"{args.name}.csv")
    write_json(
        {"settings": vars(args), "runs": meta, "results": summary.to_dict(orient="records")}, out / f"{args.name}.json"
    )
    write_text("\n".join(md), out / f"{args.name}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
