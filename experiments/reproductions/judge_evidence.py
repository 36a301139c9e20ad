"""Judge-side evidence in the audit: an ablation over every set, at 10 / 20 / 50 % labels.

    python -m experiments.reproductions.judge_evidence [--judgebench PATH/outputs] [--sets ...]
        [--p-ratios 0.1,0.2,0.5] [--seeds 10] [--embeddings-dir DIR] [--out results]

For each set and share of labels, :func:`puaudit_jax.evaluate.evaluate` runs the paper's protocol
(labels hidden in groups: MT-Bench by question, LLMFAO by prompt, JudgeBench by question; the
cross-fitting folds and the bootstrap grouped the same way) once per split with kNN scores, and
applies to the same cross-fitted features: the default two-sided rule, and the ``evidence`` rule
(one logistic model of P(judge wrong), per-type effects, the abstaining decision) with the evidence
switched on kind by kind: embedding only, + style, + swapped, + confidence, + other judges, all.
The ``hindsight`` row is the ceiling (the best per-type number of flips chosen with the hidden labels).

Sets (the judge audited; the evidence it carries):

- ``judgebench-gpt``: JudgeBench's 350 GPT-4o pairs judged by o1-mini (Arena-Hard prompt), both
  orders and verdict strength; five reward models as other judges. Development set.
- ``judgebench-claude``: the 270 Claude-3.5-Sonnet pairs judged by Claude-3-Haiku, both orders and
  strength. Held out: never used to choose anything; reported apart.
- ``mtbench-local``: MT-Bench's 240 expert-labelled pairs judged by the bundled SmolLM2-135M judge
  in both orders (``results/local_judge/mtbench_local.csv``): its swapped verdict and confidence.
- ``mtbench``, ``llmfao-gpt4``, ``llmfao-gpt3``: the bundled sets; style is their only judge-side
  evidence.

JudgeBench's judge outputs are not bundled (no licence on them): ``--judgebench`` names a clone's
``outputs/`` folder (github.com/ScalerLab/JudgeBench); without it the JudgeBench sets are skipped.
Writes ``results/judge_evidence.{csv,json,md}``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import LOCAL_JUDGE_CSV, RESULTS
from experiments.reproductions.puaudit_protocol import embeddings_for
from puaudit_jax.audit import AuditConfig
from puaudit_jax.audit.evidence import EVIDENCE_KINDS
from puaudit_jax.audit.rules import CalibratedRule
from puaudit_jax.datasets import load_bundled, load_comparisons, load_judgebench
from puaudit_jax.evaluate import Protocol, evaluate
from puaudit_jax.judges.base import Verdict
from puaudit_jax.judges.run import evidence_columns
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

SETS = ("judgebench-gpt", "judgebench-claude", "mtbench-local", "mtbench", "llmfao-gpt4", "llmfao-gpt3")
HELD_OUT = ("judgebench-claude",)
GROUP = {"mtbench": "question_id", "mtbench-local": "question_id", "llmfao-gpt4": "prompt", "llmfao-gpt3": "prompt"}
ABLATIONS = {
    "embedding only": ("embedding",),
    "+ style": ("embedding", "style"),
    "+ swapped": ("embedding", "swapped"),
    "+ confidence": ("embedding", "confidence"),
    "+ others": ("embedding", "others"),
    "all": EVIDENCE_KINDS,
}


def evidence_rule(name: str, kinds: tuple[str, ...]) -> CalibratedRule:
    """The evidence rule restricted to ``kinds``, named for the ablation table."""
    return CalibratedRule(method="logistic", feature="two-sided", evidence=kinds, name=f"evidence[{name}]")


def local_judge_table() -> pd.DataFrame:
    """The local judge's MT-Bench verdicts with the evidence columns ``puaudit judge`` now writes."""
    table = load_comparisons(LOCAL_JUDGE_CSV)
    cols = [
        evidence_columns(Verdict(r.judge, None, "", details={"verdict_ba": r.verdict_ba, "margin": r.margin}))
        if r.judge_status == "ok"
        else evidence_columns(None)
        for r in table.itertuples()
    ]
    return table.assign(**pd.DataFrame(cols).to_dict(orient="list"))


def load_set(name: str, judgebench: str | None) -> tuple[pd.DataFrame, tuple[str, ...], str | None]:
    """(table, other-judge columns, split/cluster column) of a set."""
    if name.startswith("judgebench-"):
        table = load_judgebench(name.split("-", 1)[1], outputs=judgebench)
        return table, tuple(c for c in table.columns if c.startswith("other_")), "original_id"
    if name == "mtbench-local":
        return local_judge_table(), (), GROUP[name]
    return load_bundled(name), (), GROUP[name]


def run_set(name: str, args) -> pd.DataFrame:
    """Every share of labels on one set: the summary rows (overall and per type) with the settings."""
    table, others, group = load_set(name, args.judgebench)
    emb, _ = embeddings_for(name, table, args.embeddings_dir, "default")
    pairs = [("knn", "two-sided")] + [("knn", evidence_rule(k, v)) for k, v in ABLATIONS.items()]
    frames = []
    for p_ratio in args.p_ratios:
        t0 = time.perf_counter()
        protocol = Protocol(seeds=args.seeds, p_ratio=p_ratio, split_by=group, ceiling=True)
        res = evaluate(table, emb, pairs=pairs, protocol=protocol, config=AuditConfig(cluster_by=group,
                       other_judges=others), progress=False)  # fmt: skip
        frames.append(res.summary.assign(set=name, p_ratio=p_ratio, held_out=name in HELD_OUT))
        print(f"{name} p_ratio {p_ratio}: {time.perf_counter() - t0:.0f}s", flush=True)
    return pd.concat(frames, ignore_index=True)


def gains_markdown(summary: pd.DataFrame) -> str:
    """Gain in points (Cons_adj - Cons_orig, mean over seeds) / share of seeds abstained, overall."""
    part = summary[summary.question_type == "all"].copy()
    part["cell"] = [
        f"{100 * (r.cons_adj_mean - r.cons_orig_mean):+.1f}" + ("" if pd.isna(r.abstained) else f" / {r.abstained:.1f}")
        for r in part.itertuples()
    ]
    wide = part.pivot_table(index=["set", "p_ratio"], columns="rule", values="cell", aggfunc="first")
    order = ["two-sided"] + [f"evidence[{k}]" for k in ABLATIONS] + ["hindsight"]
    wide = wide[[c for c in order if c in wide.columns]].reset_index()
    base = part[part.rule == "two-sided"].set_index(["set", "p_ratio"]).cons_orig_mean
    wide.insert(2, "Cons_orig", [f"{100 * base.loc[(s, p)]:.1f}" for s, p in zip(wide.set, wide.p_ratio)])
    return markdown_table(wide)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--judgebench", help="a JudgeBench clone's outputs/ folder (judge verdicts, both orders)")
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--p-ratios", default="0.1,0.2,0.5", type=lambda v: [float(x) for x in v.split(",")])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--embeddings-dir", default=None)
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    sets = [s for s in args.sets.split(",") if args.judgebench or not s.startswith("judgebench-")]
    summary = pd.concat([run_set(name, args) for name in sets], ignore_index=True)
    out = Path(args.out)
    write_csv(summary, out / "judge_evidence.csv")
    settings = dict(sets=sets, p_ratios=args.p_ratios, seeds=args.seeds, scorer="knn", rules=list(ABLATIONS),
                    held_out=list(HELD_OUT), groups=GROUP, embeddings="probes:minilm")  # fmt: skip
    write_json({"settings": settings, "summary": summary.replace({np.nan: None}).to_dict(orient="records")},
               out / "judge_evidence.json")  # fmt: skip
    text = ("Gain in agreement points (Cons_adj - Cons_orig) / share of seeds abstained, overall; "
            "hindsight = ceiling.\n\n" + gains_markdown(summary) + "\n")  # fmt: skip
    write_text(text, out / "judge_evidence.md")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
