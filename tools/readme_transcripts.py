"""Run every transcript in the README and the documentation pages and compare it with what the
commands print now.

    python tools/readme_transcripts.py            # check: a diff per stale block, exit status 1
    python tools/readme_transcripts.py --write    # regenerate the outputs in place, in every page
    python tools/readme_transcripts.py --list     # the blocks found, one line each
    python tools/readme_transcripts.py docs/cli.md   # only the pages named

The pages are ``README.md`` and every ``docs/*.md`` (the documentation site's pages, see
``mkdocs.yml``): a transcript lives on the page that documents it and is checked there.

What counts as a transcript (any block written this way is picked up, old or new):

- a ```console block: each line starting with ``$ `` is a command; the lines up to the next
  ``$ `` are its output, stdout and stderr together as a terminal shows them. The commands
  of one block run in order in one bash session (so ``echo $?`` reports the command before
  it), in a scratch directory that holds links to the repository's top-level entries and to
  every file in ``examples/`` (so ``smtdims run prog.py`` and ``tests/fixtures_pipeline/...``
  both resolve), with the repository's ``.venv/bin`` first on PATH (what the README's set-up,
  ``. .venv/bin/activate``, does), ``PYTHONUNBUFFERED=1``
  (the order of stdout and stderr lines is the program's), ``JAX_PLATFORMS=cpu``.
- a ```python block followed directly by a bare ``` block: the bare block is what the
  python block prints, run in a fresh interpreter after ``import smtdims``, with the value of
  a final expression printed (``str()``), as a REPL shows it.

Every other block that looks like a transcript (a ```text, ```output or ```console block, or any
block, bare ones included, with a line starting with ``$ `` or ``>>> ``) must be marked illustrative by an HTML comment on the line
before its opening fence, saying why it cannot be checked::

    <!-- illustrative: an excerpt of a run on a GPU -->

:func:`unmarked` lists the blocks that are neither checked nor marked (``--list`` shows them too);
``tests/docs/test_readme.py`` requires there are none.

Normalisation, applied to both sides before comparing (what legitimately changes between
machines and releases): version numbers after ``smtdims``, ``jax``, ``jaxlib``, ``z3``,
``python`` become ``<version>``; durations such as ``0.529s`` become ``<t>s``; sizes
``3152 bytes`` become ``<n> bytes``; trailing whitespace is dropped. ``--write`` writes the
raw output, not the normalised one.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SEP = "\x1e"  # printed after each command: splits one bash session's output per command
TIMEOUT_S = 300

_NORMALISE = [
    (re.compile(r"\b(smtdims|jaxlib|jax|z3|python)( |==)\d+(\.\d+)+\w*"), r"\1\2<version>"),
    (re.compile(r"\b\d+(\.\d+)?(ms|s)\b"), r"<t>\2"),
    (re.compile(r"\b\d+ bytes\b"), "<n> bytes"),
]


def pages() -> list[Path]:
    """The files whose transcripts are checked: the README, then the documentation pages."""
    return [README, *sorted(DOCS.glob("*.md"))]


def _source(path: Path) -> str:
    """How a block's file is named in messages: relative to the repository when inside it."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def normalise(text: str) -> str:
    lines = []
    for line in text.splitlines():
        for pat, rep in _NORMALISE:
            line = pat.sub(rep, line)
        lines.append(line.rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Block:
    """One transcript: ``kind`` is "console" or "python"; ``body`` the lines of its page that hold
    its output (for console blocks the whole body); ``source`` the page, as messages name it."""

    kind: str
    line: int  # 1-based line of the opening fence, for messages
    body: tuple[int, int]  # the body's line span in the page (0-based, end exclusive)
    commands: list[Command] = field(default_factory=list)  # console
    code: str = ""  # python
    expected: list[str] = field(default_factory=list)  # python
    source: str = "README.md"  # the page the block is on

    @property
    def name(self) -> str:
        first = self.commands[0].text if self.commands else self.code.strip().splitlines()[0]
        return f"{self.source}:{self.line} {first[:60]}"


_FENCE = re.compile(r"^```(\w*)\s*$")


def _fences(lines: list[str]) -> list[tuple[str, int, int]]:
    """``(lang, open line, close line)`` of every fenced block (0-based)."""
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not re.match(r"^```\s*$", lines[j]):
                j += 1
            out.append((m.group(1), i, j))
            i = j + 1
        else:
            i += 1
    return out


def parse(text: str, source: str = "README.md") -> list[Block]:
    """The transcripts of one page's text; ``source`` names the page in messages."""
    lines = text.splitlines()
    fences = _fences(lines)
    blocks: list[Block] = []
    for k, (lang, start, end) in enumerate(fences):
        if lang == "console":
            b = Block("console", start + 1, (start + 1, end), source=source)
            for line in lines[start + 1:end]:
                if line.startswith("$ "):
                    b.commands.append(Command(line[2:]))
                elif b.commands:
                    b.commands[-1].expected.append(line)
            if b.commands:
                blocks.append(b)
        elif lang == "python" and k + 1 < len(fences):
            nlang, nstart, nend = fences[k + 1]
            if nlang == "" and all(not x.strip() for x in lines[end + 1:nstart]):
                blocks.append(Block("python", start + 1, (nstart + 1, nend), code="\n".join(lines[start + 1:end]),
                                    expected=lines[nstart + 1:nend], source=source))
    return blocks


ILLUSTRATIVE = re.compile(r"^<!--\s*illustrative\b.*-->\s*$")
_TRANSCRIPT_LANGS = ("text", "txt", "output", "console", "shell-session", "sh-session")


def unmarked(text: str, source: str = "README.md") -> list[str]:
    """``source:line`` of each block that looks like a transcript but is neither checked (a ```console
    block with commands, a bare block right after a ```python block) nor marked illustrative
    (:data:`ILLUSTRATIVE` on the line before its fence). Looks like a transcript: a ```text,
    ```output or ```console block, or any block with a line starting with ``$ `` or ``>>> ``; a bare
    block without such lines (a directory layout) does not."""
    lines = text.splitlines()
    fences = _fences(lines)
    checked = {(b.line - 1) for b in parse(text, source)}  # console blocks by their fence
    for lang, start, end in fences:  # output blocks: the bare block after a checked python block
        if lang == "python":
            checked.update(nstart for nlang, nstart, _ in fences
                           if nlang == "" and nstart > end and all(not x.strip() for x in lines[end + 1:nstart]))
    out = []
    for lang, start, end in fences:
        body = lines[start + 1:end]
        prompt = any(x.startswith(("$ ", ">>> ")) for x in body)
        looks = prompt or lang in _TRANSCRIPT_LANGS
        marked = start > 0 and bool(ILLUSTRATIVE.match(lines[start - 1]))
        if looks and start not in checked and not marked:
            out.append(f"{source}:{start + 1}")
    return out


def parse_file(path: Path) -> list[Block]:
    return parse(path.read_text(), _source(path))


def all_blocks() -> list[Block]:
    """Every transcript of the README and the documentation pages, page by page."""
    return [b for p in pages() for b in parse_file(p)]


def _scratch() -> tempfile.TemporaryDirectory:
    tmp = tempfile.TemporaryDirectory(prefix="readme-")
    d = Path(tmp.name)
    for p in ROOT.iterdir():
        if p.name not in (".git",):
            (d / p.name).symlink_to(p)
    for p in (ROOT / "examples").iterdir():
        if p.is_file() and not (d / p.name).exists():
            (d / p.name).symlink_to(p)
    return tmp


def _env() -> dict[str, str]:
    env = dict(os.environ)
    venv_bin = ROOT / ".venv" / "bin"
    bins = [str(venv_bin)] if venv_bin.is_dir() else []
    bins.append(str(Path(sys.executable).parent))
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    env.update(PYTHONUNBUFFERED="1", JAX_PLATFORMS="cpu", COLUMNS="80", LC_ALL="C.UTF-8")
    env.pop("PYTEST_ADDOPTS", None)
    return env


def run_console(block: Block) -> list[list[str]]:
    """Each command's output lines, from one bash session."""
    return [list(out) for out in _run_console(tuple(c.text for c in block.commands))]


@functools.cache
def _run_console(commands: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Memoised by the commands: two pages show the same session (the README's and docs/fix.md's
    ``python examples/fix_gpt.py``, 15-20 s each) and one run checks both."""
    script = ["set +e"]
    for text in commands:
        script += [text, f"__rc=$?; printf '{SEP}\\n'; (exit $__rc)"]
    with _scratch() as cwd:
        res = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
    parts = res.stdout.split(SEP + "\n")
    outs = [tuple(p.splitlines()) for p in parts[:len(commands)]]
    while len(outs) < len(commands):
        outs.append(("<no output: the session ended early>",))
    return tuple(outs)


_REPL = """
import ast, sys
import smtdims
src = sys.argv[1]
tree = ast.parse(src)
last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
body = tree.body[:-1] if last is not None else tree.body
exec(compile(ast.Module(body=body, type_ignores=[]), "<readme>", "exec"), globals())
if last is not None:
    value = eval(compile(ast.Expression(last.value), "<readme>", "eval"), globals())
    if value is not None:
        print(value)
"""


def run_python(block: Block) -> list[str]:
    return list(_run_python(block.code))


@functools.cache
def _run_python(code: str) -> tuple[str, ...]:
    with _scratch() as cwd:
        res = subprocess.run([sys.executable, "-c", _REPL, code], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
    return tuple(res.stdout.splitlines())


def actual(block: Block) -> list[str]:
    """The block's body as the commands print it now (what --write puts in the page); a path into this
    checkout is written relative to it (a module imported through the scratch folder's link has its
    real path: the reader's checkout is elsewhere)."""
    root = str(ROOT) + os.sep
    if block.kind == "python":
        return [x.replace(root, "") for x in run_python(block)]
    lines = []
    for c, out in zip(block.commands, run_console(block)):
        lines.append(f"$ {c.text}")
        lines += [x.rstrip().replace(root, "") for x in out]
    return lines


def expected(block: Block) -> list[str]:
    if block.kind == "python":
        return list(block.expected)
    lines = []
    for c in block.commands:
        lines.append(f"$ {c.text}")
        lines += c.expected
    return lines


def diff(block: Block, got: list[str]) -> str:
    """"" when the block matches after normalisation, else a unified diff (the page vs now)."""
    a, b = normalise("\n".join(expected(block))), normalise("\n".join(got))
    if a == b:
        return ""
    return "\n".join(difflib.unified_diff(a.splitlines(), b.splitlines(), f"{block.name} (page)", "now", lineterm=""))


def write(page: Path, results: list[tuple[Block, list[str]]]) -> int:
    """Replace each stale block's body in ``page`` (whose blocks ``results`` holds); returns how many
    changed."""
    lines = page.read_text().splitlines()
    changed = 0
    for block, got in sorted(results, key=lambda r: -r[0].body[0]):  # bottom up: earlier spans stay valid
        if diff(block, got):
            lo, hi = block.body
            lines[lo:hi] = got
            changed += 1
    page.write_text("\n".join(lines) + "\n")
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="regenerate stale outputs in place")
    ap.add_argument("--list", action="store_true", help="list the transcripts found")
    ap.add_argument("--only", metavar="TEXT", help="only blocks whose name contains TEXT")
    ap.add_argument("pages", nargs="*", metavar="PAGE", help="markdown files (default: README.md and docs/*.md)")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.pages] or pages()
    by_page = [(p, [b for b in parse_file(p) if not args.only or args.only in b.name]) for p in paths]
    blocks = [b for _, bs in by_page for b in bs]
    if args.list:
        print("\n".join(f"{b.kind:8} {b.name}" for b in blocks))
        for path in paths:
            for where in unmarked(path.read_text(), _source(path)):
                print(f"UNCHECKED {where} (mark it illustrative or make it a checked block)")
        return 0
    results = {id(b): (b, actual(b)) for b in blocks}
    stale = [(b, d) for b, got in results.values() if (d := diff(b, got))]
    if args.write:
        for path, bs in by_page:
            if bs:
                print(f"{write(path, [results[id(b)] for b in bs])} block(s) rewritten in {_source(path)}")
        return 0
    for _, d in stale:
        print(d + "\n")
    print(f"{len(blocks) - len(stale)}/{len(blocks)} transcripts match"
          + ("" if not stale else "; regenerate with: python tools/readme_transcripts.py --write"))
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
