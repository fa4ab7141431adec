"""CUDA C++ source of the probe kernels: load register images, issue one instruction, store.

Each warp (``mma``, ``mma.sp``) or warpgroup (``wgmma``) handles one tile: it loads its
threads' pre-packed register words, issues exactly one matrix instruction through inline
PTX and stores the result words.  All layout knowledge stays on the host
(``tcnumerics.probe.layouts``), so a kernel is the same few lines for every type.

Example:
    >>> from tcnumerics.probe.targets import target
    >>> src = kernel_source(target("hopper.mma.m16n8k8.f32.tf32.tf32.f32"))
    >>> "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in src, src.count("asm volatile")
    (True, 1)
"""

from __future__ import annotations

from .targets import Target

__all__ = ["kernel_source", "KERNEL_NAME"]

KERNEL_NAME = "tcn_probe"


def _operands(prefix: str, count: int, first: int) -> tuple[str, list[str]]:
    names = [f"{prefix}{i}" for i in range(count)]
    return "{" + ", ".join(f"%{first + i}" for i in range(count)) + "}", names


def _float_acc(t: Target) -> bool:
    return t.dtype == "f32"


def kernel_source(t: Target) -> str:
    """The complete CUDA translation unit for target ``t`` (one ``extern "C"`` kernel)."""
    if t.kind == "wgmma":
        return _wgmma_source(t)
    return _mma_source(t)


def _mma_source(t: Target) -> str:
    na, nb, nc, nd = t.a.registers, t.b.registers, t.c_fragment.registers, t.cd.registers
    d_ops, d_names = _operands("d", nd, 0)
    a_ops, a_names = _operands("a", na, nd)
    b_ops, b_names = _operands("b", nb, nd + na)
    c_ops, c_names = _operands("c", nc, nd + na + nb)
    extra = ""
    extra_in = []
    if t.kind == "mma.sp":
        extra = f", %{nd + na + nb + nc}, {t.metadata.selector}"
        extra_in = ['"r"(e)']
    d_float, c_float = t.dtype == "f32", t.ctype == "f32"
    d_decl = "float" if d_float else "unsigned"
    c_decl = "float" if c_float else "unsigned"
    c_load = "__uint_as_float(cp[{i}])" if c_float else "cp[{i}]"
    d_store = "__float_as_uint({v})" if d_float else "{v}"
    outs = ", ".join(f'"={"f" if d_float else "r"}"({v})' for v in d_names)
    ins = ", ".join([f'"r"({v})' for v in a_names + b_names]
                    + [f'"{"f" if c_float else "r"}"({v})' for v in c_names] + extra_in)
    lines = [
        f'extern "C" __global__ void {KERNEL_NAME}(const unsigned* __restrict__ A, const unsigned* __restrict__ B,',
        "    const unsigned* __restrict__ C, const unsigned* __restrict__ E, unsigned* __restrict__ D, int tiles)",
        "{",
        "    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);",
        "    const int lane = threadIdx.x & 31;",
        "    if (warp >= tiles) return;  // whole warps leave together: mma.sync needs all 32 lanes",
        "    const size_t slot = (size_t)warp * 32 + lane;",
        f"    const unsigned* ap = A + slot * {na};",
        f"    const unsigned* bp = B + slot * {nb};",
        f"    const unsigned* cp = C + slot * {nc};",
    ]
    lines += [f"    unsigned a{i} = ap[{i}];" for i in range(na)]
    lines += [f"    unsigned b{i} = bp[{i}];" for i in range(nb)]
    lines += [f"    {c_decl} c{i} = {c_load.format(i=i)};" for i in range(nc)]
    if t.kind == "mma.sp":
        lines.append("    unsigned e = E[slot];")
    lines.append(f"    {d_decl} " + ", ".join(d_names) + ";")
    lines.append(f'    asm volatile("{t.ptx} {d_ops}, {a_ops}, {b_ops}, {c_ops}{extra};"')
    lines.append(f"        : {outs}")
    lines.append(f"        : {ins});")
    lines.append(f"    unsigned* dp = D + slot * {nd};")
    lines += [f"    dp[{i}] = {d_store.format(v=v)};" for i, v in enumerate(d_names)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _wgmma_source(t: Target) -> str:
    na, nd = t.a.registers, t.cd.registers
    d_float = t.dtype == "f32"
    d_ops, d_names = _operands("d", nd, 0)
    a_ops, a_names = _operands("a", na, nd)
    desc = nd + na
    # operand list after the descriptor differs by type (PTX ISA, wgmma.mma_async):
    # f16/bf16 take scale-a, scale-b and transpose-b; tf32/fp8 the two scales; integers none
    if t.atype in ("f16", "bf16"):
        tail = ", p, 1, 1, 0"
    elif t.atype in ("tf32", "e4m3", "e5m2"):
        tail = ", p, 1, 1"
    else:
        tail = ", p"
    io = ", ".join(f'"+{"f" if d_float else "r"}"({v})' for v in d_names)
    ins = ", ".join([f'"r"({v})' for v in a_names] + ['"l"(desc)'])
    d_decl = "float" if d_float else "unsigned"
    load = "__uint_as_float(cp[{i}])" if d_float else "cp[{i}]"
    store = "__float_as_uint({v})" if d_float else "{v}"
    lines = [
        f'extern "C" __global__ void __launch_bounds__(128) {KERNEL_NAME}(const unsigned* __restrict__ A,',
        "    const unsigned* __restrict__ Bimg, const unsigned* __restrict__ C, unsigned* __restrict__ D,",
        "    int tiles, int b_words, unsigned lead_bytes, unsigned stride_bytes)",
        "{",
        "    extern __shared__ __align__(1024) unsigned smem[];",
        "    const int tile = blockIdx.x;",
        "    const int tid = threadIdx.x;",
        "    if (tile >= tiles) return;",
        "    for (int i = tid; i < b_words; i += 128) smem[i] = Bimg[(size_t)tile * b_words + i];",
        "    // generic-proxy stores must be made visible to the async proxy that wgmma reads through",
        '    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
        "    __syncthreads();",
        "    const unsigned addr = (unsigned)__cvta_generic_to_shared(smem);",
        "    // matrix descriptor: start address, leading and stride byte offsets (>> 4), no swizzle",
        "    const unsigned long long desc = (unsigned long long)((addr & 0x3FFFF) >> 4)",
        "        | ((unsigned long long)((lead_bytes & 0x3FFFF) >> 4) << 16)",
        "        | ((unsigned long long)((stride_bytes & 0x3FFFF) >> 4) << 32);",
        "    const size_t slot = (size_t)tile * 128 + tid;",
        f"    const unsigned* ap = A + slot * {na};",
        f"    const unsigned* cp = C + slot * {nd};",
    ]
    lines += [f"    unsigned a{i} = ap[{i}];" for i in range(na)]
    lines += [f"    {d_decl} d{i} = {load.format(i=i)};" for i in range(nd)]
    # fence, issue, commit and wait in one asm block: the accumulator registers are in
    # flight between issue and wait and must not be touched by compiler-scheduled code
    lines.append('    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"')
    lines.append('        "wgmma.fence.sync.aligned;\\n"')
    lines.append(f'        "{t.ptx} {d_ops}, {a_ops}, %{desc}{tail};\\n"')
    lines.append('        "wgmma.commit_group.sync.aligned;\\n"')
    lines.append('        "wgmma.wait_group.sync.aligned 0;\\n}"')
    lines.append(f"        : {io}")
    lines.append(f"        : {ins}")
    lines.append('        : "memory");')
    lines.append(f"    unsigned* dp = D + slot * {nd};")
    lines += [f"    dp[{i}] = {store.format(v=v)};" for i, v in enumerate(d_names)]
    lines.append("}")
    return "\n".join(lines) + "\n"
