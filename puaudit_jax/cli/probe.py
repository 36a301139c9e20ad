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
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from probes import borp
from probes.fitted import fit_probe, load_probe, prompt_spec, read_dialogues, save_probe
from puaudit_runtime.files import write_csv
from puaudit_runtime.flags import add_device_arguments, mesh_from_args


def add_probe_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``probe`` command (with ``fit`` and ``predict``) to an argparse subparsers object."""
    probe = subparsers.add_parser("probe", help="BoRP regression probes (fit / predict)")
    sub = probe.add_subparsers(dest="probe_command", required=True)
    fit = sub.add_parser("fit", help="fit a probe on human scores")
    fit.add_argument("--data", required=True)
    fit.add_argument("--target", required=True, help="column with the human score")
    fit.add_argument("--encoder", default="smollm2", help="smollm2 | minilm | a local HF folder")
    fit.add_argument("--rubric", default=None, help="text file: one 'score: description' line per score")
    fit.add_argument("--criterion", default="overall quality")
    fit.add_argument("--scale", default="1,5", help="low,high of the scores (predictions are clipped)")
    fit.add_argument("--layer", type=int, default=-1)
    fit.add_argument("--components", type=int, default=8)
    fit.add_argument("--resample", default="geometric", choices=["geometric", "label", "none"])
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--out", required=True, help="probe file (.pkl)")
    add_device_arguments(fit, cluster=False, what="the hidden-state extraction and the PLS fits")
    pred = sub.add_parser("predict", help="score new data with a fitted probe")
    pred.add_argument("--model", required=True)
    pred.add_argument("--data", required=True)
    pred.add_argument("--out", required=True, help="predictions (.csv)")
    add_device_arguments(pred, cluster=False, what="the hidden-state extraction")
    probe.set_defaults(func=run_probe)
    return probe


def _mesh(args):
    """The Mesh that --devices / --mesh ask for, or None for one device."""
    try:
        return mesh_from_args(args, join_cluster=False)
    except ValueError as err:
        raise SystemExit(f"--devices {args.devices} --mesh {args.mesh}: {err}") from None


def _describe(mesh) -> str:
    return "one device" if mesh is None else f"a mesh of {mesh.size} devices ({'x'.join(map(str, mesh.devices.shape))})"


def _fit(args, mesh) -> int:
    table, dialogues = read_dialogues(args.data)
    scale = tuple(float(v) for v in args.scale.split(","))
    rubric = Path(args.rubric).read_text() if args.rubric else None
    spec = prompt_spec(args.encoder, args.layer, scale, rubric, args.criterion)
    config = borp.HeadConfig(n_components=args.components, scale=scale, seed=args.seed,
                             resample=None if args.resample == "none" else args.resample)  # fmt: skip
    try:
        probe = fit_probe(table, dialogues, args.target, spec, config, mesh)
    except ValueError as err:
        raise ValueError(f"{args.data}: {err}") from None
    save_probe(probe, args.out)
    r = probe.in_sample
    print(
        f"fitted on {probe.n_train} rows ({probe.n_features} features) on {_describe(mesh)}; "
        f"in-sample K-alpha {r.get('k_alpha', float('nan')):.3f} "
        f"Pearson {r.get('pearson', float('nan')):.3f}; wrote {args.out}"
    )
    return 0


def _predict(args, mesh) -> int:
    probe = load_probe(args.model)
    table, dialogues = read_dialogues(args.data)
    pred = probe.predict(dialogues, mesh)
    ids = table["id"] if "id" in table else np.arange(len(pred))
    write_csv(pd.DataFrame({"id": ids, "prediction": pred}), args.out)
    print(f"wrote {len(pred)} predictions to {args.out} (features on {_describe(mesh)})")
    return 0


def run_probe(args) -> int:
    """Dispatch ``puaudit probe <fit | predict>``."""
    mesh = _mesh(args)
    return {"fit": _fit, "predict": _predict}[args.probe_command](args, mesh)
