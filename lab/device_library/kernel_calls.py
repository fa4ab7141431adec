"""The kernel survey's call list: which kernel (and launch grid) cuBLAS picks, over a dense grid of realistic shapes.

No output bits are captured for these calls (``kernel_survey.py`` runs them on uninitialised operands):
the structure of each kernel family is identified from the bit captures (``survey_ops.py``), and the
kernel name plus its launch grid say which family and which split-K slice count a shape gets.  So the
list can be large: every projection of ~30 published model configurations x token counts 1..16384,
a log-spaced synthetic (N, K) grid for neighbours, attention bmm shapes, FP32/TF32 and FP8.

Models of the held-out capture ``survey_calls.held_out_calls(3)`` are deliberately absent, so that
capture measures what the kernel survey buys on models it never saw.

    >>> cs = kernel_calls(); len(cs) > 20000, len({c["id"] for c in cs}) == len(cs)
    (True, True)
"""

from __future__ import annotations

import random
import zlib

from call_ids import adder as _adder
from model_lists import models

# hidden, FFN, vocabulary, fused-QKV width (q + k + v), head dim (lab/data/models.json)
DENSE_MODELS = models("kernel_survey")
TOKENS = tuple(range(1, 33)) + (36, 40, 44, 48, 56, 64, 72, 80, 96, 100, 112, 128, 160, 192, 197, 200, 224, 256,
                                 320, 333, 384, 448, 500, 512, 640, 768, 1000, 1024, 1536, 2000, 2048, 3000, 3072,
                                 4096, 6144, 8192, 12288, 16384)
GRID_NK = (512, 1024, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192, 10240, 12288, 14336, 16384, 20480, 24576,
           28672, 32768, 49152, 65536)
GRID_M = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096)
MAX_MACS = 2 ** 40  # per call: about 2 ms of BF16 on an H100
MAX_MACS_FP32 = 2 ** 35  # FFMA kernels run ~20x slower
MAX_OPERAND = 2 ** 28


def _fits(M: int, N: int, K: int, b: int = 1, macs: int = MAX_MACS) -> bool:
    return b * M * N * K <= macs and b * max(M * K, K * N, M * N) <= MAX_OPERAND


def _round_robin(per_kind: list[list[tuple]], salt: str) -> list[dict]:
    """The calls of every kind's list interleaved (one of each kind in turn, so a run cut short still covers every
    kind evenly); ids and operand seeds from ``salt``.  Items are (op, fmt, (M, N, K) or (b, M, N, K), options)."""
    calls: list[dict] = []
    add = _adder(calls, salt)
    for i in range(max(len(p) for p in per_kind)):
        for p in per_kind:
            if i < len(p):
                op, fmt, s, kw = p[i]
                if op in ("bmm", "baddbmm"):
                    b, M, N, K = s
                    add(op, fmt, M, N, K, b=b, **kw)
                else:
                    add(op, fmt, *s, **kw)
    return calls


def _shuffled(kinds, prefix: str) -> list[list[tuple]]:
    """Each (op, fmt, shapes, options) kind's shapes in a seeded random order (seed: ``prefix`` and the kind)."""
    out = []
    for op, fmt, pool, kw in kinds:
        r = random.Random(f"{prefix}{op}{fmt}{sorted(kw.items())}")
        out.append([(op, fmt, sh, kw) for sh in r.sample(pool, len(pool))])
    return out


def model_projections(models: dict) -> list[tuple[int, int]]:
    """(N, K) of every projection: fused QKV, attention out, FFN up, gate+up fused, down, LM head."""
    nk = set()
    for h, ffn, vocab, qkv, _ in models.values():
        nk |= {(qkv, h), (h, h), (ffn, h), (2 * ffn, h), (h, ffn), (vocab, h)}
    return sorted(nk)


def attention_shapes(models: dict) -> list[tuple[int, int, int, int]]:
    """(b, M, N, K) of attention bmm: scores [b, S, d] @ [b, d, S] and context [b, S, S] @ [b, S, d]."""
    out = set()
    for h, _, _, _, hd in models.values():
        heads = h // hd
        for batch in (1, 2, 4):
            for s in (1, 7, 77, 128, 197, 256, 333, 512, 1000, 1024, 2048, 4096):
                b = batch * heads
                out.add((b, s, s, hd) if s > 1 else (b, 1, 1024, hd))  # decode: one query row, 1024 keys
                out.add((b, s, hd, s) if s > 1 else (b, 1, hd, 1024))
    return sorted(out)


def kernel_calls() -> list[dict]:
    """Every kernel-survey call, in a shuffled order that keeps each kind's coverage even when cut short."""
    model_nk, grid_nk = model_projections(DENSE_MODELS), [(n, k) for n in GRID_NK for k in GRID_NK]
    shapes = sorted({(m, n, k) for n, k in model_nk for m in TOKENS} | {(m, n, k) for n, k in grid_nk for m in GRID_M})
    half = [s for s in shapes if _fits(*s)]
    single = [s for s in shapes if _fits(*s, macs=MAX_MACS_FP32)]
    fp8 = [s for s in half if s[1] % 16 == 0 and s[2] % 16 == 0]
    kinds: list[tuple[str, str, list, dict]] = [
        ("linear", "bf16", half, dict(bias=True)), ("linear", "bf16", half, dict(bias=False)),
        ("matmul", "bf16", half, {}), ("linear", "fp16", half, dict(bias=True)),
        ("linear", "fp16", half, dict(bias=False)), ("matmul", "fp16", half, {}),
        ("mm_out", "bf16", half, dict(out_dtype="fp32")), ("addmm", "bf16", half, dict(beta=1, alpha=1, c_1d=True)),
        ("matmul", "fp32", single, dict(prec="high")), ("matmul", "fp32", single, dict(prec="highest")),
        ("scaled_mm", "e4m3", fp8, dict(b_fmt="e4m3", scales="tensor", fast_accum=True, out_dtype="bf16")),
        ("scaled_mm", "e4m3", fp8, dict(b_fmt="e4m3", scales="tensor", fast_accum=False, out_dtype="bf16")),
        ("scaled_mm", "e4m3", fp8, dict(b_fmt="e4m3", scales="rowwise", fast_accum=True, out_dtype="bf16")),
        ("scaled_mm", "e4m3", fp8, dict(b_fmt="e4m3", scales="rowwise", fast_accum=False, out_dtype="bf16")),
    ]
    per_kind = _shuffled(kinds, "")
    att = attention_shapes(DENSE_MODELS)
    rng = random.Random("bmm")
    per_kind.append([("bmm", "bf16", s, {}) for s in rng.sample(att, len(att)) if _fits(s[1], s[2], s[3], s[0])])
    per_kind.append([("bmm", "fp16", s, {}) for s in rng.sample(att, len(att)) if _fits(s[1], s[2], s[3], s[0])])
    return _round_robin(per_kind, "kernels")


def kernel_sample_calls(every: int = 400) -> list[dict]:
    """A deterministic sample of ``kernel_calls()`` (about one call in ``every``, spread by a hash of the id)
    whose output bits ``survey_ops.py --set ksample`` captures: the check that kernel name + launch grid
    predict the bits at shapes the bit captures never ran.

    >>> 300 < len(kernel_sample_calls()) < 600
    True
    """
    return [c for c in kernel_calls() if zlib.crc32(f"sample{c['id']}".encode()) % every == 0]


def kernel_sample_calls2(measured: int = 540000) -> list[dict]:
    """Bits for a sample of the second survey's measured calls, weighted to the kinds the first survey left out
    (transposed views, addmm with a full C, baddbmm, FP32 linear/bmm, FP8 type mixes and FP32 output): the check
    that their measured launches' plans replay bit-exactly.

    >>> len(kernel_sample_calls2())  # the calls hopper_op_ksample2_h100.npz holds
    900
    """
    main = {("linear", "bf16"), ("linear", "fp16"), ("matmul", "bf16"), ("matmul", "fp16"), ("mm_out", "bf16")}
    out = []
    for c in kernel_calls2()[:measured]:
        new_kind = (c["op"], c["fmt"]) not in main or c.get("a_t") or c.get("b_t") or c.get("b_fmt") == "e5m2" \
            or c.get("out_dtype") == "fp32" or (c["op"] == "addmm" and not c.get("c_1d"))
        if zlib.crc32(f"sample2{c['id']}".encode()) % (400 if new_kind else 4000) == 0:
            out.append(c)
    return out


if __name__ == "__main__":
    from collections import Counter

    cs = kernel_calls()
    print(len(cs), Counter(c["op"] + ":" + c["fmt"] + ":" + c.get("prec", "") for c in cs))


# --- the second kernel survey: more token counts, the held-out set 3 models, and the remaining call kinds -----
MORE_MODELS = models("kernel_survey2")  # holdout3's models (used for development since) and others
TOKENS_MORE = tuple(range(33, 129)) + tuple(range(136, 257, 8)) + tuple(range(272, 1025, 16)) + \
    tuple(range(1088, 4097, 64)) + (1337, 1500, 2500, 3000, 4000, 5000, 6000, 7000, 10000, 12000, 16000)


def kernel_calls2() -> list[dict]:
    """The second kernel survey: the main kinds at many more token counts (33..4096 densely) over every model of
    both lists, the holdout3 models at the first list's token counts, and the kinds the first survey left out
    (transposed views, addmm with a full C and alpha/beta, baddbmm, F.linear in FP32, FP8 type mixes and FP32
    output, mm with FP32 output from FP16).

    >>> cs = kernel_calls2(); len(cs) > 100000, len({c["id"] for c in cs}) == len(cs)
    (True, True)
    """
    allm = dict(DENSE_MODELS, **MORE_MODELS)
    nk_all, nk_more = model_projections(allm), model_projections(MORE_MODELS)
    shapes = sorted({(m, n, k) for n, k in nk_all for m in TOKENS_MORE} | {(m, n, k) for n, k in nk_more for m in TOKENS})
    half = [s for s in shapes if _fits(*s)]
    single = [s for s in shapes if _fits(*s, macs=2 ** 36)]
    fp8 = [s for s in half if s[1] % 16 == 0 and s[2] % 16 == 0]
    base = sorted({(m, n, k) for n, k in nk_all for m in TOKENS if _fits(m, n, k)})
    rng = random.Random("kernels2")
    some = lambda pool, n: rng.sample(pool, min(n, len(pool)))  # noqa: E731
    kinds = [
        ("linear", "bf16", half, dict(bias=True)), ("linear", "bf16", half, dict(bias=False)),
        ("matmul", "bf16", half, {}), ("linear", "fp16", half, dict(bias=True)),
        ("linear", "fp16", half, dict(bias=False)), ("matmul", "fp16", half, {}),
        ("mm_out", "bf16", half, dict(out_dtype="fp32")), ("addmm", "bf16", half, dict(beta=1, alpha=1, c_1d=True)),
        ("matmul", "fp32", single, dict(prec="high")), ("matmul", "fp32", single, dict(prec="highest")),
        ("linear", "fp32", some(single, 6000), dict(prec="high", bias=True)),
        ("linear", "fp32", some(single, 6000), dict(prec="highest", bias=True)),
        ("scaled_mm", "e4m3", fp8, dict(b_fmt="e4m3", scales="tensor", fast_accum=True, out_dtype="bf16")),
        ("scaled_mm", "e4m3", fp8, dict(b_fmt="e4m3", scales="tensor", fast_accum=False, out_dtype="bf16")),
        ("scaled_mm", "e4m3", fp8, dict(b_fmt="e4m3", scales="rowwise", fast_accum=True, out_dtype="bf16")),
        ("scaled_mm", "e4m3", fp8, dict(b_fmt="e4m3", scales="rowwise", fast_accum=False, out_dtype="bf16")),
        ("scaled_mm", "e4m3", some(fp8, 8000), dict(b_fmt="e5m2", scales="tensor", fast_accum=False, out_dtype="bf16")),
        ("scaled_mm", "e4m3", some(fp8, 8000), dict(b_fmt="e5m2", scales="tensor", fast_accum=True, out_dtype="bf16")),
        ("scaled_mm", "e4m3", some(fp8, 8000), dict(b_fmt="e4m3", scales="tensor", fast_accum=True, out_dtype="fp32")),
        ("scaled_mm", "e4m3", some(fp8, 8000), dict(b_fmt="e4m3", scales="tensor", fast_accum=False, out_dtype="fp32")),
        ("matmul", "bf16", some(base, 8000), dict(a_t=True, b_t=False)),
        ("matmul", "bf16", some(base, 8000), dict(a_t=False, b_t=True)),
        ("matmul", "bf16", some(base, 4000), dict(a_t=True, b_t=True)),
        ("addmm", "bf16", some(base, 8000), dict(beta=1, alpha=1, c_1d=False)),
        ("addmm", "bf16", some(base, 4000), dict(beta=0.5, alpha=1, c_1d=False)),
        ("addmm", "bf16", some(base, 4000), dict(beta=1, alpha=0.5, c_1d=False)),
        ("addmm", "bf16", some(base, 4000), dict(beta=0, alpha=2, c_1d=False)),
        ("mm_out", "fp16", some(base, 8000), dict(out_dtype="fp32")),
        ("addmm", "fp16", some(base, 8000), dict(beta=1, alpha=1, c_1d=True)),
    ]
    per_kind = _shuffled(kinds, "2")
    att = attention_shapes(allm)
    for fmt in ("bf16", "fp16"):
        per_kind.append([("baddbmm", fmt, s, dict(beta=1, alpha=0.125)) for s in att if _fits(s[1], s[2], s[3], s[0])])
    per_kind.append([("bmm", "fp32", s, dict(prec="high")) for s in att if _fits(s[1], s[2], s[3], s[0], 2 ** 35)])
    return _round_robin(per_kind, "kernels2")


# --- the third kernel survey: holdout 4's models (development data since), more published configurations, and a
# denser synthetic (N, K) grid at decode and mid token counts (where nvjet's split-K choice varies most) ---------
MODELS3_SURVEY = models("kernel_survey3")  # none of these in holdout 5
GRID3_NK = (1024, 1536, 2048, 2560, 3072, 3584, 4096, 4608, 5120, 6144, 7168, 8192, 9216, 10240, 11264, 12288, 13312,
            14336, 16384, 18432, 20480, 22528, 24576, 28672, 32768)
GRID3_M = (1, 2, 3, 4, 6, 8, 12, 16, 22, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048, 3000, 4096)


def kernel_calls3() -> list[dict]:
    """The third kernel survey (main call kinds only): holdout 4's models at the second survey's token counts,
    ``MODELS3_SURVEY`` at the first's, and a 25 x 25 (N, K) grid at ``GRID3_M``; model and grid shapes in
    separate round-robin lanes so a run cut short covers both evenly.

    >>> cs = kernel_calls3(); len(cs) > 100000, len({c["id"] for c in cs}) == len(cs)
    (True, True)
    """
    holdout4 = models("holdout4")

    seen = {(m, n, k) for n, k in model_projections(dict(DENSE_MODELS, **MORE_MODELS)) for m in TOKENS + TOKENS_MORE}
    model_shapes = {(m, n, k) for n, k in model_projections(holdout4) for m in TOKENS + TOKENS_MORE} | \
        {(m, n, k) for n, k in model_projections(MODELS3_SURVEY) for m in TOKENS}
    grid_shapes = {(m, n, k) for n in GRID3_NK for k in GRID3_NK for m in GRID3_M}
    lanes = [sorted(s for s in model_shapes - seen if _fits(*s)), sorted(s for s in grid_shapes - seen - model_shapes if _fits(*s))]
    kinds = [("linear", "bf16", dict(bias=True)), ("linear", "bf16", dict(bias=False)), ("matmul", "bf16", {}),
             ("linear", "fp16", dict(bias=True)), ("linear", "fp16", dict(bias=False)), ("matmul", "fp16", {}),
             ("mm_out", "bf16", dict(out_dtype="fp32")), ("addmm", "bf16", dict(beta=1, alpha=1, c_1d=True))]
    per_kind = [p for lane, pool in enumerate(lanes) for p in _shuffled([(op, fmt, pool, kw) for op, fmt, kw in kinds],
                                                                         f"3{lane}")]
    models_small = sorted(s for s in model_shapes - seen if _fits(*s, macs=2 ** 35))
    r = random.Random("3fp32")
    for prec in ("high", "highest"):
        per_kind.append([("matmul", "fp32", s, dict(prec=prec)) for s in r.sample(models_small, len(models_small))])
    fp8 = [s for s in lanes[0] if s[1] % 16 == 0 and s[2] % 16 == 0]
    for scales, fast in (("tensor", False), ("rowwise", True)):
        per_kind.append([("scaled_mm", "e4m3", s, dict(b_fmt="e4m3", scales=scales, fast_accum=fast, out_dtype="bf16"))
                         for s in r.sample(fp8, len(fp8))])
    return _round_robin(per_kind, "kernels3")


def kernel_sample_calls3(every: int = 700) -> list[dict]:
    """Bits for about one call in ``every`` of the third survey: do its measured launches' plans replay?

    >>> 200 < len(kernel_sample_calls3()) < 450
    True
    """
    return [c for c in kernel_calls3() if zlib.crc32(f"sample3{c['id']}".encode()) % every == 0]


# --- the fourth kernel survey (2026-11-26): what holdouts 5 and 6 missed -- transposed layouts, misaligned
# vocabulary widths, FP32/TF32 at larger shapes -- over every model of every list ---------------------------------
VOCAB_ODD = (50257, 49155, 32001, 100534, 122753, 50265, 65025, 92553, 151655, 128257)


def kernel_calls4() -> list[dict]:
    """The fourth kernel survey: transposed-view matmuls (BF16/FP16) and misaligned (odd) vocabulary projections at
    every model's shapes, and FP32/TF32 matmuls between 2**35 and 2**37 MACs.

    >>> cs = kernel_calls4(); len(cs) > 50000, len({c["id"] for c in cs}) == len(cs)
    (True, True)
    """
    held_out = {n: models(f"holdout{n}") for n in (4, 5, 6)}

    allm = dict(DENSE_MODELS, **MORE_MODELS, **held_out[4], **MODELS3_SURVEY, **held_out[5], **held_out[6])
    nk = model_projections(allm)
    hiddens = sorted({h for h, *_ in allm.values()})
    rng = random.Random("kernels4")
    some = lambda pool, n: rng.sample(pool, min(n, len(pool)))  # noqa: E731
    base = sorted({(m, n, k) for n, k in nk for m in TOKENS if _fits(m, n, k)})
    odd = sorted({(m, v, h) for v in VOCAB_ODD for h in hiddens for m in TOKENS if _fits(m, v, h)})
    big32 = sorted({(m, n, k) for n, k in nk for m in TOKENS + TOKENS_MORE
                    if _fits(m, n, k, macs=2 ** 37) and not _fits(m, n, k, macs=2 ** 35)})
    kinds = [("matmul", "bf16", some(base, 14000), dict(a_t=True, b_t=False)),
             ("matmul", "bf16", some(base, 14000), dict(a_t=False, b_t=True)),
             ("matmul", "fp16", some(base, 8000), dict(a_t=True, b_t=False)),
             ("matmul", "fp16", some(base, 8000), dict(a_t=False, b_t=True)),
             ("linear", "bf16", odd, dict(bias=True)), ("linear", "bf16", odd, dict(bias=False)),
             ("linear", "fp16", odd, dict(bias=False)), ("matmul", "bf16", odd, {}),
             ("mm_out", "bf16", odd, dict(out_dtype="fp32")),
             ("matmul", "fp32", some(big32, 5000), dict(prec="high")),
             ("matmul", "fp32", some(big32, 5000), dict(prec="highest"))]
    return _round_robin(_shuffled(kinds, "4"), "kernels4")
