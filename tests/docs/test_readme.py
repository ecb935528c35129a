"""Every transcript in the README and the documentation pages (``docs/*.md``) is what the commands
print now, checked on the page that shows it (docs that drift fail here).

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

_TOOL = Path(__file__).resolve().parents[2] / "tools" / "readme_transcripts.py"
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


# -- every transcript is checked or marked illustrative --------------------------------------------------------
def test_every_transcript_looking_block_is_checked_or_marked_illustrative():
    unchecked = [where for p in rt.pages() for where in rt.unmarked(p.read_text(), rt._source(p))]
    assert not unchecked, ("blocks that look like transcripts but are not checked: make each a ```console block "
                           "(or a python block with its output block), or mark it '<!-- illustrative: why -->'",
                           unchecked)


def test_unmarked_finds_text_and_prompt_blocks_and_honours_the_marker():
    page = ("```console\n$ echo hi\nhi\n```\n\n"                         # checked
            "```python\nprint(1)\n```\n```\n1\n```\n\n"                     # checked: python and its output
            "```\nlayout/   a tree, not a transcript\n```\n\n"             # not transcript-looking
            "```text\n$ smtdims decide a >= b\n```\n\n"                     # 17: unchecked
            "```bash\n$ smtdims bounds a\n```\n\n"                          # 21: a prompt in a bash block
            "```\n>>> 1 + 1\n2\n```\n\n"                                    # 25: a REPL session
            "<!-- illustrative: an excerpt of a GPU run -->\n```text\nFAILED: ...\n```\n")
    assert rt.unmarked(page, "p.md") == ["p.md:17", "p.md:21", "p.md:25"]


# -- every command the README shows runs as shown after its set-up ------------------------------------------------
_SHELL_LANGS = ("bash", "sh", "shell", "console")
_SEPARATORS = ("|", "||", "&&", ";")


def _shown_commands(text: str) -> list[tuple[int, str]]:
    """(block number, command) of every command in the page's console and shell blocks, in order."""
    lines = text.splitlines()
    out = []
    for k, (lang, start, end) in enumerate(rt._fences(lines)):
        body = lines[start + 1:end]
        if lang == "console":
            out += [(k, x[2:]) for x in body if x.startswith("$ ")]
        elif lang in _SHELL_LANGS:
            out += [(k, x) for x in body if x.strip() and not x.lstrip().startswith("#")]
    return out


def _simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command of a line (pipes and lists split), environment assignments dropped."""
    import shlex

    out, cur = [], []
    for w in [*shlex.split(command, comments=True), ";"]:
        if w in _SEPARATORS:
            while cur and "=" in cur[0] and cur[0].split("=")[0].isidentifier():
                cur = cur[1:]
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(w)
    return out


def _extras_programs() -> dict[str, set[str]]:
    """pyproject's extras: the distribution names each installs (a program of that name comes with it)."""
    import re
    import tomllib

    extras = tomllib.loads((rt.ROOT / "pyproject.toml").read_text())["project"].get("optional-dependencies", {})
    return {x: {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in reqs} for x, reqs in extras.items()}


def _user_path() -> str:
    """PATH as a new user's shell has it: no virtual environment active (this test may run inside one)."""
    import os

    keep = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not (Path(p) / "activate").is_file() and not (Path(p) / "pyvenv.cfg").is_file()]
    return os.pathsep.join(keep)


def test_every_command_the_readme_shows_runs_after_its_set_up():
    """After the README's set-up block (the two commands and what follows them in that block), every
    program a console or bash block of the README runs is found on PATH, and a program .venv has is
    .venv's (a system ``python`` without jax does not count); a file given to ``bash``/``python``/``.``
    exists. The two scripts themselves are not re-run here (they build .venv, which this test needs)."""
    import os
    import re
    import shlex
    import subprocess

    venv_bin = rt.ROOT / ".venv" / "bin"
    if not (venv_bin / "python").is_file():
        pytest.skip("no .venv: the README's set-up (bash scripts/test.sh) has not run here")
    shown = _shown_commands(rt.README.read_text())
    setup_block = next(k for k, c in shown if c.startswith("bash scripts/demo.sh"))
    setup = [c for k, c in shown if k == setup_block and not re.match(r"bash scripts/\S+\.sh\b", c)]
    extras = _extras_programs()
    programs: dict[str, str] = {}  # program -> a command that runs it
    provided: set[tuple[int, str]] = set()  # (block, program) installed by an earlier pip install in the block
    problems = []
    for k, command in shown:
        for words in _simple_commands(command):
            prog, args = words[0], words[1:]
            if prog in ("bash", "sh", "python", "python3", ".", "source") and args and not args[0].startswith("-"):
                if not (rt.ROOT / args[0]).exists():
                    problems.append(f"{command!r}: {args[0]} does not exist")
            if prog == "pip" or prog.endswith("/pip") or args[:2] == ["-m", "pip"]:
                for extra in re.findall(r"\[([\w,-]+)\]", " ".join(args)):
                    provided |= {(k, p) for x in extra.split(",") for p in extras.get(x, ())}
            if (k, Path(prog).name) not in provided:
                programs.setdefault(prog, command)
    script = ["set +e", f"cd {shlex.quote(str(rt.ROOT))}", *setup]
    script += [f"printf '%s\\t%s\\t%s\\n' {shlex.quote(p)} \"$(type -t {shlex.quote(p)})\" "
               f"\"$(command -v {shlex.quote(p)})\"" for p in programs]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = _user_path()
    res = subprocess.run(["bash", "--norc", "--noprofile", "-c", "\n".join(script)], env=env, capture_output=True,
                         text=True, timeout=120)
    found = {p: (kind, where) for p, kind, where in (ln.split("\t") for ln in res.stdout.splitlines())}
    for prog, command in programs.items():
        kind, where = found.get(prog, ("", ""))
        if not kind:
            problems.append(f"{command!r}: {prog}: command not found after the set-up {setup}")
        elif kind == "file" and "/" not in prog and (venv_bin / prog).is_file() and Path(where) != venv_bin / prog:
            problems.append(f"{command!r}: {prog} is {where or kind}, not .venv's, after the set-up {setup}")
    assert not problems, "\n".join(problems)
