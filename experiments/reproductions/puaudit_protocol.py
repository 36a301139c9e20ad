"""PUAudit's evaluation protocol on the bundled real sets (PUAudit §5-6, Tables 1 and 5-7).

    python -m experiments.reproductions.puaudit_protocol [--sets mtbench,llmfao-gpt4,llmfao-gpt3] [--seeds 10]
        [--scorers all] [--rules paper,budget,none] [--embeddings-dir DIR] [--cache-dir DIR] [--sweeps]

For every set: MiniLM embeddings (the Flax port in probes; read from ``--embeddings-dir/emb_<set>.npz``
when present, else encoded and cached), then :func:`puaudit_jax.evaluate.evaluate` with every
scorer and rule on the same splits. Writes ``results/puaudit_protocol.csv`` (one row per set,
scorer, rule and question type), ``results/puaudit_protocol.json`` (the same with settings and
timings), ``results/puaudit_protocol_radar.png`` (seed Figure 3: entropic POT with the paper's rule,
one radar per set) and, with ``--sweeps``, ``results/puaudit_sweeps.csv`` (p_ratio and m on
MT-Bench, the paper's Tables 6 and 7, beside the published numbers). Prints paper-vs-ours tables.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from experiments.common import RESULTS
from puaudit_jax.audit.embed import embed_comparisons, load_embeddings, probes_encoder, save_embeddings
from puaudit_jax.audit.scorers import SCORERS
from puaudit_jax.datasets import load_bundled, reference_path
from puaudit_jax.evaluate import Protocol, evaluate, sweep
from puaudit_jax.evaluate.plots import figure3
from puaudit_runtime.files import write_csv, write_json


def embeddings_for(name, table, emb_dir, cache_dir):
    path = Path(emb_dir) / f"emb_{name}.npz" if emb_dir else None
    if path is not None and path.exists():
        return load_embeddings(path), 0.0
    t = time.perf_counter()
    # the settings results/puaudit_protocol.* were recorded with: MiniLM's whole window, long inputs chunked
    encoder = probes_encoder("minilm", cache_dir=cache_dir, max_length=512, long_inputs="chunk")
    emb = embed_comparisons(table, encoder, source="probes:minilm")
    if path is not None:
        save_embeddings(emb, path)
    return emb, time.perf_counter() - t


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="mtbench,llmfao-gpt4,llmfao-gpt3")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--p-ratio", type=float, default=0.2)
    p.add_argument("--scorers", default="all")
    p.add_argument("--rules", default="seed,budget,none")
    p.add_argument("--embeddings-dir", default=None)
    p.add_argument("--cache-dir", default="default")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--sweeps", action="store_true")
    args = p.parse_args(argv)
    scorers = list(SCORERS) if args.scorers == "all" else args.scorers.split(",")
    rules = args.rules.split(",")
    out = Path(args.out)
    frames, meta, panels = [], {}, {}
    for name in args.sets.split(","):
        table = load_bundled(name)
        emb, t_embed = embeddings_for(name, table, args.embeddings_dir, args.cache_dir)
        res = evaluate(
            table, emb, scorers=scorers, rules=rules, protocol=Protocol(seeds=args.seeds, p_ratio=args.p_ratio)
        )
        frames.append(res.summary.assign(data=name))
        meta[name] = {**res.meta, "embed_time_s": t_embed}
        panels[name] = res.summary[(res.summary.scorer == scorers[0]) & (res.summary.rule == rules[0])]
        part = res.summary[res.summary.question_type == "all"]
        print(f"\n== {name}: overall Cons on the hidden-label pool, mean (std) over {args.seeds} seeds")
        print(
            part[
                [
                    "scorer",
                    "rule",
                    "n",
                    "cons_orig_mean",
                    "cons_orig_std",
                    "cons_adj_mean",
                    "cons_adj_std",
                    "flip_rate",
                    "m_mean",
                    "time_s",
                    "peak_rss_mb",
                ]
            ].to_string(index=False, float_format="%.4f")
        )
    summary = pd.concat(frames, ignore_index=True)
    write_csv(summary, out / "puaudit_protocol.csv")
    write_json(
        {"settings": vars(args), "runs": meta, "results": summary.to_dict(orient="records")},
        out / "puaudit_protocol.json",
    )
    figure3(
        panels,
        out / "puaudit_protocol_radar.png",
        title=f"Cons_orig vs Cons_adj per question type ({scorers[0]}, rule {rules[0]}, MiniLM)",
    )
    if args.sweeps:
        table = load_bundled("mtbench")
        emb, _ = embeddings_for("mtbench", table, args.embeddings_dir, args.cache_dir)
        rows = []
        for param, values, ref in (
            ("p_ratio", [0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.99], "puaudit_table6_p_ratio.csv"),
            ("m", [0.01, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99], "puaudit_table7_mass_m.csv"),
        ):
            protocol = Protocol(seeds=args.seeds)
            res = sweep(table, emb, param=param, values=values, scorers=["pot"], rules=["seed"], protocol=protocol)
            ours = res.summary[res.summary.question_type == "all"].set_index(param)
            paper = pd.read_csv(reference_path(ref)).set_index(param)
            both = pd.DataFrame(
                {
                    "ours_orig": ours.cons_orig_mean,
                    "ours_adj": ours.cons_adj_mean,
                    "ours_flip": ours.flip_rate,
                    "paper_orig": paper["orig"],
                    "paper_adj": paper["adj"],
                    "paper_flip": paper["flip_rate"],
                }
            )
            print(f"\n== MT-Bench sweep over {param} (ours: all categories; paper: its QTA)")
            print(both.to_string(float_format="%.3f"))
            rows.append(both.reset_index().rename(columns={param: "value"}).assign(param=param))
        write_csv(pd.concat(rows, ignore_index=True), out / "puaudit_sweeps.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
