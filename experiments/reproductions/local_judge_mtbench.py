"""LocalJudge (SmolLM2-135M-Instruct, seed Figure 10 prompt, both orders) on MT-Bench expert pairs.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.local_judge_mtbench [--per-type 36]
        [--max-length 2048]

Rows: the bundled MT-Bench table's comparisons with an expert verdict A or B (875), a stratified
subset of ``--per-type`` rows per question_type (8 types; fixed ``--seed``). Writes
``results/local_judge/mtbench_local.csv`` (a comparison table: the bundled columns, ``judge`` =
LocalJudge's final verdict, ``judge_original`` = GPT-4's, plus verdict_ab, verdict_ba, margin,
consistent, omitted_tokens, judge_status) and ``mtbench_local.json`` (agreement with the experts
overall and per type, GPT-4's agreement on the same rows, position consistency, time per pair).
Resumable: the judge's log-probabilities are cached on disk (``--cache-dir``), and the CSV is
rewritten (atomically) after every chunk with the rows done so far.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from experiments.common import RESULTS
from puaudit_jax.datasets import load_bundled, save_comparisons
from puaudit_jax.datasets.verdicts import TIE, A, B
from puaudit_jax.judges.local import LocalJudge
from puaudit_jax.judges.run import judge_table
from puaudit_runtime.files import write_json


def stratified(table: pd.DataFrame, per_type: int, seed: int) -> pd.DataFrame:
    """``per_type`` rows of each question_type (all of a type if fewer), sampled with ``seed``."""
    parts = [
        g.sort_values("id").sample(min(per_type, len(g)), random_state=seed)
        for _, g in table.groupby("question_type", sort=True)
    ]
    return pd.concat(parts).sort_values(["question_type", "id"]).reset_index(drop=True)


def expert_rows(per_type: int, seed: int) -> pd.DataFrame:
    table = load_bundled("mtbench")
    return stratified(table[table.human.isin([A, B])], per_type, seed)


def summarize(out: pd.DataFrame) -> dict:
    """Agreement with experts (share of rows where judge == human), overall and per type."""

    def block(g):
        ok = g[g.judge_status == "ok"]
        return {
            "n": int(len(g)),
            "n_ok": int(len(ok)),
            "agreement_local": float((ok.judge == ok.human).mean()) if len(ok) else None,
            "agreement_local_order_ab": float((ok.verdict_ab == ok.human).mean()) if len(ok) else None,
            "agreement_gpt4": float((g.judge_original == g.human).mean()),
            "position_consistency": float(ok.consistent.astype(bool).mean()) if len(ok) else None,
            "local_says_A": float((ok.judge == A).mean()) if len(ok) else None,
            "human_says_A": float((g.human == A).mean()),
            "local_ties": int((ok.judge == TIE).sum()),
        }

    res = {"all": block(out)}
    for t, g in out.groupby("question_type"):
        res[str(t)] = block(g)
    return res


def rows_parser(description: str, per_type: int) -> argparse.ArgumentParser:
    """Arguments shared by the local-judge MT-Bench scripts: which rows, prompt cap, cache, output."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-type", type=int, default=per_type)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-length", type=int, default=2048, help="prompt cap in tokens (middle-out above it)")
    ap.add_argument("--cache-dir", default=str(RESULTS / "tmp" / "judge_cache"))
    ap.add_argument("--out", default=str(RESULTS / "local_judge"))
    return ap


def main(argv=None) -> int:
    args = rows_parser(__doc__, per_type=36).parse_args(argv)
    out_dir = Path(args.out)
    rows = expert_rows(args.per_type, args.seed)
    print(f"{len(rows)} expert-labelled MT-Bench rows ({args.per_type} per type, seed {args.seed})", file=sys.stderr)
    t0 = time.perf_counter()
    judge = LocalJudge("smollm2", max_length=args.max_length, cache_dir=args.cache_dir)
    t_load = time.perf_counter() - t0
    csv = out_dir / "mtbench_local.csv"
    t1 = time.perf_counter()
    result = judge_table(rows, judge, chunk=8, progress=True, on_chunk=lambda part: save_comparisons(part, csv))
    wall = time.perf_counter() - t1
    save_comparisons(result, csv)
    summary = {
        "data": "mtbench (bundled), expert verdict A or B, stratified by question_type",
        "rows": len(result),
        "per_type": args.per_type,
        "seed": args.seed,
        "judge": {
            "name": judge.name,
            "model": judge.pre.source,
            "prompt": "seed Figure 10 (system + user), assistant turn starts with '[['",
            "verdict": "sign of logp('A') - logp('B') averaged over orders (A,B) and (B,A) swapped back",
            "max_length": judge.max_length,
            "long_inputs": judge.long_inputs,
            "tie_margin": judge.tie_margin,
        },
        "middle_out": {
            "rows_shortened": int((result.omitted_tokens > 0).sum()),
            "tokens_omitted_total": int(result.omitted_tokens.sum()),
        },
        "agreement": summarize(result),
        "timing": {
            "load_s": t_load,
            "wall_s": wall,
            "forward_passes": judge.stats["forward_passes"],
            "cache_hits": judge.stats["cache_hits"],
            "forward_s": judge.stats["forward_seconds"],
            "s_per_pair_wall": wall / max(1, len(result)),
            "s_per_forward": judge.stats["forward_seconds"] / max(1, judge.stats["forward_passes"]),
            "cpu": "1 core (taskset -c 1, OMP_NUM_THREADS=1), shared machine",
        },
    }
    write_json(summary, out_dir / "mtbench_local.json")
    a = summary["agreement"]["all"]
    print(
        f"LocalJudge agreement with experts {a['agreement_local']:.3f} (GPT-4 on the same rows "
        f"{a['agreement_gpt4']:.3f}); position consistency {a['position_consistency']:.3f}; "
        f"{summary['timing']['s_per_pair_wall']:.1f} s/pair; wrote {csv}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
