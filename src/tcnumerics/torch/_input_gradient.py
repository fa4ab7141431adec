"""The first-order loss effect of an input-gradient site (``tcnumerics.torch.attribution``; docs/attribution.md).

An input-gradient GEMM computes ``dloss/dx`` for an operand ``x`` of a forward GEMM.  Its error ``e`` (emulated -
exact) flows on, through the rest of the backward pass, into the gradient of every parameter ``x`` depends on:
to first order those gradients move by ``J^T e`` (``J = dx/dparams``), and the loss after one SGD step of
``lr`` moves by ``lr * <g, J^T e>`` when the site is made exact -- the weight-gradient rows' convention, ``g`` the
parameters' gradients as accumulated by this backward pass standing for the gradient after the step.

How each piece is found, with torch's own machinery:

* ``x``: every forward GEMM of a measured run notes its two operands' autograd edges (``grad_fn`` and
  ``output_nr``, or the leaf) and where their data lies.  A backward call runs inside the autograd node of its
  forward GEMM (``torch._C._current_autograd_node()``); of that GEMM's operands ``a``, ``b``, the call's result is
  ``dloss/da = grad @ b^T`` where ``b``'s data is its right operand, ``(dloss/da)^T = b @ grad^T`` where it is its
  left one, and likewise ``dloss/db = a^T @ grad`` or its transpose ``grad^T @ a``.  The forward operand must be an
  input of the running node and have the result's shape; anything else (the data not found -- a saved-tensor
  hook, a custom ``autograd.Function`` --, or both operands possible) is reported as not computed, never guessed.
* ``J^T e``: ``torch.autograd.grad`` from ``x``'s edge (a ``GradientEdge``) to the parameters, ``grad_outputs`` the
  error in ``x``'s dtype, ``retain_graph=True`` -- a second backward pass, run natively (no dispatch mode sees
  it: it runs inside the emulation's own ``__torch_dispatch__``, where torch has taken the mode off the stack) while
  the main pass has not yet reached (nor freed) the nodes before ``x``.  Hooks on tensors before ``x`` run in it
  too: the recorder's own are told to ignore it, ``ModuleTracker``'s module names are restored after it.
* ``g``: each parameter's ``.grad`` once this backward pass has accumulated it (a post-accumulate-grad hook).

If no parameter lies before ``x`` (``x`` a leaf input, or computed from inputs only), the estimate is exactly 0.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from torch.autograd.graph import GradientEdge

from .. import arrays
from . import _tensors
from .calls import GemmCall

__all__ = ["InputGradientEffect", "NO_PARAMETER", "NOT_FOUND", "AMBIGUOUS", "NOT_ACCUMULATED"]

NO_PARAMETER = "no parameter before the site's input (exactly 0)"
NOT_FOUND = ("not computed: the forward operand this call is the gradient of was not found among its autograd "
             "node's inputs (a saved-tensor hook, a custom autograd.Function, a vector op)")
AMBIGUOUS = "not computed: the call could be the gradient of either operand of its forward GEMM"
NOT_ACCUMULATED = ("not computed: a parameter's gradient was not accumulated inside the emulation (backward() "
                   "after the with block, or autograd.grad)")
_FORWARD_OPS = ("mm", "addmm", "bmm", "baddbmm")


@dataclass
class _Operand:
    """One operand of a forward GEMM: its autograd edge (a node and output number, or the leaf tensor)."""

    data: tuple
    node: object
    output_nr: int
    leaf: torch.Tensor | None
    shape: tuple
    dtype: torch.dtype
    device: torch.device
    alpha: float

    def feeds(self, node) -> bool:
        """Is this operand an input of the autograd node ``node``?"""
        for fn, nr in node.next_functions:
            if fn is None:
                continue
            if self.leaf is None and fn is self.node and nr == self.output_nr:
                return True
            if self.leaf is not None and getattr(fn, "variable", None) is self.leaf:
                return True
        return False


class InputGradientEffect:
    """Per input-gradient site: ``sum <g, J^T e>`` over its calls (times ``lr`` in ``value``) and why not, if not;
    the same per call (``call_value``: a call is named by its number, the site's sum is the sum of its calls')."""

    def __init__(self):
        self.params: dict[int, torch.Tensor] = {}
        self._by_data: dict[tuple, list] = {}  # data key -> [(role "a"/"b", (operand a, operand b))]
        self._sums: dict[tuple, float] = {}
        self._notes: dict[tuple, dict[str, int]] = {}
        self._call_sums: dict[int, float] = {}  # per call number (the site's sums, call by call)
        self._call_notes: dict[int, str] = {}
        self._pending: dict[int, list] = {}  # id(parameter) -> [(site key, call number, J^T e for it)]
        self._hooks: dict[int, object] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def in_extra_pass(self) -> bool:
        """True on a thread running a ``J^T e`` pass (hooks of the recorder ignore its gradients)."""
        return getattr(self._local, "extra", False)

    def note_param(self, p: torch.Tensor) -> None:
        self.params.setdefault(id(p), p)

    def forward(self, call: GemmCall) -> None:
        """Note the operands of a forward GEMM (their edges are found again by its backward calls)."""
        if call.op not in _FORWARD_OPS or call.reshape is not None:
            return
        pair = tuple(_operand(t, float(call.alpha)) for t in (call.a, call.b))
        with self._lock:
            for role, op in zip("ab", pair):
                self._by_data.setdefault(op.data, []).append((role, pair))

    def backward(self, key: tuple, call: GemmCall, error, tracker, number: int | None = None) -> None:
        """``J^T e`` of one input-gradient call (``error``: [batch or 1, M, N], emulated - exact, numpy or CuPy
        where the call ran), kept until the parameters' gradients are accumulated; ``number``: the call's, for
        its own estimate (``call_value``)."""
        found = self._forward_operand(call)
        if isinstance(found, str):
            return self._note(key, found, number=number)
        x, transposed = found
        e = error if call.batched else error[0]
        e = (e.swapaxes(-1, -2) if transposed else e) * x.alpha
        e = _tensors.to_tensor(arrays.namespace(e).ascontiguousarray(e), x.device).to(dtype=x.dtype)
        grads = self._vjp(x, e, tracker)
        if isinstance(grads, str):
            return self._note(key, grads, number=number)
        if not grads:
            return self._note(key, NO_PARAMETER, counts=True, number=number)
        with self._lock:
            self._sums.setdefault(key, 0.0)
            self._call_sums.setdefault(number, 0.0)
            for p, g in grads:
                self._pending.setdefault(id(p), []).append((key, number, g.detach()))
                if id(p) not in self._hooks:
                    self._hooks[id(p)] = p.register_post_accumulate_grad_hook(self._consume)

    def value(self, key: tuple, lr: float | None) -> tuple[float | None, str]:
        """(lr * sum <g, J^T e>, or None; what the calls of this site gave)."""
        with self._lock:
            notes = dict(self._notes.get(key, {}))
            if any(key == k for waiting in self._pending.values() for k, _, _ in waiting):
                notes[NOT_ACCUMULATED] = notes.get(NOT_ACCUMULATED, 0) + 1
            total = self._sums.get(key, 0.0)
        text = "; ".join(f"{n} call{'s' if n > 1 else ''}: {why}" for why, n in sorted(notes.items()))
        if lr is None or any(why.startswith("not computed") for why in notes):
            return None, text
        return lr * total, text

    def call_value(self, number: int, lr: float | None) -> tuple[float | None, str]:
        """(lr * <g, J^T e> of the call ``number``, or None; why it is exactly 0 or not computed, else "")."""
        with self._lock:
            note = self._call_notes.get(number, "")
            if any(number == n for waiting in self._pending.values() for _, n, _ in waiting):
                note = NOT_ACCUMULATED
            total = self._call_sums.get(number)
        if lr is None or total is None or note.startswith("not computed"):
            return None, note
        return lr * total, note

    def close(self) -> None:
        """Remove the hooks and forget the forward operands (their nodes hold the graph)."""
        with self._lock:
            for h in self._hooks.values():
                h.remove()
            self._hooks.clear()
            self._by_data.clear()

    # --- inside ---------------------------------------------------------------------------------------

    def _note(self, key, why: str, counts: bool = False, number: int | None = None) -> None:
        with self._lock:
            notes = self._notes.setdefault(key, {})
            notes[why] = notes.get(why, 0) + 1
            self._call_notes[number] = why
            if counts:
                self._sums.setdefault(key, 0.0)
                self._call_sums.setdefault(number, 0.0)

    def _forward_operand(self, call: GemmCall):
        """(the forward operand whose gradient the call computes, transposed?) or why it cannot be told."""
        node = torch._C._current_autograd_node()
        if node is None or call.reshape is not None:
            return NOT_FOUND
        M, N = call.shape[-3:-1]
        batch = call.shape[:1] if call.batched else ()
        with self._lock:
            by_a = list(self._by_data.get(_data_key(call.a), ()))
            by_b = list(self._by_data.get(_data_key(call.b), ()))
        found = {}
        # (role of the known operand, its side in this call) -> (the operand x, result is dloss/dx transposed?)
        for side, matches in (("left", by_a), ("right", by_b)):
            for role, (a, b) in matches:
                x, transposed = {("b", "right"): (a, False), ("b", "left"): (a, True),
                                 ("a", "left"): (b, False), ("a", "right"): (b, True)}[(role, side)]
                want = batch + ((N, M) if transposed else (M, N))
                if x.shape == want and x.feeds(node):
                    found[(id(x.node), x.output_nr, id(x.leaf), transposed)] = (x, transposed)
        if len(found) > 1:
            return AMBIGUOUS
        return next(iter(found.values())) if found else NOT_FOUND

    def _vjp(self, x: _Operand, e: torch.Tensor, tracker):
        """[(parameter, its J^T e)] for the parameters before ``x`` (empty: none), or why not."""
        if x.leaf is not None:
            return [(x.leaf, e)] if id(x.leaf) in self.params else []
        params = [p for p in self.params.values() if p.requires_grad]
        if not params:
            return []
        names = set(tracker.parents)
        self._local.extra = True
        try:
            grads = torch.autograd.grad([GradientEdge(x.node, x.output_nr)], params, [e], retain_graph=True,
                                        allow_unused=True)
        except RuntimeError as exc:  # e.g. a part of the graph before x was already freed
            return f"not computed: the extra backward pass failed ({str(exc).splitlines()[0]})"
        finally:
            self._local.extra = False
            tracker.parents = names  # its module hooks entered and left modules of the main pass's tracker
        return [(p, g) for p, g in zip(params, grads) if g is not None]

    def _consume(self, p: torch.Tensor) -> None:
        """Post-accumulate-grad hook: ``<p.grad, J^T e>`` for every site waiting on ``p``."""
        with self._lock:
            waiting = self._pending.pop(id(p), [])
        if not waiting:
            return
        device = _tensors.on_gpu_engine(p.grad)
        with _tensors.gpu_work(p.grad):
            g = _tensors.float64_values(p.grad, device)
            values = [(key, number, float((g * _tensors.float64_values(dg, device)).sum()))
                      for key, number, dg in waiting]
        with self._lock:  # one scalar each reached the host
            for key, number, value in values:
                self._sums[key] += value
                self._call_sums[number] += value


def _operand(t: torch.Tensor, alpha: float) -> _Operand:
    leaf = t if t.requires_grad and t.grad_fn is None else None
    return _Operand(_data_key(t), t.grad_fn, t.output_nr if t.grad_fn is not None else 0, leaf,
                    tuple(t.shape), t.dtype, t.device, alpha)


def _data_key(t: torch.Tensor) -> tuple:
    """Where a tensor's data lies, the same for it and its transposes (size and stride of each dim, sorted)."""
    return t.device, t.dtype, t.data_ptr(), tuple(sorted(zip(t.shape, t.stride())))
