"""``puaudit demo``: MT-Bench GPT-4 verdicts vs the expert votes, the default audit beside the paper's.

Three protocol runs on the same splits: the grid of the demo's scorers x (the default calibrated
rule, the paper rule, the flip budget) with the hindsight ceiling, the paper's own configuration
(entropic partial-OT scores, flip where s / max s < eta), and the default audit with a guarantee
(trust, flip or escalate each pool verdict so that the kept ones agree with humans at least A of the
time). :func:`demo_text` prints them beside the paper's published Table 5.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..audit import DEFAULT_RULE, PAPER_RULE, PAPER_SCORER, AuditConfig
from ..audit.guarantee import probability
from .config import DEMO_GUARANTEE, DEMO_SCORERS, Protocol  # noqa: F401  (re-exported: they live in the light config module)
from .protocol import EvalResult, evaluate, settings_of, uncertified
from .tables import demo_table, overall_table


def run_demo(
    table: pd.DataFrame,
    emb,
    *,
    scorers,
    default_rule,
    paper_scorer,
    guarantee: float = DEMO_GUARANTEE,
    protocol: Protocol | None = None,
    config: AuditConfig | None = None,
    progress: bool = True,
    **options,
) -> EvalResult:
    """The three protocol runs; the first two concatenated, the guaranteed one in ``meta["guarantee"]``.

    The first two runs compare the audits without a guarantee (``config``'s guarantee and the settings
    only a guarantee reads -- delta, cascade, human_ties, certify, spot_checks -- do not reach them).
    When the third cannot run (too few labels per split for A and delta), ``meta["guarantee"]`` says why.

    Args:
        table: the comparison table.
        emb: its pair embeddings.
        scorers: the grid's scorers (names or objects; the first is the default audit's).
        default_rule: the default rule (name or configured object).
        paper_scorer: the paper configuration's scorer (``"pot"`` or a configured instance).
        guarantee: the agreement A of the third run, in (0, 1) (its delta: ``config``'s, default 0.1).
        protocol: the protocol's settings (seeds, p_ratio; None: :class:`Protocol`'s defaults).
        config: the audit's settings (None: :class:`AuditConfig`'s defaults).
        progress: whether to show progress bars.
        **options: deprecated (for one release, with a DeprecationWarning): :class:`Protocol` /
            :class:`AuditConfig` fields, set on ``protocol`` and ``config``.

    Returns:
        The :class:`EvalResult` of the grid and the paper configuration, with the guaranteed run's
        summary in ``meta["guarantee"]``.
    """
    protocol, config = settings_of("run_demo", protocol, config, options)
    certified_config = replace(config, guarantee=guarantee)
    plain = {"config": uncertified(config), "progress": progress}
    rules = [default_rule, PAPER_RULE, "budget"]
    grid = evaluate(table, emb, scorers=list(scorers), rules=rules, protocol=replace(protocol, ceiling=True), **plain)
    paper_cfg = evaluate(table, emb, pairs=[(paper_scorer, PAPER_RULE)], protocol=protocol, **plain)
    try:
        certified = evaluate(table, emb, pairs=[(scorers[0], default_rule)], protocol=replace(protocol, ceiling=False),
                             config=certified_config, progress=progress)  # fmt: skip
        kept = guarantee_summary(certified)
    except ValueError as err:  # e.g. "guarantee 0.97 at delta 0.1 needs at least N calibration rows"
        kept = {"A": guarantee, "delta": certified_config.delta, "error": str(err)}
    return EvalResult(
        pd.concat([grid.per_seed, paper_cfg.per_seed], ignore_index=True),
        pd.concat([grid.summary, paper_cfg.summary], ignore_index=True),
        {
            **grid.meta,
            "scorers": grid.meta["scorers"] + [PAPER_SCORER],
            "paper_configuration": paper_cfg.meta,
            "guarantee": kept,
        },  # fmt: skip
        grid.first_audit,
        grid.first_truth,
    )


def guarantee_summary(res: EvalResult) -> dict:
    """What a guaranteed protocol run measured on the hidden labels, over its splits (JSON-ready).

    Keys: ``A``, ``delta``, ``human_ties``, ``certify``, ``splits``; ``coverage_mean`` / ``_std`` (share of
    the pool certified: trusted or flipped), ``flip_rate_mean`` (share flipped), ``certified_agreement_mean``
    (agreement of the certified rows' final verdicts with the hidden ones, over the splits that certified
    any), ``violations`` (splits where it fell below A) and ``per_seed`` (seed, coverage, flip_rate,
    certified_agreement, violated).
    """
    rows = res.per_seed[res.per_seed.question_type == "all"]
    config = res.first_audit.config

    def number(x) -> float | None:
        return None if pd.isna(x) else float(x)

    cols = ["seed", "coverage", "flip_rate", "certified_agreement", "violated"]
    return {
        "A": config.guarantee,
        "delta": config.delta,
        "human_ties": config.human_ties,
        "certify": config.certify,
        "splits": len(rows),
        "coverage_mean": number(rows.coverage.mean()),
        "coverage_std": number(rows.coverage.std()),
        "flip_rate_mean": number(rows.flip_rate.mean()),
        "certified_agreement_mean": number(rows.certified_agreement.mean()),
        "violations": int(rows.violated.sum()),
        "per_seed": [
            {c: number(v) if c != "seed" else int(v) for c, v in zip(cols, r)}
            for r in rows[cols].itertuples(index=False)
        ],
    }


def demo_text(res: EvalResult, *, first_scorer: str, eta: float, p_ratio: float, source: str) -> str:
    """The demo's printout: per-category results, the overall table, a verdict and the guaranteed run.

    Both configurations per category beside the paper's Table 5, the overall table, a one-line verdict and
    what the guaranteed run kept on the same splits (``meta["guarantee"]``).

    Args:
        res: :func:`run_demo`'s result.
        first_scorer: the default audit's scorer (the first of the grid).
        eta: the paper rule's flip threshold on normalised scores, for the text.
        p_ratio: the share of labels kept per split, for the text.
        source: where the embeddings came from, for the text.

    Returns:
        The text, lines joined by newlines.
    """
    summ = res.summary[res.summary.question_type == "all"].set_index(["scorer", "rule"])
    seed_row, default_row = summ.loc[(PAPER_SCORER, PAPER_RULE)], summ.loc[(first_scorer, DEFAULT_RULE)]
    verdict = "raises" if seed_row.gain_mean > 0 else "lowers"
    return "\n".join(
        [
            f"\nMT-Bench, GPT-4 judge vs expert votes; embeddings {source}; {len(res.meta['seeds'])} seeds, "
            f"p_ratio {p_ratio}; Cons = agreement with the hidden expert verdicts, mean (std) over seeds.",
            "Seed columns: the PUAudit paper's Table 5 (Qwen / Mistral judges on a Chatbot Arena + MT-Bench "
            "mixture, orig/adj): context from other judges, not a replication.\n",
            f"-- the paper's configuration: entropic POT scores, flip where s/max s < eta = {eta}",
            demo_table(res.summary, PAPER_SCORER, PAPER_RULE),
            f"\n-- the default audit: {first_scorer} scores, rule {DEFAULT_RULE} (calibrated on the labelled items, "
            "abstains without evidence of a gain)",
            demo_table(res.summary, first_scorer, DEFAULT_RULE),
            "\n-- overall; 'budget' flips the floor((1 - m) n) lowest scores per category; 'hindsight' is the best "
            "per-category budget chosen with the hidden labels (a ceiling, not a rule)",
            overall_table(res.summary),
            f"\nOn this set the paper's audit {verdict} agreement with the experts by "
            f"{abs(seed_row.gain_mean) * 100:.1f} points ({seed_row.cons_orig_mean:.3f} -> "
            f"{seed_row.cons_adj_mean:.3f}); the default audit abstained in "
            f"{default_row.abstained * 100:.0f}% of the splits and changes it by {default_row.gain_mean * 100:+.1f} "
            f"points (hindsight ceiling {summ.loc[(first_scorer, 'hindsight')].gain_mean * 100:+.1f}).",
            *_guarantee_lines(res.meta["guarantee"]),
        ]
    )


def _guarantee_lines(g: dict) -> list[str]:
    """The demo's last paragraph: what the guaranteed run kept (``g``: ``meta["guarantee"]``)."""
    A, delta = g["A"], g["delta"]
    command = f"--guarantee {A}" + ("" if delta == AuditConfig.delta else f" --delta {delta}")
    lines = [f"\n-- trust, flip or escalate: the default audit with `{command}` on the same splits (every labelled "
             "row tests the judge's label-free score, the half hidden from the audit its P(judge wrong))"]  # fmt: skip
    if "error" in g:
        return lines + [f"Not available: {g['error']}"]
    n, agreement = g["splits"], g["certified_agreement_mean"]
    kept = [r["coverage"] for r in g["per_seed"] if r["coverage"]]
    lines += [
        f"With probability >= {probability(delta)} over the labelled sample, the verdicts the audit keeps agree "
        f"with the experts at least {A * 100:.0f}% of the time; the rest go to a human.",
        f"Over the {n} splits it kept {g['coverage_mean'] * 100:.1f}% of the pool on average "
        f"({g['flip_rate_mean'] * 100:.1f}% flipped).",
    ]
    if not kept:
        return lines + [f"In no split could the calibration rows show {A}: every verdict went to a human."]
    lo, hi = f"{min(kept) * 100:.0f}", f"{max(kept) * 100:.0f}"
    lines.append(f"It kept {lo if lo == hi else f'{lo}-{hi}'}% in {len(kept)} of them" + (
        f"; in the other {n - len(kept)} the calibration rows could not show {A}: every verdict to a human."
        if len(kept) < n else "."))  # fmt: skip
    return lines + [f"The kept verdicts agreed with the hidden expert verdicts {agreement:.3f} on average, below {A} "
                    f"in {g['violations']} of {n} splits."]  # fmt: skip
