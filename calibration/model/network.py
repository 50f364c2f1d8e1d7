"""The judge-personalised calibration network of LLM-Rubric, with a leading model axis.

For judge a and input x (the LLM judge's answer distributions, concatenated):
    z1 = sigmoid((W1 + U1[a]) . [1; x])
    z2 = sigmoid((W2 + U2[a]) . [1; z1])
    p(answer to question q) = softmax((V_q + UV_q[a]) . [1; z2])   over question q's own options
W are shared; U are per-judge offsets that start at zero and carry an L2 penalty, so a judge never seen
in training (or judge index -1, "population") is predicted by the shared weights alone.

With a base (`n_base` > 0; the default `network.base=linear`), the target's logits also get the
log-probabilities of a fixed personalised multinomial logistic model (network.base=linear) on the
last n_base inputs (the judge's standardised expected answers; calibration/model/linear.py), fitted before
training. The base joins at fine-tuning (`add_base`: pretraining is the paper's network), with the target's
columns of V at zero: the target starts as that simple model plus the residual that validation supports.
The hidden layers never read the base's inputs (they read what the paper's network reads). The linear base
keeps extrapolating where the sigmoid layers saturate, which is what held up on shifted data (README).

Every parameter has a leading axis of M independent models (folds x seeds x trials), so many models
train as one batched computation. The loss is the SUM over models of each model's own mean NLL, which
gives each model exactly the gradient it would get alone.

Weights are stored input-major, (M, inputs, outputs), so each layer is one batched matrix product.
The judge offsets are applied by grouping the rows by (model, judge) pair (padded to the largest group)
and multiplying every group by its own offset matrix in one batched product (one autograd node a layer:
calibration/model/personal_layer.py). Only the pairs the batch holds take part (`judge_offsets`): the cost
of a step grows with the judges in the batch, not with all judges, and training can hand in its own copies
of just those offsets (calibration/model/lazy_adam.py), or, when the batch holds most pairs, U itself.
This does the minimal arithmetic, where computing every judge's output for every row would do J times
more, and gathering a weight matrix per row would move B full matrices through memory.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from calibration.model.linear import LinearFit, linear_logp, parameter_shapes
from calibration.model.personal_layer import Groups, personal_layer

BASE_KIND = "multinomial"
"""The base's model in calibration/model/linear.py's names: the multinomial logistic model (network.base=linear)."""


@dataclass
class JudgeOffsets:
    """The judge offsets of the (model, judge) pairs one batch holds: S pairs."""

    keys: torch.Tensor
    """(S,) flat index m * J + j of each pair, increasing: the pair's row in U.view(M * J, In, Out)."""
    slot: torch.Tensor
    """(M, B) the row of `values` each row of the batch uses."""
    values: list[torch.Tensor]
    """U1, U2, UV of the pairs: (S, D+1, H1), (S, H1+1, H2), (S, H2+1, Q*K); with `whole`, of all M * J pairs."""
    whole: bool = False
    """values are U1, U2, UV themselves (views), not copies of the batch's pairs: chosen when the batch
    holds most pairs, where gathering them and writing them back costs more than the absent pairs' share
    of the products (on the LLM-Rubric data a batch of 128 holds ~97% of them)."""


class CalibrationNet(nn.Module):
    """M calibration networks trained side by side.

    Args:
        n_models: M.
        n_inputs: D, the length of x.
        n_judges: J, the number of human judges known at training time.
        n_options: (Q,) options per question; outputs are padded to K = max and masked.
        hidden1: the first hidden layer's size.
        hidden2: the second hidden layer's size.
        personalised: keep per-judge offsets (False = population model only).
        seeds: (M,) one seed per model, for the initial shared weights.
        n_base: E, the number of trailing inputs the base reads and the hidden layers do not (0: no base, the
            paper's network). The base joins at `add_base`: until then the logits leave it out and V keeps its random init, as
            the paper's network would start.
    """

    option_pad: torch.Tensor  # (Q, K) a buffer (register_buffer): True where a question has no such option

    def __init__(
        self,
        n_models: int,
        n_inputs: int,
        n_judges: int,
        n_options: list[int],
        *,
        hidden1: int = 25,
        hidden2: int = 25,
        personalised: bool = True,
        seeds: list[int] | None = None,
        n_base: int = 0,
    ):
        super().__init__()
        self.n_base = n_base
        self.base_active = False  # until add_base (fine-tuning) or base_only_for (a loaded model)
        self.base_columns: torch.Tensor | None = None  # (Q*K,) 1 on the question the base enters
        self.n_inputs = n_inputs  # D, the length of x; W1 reads the first net_inputs of it
        self.net_inputs = n_inputs - n_base  # the hidden layers do not read the base's inputs
        n_in = self.net_inputs
        seeds = list(range(n_models)) if seeds is None else list(seeds)
        self.personalised = personalised
        self.n_options = list(n_options)
        n_q, n_k = len(n_options), max(n_options)
        judges = max(n_judges, 1) if personalised else 0
        self.W1 = nn.Parameter(_init((n_models, n_in + 1, hidden1), seeds, 0))  # (M, D'+1, H1), D' = net_inputs
        self.W2 = nn.Parameter(_init((n_models, hidden1 + 1, hidden2), seeds, 1))  # (M, H1+1, H2)
        self.V = nn.Parameter(_init((n_models, hidden2 + 1, n_q * n_k), seeds, 2))  # (M, H2+1, Q*K)
        self.U1 = nn.Parameter(torch.zeros(n_models, judges, n_in + 1, hidden1))  # (M, J, D'+1, H1)
        self.U2 = nn.Parameter(torch.zeros(n_models, judges, hidden1 + 1, hidden2))  # (M, J, H1+1, H2)
        self.UV = nn.Parameter(torch.zeros(n_models, judges, hidden2 + 1, n_q * n_k))  # (M, J, H2+1, Q*K)
        pad = torch.arange(n_k)[None, :] >= torch.tensor(n_options)[:, None]
        self.register_buffer("option_pad", pad)  # (Q, K) True where a question has no such option
        if n_base:  # fixed (set_base), not trained: parameters only so they follow the model axis and the files
            for name, shape in parameter_shapes(BASE_KIND, n_q, n_base, judges, n_k).items():
                setattr(self, f"base_{name}", nn.Parameter(torch.zeros(n_models, *shape), requires_grad=False))

    def set_base(self, fit: LinearFit) -> None:
        """Use the fitted models `fit` (one per model, of kind BASE_KIND) as the base."""
        with torch.no_grad():
            for name, value in (("base_weight", fit.weight), ("base_bias", fit.bias), ("base_judge", fit.judge)):
                getattr(self, name).copy_(value)

    def add_base(self, question: int) -> None:
        """Let the base into question `question`'s logits (after pretraining without it) and restart its
        columns of V and UV at zero: its prediction starts as the base, plus a residual that fine-tuning grows
        from zero."""
        self.base_only_for(question)
        n_k = self.option_pad.shape[1]
        with torch.no_grad():
            self.V[..., question * n_k : (question + 1) * n_k] = 0.0
            self.UV[..., question * n_k : (question + 1) * n_k] = 0.0

    def base_only_for(self, question: int) -> None:
        """Add the base to question `question`'s logits only. The other questions keep the heads the paper's
        network pretrained, which already predict them in full: adding the base there would count the
        evidence twice. (Not in the files: loading sets it from the rubric's target.)"""
        self.base_active = True
        n_q, n_k = self.option_pad.shape
        self.base_columns = torch.zeros(n_q, n_k)
        self.base_columns[question] = 1.0
        self.base_columns = self.base_columns.flatten()

    @property
    def n_models(self) -> int:
        return self.W1.shape[0]

    def subset(self, models: torch.Tensor) -> CalibrationNet:
        """A new CalibrationNet holding copies of the models `models` (indices on the model axis)."""
        smaller = copy.copy(self)  # the same settings and buffers; new parameters below
        smaller._parameters = {
            name: nn.Parameter(p.detach()[models].clone(), requires_grad=p.requires_grad)
            for name, p in _own_parameters(self).items()
        }
        return smaller

    @staticmethod
    def concat(nets: list[CalibrationNet]) -> CalibrationNet:
        """One CalibrationNet holding the models of `nets` in order (the inverse of `subset`)."""
        if len(nets) == 1:
            return nets[0]
        joined = copy.copy(nets[0])
        joined._parameters = {
            name: nn.Parameter(
                torch.cat([_own_parameters(n)[name].detach() for n in nets]), requires_grad=p.requires_grad
            )
            for name, p in _own_parameters(nets[0]).items()
        }
        return joined

    def shared_parameters(self) -> list[nn.Parameter]:
        return [self.W1, self.W2, self.V]

    def judge_parameters(self) -> list[nn.Parameter]:
        return [self.U1, self.U2, self.UV]

    def judge_offsets(self, judge: torch.Tensor, *, leaves: bool = False) -> JudgeOffsets:
        """The offsets of the (model, judge) pairs in `judge` (M, B); judge -1 reads judge 0's, which the
        forward pass then ignores. When the batch holds most pairs, the values are U1, U2, UV themselves
        (`JudgeOffsets.whole`), so backward fills their .grad. Otherwise copies of just those pairs: as
        views into U1, U2, UV that backward reaches, or with `leaves`, as detached copies that collect their
        own gradient (training updates them and writes them back, calibration/model/lazy_adam.py)."""
        n_models, n_judges = self.U1.shape[:2]
        flat = judge.clamp(min=0) + torch.arange(n_models)[:, None] * n_judges  # (M, B)
        keys, slot = torch.unique(flat, return_inverse=True)
        if 2 * len(keys) > n_models * n_judges:
            return JudgeOffsets(keys, flat, [U.view(-1, *U.shape[2:]) for U in self.judge_parameters()], whole=True)
        values = [U.view(-1, *U.shape[2:]).index_select(0, keys) for U in self.judge_parameters()]
        if leaves:
            values = [v.detach().requires_grad_() for v in values]
        return JudgeOffsets(keys, slot, values)

    def forward(
        self,
        x: torch.Tensor,
        judge: torch.Tensor,
        *,
        offsets: JudgeOffsets | None = None,
        base: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(M, B, Q, K) log-probabilities of every option, -inf on padded options.

        Args:
            x: (M, B, D) inputs.
            judge: (M, B) judge index; -1 = population (shared weights only).
            offsets: `judge_offsets(judge)` to use (None: taken from U1, U2, UV here).
            base: `base_logits(x, judge)`, computed beforehand (training computes it once for every label row:
                the base is fixed).
        """
        return _log_softmax(self._logits(x, judge, offsets, base))

    def loss(
        self,
        x: torch.Tensor,
        judge: torch.Tensor,
        targets: torch.Tensor,
        weights: torch.Tensor | None = None,
        *,
        offsets: JudgeOffsets | None = None,
        base: torch.Tensor | None = None,
        row_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Each model's mean NLL over its observed (weighted) labels, summed over models (`nll_per_model`).
        targets: (M, B, Q) option index, -1 where not observed; weights: (Q,) weight of each question (e.g. 1
        for the target only); row_weight: (M, B) weight of each row (its directory's, `weights=`); the rest as
        `forward`."""
        observed, count = _observed(targets, weights, x.dtype, row_weight)
        return _WeightedNLL.apply(self._logits(x, judge, offsets, base), targets, observed / count[:, None, None])

    def _logits(self, x, judge, offsets, base) -> torch.Tensor:
        """(M, B, Q, K) logits, -inf on padded options."""
        u1 = u2 = uv = groups = None
        if self.personalised:
            offsets = self.judge_offsets(judge) if offsets is None else offsets
            u1, u2, uv = offsets.values
            known = judge.reshape(-1) >= 0
            groups = Groups(offsets.slot.reshape(-1), len(u1), None if bool(known.all()) else known.to(x.dtype))
        z = personal_layer(x[..., : self.net_inputs], self.W1, u1, groups).sigmoid()  # (M, B, H1)
        z = personal_layer(z, self.W2, u2, groups).sigmoid()  # (M, B, H2)
        logits = personal_layer(z, self.V, uv, groups)  # (M, B, Q*K)
        if self.n_base and self.base_active:
            base = self.base_logits(x, judge) if base is None else base
            logits = logits + base * self.base_columns
        logits = logits.view(*logits.shape[:2], *self.option_pad.shape)
        return logits.masked_fill(self.option_pad, float("-inf"))

    def base_logits(self, x: torch.Tensor, judge: torch.Tensor) -> torch.Tensor:
        """(M, B, Q*K) log-probabilities of the base (0 on padded options) for inputs x (M, B, D)."""
        base = linear_logp(
            BASE_KIND, self.base_weight, self.base_bias, self.base_judge, x[..., -self.n_base :], judge, self.n_options
        )  # (M, B, Q, K)
        return base.masked_fill(self.option_pad, 0.0).flatten(2)

    @staticmethod
    def nll_per_model(
        logp: torch.Tensor,
        targets: torch.Tensor,
        weights: torch.Tensor | None = None,
        *,
        row_weight: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(M,) mean NLL of each model over its observed (weighted) labels: divides by the number
        observed, not by B x Q, so unanswered questions do not dilute the loss."""
        observed, count = _observed(targets, weights, logp.dtype, row_weight)
        picked = logp.gather(-1, targets.clamp(min=0)[..., None]).squeeze(-1)  # (M, B, Q)
        picked = picked.masked_fill(targets < 0, 0.0)
        return -(picked * observed).sum(dim=(1, 2)) / count


def _observed(
    targets: torch.Tensor, weights: torch.Tensor | None, dtype, row_weight: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, B, Q) the weight of each observed label (its question's weight times its row's; 0 where none), and
    (M,) their sum per model (1 where it is 0): what a model's mean NLL divides by."""
    observed = (targets >= 0).to(dtype)
    if weights is not None:
        observed = observed * weights
    if row_weight is not None:
        observed = observed * row_weight.to(dtype)[..., None]
    count = observed.sum(dim=(1, 2))
    return observed, torch.where(count > 0, count, torch.ones_like(count))


class _WeightedNLL(torch.autograd.Function):
    """sum of w * -log softmax(logits)[target] over (model, row, question), with its gradient w * (softmax -
    onehot) written out: autograd through log-softmax, gather and the weighting took ~20 small kernels."""

    @staticmethod
    def forward(ctx, logits, targets, w):
        shifted = logits - logits.amax(dim=-1, keepdim=True)  # (M, B, Q, K); -inf on padded options
        exp = shifted.exp()
        total = exp.sum(dim=-1)
        picked = shifted.gather(-1, targets.clamp(min=0)[..., None]).squeeze(-1)  # option 0 always exists: finite
        ctx.save_for_backward(exp / total[..., None], targets, w)
        return (w * (total.log() - picked)).sum()

    @staticmethod
    def backward(ctx, grad):
        softmax, targets, w = ctx.saved_tensors
        scale = w * grad
        out = softmax * scale[..., None]
        out.scatter_add_(-1, targets.clamp(min=0)[..., None], -scale[..., None])  # w = 0 where no target
        return out, None, None


def _log_softmax(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax over a short last axis. PyTorch's CPU kernel is tuned for long rows; over K <= ~10
    options these few elementwise operations are several times faster."""
    shifted = logits - logits.detach().amax(dim=-1, keepdim=True)
    return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()


def _own_parameters(net: nn.Module) -> dict[str, nn.Parameter]:
    """`net`'s own parameters by name, in their order (`_parameters` as a typed mapping: none is None here)."""
    return dict(net.named_parameters(recurse=False))


def _init(shape: tuple[int, ...], seeds: list[int], salt: int) -> torch.Tensor:
    """PyTorch's default Linear init, uniform(+-1/sqrt(fan_in)), drawn per model from its own seed so
    a model's weights do not depend on which other models share the batch."""
    bound = 1.0 / math.sqrt(shape[1])
    parts = []
    for seed in seeds:
        gen = torch.Generator().manual_seed(int(seed) * 1009 + salt)
        parts.append(torch.rand(shape[1:], generator=gen) * 2 * bound - bound)
    return torch.stack(parts)
