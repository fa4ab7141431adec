"""Library presets: the kernel structure cuBLAS / cuBLASLt chose for a call on the H200, as a library plan.

``h200_presets("torch.matmul", arch="hopper", dtype="bf16")`` returns a ``LibraryGemm``: call
it like the library function (``A @ B`` with numpy/ml_dtypes arrays) or ask ``.plan(M, N, K)``
which structure it predicts -- a ``library.Plan`` (family, ``Structure``, ``modelled``, ``reason``)
like every op of ``tcnumerics.library``, whose ``explain()`` prints the plan tree the call runs
(``structure.run``, through the one interpreter).  The GPU model, its provenance and the kernel
choices measured at single shapes are data (``gpus.json``'s model with a ``presets`` table:
``h200_presets.json``, docs/tables.md); the captures are ``vectors/library/`` and the method is
``docs/gemm.md``.  What was found:

* nvjet kernels (``nvjet_sm90_*``) run wgmma: BF16/FP16 a chain of k16 groups over all of K,
  FP8 ``use_fast_accum=True`` a chain of k32 groups (13-bit accumulator), FP8 slow accumulation
  (``*_algo2_*``) promotion into FP32 every 128 elements.
* split-K (``*_splitK_*`` + ``cublasLt::splitKreduce_kernel``) for small M*N with long K:
  ``floor(3 * tiles / 64)`` equal slices of K-tiles (64 elements for BF16/FP16, 128 for FP8),
  each from +0, their FP32 results summed in slice order with RNE additions; then the epilogue.
* ``torch._scaled_mm`` scales: per-tensor ``acc * fp32(sa * sb)``, row-wise
  ``(acc * sb) * sa``, block-wise 1x128 / 128x128 ``main = fma(partial, fp32(sa * sb), main)``.
* TF32 (``sm90_xmma_gemm_*tf32*``): operands rounded FP32 -> TF32 to nearest-even, then
  a chain of k8 groups; CUTLASS ``s1688gemm`` TF32 kernels (smaller outputs) round to
  nearest-away and split K (known at the measured shapes only).

* BF16/FP16 with K or N not a multiple of 8: CUTLASS 2.x kernels (``cutlass_75_*`` for odd
  sizes: BF16 mma.sync k8, FP16 wmma k16; ``cutlass_80_wmma_*`` otherwise), the partial K-tile
  first, and CUTLASS parallel split-K (slices of ceil(K/S) rounded up to 8, FP32 reduction).

Not modelled (``plan().modelled`` is False, a call warns): the split-K count of the CUTLASS
fallbacks and of the TF32 CUTLASS sm80 kernels at shapes other than the measured ones (other TF32 slices did not fit
equal splits), block-wise scaled FP8 with split-K.  The nvjet split-K choice itself is a rule fitted to the measured
shapes.

Example:
    >>> import numpy as np, ml_dtypes
    >>> mm = h200_presets("torch.matmul", arch="hopper", dtype="bf16")
    >>> mm.plan(64, 64, 8192).split_k
    (1408, 1408, 1408, 1408, 1408, 1408)
    >>> print(mm.plan(64, 64, 8192).explain())  # doctest: +ELLIPSIS
    matmul 64x64x8192 bf16 -> bf16 on h200: nvjet_sm90 (wgmma) splitK + splitKreduce
    ...
            ordered sum (contiguous) of 6 terms, FP32 RNE additions in order
    ...
    >>> A = np.ones((4, 32), ml_dtypes.bfloat16); B = np.ones((32, 8), ml_dtypes.bfloat16)
    >>> mm(A, B).tolist()[0][:3]
    [32.0, 32.0, 32.0]
"""

from __future__ import annotations

import json
import warnings

import numpy as np

from ..arrays import float64
from ..formats import get_format
from ..plan.interpret import convert
from . import gpus
from .calls import Call
from .selection import WGMMA, Plan
from .structure import Structure, run

__all__ = ["h200_presets", "library_gemm", "LibraryGemm", "LIBRARY_FUNCTIONS"]

LIBRARY_FUNCTIONS = ("torch.matmul", "torch._scaled_mm")
# the GPU model the presets' kernel choices were measured on: the manifest's model with a presets table
PRESETS_GPU = next(k for k in gpus.manifest()["models"] if gpus.table_path(k, "presets"))

_DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
           "tf32": "tf32", "fp32": "tf32", "float32": "tf32",
           "e4m3": "e4m3", "float8_e4m3fn": "e4m3", "fp8": "e4m3", "e5m2": "e5m2", "float8_e5m2": "e5m2"}
# the nvjet split rule's fitted bounds (a rule fitted to the H200 survey, see ``_split``)
_SPLIT_MAX_MN = 256 * 256  # split seen up to M*N = 256*256 (floor(3 * tiles / 64) slices) ...
_SPLIT_CAP_MN = 128 * 128  # ... capped to one wave of 64x64 output tiles above 128*128
_SPLIT_SEEN_MN = (512 * 512, 1024 * 1024)  # BF16 also split here (slice count not verified)
_SURVEYED_K = 16384  # the survey's longest K


def _load_table() -> dict:
    with open(gpus.table_path(PRESETS_GPU, "presets")) as fh:
        return json.load(fh)


_TABLE = _load_table()
PROVENANCE = _TABLE["provenance"]


def _measured(which: str, M: int, N: int, K: int) -> int | None:
    """The split-K slices measured at exactly this shape (``h200_presets.json``'s ``which``), or None."""
    return _TABLE[which].get(f"{M}x{N}x{K}")


def _slices(K: int, S: int | None, granule: int) -> tuple[int, ...] | None:
    """S equal slices of ``ceil(K / S)`` rounded up to ``granule`` (the last shorter), as lengths; None unsplit.

    >>> _slices(333, 5, 8)
    (72, 72, 72, 72, 72)
    """
    if not S or S < 2:
        return None
    # always S slices (cutlass_half.parallel_slices drops empty trailing ones): the presets' plans as they were
    return (-(-(-(-K // granule)) // S) * granule,) * S


class LibraryGemm:
    """A library GEMM function as modelled: ``call(A, B, ...)`` and ``plan(M, N, K)``."""

    def __init__(self, function: str, arch: str, dtype: str, fast_accum: bool, b_dtype: str | None,
                 gpu: str = PRESETS_GPU):
        self.function = function
        self.arch = arch
        self.dtype = dtype
        self.fast_accum = fast_accum
        self.b_dtype = b_dtype or dtype
        self.gpu = gpu

    def __repr__(self) -> str:
        extra = f", fast_accum={self.fast_accum}" if self.function == "torch._scaled_mm" else ""
        where = "" if self.gpu == PRESETS_GPU else f", gpu={self.gpu!r}"
        return f"h200_presets({self.function!r}, arch={self.arch!r}, dtype={self.dtype!r}{extra}{where})"

    def plan(self, M: int, N: int, K: int, *, scales: str = "tensor") -> Plan:
        """The plan cuBLAS is predicted to run for an M x N x K call (``scales``: tensor/rowwise/blockwise); flagged
        on a GPU model other than the presets', where their kernel choices were never measured."""
        for name, v in (("M", M), ("N", N), ("K", K)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name}: expected a positive int, got {v!r}")
        M, N, K = int(M), int(N), int(K)
        if self.function == "torch.matmul":
            s, known, reason = self._plan_matmul(M, N, K)
        else:
            s, known, reason = self._plan_scaled(M, N, K, scales)
        if self.gpu != PRESETS_GPU:
            known, reason = False, (f"gpu {self.gpu!r}: the presets' kernel choices were measured on an "
                                    f"{PRESETS_GPU.upper()} (use tcnumerics.library.matmul / linear / scaled_mm, "
                                    f"planned per GPU model); {reason}")
        return Plan(s.family, s, known, reason, call=self._call(M, N, K, scales))

    def _call(self, M: int, N: int, K: int, scales: str) -> Call:
        """The torch call the plan stands for (its default output type; C, when a call passes one, joins later)."""
        if self.function == "torch.matmul":
            fmt = "fp32" if self.dtype == "tf32" else self.dtype
            return Call("matmul", fmt, fmt, M, N, K, prec="high" if self.dtype == "tf32" else "highest", gpu=self.gpu)
        return Call("scaled_mm", self.dtype, "bf16", M, N, K, b_fmt=self.b_dtype, scales=scales,
                    fast_accum=self.fast_accum, gpu=self.gpu)

    def _plan_matmul(self, M: int, N: int, K: int) -> tuple[Structure, bool, str]:
        """(structure, modelled, reason) of a torch.matmul call."""
        inst = WGMMA[self.dtype]
        if self.dtype == "tf32":
            if M * N >= 1024 * 1024:
                return Structure("sm90_xmma_gemm_f32f32_tf32f32_f32", inst, input_rounding="rne"), True, PROVENANCE
            measured = _measured("tf32_cutlass_splits", M, N, K)
            s = Structure("cutlass_80_tensorop_s1688gemm (TF32, + splitKreduce)", inst, input_rounding="rna",
                          split_k=_slices(K, measured, 8), split_granule=8, k_tile=32, k_residue="first")
            return s, measured is not None, (PROVENANCE if measured is not None else
                                             "CUTLASS sm80 TF32 kernels: split count known only at the measured shapes")
        if K % 8 or N % 8:
            return _plan_cutlass_fallback(self.dtype, M, N, K)
        split = _split(K, 64, M, N)
        known = _split_modelled(K, 64, M, N)
        s = Structure("nvjet_sm90 (wgmma)" + (" splitK + splitKreduce" if split else ""), inst, split_k=split)
        return s, known, (PROVENANCE if known else
                          "nvjet split-K: the slice count cuBLAS picks for this output size was not verified")

    def _plan_scaled(self, M: int, N: int, K: int, scales: str) -> tuple[Structure, bool, str]:
        """(structure, modelled, reason) of a torch._scaled_mm call with ``scales``."""
        if scales not in ("tensor", "rowwise", "blockwise"):
            raise ValueError(f"scales: expected 'tensor', 'rowwise' or 'blockwise', got {scales!r}")
        if K % 16 or M % 16 or N % 16:
            raise ValueError(f"M, N, K: torch._scaled_mm needs multiples of 16, got {M}, {N}, {K}")
        inst = f"hopper.wgmma.m64n8k32.f32.{self.dtype}.{self.b_dtype}"
        promote = None if self.fast_accum else 128
        if scales == "blockwise":
            if self.fast_accum:
                raise ValueError("fast_accum: torch._scaled_mm refuses fast accumulation with block-wise scales")
            split = _split(K, 128, M, N)
            return (Structure("nvjet_sm90 ..._algo2_Ablk128_Bvec128", inst, promote_every=128), split is None,
                    PROVENANCE if split is None else
                    "block-wise scales with split-K: the reduction of scaled slices is not identified")
        if scales == "rowwise":  # the ovscale kernels were never seen to split K
            return Structure("nvjet_sm90 ..._ovscale", inst, promote_every=promote), True, PROVENANCE
        split = _split(K, 128, M, N)
        kernel = "nvjet_sm90_qq" + ("" if self.fast_accum else " algo2") + (" splitK + splitKreduce" if split else "")
        measured = (self.dtype, self.b_dtype) == ("e4m3", "e4m3")
        known = _split_modelled(K, 128, M, N)
        return (Structure(kernel, inst, promote_every=promote, split_k=split), known,
                (PROVENANCE if measured else PROVENANCE + " (E4M3 only; other FP8 pairs by analogy)")
                if known else "nvjet split-K: not surveyed at this size")

    def __call__(self, A, B, C=None, *, out_dtype: str | None = None, scale_a=None, scale_b=None,
                 plan: Plan | None = None, engine: str = "auto") -> np.ndarray:
        """Predict the library's result for ``A @ B`` (B given as [K, N]).

        ``out_dtype``: the result type (default: torch.matmul -- the input type, FP32 for TF32;
        torch._scaled_mm -- bf16).  torch.matmul's C (``addmm``) is added to the result after
        its conversion to the output type, with one more rounding (measured for BF16: the ``badd``
        epilogue).  ``plan``: use this plan instead of planning for A's and B's shape (to replay sampled
        rows and columns of a larger call: the kernel choice depends on the full shape).
        """
        A, B = np.asarray(A), np.asarray(B)
        if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
            raise ValueError(f"A, B: expected [M, K] and [K, N] matrices, got {A.shape} and {B.shape}")
        M, K = A.shape
        N = B.shape[1]
        if self.function == "torch.matmul":
            if scale_a is not None or scale_b is not None:
                raise ValueError("scale_a, scale_b: torch.matmul takes no scales")
            plan = plan or self.plan(M, N, K)
            out = out_dtype or ("fp32" if self.dtype == "tf32" else self.dtype)
        else:
            if C is not None:
                raise ValueError("C: torch._scaled_mm is modelled without a bias/C")
            plan = plan or self.plan(M, N, K, scales=_scale_kind(scale_a, scale_b, M, N))
            out = out_dtype or "bf16"
        get_format(out)  # validates the name
        if not plan.modelled:
            warnings.warn(f"{self!r} at {M}x{N}x{K}: {plan.kernel} is not modelled ({plan.reason}); "
                          "the result is a best guess, not bit-exact", stacklevel=2)
        s = plan.structure if C is None else plan.structure.with_(epilogue="badd")
        return run(s, A, B, out_format=out, C=_c_values(C, (M, N)), scale_a=scale_a, scale_b=scale_b, engine=engine)


def _c_values(C, shape: tuple) -> np.ndarray | None:
    """C as FP32 values (``convert``, the one conversion), as torch hands it to the epilogue; None without C."""
    if C is None:
        return None
    if np.shape(C) != shape:
        raise ValueError(f"C: expected shape {shape}, got {np.shape(C)}")
    return float64(convert(float64(np.asarray(C)), "fp32"))


def _plan_cutlass_fallback(dtype: str, M: int, N: int, K: int) -> tuple[Structure, bool, str]:
    """BF16/FP16 with misaligned K or N: CUTLASS kernels, residue K-tile first, split-K by 8-element granules."""
    odd = K % 4 != 0 or N % 4 != 0  # align1 kernels (cutlass_75_*); align4/align2 ones are cutlass_80_wmma
    if dtype == "bf16" and odd:
        # K-tile 32: the FPRev probes at 96x80x333 rule out 64 (residue placement)
        kernel, inst, tile = "cutlass_75_tensorop_s1688gemm_bf16_64x64 (mma.sync k8)", \
            "hopper.mma.m16n8k8.f32.bf16.bf16.f32", 32
    elif dtype == "bf16":
        kernel, inst, tile = "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2", WGMMA["bf16"], 128
    else:
        kernel, inst, tile = f"cutlass_{75 if odd else 80}_wmma_tensorop_s161616gemm_f16 (K-tile 64)", \
            WGMMA["fp16"], 64
    measured = _measured("cutlass_fallback_splits", M, N, K)
    slices = measured if measured is not None else (1 if K <= 128 else -(-K // 72))
    s = Structure(kernel + (" + splitKreduce" if slices > 1 else ""), inst, split_k=_slices(K, slices, 8),
                  split_granule=8, k_tile=tile, k_residue="first")
    return (s, measured is not None,
            PROVENANCE if measured is not None else
            "CUTLASS fallback: structure measured at the shapes h200_presets.json lists only; the split-K count "
            "cuBLAS picks for other shapes is a guess")


def _split(K: int, tile: int, M: int, N: int) -> tuple[int, ...] | None:
    """Split-K slice lengths predicted for cuBLAS, or None for one pass over K.

    Fitted to a survey (``lab/device_library/survey.py``, M = N in 16..1024, K in
    1024..16384): for M*N <= 256*256 cuBLAS splits into ``floor(3 * tiles / 64)`` slices of
    ``ceil(tiles / S)`` K-tiles whenever that is at least 2 (tiles = ceil(K / tile)), capped
    above 128*128 outputs so that slices x 64x64-tiles fit one wave of the GPU's SMs (``gpus.wave_slices``).
    Larger outputs: see ``_split_modelled``.
    """
    # not split_rule.formula_split: the presets' own fit (M = N survey, floor not ceil), kept as the presets were
    tiles = -(-K // tile)
    if M * N <= _SPLIT_MAX_MN:
        slices = (3 * tiles) // 64
        if M * N > _SPLIT_CAP_MN:  # 64x64 output tiles; slices x CTAs stays within one wave (256^2 x 16384: 8)
            slices = min(slices, gpus.wave_slices(-(-M // 64) * -(-N // 64), PRESETS_GPU))
    elif tile == 64 and ((M * N <= _SPLIT_SEEN_MN[0] and K >= 4096 and min(M, N) >= 256)
                         or (M * N <= _SPLIT_SEEN_MN[1] and K >= _SURVEYED_K)):
        slices = max(2, (3 * tiles) // 64)  # split seen; slice count not verified
    else:
        slices = 1
    if slices < 2:
        return None
    return (-(-tiles // slices) * tile,) * slices


def _split_modelled(K: int, tile: int, M: int, N: int) -> bool:
    """Whether the split-K prediction was verified bit-exactly (see _split)."""
    if M * N <= _SPLIT_MAX_MN or M * N > _SPLIT_SEEN_MN[1]:
        return True
    if tile == 128:
        return K <= _SURVEYED_K  # surveyed: no FP8 split above 256*256 outputs up to K = 16384
    return _split(K, tile, M, N) is None and K <= _SURVEYED_K and not (M * N <= _SPLIT_SEEN_MN[0] and K >= 4096)


def _scale_kind(scale_a, scale_b, M: int, N: int) -> str:
    if scale_a is None and scale_b is None:
        return "tensor"
    sa, sb = np.asarray(1.0 if scale_a is None else scale_a), np.asarray(1.0 if scale_b is None else scale_b)
    if sa.ndim == 0 and sb.ndim == 0 or sa.size == 1 and sb.size == 1:
        return "tensor"
    if sa.ndim == 2 and sa.shape[0] == M and sa.shape[1] != 1:
        return "blockwise"
    return "rowwise"


def library_gemm(function: str, *, arch: str = "hopper", dtype: str = "bf16", fast_accum: bool = False,
                 b_dtype: str | None = None, gpu: str | None = None) -> LibraryGemm:
    """Deprecated alias of ``h200_presets`` (the same presets, the same bits), kept for old callers: it warns
    ``DeprecationWarning``.  New code: ``tcnumerics.library.matmul`` / ``linear`` / ``addmm`` / ``scaled_mm``
    (selection per GPU model from the measured tables), or ``h200_presets`` for these presets themselves."""
    warnings.warn("tcnumerics.library_gemm is deprecated: use tcnumerics.library.matmul / linear / addmm / "
                  "scaled_mm (planned per GPU model), or tcnumerics.library.presets.h200_presets for the "
                  "H200 presets it returns", DeprecationWarning, stacklevel=2)
    return h200_presets(function, arch=arch, dtype=dtype, fast_accum=fast_accum, b_dtype=b_dtype, gpu=gpu)


def __getattr__(name: str):
    """``GemmPlan``, the presets' own plan type before they returned ``library.Plan``: a deprecated name of it."""
    if name == "GemmPlan":
        warnings.warn("tcnumerics.library.presets.GemmPlan is deprecated: the presets' plan() returns "
                      "tcnumerics.library.Plan (split_k as slice lengths, reason for note)", DeprecationWarning,
                      stacklevel=2)
        return Plan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def h200_presets(function: str, *, arch: str = "hopper", dtype: str = "bf16", fast_accum: bool = False,
                 b_dtype: str | None = None, gpu: str | None = None) -> LibraryGemm:
    """The modelled library GEMM ``function`` ("torch.matmul" or "torch._scaled_mm") on ``arch``.

    ``dtype``: torch.matmul -- "bf16", "fp16" or "tf32" (FP32 tensors with TF32 allowed);
    torch._scaled_mm -- "e4m3" or "e5m2" (``b_dtype`` for mixed pairs), ``fast_accum`` its
    ``use_fast_accum``.  ``gpu``: the GPU model (default and only measured one: the H200, where these
    presets' kernel choices were captured; ``arch="h200"`` / ``"h100"`` name one too); on any other model
    every plan is flagged not modelled.

    >>> h200_presets("torch._scaled_mm", dtype="e4m3", fast_accum=False).plan(128, 128, 2048).structure.promote_every
    128
    >>> h200_presets("torch.matmul", dtype="bf16", gpu="h100").plan(64, 64, 8192).modelled
    False
    """
    if function not in LIBRARY_FUNCTIONS:
        raise ValueError(f"function: expected one of {', '.join(LIBRARY_FUNCTIONS)}, got {function!r}")
    model = gpus.resolve_gpu(arch, gpu, default=PRESETS_GPU)
    key = _DTYPES.get(str(dtype).lower())
    if key is None:
        raise ValueError(f"dtype: unknown {dtype!r}; expected one of {', '.join(sorted(set(_DTYPES)))}")
    if function == "torch.matmul" and key not in ("bf16", "fp16", "tf32"):
        raise ValueError(f"dtype: torch.matmul is modelled for bf16, fp16 and tf32, got {dtype!r}")
    b_key = None
    if function == "torch._scaled_mm":
        if key not in ("e4m3", "e5m2"):
            raise ValueError(f"dtype: torch._scaled_mm takes e4m3 or e5m2, got {dtype!r}")
        b_key = _DTYPES.get(str(b_dtype).lower(), None) if b_dtype is not None else key
        if b_key not in ("e4m3", "e5m2"):
            raise ValueError(f"b_dtype: expected e4m3 or e5m2, got {b_dtype!r}")
    if not isinstance(fast_accum, bool):
        raise TypeError(f"fast_accum: expected a bool, got {type(fast_accum).__name__}")
    return LibraryGemm(function, arch, key, fast_accum, b_key, model)
