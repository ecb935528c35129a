"""Every transcript in the README and the documentation pages (``docs/*.md``) is what the commands
print now (issue 20: docs drift; issue 29.9: the transcripts moved with their pages).

The blocks and the normalisation (versions, timings, sizes) are those of
``tools/readme_transcripts.py``, which also regenerates them:
``python tools/readme_transcripts.py --write``. A new ```console block, or a ```python block
followed by its output, on any of those pages is picked up without changing this file. About 45 s:
the two ``smtdims export`` transcripts compile and run in fresh processes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_TOOL = Path(__file__).resolve().parents[1] / "tools" / "readme_transcripts.py"
_spec = importlib.util.spec_from_file_location("readme_transcripts", _TOOL)
rt = importlib.util.module_from_spec(_spec)
sys.modules["readme_transcripts"] = rt  # dataclasses look their module up
_spec.loader.exec_module(rt)

BLOCKS = rt.all_blocks()


def test_the_readme_and_the_docs_have_transcripts():
    kinds = [b.kind for b in BLOCKS]
    assert kinds.count("console") >= 4 and kinds.count("python") >= 1
    assert any("smtdims run prog.py" in c.text for b in BLOCKS for c in b.commands)
    assert any(b.source == "README.md" and b.kind == "console" for b in BLOCKS), "the README's first example"
    assert {b.source for b in BLOCKS} >= {"README.md", "docs/cli.md", "docs/export.md", "docs/debugging.md"}
    assert rt.README in rt.pages() and all(p.suffix == ".md" for p in rt.pages())


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_transcript_matches_a_real_run(block):
    d = rt.diff(block, rt.actual(block))
    assert not d, f"stale README transcript (regenerate: python tools/readme_transcripts.py --write)\n{d}"


def test_normalisation_keeps_what_matters():
    assert rt.normalise("smtdims 0.1.0 (jax 0.10.2, z3 5.4.1, python 3.11.7)") == \
        "smtdims <version> (jax <version>, z3 <version>, python <version>)"
    assert rt.normalise("  1  b = 1   (1,)   minimum  0.529s   0.001s  pass  ") == \
        "  1  b = 1   (1,)   minimum  <t>s   <t>s  pass"
    assert rt.normalise("artifact    3152 bytes") == "artifact    <n> bytes"
    assert rt.normalise("b = 15 makes it false") != rt.normalise("b = 1 makes it false")  # values are kept


def test_a_stale_block_is_reported_and_rewritten(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n\n```console\n$ echo hello\nhullo\n$ echo $?\n0\n```\n\n"
                      "```python\nprint(1 + 1)\n```\n```\n3\n```\n")
    blocks = rt.parse(readme.read_text())
    assert [b.kind for b in blocks] == ["console", "python"]
    assert all(rt.diff(b, rt.actual(b)) for b in blocks)
    assert rt.main([str(readme)]) == 1
    rt.main(["--write", str(readme)])
    assert "$ echo hello\nhello\n$ echo $?\n0\n" in readme.read_text() and "```\n2\n```" in readme.read_text()
    assert rt.main([str(readme)]) == 0


def test_write_rewrites_each_page_in_place(tmp_path):
    one, two = tmp_path / "one.md", tmp_path / "two.md"
    one.write_text("```console\n$ echo one\nuno\n```\n")
    two.write_text("# page\n\n```console\n$ echo two\ndos\n```\n\ntext\n")
    assert [b.name.split(":")[0] for b in rt.parse_file(two)] == ["two.md"]
    assert rt.main([str(one), str(two)]) == 1
    rt.main(["--write", str(one), str(two)])
    assert one.read_text() == "```console\n$ echo one\none\n```\n"
    assert two.read_text() == "# page\n\n```console\n$ echo two\ntwo\n```\n\ntext\n"
    assert rt.main([str(one), str(two)]) == 0


def test_install_lines_for_an_index_and_a_clone_with_supported_versions():
    import re
    import tomllib

    text = rt.README.read_text()
    assert 'pip install "smtdims[isl]"' in text and 'pip install ".[isl]"' in text
    requires = tomllib.loads((rt.ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    low = re.search(r">=\s*(3\.\d+)", requires).group(1)
    assert f"Python >= {low}" in text, (requires, "the README's install section names another Python")
    assert re.search(r"jax 0\.7\.x to 0\.10\.x", text) and "jax 0.12" in text
