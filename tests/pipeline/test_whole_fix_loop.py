"""The whole fix: one loop over export *and* verification.

A fixed export whose samples fail where the function itself fails takes the diagnosis's exclusion
(a divisibility of a spec variable as the rewrite a person writes) and goes on until it verifies;
refusals are compared by the equation JAX asked, not by a wrapper's words; printed code says when it
needs smtdims. Models: tests/fixtures_pipeline/loop_models.py (the cores of Swin, ViT, an
encoder-decoder).
"""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from smtdims_jax.pipeline import export_and_verify
from smtdims_jax.pipeline.fixes import FIXED, Attempt, FixPart, Spec, as_parts, exports_on_stock, refusal_key

from smtdims.answers.equations import exact_divisions
from smtdims.lang.parser import parse_expr
from tests.fixtures_pipeline import loop_models as m


def _runs_natively(fn, *shapes):
    try:
        jax.eval_shape(fn, *(jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes))
        return True
    except Exception:  # noqa: BLE001 - any refusal: the function does not take these shapes
        return False


def _check_whole_fix(report, in_avals, constraints):
    fix = report.fix
    assert fix is not None and fix.status == FIXED and fix.ok, "\n".join(fix.lines() if fix else [report.table()])
    assert fix.in_avals == in_avals and fix.constraints == constraints, (fix.in_avals, fix.constraints)
    final = fix.report  # the fixed specification through the whole pipeline
    assert final.ok and len([s for s in final.samples if s.status == "pass"]) >= 3, final.table()
    assert any(r.status == "pass" for r in final.rejections)  # a shape outside it is refused
    assert report.verdict().startswith("FIXED")
    return fix


def test_a_window_partition_gets_the_spec_rewrite_a_person_writes():
    """Exports on stock JAX, fails natively unless 7 divides h and w: the samples' exclusion becomes
    ``7*k_h``, ``7*k_w`` (a ``mod`` constraint JAX would refuse; the new variables count windows), verified
    end to end."""
    report = export_and_verify(m.window_partition, "float32[b, h, w, 3]", fix=True, samples=4)
    assert not report.ok  # as specified: samples fail natively (jax >= 0.8); jax 0.7 refuses the reshape
    _check_whole_fix(report, ("float32[b, 7*k_h, 7*k_w, 3]",), ())
    assert _runs_natively(m.window_partition, (2, 14, 21, 3)) and not _runs_natively(m.window_partition, (2, 15, 21, 3))


def test_a_vit_grid_is_bounded_and_rewritten_in_one_loop():
    """The export needs the 16x16 grid bounded; the fixed export's samples then fail natively unless 8
    divides h and w: the loop goes on, and the bound reads on the new variables (``k_h <= 16``)."""
    report = export_and_verify(m.vit_grid, "float32[b, h, w, 3]", fix=True, samples=4)
    fix = _check_whole_fix(report, ("float32[b, 8*k_h, 8*k_w, 3]",), ("k_h <= 16", "k_w <= 16"))
    # jax >= 0.8 exports the reshape and the samples fail natively (the loop's verification rounds add the
    # rewrite); jax 0.7 refuses the reshape while exporting (the rewrite comes from its equation)
    assert len(fix.rounds) >= 3
    assert _runs_natively(m.vit_grid, (1, 128, 128, 3)) and not _runs_natively(m.vit_grid, (1, 136, 128, 3))


def test_a_fix_that_leaves_nothing_to_compute_on_is_degenerate():
    """``h <= 7`` settles the patch table's bound by leaving no patch (the pooled output is
    NaN, of the right shape). Every box shape (1..7) is such a shape: the box grows until some compute on
    something, and the fixes that admit none of those are dropped. Below 8 the pooled output is NaN
    everywhere (a mean over no patch): the verification's NaN check excludes those sizes too."""
    report = export_and_verify(m.patch_pool, "float32[b, h, w]", fix=True, samples=4)
    fix = _check_whole_fix(report, ("float32[b, h, w]",), ("floordiv(h, 8)*floordiv(w, 8) <= 64", "h >= 8", "w >= 8"))
    offered = [text for r in fix.rounds for text, *_ in r.candidates]
    assert "add the constraint 'floordiv(h, 8)*floordiv(w, 8) <= 64'" in offered, offered  # the texts' form
    assert not any(t in ("add the constraint 'h <= 7'", "add the constraint 'w <= 7'") for t in offered), offered
    x = np.random.default_rng(0).normal(size=(2, 16, 24)).astype(np.float32)
    assert np.isfinite(np.asarray(m.patch_pool(x))).all() and np.isnan(np.asarray(m.patch_pool(x[:, :7]))).all()


def test_a_learned_table_of_grid_positions_gets_its_patch_count():
    """The table of 197 positions needs ``(floordiv(h - 16, 16) + 1)*(floordiv(w - 16, 16) + 1) + 1 ==
    197``, which JAX refuses as a constraint as written; read with the conv's patch counts as a person
    writes them it is ``floordiv(h, 16)*floordiv(w, 16) == 196``, which JAX takes: every grid of 196
    patches (224x224, 112x448, ...), not only the square a person might pin; verified end to end, and
    stock JAX cannot export with it (the code installs smtdims)."""
    report = export_and_verify(m.clip_embed, "float32[b, h, w, 3]", fix=True, samples=3)
    fix = _check_whole_fix(report, ("float32[b, h, w, 3]",), ("floordiv(h, 16)*floordiv(w, 16) == 196",))
    assert fix.stock is False and "smtdims.install()" in fix.code()
    assert "compute on empty arrays" in fix.box.sentence("clip_embed")  # h < 16: no patch, broadcast to 197
    for shape in ((1, 224, 224, 3), (1, 239, 224, 3), (1, 112, 448, 3)):  # admitted, and the model runs there
        assert _runs_natively(m.clip_embed, shape)
    assert not _runs_natively(m.clip_embed, (1, 240, 224, 3))


def test_the_fixed_size_is_the_smallest_on_the_diagonal_and_verified():
    from smtdims.answers.equations import fixed_size_fix
    from smtdims.lang.constraints import ConstraintSet
    from smtdims.reasoner import Session

    grid = parse_expr("(floordiv(h - 16, 16) + 1)*(floordiv(w - 16, 16) + 1) + 1")
    k = parse_expr("197")
    assert fixed_size_fix(Session(ConstraintSet.of([])), grid, k) == [
        ("spec", "224", "h", "the size fixed: the equation holds at 224"),
        ("spec", "224", "w", "the size fixed: the equation holds at 224")]
    assert fixed_size_fix(Session(ConstraintSet.of(["h <= 200"])), grid, k) == []  # the constraints exclude 224
    assert fixed_size_fix(Session(ConstraintSet.of([])), parse_expr("h*w"), parse_expr("3")) == []  # no square
    one = fixed_size_fix(Session(ConstraintSet.of([])), parse_expr("floordiv(n, 3)"), parse_expr("5"))
    assert [p[1] for p in one] == ["15"]


def test_a_dimension_used_as_a_number_is_fixed_where_the_function_runs():
    """``int(math.sqrt(n))`` raises TypeError while tracing; the loop fixes ``n`` (not ``b``, whose
    constant would not get past the refusal) at a size where the function runs natively, verified; the
    report says the size is a choice and how to give the user's own."""
    report = export_and_verify(m.grid_tokens, "float32[b, n, 4]", fix=True, samples=3)
    fix = report.fix
    assert fix is not None and fix.status == FIXED and fix.ok, "\n".join(fix.lines() if fix else [report.table()])
    (aval,) = fix.in_avals
    size = int(aval.split(", ")[1])
    assert aval == f"float32[b, {size}, 4]" and int(size ** 0.5) ** 2 == size and size > 1, aval
    assert [p.variable for p in fix.parts] == ["n"] and fix.report.ok
    # without an example the size is a choice, and the report says how to make it the user's
    assert any("a choice" in line and "dims='auto'" in line for line in fix.lines()), fix.lines()


def test_long_phases_say_how_far_they_got(monkeypatch):
    """Every phase over 2 s shows progress; with the interval at 0 every step of the box and of
    the candidates' measurement says where it is (the messages a 30 s box or round would print)."""
    from smtdims_jax.pipeline import _common  # private: the progress interval, lowered so that every step speaks

    monkeypatch.setattr(_common, "PROGRESS_EVERY", 0.0)
    said: list[str] = []
    report = export_and_verify(m.patch_pool, "float32[b, h, w]", fix=True, samples=3, progress=said.append)
    assert report.fix is not None and report.fix.ok
    assert any(s.startswith("fix: ") and "native traces so far" in s for s in said), said
    assert any("verified candidate(s); measuring them" in s for s in said), said
    assert any(s.startswith("fix: tracing where ") and "candidates disagree" in s for s in said), said


def test_intermediate_shapes_reach_inner_programs():
    from smtdims_jax.pipeline.box import intermediate_shapes

    def f(x):
        y = jax.jit(lambda z: z[:3] * 2)(x)  # an inner jit: its (3,) value
        return jax.lax.scan(lambda c, v: (c + v.sum(), v[:0]), 0.0, y[None])[1]  # a scan whose output is empty

    shapes = set(intermediate_shapes(jax.make_jaxpr(f)(jnp.ones(5)).jaxpr))
    assert (3,) in shapes and (0,) in shapes and (1, 0) in shapes, shapes


def test_a_repeated_wrapper_message_does_not_stop_the_loop():
    """Two tables behind one wrapper message: the equations differ, so the loop fixes both."""
    report = export_and_verify(m.encoder_decoder, "float32[t, 4]", "float32[u, 4]", fix=True, samples=3)
    _check_whole_fix(report, ("float32[t, 4]", "float32[u, 4]"), ("t <= 64", "u <= 32"))


def test_refusals_are_told_apart_by_their_equation():
    a, b = parse_expr("t"), parse_expr("min(64, t)")
    c, d = parse_expr("u"), parse_expr("min(32, u)")
    err = ValueError("the model could not be built for these shapes")
    k1 = refusal_key(Attempt(False, err, equations=((a, b),)))
    k2 = refusal_key(Attempt(False, err, equations=((a, b), (c, d))))
    assert k1 != k2 and k1 == refusal_key(Attempt(False, ValueError("other words"), equations=((a, b),)))
    assert refusal_key(Attempt(False, err))[0] == "message"


def test_divisibilities_of_spec_variables_become_rewrites():
    spec = Spec(((parse_expr("b"), parse_expr("h")),), (np.float32,), ())
    parts = as_parts(["mod(h, 7) == 0", "mod(h - 3, 2) == 0", "b >= 2"], spec)
    assert parts[0] == FixPart("spec", "7*h", "h", parts[0].note)
    assert parts[1].kind == "constraint" and parts[2] == FixPart("constraint", "b >= 2")
    assert spec.apply(parts[0]).dims == ((parse_expr("b"), parse_expr("7*h")),)


def test_code_installs_smtdims_when_stock_jax_cannot_export_the_fix():
    table = jnp.ones((512, 4))

    def f(x):
        return x + table[: x.shape[0]]

    stock_only = Spec(((parse_expr("t"), parse_expr("4")),), (np.float32,), ("t <= 512",))
    nonlinear = Spec(((parse_expr("t"), parse_expr("4")),), (np.float32,), ("t*t <= 400",))
    tree = jax.tree_util.tree_structure((0,))
    assert exports_on_stock(f, stock_only, tree, None)
    assert not exports_on_stock(f, nonlinear, tree, None)  # smtdims proves t <= 20; stock cannot use t*t
    report = export_and_verify(f, "float32[t, 4]", constraints=("t*t <= 400",), samples=2)
    assert report.ok, report.table()  # with smtdims it exports and verifies


@pytest.mark.parametrize("seed", range(3))
def test_exact_divisions_keep_every_value(seed):
    """The rewrite is an identity on every valuation (negative divisors and nested atoms included)."""
    rng = random.Random(seed)
    for _ in range(200):
        k = rng.choice([2, 3, 4, 8, -2, -4])
        inner = f"{k * rng.randint(-3, 3)}*a + {k * rng.randint(-3, 3)}*b + {k * rng.randint(-2, 2)}"
        op = rng.choice(["floordiv", "mod"])
        text = f"{op}({inner}, {k}) + max(floordiv({abs(k)}*a, {abs(k)}), b) - mod({k}*b + 1, {k})"
        e = parse_expr(text)
        s = exact_divisions(e)
        for _ in range(5):
            env = {"a": rng.randint(1, 50), "b": rng.randint(1, 50)}
            assert s.evaluate(env) == e.evaluate(env), (text, str(s), env)


def test_a_users_assert_on_a_symbolic_shape_is_read_as_its_equation():
    """Swin's patch merging asserts ``h % 2 == 0``: the program's own == (stock's False) before the
    AssertionError is the equation; the fix is the rewrite a person writes."""
    report = export_and_verify(m.patch_merging, "float32[b, h, w, 3]", fix=True, samples=4)
    _check_whole_fix(report, ("float32[b, 2*k_h, 2*k_w, 3]",), ())
    assert _runs_natively(m.patch_merging, (1, 6, 4, 3)) and not _runs_natively(m.patch_merging, (1, 5, 4, 3))


def test_flax_linens_parameter_shape_error_is_read_as_its_equation():
    """A token-mixing Dense made for 64 patches: flax compares the parameter's shape (64, 64) with
    (p*q, p*q) and raises ScopeParamShapeError; the fix is the equation it needed, ``p*q == 64``."""
    pytest.importorskip("flax")
    mixer = m.make_token_mixer()
    report = export_and_verify(mixer, "float32[b, p, q, 4]", fix=True, samples=3)
    assert report.export_error is not None
    if report.export_error.type != "ScopeParamShapeError":  # flax >= 0.12 on Python 3.12 compares with jnp
        pytest.skip(f"this flax raises {report.export_error.type} for the parameter's shape, not ScopeParamShapeError")
    _check_whole_fix(report, ("float32[b, p, q, 4]",), ("p*q == 64",))
    assert _runs_natively(mixer, (2, 4, 16, 4)) and not _runs_natively(mixer, (2, 4, 8, 4))


def test_an_assert_that_two_dimensions_are_equal_reuses_one_name():
    report = export_and_verify(m.inner_pair, "float32[a, k]", "float32[m, a]", fix=True, samples=3)
    fix = report.fix
    assert fix is not None and fix.ok, report.table()
    (left, right) = fix.in_avals
    assert left.split("[")[1].split(",")[1].strip(" ]") == right.split("[")[1].split(",")[0], fix.in_avals


def test_a_partial_fix_prints_no_command_that_would_fail():
    """The first refusal has a fix, the next none (a contraction of 3 with 5): the parts found are said,
    but no paste-ready command or code, which would still fail."""
    from jax import lax

    def partial(x):
        y = lax.slice_in_dim(x, 0, 16)
        return y[:3] @ jnp.ones((5,))

    report = export_and_verify(partial, "float32[b]", fix=True, samples=2)
    fix = report.fix
    assert fix is not None and fix.parts and not fix.ok and fix.status != FIXED, fix.lines()
    assert not any("smtdims export" in ln or "export.export" in ln for ln in fix.lines()), fix.lines()
    d = fix.to_dict()
    assert d["command"] == "" and d["code"] == "" and d["cli"]


def test_an_aligned_only_kernel_that_refuses_symbolic_sizes_is_said_plainly():
    """JAX's Pallas TPU flash attention (exported for the TPU on this CPU host) runs only at sequence
    lengths that are multiples of 128, which the traces at aligned sizes find (``128*t``), then refuses
    any symbolic size in its CostEstimate: no specification with a symbolic size exports it, and the
    report says so, where and why, instead of calling a fully pinned export a fix."""
    fa = pytest.importorskip("jax.experimental.pallas.ops.tpu.flash_attention")

    def attn(q, k, v):
        return fa.flash_attention(q, k, v)

    concrete = jax.ShapeDtypeStruct((1, 2, 128, 128), jnp.float32)
    try:
        jax.export.export(jax.jit(attn), platforms=("tpu",))(concrete, concrete, concrete)
    except Exception as err:  # noqa: BLE001 - this JAX cannot lower the kernel for the TPU here
        pytest.skip(f"flash attention does not lower for the TPU on this host: {type(err).__name__}")
    spec = "float32[b, 2, t, 128]"
    report = export_and_verify(attn, spec, spec, spec, fix=True, platforms=("tpu",), samples=2)
    fix = report.fix
    assert fix is not None and fix.status == "no symbolic family", "\n".join(fix.lines() if fix else ())
    assert "CostEstimate" in fix.detail and "test_whole_fix_loop.py" in fix.detail and "in attn" in fix.detail
    assert report.verdict().startswith("NO SYMBOLIC FIX: no constraint can make this export with symbolic sizes")
    assert any("128*t" in c[0] for r in fix.rounds for c in r.candidates), "the multiple of 128, from aligned traces"
    assert not fix.ok


def test_a_branch_on_the_patch_count_pins_the_size_at_the_example():
    """From one 16x16 example: the export (every symbolic size takes the "interpolate" branch) differs
    from the program at the example, which takes the learned table; the audit names the comparison
    (``floordiv(b, 4)*floordiv(c, 4) == 16``), and its variables are fixed at the example's sizes."""
    x = np.random.default_rng(0).normal(size=(2, 16, 16)).astype(np.float32)
    got = export_and_verify(m.branchy_positions, x, dims="auto", samples=3)
    assert got.ok and got.specs == ("float32[a, 16, 16]",), str(got)
    assert any("branches on" in r.error for r in got.fix.rounds), [r.error for r in got.fix.rounds]
    y = np.random.default_rng(1).normal(size=(5, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(got.report.exported.call(y)), np.asarray(m.branchy_positions(y)), rtol=1e-5, atol=1e-6)
    # from a non-square example the program takes the other branch everywhere: nothing needs fixing
    z = np.random.default_rng(2).normal(size=(2, 8, 16)).astype(np.float32)
    other = export_and_verify(m.branchy_positions, z, dims="auto", samples=3)
    assert other.ok and "16, 16" not in other.specs[0], str(other)


def test_the_samples_look_where_the_program_branches_on_a_shape():
    """Without an example: the samples include one where the program's unproven ``==`` holds, on the
    diagonal (the ``and h == w`` after it is short-circuited while tracing), so the verification sees the
    other branch and fails; the fix pins that size, the fix a person writes, and says that it excludes the
    shapes where the program takes its other branch."""
    report = export_and_verify(m.branchy_positions, "float32[b, 4*h, 4*w]", samples=4)
    assert not report.ok
    labels = [" ".join(s.why) for s in report.samples if s.status != "pass"]
    assert labels and "branches there" in labels[0], [(s.why, s.status) for s in report.samples]
    for spec in ("float32[b, h, w]", "float32[b, 4*h, 4*w]"):  # a failed export's fix; an exported one's
        fixed = export_and_verify(m.branchy_positions, spec, samples=4, fix=True)
        fix = fixed.fix
        assert fix is not None and fix.status == FIXED and fix.in_avals == ("float32[b, 16, 16]",), (spec, fix)
        assert fix.excluded and all("another branch" in why for why, _, _ in fix.excluded), fix.excluded
        assert "another branch" in fixed.verdict(), fixed.verdict()


def test_a_table_looked_up_past_its_end_gets_its_bound_from_the_values():
    """``jnp.take`` fills rows past a learned table's 64 with NaN instead of refusing: every shape traces,
    the artifact equals the program (NaN == NaN), and only the values say the program computes nothing
    past 64. A sample whose program output is NaN everywhere, beside a finite one, fails; the bound comes
    from running the program between them (bisection), and is verified like any fix."""
    as_given = export_and_verify(m.learned_positions, "float32[b, t, 8]", samples=4)
    assert not as_given.ok and any("NaN everywhere" in s.detail for s in as_given.samples), as_given.table()
    report = export_and_verify(m.learned_positions, "float32[b, t, 8]", samples=4, fix=True)
    _check_whole_fix(report, ("float32[b, t, 8]",), ("t <= 64",))
    ones = np.ones((1, 64, 8), np.float32)
    assert np.isfinite(np.asarray(m.learned_positions(ones))).all()
    assert np.isnan(np.asarray(m.learned_positions(np.ones((1, 65, 8), np.float32)))).all()
    auto = export_and_verify(m.learned_positions, np.ones((2, 7, 8), np.float32), dims="auto", samples=4)
    assert auto.ok and auto.constraints == ("b <= 64",), str(auto)
