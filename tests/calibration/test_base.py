"""The network's base (Settings.base): it joins the target at fine-tuning, and the hidden layers do not read
its inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from calibration.data.dataset import load_dataset
from calibration.model.bases import fit_base, padded_rows
from calibration.model.ensemble import train_ensemble
from calibration.model.files import load_model, save_model
from calibration.model.linear import LinearFit, fit_linear
from calibration.model.network import BASE_KIND, CalibrationNet
from calibration.model.settings import Settings
from calibration.model.train import Rows, fit_dataset, model_inputs, plan_models

N_OPTIONS = [4, 3, 4]
SMALL = Settings(
    hidden1=6,
    hidden2=5,
    pretrain_steps=30,
    finetune_steps=20,
    ensemble=2,
    eval_every=5,
    patience=2,
    lr=0.05,
    finetune_lr=0.05,
)


def _net(**kw) -> CalibrationNet:
    """3 models, 7 inputs of which the last 2 are the base's; a base with non-zero weights."""
    net = CalibrationNet(3, 7, 5, N_OPTIONS, hidden1=6, hidden2=5, seeds=[0, 1, 2], n_base=2, **kw)
    gen = torch.Generator().manual_seed(0)
    net.set_base(
        LinearFit(
            "multinomial",
            torch.randn(3, 3, 2, 4, generator=gen),
            torch.randn(3, 3, 4, generator=gen),
            torch.randn(3, 3, 5, 4, generator=gen),
        )
    )
    return net


def _with_other_base_inputs(x: torch.Tensor) -> torch.Tensor:
    changed = x.clone()
    changed[..., -2:] += 1.5
    return changed


def test_hidden_layers_do_not_read_the_base_inputs():
    x, judge = torch.rand(3, 8, 7), torch.randint(0, 5, (3, 8))
    narrow = _net()
    assert narrow.W1.shape == (3, 5 + 1, 6) and narrow.U1.shape == (3, 5, 5 + 1, 6)
    assert torch.equal(narrow(x, judge), narrow(_with_other_base_inputs(x), judge))  # reads none of them
    narrow.add_base(2)  # once the base joins, the target reads them through the base alone
    assert not torch.allclose(narrow(x, judge), narrow(_with_other_base_inputs(x), judge))


def test_late_base_joins_the_target_only_starting_as_the_base():
    net = _net()
    x, judge = torch.rand(3, 8, 7), torch.randint(-1, 5, (3, 8))
    assert float(net.V.detach().abs().sum()) > 0  # the paper's random init, not the residual's zero
    before = net(x, judge)
    net.add_base(2)
    after = net(x, judge)
    base = net.base_logits(x, judge).view(3, 8, 3, 4)
    assert torch.allclose(after[:, :, 2], base[:, :, 2], atol=1e-6)  # target = base + a zero residual
    assert torch.equal(after[:, :, :2], before[:, :, :2])  # the other questions keep their pretrained heads


def _train(ds, settings: Settings, seeds=(3, 4)):
    spec, X, e = model_inputs(ds, settings)
    rows = np.arange(len(ds.label_item))
    plan = plan_models(ds, [rows] * len(seeds), list(seeds), settings)
    net = fit_dataset(ds, X, plan, settings, workers=1, n_base=e)
    return net, plan


def test_pretraining_does_not_depend_on_the_base(synthetic_dir):
    """base_l2 changes the base; pretraining is the paper's network alone and ends the same whatever the base."""
    ds = load_dataset(synthetic_dir)
    histories = [_train(ds, dataclasses.replace(SMALL, base_l2=l2))[1].history for l2 in (1e-3, 1.0)]
    assert histories[0]["pretrain"]["best_val_nll"] == histories[1]["pretrain"]["best_val_nll"]
    assert histories[0]["finetune"]["best_val_nll"] != histories[1]["finetune"]["best_val_nll"]


def test_model_with_a_base_round_trips_through_its_files(synthetic_dir, tmp_path):
    ds = load_dataset(synthetic_dir)
    settings = SMALL
    net, spec, _ = train_ensemble(ds, settings, seed=0)
    assert net.W1.shape[1] == net.n_inputs - len(spec["expected"]["questions"]) + 1  # the narrower first layer
    assert net.base_weight.shape[-1] == max(ds.n_options)  # one weight per option: the multinomial model
    save_model(tmp_path / "m", net, ds, spec, settings)
    loaded = load_model(tmp_path / "m")
    X = torch.from_numpy(ds.features(spec)).expand(net.n_models, -1, -1)
    judge = torch.zeros(net.n_models, X.shape[1], dtype=torch.long)
    with torch.no_grad():
        assert torch.equal(loaded.net(X, judge), net(X, judge))  # the target alone gets the base, as trained


def test_linear_base_is_the_multinomial_model_plus_a_zero_residual():
    net = CalibrationNet(3, 7, 5, N_OPTIONS, hidden1=6, hidden2=5, seeds=[0, 1, 2], n_base=2)
    gen = torch.Generator().manual_seed(1)
    fit = LinearFit(
        "multinomial",
        torch.randn(3, 3, 2, 4, generator=gen),
        torch.randn(3, 3, 4, generator=gen),
        torch.randn(3, 3, 5, 4, generator=gen),
    )
    net.set_base(fit)
    x, judge = torch.rand(3, 8, 7), torch.randint(-1, 5, (3, 8))
    net.add_base(1)
    expected = fit.logp(x[..., -2:], judge, N_OPTIONS).float()  # -inf on the padded option of question 1
    assert torch.allclose(net(x, judge)[:, :, 1, :3], expected[:, :, 1, :3], atol=1e-5)
    unseen = torch.full_like(judge, -1)  # an unseen judge gets the population base (no offset)
    population = LinearFit("multinomial", fit.weight, fit.bias, torch.zeros_like(fit.judge))
    assert torch.allclose(
        net(x, unseen)[:, :, 1, :3], population.logp(x[..., -2:], judge, N_OPTIONS)[:, :, 1, :3].float(), atol=1e-5
    )


def test_the_base_is_fitted_on_the_target_alone(synthetic_dir):
    """The base enters the target's logits only, so only the target's model is fitted, laid out for every
    question as the network keeps it: the target's model of a fit on the target alone, zeros elsewhere."""
    ds = load_dataset(synthetic_dir)
    late = SMALL
    spec, X, e = model_inputs(ds, late)
    rows, n_options, target = Rows.of(ds), ds.n_options.tolist(), ds.target_index
    all_rows = np.arange(len(ds.label_item))
    plan = plan_models(ds, [all_rows, all_rows[all_rows % 3 != 0]], [1, 2], late)
    alone = fit_base(X, rows, plan, late, n_options, len(ds.judges), e, target)
    idx, mask = padded_rows(plan.fit_rows)
    target_only = [
        fit_linear(
            BASE_KIND,
            X[rows.item[idx[m : m + 1]]][..., -e:],
            rows.judge[idx[m : m + 1]],
            rows.answers[idx[m : m + 1]][..., [target]],
            mask[m : m + 1],
            [n_options[target]],
            len(ds.judges),
            late.base_l2,
        )
        for m in range(2)
    ]  # each model alone, as fit_base does
    for name in ("weight", "bias", "judge"):
        value = getattr(alone, name)
        assert value.shape[1] == len(n_options)  # laid out for every question, as the network keeps it
        others = [q for q in range(len(n_options)) if q != target]
        assert not value[:, others].any()  # the other questions are not fitted (zeros: a uniform model)
        assert value[:, target].abs().sum() > 0
    x, judge = X[rows.item][None, :, -e:].expand(2, -1, -1), rows.judge[None].expand(2, -1)
    laid_out = alone.logp(x, judge, n_options)[:, :, target, : n_options[target]]
    for m, fit in enumerate(target_only):
        diff = (laid_out[m] - fit.logp(x[:1], judge[:1], [n_options[target]])[0, :, 0]).abs().max()
        assert diff < 1e-12  # the same fit (measured 4e-15: the rounding of other padding)
