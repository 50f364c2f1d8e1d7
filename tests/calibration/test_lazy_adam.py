"""Lazy Adam on the judge offsets: dense Adam (torch.optim.Adam over every judge's offsets, every step) where
every judge is in every batch, and absent judges untouched otherwise."""

from __future__ import annotations

import torch

from calibration.model.network import CalibrationNet
from calibration.model.settings import Settings
from calibration.model.train import _adam, _lazy_adam

N_OPTIONS = [4, 3, 4]
EVERY = torch.arange(5).repeat(2, 3)  # (2 models, 15 rows): each model sees all 5 judges


def _train(settings: Settings, batches: list[torch.Tensor], *, dense: bool = False) -> list[CalibrationNet]:
    """Adam steps of a 2-model net on fixed random rows, one step per (M, B) judges in `batches`; the net
    after each step (copies). dense: plain Adam on the judge offsets instead of training's lazy one."""
    gen = torch.Generator().manual_seed(0)
    net = CalibrationNet(2, 7, 5, N_OPTIONS, hidden1=6, hidden2=5, seeds=[0, 1])
    x = torch.rand(2, EVERY.shape[1], 7, generator=gen)
    targets = torch.randint(0, 3, (2, EVERY.shape[1], 3), generator=gen)
    optimiser, lazy = _adam(net, settings, 0.05), _lazy_adam(net, settings, 0.05)
    if dense:
        optimiser.add_param_group({"params": net.judge_parameters(), "weight_decay": 2 * settings.l2_judge})
        lazy = None
    after = []
    for judges in batches:
        offsets = None if lazy is None else net.judge_offsets(judges, leaves=True)
        loss = net.loss(x[:, : judges.shape[1]], judges, targets[:, : judges.shape[1]], offsets=offsets)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        if lazy is not None:
            lazy.step(offsets)
        after.append(net.subset(torch.arange(2)))
    return after


def test_lazy_equals_dense_when_every_judge_is_in_every_batch():
    for l2 in (0.0, 0.01):  # with all judges present, weight decay acts the same way in both
        settings = Settings(l2_judge=l2)
        lazy = _train(settings, [EVERY] * 30)[-1]
        dense = _train(settings, [EVERY] * 30, dense=True)[-1]
        assert float(lazy.U1.detach().abs().max()) > 1e-3  # the offsets did move
        for a, b in zip(lazy.parameters(), dense.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_absent_judges_stay_untouched_by_lazy_updates_and_move_under_dense_ones():
    only_judge_0 = torch.zeros(2, 4, dtype=torch.long)
    batches = [EVERY] * 10 + [only_judge_0]
    for dense in (False, True):
        before, after = _train(Settings(l2_judge=0.01), batches, dense=dense)[-2:]
        moved = dense
        for u0, u1 in zip(before.judge_parameters(), after.judge_parameters(), strict=True):
            assert not torch.equal(u0[:, 0], u1[:, 0])  # the judge in the batch moved
            assert torch.equal(u0[:, 1:], u1[:, 1:]) != moved  # the absent ones: decay and momentum under dense
