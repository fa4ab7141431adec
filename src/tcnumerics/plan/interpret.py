"""The one interpreter: runs any plan over the array namespace of its operands (numpy on the host, CuPy on a GPU).

Engines are reached through one small protocol (``accumulate_bits``, ``gemm_bits``, ``dot_bits``,
``promotion_reason``, ``ffma_chain``); the arithmetic between them is ``plan.rules``, the binding of a call's
operand values to a plan ``plan.operands``.  ``Instruction.mma``/``dot_bits``, ``tcnumerics.gemm``, the library's
kernels (tensor-core, FFMA, SIMT and stream-K reductions) and the torch recipes all run here.  Run with numpy and the
reference engine this is the readable specification; every engine is proven equal to it bit for bit.

Operands are bound by name: ``A`` ([M, Kp] bits, K laid out as the plan's K positions), ``B`` ([N, Kp] bits,
B's columns as rows), ``C_acc`` (C as accumulator bits), and FP32 values for ``C``, ``bias``, ``scale_a``,
``scale_b``, ``block_a``, ``block_b``.

**Observing the value before the output conversion.**  Every result ends in a root ``Convert``; error attribution
(``tcnumerics.torch.attribution``) separates the epilogue's rounding from the conversion's, so it needs the value
the conversion received.  ``before_conversion()`` records it: while active, each outermost ``run`` whose plan root
is a ``Convert`` appends its term's value (FP32 values as a float64 array, in the operands' namespace: numpy, or
CuPy on a GPU -- never copied to the host); the result is the same bits (the same ``convert``).  Inactive, it costs
``run`` one thread-local look-up.

>>> import numpy as np, ml_dtypes
>>> from tcnumerics.catalog import get_instruction
>>> from tcnumerics.plan import Plan, Chain, Convert
>>> spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
>>> ones = np.ones((2, 16), ml_dtypes.bfloat16).view(np.uint16)
>>> run(Plan(Convert(Chain(spec, 0, 16))), {"A": ones, "B": ones[:1]}).tolist()
[[16.0], [16.0]]
>>> a = np.full((2, 16), 0x3f81, np.uint16)   # bf16 1 + 2**-7: the sum 16.125 needs a rounding in E4M3
>>> with before_conversion() as seen:
...     out = run(Plan(Convert(Chain(spec, 0, 16), "e4m3")), {"A": a, "B": ones[:1]})
>>> seen[0].tolist(), out.astype(np.float64).tolist()
([[16.125], [16.125]], [[16.0], [16.0]])
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import numpy as np

from ..arrays import DeviceValues, float64, namespace, to_host
from ..engines import get_engine, grid_dot_bits, resolve_engine
from ..formats import Format, IntFormat, Rounding, get_format
from . import block_scaled, operands
from .nodes import (AddC, AddExact, Alpha, BlockScaledChain, Chain, Convert, Epilogue, FFMAChain, Input, LayOut, Node,
                    OrderedSum, PairedChain, Plan, Promote, RoundEach, RoundTo, Scale, TileGroups)
from .rules import FP32, fp32_add, fp32_fma, fp32_halving_sum, fp32_partial, fp32_sum, fp32_tree_sum, quiet

__all__ = ["run", "evaluate", "Bits", "epilogue", "convert", "before_conversion"]

_WORKING_SET = 1 << 22  # elements per operand block of the dot_bits fallback
_DOT_BLOCK = 1 << 20  # operand elements per engine call of a paired-row chain (bounds the engines' temporaries)
_BLOCK_SCALED_ELEMENTS = 1 << 21  # operand elements per block-scaled dot_bits call (bounds memory)


@dataclass
class Bits:
    """A chain's result as accumulator patterns of ``format`` (kept as bits so a plain conversion is exact)."""

    format: Format
    bits: object

    def values(self):
        return self.format.to_float(self.bits)


_observed = threading.local()  # .records: the list ``before_conversion`` appends to (None: not observing)


def run(plan: "Plan | Node", operands: dict, engine: str = "auto"):
    """The plan's output for the bound ``operands`` (an array of the output format, or FP32 values)."""
    root = plan.root if isinstance(plan, Plan) else plan
    records = getattr(_observed, "records", None)
    out = evaluate(root, operands, engine) if records is None else _run_observed(root, operands, engine, records)
    return out.values() if isinstance(out, Bits) else out


@contextlib.contextmanager
def before_conversion():
    """Record, on this thread, the value each outermost ``run`` of a plan rooted in ``Convert`` converts.

    Yields the list the values are appended to, in run order: FP32 values (a float64 array, or accumulator values
    read from their ``Bits``) of the ``Convert``'s term, in the operands' namespace.  Runs nested in another run
    are not recorded; neither are plans with another root (a serial split-K's ``OrderedSum``).  Observers nest: the
    innermost active one records, the outer one again once it exits."""
    outer = getattr(_observed, "records", None)
    _observed.records = records = []
    try:
        yield records
    finally:
        _observed.records = outer


def _run_observed(root: Node, operands: dict, engine: str, records: list):
    """``evaluate(root)`` with its conversion's input appended to ``records`` (runs inside it unobserved)."""
    _observed.records = None
    try:
        if not isinstance(root, Convert):
            return evaluate(root, operands, engine)
        term = evaluate(root.term, operands, engine)
        records.append(_term_values(term))
        return convert(term, root.format, root.rounding)
    finally:
        _observed.records = records


def _term_values(x):
    """A conversion's input as float64 values (an integer accumulator's exactly)."""
    if isinstance(x, Bits):
        d = x.format.to_array(x.bits)
        return float64(d) if isinstance(x.format, IntFormat) else float64(x.values())
    return float64(x)


def evaluate(node: Node, env: dict, engine: str):
    """One node's value: ``Bits`` for a bare chain, else an array."""
    handler = _HANDLERS.get(type(node))
    if handler is None:
        raise TypeError(f"plan: no rule for node {type(node).__name__}")
    return handler(node, env, engine)


def _values(x):
    return x.values() if isinstance(x, Bits) else x


def _chain(node: Chain, env, engine):
    spec = node.instruction
    a, b = env["A"], env["B"]
    acc = env["C_acc"] if node.start == "C" else _zero(spec, a, b)
    if 0 in acc.shape:  # no outputs (an empty M, N or batch): no engine call
        return Bits(spec.d_format, namespace(acc).zeros(acc.shape, spec.d_format.container_dtype))
    return Bits(spec.d_format, _chain_bits(spec, engine, a, b, acc, node.k0, node.k1))


def _zero(spec, a, b):
    return namespace(a, b).zeros(a.shape[:-1] + (b.shape[-2],), spec.c_format.container_dtype)


def _per_item(call, a, b, acc):
    """``call(a, b, acc)`` on one GEMM's operands (A [M, Kp], B [N, Kp], acc [M, N]); a batch ([batch, ...] each)
    item by item -- engines take matrices, contiguous ones -- and stacked."""
    if a.ndim == 2:
        return call(a, b, acc)
    xp = namespace(acc)
    c = xp.ascontiguousarray
    return xp.stack([call(c(a[i]), c(b[i]), c(acc[i])) for i in range(a.shape[0])])


def _chain_bits(spec, engine, a, b, acc, k0, k1):
    """The engine protocol: ``accumulate_bits`` over a K range, else ``gemm_bits`` / ``dot_bits`` on its columns.
    No instructions: the accumulator as it is (as ``accumulate_bits`` over an empty range).  Device operands run
    on the GPU engine ("auto"), or on host copies for a CPU engine asked for by name (the result moved back)."""
    if k1 == k0 and spec.c_format == spec.d_format:
        return acc.astype(spec.d_format.container_dtype)
    engine = resolve_engine(engine, a)
    xp = namespace(a, b, acc)
    if xp is not np and engine != "cuda":
        return xp.asarray(_chain_bits(spec, engine, to_host(a), to_host(b), to_host(acc), k0, k1))
    eng = get_engine(engine)
    if getattr(eng, "accumulate_bits", None) is not None:
        return _per_item(lambda a, b, acc: eng.accumulate_bits(spec, a, b, acc, k0, k1), a, b, acc)
    if getattr(eng, "gemm_bits", None) is not None:
        return _per_item(lambda a, b, acc: eng.gemm_bits(spec, a[:, k0:k1], b[:, k0:k1], acc), a, b, acc)
    return _per_item(lambda a, b, acc: grid_dot_bits(eng.dot_bits, spec, a[:, k0:k1], b[:, k0:k1], acc,
                                                     _WORKING_SET), a, b, acc)


def _paired(node: PairedChain, env, engine):
    """Row i of ``A`` with row i of ``B`` chained from ``C_acc[i]``: one engine call on device operands, blocks of
    rows on the host (bounded memory); no rows: none; K = 0: one instruction of zeros (+0 products)."""
    spec, a, b, c = node.instruction, env["A"], env["B"], env["C_acc"]
    if node.block_scaled:  # the block scales enter inside the unit (plan.block_scaled, on the host)
        return Bits(spec.d_format, block_scaled.dot_bits(spec, a, b, c, scale_a=env["scale_bits_a"],
                                                       scale_b=env["scale_bits_b"], engine=engine))
    xp = namespace(a)
    if a.ndim == 2 and a.shape[0] == 0:
        return Bits(spec.d_format, xp.empty(0, spec.d_format.container_dtype))
    if a.shape[-1] == 0:  # no products: the unit adds one instruction of zeros (+0) to c
        a, b = (xp.zeros(x.shape[:-1] + (spec.k,), x.dtype) for x in (a, b))
    eng = get_engine(engine)
    rows = max(1, _DOT_BLOCK // a.shape[1])  # engines build [rows, K] temporaries
    if xp is not np or a.shape[0] <= rows:
        return Bits(spec.d_format, eng.dot_bits(spec, a, b, c))
    out = np.empty(a.shape[0], dtype=spec.d_format.container_dtype)
    for r0 in range(0, a.shape[0], rows):
        out[r0:r0 + rows] = eng.dot_bits(spec, a[r0:r0 + rows], b[r0:r0 + rows], c[r0:r0 + rows])
    return Bits(spec.d_format, out)


def _block_scaled(node: BlockScaledChain, env, engine):
    """Every (row, column) pair's block-scaled chain, a block of rows at a time (``block_scaled.dot_bits`` takes
    paired rows).  The host reference engine: block scaling is evaluated on the CPU."""
    spec = node.instruction
    a, b = env["A"][:, node.k0:node.k1], env["B"][:, node.k0:node.k1]
    blk = spec.model.scale_block
    sa = env["scale_bits_a"][:, node.k0 // blk:node.k1 // blk]
    sb = env["scale_bits_b"][:, node.k0 // blk:node.k1 // blk]
    M, N, k = a.shape[0], b.shape[0], a.shape[1]
    out = np.empty((M, N), np.uint32)
    rows = max(1, _BLOCK_SCALED_ELEMENTS // max(1, N * k))
    for m0 in range(0, M, rows):
        m1 = min(M, m0 + rows)
        n = (m1 - m0) * N
        out[m0:m1] = block_scaled.dot_bits(
            spec, np.repeat(a[m0:m1], N, axis=0), np.tile(b, (m1 - m0, 1)), np.zeros(n, np.uint32),
            scale_a=np.repeat(sa[m0:m1], N, axis=0), scale_b=np.tile(sb, (m1 - m0, 1))).reshape(m1 - m0, N)
    return Bits(spec.d_format, out)


def _promote(node: Promote, env, engine):
    spec, a, b = node.instruction, env["A"], env["B"]
    start = None if node.start is None else env[node.start]
    zero = _zero(spec, a, b)
    engine = resolve_engine(engine, a)
    eng = get_engine(engine)
    reason = getattr(eng, "promotion_reason", None)
    if node.block_scale is None and reason is not None and reason(spec) is None:
        # the loop below in one engine call (bit for bit: tests/test_promotion.py)
        acc = zero if start is None else FP32.from_float(start).astype(spec.c_format.container_dtype)
        return fp32_partial(spec.d_format, _per_item(
            lambda a, b, acc: eng.accumulate_bits(spec, a, b, acc, node.k0, node.k1, promote_every=node.every,
                                                  promote_from_acc=start is not None), a, b, acc))
    part = start
    for b0 in range(node.k0, node.k1, node.every):
        b1 = min(node.k1, b0 + node.every)
        p = fp32_partial(spec.d_format, _chain_bits(spec, engine, a, b, zero, b0, b1))
        if node.block_scale:
            # measured (cuBLASLt 13.1, H200): main = fma(partial, fp32(sa * sb), main)
            kb = (node.origin + b0 - node.k0) // node.block_scale
            factor = FP32.round(env["block_a"][:, kb][:, None] * env["block_b"][kb][None, :])
            part = fp32_fma(p, factor, namespace(p).zeros_like(p) if part is None else part)
        else:
            part = p if part is None else fp32_add(part, p)
    return part


def _ffma(node: FFMAChain, env, engine):
    from .ffma import ffma_chain  # numba compiles on first use only

    a, b = env["A"], env["B"]
    if node.columns:
        acc = ffma_chain(a, b, node.columns)
    else:  # no products: +0
        acc = namespace(a, b).zeros((a.shape[0], b.shape[1]))
    if node.pad:  # the idle steps' +0 products: fma(+0, 1, acc) = acc + 0, exact (turns a -0 into +0)
        acc = acc + 0.0
    return acc


def _input(node: Input, env, engine):
    return env[node.name]


def _ordered_sum(node: OrderedSum, env, engine):
    if node.kind == "serial":
        return _serial(node, env, engine)
    terms = (_values(evaluate(t, env, engine)) for t in node.terms)  # one at a time: bounded memory
    if node.kind == "halving":
        return fp32_halving_sum(list(terms))
    if node.kind == "tree":
        return fp32_tree_sum(node.tree, list(terms))
    return fp32_sum(terms, from_zero=node.from_zero)


def _serial(node: OrderedSum, env, engine):
    """CUTLASS in-place split-K: the first term is converted to the output already; each later slice adds
    ``fma(alpha, acc_k, D)`` to what the previous one wrote, rounded to the output format again."""
    out = get_format(node.out_format)
    d = evaluate(node.terms[0], env, engine)
    d = out.to_float(out.bits_of(d))
    xp = namespace(d)
    a = float(FP32.round(np.float64(node.alpha)))
    for t in node.terms[1:]:
        d = out.round(fp32_fma(xp.full(d.shape, a), _values(evaluate(t, env, engine)), d))
    return out.to_array(out.from_float(d))


def _lay_out(node: LayOut, env, engine):
    return evaluate(node.term, operands.bind(node, env), engine)


def _tile_groups(node: TileGroups, env, engine):
    """Each group's outputs from its own subtree, evaluated on the rows and columns its tiles touch (an output's
    bits depend on its own row and column only), the rest of that block discarded."""
    a, b = env["A"], env["B"]
    xp = namespace(a, b)
    rows = np.arange(a.shape[0]) if env.get("rows") is None else np.asarray(env["rows"])
    cols = np.arange(b.shape[0]) if env.get("cols") is None else np.asarray(env["cols"])
    TM, TN = node.tile
    tm, tn = cols // TM, rows // TN
    member = _tile_members(node.groups, tm, tn)  # [groups, R, C] host booleans
    out = xp.zeros((len(rows), len(cols)))
    for g, term in enumerate(node.terms):
        ri, ci = np.flatnonzero(member[g].any(axis=1)), np.flatnonzero(member[g].any(axis=0))
        if not len(ri):
            continue
        sub = {**env, "A": a[xp.asarray(ri)], "B": b[xp.asarray(ci)], "rows": rows[ri], "cols": cols[ci]}
        v = evaluate(term, sub, engine)
        value = float64(fp32_partial(v.format, v.bits) if isinstance(v, Bits) else v)  # a chain's own NaN pattern
        block = (xp.asarray(ri)[:, None], xp.asarray(ci)[None, :])
        out[block] = xp.where(xp.asarray(member[g][np.ix_(ri, ci)]), value, out[block])
    return out


def _tile_members(groups, tm, tn) -> np.ndarray:
    """[groups, R, C]: which group's tiles hold output (r, c) (tile (tm[c], tn[r])); a None group: the rest."""
    grid = np.full((int(tn.max(initial=0)) + 1, int(tm.max(initial=0)) + 1), -1)
    for g, tiles in enumerate(groups):
        for m, n in tiles or ():
            if n < grid.shape[0] and m < grid.shape[1]:
                grid[n, m] = g
    rest = [g for g, tiles in enumerate(groups) if tiles is None]
    if rest:
        grid[grid < 0] = rest[0]
    which = grid[tn[:, None], tm[None, :]]
    return np.stack([which == g for g in range(len(groups))])


def _round_each(node: RoundEach, env, engine):
    return get_format(node.format).round(_values(evaluate(node.term, env, engine)))


def _scale(node: Scale, env, engine):
    acc = _values(evaluate(node.term, env, engine))
    sa, sb = env["scale_a"], env["scale_b"]
    if node.kind == "tensor":
        return FP32.round(acc * FP32.round(sa * sb))
    return FP32.round(FP32.round(acc * sb) * sa)


def _epilogue(node: Epilogue, env, engine):
    return epilogue(_values(evaluate(node.term, env, engine)), node.steps, env, node.acc_format)


def epilogue(acc, steps, operands: dict, acc_format: str = "fp32"):
    """The one epilogue: ``steps`` (Alpha, AddC, RoundTo, AddExact) applied in order to the accumulator values,
    every operation rounded to ``acc_format`` (RNE) unless a step says otherwise; ``operands`` binds C and bias."""
    fmt = get_format(acc_format)
    d = float64(acc)  # exact (from the patterns on a GPU: a float32 operation there flushes subnormals)
    xp = namespace(d)
    with quiet(xp):
        for step in steps:
            if isinstance(step, Alpha):
                v = np.float64(step.value)
                a = float(fmt.round(v if step.value_format is None else get_format(step.value_format).round(v)))
                if a != 1:
                    d = fmt.round(float64(d) * a)
            elif isinstance(step, AddC):
                d = _add_c(fmt, d, _operand(operands, step.operand, xp), step)
            elif isinstance(step, RoundTo):
                d = get_format(step.format).round(float64(d), step.rounding)
            elif isinstance(step, AddExact):
                d = float64(d) + _operand(operands, step.operand, xp)
            else:
                raise TypeError(f"epilogue: unknown step {step!r}")
    return d


def _add_c(fmt, d, c, step: AddC):
    beta = float(fmt.round(np.float64(step.beta)))
    if step.round_operand:
        c = fmt.round(c)
    if step.fused:
        return fp32_fma(namespace(c).full(c.shape, beta), c, fmt.round(float64(d)))
    if beta != 1:
        c = fmt.round(c * beta)
    return fp32_add(d, c) if fmt == FP32 else fmt.round(float64(d) + c)


def _operand(operands: dict, name: str, xp):
    x = operands[name]
    v = float64(x if isinstance(x, DeviceValues) else xp.asarray(x))
    return v.reshape(1, -1) if name == "bias" else v


def _convert(node: Convert, env, engine):
    return convert(evaluate(node.term, env, engine), node.format, node.rounding)


def convert(x, out_format: str | None, rounding="rne"):
    """The one conversion of a result to ``out_format``: accumulator ``Bits`` (None keeps them; an integer
    accumulator is read exactly) or FP32 values (None: FP32)."""
    rounding = Rounding.parse(rounding)
    if isinstance(x, Bits):
        d_format = x.format
        d = d_format.to_array(x.bits)
        if out_format is None:
            return d
        out = get_format(out_format)
        if out == d_format:
            return d
        if isinstance(out, IntFormat):
            raise ValueError(f"out_format: cannot convert {d_format.name} results to integer format {out.name}")
        values = d.astype(np.float64) if isinstance(d_format, IntFormat) else d_format.to_float(x.bits)
        return out.to_array(out.from_float(values, rounding))
    out = FP32 if out_format is None else get_format(out_format)
    if isinstance(out, IntFormat):
        raise ValueError(f"out_format: cannot convert floating-point results to integer format {out.name}")
    return out.to_array(out.from_float(x, rounding))


_HANDLERS = {Chain: _chain, PairedChain: _paired, BlockScaledChain: _block_scaled, Promote: _promote, FFMAChain: _ffma,
             Input: _input, OrderedSum: _ordered_sum, LayOut: _lay_out, TileGroups: _tile_groups,
             RoundEach: _round_each, Scale: _scale, Epilogue: _epilogue, Convert: _convert}
