"""Which kernel family cuBLAS runs for a torch GEMM call on a Hopper GPU model, and whether its numerics are verified.

``select(call)`` returns a ``Plan``: the ``Structure`` to execute, the family's name, and
``modelled`` -- True only where the family's structure replayed bit-exactly on the device for
this kind of call and this shape range, and the call's GPU model (``call.gpu``) has tables covering
its kind (``gpus.coverage``; otherwise the plan is the reference model's choice, flagged).  Order
(``choice.py``): a measured launch whose grid gives the split (``launches.py``: every call the GPU model's
launch table measured, ``launches.launch_count(gpu)``), the bit-verified table (``measured.py``), then predictions from the launches around the call
(flagged).  Evidence: the op survey (``lab/device_library/survey_ops.py``, 1,408 calls on an H100,
torch 2.11 / cuBLAS 13.1.0.3) and the table ``h100_measured.json`` fitted from it
(``lab/device_library/fit_table.py``).

The rule (docs/gemm.md has the evidence):

* BF16/FP16, K, N multiples of 8: nvjet (wgmma k16 chain over all of K). Split-K into S equal
  slices of 64-element K-tiles, FP32 slice sums in order, when the output grid is small
  against the GPU's SMs (``gpus.sms``) and K is long.  S is cuBLAS's heuristic: taken from the measured table;
  elsewhere predicted (``split_rule``, about ``min(ceil(tiles / 22), sms / CTAs)``) and flagged not modelled.
  No split is modelled where a measured unsplit call needs at least as much K per output tile
  and no measured split call needs less (a monotone frontier).
* Epilogues: bias (F.linear, addmm with a row C, beta = 1) ``alpha * acc + bias`` in FP32; addmm
  beta = 1, alpha = 1 ``cvt(cvt(acc) + C)``; general alpha, beta ``fma(beta, C, alpha * acc)``.
* Everything else (CUTLASS fallbacks, gemmSN/gemv/dot kernels, FP32 FFMA kernels, TF32, FP8)
  as ``_select_*`` below says, each flagged where it was not verified.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from ..plan.nodes import Node, Plan as PlanTree
from . import choice, cutlass_half, gpus, launches, measured, simt, streamk, structure, unseen
from .calls import Call, TableKey, epilogue_of  # noqa: F401 - re-exported: the public names selection always had
from .choice import SHORT_K, FRONTIER_REASON  # noqa: F401 - re-exported (the value lives in choice)
# by name: nvjet slices whole K-tiles as sm75 CUTLASS does, and fit_cutlass_half.py swaps only cutlass_half's rule
from .cutlass_half import parallel_slices, tile_slices
from .kernel_names import nvjet_epilogue
from .launches import Launch
from .measured import measured_table  # noqa: F401 - re-exported
from .structure import StreamK, Structure

PROVENANCE = "measured on " + gpus.selection_provenance(gpus.reference_gpu())  # the manifest's words (gpus.json)
WGMMA = {"bf16": "hopper.wgmma.m64n8k16.f32.bf16.bf16", "fp16": "hopper.wgmma.m64n8k16.f32.f16.f16",
         "tf32": "hopper.wgmma.m64n8k8.f32.tf32.tf32"}


@dataclass(frozen=True)
class Plan:
    """What the library predicts for a call: the family, its structure, and whether it is verified."""

    family: str
    structure: Structure
    modelled: bool
    reason: str = PROVENANCE
    call: Call | None = field(default=None, compare=False)
    launch: Launch | None = field(default=None, compare=False)  # the launch it was built from (measured or predicted)
    root: Node | None = field(default=None, compare=False, repr=False)  # the plan tree itself, where no kernel's
    # structure states it (a call with nothing to multiply, which torch answers without a GEMM)

    @property
    def kernel(self) -> str:
        return self.family

    @property
    def gpu(self) -> str | None:
        """The GPU model the plan is for (its call's)."""
        return self.call.gpu if self.call is not None else None

    @property
    def split_k(self):
        return self.structure.split_k

    def describe(self) -> str:
        flag = "modelled" if self.modelled else f"NOT modelled ({self.reason})"
        what = self.structure.describe() if self.root is None else f"{self.family}: {self.reason}"
        return f"{what} -- {flag}"

    def tree(self) -> PlanTree:
        """The plan tree ``structure.run`` follows for this call (its whole shape; scales and epilogue as the call
        passes them).  ``explain()`` prints it."""
        c = self.call
        if c is None:
            raise ValueError("tree: this plan has no call (build it with select(call) or an op's .plan())")
        title = (f"{c.op} {'%d x ' % c.b if c.b > 1 else ''}{c.M}x{c.N}x{c.K} {c.fmt} -> {c.out} on {c.gpu}: "
                 f"{self.family}")
        flag = "modelled" if self.modelled else f"NOT modelled: {self.reason}"
        if self.root is not None:  # no kernel: the plan is the call's own (torch's answer without a GEMM)
            return PlanTree(self.root, title=title, notes=(self.reason, flag) if self.modelled else (flag,))
        A = np.broadcast_to(np.zeros((), np.float32), (c.M, c.K))  # shapes only: nothing is computed
        B = np.broadcast_to(np.zeros((), np.float32), (c.K, c.N))
        sa, sb = _scales_of(c)
        p = structure.plan(self.structure, A, B, out_format=c.out, alpha=c.alpha, beta=c.beta, scale_a=sa,
                           scale_b=sb, bias=np.zeros(c.N) if c.bias else None)
        return PlanTree(p.root, title=title, notes=(p.title, *p.notes, flag))

    def explain(self) -> str:
        """What the library predicts cuBLAS computes for this call on its GPU model, one plan node a line.

        >>> from tcnumerics.library import Call
        >>> print(select(Call("matmul", "bf16", "bf16", 64, 64, 8192, gpu="h100")).explain())  # doctest: +ELLIPSIS
        matmul 64x64x8192 bf16 -> bf16 on h100: ...splitK...
        ...
        """
        return self.tree().explain()


def _scales_of(c: Call):
    """Stand-in FP32 scales of the shapes a ``scaled_mm`` call passes (for its plan tree), else (None, None)."""
    if c.op != "scaled_mm":
        return None, None
    if c.scales == "rowwise":
        return np.ones(c.M), np.ones(c.N)
    if c.scales == "blockwise":
        return np.ones((c.M, -(-c.K // 128))), np.ones((-(-c.K // 128), -(-c.N // 128)))
    return np.ones(()), np.ones(())


def select(c: Call) -> Plan:
    """The plan for ``c`` on its GPU model (``c.gpu``): where that model's tables do not cover the call kind
    (``gpus.coverage``: never measured on it, nor shown to agree with a measured model), the plan is the reference
    model's choice, flagged, its reason naming the GPU and what is missing.

    >>> select(Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)).modelled
    True
    >>> p = select(Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True, gpu="a100"))
    >>> p.modelled, p.reason.startswith("gpu 'a100'")
    (False, True)
    """
    cov = gpus.coverage(c.gpu, c.kind())
    if c.op == "scaled_mm":
        plan = _select_fp8(c)
    elif c.fmt == "fp32":
        plan = _select_fp32(c)
    else:
        plan = _select_half(c)
    if cov.covered:
        return plan
    return replace(plan, modelled=False, reason=f"{cov.reason}; {plan.reason}")


def plan_from_launch(c: Call, launch: Launch) -> Plan | None:
    """The plan of ``c`` built from a given launch (a measured one, or one cuBLAS was seen to run: the self-check)
    as ``select`` builds a measured launch's; None where the launch's family is not identified."""
    base, tile = _base(c)
    return _from_launch(c, base, tile, found=(launch, c.gpu))


def _base(c: Call) -> tuple[Structure, int]:
    """The op class's default structure (before a launch or rule refines it) and its K-tile."""
    if c.op == "scaled_mm":
        return _fp8_base(c), 128
    if c.fmt == "fp32":
        return _fp32_base(c), 8
    return Structure("nvjet_sm90 (wgmma k16 chain)", instruction=WGMMA[c.fmt], epilogue=epilogue_of(c)), 64


def _provenance(c: Call) -> str:
    """Where the tables that planned ``c`` come from (``gpus.selection_provenance``: the manifest's line for the
    model's tables), and, for a borrowed kind, the agreement."""
    src = gpus.coverage(c.gpu, c.kind()).tables[-1]
    return f"measured on {gpus.selection_provenance(src)}" + _borrowed(c, src)


def _borrowed(c: Call, src: str) -> str:
    """What a table of another model than the call's means here: a kind shown to agree, or only a guess."""
    if src == c.gpu:
        return ""
    if gpus.coverage(c.gpu, c.kind()).covered:
        return f" (the {src}'s table: this call kind was shown to agree on the {c.gpu})"
    return f" (the {src}'s table, not the {c.gpu}'s)"


LAUNCH_PROVENANCE = f"launch measured ({gpus.launch_survey(gpus.reference_gpu())}): "  # the reference model's


def _launch_provenance(c: Call, src: str | None) -> str:
    """Which survey measured the launch: the call's own model's (the manifest's ``launch_survey`` line, e.g.
    ``LAUNCH_PROVENANCE``), else the model that measured it."""
    src = src or c.gpu
    survey = gpus.launch_survey(src) if src == c.gpu else None
    if survey:
        return f"launch measured ({survey}): "
    return f"launch measured (on the {src.upper()}: {gpus.provenance_line(src)}{_borrowed(c, src)}): "


def _measured(c: Call, base: Structure, family: str, tile: int) -> Plan | None:
    """A call kind measured on the device: an nvjet launch with a readable grid; else its bit-verified structure;
    else its measured launch; else the table's unverified entry (flagged)."""
    launched = _from_launch(c, base, tile)
    if launched is not None and launched.modelled and not c.fmt == "fp32":
        return launched  # S from the grid: where the sampled bits allowed two slice counts (57 calls), the launch decides
    entry = measured.entry(c)
    if entry is not None and entry.get("verified"):
        return _from_table(c, base, family, tile)
    return launched or _from_table(c, base, family, tile)


def _from_table(c: Call, base: Structure, family: str, tile: int) -> Plan | None:
    entry = measured.entry(c)
    if entry is None:
        return None
    split = entry.get("split")
    fields = {k: entry[k] for k in ("instruction", "input_rounding", "promote_every", "k_tile", "k_residue",
                                    "epilogue", "split_interleave", "split_reduce", "split_partial_format")
              if k in entry}
    s = base.with_(split_k=tuple(split) if split else None, **fields)
    n_split = len(split) if split else (s.split_interleave or 0)
    how = " in place" if s.split_reduce == "serial" else " + splitKreduce"
    fam = entry.get("family", family) + (f" splitK x{n_split}{how}" if n_split else "")
    if entry.get("verified"):
        where = (entry.get("sources") or ["the bit table"])[0]  # capture#id of its first measurement
        return Plan(fam, s, True, _provenance(c) + f"; this call measured ({where}: {entry.get('kernel', '')[:60]})", c)
    return Plan(fam, s, False, entry.get("reason", "measured call whose structure was not identified"), c)


def _from_launch(c: Call, base: Structure, tile: int, found: tuple[Launch, str] | None = None) -> Plan | None:
    """The plan of a call whose launch the kernel survey measured (``launches.py``; ``found``: a given launch and
    the model that ran it): the kernel family gives the structure, its launch grid the split-K slice count."""
    found = found or launches.find_launch(c)
    if found is None:
        return None
    launch, src = found
    if launch.main.startswith("nvjet"):
        return _nvjet_launch_plan(c, base, launch, tile, src)
    if simt.is_simt_kernel(launch.main):
        return _simt_launch_plan(c, base, launch, src)
    if c.fmt == "fp32":
        return _fp32_launch_plan(c, base, launch, src)
    if c.fmt in ("bf16", "fp16") and cutlass_half.parse_name(launch.main):
        return _cutlass_half_launch_plan(c, base, launch, src)
    return None  # gemv fallbacks of BF16/FP16: the rules below (flagged)


def _cutlass_half_launch_plan(c: Call, base: Structure, launch: Launch, src: str | None = None) -> Plan | None:
    """A BF16/FP16 call on a CUTLASS 2.x fallback kernel: the structure read off its launch (``cutlass_half.py``:
    169 of 169 captured calls), modelled where that family label was captured."""
    s, verified = cutlass_half.cutlass_half_structure(c, base, launch)
    if s is None:
        return None
    short = re.sub(r"^void |^cutlass::Kernel2<", "", launch.main).split("(")[0].rstrip(">")[:70]
    n = len(s.split_k or ()) or 1
    fam = short + (f" split-K x{n}" + (" in place" if s.split_reduce == "serial" else " + splitKreduce") if n > 1
                   else "")
    if not verified:
        return Plan(fam + " (structure by analogy)", s, False, f"cuBLAS launches {short} here; this combination of "
                    "kernel, split kind and epilogue was never captured (built by the rule of the captured ones)", c,
                    launch)
    return Plan(fam, s, True, _launch_provenance(c, src) + f"{short}, grid z = {launch.grid_z}", c, launch)


def _simt_structure(c: Call, base: Structure, launch: Launch) -> tuple[Structure, bool]:
    """(structure, verified) of a SIMT launch (``simt.py``: gemmSN 40/40, gemv / largek 71/71 captured calls, and
    device probes): the kernel's own FFMA order, the launch's threads per output (gemvx) and K slices (grid z of
    largek and of gemvx + splitKreduce), the epilogue ``cvt(fma(beta, C, alpha * acc))`` (C joins as beta * C,
    also at beta = 1).  Verified where ``simt.modelled`` says the order was pinned for that K; the gemv and largek
    epilogues only at alpha = 1 and without C (largek scales C in place before the slices add into it)."""
    name, fam = launch.main, simt.family(launch.main)
    per_matrix_z = launch.grid_z // c.b if c.b > 1 and launch.grid_z % c.b == 0 else launch.grid_z
    slices = per_matrix_z if fam == "largek" or (fam.startswith("gemvx") and "splitKreduce" in launch.text) else 1
    lanes = None
    if fam in ("gemvx_N", "gemvx_T"):
        lanes = simt.gemvx_lanes(name, c.N if c.M == 1 else c.M, max(1, launch.ctas // max(1, launch.grid_z)))
    epi = {"badd": "bx"}.get(epilogue_of(c), epilogue_of(c))
    s = base.with_(instruction=None, input_rounding=None, split_k=None, split_interleave=None, epilogue=epi,
                   simt_kernel=name, simt_lanes=lanes, simt_slices=slices)
    plain_epilogue = c.alpha == 1 and epi in ("plain", "bias")
    return s, simt.modelled(name, c.K, slices, lanes) and (fam.startswith("gemmSN") or plain_epilogue)


def _simt_launch_plan(c: Call, base: Structure, launch: Launch, src: str | None = None) -> Plan:
    s, verified = _simt_structure(c, base, launch)
    short = simt.family(launch.main) or launch.main.split("<")[0].replace("void ", "")
    if not verified:
        return Plan(short + " (order not pinned here)", s, False, f"cuBLAS launches {short} here; its summation "
                    "order was pinned by captures and device probes only for other K, slice counts or epilogues", c,
                    launch)
    return Plan(short + f" (FFMA lanes{f' x{s.simt_lanes}' if s.simt_lanes else ''}"
                f"{f', {s.simt_slices} slices' if s.simt_slices > 1 else ''})", s, True,
                _launch_provenance(c, src) + f"{short}; its FFMA order identified from captures and device probes "
                "(lab/device_library/probe_simt.py, probe_simt_device.py)", c, launch)


def _nvjet_launch_plan(c: Call, base: Structure, launch: Launch, tile: int, src: str | None = None) -> Plan:
    name = launch.main
    epi = nvjet_epilogue(name) or base.epilogue
    S = launches.nvjet_split_count(launch, c)
    short = name.split("(")[0][:70]
    if S is None:  # more work units than one wave of CTAs: the grid hides S; cuBLAS's rule predicts it
        s = base.with_(epilogue=epi, split_k=tile_slices(c.K, max(2, _predicted_split(c)), tile))
        return Plan(f"{short} splitK x{len(s.split_k or ())} (predicted)", s, False,
                    "split-K slice count predicted: the measured launch fills a whole wave, so its grid does not "
                    f"give the slice count ({name[:60]}, {launch.ctas} CTAs)", c, launch)
    s = base.with_(epilogue=epi, split_k=tile_slices(c.K, S, tile))
    fam = short + (f" splitK x{len(s.split_k)} + splitKreduce" if s.split_k else "")
    return Plan(fam, s, True, _launch_provenance(c, src) + f"{short}, {launch.ctas} CTAs", c, launch)


def _unseen_plan(c: Call, base: Structure, tile: int, frontier: bool = True) -> Plan | None:
    """An unmeasured call not bracketed by agreeing launches of its own (N, K) (``_bracketed``): the launch
    ``unseen.predict_launch`` predicts from the nearest measured shapes, planned as a measured launch would be,
    and flagged (leave-pair-out on the table: the bits-relevant kernel class and split count right for ~87% of
    launches).  None where the predicted kernel is not an nvjet, gemmSN, CUTLASS 2.x or FP32/TF32 launch."""
    if choice.bracketed(c) or (frontier and choice.frontier_modelled(c)):
        return None
    launch = unseen.predict_launch(c)
    if launch is None:
        return None
    if launch.main.startswith("nvjet"):
        p = _nvjet_launch_plan(c, base, launch, tile)
    elif simt.is_simt_kernel(launch.main):
        p = _simt_launch_plan(c, base, launch)
    elif c.fmt == "fp32":
        p = _fp32_launch_plan(c, base, launch)
    elif cutlass_half.parse_name(launch.main):
        p = _cutlass_half_launch_plan(c, base, launch)
    else:
        return None
    if p is None:
        return None
    family = p.family if "predicted" in p.family else p.family + " (predicted)"
    return replace(p, family=family, modelled=False, launch=launch,
                   reason=f"launch predicted from the nearest measured shapes (unseen.py: {launch.main[:50]}): "
                          f"cuBLAS's choice at {c.M} x {c.N} x {c.K} was not measured")


_S1688_TILE = re.compile(r"s1688gemm_\d+x\d+_(\d+)x\d+")


def _cutlass_slices(K: int, S: int) -> tuple[int, ...] | None:
    """CUTLASS split-K over the grid's S slices: ceil(K / S) rounded up to 32 elements, or to 4 where 32 would
    give fewer than S slices (H100: 34 of 34 captured SIMT / s1688 launches outside the bit table, and 17x33x65)."""
    slices = parallel_slices(K, S, 32)
    return slices if slices and len(slices) == S else parallel_slices(K, S, 4)


_IN_PLACE_XMMA = ("here, in place (after a Memset): its slices land in the order their CTAs finish -- slice order for "
                  "32 of 35 captured calls (every grid spanning several waves), another order where the grid may fit "
                  "in one (lab/device_library/probe_xmma_inplace.py)")


def _streamk_structure(c: Call, base: Structure, launch: Launch) -> tuple[Structure, str | None]:
    """TF32 stream-K (``streamk.py``: 31 of 31 captured calls): the structure, and why it is flagged where it is --
    an output's value depends on its tile when some tiles are shared and others not, so sampled outputs need
    their positions (``rows=``/``cols=``), and which tiles are shared then depends on the schedule's band width
    where the tile grid has several rows and columns (``streamk.swizzle_for``: fitted on 24 probed and 7 captured
    shapes, undetermined at CTA counts never probed)."""
    tile = streamk.parse_tile(launch.main)
    args = (c.M, c.N, c.K, launch.ctas, tile)
    width = streamk.swizzle_for(*args)
    reduce_kernel = any("split_k" in k and k != launch.main for k in launch.kernels)
    s = base.with_(stream_k=StreamK(c.M, c.N, c.K, launch.ctas, tile, width or 1, reduce_kernel))
    if streamk.position_dependent(*args) and not c.positions_known:
        return s, ("the stream-K kernel shares some output tiles among CTAs and not others, so an output's bits "
                   "depend on its position: pass rows= and cols= (the samples' places in the whole call)")
    if width is None and streamk.swizzle_matters(*args):
        return s, "which tiles the stream-K schedule shares depends on its band width, not determined at this shape"
    if c.op == "linear" and not c.bias:
        return s, ("TF32 stream-K under F.linear without a bias: 1 of the 3 captured calls (2176 x 512 x 9472, "
                   "tile 128 x 256, 102 CTAs) is not reproduced, so the class is not verified")
    p = streamk.plan(*args)
    if streamk.position_dependent(*args) and launch.ctas % p.shared:
        return s, ("the stream-K segment count CTAs // shared tiles was wrong at 1 of 7 measured shapes (768 x 11008 x "
                   "4096) where the shared tiles do not divide the CTAs")
    return s, None


def _fp32_launch_structure(c: Call, base: Structure, launch: Launch) -> tuple[Structure | None, str | None]:
    """(structure, why flagged) of an FP32/TF32 launch: the families the bit captures identified, with grid z as
    S (why flagged: None where the structure is verified for such launches); (None, None) where the family's
    reduction order is not identified."""
    name, serial = launch.main, launch.in_place
    if simt.is_simt_kernel(name):
        s, verified = _simt_structure(c, base, launch)
        return s, None if verified else "its summation order was pinned only for other K, slices or epilogues"
    if "sm90_xmma_gemm" in name and "tf32" in name and "segment_k_on" in name and c.b == 1:
        return _streamk_structure(c, base, launch)
    S = launch.grid_z // c.b if launch.grid_z % c.b == 0 else launch.grid_z  # batched calls: z = batch x S
    reduce = "splitKreduce" in launch.text
    ffma = base.with_(instruction=None, input_rounding=None)
    if "sm90_xmma_gemm" in name and "tf32" in name and "segment_k_off" in name and S == 1 and not reduce:
        return base, None  # one chain per output, also after a Memset (41 of 41 captured such calls)
    if "sm80_xmma_gemm_f32f32_f32f32" in name:  # in place (after a Memset): 8 of 10 captured calls -> a guess
        return ffma.with_(k_tile=8, split_interleave=S if S > 1 else None,
                          split_reduce="serial" if serial else "parallel"), _IN_PLACE_XMMA if serial else None
    if "cutlass_80_simt_sgemm" in name and (reduce or serial or S == 1):
        return ffma.with_(split_k=_cutlass_slices(c.K, S), split_reduce="serial" if serial else "parallel"), None
    if "s1688gemm" in name and (reduce or S == 1) and not serial:
        m = _S1688_TILE.search(name)
        return base.with_(instruction="hopper.mma.m16n8k8.f32.tf32.tf32.f32", input_rounding="rne",
                          k_tile=int(m.group(1)) if m else 32, k_residue="first",
                          split_k=_cutlass_slices(c.K, S)), None
    return None, None


def _fp32_launch_plan(c: Call, base: Structure, launch: Launch, src: str | None = None) -> Plan:
    """The plan of a measured FP32/TF32 launch: modelled for the identified families, flagged otherwise."""
    short = re.sub(r"^void |^cutlass::Kernel2<", "", launch.main).split("(")[0].split("<")[0].rstrip(">")[:70]
    s, flagged = _fp32_launch_structure(c, base, launch)
    if s is None:
        split = " with split-K" if launch.grid_z > c.b or launch.in_place else ""
        return Plan(f"{short} (measured launch, structure not identified)", base, False,
                    f"cuBLAS launches {short}{split} here; its reduction order was not identified bit-exactly "
                    "(stream-K, in-place xmma or tensor-op split-K, gemmSN/gemv)", c, launch)
    n = len(s.split_k or ()) or s.split_interleave or 1
    fam = short + (f" split-K x{n}" if n > 1 else "") + (" in place" if launch.in_place else "")
    if s.stream_k is not None:
        fam = short + f" stream-K ({launch.ctas} CTAs)"
    if flagged:
        return Plan(fam + " (not verified here)", s, False, f"cuBLAS launches {short} {flagged}", c, launch)
    return Plan(fam, s, True, _launch_provenance(c, src) + short + (f", grid z = {launch.grid_z}" if n > 1 else ""), c,
                launch)


def _fp32_neighbour_plan(c: Call, base: Structure) -> Plan | None:
    """FP32/TF32 calls outside the launch table: the nearest measured launch's kernel family and grid, applied to
    this shape (flagged: a prediction); None where that family's structure is not identified."""
    near, how = launches.nearest_launch(c)
    if near is None:
        return None
    cc, launch = near
    s, _ = _fp32_launch_structure(c, base, launch)
    if s is None:
        return None
    n = len(s.split_k or ()) or s.split_interleave or 1
    return Plan(f"{launch.main.split('(')[0][:60]} split-K x{n} (predicted)", s, False,
                f"kernel and split-K predicted from {how} ({cc.M} x {cc.N} x {cc.K}): this shape's launch was not "
                "measured", c, launch)


# the kernel-choice rules live in choice.py; these names are what selection exported before
_predicted_split = choice.predicted_split
_no_split_verified = choice.no_split_verified
_bracketed = choice.bracketed
_fp32_nearest_split_family = choice.fp32_nearest_split_family


def _frontier_plan(family: str, base: Structure, c: Call) -> Plan:
    """The unsplit plain kernel inside the no-split frontier: modelled only for BF16/FP16/FP8 with K < SHORT_K,
    where every measured call ran it (the frontier leaks at longer K and for FP32/TF32: flagged there)."""
    if choice.op_class(c) in ("half", "fp8") and c.K < choice.SHORT_K:
        return Plan(family, base, True, _provenance(c), c)
    return Plan(family, base, False, choice.FRONTIER_REASON, c)


def _select_half(c: Call) -> Plan:
    epi = epilogue_of(c)
    base = Structure("nvjet_sm90 (wgmma k16 chain)", instruction=WGMMA[c.fmt], epilogue=epi)
    if c.out not in (c.fmt, "fp32"):
        raise ValueError(f"out_dtype: {c.fmt} GEMMs return {c.fmt} or fp32, got {c.out}")
    aligned = c.K % 8 == 0 and c.N % 8 == 0 and (c.M % 8 == 0 or not c.a_t)
    tabled = _measured(c, base, "nvjet_sm90", 64)
    if tabled is not None:
        return tabled
    if not aligned or min(c.N, c.K) < 8:
        predicted = _unseen_plan(c, base, 64, frontier=False)  # the no-split frontier is the aligned nvjet kernel's
        if predicted is not None:
            return predicted
        fam = "CUTLASS 2.x / gemmSN fallback (misaligned or tiny)"
        return Plan(fam, _cutlass_guess(c, "bx" if epi == "badd" else epi), False,
                    "K or N not a multiple of 8 or a side below 8: cuBLAS runs CUTLASS tensorop/wmma or gemmSN "
                    "kernels there, whose split-K and reduction order were identified only at measured shapes", c)
    plan = _select_nvjet(c, base, epi)
    if plan.modelled and c.op in ("matmul", "addmm") and c.M % 8 and c.M < 16:
        return Plan(plan.family, plan.structure, False, "an NN matmul with a small M that is not a multiple of 8: "
                    "cuBLAS ran nvjet for most such calls (97 of 108 measured) but CUTLASS kernels for some", c)
    return plan


def _select_nvjet(c: Call, base: Structure, epi: str) -> Plan:
    if c.M == 1 and c.N == 1:
        return Plan("cuBLAS dot_kernel + reduce", base, False, "1 x 1 outputs run a dot-product reduction tree", c)
    # beta = 1 with a full C, any alpha: every measured nvjet call (31, addmm and baddbmm) ran *_badd_* unsplit and *_bx_splitK_*
    # split, as below for alpha = 1, so the split decision alone picks the epilogue
    unseen_plan = _unseen_plan(c, base, 64)
    if unseen_plan is not None:
        return unseen_plan
    S, how = launches.predicted_nvjet_split(c)
    if S is None:
        S, how = choice.predicted_split(c), "the split rule (split_rule.py)"
    if S > 1:
        ep = "bx" if epi == "badd" else epi  # split kernels fuse C into the reduction (*_bx_splitK_*)
        s = base.with_(split_k=tile_slices(c.K, S, 64), epilogue=ep)
        return Plan(f"nvjet_sm90 splitK x{len(s.split_k or ())} + splitKreduce (predicted)", s, False,
                    f"split-K predicted from {how}: this shape's launch was not measured", c)
    if choice.no_split_verified(c):
        return _frontier_plan("nvjet_sm90 (wgmma k16 chain, no split)", base, c)
    return Plan("nvjet_sm90 (no split predicted)", base, False,
                f"no split predicted from {how}: this shape's launch was not measured", c)


def _cutlass_guess(c: Call, epi: str) -> Structure:
    """The CUTLASS 2.x structure cuBLAS was seen to run for misaligned BF16/FP16 operands (a best guess: no split).

    BF16 with K or N odd (align1): ``s1688`` mma.sync k8, K-tile 32, the partial tile first; other
    misaligned BF16: wmma k16, K-tile 128; FP16: wmma k16, K-tile 64."""
    if c.fmt == "bf16" and (c.K % 4 or c.N % 4):
        return Structure("cutlass_75_tensorop_bf16_s1688gemm (guess)", instruction="hopper.mma.m16n8k8.f32.bf16.bf16.f32",
                         k_tile=32, k_residue="first", epilogue=epi)
    tile = 128 if c.fmt == "bf16" else 64
    return Structure("cutlass wmma s161616gemm (guess)", instruction=WGMMA[c.fmt], k_tile=tile, k_residue="first",
                     epilogue=epi)


def _fp32_base(c: Call) -> Structure:
    if c.prec == "highest":
        base = Structure("FP32 FFMA (sm80_xmma f32f32 / CUTLASS SIMT)", instruction=None)
    else:
        base = Structure("TF32 sm90_xmma (wgmma k8 chain)", instruction=WGMMA["tf32"], input_rounding="rne")
    return base.with_(epilogue=epilogue_of(c))


def _select_fp32(c: Call) -> Plan:
    base = _fp32_base(c)
    tabled = _measured(c, base, base.family, 8) or _unseen_plan(c, base, 8) or _fp32_neighbour_plan(c, base)
    if tabled is not None:
        return tabled
    if choice.no_split_verified(c):
        return _frontier_plan(base.family + " (no split)", base, c)
    guess = _fp32_split_guess(c, base)
    if guess is not None:
        return guess
    return Plan(base.family + " (predicted)", base, False,
                "FP32/TF32 outside the measured frontier of the unsplit xmma kernels (cuBLAS may run split-K, "
                "stream-K, CUTLASS SIMT or gemmSN kernels here)", c)


def _fp32_split_guess(c: Call, base: Structure) -> Plan | None:
    """Best guess for FP32/TF32 calls outside the measured ones (flagged): the nearest measured call's kernel
    family and split kind, with cuBLAS's one-wave slice count ``S = min(128, gpus.wave_slices(CTAs))`` (CTAs of
    that kernel's tile over the output as cuBLAS sees it, N x M).  The rule reproduces the slice count of most
    measured calls of the large-tile families (SIMT 256x128, s1688 256x64 / 64x256 / 128x64), not of the
    small-tile ones that run several CTAs per SM.  Each measured FP32/TF32 call predicted from the others:
    the right structure for 73 of 157 (unsplit everywhere: 57; the neighbour's own wave count instead of one
    wave: 76, but one fewer held-out call).  A prediction, never marked modelled."""
    e = choice.fp32_nearest_split_family(c)
    if e is None or not (e.get("split") or e.get("split_interleave")):
        return None  # the nearest measured call ran unsplit: the unsplit chain is the guess
    m = choice.FFMA_OR_CUTLASS.search(e["kernel"])
    tm, tn, bk = (int(x) for x in (m.group(1, 2, 3) if m.group(1) else m.group(4, 5, 6)))
    S = max(1, min(128, gpus.wave_slices(math.ceil(c.N / tm) * math.ceil(c.M / tn) * c.b, c.gpu)))
    fields = {k: e[k] for k in ("instruction", "input_rounding", "k_tile", "k_residue", "split_reduce") if k in e}
    s = base.with_(**fields)
    if e.get("split_interleave"):
        s = s.with_(split_interleave=S if S > 1 else None)
    else:
        granule = bk if e.get("instruction") else (32 if e.get("split_reduce") == "serial" else 4)
        s = s.with_(split_k=parallel_slices(c.K, S, granule))
    n = len(s.split_k or ()) or s.split_interleave or 1
    return Plan(f"{e.get('family', base.family)} split-K x{n} (predicted)", s, False,
                "FP32/TF32 kernel and split-K slice count predicted (nearest measured kernel family, one-wave "
                "slice count): cuBLAS's choice was not measured at this shape", c)


def _fp8_base(c: Call) -> Structure:
    promote = None if c.fast_accum else 128
    inst = f"hopper.wgmma.m64n8k32.f32.{c.fmt}.{c.b_fmt or c.fmt}"
    base = Structure("nvjet_sm90 FP8" + ("" if c.fast_accum else " algo2 (promotion every 128)"), instruction=inst,
                     promote_every=promote)
    return base.with_(promote_every=128) if c.scales == "blockwise" else base


def _select_fp8(c: Call) -> Plan:
    base = _fp8_base(c)
    tabled = _measured(c, base, base.family, 128) or _unseen_plan(c, base, 128)
    if tabled is not None:
        return tabled
    S, how = launches.predicted_nvjet_split(c)
    if S is not None and S > 1:
        s = base.with_(split_k=tile_slices(c.K, S, 128))
        return Plan(f"{base.family} splitK x{len(s.split_k or ())} (predicted)", s, False,
                    f"split-K predicted from {how}: this shape's launch was not measured", c)
    if choice.no_split_verified(c):
        return _frontier_plan(base.family + " (no split)", base, c)
    return Plan(base.family + " (predicted)", base, False,
                "FP8 outside the measured no-split frontier: " + (f"no split predicted from {how}" if S else
                                                                  "cuBLAS may split K here"), c)
