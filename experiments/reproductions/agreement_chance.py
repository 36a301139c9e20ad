"""Coverage of the kappa and alpha intervals (delta method, cluster bootstrap, PPI++) by simulation.

Populations with a known value, sampled ``--reps`` times each (:mod:`puaudit_jax.quantify.chance`):

- ``synthetic``: judge and human verdicts drawn i.i.d. from a fixed joint over (A, B, tie) (true kappa
  from the joint); for alpha, units with a true class, the judge and 1-5 human votes (missing ones)
  each right with a fixed probability (true alpha from 400,000 units). ``balanced`` and
  ``skewed`` (about 80 % A, p_e high; alpha's true classes 80 % A) populations; n labelled rows, a
  pool of 1,000 judge-only rows for PPI++.
- ``mtbench``: the bundled set as the population: its 80 questions drawn with replacement (all rows of a
  question move together; the truth is the full set's value), a random 20 % of the drawn rows labelled,
  the rest the pool (human hidden); every interval clustered by question.
- ``llmfao-gpt4``: its 2,139 crowd-labelled rows drawn i.i.d. (n labelled + 1,000 pool rows; the crowd
  saw 13 prompts, too few clusters for cluster inference), intervals over rows.

Per population, statistic and estimator: the coverage of the truth at ``--level`` with its Monte-Carlo
standard error sqrt(c (1 - c) / reps), bias of the point estimate and mean width. Also kappa / alpha
of the bundled sets' judges and of their experts / crowd workers among themselves.

    OMP_NUM_THREADS=1 python -m experiments.reproductions.agreement_chance             # ~20 min on 1 core
    OMP_NUM_THREADS=1 python -m experiments.reproductions.agreement_chance --reps 100  # a quick look

Writes results/agreement_chance.{csv,md,json}.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from experiments.common import RESULTS
from puaudit_jax.datasets.bundled import load_bundled
from puaudit_jax.datasets.verdicts import JUDGE_VERDICTS
from puaudit_jax.quantify.chance import (
    alpha_bootstrap,
    alpha_delta,
    coincidences,
    kappa_bootstrap,
    kappa_delta,
    kappa_ppi,
    one_hot,
)
from puaudit_jax.quantify.raters import question_clusters, rating_counts
from puaudit_runtime.files import markdown_table, write_csv, write_json, write_text

CATS = np.array(JUDGE_VERDICTS, dtype=object)
JOINTS = {  # P(judge, human) over (A, B, tie), rows the judge
    "balanced": np.array([[0.33, 0.07, 0.05], [0.08, 0.27, 0.04], [0.04, 0.03, 0.09]]),
    "skewed": np.array([[0.74, 0.06, 0.02], [0.05, 0.08, 0.01], [0.02, 0.01, 0.01]]),
}
CLASSES = {"balanced": (0.45, 0.4, 0.15), "skewed": (0.8, 0.15, 0.05)}  # alpha's units: true class shares


@dataclass(frozen=True)
class Sample:
    """One simulated data set: labelled judge/human verdicts, the pool's judge verdicts, alpha's counts.

    judge / human: (n,) labelled verdicts; pool: (N,) judge verdicts; clusters / pool_clusters: (n,) /
    (N,) labels or None; counts_judge / counts_votes: (n, 3) alpha's ratings per labelled unit (judge
    and votes; votes only).
    """

    judge: np.ndarray
    human: np.ndarray
    pool: np.ndarray
    clusters: np.ndarray | None
    pool_clusters: np.ndarray | None
    counts_judge: np.ndarray
    counts_votes: np.ndarray


def true_kappa(joint: np.ndarray) -> float:
    """kappa of a joint distribution P(J = c, H = k)."""
    p_o, p_e = np.trace(joint), joint.sum(1) @ joint.sum(0)
    return float((p_o - p_e) / (1 - p_e))


def alpha_limit(counts: np.ndarray) -> float:
    """The population alpha 1 - s (s - t)/(s^2 - q) of (U, 3) counts (the finite form without its 1/U term)."""
    o = coincidences(counts).mean(0)
    n_c, s = o.sum(1), o.sum()
    return float(1 - s * (s - np.trace(o)) / (s**2 - (n_c**2).sum()))


def synthetic_units(rng, size: int, judge_right=0.75, vote_right=0.65, classes=(0.45, 0.4, 0.15)):
    """(judge counts (size, 3), vote counts (size, 3)) of units with a true class, 1 judge and 1-5 votes."""
    truth = rng.choice(3, size, p=classes)
    judge = np.where(rng.random(size) < judge_right, truth, (truth + rng.integers(1, 3, size)) % 3)
    m = rng.integers(1, 6, size)
    votes = np.zeros((size, 3))
    for k in range(5):
        v = np.where(rng.random(size) < vote_right, truth, (truth + rng.integers(1, 3, size)) % 3)
        votes[np.arange(size), v] += k < m
    return np.eye(3)[judge], votes


def synthetic_sample(rng, joint: np.ndarray, n: int, pool: int = 1000, classes=CLASSES["balanced"]) -> Sample:
    """n labelled rows and a pool from ``joint``; alpha's units from :func:`synthetic_units` with ``classes``."""
    cells = rng.choice(9, n + pool, p=joint.ravel())
    judge, human = CATS[cells // 3], CATS[cells % 3]
    cj, cv = synthetic_units(rng, n, classes=classes)
    return Sample(judge[:n], human[:n], judge[n:], None, None, cj + cv, cv)


def bundled_population(name: str) -> dict:
    """The labelled rows of a bundled set: verdicts, question clusters, alpha's counts."""
    table = load_bundled(name)
    table = table[table["human"] != "missing"].reset_index(drop=True)
    votes = rating_counts(table, ("votes",))
    return {"judge": table["judge"].to_numpy(object), "human": table["human"].to_numpy(object),
            "question": question_clusters(table, None), "votes": votes,
            "judge_votes": votes + rating_counts(table, ("judge",))}  # fmt: skip


def bundled_sample(rng, pop: dict, clustered: bool, n: int, fraction: float = 0.2, pool: int = 1000) -> Sample:
    """Questions drawn with replacement (``clustered``; 20 % labelled) or n + pool rows drawn i.i.d."""
    if clustered:
        names, codes = np.unique(pop["question"], return_inverse=True)
        drawn = rng.integers(0, len(names), len(names))
        rows = np.concatenate([np.flatnonzero(codes == q) for q in drawn])
        cl = np.concatenate([np.full((codes == q).sum(), k) for k, q in enumerate(drawn)]).astype(str)
        lab = rng.random(len(rows)) < fraction
    else:
        rows = rng.integers(0, len(pop["judge"]), n + pool)
        cl, lab = None, np.arange(n + pool) < n
    pick = lambda key: pop[key][rows]  # noqa: E731
    return Sample(pick("judge")[lab], pick("human")[lab], pick("judge")[~lab], None if cl is None else cl[lab],
                  None if cl is None else cl[~lab], pick("judge_votes")[lab], pick("votes")[lab])  # fmt: skip


def intervals(s: Sample, level: float, resamples: int, seed: int) -> list[tuple]:
    """(statistic, estimator, estimate, lower, upper) of every interval on one sample."""
    clusters = None if s.clusters is None else (s.clusters, s.pool_clusters)
    ests = {"kappa": [kappa_delta(s.judge, s.human, level, len(s.pool), s.clusters),
                      kappa_bootstrap(s.judge, s.human, level, s.clusters, resamples=resamples, seed=seed),
                      kappa_ppi(s.judge, s.human, s.pool, level, clusters)]}  # fmt: skip
    for name, counts in (("alpha (judge, votes)", s.counts_judge), ("alpha (votes)", s.counts_votes)):
        ests[name] = [alpha_delta(counts, level, s.clusters),
                      alpha_bootstrap(counts, level, s.clusters, resamples=resamples, seed=seed)]  # fmt: skip
    return [(k, e.estimator, e.estimate, e.lower, e.upper) for k, es in ests.items() for e in es]


def coverage(draw, truths: dict, reps: int, level: float, resamples: int, seed: int) -> pd.DataFrame:
    """Coverage, Monte-Carlo error, bias and width over ``reps`` samples from ``draw(rng)``."""
    rng = np.random.default_rng(seed)
    rows = [(r, *t) for r in range(reps) for t in intervals(draw(rng), level, resamples, seed + r)]
    frame = pd.DataFrame(rows, columns=["rep", "statistic", "estimator", "estimate", "lower", "upper"])
    frame["truth"] = frame["statistic"].map(truths)
    ok = np.isfinite(frame["lower"].to_numpy(float))
    frame["covered"] = np.where(ok, (frame["lower"] <= frame["truth"]) & (frame["truth"] <= frame["upper"]), np.nan)
    frame["width"], frame["error"] = frame["upper"] - frame["lower"], frame["estimate"] - frame["truth"]
    out = frame.groupby(["statistic", "estimator"], sort=False).agg(
        truth=("truth", "first"), coverage=("covered", "mean"), estimable=("covered", "count"),
        bias=("error", "mean"), width=("width", "mean")).reset_index()  # fmt: skip
    out["mc_error"] = np.sqrt(out["coverage"] * (1 - out["coverage"]) / out["estimable"])
    out["estimable"] = out["estimable"] / reps
    return out


def populations(args) -> list[tuple]:
    """(name, design, n, draw, truths) of every simulated population."""
    out, rng = [], np.random.default_rng(12345)
    for joint_name, joint in JOINTS.items():
        big_j, big_v = synthetic_units(rng, 400_000, classes=CLASSES[joint_name])
        truths = {"kappa": true_kappa(joint), "alpha (judge, votes)": alpha_limit(big_j + big_v),
                  "alpha (votes)": alpha_limit(big_v)}  # fmt: skip
        for n in args.sizes:
            draw = lambda g, j=joint, n=n, c=CLASSES[joint_name]: synthetic_sample(g, j, n, classes=c)  # noqa: E731
            out.append((f"synthetic {joint_name}", "iid rows", n, draw, truths))
    for name, clustered in (("mtbench", True), ("llmfao-gpt4", False)):
        pop = bundled_population(name)
        truths = {
            "kappa": true_kappa(one_hot(pop["judge"], CATS).T @ one_hot(pop["human"], CATS) / len(pop["judge"])),
            "alpha (judge, votes)": alpha_limit(pop["judge_votes"]),
            "alpha (votes)": alpha_limit(pop["votes"]),
        }
        sizes = [0] if clustered else args.sizes
        for n in sizes:
            design = "80 questions drawn, 20 % labelled, by question" if clustered else "iid rows"
            out.append((name, design, n, lambda g, p=pop, c=clustered, n=n: bundled_sample(g, p, c, n), truths))
    return out


def agreement_of_sets(level: float, resamples: int) -> pd.DataFrame:
    """Kappa / alpha of the bundled sets' judges and of their human raters among themselves (all labels)."""
    from puaudit_jax.quantify import quantify

    rows = []
    for name, column in (("mtbench", "question_id"), ("llmfao-gpt4", "prompt"), ("llmfao-gpt3", "prompt")):
        table = load_bundled(name).drop(columns=["model_a", "model_b"])  # the per-model targets are not needed
        for raters, cluster_by in ((("judge", "votes"), column), (("votes",), column), (("judge", "votes"), None)):
            frame = quantify(table, level=level, raters=raters, resamples=resamples, style=(), cluster_by=cluster_by)
            frame = frame.to_frame()
            frame = frame[frame["target"].str.startswith("beyond chance")]
            frame = frame[~(frame["target"].str.contains("kappa") & (raters == ("votes",)))]
            if cluster_by is None:  # the delta method over independent rows, for contrast
                frame = frame[frame["estimator"] == "delta method"]
            rows.append(frame.assign(data=name, cluster_by=cluster_by or "(rows)"))
    frame = pd.concat(rows, ignore_index=True)
    cols = ["data", "target", "estimator", "cluster_by", "estimate", "lower", "upper", "n_labelled", "n_unlabelled"]
    return frame[[*cols, "note"]]


def markdown(summary: pd.DataFrame, sets: pd.DataFrame, args, seconds: float) -> str:
    lines = [f"# Agreement beyond chance: coverage of the kappa and alpha intervals ({args.reps} samples per "
             f"population, level {args.level}, {args.resamples} bootstrap resamples, seed {args.seed})", "",
             "`python -m experiments.reproductions.agreement_chance` "
             f"({seconds / 60:.1f} min). coverage: share of estimable samples whose interval holds the truth; "
             "mc_error: its Monte-Carlo standard error sqrt(c (1 - c) / samples); n: labelled rows (mtbench: "
             "about 20 % of the 1,232 rows of 80 drawn questions). A coverage within 2 mc_error of the level is "
             "nominal.", "", markdown_table(summary.drop(columns=["estimable"]) if (summary["estimable"] == 1).all()
                                            else summary), "",  # fmt: skip
             "## The bundled sets: judges vs humans, and the humans among themselves", "",
             "Every labelled row; `alpha (judge, votes)`: the judge and every individual human vote of a row, "
             "`alpha (votes)`: the experts (MT-Bench) / crowd workers (LLMFAO) among themselves. Delta method "
             "and bootstrap clustered by question (`cluster_by` question_id / prompt); `(rows)`: the delta method "
             "as if rows were independent, for contrast (LLMFAO's 2,139 labelled pairs share 13 prompts). "
             "alpha's ppi++ row is not estimable (a pool row is no pairable unit: "
             "docs/guide/quantify.md), and so is kappa's on LLMFAO (no unlabelled row).", "",
             markdown_table(sets[sets["note"] == ""].drop(columns="note")), ""]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=[100, 400])
    parser.add_argument("--level", type=float, default=0.9)
    parser.add_argument("--resamples", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / "agreement_chance"))
    args = parser.parse_args(argv)
    start, parts = time.perf_counter(), []
    for name, design, n, draw, truths in populations(args):
        part = coverage(draw, truths, args.reps, args.level, args.resamples, args.seed)
        parts.append(part.assign(population=name, design=design, n=n if n else "~246"))
        print(parts[-1].to_string(index=False, float_format="{:.3f}".format), flush=True)
    summary = pd.concat(parts, ignore_index=True)
    cols = ["population", "design", "n", "statistic", "estimator", "truth", "coverage", "mc_error", "bias", "width",
            "estimable"]  # fmt: skip
    summary = summary[cols]
    sets = agreement_of_sets(args.level, args.resamples)
    seconds = time.perf_counter() - start
    write_csv(summary, f"{args.out}.csv")
    write_json({"reps": args.reps, "sizes": args.sizes, "level": args.level, "resamples": args.resamples,
                "seed": args.seed, "seconds": seconds, "coverage": summary.to_dict(orient="records"),
                "bundled": sets.to_dict(orient="records")}, f"{args.out}.json")  # fmt: skip
    write_text(markdown(summary, sets, args, seconds), f"{args.out}.md")
    print(sets.to_string(index=False, float_format="{:.3f}".format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
