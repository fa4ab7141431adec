"""A set of golden vectors in memory (``VectorSet``), the one error a vector file raises, and the validation
every reader and writer shares (meta, shapes, dtypes, bit ranges, scales)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np

from ..catalog import get_instruction
from ..formats import Format
from ..model import InstructionSpec


REQUIRED = ("a", "b", "c", "d", "meta")


class VectorFileError(ValueError):
    """A vector file that cannot be used; the message is one line naming the file and the problem."""

    def __init__(self, path: "str | os.PathLike | None", problem: str):
        self.path = None if path is None else os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path is not None else problem)


@dataclass
class VectorSet:
    """Vectors in memory: bit arrays, the meta dictionary and any extra keys (``family``, ...)."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray
    meta: dict
    extra: dict = field(default_factory=dict)
    path: str | None = None

    @property
    def n(self) -> int:
        return int(len(self.c))

    @property
    def instruction(self) -> str:
        return str(self.meta["instruction"])

    @property
    def K(self) -> int:
        return int(self.meta["K"])

    @property
    def spec(self) -> InstructionSpec:
        return get_instruction(self.instruction)

    @property
    def sparse(self) -> bool:
        return bool(self.meta.get("sparse", False))

    @property
    def block_scaled(self) -> bool:
        return bool(self.meta.get("block_scaled", False))

    @property
    def family(self) -> np.ndarray | None:
        return self.extra.get("family")

    @property
    def scale_a(self) -> np.ndarray | None:
        return self.extra.get("scale_a")

    @property
    def scale_b(self) -> np.ndarray | None:
        return self.extra.get("scale_b")

    def arrays(self) -> dict:
        """Every array of the set by key, meta excluded."""
        return {"a": self.a, "b": self.b, "c": self.c, "d": self.d, **self.extra}


# --------------------------------------------------------------------------------------------
# validation shared by readers and writers

def _parse_meta(where, raw) -> dict:
    if isinstance(raw, dict):
        meta = raw
    else:
        arr = np.asarray(raw)
        if arr.dtype.kind not in "US" or arr.size != 1:
            raise VectorFileError(where, f"key 'meta' must be a JSON string, got a {arr.dtype} array of shape {arr.shape}")
        text = arr.reshape(()).item()
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise VectorFileError(where, "key 'meta' is not UTF-8 text") from None
        try:
            meta = json.loads(text)
        except json.JSONDecodeError as exc:
            raise VectorFileError(where, f"key 'meta' is not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(meta, dict):
        raise VectorFileError(where, f"key 'meta' must be a JSON object, got {type(meta).__name__}")
    if "instruction" not in meta:
        raise VectorFileError(where, "meta has no 'instruction'")
    if "K" not in meta:
        raise VectorFileError(where, "meta has no 'K'")
    if not isinstance(meta["instruction"], str):
        raise VectorFileError(where, f"meta 'instruction' must be a string, got {meta['instruction']!r}")
    K = meta["K"]
    if isinstance(K, float) and K.is_integer():
        meta["K"] = K = int(K)  # JSON writers that emit 16.0
    if isinstance(K, bool) or not isinstance(K, int) or K <= 0:
        raise VectorFileError(where, f"meta 'K' must be a positive integer, got {K!r}")
    return meta


def _resolve(where, meta: dict) -> InstructionSpec:
    try:
        spec = get_instruction(meta["instruction"])
    except (ValueError, TypeError) as exc:
        raise VectorFileError(where, f"unknown instruction {meta['instruction']!r}"
                              + (f" ({str(exc).split(';', 1)[1].strip().split(' (')[0]})" if ";" in str(exc) else ""))
    sparse_entry = ".mma.sp." in spec.name  # tcnumerics.sparse's naming rule for 2:4 entries
    if meta.get("sparse") and not sparse_entry:
        raise VectorFileError(where, f"meta says sparse but {spec.name} is not a structured-sparse instruction")
    if sparse_entry:
        meta["sparse"] = True  # the layout follows from the instruction
    model = spec.model
    scaled_entry = bool(getattr(model, "is_block_scaled", False))
    if meta.get("block_scaled") and not scaled_entry:
        raise VectorFileError(where, f"meta says block_scaled but {spec.name} is not a block-scaled instruction")
    if scaled_entry:
        for key, want in (("scale_format", model.scale_format.name), ("scale_block", model.scale_block)):
            if key in meta and meta[key] != want:
                raise VectorFileError(where, f"meta {key!r} is {meta[key]!r}, but {spec.name} takes {want!r}")
        meta["block_scaled"] = True  # like sparse: the layout follows from the instruction
        meta["scale_format"] = model.scale_format.name
        meta["scale_block"] = int(model.scale_block)
    K = meta["K"]
    # a sparse file's K is the dense B width; the datapath (spec.k) sees half of it
    per_instruction = 2 * spec.k if meta.get("sparse") else spec.k
    if K % per_instruction:
        raise VectorFileError(where, f"K={K} is not a multiple of {spec.name}'s K={per_instruction}")
    if K > per_instruction and spec.c_format != spec.d_format:
        raise VectorFileError(where, f"K={K} chains {spec.name}, which cannot chain "
                              f"(C is {spec.c_format.name}, D is {spec.d_format.name})")
    return spec


def _expected_shapes(meta: dict, n: int) -> dict:
    K = meta["K"]
    sparse = bool(meta.get("sparse"))
    if sparse and K % 2:
        raise VectorFileError(None, f"sparse K={K} must be even")
    shapes = {"a": (n, K // 2 if sparse else K), "b": (n, K), "c": (n,), "d": (n,)}
    if sparse:
        shapes["sparse_index"] = (n, K // 2)
    if meta.get("block_scaled"):
        block = int(meta["scale_block"])
        if K % block:
            raise VectorFileError(None, f"K={K} is not a multiple of the scale block {block}")
        shapes["scale_a"] = shapes["scale_b"] = (n, K // block)
    return shapes


SCALE_KEYS = ("scale_a", "scale_b")


def _check_scale_keys(where, meta: dict, spec: InstructionSpec, present) -> None:
    """Scales are required for a block-scaled instruction and refused for any other."""
    present = set(present)
    if meta.get("block_scaled"):
        missing = [k for k in SCALE_KEYS if k not in present]
        if missing:
            raise VectorFileError(where, f"{spec.name} is block-scaled but there is no "
                                  + " and no ".join(f"'{k}'" for k in missing)
                                  + f" ([N, K/{meta['scale_block']}] {meta['scale_format']} scale bits)")
    else:
        extra = [k for k in SCALE_KEYS if k in present]
        if extra:
            raise VectorFileError(where, f"key '{extra[0]}' given, but {spec.name} is not a block-scaled instruction")


def _bit_formats(spec: InstructionSpec) -> dict:
    fmts = {"a": spec.a_format, "b": spec.b_format, "c": spec.c_format, "d": spec.d_format}
    if getattr(spec.model, "is_block_scaled", False):
        fmts["scale_a"] = fmts["scale_b"] = spec.model.scale_format
    return fmts


def _check_header(where, key: str, shape: tuple, dtype: np.dtype, want_shape, fmt: Format | None) -> None:
    if tuple(shape) != tuple(want_shape):
        raise VectorFileError(where, f"key '{key}' has shape {tuple(shape)}, expected {tuple(want_shape)}")
    if fmt is not None:
        if dtype.kind != "u" or dtype.itemsize * 8 < fmt.container_bits:
            raise VectorFileError(where, f"key '{key}' has dtype {dtype}, expected unsigned {fmt.container_bits}-bit "
                                  f"bit patterns of {fmt.name}")
    elif key == "sparse_index":
        if dtype.kind not in "ui":
            raise VectorFileError(where, f"key 'sparse_index' has dtype {dtype}, expected integers")
    elif key == "family":
        if dtype.kind not in "US":
            raise VectorFileError(where, f"key 'family' has dtype {dtype}, expected strings")


def _check_values(where, key: str, arr: np.ndarray, fmt: Format | None) -> np.ndarray:
    """Range-check bit patterns held in a wider container; return them in the format's dtype."""
    if fmt is None:
        return arr
    if arr.dtype.itemsize * 8 > fmt.container_bits and arr.size and int(arr.max()) >> fmt.container_bits:
        raise VectorFileError(where, f"key '{key}' holds values wider than {fmt.container_bits} bits "
                              f"({fmt.name} patterns)")
    return arr.astype(fmt.container_dtype, copy=False)


def _validate_set(where, arrays: dict, meta) -> tuple[dict, InstructionSpec]:
    """Check a complete set of arrays (as written or read whole); returns (meta dict, spec)."""
    meta = _parse_meta(where, meta)
    spec = _resolve(where, meta)
    for key in ("a", "b", "c", "d"):
        if key not in arrays:
            raise VectorFileError(where, f"missing key '{key}'")
    if meta.get("sparse") and "sparse_index" not in arrays:
        raise VectorFileError(where, "meta says sparse but there is no 'sparse_index'")
    _check_scale_keys(where, meta, spec, arrays)
    c = np.asarray(arrays["c"])
    if c.ndim != 1:
        raise VectorFileError(where, f"key 'c' has shape {c.shape}, expected [N]")
    try:
        shapes = _expected_shapes(meta, len(c))
    except VectorFileError as exc:
        raise VectorFileError(where, exc.problem) from None
    fmts = _bit_formats(spec)
    if "family" in arrays:
        shapes["family"] = (len(c),)
    for key, arr in arrays.items():
        arr = np.asarray(arr)
        if arr.dtype.hasobject:
            raise VectorFileError(where, f"key '{key}' holds Python objects (pickled data is refused)")
        if key in shapes:
            _check_header(where, key, arr.shape, arr.dtype, shapes[key], fmts.get(key))
            arrays[key] = _check_values(where, key, arr, fmts.get(key))
    return meta, spec
