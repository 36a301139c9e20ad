"""`puaudit probe fit|predict`: BoRP regression probes from the command line.

    puaudit probe fit --data train.jsonl --target score --encoder smollm2 \
        [--rubric rubric.txt --criterion "user acceptance"] [--scale 1,5] [--layer -1] \
        [--components 8] [--resample geometric|label|none] [--seed 0] [--devices all|N] [--mesh 2x4] \
        --out probe.pkl
    puaudit probe predict --model probe.pkl --data test.jsonl [--devices all|N] --out predictions.csv

Data: .jsonl / .json (records) / .csv with either a `messages` column (a list of {"role", "content"},
the rated response last; JSON text in csv) or `prompt` and `response` columns (one user turn, one
assistant turn); `--target` names the human score column (fit only). An `id` column is carried over.
Encoders: a decoder ("smollm2" or a local HF folder) gives contrastive states with the blind prompt,
or with `--rubric` (a text file of "score: description" lines) the rubric prompt; an encoder
("minilm") gives the mean-pooled embedding of the dialogue text (no contrastive prompt).
Devices: `--devices` / `--mesh` (probes.mesh.make_mesh) split the extraction batches' rows and the
PLS fits' samples over several devices (data parallel; same results up to float rounding); the
saved probe does not depend on them. Default: one device.
Wire into puaudit_jax/cli.py with `add_probe_parser(subparsers)` and dispatch `run_probe(args)`.
"""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import numpy as np

from puaudit_runtime.files import atomic_path
from puaudit_runtime.flags import add_device_arguments

__all__ = ["add_probe_parser", "run_probe", "main"]


def add_probe_parser(subparsers) -> argparse.ArgumentParser:
    """Add the `probe` command (with `fit` and `predict`) to an argparse subparsers object."""
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
    """The Mesh that --devices / --mesh ask for (probes.mesh), or None for one device."""
    from puaudit_runtime.flags import mesh_from_args

    try:
        return mesh_from_args(args, join_cluster=False)
    except ValueError as err:
        raise SystemExit(f"--devices {args.devices} --mesh {args.mesh}: {err}") from None


def _describe(mesh) -> str:
    return "one device" if mesh is None else f"a mesh of {mesh.size} devices ({'x'.join(map(str, mesh.devices.shape))})"


def _read(path: str):
    import pandas as pd

    p = Path(path)
    if p.suffix == ".jsonl":
        table = pd.read_json(p, lines=True)
    elif p.suffix == ".json":
        table = pd.DataFrame(json.loads(p.read_text()))
    elif p.suffix == ".csv":
        table = pd.read_csv(p)
    else:
        raise SystemExit(f"{path}: expected .jsonl, .json or .csv")
    if "messages" in table:
        msgs = [json.loads(m) if isinstance(m, str) else list(m) for m in table["messages"]]
    elif {"prompt", "response"} <= set(table.columns):
        msgs = [
            [{"role": "user", "content": str(q)}, {"role": "assistant", "content": str(r)}]
            for q, r in zip(table["prompt"], table["response"])
        ]
    else:
        raise SystemExit(f"{path}: needs a 'messages' column or 'prompt' and 'response' columns")
    for i, m in enumerate(msgs):
        if not m or not all(isinstance(t, dict) and {"role", "content"} <= set(t) for t in m):
            raise SystemExit(f"{path}: row {i}: messages must be a non-empty list of {{role, content}}")
    return table, msgs


def _features(spec: dict, msgs, mesh=None):
    """Features (n, d) of the dialogues `msgs` as `spec` says; `mesh` splits the batches' rows."""
    from probes.models import load_pretrained

    pre = load_pretrained(spec["encoder"])
    if pre.config.is_decoder:
        from probes.borp import ProbePrompt, contrastive_vectors

        probe = ProbePrompt(**{**spec["probe"], "scale": tuple(spec["probe"]["scale"])})
        return contrastive_vectors(pre, msgs, [probe], layers=spec["layer"], progress=True, mesh=mesh)[:, 0]
    from probes.extract import encode

    return encode(pre, [" ".join(t["content"] for t in m) for m in msgs], progress=True, mesh=mesh)


def _dump_atomic(path: Path, write) -> None:
    """``write(f)`` into a binary file object that becomes ``path`` atomically (:func:`probes.files.atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        write(f)


def run_probe(args) -> int:
    from probes import borp

    mesh = _mesh(args)
    if args.probe_command == "fit":
        table, msgs = _read(args.data)
        if args.target not in table:
            raise SystemExit(f"{args.data}: no column {args.target!r}")
        y = table[args.target].to_numpy(float)
        if np.isnan(y).any():
            raise SystemExit(f"{args.data}: {int(np.isnan(y).sum())} rows without a {args.target!r} score")
        scale = tuple(float(v) for v in args.scale.split(","))
        probe = (
            borp.rubric_probe(args.criterion, Path(args.rubric).read_text(), scale=scale)
            if args.rubric
            else borp.blind_probe(scale)
        )
        spec = dict(encoder=args.encoder, layer=args.layer, probe=dict(probe.__dict__))
        V = _features(spec, msgs, mesh)
        cfg = borp.HeadConfig(
            n_components=args.components,
            scale=scale,
            seed=args.seed,
            resample=None if args.resample == "none" else args.resample,
        )
        head = borp.BorpHead(cfg, mesh=mesh).fit(V, y)
        fitted = head.predict(V)
        r = borp.agreement(y, fitted) if np.ptp(y) > 0 else {}
        _dump_atomic(Path(args.out), lambda f: pickle.dump(dict(spec=spec, head=head, n_train=len(y)), f))
        print(
            f"fitted on {len(y)} rows ({V.shape[1]} features) on {_describe(mesh)}; "
            f"in-sample K-alpha {r.get('k_alpha', float('nan')):.3f} "
            f"Pearson {r.get('pearson', float('nan')):.3f}; wrote {args.out}"
        )
        return 0
    if args.probe_command == "predict":
        with open(args.model, "rb") as f:
            model = pickle.load(f)
        table, msgs = _read(args.data)
        pred = model["head"].predict(_features(model["spec"], msgs, mesh))
        import pandas as pd

        out = pd.DataFrame({"id": table["id"] if "id" in table else np.arange(len(pred)), "prediction": pred})
        _dump_atomic(Path(args.out), lambda f: f.write(out.to_csv(index=False).encode()))
        print(f"wrote {len(pred)} predictions to {args.out} (features on {_describe(mesh)})")
        return 0
    raise SystemExit(f"unknown probe command {args.probe_command!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="puaudit")
    add_probe_parser(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(argv)
    return run_probe(args)


if __name__ == "__main__":
    raise SystemExit(main())
