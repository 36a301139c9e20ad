"""The README's quantification numbers: each bundled set through ``puaudit_jax.quantify.quantify``.

    OMP_NUM_THREADS=1 python -m experiments.reproductions.quantify_bundled

Prints, per set: labelled / unlabelled items, m (human only), the share of A wins by the three
estimators with PPI++'s lam, models and how many have no human label, the median ratio of PPI++ to
human-only interval widths over the win rates, the random-sample check's p-value; then, for
LLMFAO GPT-4, the widening of the intervals when they are clustered by prompt (side by side);
then an MT-Bench leaderboard from 20 % of the labels (seed 0) by every estimator, the audit-powered
one included (MiniLM embeddings), beside the all-label leaderboard.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from puaudit_jax.datasets import load_bundled
from puaudit_jax.datasets.verdicts import MISSING
from puaudit_jax.quantify import AUDIT_PPI, HUMAN_ONLY, JUDGE_ONLY, PPI, quantify
from puaudit_runtime.files import markdown_table

SETS = (("mtbench", None), ("llmfao-gpt4", True), ("llmfao-gpt3", True))


def width(frame):
    return frame["upper"] - frame["lower"]


def summary(name: str, include) -> str:
    result = quantify(load_bundled(name, include_unlabelled=include))
    f = result.to_frame()
    m = f[f.target == "agreement m"].iloc[0]
    a = f[f.target == "share of A wins"].set_index("estimator")
    wins = f[f.target.str.startswith("win rate")]
    ok = wins[wins.note == ""]
    pair = ok[ok.estimator == PPI].merge(ok[ok.estimator == HUMAN_ONLY], on="target", suffixes=("_p", "_h"))
    ratio = ((pair.upper_p - pair.lower_p) / (pair.upper_h - pair.lower_h)).median()
    no_labels = int(((wins.estimator == HUMAN_ONLY) & (wins.note != "")).sum())
    return (f"{name}: {int(m.n_labelled)} / {int(m.n_unlabelled)}; m {m.estimate:.3f} [{m.lower:.3f}, {m.upper:.3f}]; "
            f"A share {a.loc[JUDGE_ONLY, 'estimate']:.3f} / {a.loc[HUMAN_ONLY, 'estimate']:.3f} / "
            f"{a.loc[PPI, 'estimate']:.3f} [{a.loc[PPI, 'lower']:.3f}, {a.loc[PPI, 'upper']:.3f}], lam "
            f"{a.loc[PPI, 'lam']:.2f}; models {wins.target.nunique()} ({no_labels} without labels); median width "
            f"PPI++/human {ratio:.3f}; random-sample p "
            f"{[c.p_value for c in result.checks]}")  # fmt: skip


def clustered_widening(name: str = "llmfao-gpt4") -> str:
    table = load_bundled(name, include_unlabelled=True)
    plain, by_prompt = quantify(table).to_frame(), quantify(table, cluster_by="prompt").to_frame()
    ratio = width(by_prompt) / width(plain)
    parts = []
    for est in (HUMAN_ONLY, PPI):
        keep = (plain.estimator == est) & (plain.note == "")
        a_share = ratio[keep & (plain.target == "share of A wins")].iloc[0]
        wins = ratio[keep & plain.target.str.startswith("win rate")].median()
        parts.append(f"{est}: A share x{a_share:.2f}, win rates median x{wins:.2f}")
    return f"{name} clustered by prompt vs not: " + "; ".join(parts)


def leaderboard_example(fraction: float = 0.2, seed: int = 0) -> str:
    """MT-Bench Elo scores [90 % intervals] from ``fraction`` of the labels by each estimator, and
    from all labels (the truth the coverage study uses)."""
    from puaudit_jax.audit.embed import EmbedConfig, table_embeddings
    from puaudit_jax.audit.predictions import audit_for_quantify

    full = load_bundled("mtbench")
    hide = np.random.default_rng(seed).random(len(full)) > fraction
    table = full.assign(human=np.where(hide, MISSING, full["human"].to_numpy(dtype=object)))
    features = table_embeddings(table.assign(human=MISSING), EmbedConfig(), progress=False)
    part = quantify(table, audit_items=audit_for_quantify(table, features)).to_frame()
    truth = quantify(full).to_frame()
    cells = {}
    for frame, names in ((part, (JUDGE_ONLY, HUMAN_ONLY, PPI, AUDIT_PPI)), (truth, (HUMAN_ONLY,))):
        for est in names:
            rows = frame[frame.target.str.startswith("elo: ") & (frame.estimator == est)].set_index("target")
            label = est if frame is part else "all labels (human only)"
            cells[label] = rows.apply(lambda r: f"{r.estimate:.0f} [{r.lower:.0f}, {r.upper:.0f}]", axis=1)
    out = pd.DataFrame(cells)
    out.index = out.index.str.removeprefix("elo: ")
    return markdown_table(out.reset_index(names="model"))


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    for name, include in SETS:
        print(summary(name, include))
    print(clustered_widening())
    print(leaderboard_example())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
