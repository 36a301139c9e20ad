"""``puaudit probe fit | predict``: BoRP regression probes from the command line.

    puaudit probe fit --data train.jsonl --target score --encoder smollm2 \
        [--rubric rubric.txt --criterion "user acceptance"] [--scale 1,5] [--layer -1] \
        [--components 8] [--resample geometric|label|none] [--seed 0] [--devices all|N] [--mesh 2x4] \
        --out probe.pkl
    puaudit probe predict --model probe.pkl --data test.jsonl [--devices all|N] --out predictions.csv

The data format, the encoders and the probe file are :mod:`probes.fitted`'s; ``--target`` names the
human score column (fit only); an ``id`` column is carried over to the predictions. ``--devices`` /
``--mesh`` split the extraction batches' rows and the PLS fits' samples over several devices (one
process; the saved probe does not depend on them).

``--components`` above min(rows - 1, head features) is an error naming the maximum (checked against
the rows before any model is loaded), as scikit-learn's PLSRegression refuses n_components above its
bound; when a resample has too few distinct rows for it, a ``warning:`` line on stderr says with how
many components the heads were fitted (the probe file records them). A ``--model`` file that is not
a probe written by ``puaudit probe fit`` is a one-line error naming it.

The options of ``fit`` and their defaults come from :class:`probes.config.FitConfig` (through
:mod:`.options`). The probe modules (and scikit-learn, which their PLS needs) are imported by
``probe`` only, so the other commands run without scikit-learn.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from probes.config import FitConfig
from puaudit_runtime.flags import DeviceFlags, add_device_arguments, build_mesh

from .options import add_options
from .requests import FIT_RENAME, ProbeRequest, probe_request


def add_probe_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``probe`` command (with ``fit`` and ``predict``) to an argparse subparsers object."""
    probe = subparsers.add_parser("probe", help="BoRP regression probes (fit / predict)")
    sub = probe.add_subparsers(dest="probe_command", required=True)
    fit = sub.add_parser("fit", help="fit a probe on human scores")
    fit.add_argument(
        "--data",
        required=True,
        help="table of dialogues (a messages column) with a human score (.jsonl / .json / .csv)",
    )
    fit.add_argument("--target", required=True, help="column with the human score")
    add_options(fit, FitConfig, rename=FIT_RENAME, overrides={"scale": {"metavar": "LOW,HIGH"}})
    fit.add_argument("--out", required=True, help="probe file (.pkl)")
    add_device_arguments(fit, cluster=False, what="the hidden-state extraction and the PLS fits")
    pred = sub.add_parser("predict", help="score new data with a fitted probe")
    pred.add_argument("--model", required=True, help="a probe file written by probe fit (.pkl)")
    pred.add_argument("--data", required=True, help="table of dialogues to score (.jsonl / .json / .csv)")
    pred.add_argument("--out", required=True, help="predictions (.csv)")
    add_device_arguments(pred, cluster=False, what="the hidden-state extraction")
    probe.set_defaults(func=cmd_probe)
    return probe


def _mesh(devices: DeviceFlags):
    """The Mesh that --devices / --mesh ask for, or None for one device."""
    try:
        return build_mesh(devices, join_cluster=False)
    except ValueError as err:
        raise SystemExit(f"--devices {devices.devices} --mesh {devices.mesh}: {err}") from None


def _describe(mesh) -> str:
    return "one device" if mesh is None else f"a mesh of {mesh.size} devices ({'x'.join(map(str, mesh.devices.shape))})"


def _probe_modules():
    """(probes.borp, probes.fitted), imported on first use; without scikit-learn a one-line error."""
    try:
        from probes import borp, fitted
    except ModuleNotFoundError as err:
        if err.name != "sklearn" and not str(err.name).startswith("sklearn."):
            raise
        raise SystemExit("error: puaudit probe needs scikit-learn (pip install scikit-learn)") from None
    return borp, fitted


def _fit(request: ProbeRequest, mesh) -> int:
    _, fitted = _probe_modules()
    config, data, out = request.fit, request.data, request.out
    try:  # before the data are read and encoded
        config.validate()
    except ValueError as err:
        raise ValueError(f"--{err}") from None
    table, dialogues = fitted.read_dialogues(data)
    try:  # before any model is loaded: the rows alone bound the components
        fitted.check_components(config.n_components, len(table), name="--components")
    except ValueError as err:
        raise ValueError(f"{err} in {data}") from None
    rubric = Path(config.rubric).read_text() if config.rubric else None
    spec = fitted.prompt_spec(config.encoder, config.layer, config.scale, rubric, config.criterion)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"n_components=.*too few distinct rows")  # said below
            probe = fitted.fit_probe(table, dialogues, request.target, spec, config.head_config(), mesh)
    except ValueError as err:
        raise ValueError(f"{data}: {err}") from None
    fitted.save_probe(probe, out)
    _report_fit(out, config, probe, mesh)
    return 0


def _report_fit(out: str, config: FitConfig, probe, mesh) -> None:
    """The fit's summary line on stdout, and a ``warning:`` line on stderr when a head got fewer components."""
    k = probe.components
    if min(k) < config.n_components:
        print(
            f"warning: --components {config.n_components}: the resampled training sets have too few distinct "
            f"rows; the heads were fitted with {min(k)} to {max(k)} components (recorded in {out})",
            file=sys.stderr,
        )
    r = probe.in_sample
    print(
        f"fitted on {probe.n_train} rows ({probe.n_features} features, {min(k)} components) on {_describe(mesh)}; "
        f"in-sample K-alpha {r.get('k_alpha', float('nan')):.3f} "
        f"Pearson {r.get('pearson', float('nan')):.3f}; wrote {out}"
    )


def _predict(request: ProbeRequest, mesh) -> int:
    import numpy as np
    import pandas as pd

    from puaudit_runtime.files import write_csv

    _, fitted = _probe_modules()
    probe = fitted.load_probe(request.model)
    table, dialogues = fitted.read_dialogues(request.data)
    pred = probe.predict(dialogues, mesh)
    ids = table["id"] if "id" in table else np.arange(len(pred))
    write_csv(pd.DataFrame({"id": ids, "prediction": pred}), request.out)
    print(f"wrote {len(pred)} predictions to {request.out} (features on {_describe(mesh)})")
    return 0


def cmd_probe(args) -> int:
    """``puaudit probe <fit | predict>``: the request read from the command line (:func:`~.requests.probe_request`)."""
    return run_probe(probe_request(args))


def run_probe(request: ProbeRequest) -> int:
    """The mesh, then the fit or the prediction."""
    mesh = _mesh(request.devices)
    return {"fit": _fit, "predict": _predict}[request.command](request, mesh)
