"""Unit mode: every GEMM as one chosen matrix unit computes it, under a quantisation recipe.

Semantics (``docs/torch.md`` states them for users; tests pin them):

1. Operands are converted to the operand format -- ``operand_format`` if given, else the
   instruction's A/B formats -- with one rounding (RNE, or stochastic rounding driven by a
   seeded generator).  With ``scaling`` they are first multiplied by a scale in FP32 (one RNE
   product) and the conversion saturates:

   * ``"tensor"``: ``scale = fp32(max_finite / amax)`` of the whole operand (Transformer Engine);
   * ``"row"``: one such scale per row of A and per column of B;
   * ``"mx"``: OCP MX -- 32-element K blocks (the instruction's ``scale_block``), UE8M0 scale
     ``2**(floor(log2(amax)) - emax(element format))``, elements RNE with saturation;
   * ``"nvfp4"``: 16-element K blocks, UE4M3 block scales ``(amax / 6) / global`` (RNE) under
     a per-tensor FP32 ``global = amax / (6 * 448)``.

   Operand formats narrower than the instruction's are passed on exactly (e.g. E4M3 data on a
   BF16 unit).
2. The GEMM runs through ``tcnumerics.gemm`` (chain over K, ``promote_every``, ``split_k``);
   block-scaled instructions (``"mx"``, ``"nvfp4"``) through ``tcnumerics.blockscale``, the
   block scales inside the unit.  Per-tensor and row descales (``1 / scale`` in FP32) are the
   GEMM epilogue's scales: ``acc * fp32(da * db)`` and ``(acc * db) * da``; NVFP4's global
   descales likewise ``acc * fp32(ga * gb)``.
3. On the FP32 result: ``alpha *`` (one RNE product), ``+ beta * C`` (``beta * C`` one RNE
   product, the sum one RNE addition), ``+ bias`` (one RNE addition), in that order.
4. One RNE conversion to the output dtype (the dtype torch would return).

Example:
    >>> import numpy as np
    >>> recipe = UnitRecipe.create(instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> A = np.full((2, 32), 1 + 2**-10); B = np.ones((32, 3))
    >>> recipe.matmul(A, B)[0].tolist()       # operands rounded to BF16 (1 + 2**-10 -> 1) first
    [32.0, 32.0, 32.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import arrays
from ..api import Instruction
from ..catalog import get_instruction
from ..formats import FloatFormat, Rounding, get_format
from ..gemm import gemm, plan_gemm
from ..model import InstructionSpec, UnitModel
from ..plan import interpret
from ..plan.nodes import AddC, Alpha, BlockScaledChain, Convert, Epilogue, Input, Node, Plan, Scale

__all__ = ["UnitRecipe", "epilogue", "epilogue_plan", "epilogue_steps", "SCALINGS"]

SCALINGS = (None, "tensor", "row", "mx", "nvfp4")
_FP32 = get_format("fp32")


@dataclass(frozen=True)
class UnitRecipe:
    """One unit-mode configuration: the instruction and how operands reach it.

    Build it with ``UnitRecipe.create(...)`` (names and values validated there).
    """

    spec: InstructionSpec
    operand_a: FloatFormat
    operand_b: FloatFormat
    scaling: str | None = None
    promote_every: int | None = None
    split_k: object = None
    rounding: str = "rne"
    seed: int = 0
    engine: str = "auto"

    @classmethod
    def create(cls, *, instruction=None, unit=None, operand_format=None, scaling: str | None = None,
               promote_every: int | None = None, split_k=None, rounding: str = "rne", seed: int = 0,
               engine: str = "auto") -> "UnitRecipe":
        """Validate the options (a clear error for each bad one) and build the recipe."""
        spec = _spec_of(instruction, unit)
        if scaling not in SCALINGS:
            raise ValueError(f"scaling: expected one of 'tensor', 'row', 'mx', 'nvfp4' or None, got {scaling!r}")
        if rounding not in ("rne", "stochastic"):
            raise ValueError(f"rounding: expected 'rne' or 'stochastic', got {rounding!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
        block_scaled = spec.model.is_block_scaled
        if block_scaled and scaling not in ("mx", "nvfp4"):
            raise ValueError(f"scaling: {spec.name} is block-scaled; pass scaling='mx' or 'nvfp4'")
        if scaling in ("mx", "nvfp4"):
            if not block_scaled:
                raise ValueError(f"scaling: {scaling!r} needs a block-scaled instruction "
                                 "(tcnumerics.blockscale.block_scaled_instructions()), got " + spec.name)
            want = ("ue4m3", 16) if scaling == "nvfp4" else ("ue8m0", 32)
            if (spec.model.scale_format.name, spec.model.scale_block) != want:
                raise ValueError(f"scaling: {scaling!r} needs {want[0]} scales per {want[1]} elements; {spec.name} "
                                 f"has {spec.model.scale_format.name} per {spec.model.scale_block}")
            if promote_every is not None or split_k is not None:
                raise ValueError("promote_every, split_k: not available for block-scaled instructions")
        fa, fb = _operand_formats(spec, operand_format)
        if (promote_every is not None or split_k is not None) and not block_scaled:
            # a one-element GEMM validates promote_every / split_k / engine now, not at the first call
            gemm(np.zeros((1, spec.k), np.float32), np.zeros((spec.k, 1), np.float32), instruction=spec,
                 promote_every=promote_every, split_k=split_k, engine=engine)
        return cls(spec, fa, fb, scaling, promote_every, split_k, rounding, int(seed), engine)

    def with_instruction(self, instruction) -> "UnitRecipe":
        """The same recipe on another instruction (e.g. ``backward_instruction``)."""
        return UnitRecipe.create(instruction=instruction, operand_format=None if self._own_formats() else
                                 (self.operand_a.name, self.operand_b.name), scaling=self.scaling,
                                 promote_every=self.promote_every, split_k=self.split_k, rounding=self.rounding,
                                 seed=self.seed, engine=self.engine)

    def _own_formats(self) -> bool:
        return (self.operand_a, self.operand_b) == (self.spec.a_format, self.spec.b_format)

    @property
    def acc_format(self) -> str:
        """The epilogue's format: FP32, or FP64 for FP64 units."""
        return "fp64" if self.spec.d_format.name == "fp64" else "fp32"

    def describe(self) -> str:
        parts = [self.spec.name]
        if not self._own_formats():
            parts.append(f"operands {self.operand_a.name} x {self.operand_b.name}")
        for name in ("scaling", "promote_every", "split_k"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)}")
        if self.rounding != "rne":
            parts.append(f"rounding={self.rounding} (seed {self.seed})")
        return ", ".join(parts)

    def plan(self, M: int, N: int, K: int, *, out_format: str = "fp32", alpha: float = 1.0, beta: float = 1.0,
             c_given: bool = False, bias_given: bool = False) -> Plan:
        """The plan of an [M, K] @ [K, N] call on this recipe: the GEMM (steps 1-2: the operands' quantisation is
        a note), the epilogue and the conversion (steps 3-4).

        >>> r = UnitRecipe.create(instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3", scaling="tensor",
        ...                       promote_every=128)
        >>> print(r.plan(64, 64, 256, out_format="bf16", bias_given=True).explain())
        unit recipe hopper.wgmma.m64n8k32.f32.e4m3.e4m3, scaling=tensor, promote_every=128: 64x64x256
        note: operands: e4m3 x e4m3, RNE, scaled by fp32(max_finite / amax) per tensor, saturating
          convert to bf16 (RNE)
            epilogue in fp32: alpha=1 (no product), + R(bias)
              scale: acc * fp32(scale_a * scale_b)
                promote every 128 over K[0:256): chains of hopper.wgmma.m64n8k32.f32.e4m3.e4m3 from +0, main += partial, RNE; main from +0
        """
        if self.scaling in ("mx", "nvfp4"):
            term = self.block_scaled_plan(-(-K // self.spec.k) * self.spec.k, scaled=self.scaling == "nvfp4")
        else:
            scales = {"tensor": "tensor", "row": "row"}.get(self.scaling)
            term = plan_gemm(M, N, K, instruction=self.spec, promote_every=self.promote_every, split_k=self.split_k,
                             scales=scales).root.term  # the FP32 accumulator (its conversion to FP32 dropped)
        root = epilogue_plan(out_format, alpha=alpha, beta=beta, c_given=c_given, bias_given=bias_given,
                             acc_format=self.acc_format, term=term).root
        return Plan(root, title=f"unit recipe {self.describe()}: {M}x{N}x{K}", notes=(self._quantisation(),))

    def _quantisation(self) -> str:
        how = {None: "", "tensor": ", scaled by fp32(max_finite / amax) per tensor, saturating",
               "row": ", scaled by fp32(max_finite / amax) per row of A / column of B, saturating",
               "mx": ", OCP MX block scales (UE8M0 per 32 elements)",
               "nvfp4": ", NVFP4 block scales (UE4M3 per 16 elements) under FP32 global scales"}[self.scaling]
        return f"operands: {self.operand_a.name} x {self.operand_b.name}, {self.rounding.upper()}{how}"

    # --- the GEMM --------------------------------------------------------------------------------

    def matmul(self, A, B, *, call_index: int = 0, engine: str | None = None) -> np.ndarray:
        """FP32 values (float64 array) of ``A @ B`` on the unit, descales applied; no epilogue.

        ``A`` [M, K] and ``B`` [K, N]: numeric arrays of any float type.  ``call_index`` seeds
        stochastic rounding (one stream per call, reproducible under ``seed``); ``engine``
        overrides the recipe's engine for this call (the GPU engine for CUDA tensors).
        """
        a, b = arrays.float64(A), arrays.float64(B)
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"A, B: expected [M, K] and [K, N], got {a.shape} and {b.shape}")
        if 0 in a.shape + b.shape:  # no products: an empty result, or for K = 0 the sum of none, +0 (no amax to scale)
            return arrays.namespace(a).zeros((a.shape[0], b.shape[1]))
        rng = np.random.default_rng([self.seed, call_index]) if self.rounding == "stochastic" else None
        if self.scaling in ("mx", "nvfp4"):  # block-scaled units run on the host (tcnumerics.blockscale)
            xp = arrays.namespace(a)
            return xp.asarray(self._block_scaled(arrays.to_host(a), arrays.to_host(b).T, rng))
        qa, da = self._quantize(a, self.operand_a, self.spec.a_format, rng, axis=1)
        qb, db = self._quantize(b, self.operand_b, self.spec.b_format, rng, axis=0)
        out = gemm(qa, qb, instruction=self.spec, promote_every=self.promote_every, split_k=self.split_k,
                   scale_a=da, scale_b=db, engine=engine or self.engine)
        return arrays.float64(out)

    def quantize(self, A, B, *, call_index: int = 0):
        """(A as the unit receives it, its FP32 descale or None, B likewise): steps 1 and 2 of ``matmul`` for a
        [M, K] x [K, N] call, the operands ``matmul`` hands ``tcnumerics.gemm`` (error attribution reads them).
        A batch ([batch, M, K] x [batch, K, N]) is quantised item by item in one pass, as ``matmul_batch`` does
        (descales [batch], or [batch, rows] for row scaling; not with stochastic rounding, one stream per item)."""
        a, b = arrays.float64(A), arrays.float64(B)
        batched = a.ndim == 3
        if batched and self.rounding == "stochastic":
            raise ValueError("quantize: stochastic rounding draws one stream per item; quantize a batch's items "
                             "one at a time (call_index + i)")
        rng = np.random.default_rng([self.seed, call_index]) if self.rounding == "stochastic" else None
        qa, da = self._quantize(a, self.operand_a, self.spec.a_format, rng, axis=1, batched=batched)
        qb, db = self._quantize(b, self.operand_b, self.spec.b_format, rng, axis=0, batched=batched)
        return qa, da, qb, db

    def matmul_batch(self, A, B, *, call_index: int = 0, engine: str | None = None):
        """``matmul`` of every ``A[i] @ B[i]`` ([batch, M, K] and [batch, K, N]), stacked: the same bits as the
        loop ``matmul(A[i], B[i], call_index=call_index + i)``, with the operands quantised for the whole batch at
        once (per-item scales) and multiplied by one batched ``gemm`` -- on a GPU an attention bmm's 32 heads cost one
        quantisation and one plan, not 32.

        >>> import numpy as np
        >>> r = UnitRecipe.create(instruction="hopper.wgmma.m64n8k32.f32.e4m3.e4m3", scaling="tensor")
        >>> A, B = np.ones((2, 3, 32)), np.ones((2, 32, 4))
        >>> A[1] *= 2
        >>> out = r.matmul_batch(A, B)
        >>> out.shape, bool((out[1] == r.matmul(A[1], B[1], call_index=1)).all())
        ((2, 3, 4), True)
        """
        a, b = arrays.float64(A), arrays.float64(B)
        if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
            raise ValueError(f"A, B: expected [batch, M, K] and [batch, K, N], got {a.shape} and {b.shape}")
        if 0 in a.shape + b.shape:  # an empty batch, M, N or K: nothing to quantise (no amax) or multiply
            return arrays.namespace(a).zeros((a.shape[0], a.shape[1], b.shape[2]))
        if self.rounding == "stochastic" or self.scaling in ("mx", "nvfp4") or a.shape[0] == 1:
            # one random stream per item (seeded by its call index); block scaling runs on the host per item
            return arrays.stack([self.matmul(a[i], b[i], call_index=call_index + i, engine=engine)
                                 for i in range(a.shape[0])])
        qa, da, qb, db = self.quantize(a, b)
        # one batched GEMM: item i is gemm(qa[i], qb[i], scale_a=da[i], scale_b=db[i]) bit for bit
        return arrays.float64(gemm(qa, qb, instruction=self.spec, promote_every=self.promote_every,
                                   split_k=self.split_k, scale_a=da, scale_b=db, engine=engine or self.engine))

    def _round(self, values: np.ndarray, fmt: FloatFormat, rng, overflow: str = "ieee") -> np.ndarray:
        if rng is None:
            return fmt.from_float(values, Rounding.RNE, overflow=overflow)
        # the host generator's bits, also for device values: the same seed gives the same roundings anywhere
        bits = arrays.namespace(values).asarray(rng.integers(0, 1 << 32, size=values.shape, dtype=np.uint64))
        return fmt.from_float(values, Rounding.SR, overflow=overflow, random_bits=bits, random_bit_count=32)

    def _quantize(self, x: np.ndarray, fmt: FloatFormat, inst_fmt: FloatFormat, rng, axis: int,
                  batched: bool = False):
        """(operand array in the instruction's format, FP32 descale or None) -- steps 1 and 2.  ``batched``: ``x``
        is [batch, ...] and each item has its own scales (descales [batch] or [batch, rows])."""
        descale = None
        xp = arrays.namespace(x)
        if self.scaling in ("tensor", "row"):
            lead = int(batched)
            over = (axis + lead,) if self.scaling == "row" else tuple(range(lead, x.ndim))
            amax = xp.max(xp.abs(x), axis=over, keepdims=True)
            amax = xp.where(xp.isfinite(amax) & (amax > 0), amax, fmt.max_finite)
            scale = _FP32.round(fmt.max_finite / amax)
            x = _FP32.round(x * scale)
            descale = _FP32.round(1.0 / scale)
            if batched:
                descale = descale.reshape(x.shape[0], -1) if self.scaling == "row" else descale.reshape(-1)
            else:
                descale = descale.reshape(-1) if self.scaling == "row" else float(descale.reshape(()))
            bits = self._round(x, fmt, rng, overflow="saturate")
        else:
            bits = self._round(x, fmt, rng)
        if fmt != inst_fmt:
            values = fmt.to_float(bits)
            inner = inst_fmt.from_float(values)
            with np.errstate(invalid="ignore"):
                if not bool(xp.array_equal(inst_fmt.to_float(inner), values, equal_nan=True)):
                    raise ValueError(f"operand_format: {fmt.name} values are not exact in {self.spec.name}'s "
                                     f"{inst_fmt.name} operands")
            bits = inner
        return inst_fmt.to_array(bits), descale

    def _block_scaled(self, a: np.ndarray, b_t: np.ndarray, rng) -> np.ndarray:
        """MX / NVFP4 through the block-scaled instruction: scales inside the unit, globals after."""
        spec, model = self.spec, self.spec.model
        K = a.shape[1]
        k_pad = -(-K // spec.k) * spec.k
        a_bits, sa, ga = _block_quantize(np.pad(a, ((0, 0), (0, k_pad - K))), spec.a_format, model, self.scaling,
                                         self, rng)
        b_bits, sb, gb = _block_quantize(np.pad(b_t, ((0, 0), (0, k_pad - K))), spec.b_format, model,
                                         self.scaling, self, rng)
        plan = self.block_scaled_plan(k_pad, scaled=ga != 1.0 or gb != 1.0)
        return interpret.run(plan, {"A": a_bits, "B": b_bits, "scale_bits_a": sa, "scale_bits_b": sb,
                                    "scale_a": np.float64(ga), "scale_b": np.float64(gb)})

    def block_scaled_plan(self, k_pad: int, scaled: bool = True) -> Node:
        """MX / NVFP4: the block-scaled chain over the padded K, then NVFP4's global descales ``acc * fp32(ga *
        gb)`` (``scaled``)."""
        chain = BlockScaledChain(self.spec, 0, k_pad)
        return Scale(chain, "tensor") if scaled else chain


def _block_quantize(x: np.ndarray, elem: FloatFormat, model: UnitModel, scaling: str, recipe: UnitRecipe, rng):
    """Rows of [R, K] values -> (element bits, scale bits [R, K / block], global FP32 descale)."""
    block = model.scale_block
    scale_fmt = model.scale_format
    R, K = x.shape
    blocks = x.reshape(R, K // block, block)
    amax = np.max(np.abs(blocks), axis=2)
    glob = 1.0
    if scaling == "mx":
        # OCP MX v1.0: shared exponent floor(log2(amax)) - emax of the element format
        e = np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - elem.emax
        e = np.clip(e, -127, 127)
        scale_bits = (e + 127).astype(np.uint8)
        scale = np.exp2(e)
    else:
        # NVFP4: a per-tensor FP32 scale brings block scales into UE4M3's range
        tmax = float(np.max(amax)) if amax.size else 0.0
        glob = float(_FP32.round(np.array(tmax / (elem.max_finite * scale_fmt.max_finite)))) if tmax > 0 else 1.0
        glob = glob if glob > 0 else 1.0
        scale_bits = scale_fmt.from_float(amax / elem.max_finite / glob, Rounding.RNE, overflow="saturate")
        scale = scale_fmt.to_float(scale_bits) * glob
    safe = np.where(scale > 0, scale, 1.0)[:, :, None]
    elems = recipe._round((blocks / safe).reshape(R, K), elem, rng, overflow="saturate")
    if scaling == "nvfp4":  # a zero block scale zeroes the block (elements must not be inf/NaN)
        elems = np.where(np.repeat(scale, block, axis=1) > 0, elems, 0).astype(elems.dtype)
    return elems, scale_bits.astype(np.uint8), glob


def epilogue_steps(*, alpha: float = 1.0, beta: float = 1.0, c_given: bool = False,
                   bias_given: bool = False) -> tuple:
    """Step 3 as plan steps: ``alpha *``, ``+ beta * C`` (C rounded to the accumulator format, the product
    rounded), ``+ bias`` (rounded to the accumulator format), one RNE operation each."""
    steps = (Alpha(alpha),)
    if c_given and beta != 0:
        steps += (AddC("C", beta, round_operand=True),)
    if bias_given:
        steps += (AddC("bias", round_operand=True),)
    return steps


@lru_cache(maxsize=256)  # a plan is frozen: one per call kind, shared
def epilogue_plan(out_format: str, *, alpha: float = 1.0, beta: float = 1.0, c_given: bool = False,
                  bias_given: bool = False, acc_format: str = "fp32", scales: str | None = None,
                  term: Node | None = None) -> Plan:
    """Steps 3 and 4 as a plan on ``term`` (default: the bound accumulator ``acc``), after ``_scaled_mm``'s
    ``scales`` ("tensor" or "row") where given.

    >>> print(epilogue_plan("bf16", c_given=True, bias_given=True).explain())
    convert to bf16 (RNE)
      epilogue in fp32: alpha=1 (no product), + R(C), + R(bias)
        acc (FP32 values)
    """
    term = Input("acc") if term is None else term
    if scales is not None:
        term = Scale(term, scales)
    steps = epilogue_steps(alpha=alpha, beta=beta, c_given=c_given, bias_given=bias_given)
    return Plan(Convert(Epilogue(term, steps, acc_format), get_format(out_format).name))


def epilogue(acc: np.ndarray, out_format: str, *, alpha: float = 1.0, C=None, beta: float = 1.0,
             bias=None, acc_format: str = "fp32", scale_a=None, scale_b=None) -> np.ndarray:
    """Steps 3 and 4 (after ``_scaled_mm``'s descales ``scale_a``/``scale_b`` where given): ``alpha``,
    ``beta * C`` and ``bias`` in ``acc_format`` (FP32; FP64 for FP64 units), one RNE operation each, then one RNE
    conversion to ``out_format`` -- ``epilogue_plan`` run by the interpreter.

    >>> epilogue(np.array([1.0]), "bf16", C=np.array([2.0**-9]), beta=1.0).tolist()   # 1 + 2**-9 ties to 1
    [1.0]
    """
    scales = None
    if scale_a is not None:
        scale_a, scale_b, scales = _descales(scale_a, scale_b)
    plan = epilogue_plan(str(out_format), alpha=float(alpha), beta=float(beta), c_given=C is not None,
                         bias_given=bias is not None, acc_format=str(acc_format), scales=scales)
    return interpret.run(plan, {"acc": acc, "C": C, "bias": bias, "scale_a": scale_a, "scale_b": scale_b})


def _descales(sa, sb):
    """``_scaled_mm``'s FP32 scales shaped for the ``Scale`` node: two scalars (per tensor) or rows and columns."""
    sa, sb = arrays.float64(sa), arrays.float64(sb)
    if sa.size == 1 and sb.size == 1:
        return sa.reshape(()), sb.reshape(()), "tensor"
    return sa.reshape(-1, 1), sb.reshape(1, -1), "row"


def _spec_of(instruction, unit) -> InstructionSpec:
    if (instruction is None) == (unit is None):
        raise ValueError("instruction, unit: pass exactly one (a catalog name / InstructionSpec, or a unit)")
    if unit is not None:
        if isinstance(unit, InstructionSpec):
            return unit
        if isinstance(unit, UnitModel):
            # a bare datapath: one group per instruction, C entering the group
            return InstructionSpec(name=f"custom.unit.k{unit.group_size}", k=unit.group_size, model=unit,
                                   provenance="user-defined unit")
        raise TypeError(f"unit: expected an InstructionSpec or UnitModel, got {type(unit).__name__}")
    if isinstance(instruction, Instruction):
        return instruction.spec
    if isinstance(instruction, InstructionSpec):
        return instruction
    if isinstance(instruction, str):
        return get_instruction(instruction)
    raise TypeError(f"instruction: expected a catalog name or InstructionSpec, got {type(instruction).__name__}")


def _operand_formats(spec: InstructionSpec, operand_format) -> tuple[FloatFormat, FloatFormat]:
    if operand_format is None:
        fa, fb = spec.a_format, spec.b_format
    elif isinstance(operand_format, (tuple, list)) and len(operand_format) == 2:
        fa, fb = (get_format(f) for f in operand_format)
    else:
        fa = fb = get_format(operand_format)
    for name, f in (("A", fa), ("B", fb)):
        if not isinstance(f, FloatFormat):
            raise ValueError(f"operand_format: {name} format {f.name} is not a floating-point format")
    if spec.model.is_block_scaled and (fa, fb) != (spec.a_format, spec.b_format):
        raise ValueError(f"operand_format: {spec.name} takes {spec.a_format.name} x {spec.b_format.name} elements")
    return fa, fb
