"""Library presets: the kernel structure cuBLAS / cuBLASLt choose for a call, as ``tcnumerics.gemm`` options.

``h200_presets("torch.matmul", arch="hopper", dtype="bf16")`` returns a ``LibraryGemm``: call
it like the library function (``A @ B`` with numpy/ml_dtypes arrays) or ask ``.plan(M, N, K)``
which structure it predicts.  Everything here was measured on an NVIDIA H200 with torch 2.11
(CUDA 13.0, cuBLAS 13.1.0.3); the captures are ``vectors/library/`` and the method is
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
  nearest-away and split K (known at 100^3, 128x128x256 and 256x256x512 only).

* BF16/FP16 with K or N not a multiple of 8: CUTLASS 2.x kernels (``cutlass_75_*`` for odd
  sizes: BF16 mma.sync k8, FP16 wmma k16; ``cutlass_80_wmma_*`` otherwise), the partial K-tile
  first, and CUTLASS parallel split-K (slices of ceil(K/S) rounded up to 8, FP32 reduction).

Not modelled (``plan().modelled`` is False, a call warns): the split-K count of the CUTLASS
fallbacks at shapes other than the measured 96x80x333 and 100x100x100, TF32 CUTLASS sm80
kernels at other shapes (their slices did not fit equal splits), block-wise scaled FP8 with split-K.  The nvjet split-K
choice itself is a rule fitted to the measured shapes.

Example:
    >>> import numpy as np, ml_dtypes
    >>> mm = h200_presets("torch.matmul", arch="hopper", dtype="bf16")
    >>> mm.plan(64, 64, 8192).split_k
    [1408, 1408, 1408, 1408, 1408, 1408]
    >>> A = np.ones((4, 32), ml_dtypes.bfloat16); B = np.ones((32, 8), ml_dtypes.bfloat16)
    >>> mm(A, B).tolist()[0][:3]
    [32.0, 32.0, 32.0]
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from ..arrays import float64
from ..formats import get_format
from ..gemm import gemm
from .gpus import resolve_gpu

__all__ = ["h200_presets", "library_gemm", "LibraryGemm", "GemmPlan", "LIBRARY_FUNCTIONS"]

LIBRARY_FUNCTIONS = ("torch.matmul", "torch._scaled_mm")
PROVENANCE = "measured on NVIDIA H200 (sm_90a), torch 2.11.0+cu130, cuBLAS 13.1.0.3, driver 580.159.04"
PRESETS_GPU = "h200"  # the GPU model the presets' kernel choices (split rules, CUTLASS fallbacks) were measured on

_WGMMA = {"bf16": "hopper.wgmma.m64n8k16.f32.bf16.bf16", "fp16": "hopper.wgmma.m64n8k16.f32.f16.f16",
          "tf32": "hopper.wgmma.m64n8k8.f32.tf32.tf32"}
_DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
           "tf32": "tf32", "fp32": "tf32", "float32": "tf32",
           "e4m3": "e4m3", "float8_e4m3fn": "e4m3", "fp8": "e4m3", "e5m2": "e5m2", "float8_e5m2": "e5m2"}
_SPLIT_TILES = 22  # K-tiles per split-K slice (measured: every split shape used 22)
_SPLIT_MIN_TILES = 64  # fitted: split seen at >= 64 K-tiles, not at <= 32
_SPLIT_MAX_MN = 256 * 256  # fitted: split seen up to M*N = 256*256, not for 512*512 and above


@dataclass(frozen=True)
class GemmPlan:
    """The kernel structure predicted for one call: ``tcnumerics.gemm`` keywords and what is known.

    Attributes:
        kernel: the kernel family cuBLAS was seen to run for such a call.
        instruction, promote_every, split_k: the ``tcnumerics.gemm`` options.
        input_rounding: rounding applied to the operands before the instruction (TF32: FP32
            operands are rounded to TF32), or None.
        modelled: False where the kernel's reduction order is not known (results are then a
            best guess, not bit-exact).
        note: why, or the provenance.
    """

    kernel: str
    instruction: str
    promote_every: int | None = None
    split_k: list[int] | None = None
    input_rounding: str | None = None
    k_tile: int | None = None
    k_residue: str = "last"
    split_granule: int | None = None
    modelled: bool = True
    note: str = field(default=PROVENANCE)

    def gemm_options(self) -> dict:
        return dict(instruction=self.instruction, promote_every=self.promote_every, split_k=self.split_k,
                    k_tile=self.k_tile, k_residue=self.k_residue, split_granule=self.split_granule)


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

    def plan(self, M: int, N: int, K: int, *, scales: str = "tensor") -> GemmPlan:
        """The structure cuBLAS is predicted to run for an M x N x K call (``scales``: tensor/rowwise/blockwise);
        flagged on a GPU model other than the H200, where the presets' kernel choices were never measured."""
        for name, v in (("M", M), ("N", N), ("K", K)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name}: expected a positive int, got {v!r}")
        if self.function == "torch.matmul":
            plan = self._plan_matmul(M, N, K)
        else:
            plan = self._plan_scaled(M, N, K, scales)
        if self.gpu == PRESETS_GPU:
            return plan
        return replace(plan, modelled=False, note=f"gpu {self.gpu!r}: the presets' kernel choices were measured on "
                       "an H200 (use tcnumerics.library.matmul / linear / scaled_mm, planned per GPU model); "
                       + plan.note)

    def _plan_matmul(self, M: int, N: int, K: int) -> GemmPlan:
        inst = _WGMMA[self.dtype]
        if self.dtype == "tf32":
            if M * N >= 1024 * 1024:
                return GemmPlan("sm90_xmma_gemm_f32f32_tf32f32_f32", inst, input_rounding="rne")
            measured = _TF32_CUTLASS_MEASURED.get((M, N, K))
            return GemmPlan("cutlass_80_tensorop_s1688gemm (TF32, + splitKreduce)", inst, input_rounding="rna",
                            split_k=measured if measured and measured > 1 else None, split_granule=8, k_tile=32,
                            k_residue="first", modelled=measured is not None,
                            note=PROVENANCE if measured is not None else
                            "CUTLASS sm80 TF32 kernels: split count known only at 100^3, 128x128x256, 256x256x512")
        if K % 8 or N % 8:
            return _plan_cutlass_fallback(self.dtype, M, N, K)
        split = _split(K, 64, M, N)
        known = _split_modelled(K, 64, M, N)
        return GemmPlan("nvjet_sm90 (wgmma)" + (" splitK + splitKreduce" if split else ""), inst, split_k=split,
                        modelled=known, note=PROVENANCE if known else
                        "nvjet split-K: the slice count cuBLAS picks for this output size was not verified")

    def _plan_scaled(self, M: int, N: int, K: int, scales: str) -> GemmPlan:
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
            return GemmPlan("nvjet_sm90 ..._algo2_Ablk128_Bvec128", inst, promote_every=128,
                            modelled=split is None,
                            note=PROVENANCE if split is None else
                            "block-wise scales with split-K: the reduction of scaled slices is not identified")
        if scales == "rowwise":  # the ovscale kernels were never seen to split K
            return GemmPlan("nvjet_sm90 ..._ovscale", inst, promote_every=promote)
        split = _split(K, 128, M, N)
        kernel = "nvjet_sm90_qq" + ("" if self.fast_accum else " algo2") + (" splitK + splitKreduce" if split else "")
        measured = (self.dtype, self.b_dtype) == ("e4m3", "e4m3")
        known = _split_modelled(K, 128, M, N)
        return GemmPlan(kernel, inst, promote_every=promote, split_k=split, modelled=known,
                        note=(PROVENANCE if measured else PROVENANCE + " (E4M3 only; other FP8 pairs by analogy)")
                        if known else "nvjet split-K: not surveyed at this size")

    def __call__(self, A, B, C=None, *, out_dtype: str | None = None, scale_a=None, scale_b=None,
                 plan: GemmPlan | None = None, engine: str = "auto") -> np.ndarray:
        """Predict the library's result for ``A @ B`` (B given as [K, N]).

        ``out_dtype``: the result type (default: torch.matmul -- the input type, FP32 for TF32;
        torch._scaled_mm -- bf16).  torch.matmul's C (``addmm``) is added to the result after
        its conversion to the output type, with one more rounding (measured for BF16).
        ``plan``: use this plan instead of planning for A's and B's shape (to replay sampled
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
            kind = _scale_kind(scale_a, scale_b, M, N)
            plan = plan or self.plan(M, N, K, scales=kind)
            out = out_dtype or "bf16"
        get_format(out)  # validates the name
        if not plan.modelled:
            warnings.warn(f"{self!r} at {M}x{N}x{K}: {plan.kernel} is not modelled ({plan.note}); "
                          "the result is a best guess, not bit-exact", stacklevel=2)
        if plan.input_rounding:
            tf32 = get_format("tf32")
            # the TF32 patterns as float32 (no float cast: exact on a GPU too)
            A = tf32.to_array(tf32.from_float(float64(A), plan.input_rounding))
            B = tf32.to_array(tf32.from_float(float64(B), plan.input_rounding))
        return gemm(A, B, C, out_format=out, scale_a=scale_a, scale_b=scale_b, engine=engine,
                    c_role="output", **plan.gemm_options())


# CUTLASS sm80 TF32 kernels (operands rounded to nearest-away): measured shape -> split-K slices
_TF32_CUTLASS_MEASURED = {(100, 100, 100): 1, (128, 128, 256): 4, (256, 256, 512): 8}

# CUTLASS 2.x fallbacks cuBLAS picks when K or N is not a multiple of 8 (16-byte alignment):
# measured shape -> split-K slices (CUTLASS "parallel" split-K: slices of ceil(K/S) rounded up to 8)
_CUTLASS_MEASURED = {(96, 80, 333): 5, (100, 100, 100): 1}


def _plan_cutlass_fallback(dtype: str, M: int, N: int, K: int) -> GemmPlan:
    """BF16/FP16 with misaligned K or N: CUTLASS kernels, residue K-tile first, split-K by 8-element granules."""
    odd = K % 4 != 0 or N % 4 != 0  # align1 kernels (cutlass_75_*); align4/align2 ones are cutlass_80_wmma
    if dtype == "bf16" and odd:
        # K-tile 32: the FPRev probes at 96x80x333 rule out 64 (residue placement)
        kernel, inst, tile = "cutlass_75_tensorop_s1688gemm_bf16_64x64 (mma.sync k8)", \
            "hopper.mma.m16n8k8.f32.bf16.bf16.f32", 32
    elif dtype == "bf16":
        kernel, inst, tile = "cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2", _WGMMA["bf16"], 128
    else:
        kernel, inst, tile = f"cutlass_{75 if odd else 80}_wmma_tensorop_s161616gemm_f16 (K-tile 64)", \
            _WGMMA["fp16"], 64
    measured = _CUTLASS_MEASURED.get((M, N, K))
    slices = measured if measured is not None else (1 if K <= 128 else -(-K // 72))
    return GemmPlan(kernel + (" + splitKreduce" if slices > 1 else ""), inst, split_k=slices if slices > 1 else None,
                    split_granule=8, k_tile=tile, k_residue="first", modelled=measured is not None,
                    note=PROVENANCE if measured is not None else
                    "CUTLASS fallback: structure measured at 96x80x333 and 100x100x100 only; the split-K count "
                    "cuBLAS picks for other shapes is a guess")


def _split(K: int, tile: int, M: int, N: int) -> list[int] | None:
    """Split-K slice lengths predicted for cuBLAS, or None for one pass over K.

    Fitted to a survey (``lab/device_library/survey.py``, M = N in 16..1024, K in
    1024..16384): for M*N <= 256*256 cuBLAS splits into ``floor(3 * tiles / 64)`` slices of
    ``ceil(tiles / S)`` K-tiles whenever that is at least 2 (tiles = ceil(K / tile)), capped
    above 128*128 outputs so that slices x 64x64-tiles fit the 132 SMs.  Larger outputs: see
    ``_split_modelled``.
    """
    tiles = -(-K // tile)
    if M * N <= 256 * 256:
        slices = (3 * tiles) // 64
        if M * N > 128 * 128:  # 64x64 output tiles; slices x CTAs stays within the 132 SMs (256^2 x 16384: 8)
            slices = min(slices, 132 // (-(-M // 64) * -(-N // 64)))
    elif tile == 64 and ((M * N <= 512 * 512 and K >= 4096 and min(M, N) >= 256)
                         or (M * N <= 1024 * 1024 and K >= 16384)):
        slices = max(2, (3 * tiles) // 64)  # split seen; slice count not verified
    else:
        slices = 1
    if slices < 2:
        return None
    per = -(-tiles // slices) * tile
    return [per] * slices


def _split_modelled(K: int, tile: int, M: int, N: int) -> bool:
    """Whether the split-K prediction was verified bit-exactly (see _split)."""
    if M * N <= 256 * 256 or M * N > 1024 * 1024:
        return True
    if tile == 128:
        return K <= 16384  # surveyed: no FP8 split above 256*256 outputs up to K = 16384
    return _split(K, tile, M, N) is None and K <= 16384 and not (M * N <= 512 * 512 and K >= 4096)


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


def h200_presets(function: str, *, arch: str = "hopper", dtype: str = "bf16", fast_accum: bool = False,
                 b_dtype: str | None = None, gpu: str | None = None) -> LibraryGemm:
    """The modelled library GEMM ``function`` ("torch.matmul" or "torch._scaled_mm") on ``arch``.

    ``dtype``: torch.matmul -- "bf16", "fp16" or "tf32" (FP32 tensors with TF32 allowed);
    torch._scaled_mm -- "e4m3" or "e5m2" (``b_dtype`` for mixed pairs), ``fast_accum`` its
    ``use_fast_accum``.  ``gpu``: the GPU model (default and only measured one: the H200, where these
    presets' kernel choices were captured; ``arch="h200"`` / ``"h100"`` name one too); on any other model
    every plan is flagged not modelled.

    >>> h200_presets("torch._scaled_mm", dtype="e4m3", fast_accum=False).plan(128, 128, 2048).promote_every
    128
    >>> h200_presets("torch.matmul", dtype="bf16", gpu="h100").plan(64, 64, 8192).modelled
    False
    """
    if function not in LIBRARY_FUNCTIONS:
        raise ValueError(f"function: expected one of {', '.join(LIBRARY_FUNCTIONS)}, got {function!r}")
    model = resolve_gpu(arch, gpu, default=PRESETS_GPU)
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
