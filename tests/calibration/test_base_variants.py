"""The network's base (Settings.base_phase): the base joins only at fine-tuning, and the hidden layers do not
read its inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from calibration.data.dataset import load_dataset
from calibration.model.bases import fit_base
from calibration.model.ensemble import train_ensemble
from calibration.model.files import load_model, save_model
from calibration.model.linear import LinearFit
from calibration.model.network import CalibrationNet
from calibration.model.settings import Settings
from calibration.model.train import Rows, fit_models, model_inputs, plan_models
from rubric.errors import InputError

N_OPTIONS = [4, 3, 4]
SMALL = Settings(hidden1=6, hidden2=5, pretrain_steps=30, finetune_steps=20, ensemble=2, eval_every=5, patience=2,
                 lr=0.05, finetune_lr=0.05, base_phase="both")  # the base from the start
LATE = dataclasses.replace(SMALL, base_phase="finetune")


def _net(**kw) -> CalibrationNet:
    """3 models, 7 inputs of which the last 2 are the base's; a base with non-zero weights."""
    net = CalibrationNet(3, 7, 5, N_OPTIONS, hidden1=6, hidden2=5, seeds=[0, 1, 2], n_base=2, **kw)
    gen = torch.Generator().manual_seed(0)
    net.set_base(LinearFit("ordinal", torch.randn(3, 3, 2, generator=gen), torch.randn(3, 3, 3, generator=gen),
                           torch.randn(3, 3, 5, generator=gen)))
    return net


def _with_other_base_inputs(x: torch.Tensor) -> torch.Tensor:
    changed = x.clone()
    changed[..., -2:] += 1.5
    return changed


def test_hidden_layers_do_not_read_the_base_inputs():
    x, judge = torch.rand(3, 8, 7), torch.randint(0, 5, (3, 8))
    narrow = _net(late_base=True)
    assert narrow.W1.shape == (3, 5 + 1, 6) and narrow.U1.shape == (3, 5, 5 + 1, 6)
    assert torch.equal(narrow(x, judge), narrow(_with_other_base_inputs(x), judge))  # reads none of them
    narrow.add_base(2)  # once the base joins, the target reads them through the base alone
    assert not torch.allclose(narrow(x, judge), narrow(_with_other_base_inputs(x), judge))


def test_late_base_joins_the_target_only_starting_as_the_base():
    net = _net(late_base=True)
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
    net = fit_models(X, Rows.of(ds), plan, settings, n_judges=len(ds.judges), n_options=ds.n_options.tolist(),
                     target=ds.target_index, workers=1, n_base=e)
    return net, plan


def test_late_base_pretraining_does_not_depend_on_the_base(synthetic_dir):
    """base_l2 changes the base, and so pretraining with the base from the start; with base_phase=finetune
    pretraining is the paper's network alone and ends the same whatever the base."""
    ds = load_dataset(synthetic_dir)
    for settings, same in ((LATE, True), (SMALL, False)):
        histories = [_train(ds, dataclasses.replace(settings, base_l2=l2))[1].history for l2 in (1e-3, 1.0)]
        equal = histories[0]["pretrain"]["best_val_nll"] == histories[1]["pretrain"]["best_val_nll"]
        assert equal == same, settings.base_phase


def test_base_phase_takes_one_of_its_names():
    with pytest.raises(InputError, match="base_phase"):
        Settings(base_phase="pretrain").checked()


def test_late_base_model_round_trips_through_its_files(synthetic_dir, tmp_path):
    ds = load_dataset(synthetic_dir)
    settings = LATE
    net, spec, _ = train_ensemble(ds, settings, seed=0)
    assert net.W1.shape[1] == net.n_inputs - len(spec["expected"]["questions"]) + 1  # the narrower first layer
    save_model(tmp_path / "m", net, ds, spec, settings)
    loaded = load_model(tmp_path / "m")
    X = torch.from_numpy(ds.features(spec)).expand(net.n_models, -1, -1)
    judge = torch.zeros(net.n_models, X.shape[1], dtype=torch.long)
    with torch.no_grad():
        assert torch.equal(loaded.net(X, judge), net(X, judge))  # the target alone gets the base, as trained


def test_base_phase_is_ignored_without_a_base(synthetic_dir):
    """network.base=none with base_phase=finetune is the paper's network: fine-tuning must not restart the
    target's head as if a base were joining."""
    ds = load_dataset(synthetic_dir)
    paper = dataclasses.replace(SMALL, base="none")
    plain, _ = _train(ds, paper)
    late, _ = _train(ds, dataclasses.replace(paper, base_phase="finetune"))
    for name, value in plain.state_dict().items():
        assert torch.equal(late.state_dict()[name], value), name


def test_linear_base_is_the_multinomial_model_plus_a_zero_residual():
    net = CalibrationNet(3, 7, 5, N_OPTIONS, hidden1=6, hidden2=5, seeds=[0, 1, 2], n_base=2, late_base=True,
                         base_kind="multinomial")
    gen = torch.Generator().manual_seed(1)
    fit = LinearFit("multinomial", torch.randn(3, 3, 2, 4, generator=gen), torch.randn(3, 3, 4, generator=gen),
                    torch.randn(3, 3, 5, 4, generator=gen))
    net.set_base(fit)
    x, judge = torch.rand(3, 8, 7), torch.randint(-1, 5, (3, 8))
    net.add_base(1)
    expected = fit.logp(x[..., -2:], judge, N_OPTIONS).float()  # -inf on the padded option of question 1
    assert torch.allclose(net(x, judge)[:, :, 1, :3], expected[:, :, 1, :3], atol=1e-5)
    unseen = torch.full_like(judge, -1)  # an unseen judge gets the population base (no offset)
    population = LinearFit("multinomial", fit.weight, fit.bias, torch.zeros_like(fit.judge))
    assert torch.allclose(net(x, unseen)[:, :, 1, :3], population.logp(x[..., -2:], judge, N_OPTIONS)[:, :, 1, :3].float(),
                          atol=1e-5)


def test_linear_base_model_round_trips_through_its_files(synthetic_dir, tmp_path):
    ds = load_dataset(synthetic_dir)
    net, spec, _ = train_ensemble(ds, dataclasses.replace(LATE, base="linear"), seed=0)
    assert net.base_weight.shape[-1] == max(ds.n_options)  # one weight per option: the multinomial model
    save_model(tmp_path / "m", net, ds, spec, dataclasses.replace(LATE, base="linear"))
    loaded = load_model(tmp_path / "m")
    X = torch.from_numpy(ds.features(spec)).expand(net.n_models, -1, -1)
    judge = torch.zeros(net.n_models, X.shape[1], dtype=torch.long)
    with torch.no_grad():
        assert torch.equal(loaded.net(X, judge), net(X, judge))


@pytest.mark.parametrize("base", ["linear", "ordinal"])
def test_late_base_is_fitted_on_the_target_alone(synthetic_dir, base):
    """base_phase=finetune: the base enters the target's logits only, so only the target's model is fitted;
    it is the target's model of the fit on every question (base_phase=both) to the optimiser's tolerance."""
    ds = load_dataset(synthetic_dir)
    late, both = (dataclasses.replace(s, base=base) for s in (LATE, SMALL))
    spec, X, e = model_inputs(ds, late)
    rows, n_options, target = Rows.of(ds), ds.n_options.tolist(), ds.target_index
    all_rows = np.arange(len(ds.label_item))
    plan = plan_models(ds, [all_rows, all_rows[all_rows % 3 != 0]], [1, 2], late)
    alone = fit_base(X, rows, plan, late, n_options, len(ds.judges), e, target)
    every = fit_base(X, rows, plan, both, n_options, len(ds.judges), e, target)
    for name in ("weight", "bias", "judge"):
        value = getattr(alone, name)
        assert value.shape == getattr(every, name).shape  # laid out for every question, as the network keeps it
        others = [q for q in range(len(n_options)) if q != target]
        assert not value[:, others].any()  # the other questions are not fitted (zeros: a uniform model)
        assert value[:, target].abs().sum() > 0
    x, judge = X[rows.item][None, :, -e:].expand(2, -1, -1), rows.judge[None].expand(2, -1)
    probs = [fit.logp(x, judge, n_options)[:, :, target].exp() for fit in (alone, every)]
    assert torch.allclose(probs[0], probs[1], atol=1e-3)  # measured 3e-4 (linear) and 8e-5 (ordinal)
