"""Running probe kernels on an NVIDIA GPU: build with nvcc, inspect SASS, launch with CuPy.

CuPy and the CUDA toolkit (``nvcc``, ``cuobjdump``) are needed only here and are imported
or called lazily, so the rest of tcnumerics never depends on them.  ``Probe`` turns bit
arrays of independent dot products into tiles (each vector on the tile's diagonal: A row
j, B column j, C[j, j]), packs register images, launches, and reads D[j, j] back.

Example (needs a Hopper GPU, so not run here):
    >>> from tcnumerics.probe.runtime import Probe                 # doctest: +SKIP
    >>> p = Probe("hopper.mma.m16n8k16.f32.bf16.bf16.f32")           # doctest: +SKIP
    >>> p.self_check().ok                                             # doctest: +SKIP
    True
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

import numpy as np

from ..formats import FloatFormat, IntFormat, get_format
from .kernels import KERNEL_NAME, kernel_source
from .layouts import pack_metadata
from .targets import FORMAT_NAMES, Target, target

__all__ = ["Probe", "SelfCheck", "ProbeError", "device_description", "PROBE_VERSION", "chunk_codes",
           "discover_metadata", "random_sparse_index", "build_cubin", "sass_summary", "matrix_ops"]

PROBE_VERSION = "tcnumerics-probe 1"
# SASS opcodes that execute on the matrix units (or stand in for them)
_MATRIX_OPS = re.compile(r"\b((?:H|I|Q|B)G?MMA[\w.]*|HGMMA[\w.]*|QGMMA[\w.]*|IGMMA[\w.]*|BGMMA[\w.]*)")
_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_B_LEAD_BYTES = 128  # no-swizzle core matrix: 8 rows x 16 bytes


class ProbeError(RuntimeError):
    """The GPU, the toolkit or a self-check refused; the message says which."""


def _cupy():
    try:
        import cupy
    except ImportError as exc:  # optional dependency
        raise ProbeError("the GPU probe needs CuPy (pip install cupy-cuda12x or cupy-cuda13x) "
                         f"and an NVIDIA GPU: {exc}") from None
    return cupy


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        cand = os.path.join(cuda, "bin", name)
        if os.path.exists(cand):
            return cand
        raise ProbeError(f"the GPU probe needs the CUDA toolkit's {name} on PATH (or CUDA_HOME)")
    return path


def _cache_dir() -> str:
    root = os.environ.get("TCNUMERICS_PROBE_CACHE") or os.path.join(tempfile.gettempdir(), "tcnumerics-probe")
    os.makedirs(root, exist_ok=True)
    return root


def build_cubin(source: str, arch: str = "sm_90a") -> str:
    """Compile ``source`` to a cubin for ``arch`` with nvcc (cached by content); returns its path."""
    key = hashlib.sha256((arch + "\0" + source).encode()).hexdigest()[:20]
    out = os.path.join(_cache_dir(), f"{key}.cubin")
    if os.path.exists(out):
        return out
    src = os.path.join(_cache_dir(), f"{key}.{os.getpid()}.cu")
    with open(src, "w") as fh:
        fh.write(source)
    compute = arch.replace("sm_", "compute_")
    # a private temporary per process: workers building the same kernel at once must not
    # move each other's half-written output (seen on an H200 with a process pool)
    tmp = f"{out}.{os.getpid()}.tmp"
    cmd = [_tool("nvcc"), "-cubin", "-O3", f"-gencode=arch={compute},code={arch}", "-o", tmp, src]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["(no message)"])[-2:]
        raise ProbeError(f"nvcc rejected the probe kernel for {arch}: {' | '.join(last)}")
    os.replace(tmp, out)
    return out


def sass_summary(cubin: str) -> dict[str, int]:
    """Opcode histogram of the cubin's SASS (all opcodes; matrix ones are what matter)."""
    res = subprocess.run([_tool("cuobjdump"), "-sass", cubin], capture_output=True, text=True)
    if res.returncode != 0:
        raise ProbeError(f"cuobjdump failed on {cubin}: {res.stderr.strip()[:200]}")
    hist: dict[str, int] = {}
    for line in res.stdout.splitlines():
        m = _SASS_LINE.search(line)
        if m:
            hist[m.group(1)] = hist.get(m.group(1), 0) + 1
    return hist


def matrix_ops(hist: dict[str, int]) -> dict[str, int]:
    """The matrix-unit opcodes of a SASS histogram (HMMA, IMMA, HGMMA, QGMMA, IGMMA, ...)."""
    return {op: n for op, n in sorted(hist.items()) if _MATRIX_OPS.fullmatch(op)}


def device_description() -> str:
    """'NVIDIA H200 (sm_90a), driver 580.., CUDA 13.0 (nvcc 13.0 via CuPy 14.2.0)'."""
    cp = _cupy()
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    sm = f"sm_{props['major']}{props['minor']}" + ("a" if props["major"] == 9 else "")
    driver = "unknown"
    smi = shutil.which("nvidia-smi")
    if smi:
        res = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True)
        if res.returncode == 0 and res.stdout.strip():
            driver = res.stdout.strip().splitlines()[0]
    rt = cp.cuda.runtime.runtimeGetVersion()
    nvcc = subprocess.run([_tool("nvcc"), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", nvcc)
    return (f"{name} ({sm}), driver {driver}, CUDA {rt // 1000}.{rt % 1000 // 10} "
            f"(nvcc {m.group(1) if m else '?'} cubins via CuPy {cp.__version__})")


def chunk_codes(sparse_index: np.ndarray, pattern=None) -> np.ndarray:
    """[N, K/2] positions -> [N, chunks] 4-bit metadata codes (default 2:4: two positions
    0..3 per chunk of 4; ``pattern``: a ``tcnumerics.sparse.Sparsity``)."""
    from ..sparse import metadata_codes

    return metadata_codes(sparse_index, pattern)


@dataclass
class SelfCheck:
    """Outcome of the exact-integer layout check of one target."""

    name: str
    ok: bool
    tiles: int
    mismatches: int
    detail: str = ""
    sass: dict[str, int] = field(default_factory=dict)


class Probe:
    """One compiled instruction on the GPU.

    ``run_tiles`` executes whole tiles; ``dot`` evaluates independent dot products
    (``a``, ``b`` [N, K], ``c`` [N]; sparse: ``a`` [N, K/2] plus ``sparse_index``).
    """

    def __init__(self, name: str, n: int | None = None, arch: str = "sm_90a"):
        self.target: Target = target(name, n)
        cp = _cupy()  # the GPU runtime first: without it nothing else matters
        self.source = kernel_source(self.target)
        self.cubin = build_cubin(self.source, arch)
        self._cp = cp
        self._module = cp.RawModule(path=self.cubin)
        self._kernel = self._module.get_function(KERNEL_NAME)
        t = self.target
        # K-direction step between core matrices; the N-direction step matters only when
        # N > 8 (one 8-row group otherwise), so N = 8 reads right under either reading
        # of the descriptor's two offset fields
        self.lead_bytes = _B_LEAD_BYTES
        self.stride_bytes = _B_LEAD_BYTES * (t.k * _bits(t.btype) // 8 // 16) if t.n > 8 else _B_LEAD_BYTES
        self.swap_fields = False  # True: pass (stride, lead) in the descriptor's (leading, stride) fields
        self._sass: dict[str, int] | None = None

    # -- SASS --------------------------------------------------------------------------
    @property
    def sass(self) -> dict[str, int]:
        if self._sass is None:
            self._sass = sass_summary(self.cubin)
        return self._sass

    def sass_note(self) -> str:
        ops = matrix_ops(self.sass)
        return ", ".join(f"{op} x{n}" for op, n in ops.items()) or "no matrix-unit opcode"

    # -- tiles -------------------------------------------------------------------------
    def run_tiles(self, A: np.ndarray, B: np.ndarray, C: np.ndarray, codes: np.ndarray | None = None,
                  e_regs: np.ndarray | None = None) -> np.ndarray:
        """A [T, m, k'] (k' = k/2 sparse), B [T, n, k], C [T, m, n] element bits -> D [T, m, n] bits.

        ``codes`` [T, m, chunks]: 4-bit chunk codes of sparse A; ``e_regs`` [T, 32]: raw
        metadata registers instead (layout discovery).
        """
        t = self.target
        tiles = A.shape[0]
        if tiles == 0:
            return np.zeros((0, t.m, t.n), np.uint32)
        a_regs = t.a.pack(A)
        c_regs = t.c_fragment.pack(C)
        if t.kind == "wgmma":
            b_data = _wgmma_b_image(B, _bits(t.btype), self.lead_bytes, self.stride_bytes)
            e = None
        else:
            b_data = t.b.pack(B)
            if e_regs is not None:
                e = np.asarray(e_regs, dtype=np.uint32)
            elif t.kind == "mma.sp":
                if codes is None:
                    raise ValueError("codes: sparse tiles need their metadata chunk codes")
                e = pack_metadata(t.metadata, codes)
            else:
                e = np.zeros((tiles, 32), np.uint32)
        d_regs = self._execute(a_regs, b_data, c_regs, e)
        return t.cd.unpack(d_regs, (t.m, t.n))

    def _execute(self, a_regs: np.ndarray, b_data: np.ndarray, c_regs: np.ndarray, e: np.ndarray | None) -> np.ndarray:
        """Launch: register images (wgmma: B's shared-memory image) in, D register images out."""
        t, cp = self.target, self._cp
        tiles = a_regs.shape[0]

        def dev(x):  # the kernel indexes raw memory: it must be C-ordered (numpy reductions may not be)
            return cp.asarray(np.ascontiguousarray(x, dtype=np.uint32))

        d = cp.empty((tiles, t.threads, t.cd.registers), dtype=cp.uint32)
        d.fill(0xDEADBEEF)  # poison: an unwritten result shows
        if t.kind == "wgmma":
            words = b_data.shape[1]
            fields = (self.stride_bytes, self.lead_bytes) if self.swap_fields else (self.lead_bytes, self.stride_bytes)
            self._kernel((tiles,), (128,), (dev(a_regs), dev(b_data), dev(c_regs), d,
                                            np.int32(tiles), np.int32(words), np.uint32(fields[0]),
                                            np.uint32(fields[1])), shared_mem=words * 4)
        else:
            warps = 4
            grid = (tiles + warps - 1) // warps
            self._kernel((grid,), (32 * warps,), (dev(a_regs), dev(b_data), dev(c_regs), dev(e), d,
                                                 np.int32(tiles)))
        cp.cuda.Device().synchronize()
        return cp.asnumpy(d)

    # -- independent dot products --------------------------------------------------------
    def dot(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, sparse_index: np.ndarray | None = None,
            max_tiles: int = 1 << 16) -> np.ndarray:
        """One instruction per vector: a [N, k'] , b [N, k], c [N] bits -> d [N] bits."""
        t = self.target
        a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
        n = len(c)
        if a.shape != (n, t.a_k) or b.shape != (n, t.k):
            raise ValueError(f"a, b: expected [{n}, {t.a_k}] and [{n}, {t.k}] for {t.name}, got {a.shape}, {b.shape}")
        per = t.vectors_per_tile
        out = np.empty(n, dtype=np.uint32)
        step = per * max_tiles
        for s in range(0, n, step):
            e = min(n, s + step)
            cnt = e - s
            tiles = (cnt + per - 1) // per
            slot = np.arange(cnt)
            ti, j = slot // per, slot % per
            A = np.zeros((tiles, t.m, t.a_k), np.uint32)
            B = np.zeros((tiles, t.n, t.k), np.uint32)
            C = np.zeros((tiles, t.m, t.n), np.uint32)
            A[ti, j] = a[s:e]
            B[ti, j] = b[s:e]
            C[ti, j, j] = c[s:e]
            codes = None
            if t.kind == "mma.sp":
                if sparse_index is None:
                    raise ValueError("sparse_index: required for sparse instructions")
                from ..sparse import check_index

                sp = t.sparsity
                idx = check_index(np.asarray(sparse_index)[s:e], cnt, t.a_k, sp)
                # unused rows: code 0b0100 (the first kept slots), defined for every scheme
                codes = np.full((tiles, t.m, t.k // sp.chunk), 0b0100, np.uint32)
                codes[ti, j] = chunk_codes(idx, sp)
            D = self.run_tiles(A, B, C, codes)
            out[s:e] = D[ti, j, j]
        return out

    # -- exact integer self-check ----------------------------------------------------------
    def self_check(self, tiles: int = 64, seed: int = 1) -> SelfCheck:
        """Random small integers in every element of whole tiles; all results are exact, so
        any wrong fragment slot, packing or metadata position shows as a mismatch."""
        t = self.target
        rng = np.random.default_rng(seed)
        a_vals, b_vals = _small_ints(rng, t.atype, (tiles, t.m, t.a_k)), _small_ints(rng, t.btype, (tiles, t.n, t.k))
        c_vals = _small_ints(rng, t.ctype, (tiles, t.m, t.n), accumulator=True)
        codes = idx = None
        b_eff = b_vals
        if t.kind == "mma.sp":
            sp = t.sparsity
            idx = random_sparse_index(rng, tiles * t.m, t.k, sp).reshape(tiles, t.m, t.a_k)
            codes = chunk_codes(idx.reshape(-1, t.a_k), sp).reshape(tiles, t.m, t.k // sp.chunk)
        A = _encode(t.atype, a_vals)
        B = _encode(t.btype, b_vals)
        C = _encode(t.ctype, c_vals)
        D = self.run_tiles(A, B, C, codes)
        if idx is not None:
            from ..sparse import expand_a

            # dense A with zeros at the unselected positions
            a_vals = expand_a(a_vals.reshape(-1, t.a_k), idx.reshape(-1, t.a_k), t.sparsity).reshape(
                tiles, t.m, t.k)
        if t.bop == "xor":
            expect = (a_vals[:, :, None, :] ^ b_eff[:, None, :, :]).sum(-1) + c_vals
        else:
            expect = np.einsum("tmk,tnk->tmn", a_vals, b_eff) + c_vals
        got = _decode(t.dtype, D)
        bad = int((got != expect).sum())
        detail = ""
        if bad:
            w = np.argwhere(got != expect)[:4]
            detail = "; ".join(f"tile {x} D[{r},{c}]={got[x, r, c]} expected {expect[x, r, c]}" for x, r, c in w)
        return SelfCheck(t.name, bad == 0, tiles, bad, detail, matrix_ops(self.sass))


def discover_metadata(probe: Probe) -> np.ndarray:
    """Find which (row, chunk) each lane's metadata nibble selects, from the hardware itself.

    A baseline keeps the first half of every chunk (code 0b0100: 2:4 positions 0 and 1,
    TF32 1:2 position 0, 4:8 pairs 0 and 1), where B is zero; one tile per (lane, nibble)
    switches that nibble to the second half (0b1110), where B[k = w*c + w/2] = c + 1 for
    chunks of ``w`` elements.  The row of D that moves, and by how much, name the row and
    chunk.  Returns coords [32, 8, 2] as ``MetadataLayout`` holds them (-1: ignored).
    """
    t = probe.target
    if t.kind != "mma.sp":
        raise ValueError(f"discover_metadata: {t.name} is not a sparse instruction")
    w = t.sparsity.chunk
    tiles = 1 + 32 * 8
    one = _encode(t.atype, np.ones(1, np.int64))[0]
    A = np.full((tiles, t.m, t.a_k), one, np.uint32)
    k = np.arange(t.k)
    # column n of B holds bit n of (chunk + 1) at position w/2 of each chunk: values 0/1 are
    # exact in every format, and the moved row of D spells the chunk number in binary
    n = np.arange(t.n)[:, None]
    b_vals = np.where(k[None, :] % w == w // 2, ((k[None, :] // w + 1) >> n) & 1, 0)
    B = np.broadcast_to(_encode(t.btype, b_vals)[None], (tiles, t.n, t.k)).copy()
    C = np.broadcast_to(_encode(t.ctype, np.zeros(1, np.int64))[0], (tiles, t.m, t.n)).astype(np.uint32)
    e = np.full((tiles, 32), 0x44444444, np.uint32)
    for lane in range(32):
        for nib in range(8):
            tile = 1 + lane * 8 + nib
            e[tile, lane] = (0x44444444 & ~np.uint32(0xF << (4 * nib))) | np.uint32(0xE << (4 * nib))
    D = _decode(t.dtype, probe.run_tiles(A, B, C, e_regs=e))
    base = D[0]
    coords = np.full((32, 8, 2), -1, np.int64)
    for lane in range(32):
        for nib in range(8):
            diff = D[1 + lane * 8 + nib] - base
            rows = np.flatnonzero((diff != 0).any(axis=1))
            if len(rows) == 1 and np.isin(diff[rows[0]], (0, 1)).all():
                code = int(sum(int(v) << i for i, v in enumerate(diff[rows[0]])))
                coords[lane, nib] = (rows[0], code - 1)
            elif len(rows) > 1:
                coords[lane, nib] = (-2, -2)  # more than one row moved: not a plain layout
    return coords


def _bits(ptx_type: str) -> int:
    from .targets import ELEMENT_BITS

    return ELEMENT_BITS[ptx_type]


def _wgmma_b_image(B: np.ndarray, elem_bits: int, lead: int, stride: int) -> np.ndarray:
    from .layouts import wgmma_b_image

    return wgmma_b_image(B, elem_bits, lead, stride)


def random_sparse_index(rng: np.random.Generator, rows: int, k: int, pattern=None) -> np.ndarray:
    """[rows, k/2] random legal positions (default 2:4: per chunk of 4, two distinct positions
    in increasing order; ``pattern``: a ``tcnumerics.sparse.Sparsity``)."""
    from ..sparse import random_index

    return random_index(rng, rows, k, pattern)


def _small_ints(rng: np.random.Generator, ptx_type: str, shape, accumulator: bool = False) -> np.ndarray:
    fmt = get_format(FORMAT_NAMES[ptx_type])
    if isinstance(fmt, IntFormat):
        lo, hi = (fmt.min_value, fmt.max_value) if not accumulator else (-1000, 1000)
        return rng.integers(max(lo, -100), min(hi, 100) + 1, size=shape).astype(np.int64)
    span = 64 if accumulator else 3
    return rng.integers(-span, span + 1, size=shape).astype(np.int64)


def _encode(ptx_type: str, values: np.ndarray) -> np.ndarray:
    fmt = get_format(FORMAT_NAMES[ptx_type])
    if isinstance(fmt, IntFormat):
        return fmt.encode_int(values).astype(np.uint32)
    return np.asarray(fmt.from_float(values.astype(np.float64))).astype(np.uint32)


def _decode(ptx_type: str, bits: np.ndarray) -> np.ndarray:
    fmt = get_format(FORMAT_NAMES[ptx_type])
    if isinstance(fmt, IntFormat):
        return fmt.decode_int(bits.astype(fmt.container_dtype))
    assert isinstance(fmt, FloatFormat)
    vals = fmt.to_float(bits.astype(fmt.container_dtype))
    return np.where(np.isfinite(vals), vals, np.nan)
