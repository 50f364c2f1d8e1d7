"""Properties of the calibration network: valid distributions, masking, population fallback, and that
batching models changes nothing about any one of them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from calibration.data.dataset import load_dataset
from calibration.model.network import CalibrationNet
from calibration.model.settings import Settings
from calibration.model.train import Plan, fit_dataset

N_OPTIONS = [4, 3, 4]


def _net(models=3, judges=5, **kw):
    return CalibrationNet(models, 7, judges, N_OPTIONS, hidden1=6, hidden2=5, seeds=list(range(models)), **kw)


def test_distributions_sum_to_one_and_padding_is_zero():
    net = _net()
    x = torch.rand(3, 8, 7)
    logp = net(x, torch.randint(-1, 5, (3, 8)))
    p = logp.exp()
    assert torch.allclose(p.sum(-1), torch.ones(3, 8, 3))
    assert torch.all(p[:, :, 1, 3] == 0)  # the 3-option question has no 4th option


def test_unseen_judge_is_the_population_model():
    net = _net()
    with torch.no_grad():
        for u in net.judge_parameters():
            u.normal_()  # make the offsets matter
    x = torch.rand(3, 4, 7)
    population = net(x, torch.full((3, 4), -1))
    personal = net(x, torch.zeros(3, 4, dtype=torch.long))
    assert not torch.allclose(population, personal)
    unpersonalised = _net(personalised=False)
    unpersonalised.load_state_dict({k: v for k, v in net.state_dict().items() if not k.startswith("U")}, strict=False)
    same = unpersonalised(x, torch.zeros(3, 4, dtype=torch.long))
    assert torch.allclose(population, same, atol=1e-6)


def test_judge_offsets_start_at_zero():
    net = _net()
    assert all(float(u.detach().abs().sum()) == 0.0 for u in net.judge_parameters())


def test_loss_is_mean_over_observed_labels_only():
    logp = torch.log(torch.full((1, 2, 3, 4), 0.25))
    targets = torch.tensor([[[0, -1, -1], [-1, -1, -1]]])
    # one observed label of probability 1/4: mean NLL = log 4, not diluted by the 5 missing ones
    assert CalibrationNet.nll_per_model(logp, targets).item() == pytest.approx(np.log(4))


def _early_stopping_setup(synthetic_dir, *, finetune_steps: int):
    """The synthetic dataset, its inputs and small settings that stop early (patience 1, high learning rates)."""
    ds = load_dataset(synthetic_dir)
    X = torch.from_numpy(ds.features(ds.feature_spec()))
    steps = {"pretrain_steps": 40, "finetune_steps": finetune_steps, "eval_every": 5, "patience": 1}
    return ds, X, Settings(hidden1=8, hidden2=8, ensemble=1, lr=0.1, finetune_lr=0.05, **steps)


def test_models_are_independent_of_their_batch_mates(synthetic_dir):
    """A model ends with the same weights beside any batch mates, also when they train on after its own
    early stopping, however `workers` slices the batch and stopped models leave it: equal to float
    rounding (the padded judge-group size depends on the whole batch, and with it the matrix kernels)."""
    ds, X, settings = _early_stopping_setup(synthetic_dir, finetune_steps=60)
    rows = np.arange(len(ds.label_item))
    splits = [(rows[rows % 4 != k], rows[rows % 4 == k]) for k in range(4)]

    def train(indices, workers=1):
        plan = Plan([splits[i][0] for i in indices], [splits[i][1] for i in indices], [10 + i for i in indices])
        net = fit_dataset(ds, X, plan, settings, workers=workers)
        return net.state_dict(), plan.history

    together, history = train([0, 1, 2, 3])
    stopped = history["pretrain"]["steps"]
    assert stopped < settings.pretrain_steps  # early stopping did end this phase...
    for workers in (2, 3):
        sliced, sliced_history = train([0, 1, 2, 3], workers=workers)
        for phase in ("pretrain", "finetune"):
            assert sliced_history[phase]["steps"] == history[phase]["steps"]
            assert np.allclose(sliced_history[phase]["best_val_nll"], history[phase]["best_val_nll"], atol=1e-6)
        for name, value in together.items():
            assert torch.allclose(sliced[name], value, atol=1e-6), (workers, name)
    for alone_index in range(4):
        alone, alone_history = train([alone_index])
        for name, value in alone.items():
            if value.dim() and value.shape[0] == 1:
                assert torch.allclose(together[name][alone_index], value[0], atol=1e-5), (alone_index, name)
    # ...and at least one model stopped before its batch mates (the case this test is about)
    assert any(train([i])[1]["pretrain"]["steps"] < stopped for i in range(4))


def test_a_model_without_validation_labels_trains_every_step(synthetic_dir):
    """Beside models that stop early, one with no validation rows (or none answering the phase's questions)
    must not keep its untrained weights: it trains every step, like a model trained without validation."""
    ds, X, settings = _early_stopping_setup(synthetic_dir, finetune_steps=30)
    rows = np.arange(len(ds.label_item))
    fit, val = rows[rows % 3 != 0], rows[rows % 3 == 0]
    none = val[:0]  # no validation rows at all

    def train(val_rows):
        plan = Plan([fit] * len(val_rows), val_rows, [7] * len(val_rows))
        net = fit_dataset(ds, X, plan, settings, workers=1)
        return net.state_dict(), plan.history

    mixed, history = train([val, val, none])
    assert history["pretrain"]["steps"] == settings.pretrain_steps  # the unvalidated model ran every step
    without_validation, _ = train([none, none])
    for name in ("W1", "U1", "V"):
        assert torch.allclose(mixed[name][2], without_validation[name][0], atol=1e-5), name
        assert not torch.allclose(mixed[name][0], mixed[name][2])  # the validated one did stop early


def test_settings_reject_unknown_keys():
    from rubric.errors import InputError

    with pytest.raises(InputError, match="unknown setting"):
        Settings.from_groups({"hidden3": 4})
    s = Settings.from_groups({"drop_questions": ["a"]}, {"lr": 0.1})
    assert dataclasses.replace(s).drop_questions == ("a",) and s.lr == 0.1


def test_loss_and_its_gradient_equal_autograd_through_log_softmax():
    net = _net()
    with torch.no_grad():
        for u in net.judge_parameters():
            u.normal_(std=0.3)
    x = torch.rand(3, 6, 7)
    judge = torch.randint(0, 5, (3, 6))
    targets = torch.randint(-1, 3, (3, 6, 3))
    weights = torch.tensor([1.0, 0.5, 2.0])
    loss = net.loss(x, judge, targets, weights)
    fused = torch.autograd.grad(loss, net.shared_parameters())
    plain_loss = CalibrationNet.nll_per_model(net(x, judge), targets, weights).sum()
    plain = torch.autograd.grad(plain_loss, net.shared_parameters())
    torch.testing.assert_close(loss, plain_loss)
    for a, b in zip(fused, plain, strict=True):
        assert float(b.abs().max()) > 1e-4
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
