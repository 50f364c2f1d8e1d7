"""The fixed bases the network adds its residual to, fitted before training (calibration/model/train.py).

`fit_base`: each model's personalised simple model (Settings.base: ordinal or multinomial) on its own fit
rows, for the questions the base enters (the target only, by default); `fit_crossfit` (opt-in,
Settings.base_crossfit): out-of-fold base log-probabilities of those rows, for the residual to train
against. Models that share a training set are fitted in one L-BFGS run, and the training groups are dealt
over worker processes (`map_dealt`, calibration/model/forked.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from calibration.model.forked import map_dealt
from calibration.model.linear import LinearFit, fit_linear, parameter_shapes


@dataclass
class CrossFit:
    """Out-of-fold base log-probabilities of every model's fit rows (Settings.base_crossfit)."""

    rows: torch.Tensor  # (M, L) each model's fit rows, padded
    mask: torch.Tensor  # (M, L) real entries
    logp: torch.Tensor  # (M, L, Q*K) as CalibrationNet.base_logits gives them (0 on padded options)

    def subset(self, models: np.ndarray) -> CrossFit:
        m = torch.from_numpy(np.asarray(models))
        return CrossFit(self.rows[m], self.mask[m], self.logp[m])

    def write_into(self, table: torch.Tensor) -> None:
        """Overwrite each model's fit rows in `table` (M, R, Q*K), the base's log-probabilities of every row."""
        model = torch.arange(len(self.rows))[:, None].expand_as(self.rows)
        table[model[self.mask], self.rows[self.mask]] = self.logp[self.mask]


def fit_base(X, rows, plan, settings, n_options, n_judges, n_base, target: int, workers: int = 1) -> LinearFit:
    """Each model's base, fitted on its own fit rows (never its validation rows), for the questions it enters
    (`base_questions`). Models that share a
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


def base_questions(settings, n_questions: int, target: int) -> list[int]:
    """The questions whose logits the base enters: with base_phase=finetune the target's only
    (CalibrationNet.add_base), so fitting the others would be wasted work (8/9 of it on the LLM-Rubric data)."""
    return [target] if settings.base_phase == "finetune" else list(range(n_questions))


def _fit_bases(X, rows, fit_rows: list[np.ndarray], settings, n_options, n_judges, n_base, target) -> LinearFit:
    """One base model (Settings.base_kind) per entry of `fit_rows`, on those label rows, in one L-BFGS run,
    fitted on `base_questions` and laid out for every question (the others keep zeros: a uniform model)."""
    judges = max(n_judges, 1) if settings.personalised else 0  # as many offsets as the network keeps
    questions = base_questions(settings, len(n_options), target)
    idx, mask = padded_rows(fit_rows)
    fit = fit_linear(settings.base_kind, X[rows.item[idx]][..., -n_base:], rows.judge[idx],
                     rows.answers[idx][..., questions], mask, [n_options[q] for q in questions], judges,
                     settings.base_l2, personalised=settings.personalised)
    return _for_every_question(fit, questions, n_options, n_base, judges)


def _for_every_question(fit: LinearFit, questions: list[int], n_options: list[int], n_in: int, judges: int) -> LinearFit:
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


def fit_crossfit(X, rows, plan, settings, n_options, n_judges, n_base, target: int, workers: int = 1) -> CrossFit:
    """For every model and part k of its fit rows (plan.fit_parts): the log-probabilities of part k under an
    ordinal base fitted on the other parts. A base fitted on a row has seen its answer: the residual
    trained beside it learns to undo that in-sample fit, which the base does not have on new data. One
    L-BFGS run per training set, as in `fit_base`, so a fold's models depend on its rows only."""
    if plan.fit_parts is None:
        raise ValueError("Settings.base_crossfit needs a plan with fit_parts (make it with plan_models).")
    n_parts, groups = settings.base_crossfit, _training_groups(plan)
    idx, mask = padded_rows(plan.fit_rows)
    logp = torch.zeros(*idx.shape, len(n_options) * max(n_options))  # (M, L, Q*K)
    pad = torch.arange(max(n_options))[None, :] >= torch.tensor(n_options)[:, None]  # (Q, K)

    def fit_group(group: list[int]) -> list[tuple[int, np.ndarray, torch.Tensor]]:
        """(model, positions in its fit rows, their out-of-fold log-probabilities) for each (model, part)."""
        pairs = [(m, k) for m in group for k in range(n_parts)]
        fit = _fit_bases(X, rows, [plan.fit_rows[m][plan.fit_parts[m] != k] for m, k in pairs], settings,
                           n_options, n_judges, n_base, target)
        fit = LinearFit(fit.kind, fit.weight.float(), fit.bias.float(), fit.judge.float())  # as the network's copy
        held = [np.flatnonzero(plan.fit_parts[m] == k) for m, k in pairs]  # positions in the model's fit rows
        at, _ = padded_rows(held)
        label_rows = idx[[m for m, _ in pairs]].gather(1, at)  # (P, L') their label rows
        out = fit.logp(X[rows.item[label_rows]][..., -n_base:], rows.judge[label_rows], n_options)
        out = out.masked_fill(pad, 0.0).flatten(2)  # (P, L', Q*K)
        return [(m, held[p], out[p, : len(held[p])]) for p, (m, _) in enumerate(pairs)]

    for parts in map_dealt(fit_group, groups, workers):
        for m, positions, values in parts:
            logp[m, positions] = values
    return CrossFit(idx, mask, logp)


def padded_rows(groups: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged per-model row lists -> (M, L) indices and a (M, L) mask."""
    length = max(1, max(len(g) for g in groups))
    idx = np.zeros((len(groups), length), dtype=np.int64)
    mask = np.zeros((len(groups), length), dtype=bool)
    for m, g in enumerate(groups):
        idx[m, : len(g)] = g
        mask[m, : len(g)] = True
    return torch.from_numpy(idx), torch.from_numpy(mask)
