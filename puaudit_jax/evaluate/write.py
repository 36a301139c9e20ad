"""Where a protocol run's results are written: results.csv / .json and per_seed.csv (atomically)."""

from __future__ import annotations

from pathlib import Path

from puaudit_runtime.files import write_csv, write_json

from .protocol import EvalResult

FILES = ("results.csv", "results.json", "per_seed.csv")


def write_evaluation(res: EvalResult, folder: str | Path, *, data: str) -> list[str]:
    """Write the summary (csv, and json with the settings in ``meta``) and the per-seed rows of ``res``.

    Args:
        res: the protocol's result.
        folder: the output folder.
        data: names the data in results.json.

    Returns:
        The names of the files written (:data:`FILES`).
    """
    folder = Path(folder)
    write_csv(res.summary, folder / "results.csv")
    write_csv(res.per_seed, folder / "per_seed.csv")
    write_json(
        {"data": data, "meta": res.meta, "results": res.summary.to_dict(orient="records")}, folder / "results.json"
    )
    return list(FILES)
