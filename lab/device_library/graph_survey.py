"""Device survey of cuBLAS's kernel choice without running a kernel: torch GEMM calls captured into CUDA graphs.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/graph_survey.py --sets kernels5 --budget 300

``kernel_survey.py`` runs every call under torch.profiler: about 1,100 calls a second per process, bound by the
profiler.  Here the calls are captured into a CUDA graph instead (stream capture enqueues, nothing executes), and
the graph's nodes are read through the driver API: each kernel node's function name and launch grid, each
memset and memcpy.  cuBLAS picks its kernel on the host from shapes, layouts, types and epilogue, so the choice
is the one a run would make -- which ``--compare`` checks against the profiler's launches of the same calls
(a set both surveys ran).  Calls are separated by 1-byte memsets into a marker buffer (node ``dst`` = marker +
2 i before call i's operands are built, + 2 i + 1 before the call itself).

Writes the same ``$OUT/kernels/<set>.json.gz`` as ``kernel_survey.py`` (names, calls, errors, env), so
``export_kernels.py`` packs either.  Kernel names are the drivers' (mangled) names, demangled by ``c++filt`` or
``cu++filt`` (both are on the device; without either the file says ``demangled: false``).
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import os
import shutil
import subprocess
import time

import torch

import numpy as np

import survey_ops
from train_calls import ALL_DENSE_SETS as DENSE_SETS  # the dense sets and the training-step sets
import kernel_survey
from kernel_survey import SETS, _empty_operand

OUT = os.environ.get("OUT", "/tmp/survey_out")
KERNEL, MEMCPY, MEMSET = 0, 1, 2  # CUgraphNodeType
MEMSET_NAME, MEMCPY_NAME = "Memset (Device)", "Memcpy DtoD (Device -> Device)"  # torch.profiler's names for these


class KernelParams(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", ctypes.c_void_p), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("params", ctypes.c_void_p), ("extra", ctypes.c_void_p),
                ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


class MemsetParams(ctypes.Structure):  # CUDA_MEMSET_NODE_PARAMS
    _fields_ = [("dst", ctypes.c_uint64), ("pitch", ctypes.c_size_t), ("value", ctypes.c_uint),
                ("element_size", ctypes.c_uint), ("width", ctypes.c_size_t), ("height", ctypes.c_size_t)]


class Driver:
    """The few driver calls that read a captured graph."""

    def __init__(self) -> None:
        self.cu = ctypes.CDLL("libcuda.so.1")
        self._names: dict[tuple[int, int], str] = {}

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def memset8(self, ptr: int, value: int, stream: int) -> None:
        self.check(self.cu.cuMemsetD8Async(ctypes.c_uint64(ptr), ctypes.c_ubyte(value), ctypes.c_size_t(1),
                                           ctypes.c_void_p(stream)), "cuMemsetD8Async")

    def nodes(self, graph: int) -> list[int]:
        """The graph's nodes in dependency order (a stream capture makes one chain)."""
        n = ctypes.c_size_t(0)
        self.check(self.cu.cuGraphGetNodes(ctypes.c_void_p(graph), None, ctypes.byref(n)), "cuGraphGetNodes")
        arr = (ctypes.c_void_p * n.value)()
        self.check(self.cu.cuGraphGetNodes(ctypes.c_void_p(graph), arr, ctypes.byref(n)), "cuGraphGetNodes")
        nodes = [int(a or 0) for a in arr]
        e = ctypes.c_size_t(0)
        get_edges = self.cu.cuGraphGetEdges_v2  # with edge data: cuBLAS's programmatic-launch edges carry some
        self.check(get_edges(ctypes.c_void_p(graph), None, None, None, ctypes.byref(e)), "cuGraphGetEdges_v2")
        src, dst = (ctypes.c_void_p * e.value)(), (ctypes.c_void_p * e.value)()
        data = (ctypes.c_uint64 * e.value)()  # CUgraphEdgeData: 8 bytes
        self.check(get_edges(ctypes.c_void_p(graph), src, dst, data, ctypes.byref(e)), "cuGraphGetEdges_v2")
        nxt = {int(s or 0): int(d or 0) for s, d in zip(src, dst)}
        if len(nxt) != len(nodes) - 1 or len(set(nxt.values())) != len(nxt):
            raise RuntimeError("captured graph is not one chain")
        head = (set(nodes) - set(nxt.values())).pop()
        order = [head]
        while order[-1] in nxt:
            order.append(nxt[order[-1]])
        return order

    def node_type(self, node: int) -> int:
        t = ctypes.c_int(-1)
        self.check(self.cu.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t)), "cuGraphNodeGetType")
        return t.value

    def kernel(self, node: int) -> tuple[str, list[int], list[int]]:
        p = KernelParams()
        self.check(self.cu.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(p)),
                   "cuGraphKernelNodeGetParams_v2")
        key = (p.func or 0, p.kern or 0)
        if key not in self._names:
            name = ctypes.c_char_p()
            if p.func:
                self.check(self.cu.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(p.func)), "cuFuncGetName")
            else:
                self.check(self.cu.cuKernelGetName(ctypes.byref(name), ctypes.c_void_p(p.kern)), "cuKernelGetName")
            self._names[key] = name.value.decode()
        return self._names[key], list(p.grid), list(p.block)

    def memset_dst(self, node: int) -> int:
        p = MemsetParams()
        self.check(self.cu.cuGraphMemsetNodeGetParams(ctypes.c_void_p(node), ctypes.byref(p)),
                   "cuGraphMemsetNodeGetParams")
        return p.dst


def activities(drv: Driver, graph: int, marker: int, n_calls: int) -> dict[int, list]:
    """{position in chunk: [(name, grid, block)]}: the nodes between call i's two markers' successors."""
    out: dict[int, list] = {}
    slot = None  # 2 i: building call i's operands; 2 i + 1: call i itself
    for node in drv.nodes(graph):
        t = drv.node_type(node)
        if t == MEMSET:
            dst = drv.memset_dst(node)
            if marker <= dst < marker + 2 * n_calls + 2:
                slot = dst - marker
                continue
            act = (MEMSET_NAME, None, None)
        elif t == KERNEL:
            act = drv.kernel(node)
        elif t == MEMCPY:
            act = (MEMCPY_NAME, None, None)
        else:
            act = (f"graph node type {t}", None, None)
        if slot is not None and slot % 2 == 1 and slot // 2 < n_calls:
            out.setdefault(slot // 2, []).append(act)
    return out


def capture_chunk(drv: Driver, calls: list[dict], stream: torch.cuda.Stream) -> tuple[dict, dict]:
    """Capture ``calls`` into one graph: ({call id: [(name, grid, block)]}, {call id: error}).

    A raw stream capture in relaxed mode, unknown to torch: its caching allocator serves the operands as
    usual (cudaMalloc is allowed in relaxed mode) and reuses what each call frees, since nothing runs."""
    marker = torch.empty(2 * len(calls) + 2, dtype=torch.uint8, device="cuda")
    base, errors = marker.data_ptr(), {}
    graph = ctypes.c_void_p()
    with torch.cuda.stream(stream):
        drv.check(drv.cu.cuStreamBeginCapture_v2(ctypes.c_void_p(stream.cuda_stream), ctypes.c_int(2)),
                  "cuStreamBeginCapture")
        try:
            for i, c in enumerate(calls):
                drv.memset8(base + 2 * i, 0, stream.cuda_stream)
                try:
                    torch.set_float32_matmul_precision(c["prec"])
                    fn = survey_ops.build(c)
                    drv.memset8(base + 2 * i + 1, 0, stream.cuda_stream)
                    out = fn()
                    del out, fn
                except Exception as exc:  # an op torch refuses: recorded, not fatal
                    errors[c["id"]] = f"{type(exc).__name__}: {exc}"[:300]
            drv.memset8(base + 2 * len(calls), 0, stream.cuda_stream)
        finally:
            rc = drv.cu.cuStreamEndCapture(ctypes.c_void_p(stream.cuda_stream), ctypes.byref(graph))
            torch.set_float32_matmul_precision("highest")
    drv.check(rc, "cuStreamEndCapture")
    try:
        acts = activities(drv, graph.value, base, len(calls))
    finally:
        drv.cu.cuGraphDestroy(graph)
    return {calls[i]["id"]: a for i, a in acts.items() if calls[i]["id"] not in errors}, errors


def survey_set(name: str, calls: list[dict], deadline: float, chunk: int, log) -> dict:
    """``kernel_survey.survey_set`` with each chunk captured into a graph instead of profiled."""
    drv = Driver()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # this stream's cuBLAS/cuBLASLt workspaces exist before any capture
        x = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
        torch.nn.functional.linear(x, x, x[0]), torch.matmul(x, x), torch.matmul(x.float(), x.float())
    stream.synchronize()

    def run(part: list[dict]) -> tuple[dict, dict]:
        try:
            acts, errs = capture_chunk(drv, part, stream)
        except Exception as exc:  # the capture itself broke: one graph per call, so one bad call costs only itself
            log(f"  chunk at id {part[0]['id']}: {type(exc).__name__}: {exc}"[:300] + "; capturing its calls one by one")
            acts, errs = {}, {}
            for c in part:
                try:
                    a, e = capture_chunk(drv, [c], stream)
                    acts.update(a), errs.update(e)
                except Exception as exc1:
                    errs[c["id"]] = f"capture: {type(exc1).__name__}: {exc1}"[:300]
        torch.cuda.empty_cache()  # operands of many sizes: keep the cached blocks of parallel processes bounded
        return acts, errs

    return kernel_survey.survey_set(name, calls, deadline, chunk, log, run=run, log_every=20)


def demangle(names: list[str]) -> list[str]:
    """Names as torch.profiler prints them (C++ symbols demangled; nvjet and xmma names are plain already)."""
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not names:
        return names
    if tool is None:
        raise FileNotFoundError("neither c++filt nor cu++filt is installed")
    res = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    out = res.stdout.rstrip("\n").split("\n")
    if len(out) != len(names):
        raise RuntimeError(f"{tool} returned {len(out)} names for {len(names)}")
    return out


def _gemm_part(res: dict, acts: list) -> list:
    """What the numerics depend on: every activity but torch's copy of C (a Memcpy or an elementwise kernel)."""
    return [(res["names"][n], g) for n, g, _ in acts if not res["names"][n].startswith(("Memcpy", "void at::native"))]


def compare(graph_path: str, profiler_paths: list[str]) -> int:
    """Compare a graph survey with profiler surveys of the same calls: exit status 1 if any call differs."""
    def load(p):
        with gzip.open(p, "rt") as fh:
            return json.load(fh)
    g = load(graph_path)
    both = agree = 0
    differ = []
    for p in profiler_paths:
        r = load(p)
        for i, acts in g["calls"].items():
            if i in r["calls"]:
                both += 1
                a, b = _gemm_part(g, acts), _gemm_part(r, r["calls"][i])
                if a == b:
                    agree += 1
                else:
                    differ.append((i, a, b))
    print(f"{graph_path}: {len(g['calls'])} calls captured ({g.get('seconds')} s), {len(g['errors'])} errors; "
          f"{both} also profiled, {agree} with the same GEMM launches, {len(differ)} different")
    for i, a, b in differ[:8]:
        print(f"  call {i}: graph {a}\n           profiler {b}")
    return 1 if differ else 0


def _is_gemm_kernel():
    """``tcnumerics.library.kernel_names.is_gemm_kernel``, loaded without the package (the device needs only numpy:
    that module imports nothing else)."""
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "..", "src", "tcnumerics", "library", "kernel_names.py")
    spec = importlib.util.spec_from_file_location("_kernel_names", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.is_gemm_kernel


def write_npz(res: dict, path: str, first_id: int, n_calls: int, max_name: int = 240) -> None:
    """A dense set's result as arrays (the launch table's row fields, per call id ``first_id + i``): the
    activity-name signature index, the main kernel's CTA count and grid z; -1 where the call has no result."""
    is_gemm = _is_gemm_kernel()
    sigs: dict[str, int] = {}
    sig = np.full(n_calls, -1, np.int32)
    ctas = np.zeros(n_calls, np.int32)
    gz = np.zeros(n_calls, np.int16)
    for i, acts in res["calls"].items():
        names = [res["names"][a[0]][:max_name] for a in acts]
        main = next((a for a, n in zip(acts, names) if is_gemm(n)), acts[0])
        grid = main[1] or [1, 1, 1]
        j = int(i) - first_id
        sig[j] = sigs.setdefault(" | ".join(names), len(sigs))
        ctas[j], gz[j] = grid[0] * grid[1] * grid[2], grid[2]
    np.savez_compressed(path, first_id=first_id, sig=sig, ctas=ctas, grid_z=gz, signatures=np.array(list(sigs)),
                        errors=json.dumps(res["errors"]), env=json.dumps(res["env"]), seconds=res["seconds"])


def merge_npz(paths: list[str], out: str, total: int) -> dict:
    """One array file for a dense set from its slices' files (``write_npz``): signatures re-indexed into one
    table; calls no slice ran keep signature -1."""
    sigs: dict[str, int] = {}
    sig = np.full(total, -1, np.int32)
    ctas = np.zeros(total, np.int32)
    gz = np.zeros(total, np.int16)
    errors, seconds, env = {}, [], None
    for p in paths:
        with np.load(p, allow_pickle=False) as z:
            first, s = int(z["first_id"]), z["sig"]
            remap = np.array([sigs.setdefault(str(x), len(sigs)) for x in z["signatures"]] + [-1], np.int32)
            sig[first:first + len(s)] = remap[s]  # -1 indexes the appended -1
            ctas[first:first + len(s)], gz[first:first + len(s)] = z["ctas"], z["grid_z"]
            errors.update(json.loads(str(z["errors"])))
            seconds.append(float(z["seconds"]))
            env = str(z["env"])
    np.savez_compressed(out, first_id=0, sig=sig, ctas=ctas, grid_z=gz, signatures=np.array(list(sigs)),
                        errors=json.dumps(errors), env=env, seconds=max(seconds))
    return dict(calls=total, ran=int((sig >= 0).sum()), errors=len(errors), slowest_slice_s=max(seconds))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="kernels5")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for all sets together")
    ap.add_argument("--chunk", type=int, default=500)
    ap.add_argument("--limit", type=int, default=0, help="first N calls of each set (after --start)")
    ap.add_argument("--start", type=int, default=0, help="skip the first N calls of each set; the file is then "
                    "<set>_from<N>.json.gz")
    ap.add_argument("--compare", nargs="+", metavar="FILE", help="on the CPU: a graph result file, then the profiler "
                    "result files of the same set; prints how many calls' launches agree")
    ap.add_argument("--merge", metavar="DIR", help="merge DIR/graph_<set>*.npz of each --sets set into "
                    "$OUT/<set>.npz")
    args = ap.parse_args()
    if args.merge:
        import glob
        for name in args.sets.split(","):
            paths = sorted(glob.glob(os.path.join(args.merge, f"graph_{name}.npz")) +
                           glob.glob(os.path.join(args.merge, f"graph_{name}_from*.npz")))
            print(name, merge_npz(paths, os.path.join(OUT, f"{name}.npz"), len(DENSE_SETS[name]())), flush=True)
        return 0
    if args.compare:
        return compare(args.compare[0], args.compare[1:])
    survey_ops.hashed_gpu = _empty_operand  # values never steer cuBLAS's choice
    out_dir = os.path.join(OUT, "kernels")
    os.makedirs(out_dir, exist_ok=True)
    env = dict(torch=torch.__version__, cuda=torch.version.cuda, device=torch.cuda.get_device_name(0),
               method="CUDA graph capture (graph_survey.py)")
    try:
        from importlib.metadata import version
        env["nvidia-cublas"] = version("nvidia-cublas")
    except Exception as exc:
        env["nvidia-cublas"] = f"unknown ({exc})"
    print(f"env: {env}", flush=True)
    torch.matmul(torch.ones(64, 64, device="cuda"), torch.ones(64, 64, device="cuda"))  # handles and workspaces
    deadline = time.time() + args.budget
    for entry in args.sets.split(","):  # SET, or SET@STEP: every STEP-th call of it (a sample of a large set)
        name, _, step = entry.partition("@")
        step = int(step or 1)
        if name in DENSE_SETS:  # arrays; only this slice's dicts are built
            if step > 1:
                raise SystemExit("a dense set is sliced with --start/--limit, not sampled with @STEP")
            calls = DENSE_SETS[name]().calls(args.start, args.start + args.limit if args.limit else None)
        else:
            calls = SETS[name]()[args.start:]
            if args.limit:
                calls = calls[:args.limit]
        calls = calls[::step]
        res = survey_set(name, calls, deadline, args.chunk, lambda m: print(m, flush=True))
        try:
            res["names"], res["demangled"] = demangle(res["names"]), True
        except (FileNotFoundError, RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"names left mangled: {exc}", flush=True)
            res["demangled"] = False
        res["env"] = dict(env, demangled=res.pop("demangled"))
        stem = name + (f"_from{args.start}" if args.start else "") + (f"_step{step}" if step > 1 else "")
        if name in DENSE_SETS:
            write_npz(res, os.path.join(out_dir, f"graph_{stem}.npz"), args.start, len(calls))
        else:
            with gzip.open(os.path.join(out_dir, f"graph_{stem}.json.gz"), "wt") as fh:
                json.dump(res, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
