"""The ISL worker process of :mod:`smtdims.engines.presburger`: islpy runs here, never in the caller.

ISL cannot be interrupted while it runs (islpy holds the interpreter, and its operation quota
does not count everything: single calls have taken seconds), so it runs in a process of its
own that the caller kills when an answer is late. This file imports nothing from smtdims but
:mod:`smtdims.engines._lifeline` (from its directory: it ends with its caller). It is started as a
script, reads one JSON request per line on stdin and writes one JSON answer per line on stdout,
and exits at end of input.

Requests: ``{"op": "conflict", "tup": "v0, v1", "facts": [condition text, ...]}`` (a point meeting
every fact, or a minimal subset that no point meets: :meth:`smtdims.engines.presburger.Engine.conflict`),
or ``{"op": "bounds" | "sat" | "least" | "point", "key": int, "dom": text | {"n": int, "parts": [[tree,
">=" | "=="], ...]} | null (:func:`_domain`), "tup": "v0, v1",
"tree": the expression (``presburger._tree``), "rel": "<" (sat),
"known": [int, ...] (bounds), "least": bool (bounds: witnesses of the ends not in ``known`` with
the least sum of the variables), "value": "int" (least: a point where the expression is ``value``
with the least sum of the variables)}`` ("point": a point of the domain, or null where it is
empty). ``dom`` (the constraints' integer set) is sent once per key; a request naming a key this
process does not hold gets ``{"missing": true}``. Answers carry ints, or ``"inf"``/``"-inf"``, or ``{"error": ...}``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections import OrderedDict
from typing import Any

OPERATIONS = 200_000
DOMAINS = 512
SPIN = 0.002  # seconds to stay awake for the next request
_yield = getattr(os, "sched_yield", lambda: None)  # polling, but giving the core to whoever waits for it
_CORES = os.cpu_count() or 1


def _idle_core() -> bool:
    """Whether a core is idle (as :func:`smtdims.engines.workers.idle_core`, which this file cannot import:
    ``/proc/loadavg``'s processes running now, else the load average): with every core taken,
    polling only takes CPU from the caller."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return float(f.read().split()[3].split(b"/")[0]) <= _CORES  # this worker and its caller
    except (OSError, IndexError, ValueError):
        pass
    try:
        return os.getloadavg()[0] < _CORES
    except (OSError, AttributeError):
        return False


def _value(v: Any) -> int | str | None:
    if v.is_nan():
        return None
    if v.is_infty():
        return "inf"
    if v.is_neginfty():
        return "-inf"
    return int(v.to_str())  # not str(v): through islpy's printer object, about three times slower


def _attaining(isl: Any, graph: Any, value: int) -> Any:
    """The valuations where the expression equals ``value`` (built, not parsed from text: the
    parser cost more than the rest of a witness)."""
    return graph.fix_val(isl.dim_type.out, 0, isl.Val.read_from_str(graph.get_ctx(), str(value))).domain()


def _coords(isl: Any, points: Any, n: int) -> list[int] | None:
    pt = points.sample_point()
    if pt.is_void():
        return None
    return [int(pt.get_coordinate_val(isl.dim_type.set, i).to_str()) for i in range(n)]


def _sum_of_variables(isl: Any, space: Any) -> Any:
    """The affine function ``v0 + v1 + ...`` on ``space``."""
    ls = isl.LocalSpace.from_space(space)
    obj = isl.Aff.zero_on_domain(ls)
    for i in range(space.dim(isl.dim_type.set)):
        obj = obj.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, i))
    return obj


def _least(isl: Any, ctx: Any, points: Any, n: int, max_divs: int | None = None, obj: Any = None) -> list[int] | None:
    """A point of ``points`` with the least sum of the variables: the witness a person reads at a
    glance (``smtdims.bounds`` shows it), found here in one call instead of a search by Z3.
    ``obj``: that sum on ``points``' space, where the caller has it."""
    if obj is None:
        obj = _sum_of_variables(isl, points.get_space())
    best: tuple[int, Any] | None = None
    pieces = points.get_basic_sets()
    for bs in pieces:
        # per basic set, skipping empty ones (as in handle); a lone piece is asked as it is (an end's
        # valuations: not empty where the end is right; empty, no point comes of it, and the caller
        # re-checks any point): one emptiness check fewer per end, a tenth of a cold query's ISL time
        _check_piece(isl, bs, max_divs)
        if len(pieces) > 1 and bs.is_empty():
            continue
        one = isl.Set.from_basic_set(bs)
        v = one.min_val(obj)
        if not v.is_int():  # never -inf (every variable is >= 1); nan: give up
            return None
        if best is None or int(v.to_str()) < best[0]:
            best = (int(v.to_str()), one)
    if best is None:
        return None
    # the sum's level set as one basic set (sum - least == 0): a third of eq_set's cost with its intersection
    level = obj.add_constant_val(isl.Val.read_from_str(ctx, str(-best[0]))).zero_basic_set()
    return _coords(isl, best[1].intersect(isl.Set.from_basic_set(level)), n)


def _expression(isl: Any, ctx: Any, dom: Any, req: dict) -> Any:
    """The request's expression on the domain's space, built from its ``tree`` through ISL's API
    (half the cost of parsing its text): affine where no max/min occurs in it (:func:`_build`)."""
    return _build(isl, ctx, isl.LocalSpace.from_space(dom.get_space()), req["tree"])


def _sign_set(isl: Any, f: Any, rel: str) -> Any:
    """Where ``f rel 0`` (``rel`` in ``<``, ``>``, ``>=``), as a set.

    An affine ``f`` (no max/min) compares with zero as one basic set; a piecewise one by its
    nonnegative or positive set. ``lt_set``/``gt_set``/``ge_set`` against a piecewise zero, the
    general forms, cost more than ten times as much for the same sets (``is_equal`` on every sign
    question of a pass of ``benchmarks/bench_queries.py``'s hard corpus)."""
    if isinstance(f, isl.Aff):
        zero = isl.Aff.zero_on_domain_space(f.get_domain_space())
        return isl.Set.from_basic_set({"<": f.lt_basic_set, ">": f.gt_basic_set, ">=": f.ge_basic_set}[rel](zero))
    if rel == "<":
        return f.neg().pos_set()
    return f.pos_set() if rel == ">" else f.nonneg_set()


def _domain(isl: Any, ctx: Any, dom: str | dict) -> Any:
    """The constraints' integer set: ISL's text, or ``{"n": variables, "parts": [[tree, ">=" | "=="],
    ...]}`` (each part ``tree >= 0`` or ``tree == 0``, every variable >= 1) built through ISL's API:
    in about a quarter of the time ISL takes to parse the text, the same set (the exactness tests
    compare the rung's bounds with ISL's on the text, tests/properties/oracle.py: 32 of them fail if a part is
    built wrong)."""
    if isinstance(dom, str):
        return isl.Set.read_from_str(ctx, dom)
    out, ls = _orthant(isl, ctx, int(dom["n"]))
    for tree, kind in dom["parts"]:
        f = _pw(isl, _build(isl, ctx, ls, tree))
        if kind == ">=":
            out = out.intersect(f.nonneg_set())
        elif kind == "==":
            out = out.intersect(f.zero_set())
        else:
            raise ValueError(f"unknown constraint kind {kind!r}")
    return out


_ORTHANTS: dict[int, tuple[Any, Any, Any]] = {}  # n -> (context, orthant, local space)


def _orthant(isl: Any, ctx: Any, n: int) -> tuple[Any, Any]:
    """(every variable >= 1, its local space) in ``n`` unnamed dimensions: the same for every domain
    of ``n`` variables, so made once per context (ISL's objects are values: each operation returns
    a new one), not at each domain (a sixth of a domain's cost)."""
    got = _ORTHANTS.get(n)
    if got is None or got[0] is not ctx:
        space = isl.Space.set_alloc(ctx, 0, n)
        out = isl.Set.universe(space)
        one = isl.Val.int_from_si(ctx, 1)
        for i in range(n):
            out = out.lower_bound_val(isl.dim_type.set, i, one)
        got = _ORTHANTS[n] = (ctx, out, isl.LocalSpace.from_space(space))
    return got[1], got[2]


_SMALL = 2**31 - 1  # fits a C long everywhere (32 bits on Windows)


def _val(isl: Any, ctx: Any, text: str) -> Any:
    """The integer ``text`` as ISL's value: made from a machine integer where it fits one (half the
    cost of reading the text), read from the text at any size."""
    v = int(text)
    return isl.Val.int_from_si(ctx, v) if -_SMALL <= v <= _SMALL else isl.Val.read_from_str(ctx, text)


def _pw(isl: Any, f: Any) -> Any:
    """``f`` (an affine function or a piecewise one) as a piecewise affine function."""
    return isl.PwAff.from_aff(f) if isinstance(f, isl.Aff) else f


def _build(isl: Any, ctx: Any, ls: Any, tree: list) -> Any:
    """``[[coefficient, atom], ...]`` (see ``presburger._tree``) as an affine function where no
    ``max``/``min`` occurs in it, else a piecewise one (:func:`_pw` makes either piecewise).

    Variables, constants, ``floordiv`` and ``mod`` by constants are quasi-affine: one affine function
    with integer divisions, whose sums cost no piecewise domains (a piecewise sum costs tens of times an
    affine one; ``benchmarks/bench_oracle.py``'s expressions build in about 40% less time this way, the
    same functions: ``is_equal`` on every one). Only ``max``/``min`` make pieces; they are added last."""
    aff = None
    total = None
    for coef, atom in tree:
        if atom is None or isinstance(atom, int):
            aff = aff if aff is not None else isl.Aff.zero_on_domain(ls)
            v = _val(isl, ctx, coef)
            aff = aff.add_constant_val(v) if atom is None else aff.add_coefficient_val(isl.dim_type.in_, atom, v)
            continue
        piece = _build_atom(isl, ctx, ls, atom)
        if coef != "1":
            piece = piece.scale_val(_val(isl, ctx, coef))
        if isinstance(piece, isl.Aff):
            aff = piece if aff is None else aff.add(piece)
        else:
            total = piece if total is None else total.add(piece)
    if total is None:
        return aff if aff is not None else isl.Aff.zero_on_domain(ls)
    return total if aff is None else total.add(isl.PwAff.from_aff(aff))


def _build_atom(isl: Any, ctx: Any, ls: Any, atom: int | list) -> Any:
    if isinstance(atom, int):
        return isl.Aff.var_on_domain(ls, isl.dim_type.set, atom)
    op, lhs, rhs = atom
    x = _build(isl, ctx, ls, lhs)
    if op in ("max", "min"):
        y = _pw(isl, _build(isl, ctx, ls, rhs))
        return _pw(isl, x).max(y) if op == "max" else _pw(isl, x).min(y)
    d = int(rhs)
    # Python's floor division and modulo: x // d == floor(-x / -d); x % d == -((-x) % -d) for d < 0
    # (ISL's floor and mod_val by a positive constant are Python's, on affine and piecewise functions)
    if op == "floordiv":
        return (x if d > 0 else x.neg()).scale_down_val(_val(isl, ctx, str(abs(d)))).floor()
    if op == "mod":
        return x.mod_val(_val(isl, ctx, rhs)) if d > 0 else x.neg().mod_val(_val(isl, ctx, str(-d))).neg()
    raise ValueError(f"unknown operation {op!r}")


def _order(v: int | str) -> float | int:
    return float(v) if isinstance(v, str) else v


def _conflict(isl: Any, ctx: Any, req: dict) -> dict:
    """``{"point": [...]}``, a point meeting every fact, or ``{"core": [i, ...]}``: the positions of
    a minimal subset of the facts with no common point, found by deletion (a fact whose removal
    leaves the others empty is dropped for good; one whose removal does not is needed, and stays
    needed in every smaller empty subset). The facts are conditions on ``tup``, read one by one."""
    space = "{ [" + req["tup"] + "] : "
    universe = isl.Set.read_from_str(ctx, space + "true }")
    facts = [isl.Set.read_from_str(ctx, space + f + " }") for f in req["facts"]]

    def meet(idx: list[int]) -> Any:
        s = universe
        for i in idx:
            s = s.intersect(facts[i])
        return s

    everything = meet(list(range(len(facts))))
    if not everything.is_empty():
        n = len(req["tup"].split(", ")) if req["tup"] else 0
        return {"point": _coords(isl, everything, n) if n else []}
    needed: list[int] = []
    rest = list(range(len(facts)))
    while rest:
        b = rest.pop()
        if not meet(needed + rest).is_empty():
            needed.append(b)
    return {"core": needed}


class TooHard(ValueError):
    """A set with more local (existential) variables than the caller allows: handed on, unanswered."""


def _check_piece(isl: Any, bs: Any, max_divs: int | None) -> Any:
    """``bs`` (a basic set), after checking that it has at most ``max_divs`` local variables.

    ISL's operation quota does not bound time where one operation costs much: ``max_val`` on one
    basic set of a few variables with many local ones runs tens of milliseconds under the in-process
    quota before the quota stops it. The in-process tier, which nothing can interrupt, takes only sets
    this small; each piece is checked before any operation on it (where the pieces are walked anyway, there).
    """
    if max_divs is not None and bs.dim(isl.dim_type.div) > max_divs:
        raise TooHard(f"{bs.dim(isl.dim_type.div)} local variables, more than {max_divs}")
    return bs


def _within(isl: Any, s: Any, max_divs: int | None) -> Any:
    """``s``, after :func:`_check_piece` of each of its basic sets (none to walk without a limit)."""
    if max_divs is not None:
        for bs in s.get_basic_sets():
            _check_piece(isl, bs, max_divs)
    return s


def handle(isl: Any, ctx: Any, domains: OrderedDict, req: dict, max_divs: int | None = None) -> dict:
    """One request's answer; its operations, the domain's parsing included, under one quota, and
    (``max_divs``, the in-process tier) on sets with at most that many local variables."""
    ctx.reset_operations()  # not after the domain: its parse counted against the last request's quota
    if req["op"] == "conflict":
        return _conflict(isl, ctx, req)
    key = req["key"]
    if req.get("dom") is not None:
        domains[key] = _domain(isl, ctx, req["dom"])
        while len(domains) > DOMAINS:
            domains.popitem(last=False)
    dom = domains.get(key)
    if dom is None:
        return {"missing": True}
    domains.move_to_end(key)
    tup = req["tup"]
    n = len(tup.split(", ")) if tup else 0
    if req["op"] == "point":  # a point of the domain, or None where it is empty (ISL's proof)
        return {"point": _coords(isl, _within(isl, dom, max_divs), n)}
    f = _expression(isl, ctx, dom, req)
    if req["op"] == "sat":
        return {"sat": not _within(isl, dom.intersect(_sign_set(isl, f, req["rel"])), max_divs).is_empty()}
    graph = isl.Map.from_pw_aff(_pw(isl, f)).intersect_domain(dom)
    if req["op"] == "least":
        return {"point": _least(isl, ctx, _attaining(isl, graph, int(req["value"])), n, max_divs) if n else None}
    values = graph.range()
    obj = isl.Aff.var_on_domain(isl.LocalSpace.from_space(values.get_space()), isl.dim_type.set, 0)
    los, his = [], []
    # per basic set, skipping empty ones: isl_set_max_val has answered 0 for a set with an empty
    # disjunct ({ [i] : i mod 46 = 0 and i <= -46; [i] : false }, islpy 2026.2). Not coalesced
    # first: merging disjuncts changes no end and costs as much as the rest of the call. A lone
    # piece (most questions have one) is asked as it is: empty, ISL says NaN (no answer), and a finite
    # end it made up would have no valuation to pass the caller's exact check; both ends infinite
    # claim nothing the gate has not proven (a satisfiable scope's part is not empty).
    pieces = values.get_basic_sets()
    for bs in pieces:
        _check_piece(isl, bs, max_divs)
        if len(pieces) > 1 and bs.is_empty():
            continue
        one = isl.Set.from_basic_set(bs)
        los.append(_value(one.min_val(obj)))
        his.append(_value(one.max_val(obj)))
    if not los or any(v is None for v in (*los, *his)):
        return {"error": "no value"}
    lo, hi = min(los, key=_order), max(his, key=_order)
    known = set(req.get("known", ()))
    out: dict = {"lo": lo, "hi": hi}
    obj = None  # the sum of the variables, for both ends' least-sum witnesses
    for name, end in (("wlo", lo), ("whi", hi)):
        if isinstance(end, int) and end not in known:
            points = _attaining(isl, graph, end)
            if req.get("least") and n:
                obj = obj if obj is not None else _sum_of_variables(isl, points.get_space())
                out[name] = _least(isl, ctx, points, n, max_divs, obj)
            else:
                out[name] = _coords(isl, _within(isl, points, max_divs), n)
    return out


def _requests(fd: int):
    """Lines from ``fd``; after each, poll for the next one for ``SPIN`` seconds (while a core is
    idle) before blocking.

    Questions come in bursts (an export, a test suite): a worker that is still awake answers
    the next one without the wake-up of a blocked process, which costs about as much as a small
    answer.
    """
    buffer = b""
    while True:
        while b"\n" not in buffer:
            spin = time.monotonic() + (SPIN if _idle_core() else 0.0)
            while not select.select([fd], [], [], 0)[0] and time.monotonic() < spin:
                _yield()
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield line


def main() -> None:
    # Ctrl-C at a terminal reaches the whole process group: the caller turns it into
    # KeyboardInterrupt and kills this worker if a request was in flight; it must not die first
    # (the caller would count a lost answer as a late one).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # also under PYTHONSAFEPATH
    import _lifeline

    _lifeline.watch()  # before islpy's import: a caller gone meanwhile takes this process with it
    import islpy as isl

    ctx = isl.Context()
    ctx.set_max_operations(OPERATIONS)
    domains: OrderedDict = OrderedDict()
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in _requests(sys.stdin.fileno()):
        try:
            req = json.loads(line)
            # ISL holds the interpreter: no thread here runs until it returns, so the kernel ends this
            # process when the caller, if alive, would have killed it (smtdims.engines._lifeline)
            _lifeline.alarm(req.get("expires"))
            answer = handle(isl, ctx, domains, req)
        except isl.Error as err:
            answer = {"error": f"isl: {err}"[:200]}
        except Exception as err:  # a malformed request must not end the worker
            answer = {"error": f"{type(err).__name__}: {err}"[:200]}
        finally:
            _lifeline.alarm(None)
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
