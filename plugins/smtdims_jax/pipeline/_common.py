"""Small helpers every step uses: progress messages, platform names, who raised an error."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from jax import export

from smtdims import options
from smtdims.errors import SmtdimsError

from ..frames import paste_target  # noqa: F401 - where the pipeline's steps import it from
from ..jax_internals import AnyInconclusive

Progress = Callable[[str], None]


PROGRESS_EVERY = 2.0  # seconds: a phase that runs longer says how far it got at least this often


class Ticker:
    """``say`` for the steps of a long phase, at most once per :data:`PROGRESS_EVERY` seconds (the first
    after that long): a phase that ends sooner says nothing more, one that runs on shows it moves."""

    def __init__(self, say: Progress, every: float | None = None) -> None:
        self.say, self.every = say, PROGRESS_EVERY if every is None else every
        self.last = time.monotonic()

    def __call__(self, message: str | Callable[[], str]) -> None:
        """``message``: the text, or a function that makes it (not called when nothing is said)."""
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self.say(message if isinstance(message, str) else message())


def progress_fn(progress: bool | Progress | None) -> Progress:
    if callable(progress):
        return progress
    if progress:
        return lambda msg: print(f"smtdims: {msg}", file=sys.stderr, flush=True)
    return lambda msg: None


def checked_platforms(platforms: str | Sequence[str] | None) -> tuple[str, ...] | None:
    from .platforms import normalise_platforms  # validated: unknown names refused, 'gpu' mapped as JAX maps it

    return normalise_platforms(platforms)


def local_platform() -> str:
    return export.default_export_platform()  # "cpu", "cuda", "rocm", "tpu": the names export uses


def fn_name(fn: Callable[..., Any]) -> str:
    mod = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{mod}:{name}" if mod else name


_OWN_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                  for m in (sys.modules["smtdims"], sys.modules["smtdims_jax"]))


def raised_by_smtdims(err: BaseException) -> bool:
    """Whether ``err`` is a bug in smtdims' code (raised there, not one of JAX's or smtdims' documented errors)."""
    if isinstance(err, (AnyInconclusive, SmtdimsError)):
        return False
    tb = err.__traceback__
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and os.path.abspath(last.tb_frame.f_code.co_filename).startswith(_OWN_DIRS)




def solver_budget(budget: int | None):
    return options.scoped(budget=budget)

