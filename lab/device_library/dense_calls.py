"""The dense kernel surveys (2026-11-26, second session): cuBLAS's choice read off CUDA-graph captures
(``graph_survey.py``, ~10x the profiler's rate and no kernel runs, so no limit on a call's MACs).

Two lists:

* ``dense_model_calls`` -- every projection (N, K) of the 95 published configurations the earlier surveys
  used, at (nearly) every token count: 1..256 each, then every 8 to 4,096 and every 64 to 16,384 for the
  main kinds; a coarser ladder for the rest.  A call of a known model at any token count then lies between
  two measured ones at most 8 (64 above 4,096) apart.
* ``dense_grid_calls`` -- model-like (N, K) pairs for models no list names: one side a hidden size (multiples
  of 128 up to 8,192, of 512 to 16,384), the other any multiple of 256 up to 32,768 (odd multiples of 128 up to
  16,384, multiples of 1,024 to 65,536), at 52 token counts.
* ``dense_attention_calls`` -- attention bmm at every model's (heads, head dim) and sequence lengths every 1
  to 256, every 8 to 4,096.

    >>> len(M_FULL), len(M_COARSE), len(M_GRID)
    (928, 256, 52)
"""

from __future__ import annotations

import zlib

import numpy as np

from kernel_calls import DENSE_MODELS, MODELS3_SURVEY, MORE_MODELS, model_projections
from model_lists import models

M_FULL = tuple(range(1, 257)) + tuple(range(264, 4097, 8)) + tuple(range(4160, 16385, 64))
M_COARSE = tuple(range(1, 65)) + tuple(range(72, 257, 8)) + tuple(range(288, 4097, 32)) + tuple(range(4352, 16385, 256))
M_GRID = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224,
          256, 320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144,
          7168, 8192, 10240, 12288, 14336, 16384)
MAX_OPERAND = 2 ** 29  # elements: a 1 GiB BF16 operand; nothing runs, but every operand is allocated

BF16, FP16 = "bf16", "fp16"
FP8_TENSOR_FAST = dict(b_fmt="e4m3", scales="tensor", fast_accum=True, out_dtype="bf16")
FP8_ROW_FAST = dict(b_fmt="e4m3", scales="rowwise", fast_accum=True, out_dtype="bf16")
MAIN_KINDS = [("matmul", BF16, {}), ("linear", BF16, dict(bias=True)), ("linear", BF16, dict(bias=False)),
              ("mm_out", BF16, dict(out_dtype="fp32")), ("addmm", BF16, dict(beta=1, alpha=1, c_1d=True)),
              ("scaled_mm", "e4m3", FP8_TENSOR_FAST), ("scaled_mm", "e4m3", FP8_ROW_FAST)]
MORE_KINDS = [("linear", FP16, dict(bias=True)), ("linear", FP16, dict(bias=False)), ("matmul", FP16, {}),
              ("scaled_mm", "e4m3", dict(FP8_TENSOR_FAST, fast_accum=False)),
              ("scaled_mm", "e4m3", dict(FP8_ROW_FAST, fast_accum=False)),
              ("scaled_mm", "e4m3", dict(FP8_TENSOR_FAST, b_fmt="e5m2", fast_accum=False)),
              ("scaled_mm", "e4m3", dict(FP8_TENSOR_FAST, out_dtype="fp32")),
              ("matmul", "fp32", dict(prec="high")), ("matmul", "fp32", dict(prec="highest")),
              ("matmul", BF16, dict(a_t=True, b_t=False)), ("matmul", BF16, dict(a_t=False, b_t=True)),
              ("addmm", BF16, dict(beta=0.5, alpha=1, c_1d=False)), ("addmm", BF16, dict(beta=1, alpha=0.5, c_1d=False))]


def all_models() -> dict:
    """The 95 configurations of the earlier surveys (holdouts 3-6's models included: development data since)."""
    held_out = {n: models(f"holdout{n}") for n in (4, 5, 6)}
    return dict(DENSE_MODELS, **MORE_MODELS, **held_out[4], **MODELS3_SURVEY, **held_out[5], **held_out[6])


class DenseSet:
    """A large call list kept as arrays: kinds (op, fmt, options) and one row per call (kind index, b, M, N, K)
    in a seeded random order (so every slice, as parallel processes take it, holds every kind and shape size
    alike).  A call's id is its position; ``calls(start, stop)`` builds the dicts ``survey_ops.build`` takes
    for one slice only (operand seeds are 0: the kernel surveys run on uninitialised operands)."""

    def __init__(self, kinds: list[tuple[str, str, dict]], rows: np.ndarray, salt: str) -> None:
        self.kinds = kinds
        self.rows = rows[np.random.default_rng(zlib.crc32(salt.encode())).permutation(len(rows))]

    def __len__(self) -> int:
        return len(self.rows)

    def calls(self, start: int = 0, stop: int | None = None) -> list[dict]:
        out = []
        for i, (k, b, M, N, K) in enumerate(self.rows[start:stop].tolist(), start):
            op, fmt, kw = self.kinds[k]
            c = dict(op=op, fmt=fmt, M=M, N=N, K=K, prec="highest")
            c.update(kw, id=i, seed_a=0, seed_b=0, seed_c=0)
            if op == "bmm":
                c["b"] = b
            out.append(c)
        return out


def _rows(kinds: list, shapes: np.ndarray, first_kind: int = 0) -> np.ndarray:
    """(kind, b, M, N, K) rows: every kind at every shape it accepts (FP8: N, K multiples of 16) that fits."""
    b, M, N, K = shapes.T
    fits = b * np.maximum(np.maximum(M * K, K * N), M * N) <= MAX_OPERAND
    out = []
    for j, (op, _, _) in enumerate(kinds):
        ok = fits & ((N % 16 == 0) & (K % 16 == 0) if op == "scaled_mm" else True)
        out.append(np.column_stack([np.full(int(ok.sum()), first_kind + j), shapes[ok]]))
    return np.concatenate(out)


def _shapes(pairs, ms) -> np.ndarray:
    """(1, M, N, K) for every (N, K) pair x token count."""
    nk = np.array(sorted(pairs), dtype=np.int64)
    ms = np.array(ms, dtype=np.int64)
    return np.column_stack([np.ones(len(nk) * len(ms), np.int64), np.tile(ms, len(nk)),
                            np.repeat(nk[:, 0], len(ms)), np.repeat(nk[:, 1], len(ms))])


def dense_model_calls() -> DenseSet:
    """The 95 configurations' projections at 928 token counts (main kinds) or 256 (the others).

    >>> ds = dense_model_calls(); len(ds) > 2_000_000, ds.calls(0, 1)[0]["id"]
    (True, 0)
    """
    nk = model_projections(all_models())
    rows = np.concatenate([_rows(MAIN_KINDS, _shapes(nk, M_FULL)),
                           _rows(MORE_KINDS, _shapes(nk, M_COARSE), len(MAIN_KINDS))])
    return DenseSet(MAIN_KINDS + MORE_KINDS, rows, "dense-models")


HIDDEN = tuple(range(512, 8193, 128)) + tuple(range(8704, 16385, 512))
FREE = tuple(range(256, 32769, 256)) + tuple(range(33792, 65537, 1024))
M_GRID_MORE = M_GRID[::2]


def dense_grid_pairs() -> list[tuple[int, int]]:
    """(N, K) pairs shaped like a model's projections: (free, hidden) and (hidden, free)."""
    return sorted({(f, h) for f in FREE for h in HIDDEN} | {(h, f) for f in FREE for h in HIDDEN})


def dense_grid_calls(kinds: str = "main") -> DenseSet:
    """``dense_grid_pairs`` x ``M_GRID`` for the main kinds (``kinds="main"``), or x every other token count of it
    for FP16, FP32 and the FP8 variants (``"more"``).

    >>> len(dense_grid_pairs()) > 20000
    True
    """
    ks, ms = (MAIN_KINDS, M_GRID) if kinds == "main" else (MORE_KINDS[:9], M_GRID_MORE)
    return DenseSet(ks, _rows(ks, _shapes(dense_grid_pairs(), ms)), f"dense-grid-{kinds}")


def dense_attention_calls() -> DenseSet:
    """Attention bmm (scores [b, S, d] @ [b, d, S], context [b, S, S] @ [b, S, d]; BF16 and FP16) at every
    model's (heads x batch 1, 2, 4; head dim) and sequence lengths 1..256, every 8 to 4,096."""
    seqs = tuple(range(1, 257)) + tuple(range(264, 4097, 8))
    bd = sorted({(batch * (h // hd), hd) for h, _, _, _, hd in all_models().values() for batch in (1, 2, 4)})
    shapes = set()
    for b, hd in bd:
        for s in seqs:
            shapes |= {(b, s, s, hd), (b, s, hd, s)} if s > 1 else {(b, 1, 1024, hd), (b, 1, hd, 1024)}
    kinds = [("bmm", BF16, {}), ("bmm", FP16, {})]
    return DenseSet(kinds, _rows(kinds, np.array(sorted(shapes), dtype=np.int64)), "dense-attention")


def dense_model_more_calls() -> DenseSet:
    """The third dense survey: the kinds ``dense_model_calls`` took at 256 token counts (FP16, FP32/TF32, FP8
    variants, transposed views, addmm with alpha/beta) at the rest of the 928."""
    nk = model_projections(all_models())
    rest = sorted(set(M_FULL) - set(M_COARSE))
    return DenseSet(MORE_KINDS, _rows(MORE_KINDS, _shapes(nk, rest)), "dense-models-more")


def dense_attention_more_calls() -> DenseSet:
    """Attention bmm (BF16, FP16) at batch x heads 1..64 and every 8 to 128, head dims 64, 80, 96, 128, 160, 256 and
    the sequence lengths of ``dense_attention_calls``."""
    seqs = tuple(range(1, 257)) + tuple(range(264, 4097, 8))
    shapes = set()
    for b in tuple(range(1, 65)) + tuple(range(72, 129, 8)):
        for hd in (64, 80, 96, 128, 160, 256):
            for s in seqs:
                shapes |= {(b, s, s, hd), (b, s, hd, s)} if s > 1 else {(b, 1, 1024, hd), (b, 1, hd, 1024)}
    kinds = [("bmm", BF16, {}), ("bmm", FP16, {})]
    return DenseSet(kinds, _rows(kinds, np.array(sorted(shapes), dtype=np.int64)), "dense-attention-more")


def dense_grid_extra_calls() -> DenseSet:
    """FP32 and TF32 matmuls at the grid's other 26 token counts, and transposed-view BF16 matmuls at all 52."""
    fp32 = [("matmul", "fp32", dict(prec="high")), ("matmul", "fp32", dict(prec="highest"))]
    layouts = [("matmul", BF16, dict(a_t=True, b_t=False)), ("matmul", BF16, dict(a_t=False, b_t=True))]
    pairs = dense_grid_pairs()
    other = sorted(set(M_GRID) - set(M_GRID_MORE))
    rows = np.concatenate([_rows(fp32, _shapes(pairs, other)), _rows(layouts, _shapes(pairs, M_GRID), len(fp32))])
    return DenseSet(fp32 + layouts, rows, "dense-grid-extra")


MISALIGNED_BASES = tuple(sorted({64 * round(96 * 1.25 ** i / 64) for i in range(37)}))
PARTNERS = (512, 768, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192, 12288, 16384)


def misaligned_pairs() -> list[tuple[int, int]]:
    """(N, K) pairs with one side off every multiple of 8 -- a multiple of 64 (log-spaced 128..295,808) plus 1, 2 or
    4, one per alignment cuBLAS's CUTLASS fallbacks distinguish (1, 2, 4 elements) -- and the other a hidden size:
    an FFN or vocabulary like Jais-13B's 13,653 (holdout10's misses) on either side.

    >>> ps = misaligned_pairs(); len(ps) > 2500, all((n % 8 == 0) != (k % 8 == 0) for n, k in ps)
    (True, True)
    """
    odd = [b + r for b in MISALIGNED_BASES for r in (1, 2, 4)]
    return sorted({(d, h) for d in odd for h in PARTNERS} | {(h, d) for d in odd for h in PARTNERS})


def dense_misaligned_calls() -> DenseSet:
    """The fourth dense survey: ``misaligned_pairs`` x ``M_GRID`` for the 16-bit main kinds, x every other token
    count of it for FP16 and FP32/TF32 (FP8 refuses such shapes)."""
    main = [k for k in MAIN_KINDS if k[0] != "scaled_mm"]
    more = [k for k in MORE_KINDS[:9] if k[0] != "scaled_mm"]
    pairs = misaligned_pairs()
    rows = np.concatenate([_rows(main, _shapes(pairs, M_GRID)), _rows(more, _shapes(pairs, M_GRID_MORE), len(main))])
    return DenseSet(main + more, rows, "dense-misaligned")


# The fifth dense survey (2026-11-27, third session; issue 23's #15 leftovers): narrow outputs over long K -- LoRA
# adapters (rank 8..128), MoE routers (8..160 experts), small heads -- where cuBLAS splits K and the earlier grids
# (one side a hidden size of 512 or more) measured nothing: every FP8 variant torch takes, TF32 / FP32 and BF16/FP16.
LONGK_N = (16, 32, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512)
LONGK_N_ANY = LONGK_N + (1, 7, 8, 60, 100)  # FP8 takes only multiples of 16
LONGK_K = tuple(range(2048, 32769, 256)) + tuple(range(36864, 65537, 4096))
M_LONGK = tuple(m for m in M_GRID if m <= 4096)
FP8_MIXES = (("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"))


def longk_fp8_kinds() -> list[tuple[str, str, dict]]:
    """Every FP8 ``_scaled_mm`` variant: the three operand mixes x fast / promoted accumulation x tensor scales
    with BF16, FP32 or FP16 out, and row-wise scales (BF16 out)."""
    kinds = []
    for a, b in FP8_MIXES:
        for fast in (True, False):
            for out in ("bf16", "fp32", "fp16"):
                kinds.append(("scaled_mm", a, dict(b_fmt=b, scales="tensor", fast_accum=fast, out_dtype=out)))
            kinds.append(("scaled_mm", a, dict(b_fmt=b, scales="rowwise", fast_accum=fast, out_dtype="bf16")))
    return kinds


LONGK_OTHER_KINDS = [("matmul", "fp32", dict(prec="high")), ("matmul", "fp32", dict(prec="highest")),
                     ("linear", "fp32", dict(prec="high", bias=False)), ("linear", "fp32", dict(prec="highest", bias=False)),
                     ("linear", BF16, dict(bias=False)), ("matmul", BF16, {}), ("linear", FP16, dict(bias=False)),
                     ("mm_out", BF16, dict(out_dtype="fp32"))]


def dense_longk_calls() -> DenseSet:
    """``LONGK_N`` x ``LONGK_K`` x ``M_LONGK`` for every FP8 variant, ``LONGK_N_ANY`` for the other kinds.

    >>> ds = dense_longk_calls(); 2_000_000 < len(ds) < 3_000_000, len(ds.kinds)
    (True, 32)
    """
    fp8 = longk_fp8_kinds()
    rows = np.concatenate([_rows(fp8, _shapes([(n, k) for n in LONGK_N for k in LONGK_K], M_LONGK)),
                           _rows(LONGK_OTHER_KINDS, _shapes([(n, k) for n in LONGK_N_ANY for k in LONGK_K], M_LONGK),
                                 len(fp8))])
    return DenseSet(fp8 + LONGK_OTHER_KINDS, rows, "dense-longk")


# The sixth (2026-11-27, third session, after held-out set 12's replay): the narrow long-K region at the token
# counts between M_LONGK's (split counts change with the tile count, so a call between two measured token counts
# is planned only where both agree), for the kinds models run there; and FP32 at tiny shapes (SIMT kernels).
M_NARROW = tuple(sorted(set(range(1, 65)) | set(range(72, 513, 8)) | set(range(544, 1025, 32)) |
                        set(range(1088, 4097, 64)) - set(M_LONGK)))
NARROW_FP8_KINDS = [("scaled_mm", "e4m3", dict(b_fmt=b, scales=sc, fast_accum=fast, out_dtype=out))
                    for b, sc, out in (("e4m3", "tensor", "bf16"), ("e4m3", "rowwise", "bf16"), ("e5m2", "tensor", "bf16"))
                    for fast in (True, False)] + [("scaled_mm", "e4m3", dict(b_fmt="e4m3", scales="tensor",
                                                                              fast_accum=True, out_dtype="fp32"))]
TINY = tuple(range(1, 33)) + (48, 64, 100, 128)
TINY_K = TINY + (256,)
TINY32_KINDS = LONGK_OTHER_KINDS[:4]  # FP32 / TF32 matmul and F.linear


def dense_narrow_calls() -> DenseSet:
    """``LONGK_N`` x ``LONGK_K`` x ``M_NARROW`` for the main FP8 variants, ``LONGK_N_ANY`` for the TF32 / FP32 and
    BF16/FP16 kinds of ``dense_longk_calls``.

    >>> ds = dense_narrow_calls(); 5_000_000 < len(ds) < 6_000_000, len(ds.kinds)
    (True, 15)
    """
    rows = np.concatenate([
        _rows(NARROW_FP8_KINDS, _shapes([(n, k) for n in LONGK_N for k in LONGK_K], M_NARROW)),
        _rows(LONGK_OTHER_KINDS, _shapes([(n, k) for n in LONGK_N_ANY for k in LONGK_K], M_NARROW),
              len(NARROW_FP8_KINDS))])
    return DenseSet(NARROW_FP8_KINDS + LONGK_OTHER_KINDS, rows, "dense-narrow")


def dense_tiny32_calls() -> DenseSet:
    """FP32 and TF32 matmul and F.linear at M = 1..16, N in ``TINY``, K in ``TINY_K`` (gemmSN, gemv kernels).

    >>> len(dense_tiny32_calls())
    85248
    """
    shapes = _shapes([(n, k) for n in TINY for k in TINY_K], tuple(range(1, 17)))
    return DenseSet(TINY32_KINDS, _rows(TINY32_KINDS, shapes), "dense-tiny32")


# The seventh (2026-11-27, third session): long-K projections of hidden-size outputs at (nearly) every token count to
# 4,096 -- the forward down-projection and its kin, where TF32 / FP32 and FP8 split-K counts change with M and the
# earlier grids measured 52 token counts: a call between two measured ones was flagged where their launches differ.
WIDE_K = (8192, 11008, 12288, 13824, 14336, 16384, 18432, 20480, 24576, 28672, 32768)
M_WIDE = tuple(m for m in M_FULL if m <= 4096)
WIDE_KINDS = [("matmul", "fp32", dict(prec="high")), ("linear", "fp32", dict(prec="high", bias=False)),
              ("matmul", "fp32", dict(prec="highest")), ("scaled_mm", "e4m3", FP8_TENSOR_FAST),
              ("scaled_mm", "e4m3", FP8_ROW_FAST)]


def dense_wide_calls() -> DenseSet:
    """``HIDDEN`` x ``WIDE_K`` x ``M_WIDE`` for TF32 / FP32 matmul and F.linear and the two fast-accumulation FP8
    variants of the main kinds.

    >>> ds = dense_wide_calls(); 2_500_000 < len(ds) < 3_500_000, len(ds.kinds)
    (True, 5)
    """
    shapes = _shapes([(n, k) for n in HIDDEN for k in WIDE_K], M_WIDE)
    return DenseSet(WIDE_KINDS, _rows(WIDE_KINDS, shapes), "dense-wide")


DENSE_SETS = {"dense_models": dense_model_calls, "dense_grid": lambda: dense_grid_calls("main"),
              "dense_grid_more": lambda: dense_grid_calls("more"), "dense_attention": dense_attention_calls,
              "dense_models_more": dense_model_more_calls, "dense_attention_more": dense_attention_more_calls,
              "dense_grid_extra": dense_grid_extra_calls, "dense_misaligned": dense_misaligned_calls,
              "dense_longk": dense_longk_calls, "dense_narrow": dense_narrow_calls, "dense_tiny32": dense_tiny32_calls,
              "dense_wide": dense_wide_calls}
