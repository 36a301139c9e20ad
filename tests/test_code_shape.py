"""The shape of the code the issues ask for: short functions, one direction of imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_long_function_without_a_reason():
    """No function in puaudit_jax/ or probes/ is longer than ~60 lines unless a ``# long:`` comment
    above its ``def`` (or decorators) says why."""
    long = []
    for package in ("puaudit_jax", "probes"):
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = path.read_text().splitlines()
            for node in _functions(ast.parse("\n".join(lines))):
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                reason = start >= 2 and lines[start - 2].strip().startswith("# long:")
                if node.end_lineno - node.lineno + 1 > LIMIT and not reason:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert long == []


def test_probes_never_imports_puaudit_jax():
    offenders = []
    for path in sorted((ROOT / "probes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "puaudit_jax" for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_one_atomic_write_helper():
    """``os.replace`` (the atomic step) appears only in probes/files.py and in the one directory
    writer that needs it for whole folders (probes/models/gguf_convert.py)."""
    allowed = {"probes/files.py", "probes/models/gguf_convert.py"}
    users = {
        str(p.relative_to(ROOT))
        for folder in ("puaudit_jax", "probes", "experiments", "theory")
        for p in (ROOT / folder).rglob("*.py")
        if "os.replace(" in p.read_text()
    }
    assert users <= allowed, sorted(users - allowed)
