"""BoRP on USR Topical-Chat: cross-validated probes on SmolLM2-135M-Instruct hidden states (MiniLM as
a contrast), the paper's Table 4 ablations, polarization geometry, layer-wise uncertainty, throughput.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 taskset -c 1 python -m experiments.reproductions.borp_usr [--limit N] [--quick]

Data: 360 responses (60 dialogues x 6 systems) with human scores (mean of 3 annotators): overall 1-5,
naturalness / coherence / engagingness 1-3, understandability / groundedness 0-1.
Prefix = knowledge (first `--knowledge-words` words, as a system message) + the dialogue history
(middle-out compressed to `--history-words`) + the rated response as the last assistant turn.
Probes: the blind prompt and one rubric prompt per target (USR's own question for the target,
written as a rubric). Hidden states are cached under --cache (npz, keyed by every setting).
Evaluation: 5-fold cross-validation grouped by dialogue (a dialogue's 6 responses share the history),
repeated over 3 fold seeds; K-alpha (interval) and Pearson between human and predicted scores.
Writes results/borp_usr.json, borp_usr.csv, borp_usr_geometry.png, borp_usr_uncertainty.png.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from experiments.common import RESULTS, ROOT
from probes import borp
from puaudit_runtime.files import atomic_path, save_figure, write_text

TARGETS = {  # name: (scale, criterion, rubric) -- USR's annotation questions, as rubrics
    "overall": (
        (1, 5),
        "overall quality",
        {
            5: "an excellent response: natural, on topic, interesting and using the knowledge well",
            3: "an acceptable response with clear flaws",
            1: "a very poor response",
        },
    ),
    "naturalness": (
        (1, 3),
        "naturalness",
        {
            3: "sounds like something a person would naturally say",
            2: "somewhat unnatural",
            1: "not something a person would say",
        },
    ),
    "coherence": (
        (1, 3),
        "maintaining context",
        {
            3: "a valid continuation that follows from the conversation",
            2: "partly follows the conversation",
            1: "does not follow from the conversation",
        },
    ),
    "engagingness": (
        (1, 3),
        "engagingness",
        {3: "interesting, invites further conversation", 2: "somewhat interesting", 1: "dull"},
    ),
    "understandability": (
        (0, 1),
        "understandability",
        {1: "understandable in the context of the conversation", 0: "not understandable"},
    ),
    "groundedness": ((0, 1), "use of knowledge", {1: "uses the given fact", 0: "does not use the given fact"}),
}
LAYERS = [5, 10, 15, 20, 25, -1]  # SmolLM2 has 30 layers: -1 = 30 (final, normed)
MID = 2  # index of layer 15 in LAYERS (the intermediate head)


def build_dialogues(table: pd.DataFrame, knowledge_words: int, history_words: int):
    """Chat messages per response: knowledge (system), history turns (alternating, the response's
    speaker = assistant), the response. Returns (dialogues, n_turns_dropped per item)."""
    dialogues, dropped = [], []
    for _, row in table.iterrows():
        turns = [t.strip() for t in row["source"].split("\n") if t.strip()]
        roles = ["user" if (len(turns) - i) % 2 == 1 else "assistant" for i in range(len(turns))]
        msgs = [{"role": "system", "content": "Knowledge: " + " ".join(row["context"].split()[:knowledge_words])}]
        msgs += [{"role": r, "content": t} for r, t in zip(roles, turns)]
        msgs.append({"role": "assistant", "content": row["system_output"].strip()})
        msgs, k = borp.compress_middle_out(msgs, max_tokens=history_words + knowledge_words + 1)
        dialogues.append(msgs)
        dropped.append(k)
    return dialogues, np.asarray(dropped)


def probes_for_targets(with_rubric):
    out = [borp.blind_probe()]
    for name, (scale, criterion, rubric) in TARGETS.items():
        if name in with_rubric:
            out.append(borp.rubric_probe(criterion, rubric, scale=scale, name=name))
    return out


def extract_cached(pre, dialogues, probes, layers, cache: Path, tag: str):
    key = hashlib.sha256(
        json.dumps(
            [pre.fingerprint, dialogues, [p.__dict__ for p in probes], layers], sort_keys=True, default=str
        ).encode()
    ).hexdigest()[:20]
    path = cache / f"{tag}_{key}.npz"
    if path.exists():
        with np.load(path) as z:
            return z["V"], json.loads(str(z["stats"]))
    V, st = borp.contrastive_vectors(pre, dialogues, probes, layers=layers, progress=True)
    stats = dict(
        seconds=st.seconds,
        prefix_tokens=st.prefix_tokens,
        suffix_tokens=st.suffix_tokens,
        computed_tokens=st.computed_tokens,
        n_items=st.n_items,
    )
    with atomic_path(path) as tmp:
        np.savez(tmp, V=V, stats=json.dumps(stats))
    return V, stats


def cv_eval(make_head, V, y, groups, seeds, n_splits=5):
    """Mean (and sd over fold seeds) of the agreement metrics of out-of-fold predictions."""
    rows, preds = [], []
    for s in seeds:
        folds = borp.grouped_kfold(groups, n_splits, seed=s)
        pred = borp.cross_val_predict(make_head, V, y, folds)
        preds.append(pred)
        p1 = pred[:, 0] if pred.ndim == 2 else pred
        rows.append(borp.agreement(y, p1))
    df = pd.DataFrame(rows)
    out = {k: float(df[k].mean()) for k in ("k_alpha", "k_alpha_ordinal", "pearson", "rmse")}
    out.update(
        k_alpha_sd=float(df["k_alpha"].std(ddof=0)),
        pearson_sd=float(df["pearson"].std(ddof=0)),
        pearson_low=float(df["pearson_low"].mean()),
        pearson_high=float(df["pearson_high"].mean()),
    )
    return out, preds


def throughput(pre, dialogues, probes, layers, n_items: int):
    """Sessions/hour with and without suffix-only reuse on the same items (after a warm-up that
    compiles the shapes)."""
    out = {}
    sub = dialogues[:n_items]
    for reuse in (True, False):
        borp.contrastive_vectors(pre, sub[:2], probes, layers=layers, reuse_prefix=reuse)  # warm-up
        _, st = borp.contrastive_vectors(pre, sub, probes, layers=layers, reuse_prefix=reuse)
        out["reuse" if reuse else "recompute"] = dict(
            sessions_per_hour=st.sessions_per_hour,
            seconds=st.seconds,
            computed_tokens=st.computed_tokens,
            n_items=st.n_items,
        )
    out["speedup"] = out["reuse"]["sessions_per_hour"] / out["recompute"]["sessions_per_hour"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None, help="first N responses only (smoke test)")
    ap.add_argument("--knowledge-words", type=int, default=50)
    ap.add_argument("--history-words", type=int, default=120)
    ap.add_argument("--components", type=int, default=8)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--throughput-items", type=int, default=12)
    ap.add_argument(
        "--rubric-targets",
        default="overall",
        help="targets that get their own rubric probe (comma list or 'all'); the others use the blind "
        "probe (each rubric probe adds 2 suffixes per session: CPU time)",
    )
    ap.add_argument("--cache", default="/tmp/borp/cache")
    ap.add_argument("--out", default=str(RESULTS / "borp_usr.json"))
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from probes.extract import encode
    from probes.models import load_pretrained
    from puaudit_jax.datasets import load_usr_topicalchat

    t_start = time.time()
    seeds = [int(s) for s in args.seeds.split(",")]
    table = load_usr_topicalchat()
    if args.limit:
        table = table.iloc[: args.limit].reset_index(drop=True)
    groups = table["dialogue"].to_numpy()
    dialogues, dropped = build_dialogues(table, args.knowledge_words, args.history_words)
    with_rubric = list(TARGETS) if args.rubric_targets == "all" else args.rubric_targets.split(",")
    probes = probes_for_targets(with_rubric)
    names = [p.name for p in probes]
    pre = load_pretrained("smollm2")
    cache = Path(args.cache)
    V, ext_stats = extract_cached(pre, dialogues, probes, LAYERS, cache, "usr_smollm2")  # (n, T, L, d)
    print(
        f"SmolLM2 contrastive states {V.shape}; extraction {ext_stats['seconds']:.0f}s "
        f"({3600 * ext_stats['n_items'] / ext_stats['seconds']:.0f} sessions/h with reuse, {len(probes)} probes)",
        flush=True,
    )

    # MiniLM contrast: mean-pooled embedding of the last turns + response (no contrastive prompt)
    minilm = load_pretrained("minilm")
    texts = [" ".join(m["content"] for m in d[-3:]) for d in dialogues]
    E, _ = encode(minilm, texts, cache_dir=str(cache / "minilm"))

    def head(target, **kw):
        scale = TARGETS[target][0]
        cfg = borp.HeadConfig(**{**dict(n_components=args.components, scale=tuple(map(float, scale))), **kw})
        return lambda: borp.BorpHead(cfg)

    rows = []

    def record(setting, target, res, **extra):  # noqa: E306
        rows.append(dict(setting=setting, target=target, **res, **extra))
        print(
            f"  {setting:<42} {target:<17} K-alpha {res['k_alpha']:.3f} (+-{res['k_alpha_sd']:.3f})  "
            f"Pearson {res['pearson']:.3f} [{res['pearson_low']:.2f}, {res['pearson_high']:.2f}]",
            flush=True,
        )

    final = V[:, :, -1]  # (n, T, d) final layer
    print("Per target (BoRP full: final layer, PLS, [v, |v|, D], geometric resampling; rubric probe where extracted)")
    for target in TARGETS:
        y = table[target].to_numpy(float)
        if target in names:
            record(
                "BoRP full (SmolLM2, rubric)",
                target,
                cv_eval(head(target), final[:, names.index(target)], y, groups, seeds)[0],
            )
        record("BoRP blind prompt (SmolLM2)", target, cv_eval(head(target), final[:, 0], y, groups, seeds)[0])
        record(
            "MiniLM embedding + PLS (no prompt)",
            target,
            cv_eval(head(target, geometric=False, resample=None), E, y, groups, seeds)[0],
        )

    print("Ablations on overall (the paper's Table 4 shape)")
    y = table["overall"].to_numpy(float)
    Vo = final[:, names.index("overall")]
    ablations = {
        "BoRP (Full)": dict(),
        "w/o Geometric Resampling": dict(resample=None),
        "w/o PLS (use PCA)": dict(reducer="pca"),
        "w/o [||v||, D] features": dict(geometric=False),
        "label-density resampling": dict(resample="label"),
        "geometric resampling, 5 bagged resamples": dict(n_resamples=5),
    }
    for name, kw in ablations.items():
        record(name, "overall", cv_eval(head("overall", **kw), Vo, y, groups, seeds)[0])
    record("blind prompt instead of rubric", "overall", cv_eval(head("overall"), final[:, 0], y, groups, seeds)[0])
    for k in (2, 4, 16):
        record(f"n_components={k}", "overall", cv_eval(head("overall", n_components=k), Vo, y, groups, seeds)[0])
    for li, layer in enumerate(LAYERS):
        record(
            f"layer {layer if layer > 0 else 30}",
            "overall",
            cv_eval(head("overall"), V[:, names.index("overall"), li], y, groups, seeds)[0],
        )

    # layer-wise uncertainty: heads on layer 15 and the final layer
    cfg = borp.HeadConfig(n_components=args.components, scale=(1.0, 5.0))
    lw, preds = cv_eval(
        lambda: borp.LayerwiseHeads(cfg, mid=MID, final=-1), V[:, names.index("overall")], y, groups, seeds
    )
    P = preds[0]
    err = np.abs(P[:, 0] - y)
    U = P[:, 2]
    q = np.quantile(U, [0.2, 0.4, 0.6, 0.8])
    bins = np.digitize(U, q)
    unc = dict(
        spearman_u_abs_error=float(spearmanr(U, err).statistic),
        rmse_by_u_quintile=[float(np.sqrt(np.mean((P[bins == b, 0] - y[bins == b]) ** 2))) for b in range(5)],
        u_quintile_edges=q.tolist(),
        mid_layer=LAYERS[MID],
        final_layer=30,
    )
    print(
        f"Uncertainty |y_30 - y_15|: Spearman with |error| {unc['spearman_u_abs_error']:.3f}; RMSE by U quintile "
        + " ".join(f"{r:.3f}" for r in unc["rmse_by_u_quintile"])
    )

    # polarization geometry on the blind probe (unsupervised, all items)
    Vb = final[:, 0].astype(np.float64)
    norm, D = borp.intensity(Vb), borp.outlierness(Vb, Vb.mean(0))
    pi = borp.polarization_index(Vb)
    ext = (y <= np.quantile(y, 0.1)) | (y >= np.quantile(y, 0.9))
    tails = (pi <= np.quantile(pi, 0.1)) | (pi >= np.quantile(pi, 0.9))
    top, bottom = borp.mine_polarized(pi, 20)
    score_bins = np.clip(np.round(y), 1, 5)
    geo = dict(
        spearman_norm_overall=float(spearmanr(norm, y).statistic),
        spearman_pi_overall=float(spearmanr(pi, y).statistic),
        mean_D_by_rounded_score={int(s): float(D[score_bins == s].mean()) for s in np.unique(score_bins)},
        extreme_share_base=float(ext.mean()),
        extreme_share_in_pi_tails=float(ext[tails].mean()),
        mined_top20_mean_overall=float(y[top].mean()),
        mined_bottom20_mean_overall=float(y[bottom].mean()),
        mean_overall=float(y.mean()),
    )
    print("Geometry (blind probe, final layer): " + json.dumps(geo))

    # throughput with / without suffix-only reuse
    tp = throughput(pre, dialogues, probes, LAYERS, min(args.throughput_items, len(dialogues)))
    print(
        f"Throughput ({tp['reuse']['n_items']} sessions, {len(probes)} probes = {2 * len(probes)} suffixes each, "
        f"CPU 1 core): reuse "
        f"{tp['reuse']['sessions_per_hour']:.0f}/h, recompute {tp['recompute']['sessions_per_hour']:.0f}/h, "
        f"x{tp['speedup']:.2f}"
    )

    # seed numbers beside ours
    ref = pd.read_csv(ROOT / "puaudit_jax" / "reference" / "borp_tables.csv")
    ours = pd.DataFrame(rows)
    print("\nSeed Table 4a (industrial set, Qwen3-14B) vs ours (USR overall, SmolLM2-135M):")
    pairs = [
        ("BoRP (Full)", "BoRP (Full)"),
        ("w/o Geometric Resampling", "w/o Geometric Resampling"),
        ("w/o PLS (use PCA)", "w/o PLS (use PCA)"),
    ]
    for seed_name, our_name in pairs:
        r = ref[(ref.table == "4a_ablation_industrial") & (ref.setting == seed_name)].iloc[0]
        o = ours[(ours.setting == our_name) & (ours.target == "overall")].iloc[0]
        print(
            f"  {seed_name:<28} seed K-alpha {r.k_alpha:.3f} Pearson {r.pearson:.3f} | ours K-alpha "
            f"{o.k_alpha:.3f} Pearson {o.pearson:.3f}"
        )
    eff = pd.read_csv(ROOT / "puaudit_jax" / "reference" / "borp_table3_efficiency.csv")
    seed_tp = float(eff[eff.method == "BoRP (8B)"].throughput_sessions_per_hour_a100.iloc[0])
    print(
        f"  throughput: seed BoRP (8B, A100, SGLang) {seed_tp:.0f} sessions/h | ours SmolLM2-135M, 1 CPU core "
        f"{tp['reuse']['sessions_per_hour']:.0f} sessions/h (not comparable hardware)"
    )

    # figures
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    ax[0].scatter(y, norm, s=8, alpha=0.6)
    ax[0].set(xlabel="human overall", ylabel="||v||_2", title=f"(a) intensity (rho={geo['spearman_norm_overall']:.2f})")
    ax[1].scatter(y, D, s=8, alpha=0.6)
    ax[1].set(xlabel="human overall", ylabel="||v - c||_1", title="(b) outlierness")
    ax[2].scatter(y, pi, s=8, alpha=0.6)
    for v in np.quantile(pi, [0.1, 0.9]):
        ax[2].axhline(v, color="gray", ls="--", lw=0.8)
    ax[2].set(
        xlabel="human overall", ylabel="PI", title=f"(c) polarization index (rho={geo['spearman_pi_overall']:.2f})"
    )
    fig.suptitle("USR Topical-Chat, SmolLM2-135M blind probe, final layer")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out.with_name("borp_usr_geometry.png"), dpi=110, bbox_inches="tight")
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    lay = ours[ours.setting.str.startswith("layer ")]
    ax[0].plot([int(s.split()[1]) for s in lay.setting], lay.pearson, "o-", label="Pearson")
    ax[0].plot([int(s.split()[1]) for s in lay.setting], lay.k_alpha, "s-", label="K-alpha")
    ax[0].set(xlabel="layer", title="(a) overall, by layer")
    ax[0].legend()
    ax[1].bar(range(5), unc["rmse_by_u_quintile"])
    ax[1].set(
        xlabel="quintile of U = |y_30 - y_15|",
        ylabel="RMSE",
        title=f"(b) error by uncertainty (Spearman {unc['spearman_u_abs_error']:.2f})",
    )
    save_figure(fig, out.with_name("borp_usr_uncertainty.png"), dpi=110, bbox_inches="tight")

    meta = dict(
        seeds=seeds,
        n_splits=5,
        components=args.components,
        layers=LAYERS,
        mid_layer=15,
        knowledge_words=args.knowledge_words,
        history_words=args.history_words,
        turns_dropped_by_middle_out=int(dropped.sum()),
        items_compressed=int((dropped > 0).sum()),
        n_items=len(table),
        model="SmolLM2-135M-Instruct (bundled GGUF Q4_1, dequantised)",
        contrast="all-MiniLM-L6-v2 mean pooling of the last 2 history turns + response",
        probes={
            p.name: dict(instruction=p.instruction, positive=p.positive, negative=p.negative, scale=p.scale)
            for p in probes
        },
        extraction=ext_stats,
        wall_seconds=time.time() - t_start,
    )
    write_text(
        json.dumps(dict(meta=meta, rows=rows, layerwise=dict(**lw, **unc), geometry=geo, throughput=tp), indent=2), out
    )
    write_text(ours.to_csv(index=False), out.with_suffix(".csv"))
    print(f"wrote {out}, {out.with_suffix('.csv')}, borp_usr_geometry.png, borp_usr_uncertainty.png")


if __name__ == "__main__":
    main()
