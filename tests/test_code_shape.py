"""The shape of the code the issues ask for: short functions, one direction of imports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 60


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _code_lines(node) -> int:
    """Lines of a function from its ``def`` to its end, its docstring left out (documentation is no length)."""
    body = node.body
    doc = body[0] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else None
    skipped = doc.end_lineno - doc.lineno + 1 if doc is not None and isinstance(doc.value.value, str) else 0
    return node.end_lineno - node.lineno + 1 - skipped


def test_no_long_function_without_a_reason():
    """No function in the packages is longer than ~60 lines of code (docstring excluded) unless a
    ``# long:`` comment above its ``def`` (or decorators) says why."""
    long = []
    for package in ("puaudit_runtime", "puaudit_jax", "probes"):
        for path in sorted((ROOT / package).rglob("*.py")):
            lines = path.read_text().splitlines()
            for node in _functions(ast.parse("\n".join(lines))):
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                reason = start >= 2 and lines[start - 2].strip().startswith("# long:")
                if _code_lines(node) > LIMIT and not reason:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert long == []


# The layering, as a rule table: each unit (a package, or a package of puaudit_jax) and the
# first-party units it may import. Everything else is forbidden; nothing imports experiments or
# theory (tests may). Read top to bottom it is the architecture, from the bottom floor up.
RUNTIME, PROBES = "puaudit_runtime", "probes"
DATASETS, OT, CONSENSUS, JUDGES, QUANTIFY, AUDIT, EVALUATE, CLI = (
    f"puaudit_jax.{name}" for name in ("datasets", "ot", "consensus", "judges", "quantify", "audit", "evaluate", "cli")
)
VERSION = "puaudit_jax._version"  # the version string alone: the package's __init__ and the CLI read it
LIBRARY = {DATASETS, OT, CONSENSUS, JUDGES, QUANTIFY, AUDIT, EVALUATE, CLI}
LAYERS = {
    VERSION: set(),
    RUNTIME: set(),
    PROBES: {RUNTIME},
    DATASETS: {RUNTIME},
    OT: {RUNTIME},
    CONSENSUS: {RUNTIME, DATASETS},
    JUDGES: {RUNTIME, PROBES, DATASETS},
    QUANTIFY: {RUNTIME, DATASETS, CONSENSUS},
    AUDIT: {RUNTIME, PROBES, DATASETS, OT, QUANTIFY},
    EVALUATE: {RUNTIME, DATASETS, QUANTIFY, AUDIT},
    CLI: {RUNTIME, PROBES, VERSION} | LIBRARY,
    "theory": {RUNTIME, PROBES} | LIBRARY,
    "experiments": {RUNTIME, PROBES} | LIBRARY,
}
FIRST_PARTY = ("puaudit_runtime", "probes", "puaudit_jax", "experiments", "theory", "tests")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(line, imported module) of every import in ``path``, relative ones resolved; names imported
    from a package that are modules count as those modules."""
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            yield node.lineno, base
            for a in node.names:
                sub = ROOT / Path(*f"{base}.{a.name}".split("."))
                if sub.with_suffix(".py").exists() or (sub / "__init__.py").exists():
                    yield node.lineno, f"{base}.{a.name}"


def _unit(module: str) -> str | None:
    """The unit of the rule table that ``module`` belongs to (the longest matching entry)."""
    found = [u for u in (*LAYERS, "tests") if module == u or module.startswith(u + ".")]
    return max(found, key=len) if found else None


def _sources():
    for unit in ("puaudit_runtime", "probes", "puaudit_jax", "experiments", "theory"):
        yield from sorted((ROOT / unit).rglob("*.py"))


def test_imports_follow_the_rule_table():
    """Every first-party import goes down the table (or stays inside its own unit)."""
    offenders = []
    for path in _sources():
        own = _unit(_module(path))
        for line, target in _imports(path):
            if target.split(".")[0] not in FIRST_PARTY or target == "puaudit_jax":  # its __init__: the version
                continue
            unit = _unit(target)
            if unit is None:
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {target} (in no unit of the table)")
            elif own is not None and unit != own and unit not in LAYERS.get(own, set()):
                offenders.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {target} ({unit})")
    assert offenders == []


def test_no_import_cycle():
    """No first-party module imports itself through others (imports inside functions included)."""
    graph = {}
    for path in _sources():
        me = _module(path)
        targets = {t for _, t in _imports(path) if t.split(".")[0] in FIRST_PARTY and t != me}
        graph[me] = {t for t in targets if not me.startswith(t + ".")}  # a package's own __init__ is no edge
    cycles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_one_atomic_write_helper():
    """``os.replace`` (the atomic step) appears only in puaudit_runtime/files.py and in the two
    writers of whole folders (probes/models/gguf_convert.py; cli/run_folder.py, whose commit moves a
    run's staged files into its output folder)."""
    allowed = {"puaudit_runtime/files.py", "probes/models/gguf_convert.py", "puaudit_jax/cli/run_folder.py"}
    users = {
        str(p.relative_to(ROOT))
        for folder in ("puaudit_runtime", "puaudit_jax", "probes", "experiments", "theory")
        for p in (ROOT / folder).rglob("*.py")
        if "os.replace(" in p.read_text()
    }
    assert users <= allowed, sorted(users - allowed)


def test_tests_seed_reproducibly():
    """No test seeds from Python's ``hash`` (salted per process for strings: new data on every run) or
    draws from an unseeded generator; randomised tests take the ``rng`` fixture or a fixed seed."""
    unseeded = re.compile(
        r"(default_rng|seed|PRNGKey|key)\([^)]*hash\(|default_rng\(\)"
        r"|np\.random\.(rand|randn|normal|uniform|choice|permutation)\("
    )
    offenders = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in (ROOT / "tests").rglob("*.py")
        if p.name != "test_code_shape.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if unseeded.search(line)
    ]
    assert offenders == []
