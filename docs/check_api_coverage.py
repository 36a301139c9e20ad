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
"""

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
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/docs/html"))
