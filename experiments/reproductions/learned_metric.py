"""Learning the audit's metric through the partial OT loss: does it help?

The audit scores a pool comparison by the mass it receives from the denoised positives P' (judge
verdicts the humans confirmed) in the frozen encoder's difference embeddings. Here a linear map W
(d x d, started at the identity) of the embeddings is learned with optax through the entropic
partial OT cost (``entropic_partial_cost``: gradients by the envelope theorem) so that confirmed
verdicts lie close to P and overturned ones far from it:

    L(W) = OT_m(P_1 W, C_2 W) - OT_m(P_1 W, R_2 W)   (+ the same with halves 1 and 2 swapped)

P_1: judge-oriented difference embeddings of confirmed verdicts in one half of the training rows,
C_2 / R_2: confirmed / overturned verdicts of the other half (halves and folds grouped by question,
so no question is on both sides), cosine cost, m = half of the smaller side's mass.

Protocol: the labelled comparisons are split into 2 folds grouped by question (MT-Bench:
question_id, LLMFAO: prompt). For each fold, W is learned on the other fold's labelled rows only;
the fold's labels are hidden; the default audit (knn scorer, two-sided calibrated rule) runs on
the frozen embeddings and on the embeddings mapped by W; on the hidden rows we measure the
error-detection AUC of the audit's P(judge wrong) against the hidden verdicts, and the audit's
gain (wrong verdicts it fixed minus right ones it broke, per hidden row).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m experiments.reproductions.learned_metric   # ~10 min on 2 cores

Writes results/learned_metric.{json,md}.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from experiments.common import RESULTS
from puaudit_jax.audit.embed import EmbedConfig, PairEmbeddings, table_embeddings
from puaudit_jax.datasets import load_bundled
from puaudit_jax.datasets.verdicts import MISSING, A, B
from puaudit_runtime.files import markdown_table, write_json, write_text

GROUP = {"mtbench": "question_id", "llmfao-gpt4": "prompt", "llmfao-gpt3": "prompt"}


def oriented(emb: PairEmbeddings, table: pd.DataFrame) -> np.ndarray:
    """(n, d) difference embeddings F(x, winner) - F(x, loser) by the judge's verdict (rows of table)."""
    index = pd.Series(np.arange(len(emb.ids)), index=emb.ids.astype(str))
    rows = index.loc[table["id"].astype(str)].to_numpy()
    sign = np.where(table["judge"].to_numpy(dtype=object) == A, 1.0, -1.0)[:, None]
    return sign * (emb.a[rows] - emb.b[rows]).astype(np.float64)


def fit_map(z: np.ndarray, correct: np.ndarray, groups: np.ndarray, *, steps: int, seed: int) -> np.ndarray:
    """W (d, d) learned by the module docstring's loss on oriented embeddings z (n, d)."""
    import jax
    import jax.numpy as jnp
    import optax

    from puaudit_jax.ot import PartialSinkhorn, entropic_partial_cost

    rng = np.random.default_rng(seed)
    names = np.unique(groups)
    half = np.isin(groups, rng.permutation(names)[: len(names) // 2])
    solver = PartialSinkhorn(epsilon=0.05, tol=1e-5, max_iter=2000)
    sides = []
    for src in (half, ~half):
        p, c, r = z[src & correct], z[~src & correct], z[~src & ~correct]
        sides.append(tuple(jnp.asarray(v, jnp.float32) for v in (p, c, r)))

    def ot(x, y):  # uniform weights (mass 1 on each side), half of it transported
        return entropic_partial_cost(x, y, 0.5, solver=solver)

    def loss(w):
        return sum(ot(p @ w, c @ w) - ot(p @ w, r @ w) for p, c, r in sides)

    w = jnp.eye(z.shape[1], dtype=jnp.float32)
    opt = optax.adam(1e-3)
    state = opt.init(w)
    step = jax.jit(jax.value_and_grad(loss))
    for _ in range(steps):
        _, grad = step(w)
        updates, state = opt.update(grad, state)
        w = optax.apply_updates(w, updates)
    return np.asarray(w, np.float64)


def audit_metrics(table: pd.DataFrame, emb: PairEmbeddings, hidden: np.ndarray) -> dict:
    """The default audit with the ``hidden`` rows' labels hidden: AUC of P(judge wrong) and gain on them."""
    from sklearn.metrics import roc_auc_score

    from puaudit_jax.audit import AuditConfig, run_audit

    truth = table["human"].to_numpy(dtype=object)
    items = run_audit(table.assign(human=np.where(hidden, MISSING, truth)), emb, AuditConfig()).items
    items = items.set_index(items["id"].astype(str)).loc[table["id"].astype(str)]
    scored = hidden & np.isfinite(items["p_wrong"].to_numpy(float))
    wrong = (items["judge"].to_numpy(dtype=object) != truth)[scored]
    flipped = items["flipped"].to_numpy(bool)[scored]
    gain = float((flipped & wrong).sum() - (flipped & ~wrong).sum()) / max(int(scored.sum()), 1)
    auc = roc_auc_score(wrong, items["p_wrong"].to_numpy(float)[scored]) if 0 < wrong.sum() < len(wrong) else np.nan
    return dict(auc=float(auc), gain=gain, flips=int(flipped.sum()), scored=int(scored.sum()))


def mapped(emb: PairEmbeddings, w: np.ndarray) -> PairEmbeddings:
    return PairEmbeddings(emb.ids, (emb.a @ w).astype(np.float32), (emb.b @ w).astype(np.float32),
                          source=f"{emb.source} x learned W")  # fmt: skip


def run(name: str, steps: int, seed: int) -> list[dict]:
    table = load_bundled(name)
    ab = np.isin(table["judge"].to_numpy(dtype=object), (A, B)) & np.isin(table["human"].to_numpy(dtype=object), (A, B))
    table = table[ab].reset_index(drop=True)  # the audit's labelled rows: A/B judge and human verdicts
    emb = table_embeddings(table.assign(human=MISSING), EmbedConfig(), progress=False)
    embedded = table["id"].astype(str).isin(emb.ids.astype(str)).to_numpy()
    print(f"{name}: {len(table)} A/B-labelled rows, {int((~embedded).sum())} not embeddable (e.g. identical "
          "responses) left out", flush=True)  # fmt: skip
    table = table[embedded].reset_index(drop=True)
    groups = table[GROUP[name]].astype(str).to_numpy()
    names = np.random.default_rng(seed).permutation(np.unique(groups))
    fold = np.isin(groups, names[: len(names) // 2]).astype(int)
    z, correct = oriented(emb, table), (table["judge"] == table["human"]).to_numpy()
    rows = []
    for k in (0, 1):
        start = time.time()
        train = fold != k
        w = fit_map(z[train], correct[train], groups[train], steps=steps, seed=seed + k)
        frozen, learned = audit_metrics(table, emb, fold == k), audit_metrics(table, mapped(emb, w), fold == k)
        metrics = {f"{kind}_{m}": v for kind, res in (("frozen", frozen), ("learned", learned)) for m, v in res.items()}
        rows.append(dict(data=name, fold=k, hidden=int((fold == k).sum()), **metrics, seconds=time.time() - start))
        print(rows[-1], flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="mtbench,llmfao-gpt4")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=5, help="fold splits (seeds 0..seeds-1)")
    parser.add_argument("--out", default=str(RESULTS / "learned_metric"))
    args = parser.parse_args(argv)
    names = args.data.split(",")
    rows = pd.DataFrame([r for name in names for seed in range(args.seeds) for r in run(name, args.steps, seed)])
    summary = summarise(rows)
    write_json({"steps": args.steps, "seeds": args.seeds, "summary": summary.to_dict(orient="records"),
                "rows": rows.to_dict(orient="records")}, f"{args.out}.json")  # fmt: skip
    write_text(markdown_table(summary) + "\n", f"{args.out}.md")
    print(markdown_table(summary))
    return 0


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per data set: mean AUC / gain frozen and learned over the folds, the paired AUC difference with
    its standard error over the folds, and the folds where the learned map helped."""
    out = []
    for name, g in rows.groupby("data", sort=False):
        diff = g["learned_auc"] - g["frozen_auc"]
        out.append(dict(data=name, folds=len(g), frozen_auc=g["frozen_auc"].mean(), learned_auc=g["learned_auc"].mean(),
                        auc_diff=diff.mean(), auc_diff_se=diff.std(ddof=1) / np.sqrt(len(g)),
                        folds_better=int((diff > 0).sum()), frozen_gain=g["frozen_gain"].mean(),
                        learned_gain=g["learned_gain"].mean(), frozen_flips=int(g["frozen_flips"].sum()),
                        learned_flips=int(g["learned_flips"].sum())))  # fmt: skip
    return pd.DataFrame(out)


if __name__ == "__main__":
    raise SystemExit(main())
