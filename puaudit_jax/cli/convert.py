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

SUFFIXES = (".csv", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")


def run(args) -> int:
    """Read DATA, print what was read, write the table to --out."""
    from ..datasets import save_comparisons

    if not args.out.lower().endswith(SUFFIXES):
        raise ValueError(f"--out {args.out}: name a table file ending in one of {', '.join(SUFFIXES)}")
    inputs.check_file_out("--out", args.out)
    read = inputs.read_config(args)  # what was read is the point of this command: its report, whatever the format
    table = inputs.load_data(inputs.data_of(args), args.include_unlabelled, read=read, always_report=True)
    save_comparisons(table, args.out)
    print(f"wrote {args.out}: {len(table):,} comparisons, {len(table.columns)} columns", file=sys.stderr)
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
