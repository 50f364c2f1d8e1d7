"""The fixed bases the network adds its residual to, fitted before training (calibration/model/train.py).

`fit_base`: each model's personalised simple model (the multinomial logistic one) on its own fit
rows, for the question the base enters (the target). Models that share a training set
are fitted in one L-BFGS run, and the training groups are dealt over worker processes (`map_dealt`,
calibration/model/forked.py).
"""

from __future__ import annotations

import numpy as np
import torch

from calibration.model.forked import map_dealt
from calibration.model.linear import LinearFit, fit_linear, parameter_shapes
from calibration.model.network import BASE_KIND


def fit_base(X, rows, plan, settings, n_options, n_judges, n_base, target: int, workers: int = 1) -> LinearFit:
    """Each model's base, fitted on its own fit rows (never its validation rows), for the questions it enters
    (the target's only: CalibrationNet.add_base; fitting the others would be wasted work, 8/9 of it on the
    LLM-Rubric data). Models that share a
    training set (fit and validation rows together: the members of one cv fold, or of a final ensemble) are
    fitted in one L-BFGS run, and each such group alone, so a fold's models depend on that fold's training
    rows only, bit for bit (and the groups can be fitted by `workers` processes side by side). Bases on the
    members' own rows differ a little, and that bagging helped: one base shared by a fold's members lost
    0.003-0.016 RMSE on the shift benchmarks (README)."""
    groups = _training_groups(plan)

    def fit_group(group: list[int]) -> LinearFit:
        return _fit_bases(X, rows, [plan.fit_rows[m] for m in group], settings, n_options, n_judges, n_base, target)

    fits = map_dealt(fit_group, groups, workers)
    fitted = {m: fit.subset([i]) for group, fit in zip(groups, fits, strict=True) for i, m in enumerate(group)}
    return LinearFit.concat([fitted[m] for m in range(len(plan.seeds))])


def _training_groups(plan) -> list[list[int]]:
    """The models of `plan` (train.Plan) grouped by training set (fit and validation rows together), in
    first-seen order."""
    trained = [np.sort(np.concatenate([f, v])).tobytes() for f, v in zip(plan.fit_rows, plan.val_rows, strict=True)]
    return [[m for m, k in enumerate(trained) if k == key] for key in dict.fromkeys(trained)]


def _fit_bases(X, rows, fit_rows: list[np.ndarray], settings, n_options, n_judges, n_base, target) -> LinearFit:
    """One base model (BASE_KIND) per entry of `fit_rows`, on those label rows, in one L-BFGS run,
    fitted on the target and laid out for every question (the others keep zeros: a uniform model)."""
    judges = max(n_judges, 1) if settings.personalised else 0  # as many offsets as the network keeps
    questions = [target]
    idx, mask = padded_rows(fit_rows)
    fit = fit_linear(
        BASE_KIND,
        X[rows.item[idx]][..., -n_base:],
        rows.judge[idx],
        rows.answers[idx][..., questions],
        mask,
        [n_options[q] for q in questions],
        judges,
        settings.base_l2,
        personalised=settings.personalised,
        row_weight=rows.weight_at(idx),
    )
    return _for_every_question(fit, questions, n_options, n_base, judges)


def _for_every_question(
    fit: LinearFit, questions: list[int], n_options: list[int], n_in: int, judges: int
) -> LinearFit:
    """`fit` of the questions `questions` in the shapes of a model of every question (the network's copy):
    zeros elsewhere, and on the options past a question's last (padded, never read)."""
    shapes = parameter_shapes(fit.kind, len(n_options), n_in, judges, max(n_options))
    full = {}
    for name, shape in shapes.items():
        part = getattr(fit, name)
        full[name] = torch.zeros(len(part), *shape, dtype=part.dtype)
        for i, q in enumerate(questions):
            full[name][:, q, ..., : part.shape[-1]] = part[:, i]
    return LinearFit(fit.kind, **full)


def padded_rows(groups: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged per-model row lists -> (M, L) indices and a (M, L) mask."""
    length = max(1, max(len(g) for g in groups))
    idx = np.zeros((len(groups), length), dtype=np.int64)
    mask = np.zeros((len(groups), length), dtype=bool)
    for m, g in enumerate(groups):
        idx[m, : len(g)] = g
        mask[m, : len(g)] = True
    return torch.from_numpy(idx), torch.from_numpy(mask)
