"""``puaudit demo``: MT-Bench GPT-4 verdicts vs the expert votes, the default audit beside the paper's.

Two protocol runs on the same splits: the grid of the demo's scorers x (the default calibrated
rule, the paper rule, the flip budget) with the hindsight ceiling, and the paper's own configuration
(entropic partial-OT scores, flip where s / max s < eta). :func:`demo_text` prints them beside the
paper's published Table 5.
"""

from __future__ import annotations

import pandas as pd

from ..audit import DEFAULT_RULE, PAPER_RULE, PAPER_SCORER
from .config import DEMO_SCORERS  # noqa: F401  (re-exported: it moved to the light config module)
from .protocol import EvalResult, evaluate
from .tables import demo_table, overall_table


def run_demo(table: pd.DataFrame, emb, *, scorers, default_rule, paper_scorer, **options) -> EvalResult:
    """Both protocol runs, concatenated.

    ``scorers``: the grid's scorers (names or objects; the first is the default audit's);
    ``default_rule``: the default rule (name or configured object);
    ``paper_scorer``: the paper configuration's scorer (``"pot"`` or a configured instance);
    ``options``: :class:`Protocol` / :class:`AuditConfig` fields.
    """
    grid = evaluate(
        table, emb, scorers=list(scorers), rules=[default_rule, PAPER_RULE, "budget"], ceiling=True, **options
    )
    paper_cfg = evaluate(table, emb, pairs=[(paper_scorer, PAPER_RULE)], **options)
    return EvalResult(
        pd.concat([grid.per_seed, paper_cfg.per_seed], ignore_index=True),
        pd.concat([grid.summary, paper_cfg.summary], ignore_index=True),
        {**grid.meta, "scorers": grid.meta["scorers"] + [PAPER_SCORER], "paper_configuration": paper_cfg.meta},
        grid.first_audit,
        grid.first_truth,
    )


def demo_text(res: EvalResult, *, first_scorer: str, eta: float, p_ratio: float, source: str) -> str:
    """The demo's printout: per-category results, the overall table and a verdict.

    Both configurations per category beside the paper's Table 5, the overall table and a one-line verdict.
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
        ]
    )
