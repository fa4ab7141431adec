"""M, N, K or batch = 0 give what numpy / torch give, in every entry point: empty results of the right shape and
dtype, and for K = 0 the epilogue of zero products (``addmm``: ``beta * C``; ``linear``: the bias) -- one
parametrized test over the instruction API, ``tcnumerics.gemm``, the library ops (and their plans) and
``tcnumerics.torch.emulate`` in library and unit mode.  Torch's own result on the CPU is the reference for the
torch-shaped entry points (its ATen ops special-case empty calls the same way on CUDA: tests/test_tensor_io.py
compares on a GPU); numpy's ``A @ B + C`` for the others.
"""

import warnings

import ml_dtypes
import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics import library as lib

torch = pytest.importorskip("torch")
import tcnumerics.torch as tct  # noqa: E402

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
CASES = {"M=0": dict(M=0), "N=0": dict(N=0), "K=0": dict(K=0), "batch=0": dict(b=0)}


def _dims(case: str) -> dict:
    return {**dict(b=2, M=3, N=16, K=32), **CASES[case]}


def _values(shape, seed, dtype=torch.bfloat16):
    """Small exact values, no -0 (numpy's ``+0 + C`` and torch's ``C * beta`` agree on every other value)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(1, 8, shape, generator=g).float() / 4 * (1 - 2 * (torch.rand(shape, generator=g) < .5))
            ).to(dtype)


# --- entry points: each returns (got, want) ------------------------------------------------------------------

def _mma(d):
    A, B = (_values(s, i).float().numpy().astype(ml_dtypes.bfloat16)
            for i, s in enumerate([(d["b"], d["M"], d["K"]), (d["b"], d["K"], d["N"])]))
    C = _values((d["b"], d["M"], d["N"]), 2, torch.float32).numpy()
    got = tc.instruction(BF16).mma(A, B, C)
    return got, (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32)


def _mma_torch(d):
    A, B = _values((d["b"], d["M"], d["K"]), 0), _values((d["b"], d["K"], d["N"]), 1)
    C = _values((d["b"], d["M"], d["N"]), 2, torch.float32)
    return tc.instruction(BF16).mma(A, B, C), torch.baddbmm(C, A.float(), B.float())


def _dot_bits(d):
    n, k = d["M"] * d["b"], d["K"]
    a = np.full((n, k), 0x3F80, np.uint16)  # bf16 1.0
    c = np.full(n, 0x40400000, np.uint32)  # fp32 3.0
    got = tc.instruction(BF16).dot_bits(a, a, c)
    want = (np.full(n, k + 3.0, np.float32)).view(np.uint32)
    return got, want


def _gemm(d, **options):
    A = _values((d["M"], d["K"]), 0).float().numpy().astype(ml_dtypes.bfloat16)
    B = _values((d["K"], d["N"]), 1).float().numpy().astype(ml_dtypes.bfloat16)
    C = _values((d["M"], d["N"]), 2, torch.float32).numpy()
    got = tc.gemm(A, B, C, instruction=BF16, out_format="bf16", **options)
    return got, (A.astype(np.float64) @ B.astype(np.float64) + C).astype(ml_dtypes.bfloat16)


def _torch_operands(d):
    return (_values((d["M"], d["K"]), 0), _values((d["K"], d["N"]), 1), _values((d["M"], d["N"]), 2),
            _values((d["b"], d["M"], d["K"]), 3), _values((d["b"], d["K"], d["N"]), 4),
            _values((d["b"], d["M"], d["N"]), 5), _values((d["N"],), 6))


def _library(name):
    def run(d):
        A, B, C, A3, B3, C3, bias = _torch_operands(d)
        call = {"matmul": (lambda f: f(A, B), lambda: A @ B),
                "linear": (lambda f: f(A, B.t(), bias), lambda: torch.nn.functional.linear(A, B.t(), bias)),
                "addmm": (lambda f: f(C, A, B, beta=0.5, alpha=2.0), lambda: torch.addmm(C, A, B, beta=0.5, alpha=2.0)),
                "bmm": (lambda f: f(A3, B3), lambda: torch.bmm(A3, B3)),
                "baddbmm": (lambda f: f(C3, A3, B3, beta=0.75), lambda: torch.baddbmm(C3, A3, B3, beta=0.75))}[name]
        fn = getattr(lib, name)
        plan = call[0](fn.plan)
        assert plan.modelled and plan.kernel.startswith("no GEMM"), plan
        return call[0](fn), call[1]()
    return run


def _scaled_mm(d):
    A = _values((d["M"], d["K"]), 0).to(torch.float8_e4m3fn)
    B = _values((d["N"], d["K"]), 1).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0)
    got = lib.scaled_mm(A, B, one, one, out_dtype="bf16")
    return got, (A.float() @ B.float()).to(torch.bfloat16)


def _emulated(mode, library: bool):
    def run(d):
        A, B, C, A3, B3, C3, bias = _torch_operands(d)
        ops = [lambda: torch.bmm(A3, B3), lambda: torch.baddbmm(C3, A3, B3, beta=0.75),
               lambda: torch.addbmm(C, A3, B3, beta=0.5)]
        if d["b"]:  # 2-D ops have no batch to empty
            ops += [lambda: A @ B, lambda: torch.addmm(C, A, B, beta=0.5),
                    lambda: torch.nn.functional.linear(A, B.t(), bias)]
        with mode() as emulation:
            got = [op() for op in ops]
        report = emulation.report()
        assert report.calls >= len(ops) and report.not_modelled == 0  # through the backend, none natively
        assert all(site.kernel.startswith("no GEMM") for site in report) or not library
        return got, [op() for op in ops]
    return run


ENTRIES = {
    "mma": _mma, "mma-torch": _mma_torch, "dot_bits": _dot_bits, "gemm": _gemm,
    "gemm-promoted-split": lambda d: _gemm(d, promote_every=16, split_k=2),
    "gemm-epilogue-C": lambda d: _gemm(d, c_role="epilogue"),
    **{f"lib.{name}": _library(name) for name in ("matmul", "linear", "addmm", "bmm", "baddbmm")},
    "lib.scaled_mm": _scaled_mm,
    "emulate-library": _emulated(lambda: tct.emulate("hopper"), True),
    "emulate-unit": _emulated(lambda: tct.emulate(instruction=BF16), False),
    "emulate-unit-tensor-scaling": _emulated(lambda: tct.emulate(instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3",
                                                                 scaling="tensor"), False),
}
TWO_D = {"gemm", "gemm-promoted-split", "gemm-epilogue-C", "lib.matmul", "lib.linear", "lib.addmm", "lib.scaled_mm"}
PAIRS = [(entry, case) for entry in ENTRIES for case in CASES if not (case == "batch=0" and entry in TWO_D)]


def _bits(x):
    if isinstance(x, torch.Tensor):
        if not x.numel():  # (an empty tensor's strides may be 0: no byte view)
            return b""
        return x.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes()
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8).tobytes()


@pytest.mark.parametrize("entry, case", PAIRS)
def test_empty_shapes_give_what_numpy_and_torch_give(entry, case):
    d = _dims(case)
    with warnings.catch_warnings():
        warnings.simplefilter("error", lib.NotModelledWarning)  # an empty call is exact: never flagged
        got, want = ENTRIES[entry](d)
    for g, w in zip(*((got, want) if isinstance(got, list) else ([got], [want]))):
        assert type(g) is type(w) and g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), (g, w)
        assert _bits(g) == _bits(w), (g, w)


def test_k0_keeps_c_bits_where_no_instruction_runs():
    """K = 0 runs no instruction: D is C itself, -0 included (numpy's ``+0 + -0`` would be +0)."""
    C = np.array([[-0.0, 2.0 ** -140]], np.float32)
    empty_a, empty_b = np.zeros((1, 0), ml_dtypes.bfloat16), np.zeros((0, 2), ml_dtypes.bfloat16)
    inst = tc.instruction(BF16)
    assert _bits(inst.mma(empty_a, empty_b, C)) == _bits(C)
    assert _bits(tc.gemm(empty_a, empty_b, C, instruction=BF16)) == _bits(C)
    with pytest.raises(ValueError, match="multiple of"):
        inst.mma(np.zeros((1, 8), ml_dtypes.bfloat16), np.zeros((8, 2), ml_dtypes.bfloat16))
