"""Text tables of protocol results: the summary, the overall comparison and the paper's Table 5 beside ours."""

from __future__ import annotations

import pandas as pd

from ..datasets import reference_path

SUMMARY_COLUMNS = (
    "scorer",
    "rule",
    "question_type",
    "n",
    "cons_orig_mean",
    "cons_orig_std",
    "cons_adj_mean",
    "cons_adj_std",
    "gain_mean",
    "flip_rate",
    "flip_precision",
    "abstained",
    "coverage",
    "certified_agreement",
    "violation_rate",
    "m_mean",
    "time_s",
)


def summary_table(summary: pd.DataFrame) -> str:
    """The summary's main columns, 4 decimals; ``n/a`` where a number does not apply.

    Not applicable: e.g. the coverage of a rule the guarantee does not certify, the precision of no flip.
    """
    return summary[[c for c in SUMMARY_COLUMNS if c in summary]].to_string(
        index=False, float_format=lambda v: f"{v:.4f}", na_rep="n/a"
    )


def _published() -> dict:
    """The paper's Table 5 (MT-Bench-style) by category: {(judge, category): (orig, adj)}."""
    ref = pd.read_csv(reference_path("puaudit_table5_mtbench.csv"))
    return {(r.judge, r.category): (r.orig, r.adj) for r in ref.itertuples()}


def demo_table(summary: pd.DataFrame, scorer: str = "pot", rule: str = "paper") -> str:
    """Our Cons_orig / Cons_adj per MT-Bench category beside the paper's published Table 5.

    Args:
        summary: the protocol's summary table (mean / std over seeds).
        scorer: the scorer whose rows are shown.
        rule: the rule whose rows are shown.

    Returns:
        The table as text, one line per category.
    """
    pub = _published()
    part = summary[(summary.scorer == scorer) & (summary.rule == rule)]
    lines = [
        f"{'category':<11}{'n':>6}  {'ours orig':>16}  {'ours adj':>16}  {'gain':>7}   "
        f"{'seed Qwen o/a':>13}  {'seed Mistral o/a':>16}"
    ]
    for r in part.itertuples():
        cat = r.question_type

        def fmt(j, cat=cat):
            key = (j, cat if cat != "all" else "mixture")
            return f"{pub[key][0]:.3f}/{pub[key][1]:.3f}" if key in pub else "-"

        gpt = pub.get(("gpt-5.4-mini", "mixture")) if cat == "all" else None
        extra = f"   seed GPT-5.4-mini (mixture): {gpt[0]:.3f}/{gpt[1]:.3f}" if gpt else ""
        lines.append(
            f"{cat:<11}{r.n:>6.0f}  {r.cons_orig_mean:.3f} ({r.cons_orig_std:.3f})  "
            f"{r.cons_adj_mean:.3f} ({r.cons_adj_std:.3f})  {r.gain_mean:+.3f}   {fmt('qwen'):>13}  "
            f"{fmt('mistral'):>16}{extra}"
        )
    return "\n".join(lines)


def overall_table(summary: pd.DataFrame) -> str:
    """Overall ("all") Cons_orig / Cons_adj mean (std), flip rate per scorer and rule."""
    part = summary[summary.question_type == "all"]
    lines = [
        f"{'scorer':<12}{'rule':<11}{'Cons_orig':>16}{'Cons_adj':>18}{'gain':>8}{'flips':>7}{'precision':>10}"
        f"{'abstained':>10}{'audit s':>9}"
    ]
    for r in part.itertuples():
        precision = getattr(r, "flip_precision", float("nan"))
        abstained = getattr(r, "abstained", float("nan"))
        lines.append(
            f"{r.scorer:<12}{r.rule:<11}{r.cons_orig_mean:>9.3f} ({r.cons_orig_std:.3f}){r.cons_adj_mean:>11.3f} "
            f"({r.cons_adj_std:.3f}){r.gain_mean:>+8.3f}{r.flip_rate:>7.3f}"
            f"{'' if pd.isna(precision) else f'{precision:.2f}':>10}"
            f"{'' if pd.isna(abstained) else f'{abstained:.1f}':>10}{r.time_s:>9.2f}"
        )
    return "\n".join(lines)
