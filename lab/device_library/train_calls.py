"""Training-step GEMMs of published models, as autograd issues them, for the per-GPU launch surveys.

An ``nn.Linear(K_in -> N_out)`` over T tokens (x [T, K_in], W [N_out, K_in], torch's mm_mat1/mm_mat2_backward for a
weight passed transposed) makes three GEMMs per training step, each a library call kind:

============  ==========================  =============================  ================================
direction     torch                       library call (M x N x K)       split-K lives where
============  ==========================  =============================  ================================
forward       F.linear(x, W[, bias])      linear, W transposed: T x N_out x K_in   long K_in (down projection)
input grad    grad_y @ W                  matmul NN: T x K_in x N_out     K = N_out: the FFN, the vocabulary
weight grad   grad_y.t() @ x              matmul, A transposed: N_out x K_in x T   K = tokens
============  ==========================  =============================  ================================

``train_check.py`` checks on the device that autograd launches exactly the kernels of these calls.  The lists are
arrays (``dense_calls.DenseSet``) for ``graph_survey.py`` (CUDA-graph capture: ~17,000 calls a second in 14
processes), in priority order -- a survey cut short by its deadline keeps the first sets:

* ``train_splitk``: BF16/FP16 calls where split-K lives (K >= 2,048 and at most two waves of 128 x 128 output tiles);
* ``train_rest``: the other BF16/FP16 training calls, and TF32 ("high") ones at the coarser token ladder;
* ``h100_counterparts``: a sample of the H100 launch table's own dense sets (every call kind), so that on another
  GPU model its agreement with the H100's table is measured on every kind, not only the training ones.

``train_bits_calls()`` is a bit capture (``survey_ops.py --set train_bits``): the issue's H200 silent misses and a
sample of ``train_splitk``, with index-hashed operands, so two GPU models' bits can be compared call by call.

    >>> ds = TRAIN_SETS["train_splitk"](); len(ds) > 100_000, ds.calls(0, 1)[0]["id"]
    (True, 0)
    >>> fwd, dgrad, wgrad = step_calls(4096, 14336, 256)   # a down projection at 256 tokens
    >>> [(c["op"], c["M"], c["N"], c["K"], bool(c.get("a_t"))) for c in (fwd, dgrad, wgrad)]
    [('linear', 256, 4096, 14336, False), ('matmul', 256, 14336, 4096, False), ('matmul', 4096, 14336, 256, True)]
"""

from __future__ import annotations

import zlib
from functools import lru_cache

import numpy as np

import survey_calls
from dense_calls import DENSE_SETS, M_COARSE, M_FULL, MAX_OPERAND, DenseSet, all_models
from kernel_calls import DENSE_MODELS, MODELS3_SURVEY, MORE_MODELS

# tcnumerics.library.launches' packing (N, K < 2^19, M < 2^15, batch < 2^10): calls beyond it cannot be stored in a
# launch table, so they are not surveyed (the device needs no tcnumerics; tests/test_train_calls.py checks the bits)
PACK_BITS = dict(M=15, N=19, K=19, b=10)
TOKENS = M_FULL  # 1..256 each, every 8 to 4,096, every 64 to 16,384 (928)
TOKENS_COARSE = M_COARSE  # 256 of them: TF32
SPLIT_MIN_K = 2048  # no launch in the H100 table split below K = 2,048 ... (docs/gemm.md: no split below 44 K-tiles)
SPLIT_MAX_TILES = 264  # ... or above two waves of 132 SMs in 128 x 128 output tiles
HALF = ("bf16", "fp16")


LAST_SURVEYED_SET = 11  # held-out sets drawn later (12 onward) stay out of the training sets: they test them


def published_models() -> dict[str, tuple[int, int, int, int]]:
    """Every published configuration the surveys and held-out sets name: model -> (hidden, FFN, vocabulary, QKV)."""
    out: dict[str, tuple[int, int, int, int]] = {}
    tables = [survey_calls.MODELS, survey_calls.MODELS2, DENSE_MODELS, MORE_MODELS, MODELS3_SURVEY, all_models()]
    tables += [survey_calls.LATER_SETS[n][0] for n in sorted(survey_calls.LATER_SETS) if n <= LAST_SURVEYED_SET]
    for t in tables:
        for name, v in t.items():
            out.setdefault(name, tuple(int(x) for x in v[:4]))
    return out


def projections(models: dict) -> list[tuple[int, int]]:
    """(N_out, K_in) of every projection: fused QKV, attention out, FFN up, gate+up, down, LM head."""
    nk = set()
    for h, ffn, vocab, qkv in models.values():
        nk |= {(qkv, h), (h, h), (ffn, h), (2 * ffn, h), (h, ffn), (vocab, h)}
    return sorted(nk)


def step_shapes(n_out: int, k_in: int, tokens: int) -> dict[str, tuple[int, int, int]]:
    """(M, N, K) of a projection's three training GEMMs."""
    return {"forward": (tokens, n_out, k_in), "input_grad": (tokens, k_in, n_out), "weight_grad": (n_out, k_in, tokens)}


def step_calls(n_out: int, k_in: int, tokens: int, fmt: str = "bf16", bias: bool = False) -> list[dict]:
    """The three training GEMMs of one projection as survey call dicts (``survey_ops.build`` runs them)."""
    s = step_shapes(n_out, k_in, tokens)
    base = dict(fmt=fmt, prec="high" if fmt == "fp32" else "highest", seed_a=0, seed_b=0, seed_c=0)
    fwd = dict(base, op="linear", M=s["forward"][0], N=s["forward"][1], K=s["forward"][2], bias=bias)
    dgrad = dict(base, op="matmul", M=s["input_grad"][0], N=s["input_grad"][1], K=s["input_grad"][2])
    wgrad = dict(base, op="matmul", M=s["weight_grad"][0], N=s["weight_grad"][1], K=s["weight_grad"][2], a_t=True,
                 b_t=False)
    return [fwd, dgrad, wgrad]


def storable(M, N, K, b=1):
    """The shape fits a launch table's packing and the surveys' operand limit (numpy-friendly)."""
    M, N, K, b = (np.asarray(x, np.int64) for x in (M, N, K, b))
    fits = (M < 1 << PACK_BITS["M"]) & (N < 1 << PACK_BITS["N"]) & (K < 1 << PACK_BITS["K"]) & (b < 1 << PACK_BITS["b"])
    return fits & (b * np.maximum(np.maximum(M * K, K * N), M * N) <= MAX_OPERAND)


def split_prone(M, N, K):
    """Where split-K lives: a long K over a grid of at most two waves of 128 x 128 tiles (numpy-friendly)."""
    M, N, K = (np.asarray(x, np.int64) for x in (M, N, K))
    return (K >= SPLIT_MIN_K) & (-(-M // 128) * -(-N // 128) <= SPLIT_MAX_TILES)


def _kinds(fmt: str) -> list[tuple[str, str, dict]]:
    """The four call kinds of a training step in ``fmt`` (forward without and with bias, input and weight grads)."""
    extra = dict(prec="high") if fmt == "fp32" else {}
    return [("linear", fmt, dict(extra, bias=False)), ("linear", fmt, dict(extra, bias=True)), ("matmul", fmt, extra),
            ("matmul", fmt, dict(extra, a_t=True, b_t=False))]


def _dedupe(rows: np.ndarray) -> np.ndarray:
    """The distinct rows, sorted (kind, b, M, N, K)."""
    rows = rows[np.lexsort(rows.T[::-1])]
    keep = np.r_[True, np.any(rows[1:] != rows[:-1], axis=1)]
    return rows[keep]


@lru_cache(maxsize=4)
def _step_rows(fmts: tuple[str, ...], tokens: tuple[int, ...]) -> tuple[list, np.ndarray]:
    """(kinds, rows (kind, b, M, N, K)) of every projection's training GEMMs at ``tokens``, for each format (cached:
    do not modify the rows)."""
    nk = np.array(projections(published_models()), np.int64)
    T = np.array(tokens, np.int64)
    n_out, k_in, t = np.repeat(nk[:, 0], len(T)), np.repeat(nk[:, 1], len(T)), np.tile(T, len(nk))
    kinds, rows = [], []
    for fmt in fmts:
        first = len(kinds)
        kinds += _kinds(fmt)
        for j, (M, N, K) in enumerate(((t, n_out, k_in), (t, n_out, k_in), (t, k_in, n_out), (n_out, k_in, t))):
            ok = storable(M, N, K)
            rows.append(np.column_stack([np.full(int(ok.sum()), first + j), np.ones(int(ok.sum()), np.int64),
                                         M[ok], N[ok], K[ok]]))
    return kinds, _dedupe(np.concatenate(rows))


def train_splitk_calls() -> DenseSet:
    """BF16/FP16 training GEMMs where split-K lives, at 928 token counts."""
    kinds, rows = _step_rows(HALF, TOKENS)
    return DenseSet(kinds, rows[split_prone(rows[:, 2], rows[:, 3], rows[:, 4])], "train-splitk")


def train_rest_calls() -> DenseSet:
    """The other BF16/FP16 training GEMMs (928 token counts), and TF32 ones (256 token counts)."""
    kinds, rows = _step_rows(HALF, TOKENS)
    rest = rows[~split_prone(rows[:, 2], rows[:, 3], rows[:, 4])]
    k32, r32 = _step_rows(("fp32",), TOKENS_COARSE)
    r32 = r32 + np.array([len(kinds), 0, 0, 0, 0])
    return DenseSet(kinds + k32, np.concatenate([rest, r32]), "train-rest")


COUNTERPART_STEPS = {"dense_models": 8, "dense_models_more": 16, "dense_grid": 32, "dense_grid_more": 32,
                     "dense_attention": 8, "dense_grid_extra": 32, "dense_misaligned": 16}


def h100_counterpart_calls(steps: dict[str, int] = COUNTERPART_STEPS) -> DenseSet:
    """Every ``step``-th call of the H100 table's dense sets (their rows are shuffled: a random sample), every kind."""
    kinds: list = []
    rows = []
    for name, step in steps.items():
        ds = DENSE_SETS[name]()
        remap = []
        for k in ds.kinds:
            if k not in kinds:
                kinds.append(k)
            remap.append(kinds.index(k))
        r = ds.rows[::step].copy()
        r[:, 0] = np.array(remap)[r[:, 0]]
        rows.append(r)
    return DenseSet(kinds, _dedupe(np.concatenate(rows)), "h100-counterparts")


# Issue 33: a training step's GEMMs on a generic grid, for the flag-precision check (CHECK_SET_3 of
# lab/device_models/check_training.py was drawn before this grid was surveyed; no model is named here).  The kinds
# are the self-check's own: autograd's forward mm (weight transposed), input and weight gradients, attention bmm in
# its three layouts, and the rotary embedding's FP32 bmm (K = 1).
GRID_TOKENS = (128, 256, 512, 1024, 2048, 4096)
GRID_HIDDEN = tuple(range(512, 8193, 128)) + tuple(range(9216, 16385, 1024))  # K_in of most projections
GRID_OUT = tuple(range(64, 4097, 64)) + tuple(range(4224, 32769, 128))  # q / kv / o / FFN widths
GRID_VOCAB = tuple(range(32000, 262145, 256))  # LM heads
GRID_HEADS = tuple(range(1, 129))  # attention batch (heads x batch 1)
GRID_HEAD_DIMS = (64, 80, 96, 112, 120, 128, 160, 192, 256)
GRID_MAX_OPERAND = 2 ** 30  # elements: 2 GiB BF16 (an LM head of vocabulary x hidden); nothing runs
GRID_KINDS = [("matmul", "bf16", dict(a_t=False, b_t=True)), ("matmul", "bf16", {}),
              ("matmul", "bf16", dict(a_t=True, b_t=False)), ("bmm", "bf16", dict(b_t=True)), ("bmm", "bf16", {}),
              ("bmm", "bf16", dict(a_t=True, b_t=False)), ("bmm", "fp32", dict(prec="highest"))]


def _grid_rows(kind: int, M, N, K, b=1, max_operand: int = GRID_MAX_OPERAND) -> np.ndarray:
    M, N, K, b = (a.ravel() for a in np.broadcast_arrays(*(np.asarray(x, np.int64) for x in (M, N, K, b))))
    ok = (b * np.maximum(np.maximum(M * K, K * N), M * N) <= max_operand) & (M < 1 << PACK_BITS["M"]) & \
        (N < 1 << PACK_BITS["N"]) & (K < 1 << PACK_BITS["K"])
    return np.column_stack([np.full(int(ok.sum()), kind), b[ok], M[ok], N[ok], K[ok]])


def _projection_rows(f, h, t, max_operand: int = GRID_MAX_OPERAND) -> list[np.ndarray]:
    """A projection's three training GEMMs, both ways round (out ``f`` x hidden ``h``, and ``h`` x ``f``), at ``t``
    tokens: forward (T x out x in), input gradient (T x in x out), weight gradient (out x in x T)."""
    return [_grid_rows(0, t, f, h, max_operand=max_operand), _grid_rows(0, t, h, f, max_operand=max_operand),
            _grid_rows(1, t, h, f, max_operand=max_operand), _grid_rows(1, t, f, h, max_operand=max_operand),
            _grid_rows(2, f, h, t, max_operand=max_operand), _grid_rows(2, h, f, t, max_operand=max_operand)]


def _head_rows(v, h, t, max_operand: int = GRID_MAX_OPERAND) -> list[np.ndarray]:
    """An LM head's three training GEMMs (vocabulary ``v`` x hidden ``h``) at ``t`` tokens."""
    return [_grid_rows(0, t, v, h, max_operand=max_operand), _grid_rows(1, t, h, v, max_operand=max_operand),
            _grid_rows(2, v, h, t, max_operand=max_operand)]


def train_grid_calls() -> DenseSet:
    """A training step's GEMMs (``GRID_KINDS``) on the grid: projections (out x hidden, both ways) and LM heads
    (vocabulary x hidden) in their three directions, attention bmm (heads x head dim), all at ``GRID_TOKENS``; the
    rotary FP32 bmm (head dim / 2 x tokens, K = 1) at every 4th M to 256 and every 8th token count to 4,096."""
    T = np.array(GRID_TOKENS, np.int64)
    f, h, t = (a.ravel() for a in np.meshgrid(GRID_OUT, GRID_HIDDEN, T, indexing="ij"))
    v, hv, tv = (a.ravel() for a in np.meshgrid(GRID_VOCAB, GRID_HIDDEN, T, indexing="ij"))
    b, d, ta = (a.ravel() for a in np.meshgrid(GRID_HEADS, GRID_HEAD_DIMS, T, indexing="ij"))
    m, tr = (a.ravel() for a in np.meshgrid(np.arange(4, 257, 4), np.arange(8, 4097, 8), indexing="ij"))
    rows = _projection_rows(f, h, t) + _head_rows(v, hv, tv) + [
            _grid_rows(3, ta, ta, d, b), _grid_rows(4, ta, d, ta, b), _grid_rows(5, ta, d, ta, b),
            _grid_rows(5, d, ta, ta, b), _grid_rows(6, m, tr, 1)]
    return DenseSet(GRID_KINDS, _dedupe(np.concatenate(rows)), "train-grid")


# Issue 33, 2026-11-29: what the blind run of CHECK_SET_4 found the grid lacks (docs/gemm.md, "A blind run after the
# fold") -- vocabularies between its 256 steps, hidden sizes between its 128 steps, projection widths beyond 32,768 --
# for the same kinds at the same token counts; the attention and rotary kinds are not extended.
FINE_HIDDEN = tuple(range(576, 8193, 128))  # the odd multiples of 64 between GRID_HIDDEN's (512..8,192)
FINE_VOCAB = tuple(range(32128, 262145, 256))  # the multiples of 128 between GRID_VOCAB's
WIDE_OUT = tuple(range(33024, 65537, 256))  # FFN widths beyond GRID_OUT's 32,768


def train_grid_fine_calls() -> DenseSet:
    """``train_grid_calls``' GEMM kinds at the points between and beyond its grid: projections at the ``FINE_HIDDEN``
    hidden sizes (every ``GRID_OUT`` width) and at the ``WIDE_OUT`` widths (every hidden size), LM heads at the
    ``FINE_VOCAB`` vocabularies (every hidden size) and at every vocabulary with a ``FINE_HIDDEN`` hidden size; all at
    ``GRID_TOKENS`` and ``GRID_MAX_OPERAND``, in the three directions.  No point of ``train_grid_calls`` is repeated."""
    T = np.array(GRID_TOKENS, np.int64)
    hidden = GRID_HIDDEN + FINE_HIDDEN
    vocab = GRID_VOCAB + FINE_VOCAB
    proj = [np.meshgrid(GRID_OUT, FINE_HIDDEN, T, indexing="ij"), np.meshgrid(WIDE_OUT, hidden, T, indexing="ij")]
    head = [np.meshgrid(FINE_VOCAB, GRID_HIDDEN, T, indexing="ij"), np.meshgrid(vocab, FINE_HIDDEN, T, indexing="ij")]
    rows = []
    for f, h, t in ((a.ravel() for a in g) for g in proj):
        rows += _projection_rows(f, h, t)
    for v, h, t in ((a.ravel() for a in g) for g in head):
        rows += _head_rows(v, h, t)
    fine = _dedupe(np.concatenate(rows))
    return DenseSet(GRID_KINDS, fine[~_rows_in(fine, train_grid_calls().rows)], "train-grid-fine")


# LM heads too large for GRID_MAX_OPERAND (a vocabulary x hidden weight of more than 2^30 elements: Llama-3.1-405B's
# 128,256 x 16,384, Command-A's 256,000 x 12,288), up to 2^32 elements (8 GiB BF16), in fewer processes
HEADS_MAX_OPERAND = 2 ** 32


def train_grid_heads_calls() -> DenseSet:
    """The LM heads of the grid and its supplement (every vocabulary x hidden size) whose weight holds more than
    ``GRID_MAX_OPERAND`` and at most ``HEADS_MAX_OPERAND`` elements: the forward and the input gradient at
    ``GRID_TOKENS`` (the weight gradient's M, the vocabulary, is beyond a launch table's)."""
    T = np.array(GRID_TOKENS, np.int64)
    v, h, t = (a.ravel() for a in np.meshgrid(GRID_VOCAB + FINE_VOCAB, GRID_HIDDEN + FINE_HIDDEN, T, indexing="ij"))
    big = v * h > GRID_MAX_OPERAND
    v, h, t = v[big], h[big], t[big]
    rows = [_grid_rows(0, t, v, h, max_operand=HEADS_MAX_OPERAND),
            _grid_rows(1, t, h, v, max_operand=HEADS_MAX_OPERAND)]
    return DenseSet(GRID_KINDS, _dedupe(np.concatenate(rows)), "train-grid-heads")


# Issue 33, 2026-11-29 (tenth session): what CHECK_SET_6's blind run found beyond every grid (Nemotron-4-340B: hidden
# 18,432, FFN 73,728) -- hidden sizes above 16,384 and at the odd multiples of 512 between GRID_HIDDEN's 1,024 steps
# above 8,192, FFN widths above 65,536 -- and the vocabularies of published tokenizers that are no multiple of 128
# (every grid's vocabularies are): GPT-2's BPE and the sizes models pad it to, LLaMA's SentencePiece with added tokens,
# and others.  Chosen before CHECK_SET_7 was drawn; up to HEADS_MAX_OPERAND elements an operand (8 GiB BF16).
LARGE_HIDDEN = tuple(range(8704, 16384, 1024)) + tuple(range(17408, 32769, 1024))
HUGE_OUT = tuple(range(66560, 131073, 1024))  # FFN widths beyond WIDE_OUT's 65,536
TOKENIZER_VOCABS = (
    32001, 32002, 32003,  # LLaMA-1/2's 32,000 pieces with a pad / chat tokens added
    32016,  # Code Llama (infilling tokens)
    32064,  # Phi-3-mini
    49155,  # Granite 3
    50000,  # Galactica
    50257,  # GPT-2's BPE, unpadded
    50272, 50280, 50400,  # GPT-2 / GPT-NeoX BPE padded to a multiple of 8 (OPT, Dolly, GPT-J)
    73448,  # MiniCPM
    100277, 100278,  # cl100k_base (and with one added token)
    151646, 151665,  # Qwen's tokenizer lengths (before padding to 151,936 / 152,064)
)


def train_grid_large_calls() -> DenseSet:
    """The grid's GEMM kinds beyond its large end: projections at the ``LARGE_HIDDEN`` hidden sizes (every width of
    the grid and ``WIDE_OUT``) and at the ``HUGE_OUT`` widths (every hidden size), LM heads of every vocabulary at the
    ``LARGE_HIDDEN`` sizes, and LM heads of the ``TOKENIZER_VOCABS`` at every hidden size; three directions (the
    weight gradient where its M fits a launch table), ``GRID_TOKENS``, operands up to ``HEADS_MAX_OPERAND``
    elements.  No point of the other grid sets is repeated."""
    T = np.array(GRID_TOKENS, np.int64)
    hidden = GRID_HIDDEN + FINE_HIDDEN
    vocab = GRID_VOCAB + FINE_VOCAB
    proj = [np.meshgrid(GRID_OUT + WIDE_OUT, LARGE_HIDDEN, T, indexing="ij"),
            np.meshgrid(HUGE_OUT, hidden + LARGE_HIDDEN, T, indexing="ij")]
    head = [np.meshgrid(vocab, LARGE_HIDDEN, T, indexing="ij"),
            np.meshgrid(TOKENIZER_VOCABS, hidden + LARGE_HIDDEN, T, indexing="ij")]
    cap = HEADS_MAX_OPERAND
    rows = []
    for f, h, t in ((a.ravel() for a in g) for g in proj):
        rows += _projection_rows(f, h, t, cap)
    for v, h, t in ((a.ravel() for a in g) for g in head):
        rows += _head_rows(v, h, t, cap)
    large = _dedupe(np.concatenate(rows))
    seen = np.concatenate([train_grid_calls().rows, train_grid_fine_calls().rows, train_grid_heads_calls().rows])
    return DenseSet(GRID_KINDS, large[~_rows_in(large, seen)], "train-grid-large")


def _row_keys(rows: np.ndarray) -> np.ndarray:
    """One uint64 per row (kind, b, M, N, K): M, N and K in ``PACK_BITS``' widths (every grid row fits a launch
    table), kind and batch in the 3 + 8 bits left (the grids' kinds and batches fit)."""
    widths = (3, 8, PACK_BITS["M"], PACK_BITS["N"], PACK_BITS["K"])
    if len(rows) and any(int(rows[:, j].max()) >> w for j, w in enumerate(widths)):
        raise ValueError("a row's kind or batch (or M, N, K) does not fit its key")
    key = np.zeros(len(rows), np.uint64)
    for j, w in enumerate(widths):
        key = (key << np.uint64(w)) | rows[:, j].astype(np.uint64)
    return key


def _rows_in(rows: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Which of ``rows`` (kind, b, M, N, K) are rows of ``other``."""
    return np.isin(_row_keys(rows), _row_keys(other))


TRAIN_SETS = {"train_splitk": train_splitk_calls, "train_rest": train_rest_calls,
              "h100_counterparts": h100_counterpart_calls}
# run.sh flags-survey's and dense's (issue 33), not gpu-survey's
GRID_SETS = {"train_grid": train_grid_calls, "train_grid_fine": train_grid_fine_calls,
             "train_grid_heads": train_grid_heads_calls, "train_grid_large": train_grid_large_calls}
# graph_survey.py and export_kernels.py find a set by name here
ALL_DENSE_SETS = {**DENSE_SETS, **TRAIN_SETS, **GRID_SETS}

# The issue's H200 silent misses (one training step, 256 tokens; issue 23), as (model, N_out, K_in, tokens, direction)
ISSUE_CASES = [("mistral-7b", 4096, 14336, 256, "forward"), ("llama3-8b", 4096, 14336, 256, "forward"),
               ("mistral-7b", 14336, 4096, 256, "input_grad"), ("llama3-8b", 28672, 4096, 256, "input_grad"),
               ("llama2-7b", 32000, 4096, 256, "input_grad"), ("qwen2-0.5b", 896, 4864, 256, "forward"),
               ("qwen2-0.5b", 4864, 896, 256, "input_grad"), ("phi3-mini", 9216, 3072, 256, "input_grad"),
               ("llama-1b", 32000, 2048, 1024, "input_grad")]


def train_bits_calls(n_sample: int = 160) -> list[dict]:
    """A bit capture of training GEMMs: the issue's cases (each direction, BF16), then ``n_sample`` calls of
    ``train_splitk`` (a hashed, spread-out pick, at most 2^38 MACs each); ids and seeds as the other bit sets'.

    >>> cs = train_bits_calls(); len(cs) > 150, len({c["id"] for c in cs}) == len(cs)
    (True, True)
    """
    calls: list[dict] = []
    add = survey_calls._adder(calls, "train_bits")
    seen = set()

    def put(c: dict) -> None:
        key = (c["op"], c["fmt"], c["M"], c["N"], c["K"], c.get("bias"), c.get("a_t"))
        if key not in seen and bool(storable(c["M"], c["N"], c["K"])):
            seen.add(key)
            kw = {k: v for k, v in c.items() if k not in ("op", "fmt", "M", "N", "K", "seed_a", "seed_b", "seed_c")}
            add(c["op"], c["fmt"], c["M"], c["N"], c["K"], **kw)

    for _, n_out, k_in, tokens, _ in ISSUE_CASES:
        for c in step_calls(n_out, k_in, tokens):
            put(c)
    ds = train_splitk_calls()
    picked = []
    for i in range(len(ds)):
        kind, b, M, N, K = (int(x) for x in ds.rows[i])
        if M * N * K <= 2 ** 38 and zlib.crc32(f"tb{i}".encode()) % 997 == 0:
            picked.append(ds.calls(i, i + 1)[0])
        if len(picked) >= n_sample:
            break
    for c in picked:
        put(c)
    return calls


def autograd_cases() -> list[tuple[str, int, int, int, bool]]:
    """(model, N_out, K_in, tokens, bias) whose nn.Linear forward + backward ``train_check.py`` profiles: the issue's
    cases, and one projection of each kind at 1, 16, 256 and 2,048 tokens (with and without bias)."""
    cases = [(m, n, k, t, False) for m, n, k, t, _ in ISSUE_CASES]
    for model, (h, ffn, vocab, qkv) in sorted(published_models().items())[::29]:
        for n_out, k_in in ((qkv, h), (h, ffn), (vocab, h)):
            for t in (1, 16, 256, 2048):
                cases.append((model, n_out, k_in, t, t == 16))
    seen, out = set(), []
    for c in cases:  # one case per shape (Mistral-7B and Llama-3-8B share their down projection)
        if c[1:] not in seen and all(bool(storable(*s)) for s in step_shapes(c[1], c[2], c[3]).values()):
            seen.add(c[1:])
            out.append(c)
    return out


def summary() -> dict:
    """Calls per set and per kind (for the run's log)."""
    out = {}
    for name, make in TRAIN_SETS.items():
        ds = make()
        per = np.bincount(ds.rows[:, 0], minlength=len(ds.kinds))
        out[name] = dict(calls=len(ds), kinds={f"{op} {fmt} {kw}": int(n) for (op, fmt, kw), n in zip(ds.kinds, per)})
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(summary(), indent=1))
    print("train_bits:", len(train_bits_calls()), "calls; autograd cases:", len(autograd_cases()))
