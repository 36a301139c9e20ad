"""The consensus commands' computing: judge scores from verdict files, alignment of a score matrix.

    load_verdicts(name) / load_matrix(name)         a file, or a bundled set by name
    judge_scores(verdicts, config) -> JudgeScores    Bradley-Terry / Elo per judge, agreement
    align_matrix(matrix, config, human) -> Alignment the adapter, metrics before and after
    table4() -> (table, means)                       the paper's appendix's Table 4 from Table 6
    write_judge_scores / write_alignment             their files, written atomically

``puaudit consensus scores | align | table4`` (:mod:`puaudit_jax.cli.consensus`) parse the options,
call these and print.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from puaudit_runtime.checks import is_missing_text, row_label
from puaudit_runtime.files import save_figure, write_csv, write_json

from ..datasets import load_uda_scores, score_matrix
from ..datasets.formats import read_comparisons
from ..datasets.records import check_utf8, read_records
from .alignment import AlignConfig, AlignResult, align
from .config import BTConfig, EloConfig, ScoresConfig, refuse_other_method  # light, for the CLI
from .matrices import ScoreMatrices, llmfao_verdicts, mtbench_verdicts, score_matrices, table_verdicts
from .metrics import consensus, judge_metrics, summary

BUNDLED_VERDICTS = ("llmfao", "mtbench")
BUNDLED_MATRICES = ("uda-transfer", "uda-arenahard")


VERDICT_ROWS = "verdicts (one row per judge, model_a, model_b, winner)"
MATRIX_ROWS = "scores (a judges x models matrix, the judges in the first column)"


def _read_table(path: str, rows: str = VERDICT_ROWS, read=None) -> pd.DataFrame:
    """The table of a file holding ``rows``; an unreadable or empty one is a ValueError naming it.

    ``read(path)``: the reader (default: by the suffix, csv / jsonl / json / parquet).
    """
    suffix = Path(path).suffix.lower()
    if read is None:
        readers = {".csv": lambda p: pd.read_csv(p, keep_default_na=False), ".parquet": pd.read_parquet,
                   ".jsonl": lambda p: pd.read_json(p, lines=True), ".json": pd.read_json}  # fmt: skip
        if suffix not in readers:
            raise ValueError(f"cannot read {path!r} (use .csv, .jsonl or .parquet)")
        read = readers[suffix]
    if suffix != ".parquet":
        check_utf8(Path(path))
    try:
        table = read(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty (no header line; it should hold {rows})") from None
    except (pd.errors.ParserError, ValueError) as err:
        raise ValueError(f"{path}: not a readable table ({str(err).strip()})") from None
    if table.empty:
        raise ValueError(f"{path}: no rows in the file (it should hold {rows})")
    return table


def load_verdicts(name: str) -> pd.DataFrame:
    """Long verdicts (judge, model_a, model_b, winner) of a bundled set or a file.

    A bundled set (``llmfao``: crowd votes, gpt4, gpt3; ``mtbench``: human, gpt4), a csv / jsonl /
    parquet file of long verdicts, or a comparison file of any format the readers take
    (:func:`~puaudit_jax.datasets.read_comparisons`; every judge in it: :func:`.matrices.table_verdicts`).
    """
    if name == "llmfao":
        return llmfao_verdicts("votes")
    if name == "mtbench":
        return mtbench_verdicts()
    if not Path(name).is_file():
        raise ValueError(f"{name!r} is neither a file nor a bundled set ({', '.join(BUNDLED_VERDICTS)})")
    if _is_comparison_file(name):
        return table_verdicts(read_comparisons(name).table)
    table = _read_table(name)
    for column in ("judge", "model_a", "model_b"):
        values = table[column] if column in table.columns else pd.Series([], dtype=object)
        blank = [k for k, v in enumerate(values) if is_missing_text(v)]
        if blank:
            raise ValueError(f"{name}: {row_label(name, blank[0])}, column {column!r}: no name (a blank or null cell; "
                             f"{len(blank)} such rows)")  # fmt: skip
    return table


def _is_comparison_file(name: str) -> bool:
    """Whether ``name`` holds comparisons of some format rather than long verdicts (an unreadable file: no)."""
    try:
        return "winner" not in read_records(name).columns
    except ValueError:  # named by the long-verdict reader, as before
        return False


def load_matrix(name: str) -> pd.DataFrame:
    """A judges x models score matrix, bundled or from a csv.

    The paper's bundled ``uda-transfer`` (with its ``human`` row) or ``uda-arenahard``, or a csv whose
    first column names the judges.
    """
    if name in BUNDLED_MATRICES:
        scores = load_uda_scores()
        dataset = "transfer_table6" if name == "uda-transfer" else "arenahard"
        base = score_matrix(scores, dataset, "baseline")
        if name == "uda-transfer":
            base = pd.concat([base, score_matrix(scores, dataset, "human")])
        return base
    if not Path(name).is_file():
        raise ValueError(f"{name!r} is neither a file nor {' / '.join(BUNDLED_MATRICES)}")
    table = _read_table(name, MATRIX_ROWS, read=lambda p: pd.read_csv(p, index_col=0))
    table.index = table.index.astype(str)
    numbers = table.apply(pd.to_numeric, errors="coerce")
    bad = ~np.isfinite(numbers.to_numpy(float))
    if bad.any():
        row, col = (int(k[0]) for k in np.nonzero(bad))
        value = table.iat[row, col]
        value = "a blank cell" if is_missing_text(value) else repr(value)
        raise ValueError(f"{name}: {row_label(name, row)}, judge {table.index[row]!r}, model {table.columns[col]!r}: "
                         f"not a finite score ({value}; {int(bad.sum())} such cells)")  # fmt: skip
    return numbers


@dataclass(frozen=True)
class JudgeScores:
    """Scores of every judge and their agreement with a reference.

    Attributes:
        matrices: the fits (:class:`ScoreMatrices`: judges x models Elo, intervals, exclusions).
        agreement: per judge, Pearson / Kendall / MSE against the reference (one row per judge).
        reference: the reference judge's name, or "consensus".
        settings: what produced them (method, configs, seed, bootstrap resamples, comparisons per judge).
    """

    matrices: ScoreMatrices
    agreement: pd.DataFrame
    reference: str
    settings: dict


def judge_scores(
    verdicts: pd.DataFrame,
    config: ScoresConfig = ScoresConfig(),
    *,
    bt: BTConfig = BTConfig(),
    elo: EloConfig = EloConfig(),
) -> JudgeScores:
    """Bradley-Terry (or online Elo) per judge, and each judge against ``config.reference`` (default the consensus).

    Args:
        verdicts: long verdicts (columns judge, model_a, model_b, winner in A | B | tie).
        config: the method, bootstrap, seed and reference judge.
        bt: the Bradley-Terry settings (defaults unless the method is "bt").
        elo: the Elo settings (defaults unless the method is "elo").

    Returns:
        The :class:`JudgeScores`: the score matrices (Elo points), each judge's agreement with the
        reference, and the settings.

    Raises:
        ValueError: a non-identifiable comparison graph, an unknown reference judge, a setting the method
            ignores changed from its default (:func:`.config.refuse_other_method`), or bad settings,
            named: ``n_boot`` / ``seed`` (integers >= 0, :func:`score_matrices`), the fields of ``bt`` /
            ``elo`` (checked when the configs are made). The CLI prints the same message.
    """
    refuse_other_method(config, bt, elo)
    method, n_boot, seed, reference = config.method, config.n_boot, config.seed, config.reference
    res = score_matrices(verdicts, method=method, bt=bt, elo=elo, n_boot=n_boot, seed=seed)
    if reference is not None and reference not in res.scores.index:
        raise ValueError(f"--reference {reference!r} is not a judge ({list(res.scores.index)})")
    target = res.scores.loc[reference] if reference else consensus(res.scores)
    settings = dict(method=method, config=asdict(res.config), seed=seed, n_boot=n_boot,
                    reference=reference or "consensus", excluded=res.excluded,
                    n_comparisons=verdicts.groupby("judge").size().to_dict())  # fmt: skip
    return JudgeScores(res, judge_metrics(res.scores, target).reset_index(), reference or "consensus", settings)


def write_judge_scores(run: JudgeScores, out: str | Path, *, source: str) -> list[str]:
    """Write scores.csv, intervals.csv (with bootstrap), agreement.csv and run.json in ``out``.

    Args:
        run: :func:`judge_scores`'s result.
        out: the output folder.
        source: the verdicts' path, recorded in run.json.

    Returns:
        The names of the files written.
    """
    out, res = Path(out), run.matrices
    write_csv(res.scores.reset_index(), out / "scores.csv")
    files = ["scores.csv", "agreement.csv", "run.json"]
    if res.intervals:
        write_csv(pd.concat([t.assign(judge=j) for j, t in res.intervals.items()]), out / "intervals.csv")
        files.append("intervals.csv")
    write_csv(run.agreement, out / "agreement.csv")
    s = run.settings
    write_json({"command": "consensus scores", "verdicts": source, "method": s["method"], "config": s["config"],
                "seed": s["seed"], "n_boot": s["n_boot"], "reference": s["reference"], "excluded": s["excluded"],
                "n_comparisons": s["n_comparisons"]}, out / "run.json")  # fmt: skip
    return files


@dataclass(frozen=True)
class Alignment:
    """A consensus alignment and its metrics.

    Attributes:
        matrix: the judges x models scores before (the human row, if any, taken out).
        result: the adapter's :class:`AlignResult` (aligned scores, loss curve, terms).
        config: the :class:`AlignConfig` it ran with.
        before / after: :func:`puaudit_jax.consensus.metrics.summary` of the scores before and after.
    """

    matrix: pd.DataFrame
    result: AlignResult
    config: AlignConfig
    before: dict
    after: dict


def split_human(matrix: pd.DataFrame, human: str | None) -> tuple[pd.DataFrame, pd.Series | None]:
    """(the judges' rows, the human row or None): ``human`` names the row of human scores."""
    if human is None:
        return matrix, None
    if human not in matrix.index:
        raise ValueError(f"--human {human!r} is not a row of the matrix ({list(matrix.index)})")
    return matrix.drop(index=human), matrix.loc[human]


def align_matrix(matrix: pd.DataFrame, config: AlignConfig, human: pd.Series | None = None) -> Alignment:
    """Align ``matrix`` (judges x models) towards its consensus.

    Args:
        matrix: a judges x models score matrix, in Elo points.
        config: the alignment's settings.
        human: human scores per model (Elo points), for the before / after summaries only, or None.

    Returns:
        The :class:`Alignment`: the matrix, the aligned result and the :func:`~.metrics.summary`
        before and after.
    """
    res = align(matrix, config)
    base = consensus(matrix)
    before, after = summary(matrix, human=human), summary(res.scores, base_consensus=base, human=human)
    return Alignment(matrix, res, config, before, after)


def write_alignment(run: Alignment, out: str | Path, *, source: str, figures: bool = True) -> list[str]:
    """Write aligned.csv, metrics.json and (``figures``) heatmaps.png in ``out``.

    Args:
        run: :func:`align_matrix`'s result.
        out: the output folder.
        source: the matrix's path, recorded in metrics.json.
        figures: whether to draw heatmaps.png (before / after).

    Returns:
        The names of the files written.
    """
    out, res = Path(out), run.result
    write_csv(res.scores.reset_index(names="judge"), out / "aligned.csv")
    write_json({"command": "consensus align", "matrix": source, "config": asdict(run.config), "before": run.before,
                "after": run.after, "terms": res.terms, "final_loss": float(res.loss[-1])},
               out / "metrics.json")  # fmt: skip
    if not figures:
        return ["aligned.csv", "metrics.json"]
    from .plots import heatmaps

    save_figure(heatmaps({"before": run.matrix, "after": res.scores}), out / "heatmaps.png", dpi=110,
                bbox_inches="tight")  # fmt: skip
    return ["aligned.csv", "metrics.json", "heatmaps.png"]


def table4() -> tuple[pd.DataFrame, pd.Series]:
    """The UDA appendix's Table 4 from its Table 6 matrices, and the column means.

    Table 4: Pearson and MSE to the consensus, baseline vs UDA, per judge.
    """
    scores = load_uda_scores()
    base = score_matrix(scores, "transfer_table6", "baseline")
    uda = score_matrix(scores, "transfer_table6", "uda")
    c = consensus(base)
    table = pd.concat(
        {"baseline": judge_metrics(base, c)[["pearson", "mse"]], "UDA": judge_metrics(uda, c)[["pearson", "mse"]]},
        axis=1,
    )
    return table, table.mean()
