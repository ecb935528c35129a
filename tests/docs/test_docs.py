"""The README is what a newcomer reads in five minutes; the rest is the documentation site.

The site is ``docs/*.md`` built by MkDocs (``mkdocs.yml``, ``bash scripts/docs.sh``) with an API
reference generated from the docstrings. These tests keep the README short, its links to the pages
working, every page in the site's navigation, and the site building with warnings as errors (a
broken link or anchor, a page left out of the navigation, a docstring the reference cannot render).
The build needs the ``docs`` extra (``pip install -e ".[docs]"``, what ``scripts/docs.sh`` does) and
is skipped without it; the transcripts on the pages are checked by ``tests/docs/test_readme.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250

_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _local_links(text: str) -> list[str]:
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_the_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines; move details to a page under docs/ (at most {MAX_README_LINES})"


def test_the_readme_says_what_a_newcomer_needs():
    text = README.read_text()
    for what in ("bash scripts/demo.sh", "bash scripts/test.sh", "```console", "smtdims.install(", "smtdims.bounds(",
                 "smtdims.decide(", "smtdims.export_and_verify(", "docs/limits.md", "docs/reference.md"):
        assert what in text, what
    # the two commands say what they cost
    assert re.search(r"scripts/demo\.sh.*\((about )?\d+ s\)", text) and re.search(r"scripts/test\.sh.*\((about )?\d+ min", text)


# What changes with every commit is generated or left out; history is the CHANGELOG's.
_COUNTS = re.compile(r"\b\d[\d,]*\s+(?:more\s+)?(?:tests?|test cases|passed|skipped)\b|\b\d[\d,]*\s+more\)", re.I)
_HISTORY = re.compile(r"\bissues?\s+#?\d+|\bnew-user pass\b|\bmeasured on \d{4}-\d\d-\d\d|\(\d{4}-\d\d-\d\d\b", re.I)


def _numbers_that_go_stale(text: str) -> list[str]:
    return [m.group(0) for m in _COUNTS.finditer(text)] + [m.group(0) for m in _HISTORY.finditer(text)]


def test_the_first_pages_hold_no_test_counts_and_no_history():
    """README.md and docs/install.md (what a new user reads first) state no count of tests (it changes
    with every commit: "1,084 tests" stood while the run collected 1,226) and no project history (which
    pass or issue measured what, and when): that is CHANGELOG.md's."""
    for page in (README, DOCS / "install.md"):
        found = _numbers_that_go_stale(page.read_text())
        assert not found, f"{page.name}: {found}: leave counts out (or generate them) and move history to CHANGELOG.md"


def test_the_stale_number_guard_catches_what_it_is_for():
    assert _numbers_that_go_stale("then 1,084 tests in 2 min 56 s; the soak tests (stress: 21 more) run") == [
        "1,084 tests", "21 more)"]
    assert _numbers_that_go_stale("a fresh clone (the third new-user pass, issue 29), measured on 2026-12-04") == [
        "new-user pass", "issue 29", "measured on 2026-12-04"]
    assert _numbers_that_go_stale("about 4 min on a 2-core machine; jax 0.10.2, 0.7.2; Python >= 3.11; 512 rows") == []


def test_every_page_the_readme_links_exists():
    links = _local_links(README.read_text())
    assert sum(t.startswith("docs/") for t in links) >= 10
    for target in links:
        path = target.split("#")[0]
        assert (ROOT / path).exists(), f"README.md links {target}, which the repository does not have"


def test_every_link_between_pages_resolves():
    for page in DOCS.glob("*.md"):
        for target in _local_links(page.read_text()):
            path = target.split("#")[0]
            assert path and (page.parent / path).resolve().is_file(), f"{page.name} links {target}"
            assert (page.parent / path).resolve().is_relative_to(DOCS), f"{page.name} links {target} outside docs/"


def test_every_page_is_in_the_navigation():
    nav = re.findall(r"^\s*-\s.*?(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert sorted(nav) == sorted(p.name for p in DOCS.glob("*.md"))
    assert nav[0] == "index.md"


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]' (bash scripts/docs.sh)")
    pytest.importorskip("material", reason="the docs extra (mkdocs-material)")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra (mkdocstrings-python)")
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    for page in DOCS.glob("*.md"):
        html = site / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert html.is_file(), html
    reference = (site / "reference" / "index.html").read_text()
    for name in ("smtdims.bounds", "smtdims.decide", "smtdims_jax.install", "smtdims_jax.pipeline.export_and_verify"):
        assert f'id="{name}"' in reference, f"the API reference lacks {name}"
    assert "Tight bounds of" in reference  # a docstring, rendered


# -- what the pages say about the code, checked against the code ------------------------------------------------
_CORE_DEPS = {"jax", "numpy", "z3", "smtdims", "smtdims_jax", "islpy", "flatbuffers", "__future__"}


def test_examples_that_need_an_extra_package_say_how_to_install_it():
    """An example importing a package smtdims does not install (flax) says ``pip install`` it, and
    docs/install.md names it."""
    install = (DOCS / "install.md").read_text()
    for path in sorted((ROOT / "examples").glob("*.py")):
        text = path.read_text()
        tops = {m.group(1).split(".")[0] for m in re.finditer(r"^\s*(?:from|import)\s+([\w.]+)", text, re.M)}
        siblings = {p.stem for p in (ROOT / "examples").glob("*.py")}  # an example importing another
        for extra in sorted(tops - _CORE_DEPS - set(sys.stdlib_module_names) - siblings):
            assert f"pip install {extra}" in text, f"{path.name} imports {extra} without saying `pip install {extra}`"
            assert f"`pip install {extra}`" in install and path.name in install, (extra, path.name)


def test_fix_result_methods_are_documented_on_the_fix_page():
    """FixResult's ways to write the fix (``.code()``, ``.cli()``, ``.command()``) are listed in docs/fix.md."""
    from smtdims_jax.pipeline import FixResult

    page = (DOCS / "fix.md").read_text()
    for name in ("code", "cli", "command", "to_dict"):
        assert callable(getattr(FixResult, name))
        assert f"`.{name}()`" in page, name


def test_debugging_page_says_check_constraints_reports_a_self_guarded_divisor():
    """check_constraints reports a divisor only its own constraints keep nonzero; it does not raise."""
    import smtdims

    report = smtdims.check_constraints(["floordiv(a, b - 2) >= 1"])
    assert report.self_guarded == ("b - 2",)
    page = (DOCS / "debugging.md").read_text()
    assert "self_guarded" in page and "else `PossibleDivisionByZeroError`" not in page


def test_export_page_constraint_examples_run():
    """The constraints docs/export.md shows as working are accepted; the 2**40 it names needs a 64-bit input."""
    from smtdims_jax.pipeline import build_specs

    page = (DOCS / "export.md").read_text()
    assert '`"float32[2**4, n]"`, `n <= 2**20`, `n >= n // 2` work' in page
    build_specs(["float32[2**4, n]"], ["n <= 2**20", "n >= n // 2"])
    build_specs(["float64[n]"], ["n <= 2**40"])
    with pytest.raises(ValueError, match="out of range"):
        build_specs(["float32[n]"], ["n <= 2**40"])
