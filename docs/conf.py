"""Sphinx configuration for the puaudit-jax documentation (``make docs``).

Built with ``sphinx-build -W --keep-going -b html docs build/docs/html``: every warning (a broken
reference, a docstring that does not parse, a tutorial cell that raises) fails the build. The
tutorials in ``docs/tutorials/`` are MyST notebooks executed by myst-nb at build time; their outputs
are cached per machine, under a key of the code they run (:func:`_execution_cache`), so an unchanged
tutorial on unchanged code is not run again, in this clone or a fresh one.
"""

import hashlib
import importlib
import inspect
import os
import re
import shutil
import sys
from pathlib import Path

from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # the packages, and `experiments` / `theory` for the tutorials

# Kernels started by myst-nb inherit this environment: one thread per op, no hub access.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

project = "puaudit-jax"
author = "puaudit-jax contributors"
copyright = "puaudit-jax contributors, Apache-2.0"
release = version = importlib.import_module("puaudit_jax._version").__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx.ext.mathjax",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "jupyter_execute"]
root_doc = "index"

# --- MyST ---------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# --- myst-nb: execute every tutorial at build time, fail on any error ---------------------------
nb_execution_mode = os.environ.get("PUAUDIT_DOCS_EXECUTE", "cache")


def _execution_cache() -> str:
    """The jupyter-cache folder: ``$PUAUDIT_DOCS_CACHE`` or ``~/.cache/puaudit-jax/jupyter-cache``, then a key.

    jupyter-cache reuses a notebook's outputs when its code cells are unchanged; they also depend on
    the library, its bundled data, the experiments and theory modules they import and the pinned
    dependencies, so the folder is keyed by a hash of every file of those folders and of
    ``setup.cfg``: a changed line of library code reruns every tutorial, a changed page reruns none.
    """
    folders = ("puaudit_jax", "probes", "puaudit_runtime", "experiments", "theory")
    digest = hashlib.sha256()
    for path in sorted(p for folder in folders for p in (ROOT / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update((ROOT / "setup.cfg").read_bytes())
    base = os.environ.get("PUAUDIT_DOCS_CACHE") or Path.home() / ".cache" / "puaudit-jax" / "jupyter-cache"
    return str(Path(base) / digest.hexdigest()[:16])


nb_execution_cache_path = _execution_cache()
nb_execution_timeout = 300  # seconds per cell
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_excludepatterns = []
nb_merge_streams = True
nb_output_stderr = "remove"  # progress bars and library warnings (with the build machine's paths) stay off the pages

# --- autodoc ------------------------------------------------------------------------------------
autodoc_default_options = {"members": True, "show-inheritance": False, "member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes:" as fields, not as a second description of each attribute

# --- HTML ---------------------------------------------------------------------------------------
html_theme = "furo"
html_title = "puaudit-jax"
html_static_path = []
html_show_sourcelink = True


def _copy_result_figures(app):
    """Copy the committed figures of ``results/`` into ``docs/_generated/`` (gitignored).

    The results pages then show them with paths inside the source folder.
    """
    out = DOCS / "_generated" / "results"
    out.mkdir(parents=True, exist_ok=True)
    for png in sorted((ROOT / "results").rglob("*.png")):
        dest = out / png.relative_to(ROOT / "results")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists() or dest.stat().st_mtime < png.stat().st_mtime:
            shutil.copy2(png, dest)


# --- docstrings: reST, parsed like every page -------------------------------------------------------
# Docstrings are Google style (napoleon) with reST markup, so a malformed one (an undefined |x|
# substitution, a broken table, an unexpected indentation) is a warning that fails the -W build.
# ASCII maths goes in double backticks (``0 < m <= min(|a|, |b|)``), displayed formulas and aligned
# listings in ``::`` literal blocks. The :ref:/:term:/:doc: roles of docstrings name labels of other
# projects' sites (no intersphinx here), so they are shown as literal text.
_OURS = ("puaudit_jax", "probes", "puaudit_runtime")
_UNRESOLVABLE = re.compile(r":(?:ref|term|doc):`([^`]*)`")  # labels of other projects' sites


def _docstring(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        lines[i] = _UNRESOLVABLE.sub(lambda m: "``" + m.group(1) + "``", line)


def _constant_doc(app, what, name, obj, options, lines):
    """A constant's ``#:`` comment, where it is defined, in place of its type's docstring.

    autodoc documents a constant re-exported by a package (``puaudit_jax.audit.DEFAULT_RULE``) or
    one without a ``#:`` comment with the docstring of its type (``str(object='') -> str``); the API
    pages' tables would show that line. Look the comment up in the modules under the name's parent
    instead, and leave the entry without a description where there is none.
    """
    doc = getattr(type(obj), "__doc__", None)
    if what != "data" or not lines or not doc or lines[0].strip() != inspect.cleandoc(doc).splitlines()[0].strip():
        return
    parent, short = name.rsplit(".", 1)
    lines[:] = []
    for modname in sorted(m for m in list(sys.modules) if m == parent or m.startswith(parent + ".")):
        if getattr(sys.modules[modname], short, None) is not obj:
            continue
        try:
            comment = ModuleAnalyzer.for_module(modname).find_attr_docs().get(("", short))
        except PycodeError:
            continue
        if comment:
            lines[:] = list(comment)
            return


def _reexported(app, env, node, contnode):
    """Resolve a reference to a module's name that the API pages document under its package.

    A name a package re-exports has one entry, under the package (``puaudit_jax.audit.Guarantee``);
    a docstring's ``:class:`~puaudit_jax.audit.guarantee.Guarantee``` links to it.
    """
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    target, module = node.get("reftarget", ""), node.get("py:module") or ""
    if not target.startswith(_OURS):
        # A table's one-line summary is read in its package's context, and a module's docstring may
        # name a class its package exports: a short name (``:class:`CalibratedRule``` in
        # ``puaudit_jax.audit.rules``) links to the one entry under the module, or else under its
        # packages (``puaudit_jax.audit``, ``puaudit_jax``), that ends that way.
        while module.startswith(_OURS):
            found = [name for name in domain.objects if name.startswith(module + ".") and name.endswith("." + target)]
            if len(found) == 1:
                return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], found[0], node, contnode)
            if found or "." not in module:
                return None
            module = module.rsplit(".", 1)[0]
        return None
    parts = target.split(".")
    for i in range(len(parts) - 2, 0, -1):
        alias = ".".join(parts[:i] + parts[-1:])
        if alias in domain.objects and _same_object(target, alias):
            return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], alias, node, contnode)
    return None


def _same_object(name, alias):
    def lookup(dotted):
        module, attr = dotted.rsplit(".", 1)
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            return lookup.missing

    lookup.missing = object()
    found = lookup(name)
    return found is not lookup.missing and found is lookup(alias)


def _skip(app, what, name, obj, skip, options):
    module = getattr(obj, "__module__", None) or ""
    if what == "module" and callable(obj) and module and not module.startswith(_OURS):
        return True  # re-exported third-party helpers (scipy's kendalltau) belong to their own docs
    return None


def setup(app):
    """Register the figure copy, the docstring hooks and the references to re-exported names."""
    app.connect("builder-inited", _copy_result_figures)
    app.connect("autodoc-process-docstring", _constant_doc, priority=100)
    app.connect("autodoc-process-docstring", _docstring, priority=900)
    app.connect("autodoc-skip-member", _skip)
    app.connect("missing-reference", _reexported)
