"""tcnumerics leaves PyTorch's state alone, and its warnings are one line at the user's call site.

PyTorch and numba's OpenMP layer share one GNU OpenMP runtime; numba's first parallel launch sets the
launching thread's OpenMP thread count, which is also PyTorch's intra-op thread count.  The fast engine puts
PyTorch's back, so a user's ``torch.set_num_threads`` (and the bits of PyTorch's thread-partitioned reductions)
do not depend on whether tcnumerics ran first.
"""

import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import tcnumerics.torch as tct  # noqa: E402

SRC = str(Path(__file__).resolve().parents[1] / "src")
FIRST_LAUNCH = """
import numpy as np, torch
torch.set_num_threads(1)
torch.ones(1 << 16).sum()  # PyTorch has started its threads before tcnumerics runs
from tcnumerics.engines import fast
fast.gemm_bits("hopper.wgmma.m64n8k16.f32.bf16.bf16", np.ones((64, 16), np.uint16), np.ones((8, 16), np.uint16),
               np.zeros((64, 8), np.uint32))
print(torch.get_num_threads())
"""


def test_the_first_fast_engine_call_keeps_torchs_thread_count():
    # a fresh process: numba's threads start inside this call (NUMBA_NUM_THREADS=2 differs from the 1 asked for)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), NUMBA_NUM_THREADS="2",
               NUMBA_THREADING_LAYER="omp")
    out = subprocess.run([sys.executable, "-c", FIRST_LAUNCH], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "1"


def test_float32_library_calls_warn_once_per_call_site_in_one_line_at_the_users_line():
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 16))
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tct.emulate("hopper") as run:
            model(x).square().mean().backward(); line = sys._getframe().f_lineno  # noqa: E702
    flagged = [w for w in caught if issubclass(w.category, tct.NotModelledWarning)]
    assert len(flagged) == run.report().not_modelled == run.report().calls == 5
    for w in flagged:
        text = str(w.message)
        assert "\n" not in text and len(text) < 260, text
        assert "FP32" in text and "bfloat16()" in text
        assert (w.filename, w.lineno) == (__file__, line)  # the user's line, not tcnumerics' or torch's


def test_a_bf16_model_is_modelled_without_warnings():
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).bfloat16()
    x = torch.randn(128, 256, generator=torch.Generator().manual_seed(1)).bfloat16()
    with warnings.catch_warnings():
        warnings.simplefilter("error", tct.NotModelledWarning)
        with tct.emulate("hopper") as run:
            model(x).float().square().mean().backward()
    assert run.report().calls == 5 and run.report().not_modelled == 0


def test_a_torch_block_freed_at_interpreter_exit_is_quiet():
    """CuPy arrays living in torch's allocator are freed by ``_TorchBlock.__del__``; at exit torch's internals are gone
    (a GPU run printed "Exception ignored in _TorchBlock.__del__"): quiet then, an error otherwise."""
    from tcnumerics.torch.devices import _TorchBlock

    def broken(ptr):
        raise AttributeError("'NoneType' object has no attribute 'cuda'")

    block = SimpleNamespace(ptr=0)  # no real block: the collector must not free one on a machine without CUDA
    _TorchBlock.__del__(block, _free=broken, _finalizing=lambda: True)
    with pytest.raises(AttributeError):
        _TorchBlock.__del__(block, _free=broken, _finalizing=lambda: False)
