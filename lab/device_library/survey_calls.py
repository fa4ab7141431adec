"""The survey's call list: every torch GEMM op, layout, format and shape class the library replays.

Pure Python (no torch): the device script (``survey_ops.py``) runs these calls and the CPU
analysis (``replay_survey.py``) rebuilds the same operands from the same seeds.

Each call is a dict: ``op`` (matmul, mm_out, linear, addmm, bmm, baddbmm, matmul_bcast,
scaled_mm), ``fmt`` (A's format; ``b_fmt`` for mixed FP8), ``prec`` (FP32: "highest" or
"high"), ``M, N, K`` (``b`` for batched ops), ``a_t`` / ``b_t`` (the operand is a transposed
view of a contiguous tensor), ``bias``, ``beta``, ``alpha``, ``c_1d`` (addmm's C a row vector),
``out_dtype``, ``scales`` and ``fast_accum`` (scaled_mm), and the seeds.

    >>> calls = survey_calls()
    >>> len(calls) >= 1000, calls[0]["id"]
    (True, 0)
"""

from __future__ import annotations

import itertools
import zlib
from functools import lru_cache, partial

from call_ids import adder as _adder  # noqa: F401  (train_calls reads it here)
from model_lists import attention, held_out_numbers, models, tokens

HIDDEN = (768, 1024, 2048, 4096, 5120, 8192)
FFN = (3072, 11008, 14336, 28672)
TOKENS_DECODE = (1, 2, 3, 4, 5, 8, 12, 16, 24, 32)
TOKENS_PREFILL = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
MAX_MACS = 2 ** 41  # per call (about 5 ms of BF16 on an H100)
MAX_OPERAND = 2 ** 28  # elements per operand


def _fits(M: int, N: int, K: int, b: int = 1) -> bool:
    return b * M * N * K <= MAX_MACS and b * max(M * K, K * N, M * N) <= MAX_OPERAND


def _pick(seq, n: int, salt: str):
    """A deterministic, spread-out subset of ``seq`` (n items)."""
    seq = list(seq)
    if len(seq) <= n:
        return seq
    order = sorted(seq, key=lambda x: zlib.crc32(f"{salt}{x}".encode()))
    return order[:n]


def _llm_shapes(salt: str, n: int):
    """(M, N, K) of LLM projections: tokens x hidden/FFN/vocab dims, prefill and decode."""
    dims = HIDDEN + FFN
    shapes = [(m, n_, k) for m in TOKENS_DECODE + TOKENS_PREFILL for n_ in dims + (32000, 50257, 128256)
              for k in dims if _fits(m, n_, k)]
    return _pick(shapes, n, salt)


def _grid_shapes():
    """Split-K mid shapes, square-ish sizes, long K, odd sizes, tiny."""
    out = []
    for m in (16, 32, 64, 128, 192, 256, 384, 512, 1024):
        for k in (1024, 4096, 8192, 16384, 65536):
            out.append((m, m, k))
    out += [(256, 8192, 256), (64, 64, 4096), (64, 4096, 64), (8, 8192, 8192), (4096, 64, 4096),
            (4096, 4096, 4096), (8192, 8192, 1024), (16384, 1024, 4096), (16384, 4096, 1024), (1, 4096, 65536),
            (2, 8192, 65536), (32, 1024, 65536), (128, 256, 65536), (1024, 1024, 65536)]
    odd = [(3, 5, 7), (1, 1, 1), (7, 13, 9), (17, 33, 65), (100, 100, 100), (96, 80, 333), (250, 130, 77),
           (1000, 1000, 1000), (513, 257, 129), (33, 4096, 4095), (4095, 33, 4096), (1, 1000, 999), (64, 100, 64),
           (127, 127, 4097), (2047, 2049, 511), (5, 50257, 768), (31, 3, 1024), (8, 8, 8), (16, 24, 40), (12, 20, 36)]
    return [s for s in out if _fits(*s)], odd


def survey_calls() -> list[dict]:
    calls: list[dict] = []

    def add(op: str, fmt: str, M: int, N: int, K: int, **kw) -> None:
        if not _fits(M, N, K, kw.get("b", 1)):
            return
        c = dict(op=op, fmt=fmt, M=M, N=N, K=K, **kw)
        c.setdefault("prec", "highest")
        c["id"] = len(calls)
        h = zlib.crc32(repr(sorted(c.items())).encode()) % 10 ** 6
        c["seed_a"], c["seed_b"], c["seed_c"] = 3 * h + 1, 3 * h + 2, 3 * h + 3
        calls.append(c)

    grid, odd = _grid_shapes()
    for fmt in ("bf16", "fp16"):
        # torch.matmul, the layouts torch passes: A[M,K] @ B[K,N], views of transposed storage
        for M, N, K in _llm_shapes("mm" + fmt, 70) + grid:
            add("matmul", fmt, M, N, K)
        for (M, N, K), (a_t, b_t) in zip(_pick(_llm_shapes("lay" + fmt, 200), 30, "l"),
                                         itertools.cycle([(True, False), (False, True), (True, True)])):
            add("matmul", fmt, M, N, K, a_t=a_t, b_t=b_t)
        for M, N, K in odd:
            add("matmul", fmt, M, N, K)
        # F.linear(x, W, bias): x [M, K], W [N, K]
        for i, (M, N, K) in enumerate(_llm_shapes("lin" + fmt, 70)):
            add("linear", fmt, M, N, K, bias=False)
            add("linear", fmt, M, N, K, bias=True)
        for M in TOKENS_DECODE:
            for N, K in ((4096, 4096), (14336, 4096), (4096, 14336), (1024, 8192)):
                add("linear", fmt, M, N, K, bias=M % 2 == 0)
        for M, N, K in odd[:12]:
            add("linear", fmt, M, N, K, bias=True)
        # addmm with alpha/beta (full C and a broadcast row C as nn.Linear's bias)
        for (M, N, K), (beta, alpha) in zip(_llm_shapes("addmm" + fmt, 24) + grid[::6],
                                            itertools.cycle([(1, 1), (0.5, 2), (0, 1), (1, 0.5), (2, 1), (0.25, 1)])):
            add("addmm", fmt, M, N, K, beta=beta, alpha=alpha, c_1d=False)
            add("addmm", fmt, M, N, K, beta=beta, alpha=alpha, c_1d=True)
        # bmm / baddbmm: attention shapes [b, S, d] @ [b, d, S] and [b, S, S] @ [b, S, d]
        for b, M, N, K in ((32, 128, 128, 64), (16, 512, 512, 128), (8, 1024, 128, 1024), (64, 1, 128, 128),
                           (64, 1, 2048, 128), (32, 1, 128, 2048), (4, 2048, 2048, 128), (12, 197, 197, 64),
                           (2, 77, 77, 64), (40, 16, 16, 4096), (3, 5, 7, 9), (8, 64, 64, 8192)):
            add("bmm", fmt, M, N, K, b=b)
            add("baddbmm", fmt, M, N, K, b=b, beta=1, alpha=0.125)
        # broadcast matmul [b, M, K] @ [K, N]
        for b, M, N, K in ((4, 128, 4096, 4096), (2, 1, 11008, 4096), (8, 16, 1024, 1024), (3, 100, 768, 768),
                           (2, 2048, 1024, 2048)):
            add("matmul_bcast", fmt, M, N, K, b=b)
    # torch.mm(A, B, out_dtype=float32)
    for fmt in ("bf16", "fp16"):
        for M, N, K in _llm_shapes("mmo" + fmt, 24) + grid[::3] + odd[:6]:
            add("mm_out", fmt, M, N, K, out_dtype="fp32")
    # FP32: TF32 allowed ("high") and pure FP32 ("highest", torch's default)
    for prec in ("high", "highest"):
        for M, N, K in _llm_shapes("f32" + prec, 30) + grid[::2] + odd:
            add("matmul", "fp32", M, N, K, prec=prec)
        for M, N, K in _llm_shapes("f32lin" + prec, 10):
            add("linear", "fp32", M, N, K, prec=prec, bias=True)
        for b, M, N, K in ((32, 128, 128, 64), (8, 64, 1, 64), (16, 1, 64, 64), (4, 512, 512, 64),
                           (32, 2048, 64, 1)):  # Llama's rotary embedding: [b, d/2, 1] @ [b, 1, S]
            add("bmm", "fp32", M, N, K, b=b, prec=prec)
        for M, N, K in ((128, 128, 256), (1000, 1000, 1000), (64, 4096, 4096)):
            add("addmm", "fp32", M, N, K, prec=prec, beta=1, alpha=1, c_1d=True)
    # torch._scaled_mm: FP8, K and N multiples of 16
    fp8_shapes = [(16, 16, 16384), (32, 32, 4096), (64, 64, 8192), (128, 128, 2048), (256, 256, 512),
                  (256, 256, 4096), (512, 512, 1024), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
                  (16, 4096, 4096), (32, 14336, 4096), (2048, 4096, 14336), (8192, 8192, 1024), (128, 1024, 65536),
                  (16384, 4096, 4096), (48, 112, 96), (1024, 256, 16384), (64, 8192, 8192), (4096, 1024, 28672)]
    for M, N, K in fp8_shapes:
        for fast in (True, False):
            for out in ("bf16", "fp32"):
                add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="tensor", fast_accum=fast, out_dtype=out)
            add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="rowwise", fast_accum=fast, out_dtype="bf16")
        add("scaled_mm", "e4m3", M, N, K, b_fmt="e5m2", scales="tensor", fast_accum=M % 3 == 0, out_dtype="bf16")
        add("scaled_mm", "e5m2", M, N, K, b_fmt="e4m3", scales="tensor", fast_accum=M % 3 != 0, out_dtype="bf16")
        if M % 128 == 0 or True:
            add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="blockwise", fast_accum=False, out_dtype="bf16")
    return calls


if __name__ == "__main__":
    from collections import Counter

    cs = survey_calls()
    print(len(cs), Counter(c["op"] + ":" + c["fmt"] for c in cs))


# --- a held-out check: realistic model shapes the table was not fitted on -----------------------------
MODELS = models("holdout")  # hidden, FFN, vocab, kv-projection width (lab/data/models.json)



def holdout_calls(n_per_kind: int = 24) -> list[dict]:
    """Realistic calls (model projections x token counts) for an honest estimate on unseen shapes.

    >>> len(holdout_calls()) > 100
    True
    """
    shapes = []
    for name, (h, ffn, vocab, kv) in MODELS.items():
        for n_, k in ((kv, h), (h, h), (ffn, h), (h, ffn), (2 * ffn, h), (vocab, h)):
            for m in (1, 2, 4, 7, 8, 16, 20, 32, 48, 64, 96, 128, 200, 256, 384, 512, 1000, 1024, 2048, 3072, 4096,
                      8192, 16384):
                if _fits(m, n_, k):
                    shapes.append((m, n_, k))
    seen = {(c["M"], c["N"], c["K"]) for c in survey_calls()}
    shapes = [s for s in shapes if s not in seen]
    calls: list[dict] = []
    add = _adder(calls, "holdout")

    for M, N, K in _pick(shapes, n_per_kind, "h-lin"):
        add("linear", "bf16", M, N, K, bias=True)
    for M, N, K in _pick(shapes, n_per_kind, "h-lin-nb"):
        add("linear", "bf16", M, N, K, bias=False)
    for M, N, K in _pick(shapes, n_per_kind, "h-mm"):
        add("matmul", "bf16", M, N, K)
    for M, N, K in _pick(shapes, n_per_kind // 2, "h-fp16"):
        add("linear", "fp16", M, N, K, bias=M % 2 == 0)
    for M, N, K in _pick(shapes, n_per_kind // 2, "h-mmo"):
        add("mm_out", "bf16", M, N, K, out_dtype="fp32")
    for M, N, K in _pick(shapes, n_per_kind // 2, "h-addmm"):
        add("addmm", "bf16", M, N, K, beta=1, alpha=1, c_1d=True)
    for M, N, K in _pick(shapes, n_per_kind // 2, "h-bcast"):
        if M % 4 == 0:
            add("matmul_bcast", "bf16", M // 4, N, K, b=4)
    for b, M, N, K in ((32, 512, 512, 128), (32, 512, 128, 512), (40, 1, 1024, 128), (40, 1, 128, 1024),
                       (16, 2048, 2048, 64), (64, 77, 77, 64)):
        add("bmm", "bf16", M, N, K, b=b)
    for prec in ("high", "highest"):
        for M, N, K in _pick([s for s in shapes if s[0] * s[1] * s[2] <= 2 ** 36], n_per_kind // 3, "h-f32" + prec):
            add("matmul", "fp32", M, N, K, prec=prec)
    for M, N, K in _pick([s for s in shapes if s[0] % 16 == 0 and s[1] % 16 == 0], n_per_kind, "h-fp8"):
        add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="tensor" if M % 3 else "rowwise",
            fast_accum=M % 2 == 0, out_dtype="bf16")
    return calls


# --- a second held-out set: other models' shapes, for the final accuracy check on unseen calls -----------
MODELS2 = models("holdout2")  # hidden, FFN, vocab, fused-QKV width (q + 2 kv heads), head dim
TOKENS2 = tokens("holdout2")


def holdout2_calls(n_per_kind: int = 22) -> list[dict]:
    """A second held-out set: other models (Mistral, Gemma, Falcon, GPT-J, Llama-3-70B, Qwen2-1.5B, Phi-3)
    at other token counts, no (M, N, K) of the survey or of ``holdout_calls``; the kinds of ``holdout_calls``
    plus FP16 matmul and attention bmm at these head sizes.

    >>> cs = holdout2_calls(); 150 <= len(cs) <= 200, len({c["id"] for c in cs}) == len(cs)
    (True, True)
    """
    shapes = []
    for name, (h, ffn, vocab, qkv, hd) in MODELS2.items():
        for n_, k in ((qkv, h), (h, h), (ffn, h), (h, ffn), (2 * ffn, h), (vocab, h)):
            for m in TOKENS2:
                if _fits(m, n_, k):
                    shapes.append((m, n_, k))
    seen = {(c["M"], c["N"], c["K"]) for c in survey_calls() + holdout_calls()}
    shapes = sorted(set(s for s in shapes if s not in seen))
    calls: list[dict] = []
    add = _adder(calls, "holdout2")

    for M, N, K in _pick(shapes, n_per_kind, "h2-lin"):
        add("linear", "bf16", M, N, K, bias=True)
    for M, N, K in _pick(shapes, n_per_kind, "h2-lin-nb"):
        add("linear", "bf16", M, N, K, bias=False)
    for M, N, K in _pick(shapes, n_per_kind, "h2-mm"):
        add("matmul", "bf16", M, N, K)
    for M, N, K in _pick(shapes, n_per_kind // 2, "h2-fp16"):
        add("linear", "fp16", M, N, K, bias=M % 2 == 0)
    for M, N, K in _pick(shapes, n_per_kind // 3, "h2-mm16"):
        add("matmul", "fp16", M, N, K)
    for M, N, K in _pick(shapes, n_per_kind // 2, "h2-mmo"):
        add("mm_out", "bf16", M, N, K, out_dtype="fp32")
    for M, N, K in _pick(shapes, n_per_kind // 2, "h2-addmm"):
        add("addmm", "bf16", M, N, K, beta=1, alpha=1, c_1d=True)
    for M, N, K in _pick([s for s in shapes if s[0] % 2 == 0], n_per_kind // 2, "h2-bcast"):
        add("matmul_bcast", "bf16", M // 2, N, K, b=2)
    # attention: scores [b*heads, S, d] @ [b*heads, d, S], context [.., S, S] @ [.., S, d]; decode S_q = 1
    for b, M, N, K in ((32, 333, 333, 128), (32, 333, 128, 333), (8, 1500, 1500, 256), (8, 1500, 256, 1500),
                       (71, 1, 2000, 64), (71, 1, 64, 2000), (32, 768, 768, 96), (16, 100, 100, 256)):
        add("bmm", "bf16", M, N, K, b=b)
    for b, M, N, K in ((12, 333, 333, 64), (16, 100, 128, 100)):  # GPT-2 / Bloom style: baddbmm(C, Q, K^T, alpha)
        add("baddbmm", "bf16", M, N, K, b=b, beta=1, alpha=0.125)
    # transposed views (x.t() @ y, x @ W.t()), addmm with alpha / beta
    for (M, N, K), (a_t, b_t) in zip(_pick(shapes, 6, "h2-lay"), itertools.cycle([(True, False), (False, True)])):
        add("matmul", "bf16", M, N, K, a_t=a_t, b_t=b_t)
    for (M, N, K), (beta, alpha) in zip(_pick(shapes, 4, "h2-ab"), ((1, 1), (0.5, 1), (1, 0.5), (0, 2))):
        add("addmm", "bf16", M, N, K, beta=beta, alpha=alpha, c_1d=False)
    for prec in ("high", "highest"):
        for M, N, K in _pick([s for s in shapes if s[0] * s[1] * s[2] <= 2 ** 36], n_per_kind // 3, "h2-f32" + prec):
            add("matmul", "fp32", M, N, K, prec=prec)
    for M, N, K in _pick([s for s in shapes if s[0] % 16 == 0 and s[1] % 16 == 0], n_per_kind, "h2-fp8"):
        add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="tensor" if M % 3 else "rowwise",
            fast_accum=M % 2 == 0, out_dtype="bf16")
    for M, N, K in _pick([s for s in shapes if s[0] % 16 == 0 and s[1] % 16 == 0], 4, "h2-fp8x"):
        add("scaled_mm", "e4m3", M, N, K, b_fmt="e5m2", scales="tensor", fast_accum=False, out_dtype="bf16")
        add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="tensor", fast_accum=True, out_dtype="fp32")
    return calls


# --- held-out sets 3 onward: each drawn from models in no earlier list (lab/data/models.json says when), with
# its token counts and attention shapes ------------------------------------------------------------


def _shapes_before(n: int) -> set[tuple[int, int, int]]:
    """(M, N, K) of the op survey and held-out sets 1 .. n - 1: what held-out set n leaves out."""
    earlier = [survey_calls, holdout_calls, holdout2_calls] + [partial(held_out_calls, i) for i in range(3, n)]
    return {(c["M"], c["N"], c["K"]) for f in earlier for c in f()}


def _held_out_set(models: dict, tokens: tuple, tag: str, seen: set, n_per_kind: int) -> list[dict]:
    """Realistic calls of ``models`` x ``tokens`` (shapes in ``seen`` left out), the kinds of ``holdout2_calls``."""
    shapes = []
    for h, ffn, vocab, qkv, _ in models.values():
        for n_, k in ((qkv, h), (h, h), (ffn, h), (h, ffn), (2 * ffn, h), (vocab, h)):
            shapes += [(m, n_, k) for m in tokens if _fits(m, n_, k)]
    shapes = sorted(set(s for s in shapes if s not in seen))
    calls: list[dict] = []
    add = _adder(calls, f"holdout{tag}")
    a16 = [s for s in shapes if s[0] % 16 == 0 and s[1] % 16 == 0]
    for M, N, K in _pick(shapes, n_per_kind, f"h{tag}-lin"):
        add("linear", "bf16", M, N, K, bias=True)
    for M, N, K in _pick(shapes, n_per_kind, f"h{tag}-lin-nb"):
        add("linear", "bf16", M, N, K, bias=False)
    for M, N, K in _pick(shapes, n_per_kind, f"h{tag}-mm"):
        add("matmul", "bf16", M, N, K)
    for M, N, K in _pick(shapes, n_per_kind // 2, f"h{tag}-fp16"):
        add("linear", "fp16", M, N, K, bias=M % 2 == 0)
    for M, N, K in _pick(shapes, n_per_kind // 3, f"h{tag}-mm16"):
        add("matmul", "fp16", M, N, K)
    for M, N, K in _pick(shapes, n_per_kind // 2, f"h{tag}-mmo"):
        add("mm_out", "bf16", M, N, K, out_dtype="fp32")
    for M, N, K in _pick(shapes, n_per_kind // 2, f"h{tag}-addmm"):
        add("addmm", "bf16", M, N, K, beta=1, alpha=1, c_1d=True)
    for M, N, K in _pick([s for s in shapes if s[0] % 2 == 0], n_per_kind // 3, f"h{tag}-bcast"):
        add("matmul_bcast", "bf16", M // 2, N, K, b=2)
    bmm, baddbmm = attention(f"holdout{tag}")
    for b, M, N, K in bmm:
        add("bmm", "bf16", M, N, K, b=b)
    for b, M, N, K in baddbmm:
        add("baddbmm", "bf16", M, N, K, b=b, beta=1, alpha=0.125)
    for (M, N, K), (a_t, b_t) in zip(_pick(shapes, 6, f"h{tag}-lay"), itertools.cycle([(True, False), (False, True)])):
        add("matmul", "bf16", M, N, K, a_t=a_t, b_t=b_t)
    for (M, N, K), (beta, alpha) in zip(_pick(shapes, 4, f"h{tag}-ab"), ((1, 1), (0.5, 1), (1, 0.5), (0, 2))):
        add("addmm", "bf16", M, N, K, beta=beta, alpha=alpha, c_1d=False)
    for prec in ("high", "highest"):
        for M, N, K in _pick([s for s in shapes if s[0] * s[1] * s[2] <= 2 ** 36], n_per_kind // 3, f"h{tag}-f32" + prec):
            add("matmul", "fp32", M, N, K, prec=prec)
    for M, N, K in _pick(a16, n_per_kind, f"h{tag}-fp8"):
        add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="tensor" if M % 3 else "rowwise",
            fast_accum=M % 2 == 0, out_dtype="bf16")
    for M, N, K in _pick(a16, 4, f"h{tag}-fp8x"):
        add("scaled_mm", "e4m3", M, N, K, b_fmt="e5m2", scales="tensor", fast_accum=False, out_dtype="bf16")
        add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="tensor", fast_accum=True, out_dtype="fp32")
    return calls


LATER_SETS = {n: (models(f"holdout{n}"), tokens(f"holdout{n}")) for n in held_out_numbers()}  # held-out sets 3 on


def held_out_calls(n: int, n_per_kind: int = 28) -> list[dict]:
    """Held-out set ``n`` (3..13): realistic calls of list ``holdout{n}``'s models x token counts (each drawn when
    its note in lab/data/models.json says, none of its models in an earlier list), the shapes of the op survey and the earlier sets left out, the
    kinds of ``holdout2_calls``.

    >>> all(200 <= len(cs) <= 300 and len({c["id"] for c in cs}) == len(cs)
    ...     for cs in (held_out_calls(n) for n in LATER_SETS))
    True
    """
    return [dict(c) for c in _held_out_cached(n, n_per_kind)]


@lru_cache(maxsize=None)
def _held_out_cached(n: int, n_per_kind: int) -> tuple[dict, ...]:
    """Each set once: set n leaves out the shapes of every earlier set, so uncached the sets would be drawn 2^n
    times over."""
    models, tokens = LATER_SETS[n]
    return tuple(_held_out_set(models, tokens, str(n), _shapes_before(n), n_per_kind))


def longk_calls() -> list[dict]:
    """Issue 23's #15 leftovers, surveyed (2026-11-27, second session): FP8 ``_scaled_mm`` and TF32 matmuls at long
    K (12,288 to 32,768) with small M and N -- where split-K counts were k-NN guesses, flagged -- and FP32 matmuls
    at tiny shapes (gemmSN / SIMT kernels).  A survey set: it feeds the tables.

    >>> len(longk_calls())
    209
    """
    calls: list[dict] = []
    add = _adder(calls, "longk")
    small = ((16, 16), (16, 64), (64, 16), (32, 32), (64, 64), (64, 128), (128, 64), (128, 128), (256, 64))
    for M, N in small:
        for K in (12288, 16384, 32768):
            for fast in (True, False):
                for out in ("bf16", "fp32"):
                    add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="tensor", fast_accum=fast, out_dtype=out)
                add("scaled_mm", "e4m3", M, N, K, b_fmt="e4m3", scales="rowwise", fast_accum=fast, out_dtype="bf16")
            add("matmul", "fp32", M, N, K, prec="high")
    for M in (1, 2, 3, 4, 7):
        for N, K in ((7, 100), (100, 7), (7, 7), (100, 100)):
            add("matmul", "fp32", M, N, K, prec="highest")
    return calls


def _narrow_calls(models: dict, tokens: tuple, tag: str, seen: set) -> list[tuple]:
    """Narrow outputs over long K, the #15 leftovers' kinds as models run them: LoRA adapters (x @ A, rank 8..128,
    K the hidden or FFN width), MoE routers (8..128 experts) and small classifier heads at tiny shapes, as
    (op, fmt, M, N, K, options)."""
    lora = sorted({(m, r, k) for h, ffn, _, _, _ in models.values() for r in (8, 16, 32, 64, 128) for k in (h, ffn)
                   for m in tokens if m <= 4096} - seen)
    router = sorted({(m, e, h) for h, _, _, _, _ in models.values() for e in (8, 16, 64, 128) for m in tokens
                     if m <= 4096} - seen)
    both = sorted(set(lora) | set(router))
    a16 = [s for s in both if s[1] % 16 == 0 and s[2] % 16 == 0]
    out = []
    fp8 = [dict(b_fmt="e4m3", scales="tensor", fast_accum=True, out_dtype="bf16"),
           dict(b_fmt="e4m3", scales="rowwise", fast_accum=True, out_dtype="bf16"),
           dict(b_fmt="e5m2", scales="tensor", fast_accum=True, out_dtype="bf16"),
           dict(b_fmt="e4m3", scales="tensor", fast_accum=True, out_dtype="fp32"),
           dict(b_fmt="e4m3", scales="tensor", fast_accum=False, out_dtype="bf16")]
    for i, (M, N, K) in enumerate(_pick(a16, 10, f"h{tag}-narrow-fp8")):
        out.append(("scaled_mm", "e4m3", M, N, K, fp8[i % len(fp8)]))
    for M, N, K in _pick(both, 4, f"h{tag}-narrow-tf32"):
        out.append(("matmul", "fp32", M, N, K, dict(prec="high")))
    for M, N, K in _pick(router, 3, f"h{tag}-narrow-router"):
        out.append(("linear", "fp32", M, N, K, dict(prec="highest", bias=False)))
    for M, N, K in _pick(lora, 5, f"h{tag}-narrow-lora"):
        out.append(("linear", "bf16", M, N, K, dict(bias=False)))
    heads = [(m, n, k) for m in (1, 2, 3, 4, 6, 8) for n in (2, 3, 5, 10, 100) for k in (5, 7, 16, 64, 100)]
    for M, N, K in _pick(heads, 4, f"h{tag}-narrow-head"):
        out.append(("matmul", "fp32", M, N, K, dict(prec="highest")))
    return out


def held_out_narrow_calls(n: int) -> list[dict]:
    """Held-out set ``n`` (12 onward): ``held_out_calls(n)`` and ``_narrow_calls`` of its models (26 calls) -- set 12
    for the first replay after the dense long-K survey, set 13 after the dense narrow-output one.

    >>> all(230 <= len(cs) <= 300 and len({c["id"] for c in cs}) == len(cs)
    ...     for cs in (held_out_narrow_calls(12), held_out_narrow_calls(13)))
    True
    """
    calls = held_out_calls(n)
    add = _adder(calls, f"holdout{n}-narrow")
    models, tokens = LATER_SETS[n]
    for op, fmt, M, N, K, kw in _narrow_calls(models, tokens, str(n), _shapes_before(n + 1)):
        add(op, fmt, M, N, K, **kw)
    return calls


def longk2_calls() -> list[dict]:
    """Bits for the dense long-K survey's kinds (``dense_calls.dense_longk_calls``): every FP8 variant at five
    narrow long-K shapes where cuBLAS splits K, and the TF32 / FP32 / BF16 / FP16 kinds at six.  A survey set: it
    verifies the structures the launches of that survey are planned with.

    >>> len(longk2_calls())
    168
    """
    from dense_calls import LONGK_OTHER_KINDS, longk_fp8_kinds

    calls: list[dict] = []
    add = _adder(calls, "longk2")
    fp8_shapes = ((64, 64, 16384), (16, 128, 12288), (128, 32, 28672), (48, 96, 20480), (256, 16, 65536))
    other_shapes = fp8_shapes + ((5, 8, 14336),)
    for op, fmt, kw in longk_fp8_kinds():
        for M, N, K in fp8_shapes:
            add(op, fmt, M, N, K, **kw)
    for op, fmt, kw in LONGK_OTHER_KINDS:
        for M, N, K in other_shapes:
            add(op, fmt, M, N, K, **dict(kw))
    return calls


def narrow_bits_calls() -> list[dict]:
    """Bits for the dense narrow-output and tiny FP32 surveys: FP32 matmuls at M = 1 (gemvx) and K from 8 to 512,
    where the lanes' run length was a guess (``library.simt``), F.linear at M = 1, M = 2..8 (gemmSN) at tiny shapes,
    and a seeded sample of ``dense_narrow`` and ``dense_tiny32`` calls.  A survey set: it feeds the tables.

    >>> len(narrow_bits_calls())
    179
    """
    import numpy as np

    from dense_calls import dense_narrow_calls, dense_tiny32_calls

    calls: list[dict] = []
    add = _adder(calls, "narrow-bits")
    for N in (7, 100, 1000):
        for K in (8, 12, 16, 24, 31, 32, 33, 48, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257, 384, 511, 512):
            add("matmul", "fp32", 1, N, K, prec="highest")
    for N in (100, 1000):
        for K in (8, 16, 33, 64, 100, 256):
            add("linear", "fp32", 1, N, K, prec="highest", bias=False)
    for M in (2, 3, 5, 8):
        for N, K in ((5, 7), (100, 16), (5, 100), (100, 100)):
            add("matmul", "fp32", M, N, K, prec="highest")
    rng = np.random.default_rng(20261127)
    for ds, n in ((dense_narrow_calls(), 60), (dense_tiny32_calls(), 25)):
        _add_sample(add, ds, n, rng)
    return calls


def _add_sample(add, ds, n: int, rng) -> None:
    """``n`` calls of dense set ``ds`` drawn by ``rng``, in the set's order, added with fresh operand seeds."""
    for i in sorted(rng.choice(len(ds), n, replace=False).tolist()):
        c = ds.calls(i, i + 1)[0]
        kw = {k: v for k, v in c.items() if k not in ("op", "fmt", "M", "N", "K", "id", "seed_a", "seed_b", "seed_c")}
        add(c["op"], c["fmt"], c["M"], c["N"], c["K"], **kw)


def wide_bits_calls() -> list[dict]:
    """Bits for ``dense_calls.dense_wide_calls``: a seeded sample of 60 of its calls (TF32 / FP32 and FP8 split-K at
    hidden-size outputs over long K).  A survey set: it checks the structures its launches are planned with.

    >>> len(wide_bits_calls())
    60
    """
    import numpy as np

    from dense_calls import dense_wide_calls

    calls: list[dict] = []
    add = _adder(calls, "wide-bits")
    _add_sample(add, dense_wide_calls(), 60, np.random.default_rng(20261128))
    return calls


HELD_OUT = {"holdout": holdout_calls, "holdout2": holdout2_calls,
            **{f"holdout{n}": partial(held_out_calls if n < 12 else held_out_narrow_calls, n) for n in LATER_SETS}}
SURVEY_SETS = {"survey": survey_calls, "longk": longk_calls, "longk2": longk2_calls, "narrow_bits": narrow_bits_calls,
               "wide_bits": wide_bits_calls, **HELD_OUT}  # the surveys and every held-out set
