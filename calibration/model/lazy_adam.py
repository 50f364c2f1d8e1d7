"""Adam on the judge offsets that moves only the (model, judge) offsets a batch holds rows of.

Dense Adam (torch.optim.Adam over U1, U2, UV) moves every judge's offsets at every step, also those of
judges absent from the batch: their gradient is zero, but the weight decay (the L2 penalty on the offsets)
still pulls them towards zero and the momentum carries them on. That makes every step cost O(all judges).
`LazyAdam` updates an offset, and its moments, only at the steps whose batch holds that judge in that
model, with the bias correction of the phase's step count (as TensorFlow's LazyAdam and PyTorch's
SparseAdam). With every judge in every batch it is dense Adam, to float rounding. What differs otherwise:
an absent judge's offsets are neither decayed nor carried by momentum at that step, and a judge first seen
late takes a first step of up to ~3 lr instead of ~lr (Settings.judge_updates; measured in README, "Scaling").
"""

from __future__ import annotations

import torch
from torch.optim.adam import adam

from calibration.model.network import JudgeOffsets


class LazyAdam:
    """Adam (PyTorch's fused kernel, weight_decay added to the gradient) on the parameters U (M, J, In, Out),
    updating at each step only the (model, judge) pairs of that step's `JudgeOffsets`."""

    def __init__(self, params: list[torch.Tensor], *, lr: float, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.lr, self.weight_decay, self.betas, self.eps = lr, weight_decay, betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = [torch.tensor(0.0) for _ in self.params]  # one count, kept once per tensor for the kernel

    @torch.no_grad()
    def step(self, offsets: JudgeOffsets) -> None:
        """Update the pairs `offsets.keys` from the gradients their leaf copies (`offsets.values`) hold."""
        keys = offsets.keys

        def rows(t: torch.Tensor) -> torch.Tensor:  # (M*J, In, Out) view
            return t.view(-1, *t.shape[2:])

        values = [v.detach() for v in offsets.values]  # == the params' rows `keys`; updated in place
        grads = [v.grad if v.grad is not None else torch.zeros_like(v) for v in offsets.values]
        exp_avg = [rows(m).index_select(0, keys) for m in self.exp_avg]
        exp_avg_sq = [rows(v).index_select(0, keys) for v in self.exp_avg_sq]
        beta1, beta2 = self.betas
        adam(values, grads, exp_avg, exp_avg_sq, [], self.steps, fused=True, amsgrad=False, beta1=beta1,
             beta2=beta2, lr=self.lr, weight_decay=self.weight_decay, eps=self.eps, maximize=False)
        for whole, part in zip(self.params + self.exp_avg + self.exp_avg_sq, values + exp_avg + exp_avg_sq,
                               strict=True):
            rows(whole).index_copy_(0, keys, part)

    def subset(self, params: list[torch.Tensor], keep: torch.Tensor) -> LazyAdam:
        """The optimiser of the models `keep` (a boolean mask on the model axis), over their `params`."""
        smaller = LazyAdam(params, lr=self.lr, weight_decay=self.weight_decay, betas=self.betas, eps=self.eps)
        smaller.exp_avg = [m[keep].clone() for m in self.exp_avg]
        smaller.exp_avg_sq = [v[keep].clone() for v in self.exp_avg_sq]
        smaller.steps = [t.clone() for t in self.steps]
        return smaller
