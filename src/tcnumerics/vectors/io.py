"""Golden-vector files: the ``.npz`` format, validated reading (whole or streamed), safe
writing, and a plain-text hex form any language can read.

The ``.npz`` format (that of the public H200 sample, ``shared/hw-vectors``):

========== ========= ===============================================================
key        shape     meaning
========== ========= ===============================================================
``a``      [N, K]    operand A bit patterns, unsigned (TF32 in 32-bit containers)
``b``      [N, K]    operand B bit patterns
``c``      [N]       accumulator bits (FP32 / FP16 patterns, INT32 two's complement)
``d``      [N]       result bits (hardware's, or the model's for generated files)
``meta``   0-d str   JSON object with at least ``instruction`` (catalog name) and ``K``
``family`` [N] str   optional: the input family of each vector
``scale_a`` [N, K/B] block-scaled entries only (required there): scale bit patterns of
                     A, one per B = ``scale_block`` K elements (uint8: UE8M0 or UE4M3)
``scale_b`` [N, K/B] the same for B
========== ========= ===============================================================

Sparse instructions (``meta["sparse"]`` true) hold the compressed A, [N, K/2], and
``sparse_index`` [N, K/2].  Block-scaled instructions (``tcnumerics.blockscale``) need
``scale_a`` and ``scale_b``; their meta is completed with ``"block_scaled": true``,
``scale_format`` and ``scale_block`` (a file whose values contradict the entry is
refused), and scales on any other instruction are refused.  Any other key is kept as it is.  Files are opened with
``allow_pickle=False`` semantics: an object array is refused before a byte of it is read.

Example:
    >>> import json, os, tempfile, numpy as np
    >>> from tcnumerics.vectors.io import VectorSet, load, save
    >>> a = np.full((2, 16), 0x3C00, np.uint16)
    >>> vs = VectorSet(a, a, np.zeros(2, np.uint32), np.full(2, 0x41800000, np.uint32),
    ...                {"instruction": "hopper.wgmma.m64n8k16.f32.f16.f16", "K": 16})
    >>> path = os.path.join(tempfile.mkdtemp(), "ones.npz")
    >>> save(path, vs)
    >>> load(path).meta["K"], load(path).n
    (16, 2)
"""

from __future__ import annotations

import json
import os
import contextlib
import zipfile
import zlib
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from .._files import OutputPathError, atomic_write, check_output
from ..formats import Format
from .vector_set import (REQUIRED, SCALE_KEYS, VectorFileError, VectorSet, _bit_formats, _check_header,
                         _check_scale_keys, _check_values, _expected_shapes, _parse_meta, _resolve, _validate_set)

__all__ = ["VectorFileError", "VectorSet", "VectorReader", "load", "save", "write_hex", "read_hex",
           "HEX_MAGIC", "is_hex_file"]

HEX_MAGIC = "# tcnumerics-vectors hex v1"
_PICKLE_PROTOCOL_BYTE = 0x80
_NPY_MAGIC = b"\x93NUMPY"


# --------------------------------------------------------------------------------------------
# streamed reading of .npz archives (bounded memory, no pickle ever)

@dataclass
class _Member:
    name: str
    shape: tuple
    fortran: bool
    dtype: np.dtype
    version: tuple


def _sniff(path: str) -> None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except IsADirectoryError:
        raise VectorFileError(path, "is a directory, not a vector file") from None
    except FileNotFoundError:
        raise VectorFileError(path, "no such file") from None
    except OSError as exc:
        raise VectorFileError(path, f"cannot read ({exc.strerror or exc})") from None
    if not head:
        raise VectorFileError(path, "is empty")
    if head.startswith(_NPY_MAGIC):
        raise VectorFileError(path, "is a single .npy array, not an .npz archive")
    if head[0] == _PICKLE_PROTOCOL_BYTE:
        raise VectorFileError(path, "holds pickled data (refused, never unpickled), not an .npz archive")


def _read_header(fp) -> tuple:
    version = np.lib.format.read_magic(fp)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
    else:
        raise ValueError(f"unsupported .npy version {version}")
    return version, tuple(shape), bool(fortran), np.dtype(dtype)


_BROKEN = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, KeyError, SyntaxError, NotImplementedError)


class VectorReader:
    """An open, validated ``.npz`` vector file read in row chunks (bounded memory).

    Headers, meta, shapes and dtypes are checked on opening; values (range, CRC of the
    compressed data) as the chunks are read.  Use as a context manager.
    """

    def __init__(self, path: "str | os.PathLike"):
        self.path = os.fspath(path)
        _sniff(self.path)
        try:
            self._zip = zipfile.ZipFile(self.path)
        except zipfile.BadZipFile:
            raise VectorFileError(self.path, "not an .npz archive (not a zip file, or truncated)") from None
        except OSError as exc:
            raise VectorFileError(self.path, f"cannot read ({exc.strerror or exc})") from None
        try:
            self._open()
        except VectorFileError:
            self.close()
            raise
        except _BROKEN as exc:
            self.close()
            raise VectorFileError(self.path, f"corrupt or truncated archive ({_short(exc)})") from None

    def _open(self) -> None:
        self.members: dict[str, _Member] = {}
        for name in self._zip.namelist():
            if name.endswith("/"):
                continue
            if not name.endswith(".npy"):
                raise VectorFileError(self.path, f"unexpected member {name!r} (an .npz holds only .npy arrays)")
            key = name[:-4]
            with self._zip.open(name) as fp:
                try:
                    version, shape, fortran, dtype = _read_header(fp)
                except ValueError as exc:
                    raise VectorFileError(self.path, f"key '{key}' is not a valid .npy array ({_short(exc)})") from None
            if dtype.hasobject:
                raise VectorFileError(self.path, f"key '{key}' holds pickled Python objects (refused, never unpickled)")
            self.members[key] = _Member(name, shape, fortran, dtype, version)
        for key in REQUIRED:
            if key not in self.members:
                raise VectorFileError(self.path, f"missing key '{key}' (has: {', '.join(sorted(self.members)) or 'none'})")
        self.meta = _parse_meta(self.path, self._read_whole("meta"))
        self.spec = _resolve(self.path, self.meta)
        c_shape = self.members["c"].shape
        if len(c_shape) != 1:
            raise VectorFileError(self.path, f"key 'c' has shape {c_shape}, expected [N]")
        self.n = int(c_shape[0])
        if self.meta.get("sparse") and "sparse_index" not in self.members:
            raise VectorFileError(self.path, "meta says sparse but there is no 'sparse_index'")
        _check_scale_keys(self.path, self.meta, self.spec, self.members)
        try:
            shapes = _expected_shapes(self.meta, self.n)
        except VectorFileError as exc:
            raise VectorFileError(self.path, exc.problem) from None
        if "family" in self.members:
            shapes["family"] = (self.n,)
        fmts = _bit_formats(self.spec)
        for key, want in shapes.items():
            m = self.members[key]
            _check_header(self.path, key, m.shape, m.dtype, want, fmts.get(key))
        self.row_keys = [k for k in self.members if k != "meta" and self.members[k].shape[:1] == (self.n,)]

    @property
    def K(self) -> int:
        return int(self.meta["K"])

    @property
    def keys(self) -> list[str]:
        return list(self.members)

    def _read_whole(self, key: str) -> np.ndarray:
        with self._zip.open(self.members[key].name) as fp:
            arr = np.lib.format.read_array(fp, allow_pickle=False)
            fp.read()  # to the end: the zip layer checks the CRC there
        return arr

    def chunks(self, rows: int = 1 << 16, keys: Sequence[str] | None = None) -> Iterator[dict]:
        """Yield dicts of row slices (``a``, ``b``, ``c``, ``d`` and per-vector extras) of at most ``rows`` rows."""
        if rows < 1:
            raise ValueError(f"rows: must be >= 1, got {rows}")
        keys = list(keys) if keys is not None else self.row_keys
        fmts = _bit_formats(self.spec)
        streams = {}
        try:
            for key in keys:
                m = self.members[key]
                fp = self._zip.open(m.name)
                _read_header(fp)
                if m.fortran and len(m.shape) > 1:
                    whole = np.lib.format.read_array(self._zip.open(m.name), allow_pickle=False)
                    streams[key] = ("array", whole, fp)
                else:
                    streams[key] = ("stream", m, fp)
            for start in range(0, self.n, rows):
                count = min(rows, self.n - start)
                out = {}
                for key, (kind, obj, fp) in streams.items():
                    if kind == "array":
                        arr = obj[start:start + count]
                    else:
                        arr = _read_rows(fp, obj, count)
                    out[key] = _check_values(self.path, key, arr, fmts.get(key))
                yield out
            for kind, _obj, fp in streams.values():
                fp.read()  # CRC check at the member's end
        except VectorFileError:
            raise
        except _BROKEN as exc:
            raise VectorFileError(self.path, f"corrupt or truncated data ({_short(exc)})") from None
        finally:
            for _kind, _obj, fp in streams.values():
                fp.close()

    def read(self) -> VectorSet:
        """Everything at once (every key, all rows)."""
        parts: dict[str, list] = {k: [] for k in self.row_keys}
        for chunk in self.chunks(max(self.n, 1)):
            for k, v in chunk.items():
                parts[k].append(v)
        arrays = {}
        for k in self.row_keys:
            m = self.members[k]
            arrays[k] = np.concatenate(parts[k]) if parts[k] else np.empty(m.shape, m.dtype)
        try:
            for k in self.members:
                if k != "meta" and k not in arrays:
                    arrays[k] = self._read_whole(k)
        except _BROKEN as exc:
            raise VectorFileError(self.path, f"corrupt or truncated data ({_short(exc)})") from None
        core = {k: arrays.pop(k) for k in ("a", "b", "c", "d")}
        return VectorSet(meta=self.meta, extra=arrays, path=self.path, **core)

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> "VectorReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_rows(fp, m: _Member, count: int) -> np.ndarray:
    row_items = int(np.prod(m.shape[1:], dtype=np.int64)) if len(m.shape) > 1 else 1
    nbytes = count * row_items * m.dtype.itemsize
    buf = fp.read(nbytes)
    if len(buf) != nbytes:
        raise EOFError(f"key '{m.name[:-4]}' ends early")
    arr = np.frombuffer(buf, dtype=m.dtype).reshape((count,) + tuple(m.shape[1:]))
    return arr.astype(m.dtype.newbyteorder("="), copy=False) if not m.dtype.isnative else arr


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def load(path: "str | os.PathLike") -> VectorSet:
    """Read and validate a vector file (``.npz``, or the hex text form) completely.

    Raises ``VectorFileError`` (a ValueError) with a one-line message on any problem.
    """
    path = os.fspath(path)
    if is_hex_file(path):
        return read_hex(path)
    with VectorReader(path) as reader:
        return reader.read()


# --------------------------------------------------------------------------------------------
# writing

def _refuse(path: str, overwrite: bool, protect: Sequence) -> None:
    """Refuse, before any work, an output that is an input, exists (unless ``overwrite``) or cannot be written."""
    if os.path.exists(path):
        for other in protect:
            try:
                if os.path.samefile(path, other):
                    raise VectorFileError(path, "is one of the input files; refusing to write over it")
            except FileNotFoundError:
                continue
    try:
        check_output(path, overwrite, _OVERWRITE_HINT)
    except OutputPathError as exc:
        raise VectorFileError(path, exc.reason) from None


_OVERWRITE_HINT = "pass overwrite=True / --overwrite"


@contextlib.contextmanager
def _written(path: str, mode: str, overwrite: bool, **open_kwargs):
    """``atomic_write`` with its errors as ``VectorFileError`` naming ``path``."""
    try:
        with atomic_write(path, mode, overwrite=overwrite, hint=_OVERWRITE_HINT, **open_kwargs) as fh:
            yield fh
    except OutputPathError as exc:
        raise VectorFileError(path, exc.reason) from None


def save(path: "str | os.PathLike", vectors: VectorSet, *, overwrite: bool = False, protect: Sequence = (),
         compress: bool = True) -> None:
    """Write a validated ``.npz`` vector file.

    Never replaces an existing file unless ``overwrite``; never writes over a path in
    ``protect`` (the inputs of the command) even then.  The file appears complete or not
    at all (written to a temporary file beside it, then moved into place).
    """
    path = os.fspath(path)
    if not path.endswith(".npz"):
        raise VectorFileError(path, "vector files must end in .npz")
    arrays = {k: np.asarray(v) for k, v in vectors.arrays().items()}
    if "meta" in arrays:
        raise VectorFileError(path, "'meta' is reserved for the JSON meta dictionary")
    if "family" in arrays:
        arrays["family"] = np.asarray(arrays["family"]).astype(str)
    meta, _spec = _validate_set(path, arrays, dict(vectors.meta))
    _refuse(path, overwrite, protect)
    with _written(path, "wb", overwrite) as fh:
        writer = np.savez_compressed if compress else np.savez
        writer(fh, meta=np.array(json.dumps(meta, sort_keys=False)), **arrays)


# --------------------------------------------------------------------------------------------
# the plain-text hex form

_HEX_DOC = """\
{magic}
# One vector per line, whitespace-separated fields, every value a fixed-width lowercase hex
# bit pattern (no 0x; most significant digit first; widths below, in bits).
# instruction: {instruction}
# K: {K}
# count: {count}
# widths: c={wc} d={wd} a={wa} b={wb}{wsi}{wsc}
# columns: family c d a[0..{ka}] b[0..{kb}]{csi}{csc}
# meta: {meta}
"""


def is_hex_file(path: "str | os.PathLike") -> bool:
    """Whether a file starts with the hex form's magic line."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(HEX_MAGIC)) == HEX_MAGIC.encode()
    except OSError:
        return False


def write_hex(path: "str | os.PathLike", vectors: VectorSet, *, overwrite: bool = False,
              protect: Sequence = ()) -> None:
    """Write vectors as text: a ``#`` header (instruction, K, count, widths, columns, meta JSON),
    then one line per vector: ``family c d a[0] .. a[K-1] b[0] .. b[K-1]`` (sparse: then
    ``sparse_index``; block-scaled: then ``scale_a[0..K/B-1] scale_b[0..K/B-1]``), each value
    fixed-width hex.  A missing family is written ``-``.

    >>> import os, tempfile, numpy as np
    >>> name = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
    >>> ones = np.full((1, 32), 0x38, np.uint8)                        # E4M3 1.0
    >>> vs = VectorSet(ones, ones, np.zeros(1, np.uint32), np.full(1, 0x43000000, np.uint32),
    ...                {"instruction": name, "K": 32},
    ...                {"scale_a": np.array([[128]], np.uint8), "scale_b": np.array([[129]], np.uint8)})
    >>> path = os.path.join(tempfile.mkdtemp(), "v.hex")
    >>> write_hex(path, vs)
    >>> back = read_hex(path)
    >>> back.scale_a.tolist(), back.scale_b.tolist(), back.meta["scale_format"]
    ([[128]], [[129]], 'ue8m0')
    """
    path = os.fspath(path)
    arrays = {k: np.asarray(v) for k, v in vectors.arrays().items()}
    meta, spec = _validate_set(path, arrays, dict(vectors.meta))
    _refuse(path, overwrite, protect)
    n = len(arrays["c"])
    fam = arrays.get("family")
    fam = np.full(n, "-") if fam is None else np.asarray(fam).astype(str)
    bad = [f for f in np.unique(fam) if not f or any(ch.isspace() for ch in f) or f.startswith("#")]
    if bad:
        raise VectorFileError(path, f"family name {bad[0]!r} cannot be written as one hex-form field")
    fmts = _bit_formats(spec)
    width = {k: fmts[k].container_bits for k in fmts}
    sparse = bool(meta.get("sparse"))
    scaled = bool(meta.get("block_scaled"))
    dropped = sorted(set(arrays) - {"a", "b", "c", "d", "family", "sparse_index", *SCALE_KEYS})
    meta_out = dict(meta)
    if dropped:
        meta_out["hex_dropped_keys"] = dropped
    ka, kb = arrays["a"].shape[1] - 1, arrays["b"].shape[1] - 1
    header = _HEX_DOC.format(magic=HEX_MAGIC, instruction=spec.name if spec.name == meta["instruction"] else
                             meta["instruction"], K=meta["K"], count=n, wc=width["c"], wd=width["d"],
                             wa=width["a"], wb=width["b"],
                             wsi=f" sparse_index={arrays['sparse_index'].dtype.itemsize * 8}" if sparse else "",
                             ka=ka, kb=kb, csi=f" sparse_index[0..{ka}]" if sparse else "",
                             wsc=(f" scale_a={width['scale_a']} scale_b={width['scale_b']}" if scaled else ""),
                             csc=(f" scale_a[0..{arrays['scale_a'].shape[1] - 1}]"
                                  f" scale_b[0..{arrays['scale_b'].shape[1] - 1}]" if scaled else ""),
                             meta=json.dumps(meta_out))
    with _written(path, "w", overwrite, encoding="utf-8", newline="\n") as fh:
        fh.write(header)
        step = 4096
        for s in range(0, n, step):
            e = min(n, s + step)
            cols = [fam[s:e].astype(object),
                    _hexcol(arrays["c"][s:e], width["c"]), _hexcol(arrays["d"][s:e], width["d"])]
            blocks = [_hexcol(arrays["a"][s:e], width["a"]), _hexcol(arrays["b"][s:e], width["b"])]
            if sparse:
                blocks.append(_hexcol(arrays["sparse_index"][s:e], arrays["sparse_index"].dtype.itemsize * 8))
            if scaled:
                blocks += [_hexcol(arrays[key][s:e], width[key]) for key in SCALE_KEYS]
            for i in range(e - s):
                fields = [cols[0][i], cols[1][i], cols[2][i]]
                for blk in blocks:
                    fields.extend(blk[i])
                fh.write(" ".join(fields))
                fh.write("\n")


def _hexcol(arr: np.ndarray, bits: int) -> np.ndarray:
    digits = (bits + 3) // 4
    flat = np.asarray(arr).astype(np.uint64).ravel()
    text = np.array([format(int(v), f"0{digits}x") for v in flat], dtype=object)
    return text.reshape(np.shape(arr))


def read_hex(path: "str | os.PathLike") -> VectorSet:
    """Read the hex text form back (validated like an ``.npz``)."""
    path = os.fspath(path)
    try:
        fh = open(path, "r", encoding="utf-8")
    except FileNotFoundError:
        raise VectorFileError(path, "no such file") from None
    except OSError as exc:
        raise VectorFileError(path, f"cannot read ({exc.strerror or exc})") from None
    header: dict[str, str] = {}
    rows: list[list[str]] = []
    try:
        with fh:
            first = fh.readline().rstrip("\n")
            if first != HEX_MAGIC:
                raise VectorFileError(path, f"not a hex vector file (first line must be {HEX_MAGIC!r})")
            for lineno, line in enumerate(fh, start=2):
                line = line.strip()
                if not line:
                    continue
                if line.startswith("#"):
                    key, sep, value = line[1:].partition(":")
                    if sep and not rows:
                        header[key.strip()] = value.strip()
                    continue
                rows.append(line.split())
    except UnicodeDecodeError:
        raise VectorFileError(path, "not UTF-8 text") from None
    if "meta" not in header:
        raise VectorFileError(path, "hex header has no '# meta:' line")
    meta = _parse_meta(path, np.array(header["meta"]))
    meta.pop("hex_dropped_keys", None)
    spec = _resolve(path, meta)
    K = meta["K"]
    sparse = bool(meta.get("sparse"))
    scaled = bool(meta.get("block_scaled"))
    ka = K // 2 if sparse else K
    nsc = K // int(meta["scale_block"]) if scaled else 0
    want = 3 + ka + K + (ka if sparse else 0) + 2 * nsc
    try:
        count = int(header.get("count", len(rows)))
    except ValueError:
        raise VectorFileError(path, f"hex header 'count' is not an integer: {header['count']!r}") from None
    if count != len(rows):
        raise VectorFileError(path, f"hex header says {count} vectors, found {len(rows)} (truncated?)")
    for i, r in enumerate(rows):
        if len(r) != want:
            raise VectorFileError(path, f"vector {i} has {len(r)} fields, expected {want}")
    fmts = _bit_formats(spec)
    n = len(rows)
    table = np.array(rows, dtype=object).reshape(n, want)

    def parse(block: np.ndarray, fmt: Format | None, dtype, what: str) -> np.ndarray:
        try:
            vals = np.array([int(t, 16) for t in block.ravel()], dtype=object)
        except ValueError as exc:
            raise VectorFileError(path, f"{what}: not a hex number ({_short(exc)})") from None
        limit = 1 << (fmt.container_bits if fmt is not None else np.dtype(dtype).itemsize * 8)
        if vals.size and (min(vals) < 0 or max(vals) >= limit):
            raise VectorFileError(path, f"{what}: value out of range for {fmt.name if fmt else dtype}")
        return vals.astype(np.uint64).astype(dtype).reshape(block.shape)

    fam = table[:, 0].astype(str)
    c = parse(table[:, 1], fmts["c"], fmts["c"].container_dtype, "c")
    d = parse(table[:, 2], fmts["d"], fmts["d"].container_dtype, "d")
    a = parse(table[:, 3:3 + ka], fmts["a"], fmts["a"].container_dtype, "a")
    b = parse(table[:, 3 + ka:3 + ka + K], fmts["b"], fmts["b"].container_dtype, "b")
    extra: dict = {}
    if not np.all(fam == "-"):
        extra["family"] = fam
    if sparse:
        si_bits = 8
        m = header.get("widths", "")
        for part in m.split():
            if part.startswith("sparse_index="):
                si_bits = int(part.split("=", 1)[1])
        extra["sparse_index"] = parse(table[:, 3 + ka + K:3 + 2 * ka + K], None, np.dtype(f"u{si_bits // 8}"),
                                      "sparse_index")
    if scaled:
        at = want - 2 * nsc
        for key in SCALE_KEYS:
            extra[key] = parse(table[:, at:at + nsc], fmts[key], fmts[key].container_dtype, key)
            at += nsc
    vs = VectorSet(a, b, c, d, meta, extra, path)
    _validate_set(path, vs.arrays(), meta)
    return vs
