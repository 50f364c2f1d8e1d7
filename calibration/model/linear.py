"""Personalised linear models on the judge's expected answers: multinomial logistic and ordinal (cumulative-logit).

For human judge a, item features e (the LLM judge's expected answer to every question, standardised):
    multinomial:  p(y = k) = softmax_k(W_k . e + b_k + u_ak)
    ordinal:      p(y <= k) = sigmoid(theta_k - (w . e + u_a)),   theta_1 < theta_2 < ...
The judge offsets u follow the network's rule: an L2 penalty like the shared weights, so an unseen judge
(index -1) is the population model (u = 0). They serve twice: as the simple baselines every calibrator is
measured against (`linear_baseline`, L2 chosen by inner cross-validation), and as the base (either kind) that
the default network adds its residual to (calibration/model/network.py).

Every model has a leading axis M (folds x penalties), and all M are fitted by one L-BFGS run on the sum
of their losses: the problems are independent and strictly convex, so each model reaches its own optimum
whatever its batch-mates, to the tolerance (not bit for bit: the line search is shared; the network's
base is therefore fitted one training set at a time, calibration/model/train.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

KINDS = ("multinomial", "ordinal")
CHUNK_ENTRIES = 1 << 20
"""(model, row, question) entries the L-BFGS loss evaluates at a time (about 8 MB of float64 per tensor)."""
GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
"""L2 penalties (per mean NLL) that the inner cross-validation chooses from."""


@dataclass
class LinearFit:
    """Fitted parameters, float64. Shapes: M models, Q questions, E inputs, K options, J judges."""

    kind: str
    weight: torch.Tensor  # multinomial (M, Q, E, K); ordinal (M, Q, E)
    bias: torch.Tensor  # multinomial (M, Q, K); ordinal (M, Q, K-1) unconstrained thresholds (see _thresholds)
    judge: torch.Tensor  # multinomial (M, Q, J, K); ordinal (M, Q, J)

    def subset(self, models) -> LinearFit:
        return LinearFit(self.kind, self.weight[models], self.bias[models], self.judge[models])

    @staticmethod
    def concat(fits: list[LinearFit]) -> LinearFit:
        return LinearFit(fits[0].kind, *(torch.cat([getattr(f, n) for f in fits]) for n in ("weight", "bias", "judge")))

    def logp(self, e: torch.Tensor, judge: torch.Tensor, n_options: list[int]) -> torch.Tensor:
        """(M, B, Q, K) log-probabilities (-inf on padded options) for inputs e (M, B, E), judges (M, B)."""
        return linear_logp(self.kind, self.weight, self.bias, self.judge, e, judge, n_options)


def parameter_shapes(kind: str, n_q: int, n_in: int, n_judges: int, n_k: int) -> dict[str, tuple[int, ...]]:
    """Shapes of one model's weight, bias and judge offsets (LinearFit's fields without the model axis)."""
    if kind == "multinomial":
        return {"weight": (n_q, n_in, n_k), "bias": (n_q, n_k), "judge": (n_q, n_judges, n_k)}
    return {"weight": (n_q, n_in), "bias": (n_q, n_k - 1), "judge": (n_q, n_judges)}


def linear_logp(kind, weight, bias, judge_offsets, e, judge, n_options) -> torch.Tensor:
    pad = torch.arange(max(n_options))[None, :] >= torch.tensor(n_options)[:, None]  # (Q, K)
    if kind == "multinomial":
        e = e.to(weight.dtype)
        known = (judge >= 0).to(e.dtype)[..., None]  # (M, B, 1)
        jj = judge.clamp(min=0)
        n_q = len(n_options)
        logits = torch.einsum("mbe,mqek->mbqk", e, weight) + bias[:, None]
        if judge_offsets.shape[2]:
            idx = jj[:, None, :, None].expand(-1, n_q, -1, judge_offsets.shape[-1])
            offset = torch.gather(judge_offsets, 2, idx).transpose(1, 2)  # (M, B, Q, K)
            logits = logits + offset * known[..., None]
        logits = logits.masked_fill(pad, float("-inf"))
        return logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    eta = _ordinal_score(weight, judge_offsets, e, judge)  # (M, B, Q)
    theta = _thresholds(bias, n_options)  # (M, Q, K-1)
    cdf = torch.sigmoid(theta[:, None] - eta[..., None])  # (M, B, Q, K-1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf, torch.ones_like(cdf[..., :1])], dim=-1)
    prob = (cdf[..., 1:] - cdf[..., :-1]).clamp(min=1e-12)
    return prob.log().masked_fill(pad, float("-inf"))


def picked_logp(kind, weight, bias, judge_offsets, e, judge, answers, n_options) -> torch.Tensor:
    """(M, B, Q) log-probability of each row's answer (answers: option index; -1 gives any finite value, to be
    masked): the training loss's only need. For the ordinal model it skips the (M, B, Q, K) tensors of
    `linear_logp`, which made the base's L-BFGS 4-5x slower at 10k+ rows; the values are the same."""
    if kind == "multinomial":
        logp = linear_logp(kind, weight, bias, judge_offsets, e, judge, n_options)
        return logp.gather(-1, answers.clamp(min=0)[..., None]).squeeze(-1)
    eta = _ordinal_score(weight, judge_offsets, e, judge)  # (M, B, Q)
    theta = _thresholds(bias, n_options)  # (M, Q, K-1)
    n_m, n_q, n_t = theta.shape
    edges = torch.cat([torch.full_like(theta[..., :1], -1e4), theta, torch.full_like(theta[..., :1], 1e4)], dim=-1)
    flat = edges.reshape(n_m, n_q * (n_t + 2))  # option k lies between edges k and k + 1
    at = ((torch.arange(n_q) * (n_t + 2))[None, None, :] + answers.clamp(min=0)).reshape(n_m, -1)  # (M, B*Q)
    lower, upper = (torch.gather(flat, 1, i).reshape(eta.shape) for i in (at, at + 1))
    prob = torch.sigmoid(upper - eta) - torch.sigmoid(lower - eta)
    return prob.clamp(min=1e-12).log()


def _ordinal_score(weight, judge_offsets, e, judge) -> torch.Tensor:
    """(M, B, Q) the ordinal model's score w . e + u_a (u = 0 for an unseen judge, index -1)."""
    e = e.to(weight.dtype)
    eta = torch.einsum("mbe,mqe->mbq", e, weight)
    if not judge_offsets.shape[2]:
        return eta
    # Gathered from the (M, J, Q) view along J: no (M, Q, B) index copy, and a small gradient buffer.
    by_judge = judge_offsets.transpose(1, 2)
    offset = torch.gather(by_judge, 1, judge.clamp(min=0)[..., None].expand(-1, -1, eta.shape[-1]))
    return eta + offset * (judge >= 0).to(e.dtype)[..., None]


def _thresholds(raw: torch.Tensor, n_options: list[int]) -> torch.Tensor:
    """Increasing thresholds from unconstrained parameters: theta_1 = raw_1, then softplus steps; a
    question with fewer options gets thresholds far above every score past its last one."""
    steps = F.softplus(raw[..., 1:]) + 1e-3
    theta = torch.cat([raw[..., :1], raw[..., :1] + torch.cumsum(steps, dim=-1)], dim=-1)
    valid = torch.arange(theta.shape[-1])[None, :] < (torch.tensor(n_options)[:, None] - 1)
    return torch.where(valid, theta, torch.full_like(theta, 1e4))


def _initial_parameters(kind: str, freq: torch.Tensor, n_in: int, judges: int):
    """(weight, bias, offsets) before fitting: zero weights and offsets, the bias at the smoothed answer
    frequencies freq (M, Q, K) (log-frequencies, or for the ordinal kind thresholds at their cumulative
    logits)."""
    n_models, n_q, n_k = freq.shape
    if kind == "multinomial":
        weight = torch.zeros(n_models, n_q, n_in, n_k, dtype=torch.float64)
        offsets = torch.zeros(n_models, n_q, judges, n_k, dtype=torch.float64)
        return weight, freq.log(), offsets
    cum = freq.cumsum(-1)[..., :-1].clamp(1e-4, 1 - 1e-4)
    theta = (cum / (1 - cum)).log()
    gaps = (theta[..., 1:] - theta[..., :-1]).clamp(min=1e-2)
    bias = torch.cat([theta[..., :1], torch.log(torch.expm1(gaps))], dim=-1)
    weight = torch.zeros(n_models, n_q, n_in, dtype=torch.float64)
    offsets = torch.zeros(n_models, n_q, judges, dtype=torch.float64)
    return weight, bias, offsets


def fit_linear(
    kind: str,
    e: torch.Tensor,
    judge: torch.Tensor,
    answers: torch.Tensor,
    rows_mask: torch.Tensor,
    n_options: list[int],
    n_judges: int,
    l2: torch.Tensor | float,
    *,
    personalised: bool = True,
    row_weight: torch.Tensor | None = None,
) -> LinearFit:
    """Fit M independent models by L-BFGS.

    e: (M, R, E) inputs of each model's training rows (padded), judge: (M, R), answers: (M, R, Q) option
    index or -1, rows_mask: (M, R) real rows. l2: (M,) or a float, the penalty on weights and judge
    offsets per mean NLL. Each (model, question) loss is the mean NLL over its observed answers, weighted by
    row_weight (M, R) where given (each directory's `weights=`, calibration/data/union.py).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    n_models, _, n_in = e.shape
    n_q, n_k = len(n_options), max(n_options)
    e = e.double()
    observed = (answers >= 0) & rows_mask[..., None]  # (M, R, Q)
    if row_weight is not None:  # rows of weight 0 are left out; the others count their weight
        observed &= (row_weight > 0)[..., None]
    obs_weight = observed.double() if row_weight is None else observed * row_weight.double()[..., None]
    counts = torch.zeros(n_models, n_q, n_k, dtype=torch.float64)
    counts.scatter_add_(2, answers.clamp(min=0).transpose(1, 2), obs_weight.transpose(1, 2))
    freq = (counts + 0.5) / (counts + 0.5).sum(-1, keepdim=True)  # smoothed answer frequencies
    weight, bias, offsets = _initial_parameters(kind, freq, n_in, n_judges if personalised else 0)
    params = [p.requires_grad_() for p in (weight, bias, offsets)]
    l2 = torch.as_tensor(l2, dtype=torch.float64).expand(n_models)
    n_obs = obs_weight.sum(1)  # (M, Q) what each mean NLL divides by (1 where nothing is observed)
    n_obs = torch.where(n_obs > 0, n_obs, torch.ones_like(n_obs))
    # Converged to ~1e-9 in the loss on the LLM-Rubric data (500 iterations at 1e-9 gain nothing, 8x slower).
    optimiser = torch.optim.LBFGS(
        params,
        lr=1,
        max_iter=100,
        tolerance_grad=1e-6,
        tolerance_change=1e-10,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    # Rows in chunks of about CHUNK_ENTRIES (model, row, question) entries, each chunk's backward before the
    # next forward: its float64 intermediates then stay in cache, where one pass over 100k rows (100+ MB a
    # tensor) ran 2.3x slower per row than 10k. Data of one chunk (the LLM-Rubric sizes) is one pass as before.
    chunk = max(256, CHUNK_ENTRIES // max(1, n_models * n_q))
    spans = [slice(a, a + chunk) for a in range(0, e.shape[1], chunk)]

    def closure():
        optimiser.zero_grad()
        total = torch.zeros((), dtype=torch.float64)
        if kind == "multinomial":  # the gradient written out: 2x faster than autograd at the base's sizes
            return _multinomial_closure(params, spans, e, judge, answers, obs_weight, n_obs, n_options, l2)
        for rows in spans:
            picked = picked_logp(kind, weight, bias, offsets, e[:, rows], judge[:, rows], answers[:, rows], n_options)
            picked = picked.masked_fill(~observed[:, rows], 0.0)
            if row_weight is not None:
                picked = picked * obs_weight[:, rows]
            nll = -(picked.sum(1) / n_obs).sum(-1)  # (M,)
            if rows.start == 0:
                penalty = (weight**2).flatten(1).sum(1) + (offsets**2).flatten(1).sum(1)
                nll = nll + l2 * penalty
            loss = nll.sum()
            loss.backward()
            total = total + loss.detach()
        return total

    optimiser.step(closure)
    return LinearFit(kind, *(p.detach() for p in params))


@torch.no_grad()
def _multinomial_closure(params, spans, e, judge, answers, observed, n_obs, n_options, l2) -> torch.Tensor:
    """fit_linear's summed loss for the multinomial model, with the gradient of every parameter set in its
    .grad: d NLL / d logits = (softmax - one-hot) x each row's weight 1 / n_obs, then one product per
    parameter (the judge offsets by index_add over the rows' judges). Equal to autograd's to rounding
    (tests/calibration/test_linear.py)."""
    weight, bias, offsets = params
    grads = [torch.zeros_like(p) for p in params]
    pad = torch.arange(max(n_options))[None, :] >= torch.tensor(n_options)[:, None]  # (Q, K)
    n_models, n_q, n_judges, n_k = offsets.shape
    total = torch.zeros((), dtype=torch.float64)
    for rows in spans:
        er, jr, ans, obs = e[:, rows], judge[:, rows], answers[:, rows], observed[:, rows]  # obs: weights
        known = jr >= 0
        logits = torch.einsum("mbe,mqek->mbqk", er, weight) + bias[:, None]
        if n_judges:
            flat = (jr.clamp(min=0) + torch.arange(n_models)[:, None] * n_judges).reshape(-1)  # (M*B,)
            by_judge = offsets.transpose(1, 2).reshape(n_models * n_judges, n_q * n_k)
            logits += by_judge.index_select(0, flat).view(logits.shape) * known[..., None, None]
        logp = logits.masked_fill_(pad, float("-inf")).log_softmax(-1)
        w = obs / n_obs[:, None, :]  # (M, B, Q) each observed answer's weight in its mean NLL
        picked = logp.gather(-1, ans.clamp(min=0)[..., None]).squeeze(-1)
        total += -(picked.masked_fill(obs == 0, 0.0) * w).sum()
        dz = logp.exp_().mul_(w[..., None])  # softmax x weight, then minus the one-hot x weight
        dz.scatter_add_(-1, ans.clamp(min=0)[..., None], -w[..., None])
        grads[0] += torch.einsum("mbe,mbqk->mqek", er, dz)
        grads[1] += dz.sum(1)
        if n_judges:
            per_judge = torch.zeros(n_models * n_judges, n_q * n_k, dtype=dz.dtype)
            per_judge.index_add_(0, flat, (dz * known[..., None, None]).reshape(len(flat), -1))
            grads[2] += per_judge.view(n_models, n_judges, n_q, n_k).transpose(1, 2)
    l2 = l2.view(-1, *([1] * (weight.dim() - 1)))
    total += (l2.flatten() * ((weight**2).flatten(1).sum(1) + (offsets**2).flatten(1).sum(1))).sum()
    grads[0] += 2 * l2 * weight
    grads[2] += 2 * l2.view(-1, 1, 1, 1) * offsets
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    return total
