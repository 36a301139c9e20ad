"""Which verdicts can I use: every way ``--guarantee`` may certify, and two plain baselines, on the same maskings.

    python -m experiments.reproductions.guarantee [--sets mtbench,llmfao-gpt4,llmfao-gpt3,mtbench-local]
        [--p-ratios 0.1,0.2,0.5] [--maskings 200] [--agreements 0.7,0.8,0.85,0.9] [--delta 0.1]
        [--held-out DIR] [--held-out-sets tore_chatarena,llmbar_human,pandalm,autoj] [--held-out-p-ratio 0.3]
        [--embeddings-dir DIR] [--from-runs A.csv.gz,B.csv.gz] [--out results]

Each set's human-labelled rows are the population. A *masking* keeps a random share of each question
type's labelled rows (the guarantee assumes a random sample) and hides the others, which become pool rows
whose hidden labels judge the outcome. The audit runs once per masking with a guarantee (its default
settings: half of the kept labels hidden from it to calibrate), and every method below certifies from the
same run, through the library's own functions (:mod:`puaudit_jax.audit.guarantee`):

- ``auto`` / ``label-free`` / ``fitted`` / ``fitted-ppi`` / ``auto-ppi``: ``AuditConfig.certify``'s
  settings (:data:`puaudit_jax.audit.names.CERTIFY`: each candidate's share of D and where its level goes);
- ``auto, label-free 2/3``: ``auto`` with 2/3 of D on its label-free candidate and 1/3 on its fitted one;
- ``previous default``: the fitted score with five Bonferroni sequences from the strictest threshold and
  25 / 50 / 75 / 100 % of the pool (what ``--guarantee`` did before);
- ``one sequence``: the fitted score, all of D on the strictest testable threshold (Jung et al.'s Alg. 1);
- ``whole pool``: the judge's verdicts on the whole pool, every label testing it at D;
- ``plug-in``: the fitted score's loosest threshold whose calibration agreement reaches A (no correction);
- ``baseline: logistic``: a 3-feature logistic P(judge wrong) (order agreement, mean other-judge agreement,
  the signed length difference) fitted on half of the kept labels, one fixed sequence on the other half;
- ``baseline: label-free``: the order and other-judge agreements summed, no fit, every kept label testing
  it in one fixed sequence from the strictest level.

A masking *violates* when the certified pool rows agree with their hidden labels less than A of the time
(target: at most D of the maskings, within Monte-Carlo error). Bundled sets choose the default; the
held-out sets (``--held-out DIR`` of comparison tables; see results/guarantee.md for their provenance)
never tune anything and are reported apart. Writes ``results/guarantee.{md,csv,json,png}`` (the figure:
coverage against A per set at 20 % labels, the held-out sets at theirs) and the
per-masking outcomes ``results/guarantee_runs.csv.gz``; ``--from-runs`` summarises such files (runs split
over several processes, e.g. one ``--sets`` each with its own ``--out``) without running anything.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.common import RESULTS
from experiments.reproductions.judge_evidence import local_judge_table
from experiments.reproductions.puaudit_protocol import embeddings_for
from puaudit_jax.audit import AuditConfig, run_audit
from puaudit_jax.audit import guarantee as g
from puaudit_jax.audit.evidence import label_free_score, signed_agreement
from puaudit_jax.audit.logistic import penalised_logistic
from puaudit_jax.audit.names import CERTIFY, ONE_SEQUENCE
from puaudit_jax.datasets import item_status, load_bundled, load_comparisons
from puaudit_jax.datasets.exclusions import LABELLED
from puaudit_jax.datasets.style import style_differences
from puaudit_jax.datasets.verdicts import MISSING, A, B, question_types
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

SETS = ("mtbench", "llmfao-gpt4", "llmfao-gpt3", "mtbench-local")
HELD_OUT = ("tore_chatarena", "llmbar_human", "pandalm", "autoj")
ORDER = ("auto", "label-free", "fitted", "fitted-ppi", "auto-ppi", "auto, label-free 2/3", "previous default",
         "one sequence", "whole pool", "plug-in", "baseline: logistic", "baseline: label-free")  # fmt: skip
PREVIOUS_STARTS = ("strictest", 0.25, 0.5, 0.75, 1.0)


def load_set(name: str, held_out: str | None) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """(table, other-judge columns) of a set: LLMFAO's two judges each other's second judge."""
    if name in ("llmfao-gpt4", "llmfao-gpt3"):
        other = "llmfao-gpt3" if name == "llmfao-gpt4" else "llmfao-gpt4"
        table, second = load_bundled(name), load_bundled(other)
        column = other.split("-")[1]
        return table.assign(**{column: second["judge"].to_numpy()}).reset_index(drop=True), (column,)
    if name == "mtbench-local":
        return local_judge_table().reset_index(drop=True), ()
    if name in SETS:
        return load_bundled(name).reset_index(drop=True), ()
    table = load_comparisons(Path(held_out) / f"{name}.csv").reset_index(drop=True)
    return table, tuple(c for c in table.columns if c.startswith("other_") and not c.endswith("_swapped"))


def masking(types: np.ndarray, labelled: np.ndarray, share: float, rng) -> np.ndarray:
    """(n,) bool: a random ``share`` of each question type's labelled rows (at least one per type)."""
    keep = np.zeros(len(types), bool)
    for t in np.unique(types[labelled]):
        rows = np.flatnonzero(labelled & (types == t))
        keep[rng.choice(rows, max(1, round(share * len(rows))), replace=False)] = True
    return keep


def previous_default(candidate, pool, truth, agreement, delta) -> float | None:
    """The threshold of the previous default: five fixed sequences at D / 5 each (Bonferroni), the loosest kept."""
    level = delta / len(PREVIOUS_STARTS)
    kept = [g.try_candidate(replace(candidate, weights=((start, 1.0),)), candidate.calibration, pool, truth,
                            agreement, level).threshold for start in PREVIOUS_STARTS]  # fmt: skip
    kept = [t for t in kept if t is not None]
    return min(kept) if kept else None


def baseline_logistic(table, others, judge, keep, rng) -> g.Candidate:
    """The 3-feature logistic P(judge wrong), fitted on a random half of the kept labels, the other half testing it."""
    order = signed_agreement(judge, table["judge_swapped"].to_numpy(dtype=object)) \
        if "judge_swapped" in table.columns else np.zeros(len(table))  # fmt: skip
    second = label_free_score(table, others, ("others",)) if others else np.zeros(len(table))
    sign = np.where(judge == A, 1.0, np.where(judge == B, -1.0, 0.0))
    x = np.column_stack([order, np.where(np.isfinite(second), second, 0.0), sign * style_differences(table)["tokens"]])
    rows = rng.permutation(np.flatnonzero(keep))
    fit, cal = rows[: len(rows) // 2], rows[len(rows) // 2 :]
    design = np.column_stack([np.ones(len(x)), x])  # an intercept, a light ridge on the slopes (separable data)
    right = (judge[fit] == table["human"].to_numpy(dtype=object)[fit]).astype(float)
    w = penalised_logistic(design[fit], right, np.array([0.0, 1.0, 1.0, 1.0]))
    p_wrong = 1.0 / (1.0 + np.exp(design @ w))
    p_wrong = np.where(np.isin(judge, (A, B)), p_wrong, np.nan)
    return replace(g.fitted(p_wrong, judge, cal, np.flatnonzero(~keep)), weights=ONE_SEQUENCE)


def outcome(method: str, threshold, candidate, pool: np.ndarray, truth: np.ndarray, agreement: float) -> dict:
    """Coverage of the pool rows with a hidden label, and their agreement with it."""
    if threshold is None:
        return dict(method=method, A=agreement, coverage=0.0, certified=False, agreement=np.nan, violated=False)
    kept = candidate.known[pool] & (candidate.q[pool] >= threshold)
    agree = float(np.mean(candidate.final[pool][kept] == truth[pool][kept])) if kept.any() else np.nan
    return dict(method=method, A=agreement, coverage=float(kept.mean()), certified=bool(kept.any()), agreement=agree,
                violated=bool(kept.any() and agree < agreement))  # fmt: skip


def methods(table, others, items, keep, truth, agreement, delta, rng) -> list[dict]:
    """Every method's outcome on one masking at one A (module docstring)."""
    judge = table["judge"].to_numpy(dtype=object)
    role = items["role"].to_numpy(dtype=object)
    hidden, pool = np.flatnonzero(role == "calibration"), np.flatnonzero(role == "U")
    roles = g.RowRoles(hidden, np.flatnonzero(keep), pool, np.zeros(0, int), np.zeros(0, int))
    measured = pool[truth[pool] != MISSING]
    p, score = items["p_wrong"].to_numpy(float), label_free_score(table, others)
    flat = np.where(np.isin(judge, (A, B)), 0.0, -np.inf)
    b2 = label_free_score(table, others, ("swapped", "others"))
    one = ONE_SEQUENCE
    settings = {name: g.judge_candidates(spec, score, p, judge, roles) for name, spec in CERTIFY.items()}
    settings.update({
        "auto, label-free 2/3": g.judge_candidates((("label-free", 2 / 3, one), ("fitted", 1 / 3, one)), score, p,
                                                   judge, roles),
        "one sequence": g.judge_candidates((("fitted", 1.0, one),), score, p, judge, roles),
        "whole pool": g.judge_candidates((("label-free", 1.0, one),), flat, p, judge, roles),
        "baseline: label-free": g.judge_candidates((("label-free", 1.0, one),), b2, p, judge, roles),
    })  # fmt: skip
    out = []
    for name, candidates in settings.items():
        choice = g.choose(list(candidates), pool, truth, agreement, delta)
        chosen = next((c for c in candidates if c.name == choice.kept), candidates[0])
        out.append(outcome(name, None if choice.selection is None else choice.selection.threshold, chosen, measured,
                           truth, agreement))  # fmt: skip
    fit = settings["fitted"][0]
    out.append(outcome("previous default", previous_default(fit, pool, truth, agreement, delta), fit, measured, truth,
                       agreement))  # fmt: skip
    correct = fit.final[hidden] == truth[hidden]
    out.append(outcome("plug-in", g.plug_in(fit.q[hidden], correct, fit.q[pool], agreement), fit, measured, truth,
                       agreement))  # fmt: skip
    logistic = baseline_logistic(table, others, judge, keep, rng)
    choice = g.choose([logistic], pool, truth, agreement, delta)
    out.append(outcome("baseline: logistic", None if choice.selection is None else choice.selection.threshold,
                       logistic, measured, truth, agreement))  # fmt: skip
    return out


def run_task(task: dict) -> pd.DataFrame:
    """Every masking of one (set, share): one row per (masking, A, method)."""
    table, others = load_set(task["set"], task["held_out"])
    emb, _ = embeddings_for(task["set"], table, task["embeddings_dir"], "default")
    status = item_status(table)["status"].to_numpy()
    labelled = status == LABELLED
    truth = np.where(labelled, table["human"].to_numpy(dtype=object), MISSING)
    types = question_types(table["question_type"]).astype(str)
    rng, t0, frames = np.random.default_rng([task["seed"], int(task["share"] * 1000)]), time.perf_counter(), []
    for m in range(task["maskings"]):
        keep = masking(types, labelled, task["share"], rng)
        human = table["human"].to_numpy(dtype=object)
        shown = table.assign(human=np.where((truth != MISSING) & ~keep, MISSING, human))
        config = AuditConfig(guarantee=min(task["agreements"]), delta=task["delta"], other_judges=others, seed=m)
        try:
            items = run_audit(shown, emb, config).items
        except ValueError as err:  # too few labels for the guarantee at this share
            frames.append(pd.DataFrame([dict(masking=m, note=str(err)[:100])]))
            continue
        rows = [r for a in task["agreements"]
                for r in methods(shown, others, items, keep & labelled, truth, a, task["delta"], rng)]  # fmt: skip
        frames.append(pd.DataFrame(rows).assign(masking=m))
    agreement = float(np.mean(table["judge"].to_numpy(dtype=object)[labelled] == truth[labelled]))
    print(f"{task['set']} {task['share']:.0%}: {time.perf_counter() - t0:.0f}s", flush=True)
    return pd.concat(frames, ignore_index=True).assign(set=task["set"], p_ratio=task["share"], held_out=task["held"],
                                                       judge_agreement=agreement)  # fmt: skip


def summary(runs: pd.DataFrame, delta: float) -> pd.DataFrame:
    """Per set, share, A and method: violation frequency (with its Monte-Carlo bound), coverage, maskings certified."""
    ok = runs.dropna(subset=["method"])
    keys = ["held_out", "set", "judge_agreement", "p_ratio", "A", "method"]
    stats = dict(
        maskings=("violated", "size"),
        violations=("violated", "mean"),
        coverage=("coverage", "mean"),
        any_certified=("certified", "mean"),
    )
    out = ok.groupby(keys, sort=False).agg(**stats)
    out["bound"] = delta + 3 * np.sqrt(delta * (1 - delta) / out["maskings"])
    return out.reset_index()


def markdown(table: pd.DataFrame) -> str:
    """Cells "violations / mean coverage" per (set, share, A) row and method column."""
    table = table.assign(cell=[f"{r.violations:.2f} / {r.coverage:.2f}" for r in table.itertuples()])
    wide = table.pivot_table(index=["set", "judge_agreement", "p_ratio", "A"], columns="method", values="cell",
                             aggfunc="first", sort=False).reset_index()  # fmt: skip
    wide = wide[[c for c in ["set", "judge_agreement", "p_ratio", "A", *ORDER] if c in wide.columns]]
    wide["judge_agreement"] = wide["judge_agreement"].map(lambda v: f"{v:.3f}")
    return markdown_table(wide.fillna("n/a"))


FIGURE_METHODS = ("auto", "label-free", "fitted", "auto-ppi", "previous default", "baseline: logistic",
                  "baseline: label-free")  # fmt: skip


def figure(table: pd.DataFrame, share: float, held_share: float, path: Path) -> None:
    """Mean coverage against A, one panel per set (bundled at ``share``, held-out at theirs), one line per method.

    A marker is hollow where the violation frequency exceeds its Monte-Carlo bound.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from puaudit_runtime.files import save_figure

    part = table[np.where(table["held_out"], table["p_ratio"] == held_share, table["p_ratio"] == share)]
    sets = list(dict.fromkeys(part.sort_values("held_out", kind="stable")["set"]))  # bundled first
    fig, axes = plt.subplots(2, (len(sets) + 1) // 2, figsize=(3.2 * ((len(sets) + 1) // 2), 6.8), squeeze=False)
    for ax, name in zip(axes.flat, sets):
        rows = part[part["set"] == name]
        for method in FIGURE_METHODS:
            r = rows[rows["method"] == method].sort_values("A")
            ok = r["violations"] <= r["bound"]
            line = ax.plot(r["A"], r["coverage"], marker="o", ms=3, lw=1.6 if method == "auto" else 1, label=method)[0]
            ax.plot(r["A"][~ok], r["coverage"][~ok], "o", mfc="white", color=line.get_color())
        held = " (held out)" if rows["held_out"].iloc[0] else ""
        ax.set_title(f"{name}{held}, {rows['p_ratio'].iloc[0]:.0%} labels", fontsize=9)
        ax.set(ylim=(-0.02, 1.02), xlabel="A", ylabel="share of the pool certified")
    for ax in list(axes.flat)[len(sets) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def tasks(args) -> list[dict]:
    """One task per (set, share): the bundled sets at every share, the held-out ones at theirs."""
    common = dict(maskings=args.maskings, agreements=args.agreements, delta=args.delta, seed=args.seed,
                  embeddings_dir=args.embeddings_dir, held_out=args.held_out)  # fmt: skip
    out = [dict(common, set=s, share=p, held=False) for s in args.sets.split(",") if s for p in args.p_ratios]
    if args.held_out:
        out += [dict(common, set=s, share=args.held_out_p_ratio, held=True) for s in args.held_out_sets.split(",")]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--p-ratios", default="0.1,0.2,0.5", type=lambda v: [float(x) for x in v.split(",")])
    p.add_argument("--agreements", default="0.7,0.8,0.85,0.9", type=lambda v: [float(x) for x in v.split(",")])
    p.add_argument("--delta", type=float, default=0.1)
    p.add_argument("--maskings", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--held-out", default=None, help="folder of held-out comparison tables (<name>.csv)")
    p.add_argument("--held-out-sets", default=",".join(HELD_OUT))
    p.add_argument("--held-out-p-ratio", type=float, default=0.3)
    p.add_argument("--embeddings-dir", default=None)
    p.add_argument("--from-runs", default=None, help="summarise these guarantee_runs.csv.gz files (comma list)")
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    if args.from_runs:
        runs = pd.concat([pd.read_csv(f) for f in args.from_runs.split(",")], ignore_index=True)
    else:
        runs = pd.concat([run_task(t) for t in tasks(args)], ignore_index=True)
    table, out = summary(runs, args.delta), Path(args.out)
    write_csv(runs.round(4), out / "guarantee_runs.csv.gz")
    write_csv(table, out / "guarantee.csv")
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    write_json({"settings": settings, "summary": table.replace({np.nan: None}).to_dict(orient="records")},
               out / "guarantee.json")  # fmt: skip
    parts = [
        f"Violation frequency / mean share of the pool certified, over {args.maskings} random maskings per "
        f"row (delta {args.delta}; a violation: the certified rows agree with the hidden labels less than A)."
    ]
    for held, part in table.groupby("held_out", sort=True):
        parts.append(("Held-out sets (never used to choose anything):" if held else "Bundled sets:") + "\n\n"
                     + markdown(part))  # fmt: skip
    text = "\n\n".join(parts) + "\n"
    write_text(text, out / "guarantee.md")
    figure(table, 0.2, args.held_out_p_ratio, out / "guarantee.png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
