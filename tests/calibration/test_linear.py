"""The simple personalised models (calibration/model/linear.py), the network's base, the linear
baselines in cv, and cv on data whose target has no judge distribution."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

import calibration.model.linear as linear_module
from calibration.data.dataset import load_dataset
from calibration.data.splits import group_folds
from calibration.evaluation.baselines import constant, linear, ordinal
from calibration.evaluation.crossval import cross_validate, format_table, item_groups
from calibration.model.linear import fit_linear, linear_logp, picked_logp
from calibration.model.network import CalibrationNet
from calibration.model.settings import Settings
from calibration.model.train import model_inputs

N_OPTIONS = [4, 3]


def _toy(seed: int = 0, rows: int = 300, judges: int = 5):
    """One model's rows: a latent score drives both inputs and answers; each judge adds an offset."""
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(rows, 2))
    judge = rng.integers(0, judges, size=rows)
    latent = 1.5 * e[:, 0] - 0.5 * e[:, 1] + np.linspace(-1, 1, judges)[judge] + rng.logistic(size=rows)
    answers = np.stack([np.digitize(latent, [-1.5, 0, 1.5]), np.digitize(latent, [-0.5, 0.5])], axis=1)
    return (
        torch.tensor(e, dtype=torch.float32)[None],
        torch.tensor(judge)[None],
        torch.tensor(answers)[None],
        torch.ones(1, rows, dtype=torch.bool),
    )


@pytest.mark.parametrize("kind", ["multinomial", "ordinal"])
def test_distributions_sum_to_one_and_pad_is_impossible(kind):
    e, judge, answers, mask = _toy()
    fit = fit_linear(kind, e, judge, answers, mask, N_OPTIONS, 5, 1e-3)
    p = fit.logp(e, judge, N_OPTIONS).exp().float()
    assert torch.allclose(p.sum(-1), torch.ones(1), atol=1e-6)
    assert float(p[..., 1, 3].max()) == 0.0  # the 3-option question has no 4th option


@pytest.mark.parametrize("kind", ["multinomial", "ordinal"])
@pytest.mark.parametrize("seed", range(5))
def test_the_training_loss_reads_the_same_probabilities_as_prediction(kind, seed):
    """fit_linear's loss reads each row's answer with picked_logp (no (M, B, Q, K) tensors for the ordinal
    model); it must equal the full distribution of linear_logp at that answer, for random parameters,
    unequal option counts, unseen judges and padded rows."""
    g = torch.Generator().manual_seed(seed)
    n_options = [5, 4, 2, 3]
    m, b, e_dim, q, k, j = 3, 40, 3, len(n_options), 5, 6
    shapes = {
        "multinomial": ((m, q, e_dim, k), (m, q, k), (m, q, j, k)),
        "ordinal": ((m, q, e_dim), (m, q, k - 1), (m, q, j)),
    }
    weight, bias, offsets = (torch.randn(*s, generator=g, dtype=torch.float64) * 2 for s in shapes[kind])
    e = torch.randn(m, b, e_dim, generator=g)
    judge = torch.randint(-1, j, (m, b), generator=g)
    answers = torch.stack([torch.randint(-1, n, (m, b), generator=g) for n in n_options], dim=-1)
    full = linear_logp(kind, weight, bias, offsets, e, judge, n_options)
    expected = full.gather(-1, answers.clamp(min=0)[..., None]).squeeze(-1)
    got = picked_logp(kind, weight, bias, offsets, e, judge, answers, n_options)
    observed = answers >= 0
    assert torch.isfinite(got[observed]).all()
    torch.testing.assert_close(got[observed], expected[observed], rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["multinomial", "ordinal"])
def test_fitting_in_row_chunks_reaches_the_same_model(kind, monkeypatch):
    """Large data is evaluated in row chunks (linear.CHUNK_ENTRIES); the penalty must count once and every
    row exactly once, so the fit equals the one-pass fit to float rounding."""
    e, judge, answers, mask = _toy(rows=301)
    whole = fit_linear(kind, e, judge, answers, mask, N_OPTIONS, 5, 1e-3)
    monkeypatch.setattr(linear_module, "CHUNK_ENTRIES", 2 * 64)  # 256-row chunks (the least): 2 chunks
    chunked = fit_linear(kind, e, judge, answers, mask, N_OPTIONS, 5, 1e-3)
    for name in ("weight", "bias", "judge"):
        torch.testing.assert_close(getattr(chunked, name), getattr(whole, name), rtol=0, atol=1e-7)


@pytest.mark.parametrize("kind", ["multinomial", "ordinal"])
def test_unseen_judge_is_the_population_model(kind):
    e, judge, answers, mask = _toy()
    fit = fit_linear(kind, e, judge, answers, mask, N_OPTIONS, 6, 1e-3)  # judge 5 has no rows
    population = fit.logp(e, torch.full_like(judge, -1), N_OPTIONS).float()
    unseen = fit.logp(e, torch.full_like(judge, 5), N_OPTIONS).float()
    assert torch.allclose(population, unseen, atol=1e-5)
    assert not torch.allclose(population, fit.logp(e, judge, N_OPTIONS).float(), atol=1e-3)  # seen judges move


def test_ordinal_expected_answer_rises_with_the_score():
    e, judge, answers, mask = _toy()
    fit = fit_linear("ordinal", e, judge, answers, mask, N_OPTIONS, 5, 1e-3)
    grid = torch.zeros(1, 50, 2)
    grid[0, :, 0] = torch.linspace(-3, 3, 50)  # the input with the positive true weight
    expected = (fit.logp(grid, torch.full((1, 50), -1), N_OPTIONS)[0, :, 0].exp() * torch.arange(4.0)).sum(-1)
    assert bool((expected.diff() > 0).all())


def test_a_stronger_penalty_shrinks_the_weights():
    e, judge, answers, mask = _toy()
    loose, tight = (fit_linear("multinomial", e, judge, answers, mask, N_OPTIONS, 5, lam) for lam in (1e-4, 1e-1))
    assert float(tight.weight.norm()) < 0.5 * float(loose.weight.norm())


def test_models_fitted_together_equal_models_fitted_alone():
    parts = [_toy(seed) for seed in (1, 2)]
    together = fit_linear("ordinal", *(torch.cat(x) for x in zip(*parts, strict=True)), N_OPTIONS, 5, 1e-3)
    for m, part in enumerate(parts):
        alone = fit_linear("ordinal", *part, N_OPTIONS, 5, 1e-3)
        assert torch.allclose(
            together.subset([m]).logp(*part[:2], N_OPTIONS), alone.logp(*part[:2], N_OPTIONS), atol=1e-4
        )


def test_the_network_starts_as_its_base(synthetic_dir):
    ds = load_dataset(synthetic_dir)
    spec, X, n_base = model_inputs(ds, Settings())
    assert n_base == len(spec["expected"]["questions"]) == 3
    e = X[None, :, -n_base:]
    judge = torch.arange(X.shape[0])[None] % len(ds.judges)
    rows = torch.from_numpy(ds.label_item.copy())[None]
    answers = torch.from_numpy(ds.answers.copy())[None]
    base = fit_linear(
        "multinomial",
        X[rows][..., -n_base:],
        torch.from_numpy(ds.label_judge.copy())[None],
        answers,
        torch.ones_like(rows, dtype=torch.bool),
        ds.n_options.tolist(),
        len(ds.judges),
        1e-3,
    )
    net = CalibrationNet(1, X.shape[1], len(ds.judges), ds.n_options.tolist(), n_base=n_base)
    net.set_base(base)
    t = ds.target_index
    net.add_base(t)  # as fine-tuning does: the target restarts as the base plus a zero residual
    logp = net(X[None], judge)[:, :, t]
    expected = base.logp(e, judge, ds.n_options.tolist()).float()[:, :, t]
    # to float32 precision (the base runs in float32 inside the network); -inf where an option is absent
    torch.testing.assert_close(logp.detach(), expected, atol=1e-5, rtol=1e-3)


def test_linear_baselines_beat_the_constant_and_sum_to_one(synthetic_dir):
    ds = load_dataset(synthetic_dir)
    fold_of_row = group_folds(ds.groups, 3, 0)[ds.label_item]
    values = ds.option_values()[ds.target_index]
    y = values[ds.answers[:, ds.target_index]]

    def rmse(p):
        return float(np.sqrt(((p @ values - y) ** 2).mean()))

    base = rmse(constant(ds, fold_of_row, 3, 0))
    for fn in (linear, ordinal):
        p = fn(ds, fold_of_row, 3, 0)
        assert np.allclose(p.sum(1), 1.0)
        assert rmse(p) < 0.8 * base


def test_cv_skips_the_baselines_that_need_the_target_distribution(synthetic_copy):
    llm = pd.read_csv(synthetic_copy / "llm.csv")
    llm[llm["question_id"] != "overall"].to_csv(synthetic_copy / "llm.csv", index=False)
    ds = load_dataset(synthetic_copy)
    settings = dataclasses.replace(Settings(), ensemble=2, pretrain_steps=20, finetune_steps=20)
    result = cross_validate(ds, settings, folds=3)
    assert set(result.skipped) == {"argmax_llm", "expected_llm", "calibrated_llm"}
    assert "no judge distribution for the target" in result.skipped["expected_llm"]
    assert not set(result.skipped) & set(result.metrics)
    assert {"calibrated", "linear", "ordinal"} <= set(result.metrics)
    assert "expected_llm: skipped" in format_table(result.metrics, result.skipped)


def test_the_table_says_why_a_correlation_is_missing():
    metrics = {
        "constant": {
            "rmse": 0.8,
            "pearson": float("nan"),
            "spearman": float("nan"),
            "kendall": float("nan"),
            "nll": 1.2,
            "n": 10,
        }
    }
    table = format_table(metrics)
    assert "nan" not in table
    assert "n/a: constant prediction" in table


def test_group_keeps_a_conversation_field_in_one_fold(synthetic_copy):
    ds = load_dataset(synthetic_copy)
    convs = sorted(set(ds.items["conversation_id"]))
    lines = [
        f'{{"conversation_id": "{c}", "chatbot_role": "r", "turns": [], "team": "{i % 4}"}}'
        for i, c in enumerate(convs)
    ]
    (synthetic_copy / "conversations.jsonl").write_text("\n".join(lines) + "\n")
    groups = item_groups(ds, synthetic_copy, "team")
    team = ds.items["conversation_id"].map({c: i % 4 for i, c in enumerate(convs)}).to_numpy()
    folds = group_folds(groups, 3, 0)
    for t in range(4):
        assert len(set(folds[team == t])) == 1
    assert item_groups(ds, synthetic_copy, None) is None


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("judges", [6, 0])
def test_multinomial_gradient_written_out_equals_autograd(seed, judges):
    """fit_linear fits the multinomial model with its gradient written out (_multinomial_closure); loss and
    gradient must equal autograd's of the mean NLL + L2 penalty, with unseen judges, unequal option
    counts, unobserved answers, padded rows, two row chunks and a per-model penalty."""
    g = torch.Generator().manual_seed(seed)
    n_options = [5, 4, 2]
    m, b, e_dim, q, k = 3, 40, 3, len(n_options), 5
    params = [
        (torch.randn(*s, generator=g, dtype=torch.float64)).requires_grad_()
        for s in ((m, q, e_dim, k), (m, q, k), (m, q, judges, k))
    ]
    e = torch.randn(m, b, e_dim, generator=g, dtype=torch.float64)
    judge = torch.randint(-1, max(judges, 1), (m, b), generator=g)
    answers = torch.stack([torch.randint(-1, n, (m, b), generator=g) for n in n_options], dim=-1)
    observed = (answers >= 0) & (torch.arange(b) < 35)[None, :, None]  # the last 5 rows are padding
    n_obs = observed.sum(1).clamp(min=1).double()
    l2 = torch.tensor([1e-3, 0.1, 0.0], dtype=torch.float64)
    picked = picked_logp("multinomial", *params, e, judge, answers, n_options)
    weight, _, offsets = params
    expected = (
        -(picked.masked_fill(~observed, 0.0).sum(1) / n_obs).sum(-1)
        + l2 * ((weight**2).flatten(1).sum(1) + (offsets**2).flatten(1).sum(1))
    ).sum()
    expected_grads = torch.autograd.grad(expected, params)
    spans = [slice(0, 17), slice(17, b)]
    got = linear_module._multinomial_closure(params, spans, e, judge, answers, observed, n_obs, n_options, l2)
    torch.testing.assert_close(got, expected.detach(), rtol=1e-12, atol=1e-12)
    for p, want in zip(params, expected_grads, strict=True):
        torch.testing.assert_close(p.grad, want, rtol=1e-10, atol=1e-12)
