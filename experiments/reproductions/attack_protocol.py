"""Seed §5.2 / Algorithm 2 attack-judge protocol on the local judge (SmolLM2-135M-Instruct).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.attack_protocol \
        [--distraction-per-type 6] [--rewrite-per-type 3] [--max-new-tokens 320] [--emotion cheerful]
        [--served [--threads 2]]

``--served`` runs the same model behind llama.cpp's real server (``puaudit serve-local``, the
``serve`` extra): the rewrites come from ``OpenAIChatGenerator`` and the verdicts, clean and
attacked, from ``OpenAILogprobJudge`` (the local judge's rule through ``top_logprobs``), so the
clean verdicts are re-judged by the served judge instead of read from the input file. Outputs go
to ``results/attack_protocol_served*`` unless ``--out`` says otherwise.

Input: ``results/local_judge/mtbench_local.csv`` (written by ``experiments.reproductions.local_judge_mtbench``:
MT-Bench expert-labelled pairs with the local judge's verdicts). The original verdicts are that
file's ``judge`` column (the same judge, same prompt cap, so the clean pairs are not re-judged).
Attacks (seed Figures 7-9), on the judge's loser only: distraction on ``--distraction-per-type``
rows per question type, length expansion and sentiment restyling (rewritten by the same
SmolLM2 model, greedy, ``--max-new-tokens``) on ``--rewrite-per-type`` rows per type (a subset of
the distraction rows). Writes ``results/attack_protocol.json`` / ``.md`` (flip-under-attack rate
per attack, overall and per type, counts, timings), ``results/attack_protocol_rows.csv`` (the
per-row tables) and ``results/attack_protocol_<attack>_comparisons.csv`` (the attacked rows as
comparisons: judge = the attacked verdict, the attacked loser's text in place; input for
``puaudit evaluate``); with ``--served`` also ``..._<attack>_original_comparisons.csv`` (the same
rows with the served judge's clean verdicts: the audit's "before"). Resumable through the judge /
generator disk caches; ``--extend`` reads an earlier run's rows back from ``{out}_rows.csv`` and
attacks only the rows a larger ``--rewrite-per-type`` adds (the caches may be gone).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import LOCAL_JUDGE_CSV, RESULTS, ROOT, wilson
from puaudit_jax.datasets import load_comparisons, save_comparisons
from puaudit_jax.judges import Verdict
from puaudit_jax.judges.attacks import (
    Distraction,
    LengthExpansion,
    SentimentRestyle,
    combine_results,
    flip_rates_by,
    read_result,
    response_column,
    run_attack,
)
from puaudit_jax.judges.local import LocalGenerator, LocalJudge
from puaudit_runtime.files import atomic_path, write_csv, write_json


def stratified_order(table: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Rows shuffled within each question type (fixed seed) with a within-type rank column."""
    parts = []
    for _, g in table.groupby("question_type", sort=True):
        g = g.sort_values("id").sample(frac=1.0, random_state=seed)
        parts.append(g.assign(_rank=np.arange(len(g))))
    return pd.concat(parts).reset_index(drop=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(LOCAL_JUDGE_CSV))
    ap.add_argument("--distraction-per-type", type=int, default=6)
    ap.add_argument("--rewrite-per-type", type=int, default=3)
    ap.add_argument("--sentiment-per-type", type=int, help="rows per type for sentiment (default: --rewrite-per-type)")
    ap.add_argument("--attacks", default="distraction,length,sentiment")
    ap.add_argument("--emotion", default="cheerful")
    ap.add_argument("--max-new-tokens", type=int, default=320)
    ap.add_argument("--gen-batch-size", type=int, default=8)
    ap.add_argument("--max-length", type=int, default=2048, help="judge prompt cap (same as the judged file)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=str(RESULTS / "tmp" / "judge_cache"))
    ap.add_argument("--out", help="output prefix (default results/attack_protocol[_served])")
    ap.add_argument(
        "--extend",
        action="store_true",
        help="read the rows of an earlier run back from {out}_rows.csv and attack only the rows it lacks "
        "(a larger --rewrite-per-type extends it; no disk cache needed)",
    )
    ap.add_argument("--served", action="store_true", help="generator and judge behind llama.cpp's server")
    ap.add_argument("--threads", type=int, default=2, help="--served: server CPU threads")
    ap.add_argument("--port", type=int, default=8765, help="--served: fixed, so cached answers are found again")
    args = ap.parse_args(argv)
    args.out = args.out or str(RESULTS / ("attack_protocol_served" if args.served else "attack_protocol"))
    if args.served:
        from puaudit_jax.judges.serve import LocalServer, ServeConfig

        log = str(RESULTS / "tmp" / "served.log")
        with LocalServer(ServeConfig(port=args.port, threads=args.threads, log=log)) as server:
            return run(args, server)
    return run(args, None)


def _stats(obj) -> dict:
    """The numeric counters of a judge / generator (local: .stats; HTTP: .client.stats)."""
    stats = getattr(obj, "stats", None) or getattr(getattr(obj, "client", None), "stats", None) or {}
    return {k: v for k, v in stats.items() if isinstance(v, (int, float))}


def _served_models(args, server):
    from probes.models.pretrained import resolve
    from probes.models.tokenizer import load_tokenizer
    from puaudit_jax.judges import OpenAIChatGenerator, OpenAILogprobJudge

    cache = Path(args.cache_dir).parent / "served_cache"
    judge = OpenAILogprobJudge(server.base_url, server.config.alias, cache_dir=cache, concurrency=1)
    generator = OpenAIChatGenerator(
        server.base_url, server.config.alias, max_tokens=args.max_new_tokens, cache_dir=cache, concurrency=1
    )
    return judge, generator, load_tokenizer(resolve("smollm2"))


def _earlier_run(args) -> dict:
    """The rows table and per-attack seconds of the earlier run at ``args.out`` (--extend)."""
    path = Path(f"{args.out}_rows.csv")
    if not path.exists():
        raise SystemExit(f"error: --extend: no earlier run at {path}")
    js = Path(f"{args.out}.json")
    summary = json.loads(js.read_text()) if js.exists() else {"attacks": {}}
    return {
        "rows": pd.read_csv(path, dtype={"id": str}),
        "attacks": summary["attacks"],
        "seconds": {k: v.get("seconds", 0.0) for k, v in summary["attacks"].items()},
        "judge": summary.get("judge"),
    }


def _earlier_result(earlier: dict, name: str, attack, judge: str, rows: pd.DataFrame):
    """The earlier run's result for attack ``name`` (None if it has none); its rows must be among ``rows``."""
    if not earlier:
        return None
    if earlier["judge"] not in (None, judge):
        raise SystemExit(f"error: --extend: the earlier run's judge is {earlier['judge']!r}, not {judge!r}")
    table = earlier["rows"][earlier["rows"].attack == name].drop(columns="attack")
    if table.empty:
        return None
    extra = sorted(set(table.id) - set(rows.id))
    if extra:
        raise SystemExit(
            f"error: --extend: {len(extra)} earlier {name} rows are not in this selection, e.g. {extra[:3]}"
        )
    return read_result(table, attack, judge)


def run(args, server) -> int:

    table = load_comparisons(args.input)
    ordered = stratified_order(table, args.seed)
    original = {
        str(r.id): (
            Verdict(r.judge, None, "local judge (mtbench_local.csv)", "ok")
            if r.judge_status == "ok"
            else Verdict(None, None, str(r.judge_status), "error")
        )
        for r in table.itertuples()
    }
    t0 = time.perf_counter()
    if server is not None:
        judge, generator, tok = _served_models(args, server)
        original = None  # the served judge re-judges the clean pairs
    else:
        judge = LocalJudge("smollm2", max_length=args.max_length, cache_dir=args.cache_dir)
        generator = LocalGenerator(
            pre=judge.pre,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.gen_batch_size,
            cache_dir=Path(args.cache_dir).parent / "gen_cache",
        )
        tok = judge.pre.tokenizer
    attacks = {
        "distraction": (Distraction(), args.distraction_per_type),
        "length": (LengthExpansion(), args.rewrite_per_type),
        "sentiment": (SentimentRestyle(args.emotion), args.sentiment_per_type or args.rewrite_per_type),
    }
    shown = os.path.relpath(args.input, ROOT) if Path(args.input).resolve().is_relative_to(ROOT) else args.input
    summary = {
        "input": shown,
        "judge": judge.name,
        "judge_max_length": getattr(judge, "max_length", "server context (8192)"),
        "generator": f"{generator.name} greedy, max_new_tokens={args.max_new_tokens}",
        "seed": args.seed,
        "original_verdicts": (
            "the served judge on the clean pairs"
            if server is not None
            else "the local judge's verdicts in the input file (both orders, averaged margin)"
        ),
        "attacks": {},
    }
    names = [a.strip() for a in args.attacks.split(",") if a.strip()]
    tables, earlier = [], _earlier_run(args) if args.extend else {}
    for name, entry in earlier.get("attacks", {}).items():
        if name not in names:  # not redone by this run: its rows and numbers stay in the outputs
            summary["attacks"][name] = entry
            tables.append(earlier["rows"][earlier["rows"].attack == name])
    for name in names:
        attack, per_type = attacks[name]
        rows = ordered[ordered._rank < per_type].drop(columns="_rank").reset_index(drop=True)
        before = _earlier_result(earlier, name, attack, judge.name, rows)
        todo = rows if before is None else rows[~rows.id.isin(set(before.table.id))].reset_index(drop=True)
        t = time.perf_counter()
        g0, j0 = _stats(generator), _stats(judge)
        new = (
            None
            if before is not None and todo.empty
            else run_attack(
                todo,
                judge,
                attack,
                generator if attack.needs_generator else None,
                original=None if original is None else {i: original[i] for i in todo.id},
                progress=True,
            )
        )
        res = before if new is None else new if before is None else combine_results(before, new)
        secs = time.perf_counter() - t + (earlier.get("seconds", {}).get(name, 0.0) if before is not None else 0.0)
        tab = res.table.assign(attack=name)
        attacked = tab[tab.status == "attacked"]
        src = rows.set_index("id")
        lengths = {}
        if len(attacked):
            orig_len = [
                len(tok.encode(src.loc[r.id, response_column(r.loser)], add_special_tokens=False))
                for r in attacked.itertuples()
            ]
            new_len = [len(tok.encode(r.attacked_text, add_special_tokens=False)) for r in attacked.itertuples()]
            lengths = {
                "loser_tokens_mean": float(np.mean(orig_len)),
                "attacked_tokens_mean": float(np.mean(new_len)),
                "attacked_longer_share": float(np.mean(np.array(new_len) > np.array(orig_len))),
                "hit_max_new_tokens_share": (
                    float(np.mean(np.array(new_len) >= args.max_new_tokens - 2)) if attack.needs_generator else None
                ),
            }
        c = res.counts
        summary["attacks"][name] = {
            "params": dict(res.params),
            "rows": len(rows),
            "per_type": per_type,
            "counts": dict(c),
            "flip_rate": res.flip_rate,
            "flip_rate_ci95": wilson(c["flipped"], c["judged"]),
            "to_loser_rate": res.to_loser_rate,
            "by_question_type": flip_rates_by(res).to_dict(orient="records"),
            "lengths": lengths,
            "seconds": secs,
            "rows_read_back": 0 if before is None else len(before.table),
            "judge_counters": {k: v - j0.get(k, 0) for k, v in _stats(judge).items()},
            "generator_counters": {k: v - g0.get(k, 0) for k, v in _stats(generator).items()},
        }
        tables.append(tab)
        save_comparisons(res.comparisons(rows), Path(f"{args.out}_{name}_comparisons.csv"))  # for puaudit evaluate
        if original is None:  # the judge re-judged the clean pairs: its verdicts are the audit's "before"
            save_comparisons(res.original_comparisons(rows), Path(f"{args.out}_{name}_original_comparisons.csv"))
        print(
            f"{name}: {c['judged']} re-judged, flip-under-attack {res.flip_rate:.3f}, loser now wins "
            f"{res.to_loser_rate:.3f}, skipped {c['skipped']} ({secs:.0f}s)",
            file=sys.stderr,
            flush=True,
        )
        write_csv(pd.concat(tables, ignore_index=True), Path(str(args.out) + "_rows.csv"))
        write_json(summary, Path(str(args.out) + ".json"))
    summary["seconds_total"] = time.perf_counter() - t0
    write_json(summary, Path(str(args.out) + ".json"))
    lines = [
        "# Attack-judge protocol on the "
        + ("served judge (llama.cpp's server)" if server is not None else "local judge")
        + " (PUAudit §5.2, Algorithm 2)",
        "",
        f"Judge: {judge.name} (seed Figure 10 prompt, verdict from next-token log-probs, both orders); "
        f"rewrites: {summary['generator']}. "
        f"Rows: `{shown}` (MT-Bench expert-labelled pairs), stratified by question type, seed {args.seed}. "
        "Attacks modify the judge's losing response only; flip = the re-judged verdict differs from the original.",
        "",
        "| attack | rows | re-judged | skipped | flip rate (95% CI) | loser now wins | loser tokens -> attacked "
        "| time (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in summary["attacks"].items():
        c, lo = s["counts"], s["lengths"]
        ci = s["flip_rate_ci95"]
        ln = f"{lo['loser_tokens_mean']:.0f} -> {lo['attacked_tokens_mean']:.0f}" if lo else "-"
        lines.append(
            f"| {name} | {s['rows']} | {c['judged']} | {sum(c['skipped'].values())} | {s['flip_rate']:.3f} "
            f"({ci[0]:.3f}-{ci[1]:.3f}) | {s['to_loser_rate']:.3f} | {ln} | {s['seconds']:.0f} |"
        )
    lines += ["", "Per question type (flip rate, n re-judged):", ""]
    types = sorted({r["question_type"] for s in summary["attacks"].values() for r in s["by_question_type"]})
    lines.append("| attack | " + " | ".join(types) + " |")
    lines.append("|---|" + "---|" * len(types))
    for name, s in summary["attacks"].items():
        by = {r["question_type"]: r for r in s["by_question_type"]}
        cells = [
            f"{by[t]['flip_rate']:.2f} ({by[t]['n_judged']})" if t in by and by[t]["n_judged"] else "-" for t in types
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    with atomic_path(Path(str(args.out) + ".md")) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
