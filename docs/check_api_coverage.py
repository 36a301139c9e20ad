"""Check that the built API pages document every public name (``__all__``) of the packages.

Usage, after ``make docs`` (or any ``sphinx-build -b html docs OUT``)::

    python docs/check_api_coverage.py build/docs/html

Collects the ``__all__`` of every module and package of ``puaudit_jax`` (its command line aside:
``docs/cli.md`` documents it), ``probes`` and ``puaudit_runtime`` and looks for each name's anchor
(``id="puaudit_jax.ot.solve_partial"``) in the built ``api/*.html``. A name a module re-exports from
another module counts as documented where it is defined (``probes.extract.EncodeConfig`` under
``probes.encode_config.EncodeConfig``), and one its package re-exports where the package's entry is
(``puaudit_jax.quantify.ranks.rank_sets`` under ``puaudit_jax.quantify.rank_sets``). Prints the names
without an entry and exits 1 if any.

It also reads the sources of the three packages (no build needed, :func:`args_gaps`): every public
function with 3 or more parameters (a ``def`` whose name does not start with ``_``, at module level or
a method of a module-level public class; ``self``/``cls``, ``*args`` and ``**kwargs`` not counted) has
a Google-style ``Args:`` section naming each parameter (``name:`` or ``name (type):``). The gaps are
printed, and make the exit status 1, too. ``tests/test_docstrings.py`` runs the same check.
"""

import ast
import importlib
import inspect
import pkgutil
import re
import sys
import warnings
from pathlib import Path

PACKAGES = ("puaudit_jax", "probes", "puaudit_runtime")
SKIP = ("puaudit_jax.cli",)  # documented on docs/cli.md
SKIP_NAMES = {"__version__"}  # shown in the page headers, not an API entry
ROOT = Path(__file__).resolve().parents[1]
MIN_PARAMETERS = 3  # a public function with this many parameters or more needs an Args: section
# Files being rewritten on other branches when the Args: rule came in; their docstrings follow on
# the merge. Empty now: every file passes.
IN_FLIGHT: set[str] = set()
_ENTRY = re.compile(r"^(\s+)\**(\w+)(?: \([^)]*\))?:")


def _documented(doc: str) -> set[str] | None:
    """The names the ``Args:`` section of a (cleaned) docstring lists, or None when it has none."""
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Args:"), None)
    if start is None:
        return None
    outer = len(lines[start]) - len(lines[start].lstrip())
    names, indent = set(), None
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= outer:
            break  # the next section
        entry = _ENTRY.match(line)
        if entry and indent in (None, len(entry.group(1))):
            indent = len(entry.group(1))
            names.add(entry.group(2))
    return names


def _public_functions(body, owner=""):
    """(qualified name, node) of the public functions and public-class methods in a module body."""
    for node in body:
        if isinstance(node, ast.ClassDef) and not owner and not node.name.startswith("_"):
            yield from _public_functions(node.body, node.name + ".")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            yield owner + node.name, node


def args_gaps(source: str, where: str = "<source>") -> list[str]:
    """The public functions of a module's text whose docstring lacks (part of) its ``Args:`` section.

    Args:
        source: the text of a Python module.
        where: the module's path, to prefix each gap with.

    Returns:
        ``where:line name: what is missing`` for each public function with ``MIN_PARAMETERS`` or more
        parameters without an ``Args:`` section or without an entry for one of its parameters
        (``*args``/``**kwargs`` entries are optional).
    """
    gaps = []
    for name, node in _public_functions(ast.parse(source).body):
        a = node.args
        params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
        if len(params) < MIN_PARAMETERS:
            continue
        documented = _documented(ast.get_docstring(node) or "")
        if documented is None:
            gaps.append(f"{where}:{node.lineno} {name}: no Args: section")
        elif missing := [p for p in params if p not in documented]:
            gaps.append(f"{where}:{node.lineno} {name}: Args: lacks {', '.join(missing)}")
    return gaps


def undocumented_args(skip=IN_FLIGHT) -> list[str]:
    """:func:`args_gaps` over every module of PACKAGES, the paths starting with an entry of ``skip`` aside."""
    gaps = []
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            if not where.startswith(tuple(skip)):
                gaps += args_gaps(path.read_text(), where)
    return gaps


def public_names():
    """(module, name, object) for each name of each ``__all__`` under PACKAGES."""
    for top in PACKAGES:
        package = importlib.import_module(top)
        names = [top] + [info.name for info in pkgutil.walk_packages(package.__path__, top + ".")]
        for modname in names:
            if modname.startswith(SKIP) or modname.endswith("__main__"):
                continue
            module = importlib.import_module(modname)
            for name in getattr(module, "__all__", ()):
                if name not in SKIP_NAMES:
                    yield modname, name, getattr(module, name)


def main(html: str) -> int:
    """Exit status 0 when every public name has an entry in the API pages under ``html``, else 1."""
    warnings.simplefilter("ignore")
    anchors = set()
    for page in Path(html, "api").glob("*.html"):
        anchors.update(re.findall(r'<dt class="sig sig-object py" id="([^"]+)"', page.read_text()))
    missing, checked = [], 0
    for modname, name, obj in public_names():
        checked += 1
        full = f"{modname}.{name}"
        defined = None
        if inspect.isclass(obj) or inspect.isfunction(obj):
            defined = f"{obj.__module__}.{obj.__qualname__}"
        parents = [modname.rsplit(".", i)[0] for i in range(1, modname.count(".") + 1)]
        reexported = {f"{p}.{name}" for p in parents if getattr(importlib.import_module(p), name, None) is obj}
        if full not in anchors and defined not in anchors and not reexported & anchors:
            missing.append(full)
    print(f"{checked} public names, {len(anchors)} API entries; missing: {len(missing)}")
    for full in missing:
        print("  ", full)
    gaps = undocumented_args()
    print(f"public functions with {MIN_PARAMETERS}+ parameters and an incomplete Args: section: {len(gaps)}")
    for gap in gaps:
        print("  ", gap)
    return 1 if missing or gaps else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/docs/html"))
