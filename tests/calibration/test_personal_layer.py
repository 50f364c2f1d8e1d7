"""The personalised layer's hand-written backward, the whole-offsets path and the precomputed base: each
against the plain computation it replaces."""

from __future__ import annotations

import pytest
import torch

from calibration.model.network import CalibrationNet, JudgeOffsets
from calibration.model.personal_layer import Groups, personal_layer
from calibration.model.settings import Settings
from calibration.model.train import Rows, _adam, _base_rows, _lazy_adam, train_step


def _reference(x, W, U, judge):
    """(W + U[judge]) . [1; x] row by row, U (M, J, In+1, Out); judge -1 takes W alone."""
    x1 = torch.cat([torch.ones_like(x[..., :1]), x], dim=-1)
    per_row = U[torch.arange(len(U))[:, None], judge.clamp(min=0)] * (judge >= 0)[..., None, None]
    return torch.einsum("mbi,mbio->mbo", x1, W[:, None] + per_row)


def _layer_inputs(seed: int, judge: torch.Tensor, n_judges: int, n_in=4, n_out=3):
    gen = torch.Generator().manual_seed(seed)
    n_models, n_rows = judge.shape
    x = torch.rand(n_models, n_rows, n_in, generator=gen, dtype=torch.float64)
    W = torch.randn(n_models, n_in + 1, n_out, generator=gen, dtype=torch.float64)
    U = torch.randn(n_models, n_judges, n_in + 1, n_out, generator=gen, dtype=torch.float64)
    return x, W, U


def test_layer_and_its_gradients_match_the_row_by_row_product():
    judge = torch.tensor([[0, 2, 2, -1, 1, 2], [1, 1, -1, 0, 0, 0]])  # unequal groups, population rows
    x, W, U = _layer_inputs(0, judge, 3)
    flat = judge.clamp(min=0) + torch.arange(2)[:, None] * 3
    known = (judge >= 0).reshape(-1).double()
    groups = Groups(flat.reshape(-1), 6, known)
    u = U.reshape(6, *U.shape[2:])
    out = personal_layer(x, W, u, groups)
    torch.testing.assert_close(out, _reference(x, W, U, judge))
    for t in (x, W, u):
        t.requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, c: personal_layer(a, b, c, groups), (x, W, u))


def test_layer_ignores_what_sits_in_padding_places():
    judge = torch.tensor([[0, 0, 0, 1]])  # judge 1's group is padded with three places
    x, W, U = _layer_inputs(1, judge, 2)
    groups = Groups(judge.reshape(-1), 2, None)
    assert groups.size == 3 and int((groups.slot_row == 0).sum()) == 3  # padding reads row 0 ...
    u = U.reshape(2, *U.shape[2:]).requires_grad_()
    personal_layer(x, W, u, groups).sum().backward()
    expected = U.clone().requires_grad_()
    _reference(x, W, expected, judge).sum().backward()
    torch.testing.assert_close(u.grad, expected.grad.reshape(u.shape))  # ... and adds nothing to judge 1's gradient


@pytest.mark.parametrize("seed", range(6))
def test_layer_matches_the_row_by_row_product_whatever_the_group_sizes(seed):
    """Random batches: skewed judge frequencies (some pairs empty, some large), population rows."""
    gen = torch.Generator().manual_seed(seed)
    n_models, n_rows, n_judges = 1 + seed % 3, [1, 5, 17, 40, 64, 9][seed], 2 + seed
    weights = torch.rand(n_judges, generator=gen) ** 3
    judge = torch.multinomial(weights, n_models * n_rows, replacement=True, generator=gen).view(n_models, n_rows)
    judge[torch.rand(judge.shape, generator=gen) < 0.1] = -1
    x, W, U = _layer_inputs(seed, judge, n_judges)
    flat = judge.clamp(min=0) + torch.arange(n_models)[:, None] * n_judges
    known = (judge >= 0).reshape(-1).double()
    groups = Groups(flat.reshape(-1), n_models * n_judges, known)
    u = U.reshape(n_models * n_judges, *U.shape[2:])
    torch.testing.assert_close(personal_layer(x, W, u, groups), _reference(x, W, U, judge))
    for t in (x, W, u):
        t.requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, c: personal_layer(a, b, c, groups), (x, W, u))


def _step(net: CalibrationNet, judges: torch.Tensor, whole: bool) -> CalibrationNet:
    """One lazy Adam step of a copy of `net` on fixed rows, with the offsets gathered or whole."""
    net = net.subset(torch.arange(net.n_models))
    for p in net.shared_parameters():
        p.requires_grad_()
    settings = Settings(l2_judge=0.01)
    optimiser, lazy = _adam(net, settings, 0.05), _lazy_adam(net, settings, 0.05)
    offsets = net.judge_offsets(judges, leaves=True)
    assert offsets.whole  # most pairs present
    if not whole:
        values = [
            U.view(-1, *U.shape[2:]).index_select(0, offsets.keys).detach().requires_grad_()
            for U in net.judge_parameters()
        ]
        offsets = JudgeOffsets(offsets.keys, torch.searchsorted(offsets.keys, offsets.slot), values)
    gen = torch.Generator().manual_seed(3)
    x = torch.rand(*judges.shape, 7, generator=gen)
    targets = torch.randint(0, 3, (*judges.shape, 3), generator=gen)
    loss = net.loss(x, judges, targets, offsets=offsets)
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    optimiser.step()
    lazy.step(offsets)
    return net


def test_whole_offsets_update_exactly_the_pairs_the_gathered_ones_do():
    net = CalibrationNet(2, 7, 5, [4, 3, 4], hidden1=6, hidden2=5, seeds=[0, 1])
    with torch.no_grad():
        for u in net.judge_parameters():
            u.normal_(std=0.1)
    judges = torch.tensor([[0, 1, 2, 3, 0, 1], [4, 3, 2, 1, 4, 3]])  # 8 of 10 pairs; judge 4 absent in model 0
    whole, gathered = _step(net, judges, True), _step(net, judges, False)
    for a, b in zip(whole.parameters(), gathered.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    for before, after in zip(net.judge_parameters(), whole.judge_parameters(), strict=True):
        assert torch.equal(before[0, 4], after[0, 4]) and torch.equal(before[1, 0], after[1, 0])  # absent: untouched
        assert not torch.equal(before[0, 0], after[0, 0])  # present: moved


def test_precomputed_base_gives_the_same_step():
    gen = torch.Generator().manual_seed(4)
    net = CalibrationNet(2, 7, 5, [4, 3, 4], hidden1=6, hidden2=5, seeds=[0, 1], n_base=3)
    with torch.no_grad():
        for name in ("base_weight", "base_bias", "base_judge"):
            getattr(net, name).normal_(generator=gen)
    net.add_base(0)  # as fine-tuning does
    X = torch.rand(10, 7, generator=gen)
    rows = Rows(
        torch.randint(0, 10, (30,), generator=gen),
        torch.randint(0, 5, (30,), generator=gen),
        torch.randint(0, 3, (30, 3), generator=gen),
    )
    base_rows = _base_rows(net, X, rows)
    b = torch.randint(0, 30, (2, 8), generator=gen)
    after = []
    for base in (None, base_rows[torch.arange(2)[:, None], b]):
        copy = net.subset(torch.arange(2))
        for p in copy.shared_parameters():
            p.requires_grad_()
        settings = Settings()
        train_step(
            copy, X, rows, b, torch.ones(3), _adam(copy, settings, 0.01), _lazy_adam(copy, settings, 0.01), base=base
        )
        after.append(copy)
    assert float(base_rows.abs().sum()) > 0
    for a, c in zip(*(n.parameters() for n in after), strict=True):
        torch.testing.assert_close(a, c)
