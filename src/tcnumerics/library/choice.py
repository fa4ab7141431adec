"""Which kernel and split-K cuBLAS chooses for a call where its launch was not measured: the rules, per GPU model.

``selection`` asks, in order: the measured launch (``launches.measured_launch``) and the bit table
(``measured.entry``); then, for a call whose own (N, K) was not measured at token counts on both sides of its M
with agreeing launches (``bracketed``), the k-nearest-neighbour predicted launch (``unseen.predict_launch``);
then the bracketing launches' split (``launches.predicted_nvjet_split``) or the fitted split rule
(``predicted_split``: ``split_rule.py``); inside the measured no-split frontier (``no_split_verified``) the plain
unsplit kernel.  Every rule reads the tables of the models ``gpus.coverage`` lists for the call: a choice is a
statement about one GPU model.

    >>> from tcnumerics.library.calls import Call
    >>> predicted_split(Call("linear", "bf16", "bf16", 8, 1024, 14336, b_t=True))
    8
    >>> op_class(Call("matmul", "fp32", "fp32", 8, 8, 8, prec="high"))
    'tf32'
"""

from __future__ import annotations

import math
import re

from . import launch_frontier, launches, measured, split_rule
from .calls import Call, TableKey

SHORT_K = 2561  # below this K every measured aligned BF16/FP16/FP8 call ran the plain nvjet kernel unsplit (bit captures:
# 344 of 344 below 3072; kernel surveys: every launch the frontier models up to K = 2560, but 531 at K = 2816 split)
FRONTIER_REASON = (
    "predicted, not measured: the call lies inside the measured no-split frontier, but cuBLAS's kernel choice is not "
    "monotone in the shape there (H100 holdout2: 2 of 181 calls at K = 3072 ran split-K inside it; the kernel "
    "survey: 531 launches at K = 2816; FP32/TF32 run CUTLASS, gemmSN or gemv kernels inside it), so outside measured "
    f"call kinds only BF16/FP16/FP8 calls with K < {SHORT_K} are modelled")


def op_class(c: Call) -> str:
    """The frontier's class of a call: fp8, fp32, tf32 or half (BF16/FP16)."""
    if c.op == "scaled_mm":
        return "fp8"
    if c.fmt == "fp32":
        return "fp32" if c.prec == "highest" else "tf32"
    return "half"


def no_split_verified(c: Call) -> bool:
    """Inside the measured frontier of the class's plain (unsplit) family: some measured call with no more
    output tiles and at least as long a K ran it bit-exactly, and no measured call with at least as many
    tiles and no longer a K ran anything else (split-K, stream-K, another kernel)."""
    fr = measured.frontier(c, op_class(c))
    t = math.ceil(c.M / 128) * math.ceil(c.N / 128) * c.b
    dominated_by_plain = any(t2 <= t and k2 >= c.K for t2, k2 in fr["plain"])
    near_other = any(t2 >= t and k2 <= c.K for t2, k2 in fr["other"])
    if launch_frontier.applies(c):  # a model without bit captures: its own launches draw its frontier too
        own = launch_frontier.kind_frontier(c.gpu, c.kind())
        if own is not None:
            dominated_by_plain = dominated_by_plain or own.dominated(t, c.K)
            near_other = near_other or own.near_other(t, c.K)
    return dominated_by_plain and not near_other


def frontier_modelled(c: Call) -> bool:
    """The frontier's unsplit plain kernel is a modelled choice here (BF16/FP16/FP8, K < ``SHORT_K``)."""
    return op_class(c) in ("half", "fp8") and c.K < SHORT_K and no_split_verified(c)


def predicted_split(c: Call, tile: int = 64) -> int:
    """cuBLAS's split-K slice count, as fitted (a prediction: the heuristic's exact form is unknown; split_rule.py)."""
    return split_rule.predicted_split(c, measured.calls_for(c), no_split_verified=no_split_verified(c))


def bracketed(c: Call) -> bool:
    """The same N, K measured at token counts on both sides of M whose launches agree (nvjet: on the split): the
    bracketing rules decide there; one-sided or disagreeing brackets leave the call to the k-NN prediction."""
    ms = launches.measured_token_counts(c, same_alignment=True)
    if not ms or not ms[0] < c.M < ms[-1]:
        return False
    if c.fmt == "fp32":
        return True
    S, how = launches.predicted_nvjet_split(c)
    return S is not None and "disagree" not in how


FFMA_OR_CUTLASS = re.compile(r"(?:s1688gemm|sgemm)_(\d+)x(\d+)_(\d+)x\d+|tilesize(\d+)x(\d+)x(\d+)")


def fp32_nearest_split_family(c: Call) -> dict | None:
    """The verified measured FP32/TF32 call (same precision, op, batch, layout) nearest in log2 (M, N, K)
    that ran a SIMT sgemm, sm80_xmma FFMA or CUTLASS s1688 kernel."""
    best, best_d = None, None
    for key, e in measured.calls_for(c).items():
        k = TableKey.parse(key)
        if (k.fmt != "fp32" or k.prec != c.prec or k.op != c.op or k.b != c.b or not e.get("verified")
                or (k.a_t, k.b_t) != (c.a_t, c.b_t) or not FFMA_OR_CUTLASS.search(e.get("kernel", ""))):
            continue
        d = sum(abs(math.log2(x) - math.log2(max(y, 1))) for x, y in zip((k.M, k.N, k.K), (c.M, c.N, c.K)))
        if best_d is None or d < best_d:
            best, best_d = e, d
    return best
