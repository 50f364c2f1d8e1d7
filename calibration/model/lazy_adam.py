"""Adam on the judge offsets that moves only the (model, judge) offsets a batch holds rows of.

Dense Adam (torch.optim.Adam over U1, U2, UV) moves every judge's offsets at every step, also those of
judges absent from the batch: their gradient is zero, but the weight decay (the L2 penalty on the offsets)
still pulls them towards zero and the momentum carries them on. That makes every step cost O(all judges).
`LazyAdam` updates an offset, and its moments, only at the steps whose batch holds that judge in that
model, with the bias correction of the phase's step count (as TensorFlow's LazyAdam and PyTorch's
SparseAdam). With every judge in every batch it is dense Adam, to float rounding. What differs otherwise:
an absent judge's offsets are neither decayed nor carried by momentum at that step, and a judge first seen
late takes a first step of up to ~3 lr instead of ~lr (measured in README, "Scaling").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.optim.adam import adam

from calibration.model.network import JudgeOffsets


class LazyAdam:
    """Adam (PyTorch's fused kernel, weight_decay added to the gradient) on the parameters U (M, J, In, Out),
    updating at each step only the (model, judge) pairs of that step's `JudgeOffsets`."""

    def __init__(
        self,
        params: Sequence[torch.Tensor],
        *,
        lr: float,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        self.params = list(params)
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = [torch.tensor(0.0) for _ in self.params]  # one count, kept once per tensor for the kernel

    @torch.no_grad()
    def step(self, offsets: JudgeOffsets) -> None:
        """Update the pairs `offsets.keys` from the gradients their values hold: the leaf copies' own, or with
        `offsets.whole` the parameters' (which every pair's update then reads; the absent pairs are put back)."""
        if offsets.whole:
            self._step_whole(offsets.keys)
            return
        keys = offsets.keys
        values = [v.detach() for v in offsets.values]  # == the params' rows `keys`; updated in place
        grads = [v.grad if v.grad is not None else torch.zeros_like(v) for v in offsets.values]
        exp_avg = [_rows(m).index_select(0, keys) for m in self.exp_avg]
        exp_avg_sq = [_rows(v).index_select(0, keys) for v in self.exp_avg_sq]
        self._adam(values, grads, exp_avg, exp_avg_sq)
        for whole, part in zip(
            self.params + self.exp_avg + self.exp_avg_sq, values + exp_avg + exp_avg_sq, strict=True
        ):
            _rows(whole).index_copy_(0, keys, part)

    def _step_whole(self, keys: torch.Tensor) -> None:
        """Adam on every pair, then the pairs absent from the batch (not in `keys`) put back as they were:
        the same update as the gathered one, without gathering and writing back the ~all pairs present."""
        present = torch.zeros(_rows(self.params[0]).shape[0], dtype=torch.bool)
        present[keys] = True
        absent = torch.nonzero(~present).flatten()
        tensors = self.params + self.exp_avg + self.exp_avg_sq
        kept = [_rows(t).index_select(0, absent) for t in tensors]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        self._adam([p.detach() for p in self.params], grads, self.exp_avg, self.exp_avg_sq)
        for t, old in zip(tensors, kept, strict=True):
            _rows(t).index_copy_(0, absent, old)
        for p in self.params:
            p.grad = None

    def _adam(self, values, grads, exp_avg, exp_avg_sq) -> None:
        beta1, beta2 = self.betas
        adam(
            values,
            grads,
            exp_avg,
            exp_avg_sq,
            [],
            self.steps,
            fused=True,
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=self.lr,
            weight_decay=self.weight_decay,
            eps=self.eps,
            maximize=False,
        )

    def subset(self, params: Sequence[torch.Tensor], keep: torch.Tensor) -> LazyAdam:
        """The optimiser of the models `keep` (a boolean mask on the model axis), over their `params`."""
        smaller = LazyAdam(params, lr=self.lr, weight_decay=self.weight_decay, betas=self.betas, eps=self.eps)
        smaller.exp_avg = [m[keep].clone() for m in self.exp_avg]
        smaller.exp_avg_sq = [v[keep].clone() for v in self.exp_avg_sq]
        smaller.steps = [t.clone() for t in self.steps]
        return smaller


def _rows(t: torch.Tensor) -> torch.Tensor:
    """(M, J, In, Out) -> the (M*J, In, Out) view: one row per (model, judge) pair."""
    return t.view(-1, *t.shape[2:])
