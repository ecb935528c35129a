#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, docs/*.md, the API reference from the docstrings) with
# warnings as errors: a broken link or anchor, a page left out of the navigation or a docstring the
# reference cannot render fails the build. Sets up .venv (if needed) with the `docs` extra first.
#   bash scripts/docs.sh              # into site/ (git-ignored); open site/index.html
#   bash scripts/docs.sh -d DIR       # any `mkdocs build` arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. scripts/_install.sh
INSTALL_STAMP=docs install_once .venv -e ".[docs]"
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2.0 is not about this site
NO_MKDOCS_2_WARNING=1 exec .venv/bin/python -m mkdocs build --strict "$@"
