"""Every path that produces a result goes through the one plan interpreter (issue 30, items 1-2).

Two checks per path, with ``plan.interpret.evaluate`` patched: a *trace* records the node types the interpreter
ran (the path's arithmetic is those nodes), and a *poison* makes the interpreter raise -- a path that still returned
a result would have computed it somewhere else.  The paths: ``Instruction.mma`` / ``dot_bits`` (block-scaled too),
``blockscale.mma`` (``blockscale.dot_bits`` is the engine-level call the interpreter makes, not a path), unit GEMMs
(chain, promotion, split-K, block scales, M or N = 0), the library's calls (nvjet split-K, FP8 row-wise scales, SIMT
gemv / gemmSN / gemv2T / largek, stream-K, CUTLASS serial split-K, bmm, baddbmm, K = 0), the old H200 presets,
sparse units, ``tcnumerics.torch`` recipes (epilogue, FP8 tensor scaling, MX) and ``emulate`` in unit and library
mode, and the device (CuPy) namespace path with the strict numpy stand-in ``fake_cupy``.

A third check holds every host path to the plan it prints.  Where ``explain()`` prints a tree (library calls
``op.plan(...).tree()``, ``structure.plan``, the presets' ``plan``, the SIMT and stream-K reductions, ``plan_gemm``,
the torch recipes' ``UnitRecipe.plan``, and in torch's library mode the plan the library op prepared), it is the tree
the interpreter evaluates: its reduction node is among the nodes evaluated, every chain, sum, scale and layout node
it shows is evaluated exactly once per run, and its epilogue and conversion (steps, format, rounding) are the ones
evaluated.  The paths that print no tree (``mma``, ``dot_bits``, sparse units) run one node, the one their plan is.

Out of scope, each named in ``SEMIRING_EXCLUDED`` with its reason (and in docs/plans.md): eight of
``tcnumerics.semiring``'s nine SIMD2 ops -- min-plus, max-plus, min-mul, max-mul, min-max, max-min (min/max
reductions), or-and (booleans) and plus-norm (squared differences) -- which compute with the semiring's own engines.
mul-plus goes through ``tcnumerics.gemm`` and ``Instruction.dot_bits``, so through the interpreter.  The tests
enumerate ``semiring.op_names()``: a new op must be classified, and each class is checked (through the interpreter:
poisoned, it fails; excluded: poisoned, it still answers).
"""

import dataclasses
from collections import Counter


import ml_dtypes
import numpy as np
import pytest

import fake_cupy
import tcnumerics as tc
from tcnumerics import library as lib
from tcnumerics import blockscale, sparse
from tcnumerics.arrays import DeviceValues
from tcnumerics.formats import get_format
from tcnumerics.gemm import gemm, plan_gemm
from tcnumerics.library import ops as lib_ops, simt, streamk, structure
from tcnumerics.library.presets import h200_presets
from tcnumerics.library.structure import StreamK, Structure, run, simt_gemm
from tcnumerics.plan import interpret
from tcnumerics.plan.nodes import Chain, Convert, Epilogue, PairedChain, Plan

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
E4M3 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
TF32 = "hopper.wgmma.m64n8k8.f32.tf32.tf32"
MXFP8 = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
SPARSE = "hopper.mma.sp.m16n8k16.f32.bf16.bf16.f32"
GEMMSN_NN = "void gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false, x>"
GEMMSN_TN = "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>"
GEMV2T = "void gemv2T_kernel_val<int, int, __half, __half, __half, float, 128, 16, 4, 4, false, x>"
GEMVNSP = "void gemvNSP_kernel<float, float, float, float, 1, 32, 4, 1024, false, x>"
LARGEK = "void sgemm_largek_lds64<false, false, 6, 3, 4, 5, 2, 64>"
GEMVX_N = "internal::gemvx::kernel<int, int, float, float, float, float, false, true, false, false, 9, false, x>"


def _ops(M, K, N, dtype=ml_dtypes.bfloat16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)


def _unit_gemm():
    return gemm(*_ops(8, 64, 8), instruction=BF16, out_format="bf16")


def _unit_split_promote_blockscale():
    A, B = _ops(4, 256, 8, ml_dtypes.float8_e4m3fn)
    return gemm(A, B, instruction=E4M3, scale_a=np.ones((4, 2)), scale_b=np.ones((2, 1)), split_k=2)


def _library_splitk():  # H100: nvjet split-K x6 + splitKreduce
    return lib.matmul(*_ops(64, 8192, 64), gpu="h100")


def _library_fp8_rowwise():
    A, B = _ops(32, 256, 32, ml_dtypes.float8_e4m3fn)
    return lib.scaled_mm(A, B, np.full((32, 1), 0.5), np.full((1, 32), 2.0), out_dtype="bf16", gpu="h100")


def _library_simt():  # FP32 M = 1: a cuBLAS SIMT gemv kernel (gemvx, not transposed)
    return lib.matmul(*_ops(1, 64, 64, np.float32), gpu="h100")


def _library_simt_linear():  # F.linear's weight: gemvx, transposed
    x, w = _ops(1, 64, 64, np.float32)
    return lib.linear(x, w.T.copy(), gpu="h100")


def _simt_kernel(name, **kw):
    def path():
        return simt_gemm(name, *_ops(2, 600, 3, np.float32), out_format="bf16", bias=np.ones(3), **kw)
    return path


def _library_streamk_selected():  # TF32 stream-K chosen by the H100 tables, sampled rows / columns of the call
    A, B = _ops(256, 4096, 4096, np.float32)
    rows, cols = np.array([0, 1, 255]), np.array([0, 3900, 4095])  # 3900: a shared tile's column
    return lib.matmul(A[rows], np.ascontiguousarray(B[:, cols]), full_shape=(256, 4096, 4096), rows=rows, cols=cols,
                      fp32_precision="high", gpu="h100")


def _streamk_direct():
    A, B = _ops(2, 96, 2, np.float32)
    return streamk.streamk_tf32(A, B, [0, 1], [0, 1], M=128, N=128, K=96, ctas=3, tile=(128, 128, 32))


def _library_bmm():
    A, B = (np.stack([x] * 3) for x in _ops(8, 64, 8))
    return lib.bmm(A, B, gpu="h100")


def _library_baddbmm():
    A, B = (np.stack([x] * 3) for x in _ops(8, 64, 8))
    return lib.baddbmm(np.ones((3, 8, 8), ml_dtypes.bfloat16), A, B, beta=0.5, alpha=2.0, gpu="h100")


def _mma():
    A, B = _ops(8, 64, 8, np.float32)
    return tc.instruction(BF16).mma(np.stack([A, A]), B, np.ones((8, 8), np.float32))


def _mma_one():
    return tc.instruction(BF16).mma(*_ops(8, 64, 8))


def _mma_empty():
    return tc.instruction(BF16).mma(*_ops(0, 64, 8))


def _dot_bits():
    spec = tc.instruction(BF16).spec
    a, b = (spec.a_format.bits_of(x) for x in _ops(5, 32, 1))
    return tc.instruction(BF16).dot_bits(a, a[::-1], np.zeros(5, np.uint32))


def _dot_bits_block_scaled():
    inst = tc.instruction(MXFP8)
    a = inst.spec.a_format.from_float(np.random.default_rng(2).standard_normal((4, 64)))
    s = np.full((4, 2), 127, np.uint8)
    return inst.dot_bits(a, a[::-1], np.zeros(4, np.uint32), scale_a=s, scale_b=s)


def _blockscale_mma(C=None):
    def path():
        inst = tc.instruction(MXFP8)
        rng = np.random.default_rng(3)
        A = inst.spec.a_format.from_float(rng.standard_normal((3, 64)))
        B = inst.spec.b_format.from_float(rng.standard_normal((64, 2)))
        return blockscale.mma(MXFP8, A, B, C, scale_a=np.full((3, 2), 127, np.uint8),
                              scale_b=np.full((2, 2), 128, np.uint8))
    return path


def _gemm_empty(M, N):
    def path():
        A = np.zeros((M, 16), ml_dtypes.bfloat16)
        return gemm(A, np.zeros((16, N), ml_dtypes.bfloat16), instruction=BF16, out_format="bf16")
    return path


def _library_streamk():
    s = Structure("tf32 stream-K", stream_k=StreamK(64, 64, 256, ctas=3, tile=(64, 64, 32)))
    return run(s, *_ops(64, 256, 64, np.float32), out_format="fp32")


def _library_serial_split():  # CUTLASS in-place split-K: C in the first slice's epilogue, slices added after
    s = Structure("serial", instruction=BF16, split_k=(32, 32), split_reduce="serial", epilogue="bx")
    A, B = _ops(8, 64, 8)
    return run(s, A, B, out_format="bf16", C=np.ones((8, 8)), beta=1.0)


def _library_k0():
    return lib.addmm(np.ones((4, 8), ml_dtypes.bfloat16), *_ops(4, 0, 8), beta=0.5, gpu="h100")


def _presets():
    return h200_presets("torch.matmul", dtype="bf16")(*_ops(16, 4096, 16))


def _sparse():
    spec = sparse.get_sparse(SPARSE)
    rng = np.random.default_rng(1)
    a = spec.a_format.from_float(rng.standard_normal((4, 8)))
    b = spec.b_format.from_float(rng.standard_normal((4, 16)))
    return sparse.dot_bits(SPARSE, a, b, spec.c_format.from_float(np.zeros(4)), sparse.random_index(rng, 4, 16, spec))


def _recipe(promote_every=None, **kw):
    """``UnitRecipe.create(**kw)`` with ``promote_every`` set after: create() checks it by running a one-element GEMM
    through the interpreter -- set-up, which poisoned would raise before the call under test computed anything."""
    from tcnumerics.torch.unit import UnitRecipe

    return dataclasses.replace(UnitRecipe.create(**kw), promote_every=promote_every)


def _torch_recipe(**kw):
    def path():
        from tcnumerics.torch.unit import epilogue

        r = _recipe(**kw)
        A, B = _ops(8, 64, 8, np.float64)
        return epilogue(r.matmul(A, B), "bf16", alpha=0.5, C=np.ones((8, 8)), beta=2.0, bias=np.ones(8))
    return path


def _torch_emulate(**kw):
    def path():
        import torch

        import tcnumerics.torch as tct

        a, b = torch.randn(8, 64, dtype=torch.bfloat16), torch.randn(64, 8, dtype=torch.bfloat16)
        with tct.emulate(**kw):
            return torch.nn.functional.linear(a, b.T, torch.ones(8, dtype=torch.bfloat16))
    return path


def _device(x, cupy):
    if x.dtype.kind == "f":
        return cupy.asarray(x)
    fmt = get_format(x.dtype.name)
    return DeviceValues(cupy.asarray(fmt.bits_of(x)), fmt)


def _device_gemm(cupy):
    A, B = _ops(8, 128, 8)
    return gemm(_device(A, cupy), _device(B, cupy), cupy.asarray(np.ones((8, 8))), instruction=BF16,
                split_k=2, c_role="epilogue", engine="cuda")


def _device_structure(cupy):
    A, B = _ops(8, 64, 8, np.float32)
    s = Structure("sgemm split", split_k=(32, 32), epilogue="bias")
    return run(s, cupy.asarray(A), cupy.asarray(B), out_format="fp32", bias=cupy.asarray(np.ones(8)), engine="cuda")


def _device_simt(cupy):
    A, B = _ops(2, 300, 8, np.float32)
    s = Structure("gemvx", simt_kernel=GEMVX_N, simt_lanes=4, simt_slices=2)
    return run(s, cupy.asarray(A), cupy.asarray(B), out_format="fp32", engine="cuda")


def _device_streamk(cupy):
    A, B = _ops(33, 320, 24, np.float32)
    s = Structure("stream-K", stream_k=StreamK(33, 24, 320, ctas=4, tile=(8, 16, 32)))
    return run(s, cupy.asarray(A), cupy.asarray(B), out_format="fp32", engine="cuda")


def _device_mma(cupy):
    A, B = _ops(8, 64, 8, np.float32)
    return tc.instruction(BF16).mma(cupy.asarray(A), cupy.asarray(B), engine="cuda")


def _device_unit_epilogue(cupy):
    pytest.importorskip("torch")
    from tcnumerics.torch.unit import epilogue

    return epilogue(cupy.asarray(np.ones((4, 4))), "bf16", C=cupy.asarray(np.ones((4, 4))), beta=0.5,
                    scale_a=cupy.asarray(np.ones((4, 1))), scale_b=cupy.asarray(np.ones((1, 4))))


# path -> (callable, node types the interpreter must run for it, needs torch)
PATHS = {
    "inst.mma batch": (_mma, {"Chain"}, False),
    "inst.mma": (_mma_one, {"Chain"}, False),
    "inst.mma M = 0": (_mma_empty, {"Chain"}, False),
    "inst.dot_bits": (_dot_bits, {"PairedChain"}, False),
    "inst.dot_bits block-scaled": (_dot_bits_block_scaled, {"PairedChain"}, False),
    "blockscale.mma": (_blockscale_mma(), {"PairedChain"}, False),
    "blockscale.mma from C": (_blockscale_mma(np.ones((3, 2), np.float32)), {"PairedChain"}, False),
    "unit gemm": (_unit_gemm, {"Chain", "Convert"}, False),
    "unit gemm M = 0": (_gemm_empty(0, 8), {"Chain", "Convert"}, False),
    "unit gemm N = 0": (_gemm_empty(4, 0), {"Chain", "Convert"}, False),
    "unit split-K, promotion, block scales": (_unit_split_promote_blockscale, {"OrderedSum", "Promote", "Convert"},
                                              False),
    "library H100 split-K": (_library_splitk, {"LayOut", "OrderedSum", "Chain", "Epilogue", "Convert"}, False),
    "library FP8 row-wise scales": (_library_fp8_rowwise, {"Scale", "Promote", "Epilogue", "Convert"}, False),
    "library SIMT": (_library_simt, {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}, False),
    "library SIMT linear": (_library_simt_linear, {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}, False),
    "SIMT gemmSN_NN": (_simt_kernel(GEMMSN_NN), {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}, False),
    "SIMT gemmSN_TN": (_simt_kernel(GEMMSN_TN), {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}, False),
    "SIMT gemv2T": (_simt_kernel(GEMV2T), {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}, False),
    "SIMT gemvNSP": (_simt_kernel(GEMVNSP), {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}, False),
    "SIMT largek": (_simt_kernel(LARGEK, slices=3), {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}, False),
    "SIMT gemvx split": (_simt_kernel(GEMVX_N, lanes=4, slices=2), {"OrderedSum", "FFMAChain", "Convert"}, False),
    "library stream-K": (_library_streamk, {"LayOut", "OrderedSum", "Chain", "Epilogue", "Convert"}, False),
    "library stream-K selected": (_library_streamk_selected, {"LayOut", "TileGroups", "OrderedSum", "Chain",
                                                              "Epilogue", "Convert"}, False),
    "stream-K": (_streamk_direct, {"LayOut", "OrderedSum", "Chain"}, False),
    "library bmm": (_library_bmm, {"LayOut", "Chain", "Epilogue", "Convert"}, False),
    "library baddbmm": (_library_baddbmm, {"LayOut", "Chain", "Epilogue", "Convert"}, False),
    "library serial split-K": (_library_serial_split, {"OrderedSum", "LayOut", "Chain", "Epilogue"}, False),
    "library K = 0": (_library_k0, {"Epilogue", "Input", "Convert"}, False),
    "H200 presets": (_presets, {"OrderedSum", "Chain", "Convert"}, False),
    "sparse": (_sparse, {"PairedChain"}, False),
    "torch recipe": (_torch_recipe(instruction=BF16), {"Chain", "Epilogue", "Input", "Convert"}, True),
    "torch FP8 recipe": (_torch_recipe(instruction=E4M3, scaling="tensor", promote_every=128),
                         {"Promote", "Scale", "Epilogue", "Convert"}, True),
    "torch MX recipe": (_torch_recipe(instruction=MXFP8, scaling="mx"), {"BlockScaledChain", "Epilogue"}, True),
    "torch emulate unit": (_torch_emulate(instruction=BF16), {"Chain", "Epilogue", "Convert"}, True),
    "torch emulate library": (_torch_emulate(library="hopper"), {"Epilogue", "Convert"}, True),
}
DEVICE_PATHS = {
    "device gemm": (_device_gemm, {"OrderedSum", "Chain", "Epilogue", "Convert"}),
    "device structure": (_device_structure, {"OrderedSum", "FFMAChain", "Epilogue", "Convert"}),
    "device unit epilogue": (_device_unit_epilogue, {"Scale", "Epilogue", "Convert"}),
    "device SIMT": (_device_simt, {"OrderedSum", "FFMAChain", "Convert"}),
    "device stream-K": (_device_streamk, {"LayOut", "TileGroups", "OrderedSum", "Chain", "Convert"}),
    "device inst.mma": (_device_mma, {"Chain"}),
}


# tcnumerics.semiring's ops: the one that is a plan path, and those that are not, each with the reason
SEMIRING_THROUGH_PLAN = {"mul-plus"}  # the catalogued unit itself: tcnumerics.gemm / Instruction.dot_bits
_SELECTING = ("a min/max reduction of exact terms with one rounding at the end: no plan node reduces by min or max "
              "(the plan's reductions are a unit's chains and FP32 sums)")
SEMIRING_EXCLUDED = {
    "min-plus": _SELECTING, "max-plus": _SELECTING, "min-mul": _SELECTING, "max-mul": _SELECTING,
    "min-max": _SELECTING, "max-min": _SELECTING,
    "or-and": "booleans in and out: no arithmetic of a number format for a plan to state",
    "plus-norm": ("the unit's fused groups fed (a - b)**2 terms, which are not products of operand bits -- what "
                  "the plan's chain nodes hand the engines -- so semiring.reference.norm_datapath computes them"),
}


class Poisoned(BaseException):
    """Raised by the poisoned interpreter (a BaseException: no fallback's ``except Exception`` can swallow it)."""


@pytest.fixture
def trace(monkeypatch):
    seen: list[str] = []
    original = interpret.evaluate

    def traced(node, env, engine):
        seen.append(type(node).__name__)
        return original(node, env, engine)

    monkeypatch.setattr(interpret, "evaluate", traced)
    return seen


def _poisoned(node, env, engine):
    raise Poisoned(type(node).__name__)


@pytest.fixture
def poison(monkeypatch):
    monkeypatch.setattr(interpret, "evaluate", _poisoned)


def _needs(torch_needed: bool):
    if torch_needed:
        pytest.importorskip("torch")


@pytest.mark.parametrize("name", list(PATHS))
def test_every_path_runs_its_arithmetic_as_plan_nodes(name, trace):
    fn, nodes, torch_needed = PATHS[name]
    _needs(torch_needed)
    fn()
    assert nodes <= set(trace), f"{name}: the interpreter ran {sorted(set(trace))}, expected {sorted(nodes)}"


@pytest.mark.parametrize("name", list(PATHS))
def test_no_path_computes_without_the_interpreter(name, poison):
    fn, _, torch_needed = PATHS[name]
    _needs(torch_needed)
    with pytest.raises(Poisoned):
        fn()


@pytest.mark.parametrize("name", list(DEVICE_PATHS))
def test_the_device_namespace_paths_run_through_the_interpreter(name, monkeypatch, trace):
    cupy = fake_cupy.install(monkeypatch)
    fn, nodes = DEVICE_PATHS[name]
    out = fn(cupy)
    assert not isinstance(out, np.ndarray), f"{name}: the device path returned a host array"
    assert nodes <= set(trace), f"{name}: the interpreter ran {sorted(set(trace))}, expected {sorted(nodes)}"
    monkeypatch.setattr(interpret, "evaluate", _poisoned)
    with pytest.raises(Poisoned):
        fn(cupy)



# --- tcnumerics.semiring: every op classified -------------------------------------------------------------------

def test_every_semiring_op_is_classified():
    """A new SIMD2 op is either a plan path or named, with its reason, as excluded: the exclusion cannot grow
    silently.  docs/plans.md names every excluded op."""
    from tcnumerics.semiring import op_names

    assert not SEMIRING_THROUGH_PLAN & set(SEMIRING_EXCLUDED)
    assert set(op_names()) == SEMIRING_THROUGH_PLAN | set(SEMIRING_EXCLUDED), \
        f"classify {sorted(set(op_names()) - SEMIRING_THROUGH_PLAN - set(SEMIRING_EXCLUDED))} in test_plan_paths"
    import pathlib

    doc = (pathlib.Path(__file__).parents[1] / "docs" / "plans.md").read_text()
    section = doc[doc.index("## What does not run as a plan"):]
    assert all(f"`{op}`" in section for op in SEMIRING_EXCLUDED), "docs/plans.md: name every excluded semiring op"


def _semiring_calls(op: str):
    """The op's value form (``semiring_matmul``) and pair form (``dot_bits``) on small operands, K not a multiple
    of the unit's."""
    from tcnumerics.semiring import semiring_instruction, semiring_matmul

    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((3, 20)).astype(np.float16), rng.standard_normal((20, 2)).astype(np.float16)
    if op == "or-and":
        A, B = A > 0, B > 0
    u = semiring_instruction(op, engine="reference")
    a = A[:, :16].astype(np.uint8) if op == "or-and" else u.a_format.from_float(A[:, :16])
    return (lambda: semiring_matmul(A, B, op=op, engine="reference"), lambda: u.dot_bits(a, a[::-1]))


@pytest.mark.parametrize("op", sorted(SEMIRING_THROUGH_PLAN))
def test_semiring_ops_through_the_plan_run_in_the_interpreter(op, monkeypatch, trace):
    for call in _semiring_calls(op):
        trace.clear()
        call()
        assert {"Chain", "PairedChain"} & set(trace), f"{op}: the interpreter ran {sorted(set(trace))}"
    monkeypatch.setattr(interpret, "evaluate", _poisoned)
    for call in _semiring_calls(op):
        with pytest.raises(Poisoned):
            call()


@pytest.mark.parametrize("op", sorted(SEMIRING_EXCLUDED))
def test_excluded_semiring_ops_compute_outside_the_interpreter(op, poison):
    """Poisoned, they still answer: they are outside the interpreter, as classified (one moved into it belongs in
    SEMIRING_THROUGH_PLAN)."""
    for call in _semiring_calls(op):
        assert np.asarray(call()).size


# --- the printed plan is the plan that runs ----------------------------------------------------------------------

def _walk(node):
    yield node
    for kid in node.children():
        yield from _walk(kid)


def _sampled_streamk_plan():
    A, B = _ops(256, 4096, 4096, np.float32)
    rows, cols = np.array([0, 1, 255]), np.array([0, 3900, 4095])
    return lib.matmul.plan(A[rows], np.ascontiguousarray(B[:, cols]), full_shape=(256, 4096, 4096), rows=rows, cols=cols,
                           fp32_precision="high", gpu="h100").tree()


def _library_reduction(tree):
    """A library call's printed reduction: below its conversion and epilogue (run a block of rows at a time)."""
    return tree.root.term.term


def _whole(tree):
    """The whole printed tree: run as one plan."""
    return tree.root


def _recipe_tree(call=None, **kw):
    """A torch unit recipe's printed plan (``UnitRecipe.plan``) for a call of 8 x 8 x 64 (default: ``_torch_recipe``'s
    epilogue: alpha, beta * C, bias)."""
    def printed():
        options = call or dict(alpha=0.5, beta=2.0, c_given=True, bias_given=True)
        return _recipe(**kw).plan(8, 8, 64, out_format="bf16", **options)
    return printed


def _simt_tree(name, lanes=None, slices=1):
    return lambda: Plan(simt.reduction(name, 600, lanes, slices))


PREPARED = "the plan the library op prepared for the call"  # tcnumerics.torch's library mode: known once it ran

# path -> (the printed tree, the node it prints for the reduction, every printed node evaluated exactly once).
# The recipes run their GEMM and their epilogue as two plans; the printed tree is both, one inside the other.
PRINTED = {
    "library H100 split-K": (lambda: lib.matmul.plan(*_ops(64, 8192, 64), gpu="h100").tree(), _library_reduction,
                             True),
    "library FP8 row-wise scales": (lambda: lib.scaled_mm.plan(
        *_ops(32, 256, 32, ml_dtypes.float8_e4m3fn), np.full((32, 1), 0.5), np.full((1, 32), 2.0), out_dtype="bf16",
        gpu="h100").tree(), _library_reduction, True),
    "library SIMT": (lambda: lib.matmul.plan(*_ops(1, 64, 64, np.float32), gpu="h100").tree(), _library_reduction,
                     True),
    "library SIMT linear": (lambda: lib.linear.plan(_ops(1, 64, 64, np.float32)[0], np.zeros((64, 64), np.float32),
                                                    gpu="h100").tree(), _library_reduction, True),
    # sampled rows and columns: only the tile groups they touch run
    "library stream-K selected": (_sampled_streamk_plan, _library_reduction, False),
    "library bmm": (lambda: lib.bmm.plan(*(np.stack([x] * 3) for x in _ops(8, 64, 8)), gpu="h100").tree(),
                    _library_reduction, True),
    "library baddbmm": (lambda: lib.baddbmm.plan(np.ones((3, 8, 8), ml_dtypes.bfloat16),
                                                 *(np.stack([x] * 3) for x in _ops(8, 64, 8)), beta=0.5, alpha=2.0,
                                                 gpu="h100").tree(), _library_reduction, True),
    "library stream-K": (lambda: structure.plan(Structure("tf32 stream-K", stream_k=StreamK(64, 64, 256, ctas=3,
                                                                                            tile=(64, 64, 32))),
                                                *_ops(64, 256, 64, np.float32), out_format="fp32"),
                         _library_reduction, True),
    "library serial split-K": (lambda: structure.plan(
        Structure("serial", instruction=BF16, split_k=(32, 32), split_reduce="serial", epilogue="bx"),
        *_ops(8, 64, 8), out_format="bf16", C=np.ones((8, 8)), beta=1.0), _whole, True),
    "library K = 0": (lambda: lib.addmm.plan(np.ones((4, 8), ml_dtypes.bfloat16), *_ops(4, 0, 8), beta=0.5,
                                             gpu="h100").tree(), _whole, True),
    "stream-K": (lambda: Plan(streamk.reduction(128, 128, 96, 3, (128, 128, 32))), _whole, True),
    **{f"SIMT {k}": (_simt_tree(n, **kw), _whole, True) for k, n, kw in (
        ("gemmSN_NN", GEMMSN_NN, {}), ("gemmSN_TN", GEMMSN_TN, {}), ("gemv2T", GEMV2T, {}), ("gemvNSP", GEMVNSP, {}),
        ("largek", LARGEK, {"slices": 3}), ("gemvx split", GEMVX_N, {"lanes": 4, "slices": 2}))},
    "H200 presets": (lambda: h200_presets("torch.matmul", dtype="bf16").plan(16, 16, 4096).tree(), _library_reduction,
                     True),
    "unit gemm": (lambda: plan_gemm(8, 8, 64, instruction=BF16, out_format="bf16"), _whole, True),
    "unit gemm M = 0": (lambda: plan_gemm(0, 8, 16, instruction=BF16, out_format="bf16"), _whole, True),
    "unit gemm N = 0": (lambda: plan_gemm(4, 0, 16, instruction=BF16, out_format="bf16"), _whole, True),
    "unit split-K, promotion, block scales": (lambda: plan_gemm(4, 8, 256, instruction=E4M3, split_k=2,
                                                                scales="block"), _whole, True),
    "torch recipe": (_recipe_tree(instruction=BF16), _library_reduction, True),
    "torch FP8 recipe": (_recipe_tree(instruction=E4M3, scaling="tensor", promote_every=128), _library_reduction,
                         True),
    "torch MX recipe": (_recipe_tree(instruction=MXFP8, scaling="mx"), _library_reduction, True),
    # F.linear(a, w, bias) reaches the recipe as addmm: C = bias, beta = 1
    "torch emulate unit": (_recipe_tree({"c_given": True}, instruction=BF16), _library_reduction, True),
    "torch emulate library": (PREPARED, _library_reduction, True),
}


@pytest.fixture
def record(monkeypatch):
    seen: list = []
    original = interpret.evaluate

    def recorded(node, env, engine):
        seen.append(node)
        return original(node, env, engine)

    monkeypatch.setattr(interpret, "evaluate", recorded)
    return seen


def _head(node):
    """A conversion or epilogue without its input: its type, format and rounding, or steps and format."""
    return type(node).__name__, tuple((f.name, getattr(node, f.name)) for f in dataclasses.fields(node)
                                      if f.name != "term")


@pytest.mark.parametrize("name", list(PRINTED))
def test_the_printed_plan_is_the_plan_that_runs(name, record, monkeypatch):
    printed, reduction, exact = PRINTED[name]
    _needs(PATHS[name][2])
    prepared: list = []
    if printed is PREPARED:
        prepare = lib_ops._Op.prepare
        monkeypatch.setattr(lib_ops._Op, "prepare",
                            lambda op, *a, **kw: prepared.append(prepare(op, *a, **kw)) or prepared[-1])
    tree = None if printed is PREPARED else printed()
    record.clear()  # what printing evaluated, if anything: not the run
    PATHS[name][0]()
    ran = list(record)
    if tree is None:
        assert len(prepared) == 1, f"{name}: {len(prepared)} library calls"
        tree = prepared[0][0].tree()
    node = reduction(tree)
    assert any(n == node for n in ran), f"{name}: the interpreter never ran the printed reduction"
    shown = Counter(type(n).__name__ for n in _walk(node))
    count = Counter(type(n).__name__ for n in ran)
    for kind in set(shown) - {"Convert", "Epilogue", "Input"}:  # the epilogue runs by row blocks, apart
        assert count[kind] == shown[kind] if exact else 0 < count[kind] <= shown[kind], \
            f"{name}: {kind} printed {shown[kind]} times, evaluated {count[kind]} times"
    heads = [_head(n) for n in ran]
    for n in _walk(tree.root):  # the printed epilogue and conversion: those run (their steps, format, rounding)
        if isinstance(n, (Convert, Epilogue)):
            assert _head(n) in heads, f"{name}: printed {n.line()!r}, never evaluated"


def _spec(name):
    return tc.instruction(name).spec


# path -> its plan, one node (no explain() of their own: the node is the whole plan, and the only node run)
ONE_NODE = {
    "inst.mma batch": lambda: Chain(_spec(BF16), 0, 64, "C"),
    "inst.mma": lambda: Chain(_spec(BF16), 0, 64),
    "inst.mma M = 0": lambda: Chain(_spec(BF16), 0, 64),
    "inst.dot_bits": lambda: PairedChain(_spec(BF16)),
    "inst.dot_bits block-scaled": lambda: PairedChain(_spec(MXFP8), block_scaled=True),
    # the M x N pairs as one paired-row chain, the block scales inside the unit
    "blockscale.mma": lambda: PairedChain(_spec(MXFP8), block_scaled=True),
    "blockscale.mma from C": lambda: PairedChain(_spec(MXFP8), block_scaled=True),
    "sparse": lambda: PairedChain(sparse.get_sparse(SPARSE)),
}


@pytest.mark.parametrize("name", list(ONE_NODE))
def test_one_node_paths_run_their_one_node(name, record):
    PATHS[name][0]()
    assert record == [ONE_NODE[name]()]


def test_every_path_is_held_to_the_plan_it_prints():
    """Each host path either prints a tree (PRINTED, checked against what runs) or is one node (ONE_NODE)."""
    assert not set(PRINTED) & set(ONE_NODE)
    assert set(PATHS) == set(PRINTED) | set(ONE_NODE), sorted(set(PATHS) - set(PRINTED) - set(ONE_NODE))


def test_simt_and_streamk_orders_are_printed_nodes():
    """The SIMT and stream-K summation orders are nodes explain() shows, not a closure: lane chains, halving and
    tree sums, the tile groups of a stream-K launch."""
    nn = Plan(simt.reduction(GEMMSN_NN, 600)).explain()
    assert "ordered sum (contiguous) of 4 terms" in nn and "from +0" in nn and "FFMA chain over K[0:128)" in nn
    gx = Plan(simt.reduction(GEMVX_N, 1024, lanes=4)).explain()
    assert gx.startswith("halving tree over 4 terms") and "in runs of 64 every 256" in gx
    sk = _sampled_streamk_plan().explain()
    assert "outputs by 64 x 128 output tile" in sk and "tree sum of 15 terms" in sk
    assert "operands rounded to TF32 (RNE)" in sk


# --- observing the value before the output conversion ----------------------------------------------------------

def _epilogue(acc, out_format: str, bias=None):
    """One RNE conversion after an FP32 epilogue (+ R(bias) where given): a plan rooted in Convert (no torch)."""
    from tcnumerics.plan import AddC, Convert, Epilogue, Input, Plan

    steps = () if bias is None else (AddC("bias", round_operand=True),)
    return interpret.run(Plan(Convert(Epilogue(Input("acc"), steps), out_format)), {"acc": acc, "bias": bias})


def test_before_conversion_records_each_outermost_converted_value_and_changes_no_bits():
    epilogue = _epilogue
    a, b = _ops(8, 64, 8)
    plain = gemm(a, b, instruction=BF16, out_format="bf16")
    acc = gemm(a, b, instruction=BF16)  # FP32 values: what the conversion to BF16 receives
    with interpret.before_conversion() as seen:
        observed = gemm(a, b, instruction=BF16, out_format="bf16")
        run(Structure("nvjet", BF16), a, b, out_format="bf16")   # a reduction (LayOut root), then its epilogue
    assert np.array_equal(observed, plain)
    assert len(seen) == 2 and np.array_equal(seen[0], np.float64(acc)) and seen[0].dtype == np.float64
    assert np.array_equal(seen[1], np.float64(run(Structure("nvjet", BF16), a, b, out_format="fp32")))
    with interpret.before_conversion() as outer:
        with interpret.before_conversion() as inner:            # the innermost observer records
            epilogue(np.float64(acc), "bf16", bias=np.ones(8))
        epilogue(np.float64(acc), "bf16")
    assert len(inner) == 1 and len(outer) == 1
    assert np.array_equal(inner[0], get_format("fp32").round(np.float64(acc) + 1))  # + bias in FP32
    assert np.array_equal(outer[0], np.float64(acc))
    gemm(a, b, instruction=BF16, out_format="bf16")               # inactive: nothing recorded anywhere
    assert len(seen) == 2 and len(outer) == 1


def test_before_conversion_skips_plans_with_no_root_conversion():
    A, B = _ops(16, 256, 8)
    s = Structure("cutlass", BF16, split_k=(128, 128), split_reduce="serial")
    with interpret.before_conversion() as seen:
        run(s, A, B, out_format="bf16")
    assert seen == []  # CUTLASS serial split-K: the first slice's conversion is inside an ordered sum
    with interpret.before_conversion() as seen:
        run(s.with_(split_reduce="parallel"), A, B, out_format="bf16")
    assert len(seen) == 1  # the same slices summed, then one epilogue and conversion


def test_before_conversion_keeps_device_values_on_the_device(monkeypatch):
    cupy = fake_cupy.install(monkeypatch)
    a, b = _ops(8, 64, 8)
    with interpret.before_conversion() as seen:
        out = gemm(cupy.asarray(a), cupy.asarray(b), instruction=BF16, out_format="bf16")
    assert not isinstance(out, np.ndarray) and len(seen) == 1
    assert isinstance(seen[0], cupy.ndarray)           # no host copy: the strict fake refuses implicit ones
    assert np.array_equal(seen[0].get(), np.float64(gemm(a, b, instruction=BF16)))
