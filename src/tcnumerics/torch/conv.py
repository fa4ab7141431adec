"""Convolutions in unit mode as implicit GEMMs -- a model of how such kernels reduce, not cuDNN's bits.

Forward: ``im2col`` (``F.unfold``) turns the input into [N*L, C*kh*kw] rows whose K order is
(channel, kernel row, kernel column); one GEMM per group against the weights [C*kh*kw, O],
the bias as the epilogue's C.  Backward, per group: the input gradient is the forward GEMM
of the zero-dilated, padded output gradient with the flipped, transposed weights (each input
gradient one dot product over (O, kh, kw)); the weight gradient one GEMM with K = N*L; the
bias gradient a native sum (a reduction, not a GEMM).  1-D convolutions run as 2-D ones of
height 1; 3-D and transposed convolutions run natively and are reported as not modelled.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .backends import CallInfo
from .calls import GemmCall, _bind

__all__ = ["convolution"]


def convolution(mode, func, name: str, args, kwargs):
    """The mode's handler for aten.convolution and aten.convolution_backward."""
    p = _bind(func, args, kwargs)
    x = p["input"]
    if p["transposed"] or x.dim() not in (3, 4) or not x.is_floating_point():
        mode._record_native(name, args, CallInfo("native convolution", False,
                                                 "only 1-D/2-D non-transposed convolutions are emulated"))
        return func(*args, **kwargs)
    geom = _Geometry(x.dim() == 3, p["stride"], p["padding"], p["dilation"], p["groups"])
    if name == "convolution":
        return geom.out(_forward(mode, geom.x(x), geom.w(p["weight"]), p["bias"], geom, "conv"))
    go, w = geom.x(p["grad_output"]), geom.w(p["weight"])
    xin = geom.x(x)
    mask = p["output_mask"]
    gi = geom.out(_dgrad(mode, go, w, xin.shape, geom)) if mask[0] else None
    gw = geom.out(_wgrad(mode, go, xin, w.shape, geom)) if mask[1] else None
    gb = p["grad_output"].sum(dim=[d for d in range(p["grad_output"].dim()) if d != 1]) if mask[2] else None
    return gi, gw, gb


class _Geometry:
    """Stride, padding, dilation as 2-tuples (1-D convolutions as height-1 2-D ones)."""

    def __init__(self, one_d: bool, stride, padding, dilation, groups: int):
        def pair(v):
            v = list(v)
            return (1, v[0]) if one_d else (v[0], v[-1])
        self.one_d = one_d
        self.stride, self.dilation = pair(stride), pair(dilation)
        self.padding = (0, list(padding)[0]) if one_d else pair(padding)
        self.groups = groups

    def x(self, t: torch.Tensor) -> torch.Tensor:
        return t.unsqueeze(2) if self.one_d else t

    w = x

    def out(self, t: torch.Tensor) -> torch.Tensor:
        return t.squeeze(2) if self.one_d else t


def _forward(mode, x, w, bias, geom: _Geometry, op: str, stride=None, padding=None):
    stride = geom.stride if stride is None else stride
    padding = geom.padding if padding is None else padding
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    g = geom.groups
    Og = O // g
    cols = F.unfold(x, (kh, kw), dilation=geom.dilation, padding=padding, stride=stride)  # [N, C*kh*kw, L]
    Ho = (H + 2 * padding[0] - geom.dilation[0] * (kh - 1) - 1) // stride[0] + 1
    Wo = (W + 2 * padding[1] - geom.dilation[1] * (kw - 1) - 1) // stride[1] + 1
    kk = Cg * kh * kw
    outs = []
    for i in range(g):
        a = cols[:, i * kk:(i + 1) * kk, :].transpose(1, 2).reshape(N * Ho * Wo, kk)
        b = w[i * Og:(i + 1) * Og].reshape(Og, kk).t()
        c = None if bias is None else bias[i * Og:(i + 1) * Og]
        outs.append(mode.gemm(GemmCall(op, a, b, c, out_dtype=x.dtype)))
    y = torch.cat(outs, dim=1) if g > 1 else outs[0]
    return y.reshape(N, Ho, Wo, O).permute(0, 3, 1, 2).contiguous()


def _dgrad(mode, go, w, x_shape, geom: _Geometry):
    """Input gradient: the transposed convolution as a forward implicit GEMM (zeros where strides skip)."""
    N, O, Ho, Wo = go.shape
    _, C, H, W = x_shape
    _, Cg, kh, kw = w.shape
    g = geom.groups
    (sh, sw), (dh, dw), (ph, pw) = geom.stride, geom.dilation, geom.padding
    rh = (H + 2 * ph - dh * (kh - 1) - 1) % sh
    rw = (W + 2 * pw - dw * (kw - 1) - 1) % sw
    z = go.new_zeros(N, O, (Ho - 1) * sh + 1 + rh, (Wo - 1) * sw + 1 + rw)
    z[:, :, : (Ho - 1) * sh + 1: sh, : (Wo - 1) * sw + 1: sw] = go
    Ph, Pw = dh * (kh - 1) - ph, dw * (kw - 1) - pw
    z = F.pad(z, (Pw, Pw, Ph, Ph))
    wt = w.reshape(g, O // g, Cg, kh, kw).transpose(1, 2).reshape(g * Cg, O // g, kh, kw).flip(-1, -2)
    return _forward(mode, z, wt, None, geom, "conv_dgrad", stride=(1, 1), padding=(0, 0))


def _wgrad(mode, go, x, w_shape, geom: _Geometry):
    """Weight gradient: per group one GEMM [O, N*L] x [N*L, C*kh*kw]."""
    N, O, Ho, Wo = go.shape
    _, Cg, kh, kw = w_shape
    g = geom.groups
    Og = O // g
    cols = F.unfold(x, (kh, kw), dilation=geom.dilation, padding=geom.padding, stride=geom.stride)
    kk = Cg * kh * kw
    outs = []
    for i in range(g):
        a = go[:, i * Og:(i + 1) * Og].permute(1, 0, 2, 3).reshape(Og, N * Ho * Wo)
        b = cols[:, i * kk:(i + 1) * kk, :].transpose(1, 2).reshape(N * Ho * Wo, kk)
        outs.append(mode.gemm(GemmCall("conv_wgrad", a, b, out_dtype=go.dtype)))
    return torch.cat(outs, dim=0).reshape(w_shape)
