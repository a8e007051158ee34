"""Sphinx configuration of the xlikert documentation.

Build (what ``tests/test_docs.py`` runs, warnings as errors)::

    python -m sphinx -W --keep-going -E -b html docs docs/_build/html

Pages are Markdown (MyST) except the API reference (reST, autosummary). The
walkthrough notebook is executed at build time (myst-nb), so its figures are current.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import sphinx_autosummary_accessors

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # the working tree's xlikert, not another install
# ... also in the notebook's kernel, a child process
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
sys.path.insert(0, str(HERE / "_ext"))

import xlikert_docs  # noqa: E402

import xlikert  # noqa: E402

# The API reference is written from the one list of the public API (xlikert.api.API)
# and docs/_ext/api.rst.tmpl: a renamed or added function is on the page at once.
xlikert_docs.write_api_reference()

# Every build starts from scratch (no stale page survives a renamed function): the API
# stubs are regenerated, and the notebook is copied in beside the pages (Sphinx reads
# sources under docs/ only). Both folders are ignored by git.
GENERATED = HERE / "generated"
shutil.rmtree(GENERATED, ignore_errors=True)
NOTEBOOKS = HERE / "examples" / "notebooks"
shutil.rmtree(NOTEBOOKS, ignore_errors=True)
NOTEBOOKS.mkdir(parents=True)
for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
    shutil.copy2(notebook, NOTEBOOKS / notebook.name)

project = "xlikert"
author = "the xlikert authors"
copyright = "the xlikert authors"
version = release = xlikert.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",
    "sphinx_autosummary_accessors",
    "sphinx_click",
    "xlikert_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]
templates_path = ["_templates", sphinx_autosummary_accessors.templates_path]

# -- API reference --------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # the numpydoc sections give the types
autodoc_default_options = {"member-order": "bysource"}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# No intersphinx: CI builds offline (package registries only), and an inventory it
# cannot fetch is a warning, so an error under -W. References to numpy, pandas and
# xarray objects stay plain text.
nitpicky = False

# -- Markdown and notebooks ------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath", "deflist", "substitution"]
myst_heading_anchors = 3
# The walkthrough notebook is executed at every build (in a temporary folder): its
# figures then need no committed PNG outputs, and an error in it fails the build.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 300
nb_execution_in_temp = True
nb_output_stderr = "remove"  # progress-bar and library warnings, not part of the analysis
nb_merge_streams = True

# -- HTML -------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "xlikert"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
}
html_context = {"default_mode": "light"}
