"""CUTLASS 2.x fallback kernels of cuBLAS on BF16/FP16 inputs: the structure, read off the measured launch.

cuBLAS (Hopper, cuBLAS 13.1) runs CUTLASS 2.x kernels instead of nvjet where the operands are misaligned for
TMA (K or N odd, transposed layouts with odd leading sides, some small odd M):

* ``cutlass_75_tensorop_{bf16_,f16_,}s1688gemm_*`` -- mma.sync m16n8k8 chain, K-tile 32;
* ``cutlass_80_tensorop_*s16816gemm_*_{BK}x{stages}_*`` -- mma.sync m16n8k16 (modelled by the wgmma k16 chain,
  same per-16 summation), K-tile BK from the name;
* ``cutlass_75/80_wmma_tensorop_*s161616gemm_*_{BM}x{BN}_{BK}x{stages}_*`` -- wmma 16x16x16 (the k16 chain), K-tile
  BK from the name (the FP32-output calls tell: BF16 sm80 ``32x32_128x2`` needs 128, FP16 ``32x32_64x1`` 64;
  one tile for all wmma kernels, 64 or 128, misses 1 or 4 of the 60 wmma calls; "128 for BF16 sm80, else 64" also
  fits all 60: no capture tells those two rules apart).

Every family processes the partial K-tile first (``k_residue="first"``).  Split-K puts the slice count S in
grid z (divided by the batch for bmm):

* followed by ``cublasLt::splitKreduce_kernel<32, 16, int, PARTIAL_T, ...>``: parallel split-K, slices of
  ``ceil(K / S)`` rounded up to 8 elements (CUTLASS's ``kAlignK`` = 128 bits of a 16-bit element); each slice's
  FP32 accumulator is stored as ``PARTIAL_T`` (``__nv_bfloat16`` / ``__half``: rounded to BF16/FP16; ``float``:
  kept), the reduce kernel sums them in FP32 in slice order and applies the epilogue -- with BF16/FP16 partials
  and a bias it converts the sum first: ``cvt(cvt(alpha * sum) + bias)`` (epilogue ``bias_out``; survey 363,
  F.linear 96x80x333, the one captured such call, which no structure had reproduced: one rounding misses 58 of
  its 256 sampled outputs);
* after a Memset with no reduce kernel (in place, serial): slices of ``ceil(ceil(K / BK) / S)`` K-tiles
  (CUTLASS ``kernel::Gemm``'s ``gemm_k_size``); slice 0 writes its epilogue (C / bias) in the output type and
  each later slice adds ``fma(alpha, acc_k, D)``, rounding to the output type again.

Epilogue: one FP32 linear combination (``badd`` runs as ``bx``: ``cvt(fma(beta, C, alpha * acc))``).

Evidence (``lab/device_library/fit_cutlass_half.py --side 16``: every sampled output bit, 16 x 16 per call, of the
7 H100 bit captures, built from the launch alone, the bit table not consulted): **169 of 169** captured calls
bit-exact, 40 family labels (``EVIDENCE``; the library's table-or-guess path before: 156 of 169, 119 modelled);
over all 14 captures since, 231 of 232 (the miss, flagged: an in-place s16816 F.linear with a bias, holdout10).
The granules are pinned by the captures: parallel slices rounded to 8 reproduce 36 of 36 split calls (4: 33,
16: 30, 32: 29); in-place slices of whole K-tiles 32 of 32 (rounded to 8 elements: 30).  ``verified`` is True
only for the labels captured (format x kernel op x split kind x epilogue); other combinations (e.g. FP16
s16816 split-K, a reduce kernel with FP32 partials and a bias, wmma80 in place) are built the same way but
flagged.

Example:
    >>> from tcnumerics.library.calls import Call
    >>> from tcnumerics.library.structure import Structure
    >>> from tcnumerics.library.launches import Launch
    >>> L = Launch(("void cutlass::Kernel2<cutlass_75_tensorop_s1688gemm_bf16_64x64_nn_align1>(...)",
    ...             "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>(...)"), 20, 5)
    >>> s, ok = cutlass_half_structure(Call("matmul", "bf16", "bf16", 96, 80, 333), Structure("x"), L)
    >>> s.instruction, s.k_tile, s.split_k, s.split_partial_format, ok
    ('hopper.mma.m16n8k8.f32.bf16.bf16.f32', 32, (72, 72, 72, 72, 72), None, True)
"""

from __future__ import annotations

import re

from .structure import Structure

_FMT = {"bf16": "bf16", "fp16": "f16"}
_PARTIAL = {"__nv_bfloat16": "bf16", "__half": "fp16", "float": None}
_NAME = re.compile(r"cutlass_(\d+)_(wmma_)?tensorop_(?:\w+?_)?(s1688|s16816|s161616)gemm_\w+?_(\d+)x(\d+)"
                   r"(?:_(\d+)x(\d+))?_(nn|nt|tn|tt)_align(\d+)")
_REDUCE_PARTIAL = re.compile(r"splitKreduce_kernel<\s*\d+,\s*\d+,\s*\w+,\s*([\w:]+)")
ALIGN_K = 8  # CUTLASS kAlignK for 16-bit operands: 128 bits


def parse_name(name: str) -> dict | None:
    """The fields of a CUTLASS 2.x tensor-op kernel name, or None for another kernel.

    >>> parse_name("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_nn_align2")["tile_k"]
    128
    >>> parse_name("cutlass_75_tensorop_s1688gemm_bf16_64x64_nt_align1")["op"]
    's1688'
    """
    m = _NAME.search(name)
    if m is None:
        return None
    sm, wmma, op, tm, tn, tk, stages, layout, align = m.groups()
    return dict(sm=int(sm), wmma=bool(wmma), op=op, tile_m=int(tm), tile_n=int(tn),
                tile_k=int(tk) if tk else None, stages=int(stages) if stages else None, layout=layout,
                align=int(align))


def k_tile_of(f: dict, fmt: str) -> int:
    """The K-tile the partial tile is taken from (and the in-place split's granule): 32 for s1688 (not in the
    name), the name's BK for s16816 and wmma."""
    if f["op"] == "s1688":
        return 32
    if f["wmma"]:
        return WMMA_TILE(f, fmt)
    return f["tile_k"] or 32


def WMMA_TILE(f: dict, fmt: str) -> int:  # noqa: N802 - module-level so the fit tool can try other rules
    """The wmma kernels' K-tile: the name's BK (``..._32x32_128x2_...`` -> 128)."""
    return f["tile_k"] or 64


def instruction_of(f: dict, fmt: str) -> str:
    t = _FMT[fmt]
    if f["op"] == "s1688":
        return f"hopper.mma.m16n8k8.f32.{t}.{t}.f32"
    return f"hopper.wgmma.m64n8k16.f32.{t}.{t}"


def parallel_slices(K: int, S: int, granule: int = ALIGN_K) -> tuple[int, ...] | None:
    """splitKreduce split-K: slices of ``ceil(K / S)`` rounded up to ``granule`` (the last shorter, fewer slices where
    they run out); None when unsplit.  Also the FP32 CUTLASS / SIMT slices (``selection``).

    >>> parallel_slices(333, 5), parallel_slices(4097, 24)[0], parallel_slices(11008, 9)[0]
    ((72, 72, 72, 72, 72), 176, 1224)
    """
    per = -(-(-(-K // S)) // granule) * granule
    return (per,) * -(-K // per) if S > 1 and per < K else None


def tile_slices(K: int, S: int, tile: int) -> tuple[int, ...] | None:
    """Split-K over whole K-tiles: ``ceil(ceil(K / tile) / S)`` K-tiles a slice (the last shorter, fewer slices where
    they run out); None when unsplit.  The sm75 kernels in place cut K so, and so do nvjet's split-K kernels
    (``selection``; ``split_rule.effective_slices`` counts their slices).

    >>> tile_slices(3072, 5, 32), tile_slices(8192, 6, 64)[0], tile_slices(65536, 48, 64)[-1]
    ((640, 640, 640, 640, 640), 1408, 1408)
    """
    per = -(-(-(-K // tile)) // S) * tile
    return (per,) * -(-K // per) if S > 1 and per < K else None


def partial_format(launch) -> str | None:
    """The splitKreduce kernel's partial type (its 4th template argument) as a format name, or None (FP32)."""
    for k in launch.kernels:
        m = _REDUCE_PARTIAL.search(k)
        if m:
            return _PARTIAL.get(m.group(1).split("::")[-1])
    return None


def in_place(launch) -> bool:
    """A Memset before the GEMM kernel and no reduce kernel (``Launch.in_place`` also wants the Memset first; torch's
    copy of C for addmm can come before it: survey 370, 384)."""
    names = list(launch.kernels)
    main = names.index(launch.main) if launch.main in names else len(names)
    return any(k.startswith("Memset") for k in names[:main]) and not any("splitKreduce" in k for k in names)


# Every captured BF16/FP16 call whose launch is one of these kernels, by family label (``family_label``): calls whose
# every sampled output (16 x 16, x 3 batches) the rule reproduced / captured calls; the S and K the captures span
# (the first 7 captures; counts over all 14).  231 of 232 (lab/device_library/fit_cutlass_half.py --side 16; the bit
# table is not consulted; 169 of 169 over the first 7).
EVIDENCE: dict[str, tuple[int, int]] = {
    "bf16 s16816 parallel-bf16 plain": (6, 6),  # S 2, 3, 9; K 2560..11008
    "bf16 s16816 parallel-fp32 plain": (1, 1),  # S 9; K 14336
    "bf16 s16816 serial plain": (4, 4),  # S 2, 3; K 4096..7168 (S = 3, K = 5120: holdout6, where the slice rules differ)
    "bf16 s16816 serial bias": (1, 2),  # S 3; K 5120 (holdout10's 140 x 27306 x 5120 F.linear cut whole K-tiles, 1728)
    "bf16 s16816 unsplit bx": (4, 4),  # K 1280
    "bf16 s16816 unsplit plain": (30, 30),  # K 128..2560
    "bf16 s1688 parallel-bf16 bias_out": (1, 1),  # S 3; K 333 (survey 363, no structure identified before)
    "bf16 s1688 parallel-bf16 plain": (8, 8),  # S 2, 5, 7; K 1024..4096
    "bf16 s1688 parallel-fp32 plain": (18, 18),  # S 4..33; K 65..13696
    "bf16 s1688 serial bias": (9, 9),  # S 2, 4, 5; K 768..5120
    "bf16 s1688 serial bx": (3, 3),  # S 2; K 1024..2048
    "bf16 s1688 serial plain": (12, 12),  # S 2; K 768..4096
    "bf16 s1688 unsplit bias": (10, 10),  # K 7..2048
    "bf16 s1688 unsplit bx": (4, 4),  # K 64..80
    "bf16 s1688 unsplit plain": (28, 28),  # K 64..5120
    "bf16 wmma75 unsplit bx": (5, 5),  # K 9..64
    "bf16 wmma75 unsplit plain": (5, 5),  # K 7..64
    "bf16 wmma80 parallel-fp32 plain": (2, 2),  # S 5, 9; K 36..11008
    "bf16 wmma80 unsplit bias": (1, 1),  # K 100
    "bf16 wmma80 unsplit bx": (5, 5),  # K 90..130
    "bf16 wmma80 unsplit plain": (8, 8),  # K 64..1280
    "fp16 s16816 unsplit bias": (3, 3),  # K 1024
    "fp16 s16816 unsplit plain": (3, 3),  # K 768..1280
    "fp16 s1688 parallel-fp16 plain": (1, 1),  # S 8; K 4095
    "fp16 s1688 parallel-fp32 plain": (1, 1),  # S 57; K 4097
    "fp16 s1688 serial bias": (3, 3),  # S 2, 4; K 4095..4096
    "fp16 s1688 serial bx": (2, 2),  # S 2; K 2048
    "fp16 s1688 serial plain": (6, 6),  # S 2; K 768..5120
    "fp16 s1688 unsplit bias": (1, 1),  # K 2048
    "fp16 s1688 unsplit plain": (3, 3),  # K 511..2048
    "fp16 wmma75 parallel-fp16 plain": (1, 1),  # S 2; K 4096
    "fp16 wmma75 parallel-fp32 plain": (4, 4),  # S 5, 8, 16; K 333..5120
    "fp16 wmma75 serial bias": (1, 1),  # S 5; K 3072
    "fp16 wmma75 serial plain": (1, 1),  # S 2; K 5120
    "fp16 wmma75 unsplit bias": (9, 9),  # K 7..5120
    "fp16 wmma75 unsplit bx": (3, 3),  # K 9..64
    "fp16 wmma75 unsplit plain": (14, 14),  # K 9..5120
    "fp16 wmma80 parallel-fp16 plain": (1, 1),  # S 8; K 8192
    "fp16 wmma80 parallel-fp32 plain": (2, 2),  # S 16; K 2048..4096
    "fp16 wmma80 unsplit bias": (1, 1),  # K 100
    "fp16 wmma80 unsplit plain": (6, 6),  # K 36..768
}


def family_label(fmt: str, f: dict, s: Structure) -> str:
    """The evidence key of a structure: input format, kernel op (s1688, s16816, wmma75, wmma80), split kind
    (unsplit, serial, parallel-{partial format}) and epilogue.

    >>> f = parse_name("cutlass_75_tensorop_s1688gemm_bf16_64x64_nn_align1")
    >>> family_label("bf16", f, Structure("x", split_k=(72,) * 5))
    'bf16 s1688 parallel-fp32 plain'
    """
    op = f"wmma{f['sm']}" if f["wmma"] else f["op"]
    split = ("unsplit" if not s.split_k else "serial" if s.split_reduce == "serial"
             else f"parallel-{s.split_partial_format or 'fp32'}")
    return f"{fmt} {op} {split} {s.epilogue}"


# Parallel slices are ceil(K / S) rounded up to 8 elements on 45 of the 46 captured parallel split calls; holdout10's
# 140 x 13653 x 5120 matmul (cutlass_75 s1688 128x128 nn, S = 6) cut 896-element slices (a granule of 64 or 128; 856
# misses 35 of its 64 sampled outputs).  Where 8 and 64 cut differently, a call is modelled only on the kernels
# (sm, wmma, op, tile M, tile N) whose captures chose 8 there (fit_cutlass_half.py --granule 64 lists them); on
# s1688 128x128 the best guess is 64, elsewhere 8, both flagged.
GRANULE_8_PINNED = {(75, False, "s1688", 64, 64), (75, False, "s1688", 128, 256), (80, False, "s16816", 256, 64),
                    (75, True, "s161616", 32, 32), (80, True, "s161616", 32, 32)}
GRANULE_64_SEEN = {(75, False, "s1688", 128, 128)}


def _parallel_granule(f: dict, K: int, S: int) -> tuple[int, bool]:
    """(slice granule, pinned): 8 unless the kernel is one where 64 was seen; pinned where 8 and 64 cut K alike
    or a capture of this kernel chose between them."""
    key = (f["sm"], f["wmma"], f["op"], f["tile_m"], f["tile_n"])
    if parallel_slices(K, S, ALIGN_K) == parallel_slices(K, S, 64):
        return ALIGN_K, True
    return (64, False) if key in GRANULE_64_SEEN else (ALIGN_K, key in GRANULE_8_PINNED)


def verified(label: str) -> bool:
    """Captured and reproduced on every captured call: the library may mark such calls modelled."""
    exact, captured = EVIDENCE.get(label, (0, 0))
    return captured > 0 and exact == captured


def cutlass_half_structure(call, base: Structure, launch) -> tuple[Structure | None, bool]:
    """(structure, verified) of a BF16/FP16 call whose measured launch is a CUTLASS 2.x tensor-op kernel;
    (None, False) for any other launch.  Pure: reads only the call's shape and the launch's names and grid."""
    if call.fmt not in _FMT:
        return None, False
    f = parse_name(launch.main)
    if f is None:
        return None, False
    if launch.grid_z % call.b:
        return None, False  # grid z is batch x S: anything else was never captured
    S = launch.grid_z // call.b
    reduce = any("splitKreduce" in k for k in launch.kernels)
    tile = k_tile_of(f, call.fmt)
    epi = "bx" if base.epilogue == "badd" else base.epilogue
    s = base.with_(instruction=instruction_of(f, call.fmt), input_rounding=None, promote_every=None, k_tile=tile,
                   k_residue="first", epilogue=epi, split_interleave=None, simt_kernel=None, split_k=None,
                   split_reduce="parallel", split_partial_format=None)
    pinned = True
    if S > 1 and reduce:
        half = partial_format(launch)
        granule, pinned = _parallel_granule(f, call.K, S)
        # the reduce kernel converts the sum to the output type before it adds a BF16/FP16 bias (survey 363)
        s = s.with_(split_k=parallel_slices(call.K, S, granule), split_partial_format=half,
                    epilogue="bias_out" if half and epi == "bias" else epi)
    elif S > 1 and in_place(launch):
        # CUTLASS 2.x sm80 (s16816) in place cuts ceil(K / S) rounded to 8 like the parallel kernels (holdout6's
        # 70 x 20480 x 5120, S = 3: 1712-element slices; whole K-tiles, 1728, miss 90 of 256 outputs); the sm75
        # kernels cut whole K-tiles (the two captured calls where the rules differ)
        slices = parallel_slices(call.K, S) if f["op"] == "s16816" else tile_slices(call.K, S, tile)
        s = s.with_(split_k=slices, split_reduce="serial")
        # whole K-tiles where the two rules differ was captured only with K a multiple of the tile (survey 267, 766,
        # holdout8 #16); with a residue tile it is not pinned (the H200's train_bits #118, 156 x 5120 x 13653 FP16,
        # s1688 128x128 in place, S = 19: whole K-tiles miss 49 of 64 sampled outputs)
        pinned = (f["op"] == "s16816" or call.K % tile == 0
                  or tile_slices(call.K, S, tile) == parallel_slices(call.K, S))
    elif S > 1:
        return s, False  # grid z > 1 without a reduce kernel or a Memset: never captured
    return s, pinned and verified(family_label(call.fmt, f, s))
