"""``puaudit convert FILE... --out TABLE``: read judge files of any format and write one comparison table.

    puaudit convert FILE [FILE ...] [--format NAME] [--columns NAME=FIELD,...] [--labels FILE] --out TABLE

Reads the files as every data command does (:mod:`puaudit_jax.datasets.formats`: the format told
from the records), prints the read report (records, verdicts, ties, verdicts that could not be used,
the id rule) and writes the normalised table atomically, as CSV, JSON lines, a JSON array or parquet
by the suffix of TABLE. The table reads back unchanged with any command.
"""

from __future__ import annotations

import sys

from . import inputs
from .requests import ConvertRequest, convert_request

SUFFIXES = (".csv", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")


def run(args) -> int:
    """``puaudit convert``: the request read from the command line (:func:`~.requests.convert_request`), then run."""
    return run_convert(convert_request(args))


def run_convert(request: ConvertRequest) -> int:
    """Read DATA, print what was read, write the table to --out."""
    from ..datasets import save_comparisons

    out = request.output.out
    if not out.lower().endswith(SUFFIXES):
        raise ValueError(f"--out {out}: name a table file ending in one of {', '.join(SUFFIXES)}")
    inputs.check_file_out("--out", out)
    data = request.data
    read = inputs.read_config(data)  # what was read is the point of this command: its report, whatever the format
    table = inputs.load_data(list(data.files), data.include_unlabelled, read=read, always_report=True)
    save_comparisons(table, out)
    print(f"wrote {out}: {len(table):,} comparisons, {len(table.columns)} columns", file=sys.stderr)
    return 0


def add_convert_parser(sub) -> None:
    """The ``convert`` command."""
    p = sub.add_parser("convert", help="read judge files of any format into one comparison table (shows what was read)",
                       description=__doc__.split("\n\n")[0])  # fmt: skip
    inputs.add_read_options(p)
    p.add_argument("--include-unlabelled", action="store_true", default=None,
                   help="bundled sets: add the judge-only comparisons")  # fmt: skip
    p.add_argument("--out", required=True, help="the table to write (.csv, .jsonl, .json or .parquet)")
    p.set_defaults(func=run)
