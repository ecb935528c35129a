"""Where the user's code is: one rule for the audit, the inconclusive error, ``smtdims run``,
``pytest --smtdims`` and ``smtdims export``.

A frame is the user's unless its file belongs to smtdims (and these plugins), JAX, jaxlib, the
array libraries JAX calls into (numpy, ml_dtypes, opt_einsum), Python's standard library (its
``site-packages`` excluded) or a module the caller names. A notebook cell reads ``In [n]``.
Why one rule: the audit, the error message and the run summary name the same line for the same
question; two walks written differently named different lines.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

JAX, USER = "jax", "user"  # who asked a question: JAX's own code, or the user's through JAX's dim API

_LIBRARIES = ("smtdims", "jax", "jaxlib", "numpy", "ml_dtypes", "opt_einsum")
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")

# JAX's symbolic-dimension machinery: a user frame calling into it asked the question itself.
_DIM_FILES = (os.sep + os.path.join("export", "shape_poly.py"), os.sep + os.path.join("export", "shape_poly_decision.py"))
_CORE_FILE = os.sep + os.path.join("_src", "core.py")
_CORE_DIM_FUNCTIONS = frozenset({
    "definitely_equal", "definitely_equal_one_of_dim", "definitely_equal_shape", "max_dim", "min_dim",
    "concrete_dim_or_error", "is_constant_dim", "is_empty_shape", "divide_shape_sizes", "dilate_dim", "stride_dim",
})

# frame kinds
PASS, DIM, LIBRARY, USER_FRAME = range(4)
_KIND_CACHE: dict[tuple[CodeType, tuple[str, ...], tuple[str, ...]], int] = {}


def _dir_of(module_name: str) -> str | None:
    m = sys.modules.get(module_name)
    f = getattr(m, "__file__", None) if m is not None else None
    return os.path.dirname(os.path.abspath(f)) + os.sep if f else None


# Directories of modules, memoised on the module objects themselves (one imported later, or
# replaced, is another key): an inconclusive comparison looks up where it arose, and computing the
# paths each time would cost most of a cheap question's time.
_DIRS_MEMO: dict[tuple[Any, ...], tuple[str, ...]] = {}


def _dirs(names: tuple[str, ...], first: tuple[str, ...] = ()) -> tuple[str, ...]:
    key = (first, names, *(sys.modules.get(m) for m in names))
    dirs = _DIRS_MEMO.get(key)
    if dirs is None:
        dirs = tuple(dict.fromkeys([*first, *(d for d in (_dir_of(m) for m in names) if d is not None)]))
        if len(_DIRS_MEMO) > 64:
            _DIRS_MEMO.clear()
        _DIRS_MEMO[key] = dirs
    return dirs


def library_dirs(extra_modules: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """Directories whose frames are never the user's (walked through, not reported): these plugins,
    the libraries above that are imported, and ``extra_modules`` (pytest's own, for the plugin)."""
    return _dirs((*_LIBRARIES, *extra_modules), (_HERE,))


def jax_dirs() -> tuple[str, ...]:
    return _dirs(("jax", "jaxlib"))


def _stdlib(path: str) -> bool:
    return path.startswith(_STDLIB) and not any(p in path for p in _INSTALLED)


def frame_kind(code: CodeType, skip_dirs: tuple[str, ...], jax: tuple[str, ...]) -> int:
    """PASS (smtdims, an array library, the stdlib), DIM (JAX's symbolic-dimension machinery),
    LIBRARY (any other JAX code) or USER_FRAME; cached per code object."""
    key = (code, skip_dirs, jax)
    kind = _KIND_CACHE.get(key)
    if kind is None:
        path = os.path.abspath(code.co_filename)
        if path.startswith(jax):
            dim = path.endswith(_DIM_FILES) or (path.endswith(_CORE_FILE) and code.co_name in _CORE_DIM_FUNCTIONS)
            kind = DIM if dim else LIBRARY
        elif path.startswith(skip_dirs) or _stdlib(path) or code.co_filename.startswith("<frozen"):
            kind = PASS
        else:
            kind = USER_FRAME
        if len(_KIND_CACHE) > 50_000:  # code objects of notebook cells come and go
            _KIND_CACHE.clear()
        _KIND_CACHE[key] = kind
    return kind


_NAME_MEMO: dict[tuple[str, str], str] = {}


def _site(code: CodeType, line: int | None) -> str:
    name = cell_name(code.co_filename)  # not memoised: a cell run again gets another number
    if name is None:
        key = (code.co_filename, os.getcwd())  # relative to the working directory, which may change
        name = _NAME_MEMO.get(key)
        if name is None:
            name = code.co_filename
            if os.path.isabs(name):
                rel = os.path.relpath(name)
                name = name if rel.startswith("..") else rel
            if len(_NAME_MEMO) > 4096:
                _NAME_MEMO.clear()
            _NAME_MEMO[key] = name
    return f"{name}:{line} in {code.co_name}"


def where(frame: FrameType | None, skip_dirs: tuple[str, ...] | None = None,
          jax: tuple[str, ...] | None = None) -> tuple[str, str]:
    """``(location, origin)`` of the question being decided in ``frame``'s call chain.

    The location is the first frame outward that is the user's (``"<unknown>"`` if none). The
    origin is ``"user"`` when every JAX frame between it and the decision is symbolic-dimension
    machinery (the user called ``==``, ``core.max_dim``, ... directly), ``"jax"`` when some other
    JAX code asked.
    """
    skip_dirs = library_dirs() if skip_dirs is None else skip_dirs
    jax = jax_dirs() if jax is None else jax
    origin = USER
    f = frame
    while f is not None:
        kind = frame_kind(f.f_code, skip_dirs, jax)
        if kind == USER_FRAME:
            return _site(f.f_code, f.f_lineno), origin
        if kind == LIBRARY:
            origin = JAX
        f = f.f_back
    return "<unknown>", JAX


def user_location(skip_dirs: tuple[str, ...] | None = None) -> str:
    """``file:line in function`` of the caller's nearest user frame (a notebook cell reads
    ``In [n]:line in function``); ``"<unknown>"`` when there is none."""
    return where(sys._getframe(1), skip_dirs)[0]


def question_origin(skip_dirs: tuple[str, ...] | None = None) -> tuple[str, str]:
    """``(location, origin)`` of the decision being made by the caller: see :func:`where`."""
    return where(sys._getframe(1), skip_dirs)


def raise_site(err: BaseException, skip_dirs: tuple[str, ...] | None = None) -> str:
    """``file:line in fn`` of the innermost user frame of ``err``'s traceback (an installed package's
    frame only when the program has none of its own), or ``""``."""
    skip_dirs = library_dirs() if skip_dirs is None else skip_dirs
    jax = jax_dirs()
    sites: list[tuple[bool, str]] = []
    tb = err.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        generated = code.co_filename.startswith("<") and cell_name(code.co_filename) is None  # a dataclass's __init__
        if frame_kind(code, skip_dirs, jax) == USER_FRAME and not generated:
            installed = any(p in os.path.abspath(code.co_filename) for p in _INSTALLED)
            sites.append((installed, _site(code, tb.tb_lineno)))
        tb = tb.tb_next
    own = [site for installed, site in sites if not installed]
    return (own or [site for _, site in sites] or [""])[-1]


# -- notebook cells -----------------------------------------------------------------------------------
_IPYKERNEL_CELL = re.compile(r"(^|[\\/])ipykernel_\d+[\\/][^\\/]+\.py$")
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")


def cell_name(filename: str) -> str | None:
    """``In [n]`` for the file name IPython compiled cell ``n`` under, ``<cell>`` for a cell
    whose number is not known, None for anything else.

    ipykernel names cells ``/tmp/ipykernel_<pid>/<hash>.py`` and records the execution
    count in its compiler (``get_ipython().compile``); the terminal names them
    ``<ipython-input-<n>-<hash>>``.
    """
    m = _IPYTHON_INPUT.match(filename)
    if m:
        return f"In [{m.group(1)}]"
    number = _ipython_cell_number(filename)
    if number is not None:
        return f"In [{number}]"
    if _IPYKERNEL_CELL.search(filename):
        return "<cell>"
    return None


def _ipython_cell_number(filename: str) -> int | None:
    if "IPython" not in sys.modules:  # never import IPython from a script
        return None
    try:
        shell: Any = sys.modules["IPython"].get_ipython()
        compiler = getattr(shell, "compile", None)
        number = getattr(compiler, "_filename_map", {}).get(filename)
        return int(number) if number is not None else None
    except Exception:  # a location must never raise
        return None


def display_filename(filename: str) -> str:
    """``filename``, or ``In [n]`` / ``<cell>`` for a notebook cell (see :func:`cell_name`)."""
    return cell_name(filename) or filename


__all__ = [
    "JAX", "USER", "cell_name", "display_filename", "frame_kind", "jax_dirs", "library_dirs", "question_origin",
    "raise_site", "user_location", "where",
]


def paste_target(fn: Callable[..., Any]) -> str:
    """``fn`` as ``smtdims export`` loads it: ``path/file.py:name`` for a file under the working
    directory (a script, ``__main__``, a module loaded from its path), ``module:qualname`` for an
    importable module elsewhere; "" for a lambda or a local function (nothing can name it)."""
    name = getattr(fn, "__qualname__", None) or ""
    if not name or "<" in name:
        return ""
    mod = getattr(fn, "__module__", None) or ""
    code = getattr(fn, "__code__", None)
    path = os.path.abspath(code.co_filename) if code is not None else ""
    cwd = os.getcwd() + os.sep
    if path.startswith(cwd) and os.path.exists(path):
        return f"{os.path.relpath(path)}:{name}"
    if mod and mod != "__main__" and not mod.startswith("_smtdims_target_"):
        return f"{mod}:{name}"
    return f"{path}:{name}" if path and os.path.exists(path) else ""
