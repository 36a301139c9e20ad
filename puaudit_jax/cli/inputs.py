"""What the data commands share: DATA and its embeddings, the devices, the output folder.

``audit``, ``evaluate``, ``demo`` and ``quantify`` read a comparison table (a file or a bundled
set), embed it (or read ``--embeddings``), may run on several devices or processes, and write one
output folder. Each step here is checked before the expensive ones, so a bad option fails in a
second, not after the embedding.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from probes.encode_config import EncodeConfig
from puaudit_runtime.flags import DeviceFlags, add_device_arguments, build_mesh

from .. import datasets
from ..audit.config import ENCODE_OPTIONS, EmbedConfig
from ..datasets.names import BUNDLED
from ..datasets.read_config import READ_DEFAULTS, ReadConfig
from .options import add_options
from .requests import EMBED_OWN_FIELDS, ENCODE_FIELDS, READ_RENAME, DataRequest, FeatureRequest, OutputRequest
from .requests import embed_config as embed_config  # a request builder (it reads ``args``), named here as before
from .run_folder import RunFolder

if TYPE_CHECKING:
    import pandas as pd


def load_data(
    data: str | list[str],
    include_unlabelled: bool | None = None,
    limit: int | None = None,
    *,
    other_judges=(),
    read: ReadConfig = READ_DEFAULTS,
    quiet: bool = False,
    always_report: bool = False,
) -> pd.DataFrame:
    """:func:`puaudit_jax.datasets.read_data`, its read report on stderr, a missing file as a one-line error.

    Args:
        data: a bundled set's name, a file, or files of one format (DATA).
        include_unlabelled: bundled sets: add the judge-only comparisons.
        limit: the first rows only.
        other_judges: column names checked here, before any expensive step: every named column exists
            and holds verdicts (errors name the row and the column).
        read: how the files are read (--format, --columns, --labels, ...).
        quiet: no read report (it is printed for a format other than this package's table, or with labels).
        always_report: print the read report for this package's table and the bundled sets too.
    """
    try:
        result = datasets.read_data(data, include_unlabelled, limit, read)
    except FileNotFoundError as err:
        raise SystemExit(f"error: {err}") from None
    if not quiet and (always_report or result.report.format not in ("bundled", "comparisons") or read.labels):
        for line in result.report.lines():
            print(f"[puaudit] {line}", file=sys.stderr)
    if other_judges:
        name = data if isinstance(data, str) else ", ".join(data)
        datasets.other_judge_verdicts(result.table, tuple(other_judges), source=f"{name} (--other-judges)")
    return result.table


def data_table(
    data: DataRequest, quiet: bool = False, other_judges=(), include_unlabelled: bool | None = None
) -> pd.DataFrame:
    """DATA read as its options say (:func:`load_data`, its report unless ``quiet``).

    Args:
        data: DATA and its read options (:class:`~.requests.DataRequest`).
        quiet: no read report (--quiet).
        other_judges: column names checked before any expensive step (:func:`load_data`).
        include_unlabelled: bundled sets: add the judge-only comparisons; None: as --include-unlabelled says.
    """
    include = data.include_unlabelled if include_unlabelled is None else include_unlabelled
    return load_data(list(data.files), include, other_judges=other_judges, read=read_config(data), quiet=quiet)


def read_config(data: DataRequest) -> ReadConfig:
    """The :class:`ReadConfig` of DATA's options (--format, --columns, --labels, --answers, --as, ...).

    Raises:
        ValueError: --include-unlabelled with files (it applies to the bundled sets; a file's rows are all read).
    """
    if data.include_unlabelled and not set(data.files) <= set(BUNDLED):
        raise ValueError("--include-unlabelled applies to the bundled sets only: a file's unlabelled rows are always "
                         "read")  # fmt: skip
    return data.read


class _DataFiles(argparse.Action):
    """DATA: one bundled set's name or one or more files; ``args.data`` names them for people."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.data_files = list(values)
        setattr(namespace, self.dest, ", ".join(values))


def add_read_options(p: argparse.ArgumentParser) -> None:
    """DATA as one or more files (or a bundled set), and how they are read (:class:`ReadConfig`)."""
    p.add_argument("data", nargs="+", action=_DataFiles, metavar="DATA",
                   help=f"bundled set ({', '.join(BUNDLED)}), or comparison file(s) of one format: this package's "
                        "table, AlpacaEval annotations, FastChat judgments, an Arena table, an LLMBar-style "
                        "dataset / evaluator result, reward-model pairs (JSON, JSON lines, CSV or parquet; the "
                        "format is told from the records)")  # fmt: skip
    metavars = {"columns": {"metavar": "NAME=FIELD,..."}, "labels": {"metavar": "FILE[,FILE...]"}}
    add_options(p, ReadConfig, rename=READ_RENAME, overrides=metavars)


def mesh_of(devices: DeviceFlags):
    """The mesh of --devices / --mesh (joining the cluster the flags name first), or None."""
    try:
        mesh = build_mesh(devices)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    if mesh is not None:
        import jax

        print(
            f"[puaudit] {mesh.size} devices ({mesh.devices.flat[0].platform}), mesh {dict(mesh.shape)}, "
            f"process {jax.process_index()} of {jax.process_count()}",
            file=sys.stderr,
        )
    return mesh


def writes() -> bool:
    """Whether this process writes the outputs (process 0 of a cluster, or the only one)."""
    import jax

    return jax.process_index() == 0


def check_out(folder: str) -> None:
    """The output folder exists (created) and this process can write there."""
    _check_folder("--out", folder, Path(folder))


def check_file_out(option: str, path: str) -> None:
    """``path`` (the value of ``option``) can be written as a file: not a folder, its folder writable."""
    if Path(path).is_dir():
        raise ValueError(f"{option} {path}: is a folder, not a file")
    _check_folder(option, path, Path(path).parent)


def _check_folder(option: str, value: str, folder: Path) -> None:
    """``folder`` exists (created) and this process can write there; else ValueError naming ``option``."""
    blocker = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ValueError(f"{option} {value}: {blocker} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ValueError(f"{option} {value}: cannot write there ({err.strerror or err})") from None


def checked_first(features: FeatureRequest, output: OutputRequest) -> None:
    """Everything that can be checked before loading data or a model.

    The embedding settings unless --embeddings gives the embeddings (:meth:`EmbedConfig.validate`,
    e.g. a --cache-dir that is a file; with --embeddings, any of them changed is refused: it would be
    ignored), --save-embeddings (a file this process can write; refused
    with --embeddings, which computes nothing to save) and --out.

    Args:
        features: where the embeddings come from (:class:`~.requests.FeatureRequest`).
        output: the output folder (:class:`~.requests.OutputRequest`).
    """
    if not features.embeddings:
        features.config()
    else:  # the embeddings are given: an encoding setting changed from its default would be ignored
        ignored = features.changed()
        if ignored:
            options = ", ".join("--" + name.replace("_", "-") for name in ignored)
            verb = "applies" if len(ignored) == 1 else "apply"
            raise ValueError(f"{options} only {verb} to computed embeddings, not with --embeddings")
    if features.save_embeddings:
        if features.embeddings:
            raise ValueError("--save-embeddings only applies to computed embeddings, not with --embeddings")
        check_file_out("--save-embeddings", features.save_embeddings)
    check_out(output.out)


def check_columns(table: pd.DataFrame, data: str, options: dict[str, str | None], complete: tuple = ()) -> None:
    """Each option's column (``{"--split-by": "prompt"}``; None: not asked) is a column of ``table``.

    The options in ``complete`` also need a value on every row. Checked after loading DATA and before
    embedding it, so a misspelt column fails in seconds.

    Args:
        table: DATA's comparison table.
        data: DATA, named in the errors.
        options: option -> the column it names (None: the option was not given).
        complete: the options whose column needs a value on every row (``--split-by``).

    Raises:
        ValueError: a column that is not in ``table``, or one of ``complete`` with a missing value (row and id named).
    """
    for option, column in options.items():
        if column is None:
            continue
        if column not in table.columns:
            names = ", ".join(map(str, table.columns))
            raise ValueError(f"{option} {column}: no such column in {data} (columns: {names})")
        missing = table[column].isna().to_numpy()
        if option in complete and missing.any():
            row = int(missing.argmax())
            raise ValueError(f"{option} {column}: {int(missing.sum())} rows of {data} have no value there, e.g. row "
                             f"{row + 1} (id {table['id'].iloc[row]!r})")  # fmt: skip


def check_labelled(table: pd.DataFrame, data: str) -> None:
    """Before embedding: some row of ``table`` (DATA ``data``) has a usable human label, else ValueError naming it."""
    from ..audit.prepare import check_labelled as check

    check(table, source=data)


def to_embed(table: pd.DataFrame, config, every: bool = False) -> pd.DataFrame:
    """The table whose usable rows :func:`features` embeds: ``table``, or it with every human label hidden.

    Hidden (so that a row a human tied is embedded too) where such a row is audited: under a guarantee with
    ``config.human_ties`` "disagree" it calibrates as a pool row; or with ``every`` (embeddings saved for
    ``quantify --with-audit``, which audits the ties with their labels hidden).

    Args:
        table: DATA's comparison table.
        config: the audit's settings (an :class:`~puaudit_jax.audit.AuditConfig`: its guarantee and human_ties).
        every: hide every human label (the embeddings are saved for ``quantify --with-audit``).
    """
    from ..datasets.verdicts import MISSING

    disagree = config.guarantee is not None and config.human_ties == "disagree"
    return table.assign(human=MISSING) if every or disagree else table


def features(
    request: FeatureRequest, table: pd.DataFrame, source: str, mesh=None, quiet: bool = False, judges: tuple = ()
):
    """PairEmbeddings from --embeddings, or computed by the probes encoder the options name.

    Args:
        request: where the embeddings come from (:class:`~.requests.FeatureRequest`).
        table: the comparison table whose usable rows are embedded.
        source: names the table in errors (DATA).
        mesh: spreads the encoder's batches (:func:`mesh_of`; None: one device).
        quiet: no progress bar.
        judges: a cascade's other judges, whose usable rows are embedded too.
    """
    from ..audit.embed import load_embeddings, save_embeddings, table_embeddings
    from ..datasets.comparisons import check_histories

    if request.embeddings:
        return load_embeddings(request.embeddings)
    config = request.config()
    check_histories(table, source=source)  # what the encoder needs, checked before loading it
    t = time.perf_counter()
    emb = table_embeddings(table, config, mesh=mesh, progress=not quiet, judges=judges)
    print(
        f"embedded {len(emb.ids)} comparisons with {config.resolved().encoder} (d={emb.dim}) in "
        f"{time.perf_counter() - t:.1f}s",
        file=sys.stderr,
    )
    if request.save_embeddings:
        save_embeddings(emb, request.save_embeddings)
    return emb


def output_folder(output: OutputRequest):
    """The locked :class:`RunFolder` of --out for the process that writes, else a context of None."""
    return RunFolder(output.out, list(output.argv)) if writes() else contextlib.nullcontext(None)


def add_data_options(p: argparse.ArgumentParser, data: bool = True) -> None:
    """DATA, where its embeddings come from, and the device flags."""
    if data:
        add_read_options(p)
        p.add_argument(
            "--include-unlabelled",
            action="store_true",
            default=None,
            help="bundled sets: add the judge-only comparisons (LLMFAO: 1,097 pairs)",
        )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--embeddings", help=".npz with arrays id, a, b (F(x, o_A), F(x, o_B))")
    add_options(src, EmbedConfig, include=("encoder",))
    add_options(p, EmbedConfig, include=EMBED_OWN_FIELDS)
    add_options(p, EncodeConfig, include=ENCODE_FIELDS, overrides={k: {"help": v} for k, v in ENCODE_OPTIONS.items()})
    p.add_argument("--save-embeddings", help="also write the computed embeddings to this .npz")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--no-figures", action="store_true", help="write no figures")
    add_device_arguments(p)
