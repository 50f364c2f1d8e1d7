"""Training, top to bottom: inputs, plan, bases, model, phases, loop with early stopping, best weights.

`train_models` is the one entry point (cross-validation, search, the final ensemble): it trains M models at
once (a leading model axis), each with its own training rows and seed, and reads in this order:
- `model_inputs`: every item's input vector (and the base's inputs, last);
- `plan_models`: each model's fit and validation rows (whole conversations apart) and seed;
- `fit_models`: each model's base, fitted first (`fit_base`, calibration/model/bases.py), then the models
  in slices side by side (calibration/model/forked.py), each slice by `_fit_models`: pretraining on all
  questions, then fine-tuning on the target with a fresh optimiser, where the base joins the target;
- `_run_phase`: one phase, every model stopping early on its own validation loss and keeping its best
  weights; `train_step`: one step of every model.
The settings are in calibration/model/settings.py; pooling members into an ensemble, its recalibration
and `train_ensemble` in calibration/model/ensemble.py; saving in calibration/model/files.py.
"""

from __future__ import annotations

import numpy as np
import torch

from calibration.data.dataset import Dataset
from calibration.data.splits import subsample, validation_split
from calibration.model.bases import fit_base, padded_rows
from calibration.model.forked import map_slices
from calibration.model.lazy_adam import LazyAdam
from calibration.model.network import CalibrationNet
from calibration.model.rows import Plan, Rows, Trained
from calibration.model.settings import Settings, torch_threads, training_workers
from rubric.progress import progress_bar

BASE_ROWS_ENTRIES = 1 << 26
"""The most floats (256 MB) training keeps of the base's log-probabilities of every label row (`_base_rows`)."""


def train_models(
    ds: Dataset,
    train_rows: list[np.ndarray],
    seeds: list[int],
    settings: Settings,
    *,
    progress: bool = False,
    workers: int | None = None,
    threads: int | None = None,
) -> Trained:
    """Train one model per entry of `train_rows` (label rows of `ds`) with its seed, all side by side."""
    spec, X, base_inputs = model_inputs(ds, settings)
    plan = plan_models(ds, train_rows, seeds, settings)
    net = fit_dataset(ds, X, plan, settings, progress=progress, threads=threads, workers=workers, n_base=base_inputs)
    return Trained(net, X, spec, plan)


def fit_dataset(
    ds: Dataset,
    X: torch.Tensor,
    plan: Plan,
    settings: Settings,
    *,
    rows: Rows | None = None,
    progress: bool = False,
    threads: int | None = None,
    workers: int | None = None,
    n_base: int = 0,
) -> CalibrationNet:
    """`fit_models` on a dataset's label rows (`Rows.of(ds)` unless given), reviewers, options and target."""
    return fit_models(
        X,
        Rows.of(ds) if rows is None else rows,
        plan,
        settings,
        n_judges=len(ds.judges),
        n_options=ds.n_options.tolist(),
        target=ds.target_index,
        progress=progress,
        threads=threads,
        workers=workers,
        n_base=n_base,
    )


def model_inputs(ds: Dataset, settings: Settings) -> tuple[dict, torch.Tensor, int]:
    """The feature spec, the (N, D) inputs and n_base (how many trailing inputs the base reads)."""
    spec = ds.feature_spec(drop_questions=settings.drop_questions)
    if settings.base != "none":
        spec["expected"] = ds.expected_spec(spec["questions"])
    return spec, torch.from_numpy(ds.features(spec)), n_base(spec)


def n_base(spec: dict) -> int:
    return len(spec["expected"]["questions"]) if spec.get("expected") else 0


def plan_models(ds: Dataset, train_rows: list[np.ndarray], seeds: list[int], settings: Settings) -> Plan:
    """For each model: its training rows (subsampled by train_fraction), split by conversation into fit
    and validation rows with its own seed, so ensemble members validate on different conversations."""
    row_groups = ds.groups[ds.label_item]
    fit, val = [], []
    for rows, seed in zip(train_rows, seeds, strict=True):
        rows = subsample(rows, settings.train_fraction, seed + 7)
        f, v = validation_split(rows, row_groups, settings.val_fraction, seed + 11)
        fit.append(f)
        val.append(v)
    return Plan(fit, val, list(seeds))


def fit_models(
    X: torch.Tensor,
    rows: Rows,
    plan: Plan,
    settings: Settings,
    *,
    n_judges: int,
    n_options: list[int],
    target: int,
    progress: bool = False,
    threads: int | None = None,
    workers: int | None = None,
    n_base: int = 0,
) -> CalibrationNet:
    """Train len(plan.seeds) models side by side and return them with their best validation weights.

    X: (N, D) item features. Pretraining weighs every question; fine-tuning only `target`.
    n_base: with n_base > 0, each model first gets its base (`fit_base`), fitted from the last n_base
    columns of X before slicing, so it does not depend on the slices.
    workers: processes (forked where safe, else threads: calibration/model/forked.py) that each train a
    contiguous slice of the models (None: ROLE_RUBRIC_WORKERS, default the number of CPUs, at most 4).
    Unlike two intra-op threads per operation, which spin and wait on each other, slices slow down
    gracefully on a busy machine. A model's result does
    not depend on the models that share its batch beyond float rounding (the padded size of the judge
    groups, and so the matrix kernels, depend on the whole batch), so `workers` changes predictions by
    about 1e-9 at most (tested to 1e-6). The same settings and workers give bit-identical results.
    """
    # At least two models a slice: a one-model batch takes other kernels, which round more differently.
    n_slices = max(1, min(training_workers(workers), len(plan.seeds) // 2))
    slices = np.array_split(np.arange(len(plan.seeds)), n_slices)
    steps = settings.pretrain_steps + settings.finetune_steps
    bar = progress_bar(steps * len(slices), progress, desc=f"training {len(plan.seeds)} models", unit="step")

    def fit(models: np.ndarray, bar) -> tuple[CalibrationNet, dict]:
        part = plan.subset(models)
        net = _fit_models(
            X,
            rows,
            part,
            settings,
            n_judges=n_judges,
            n_options=n_options,
            target=target,
            bar=bar,
            base=None if base is None else base.subset(models),
            n_base=n_base,
        )
        return net, part.history

    with torch_threads(threads), bar:
        base = fit_base(X, rows, plan, settings, n_options, n_judges, n_base, target, len(slices)) if n_base else None
        fitted = map_slices(fit, slices, bar)
        bar.update(bar.total - bar.n)  # models that stopped early skip their last steps: end the bar at its total
    plan.history.update(_merge_histories([h for _, h in fitted]))
    return CalibrationNet.concat([net for net, _ in fitted])


def new_models(
    settings: Settings, seeds: list[int], X: torch.Tensor, n_judges: int, n_options: list[int], n_base: int = 0
) -> CalibrationNet:
    """One untrained model per seed, for the (N, D) inputs X, with the settings' layers."""
    return CalibrationNet(
        len(seeds),
        X.shape[1],
        n_judges,
        n_options,
        hidden1=settings.hidden1,
        hidden2=settings.hidden2,
        personalised=settings.personalised,
        seeds=seeds,
        n_base=n_base,
    )


def _fit_models(X, rows, plan, settings, *, n_judges, n_options, target, bar, base, n_base) -> CalibrationNet:
    net = new_models(settings, plan.seeds, X, n_judges, n_options, n_base)
    if base is not None:
        net.set_base(base)
    all_questions = torch.ones(len(n_options))
    target_only = torch.zeros(len(n_options))
    target_only[target] = 1.0
    phases = [
        ("pretrain", settings.pretrain_steps, settings.lr, all_questions),
        ("finetune", settings.finetune_steps, settings.finetune_lr, target_only),
    ]
    for name, steps, lr, weights in phases:
        if name == "finetune" and net.n_base:
            net.add_base(target)  # the target restarts as the base plus a zero residual
        if steps > 0:
            plan.history[name] = _run_phase(
                net, X, rows, plan, settings, steps, lr, weights, salt=len(plan.history), bar=bar
            )
    return net


def _merge_histories(histories: list[dict]) -> dict:
    """Per-phase history of the whole batch: the most steps any slice ran, every model's best loss."""
    out: dict = {}
    for name in histories[0]:
        phase = [h[name] for h in histories]
        losses = [p["best_val_nll"] for p in phase]
        out[name] = {
            "steps": max(p["steps"] for p in phase),
            "best_val_nll": None if losses[0] is None else [x for part in losses for x in part],
        }
    return out


def _run_phase(net, X, rows, plan, settings, steps, lr, weights, *, salt, bar) -> dict:
    """Train every model of `net` for up to `steps` steps; with validation rows, each model stops on its
    own and `net` ends with each model's best weights.

    Stopped models leave the computation (`work` holds the models still training, `alive` their indices
    in `net`): in fine-tuning most stop long before the last one (on the LLM-Rubric data 17 of 25 had
    stopped after 130 of 370 steps), and a smaller batch is a cheaper step. At least two stay in it,
    since a one-model batch takes other kernels, which round more differently."""
    work, alive = net, torch.arange(net.n_models)
    optimiser, lazy = _adam(work, settings, lr), _lazy_adam(work, settings, lr)
    batches = torch.from_numpy(_batch_indices(plan.fit_rows, plan.seeds, steps, settings.batch_size, salt))
    val_idx, val_mask = padded_rows(plan.val_rows)
    early = bool(val_mask.any())
    base_rows = _base_rows(net, X, rows)
    best = _snapshot(net)
    best_loss = _val_loss(net, X, rows, val_idx, val_mask, weights, _at(base_rows, alive, val_idx)) if early else None
    stale = torch.zeros(net.n_models, dtype=torch.long)
    # A model without a validation label for this phase (its validation rows answer no weighted question,
    # or it has none) cannot stop early: it trains every step and keeps its last weights.
    unvalidated = ~_has_validation_labels(rows, val_idx, val_mask, weights)
    ran = steps
    for step in range(steps):
        b = batches[alive, step]
        train_step(work, X, rows, b, weights, optimiser, lazy, base=_at(base_rows, alive, b))
        bar.update(1)
        if best_loss is not None and ((step + 1) % settings.eval_every == 0 or step + 1 == steps):  # early
            current = _val_loss(
                work, X, rows, val_idx[alive], val_mask[alive], weights, _at(base_rows, alive, val_idx[alive])
            )
            # A model whose patience ran out has stopped: it takes no later improvement (a companion kept
            # in the batch still trains), so its result never depends on the models beside it.
            improved = (current < best_loss[alive] - 1e-6) & (stale[alive] < settings.patience)
            improved |= unvalidated[alive]
            _keep_best(best, work, alive, improved)
            best_loss[alive] = torch.where(improved, current, best_loss[alive])
            stale[alive] = torch.where(improved, torch.zeros_like(improved, dtype=torch.long), stale[alive] + 1)
            if bool((stale >= settings.patience).all()):
                ran = step + 1
                break
            keep = _still_training(stale[alive] < settings.patience)
            if not bool(keep.all()):
                work, optimiser, lazy = _compact(work, optimiser, lazy, keep, settings, lr)
                alive = alive[keep]
    bar.update(steps - ran)
    if early:
        net.load_state_dict(best)
    return {"steps": ran, "best_val_nll": None if best_loss is None else best_loss.tolist()}


def train_step(
    net: CalibrationNet,
    X: torch.Tensor,
    rows: Rows,
    b: torch.Tensor,
    weights: torch.Tensor,
    optimiser: torch.optim.Adam,
    lazy: LazyAdam | None,
    *,
    base: torch.Tensor | None = None,
) -> None:
    """One step of every model of `net` on its batch b ((M, B) label-row indices); with `lazy`, the judge
    offsets of only the batch's judges take part and move (calibration/model/lazy_adam.py). base: the
    base's log-probabilities of the batch rows (`_base_rows`), if computed beforehand."""
    judge = rows.judge[b]
    offsets = None if lazy is None else net.judge_offsets(judge, leaves=True)
    loss = net.loss(
        X[rows.item[b]], judge, rows.answers[b], weights, offsets=offsets, base=base, row_weight=rows.weight_at(b)
    )
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    optimiser.step()
    if lazy is not None and offsets is not None:  # offsets are taken exactly when lazy is given
        lazy.step(offsets)


def _has_validation_labels(
    rows: Rows, val_idx: torch.Tensor, val_mask: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """(M,) whether each model's validation rows hold at least one answer the phase's loss weighs."""
    observed = (rows.answers[val_idx] >= 0) & val_mask[..., None]  # (M, L, Q)
    if rows.weight is not None:
        observed &= (rows.weight[val_idx] > 0)[..., None]
    return (observed * (weights > 0)).flatten(1).any(dim=1)


def _adam(net: CalibrationNet, settings: Settings, lr: float) -> torch.optim.Adam:
    """Adam on the shared weights, fresh per phase (the judge offsets: `_lazy_adam`). Adam's weight_decay
    adds wd * w to the gradient, i.e. the L2 penalty (wd / 2)|w|^2."""
    return torch.optim.Adam(net.shared_parameters(), lr=lr, weight_decay=2 * settings.weight_decay, fused=True)


def _lazy_adam(net: CalibrationNet, settings: Settings, lr: float) -> LazyAdam | None:
    """With judge offsets: Adam on the offsets of the judges each batch holds (calibration/model/lazy_adam.py),
    so a step costs what the batch holds, not all judges."""
    if not net.personalised:
        return None
    return LazyAdam(net.judge_parameters(), lr=lr, weight_decay=2 * settings.l2_judge)


def _still_training(active: torch.Tensor) -> torch.Tensor:
    """Which models stay in the batch: the active ones, topped up with stopped ones to at least two."""
    keep = active.clone()
    for m in torch.nonzero(~active).flatten().tolist():
        if int(keep.sum()) >= min(2, len(keep)):
            break
        keep[m] = True
    return keep


def _compact(
    work: CalibrationNet,
    optimiser: torch.optim.Adam,
    lazy: LazyAdam | None,
    keep: torch.Tensor,
    settings: Settings,
    lr: float,
) -> tuple[CalibrationNet, torch.optim.Adam, LazyAdam | None]:
    """The models `keep` of `work`, with their Adam state, as a smaller network and optimisers."""
    smaller = work.subset(torch.nonzero(keep).flatten())
    moved = _adam(smaller, settings, lr)
    for old, new in zip(work.parameters(), smaller.parameters(), strict=True):
        state = optimiser.state.get(old)
        if state:  # 'step' is one count for all models; the moments have the model axis first
            moved.state[new] = {k: v.clone() if v.dim() == 0 else v[keep].clone() for k, v in state.items()}
    return smaller, moved, None if lazy is None else lazy.subset(smaller.judge_parameters(), keep)


def _batch_indices(fit_rows: list[np.ndarray], seeds: list[int], steps: int, batch: int, salt: int) -> np.ndarray:
    """(M, steps, B) row indices: each model walks through its own reshuffled rows, epoch after epoch.
    batch 0 means full batch (the largest model's row count; train.batch_size=0)."""
    if any(len(rows) == 0 for rows in fit_rows):
        raise ValueError("a model has no training rows; use fewer folds or more labelled data.")
    batch = batch if batch > 0 else max(len(rows) for rows in fit_rows)
    out = np.empty((len(fit_rows), steps, batch), dtype=np.int64)
    for m, (rows, seed) in enumerate(zip(fit_rows, seeds, strict=True)):
        rng = np.random.default_rng([seed, salt])
        epochs = -(-steps * batch // len(rows))
        order = np.concatenate([rng.permutation(rows) for _ in range(epochs)])
        out[m] = order[: steps * batch].reshape(steps, batch)
    return out


@torch.no_grad()
def _base_rows(net: CalibrationNet, X: torch.Tensor, rows: Rows) -> torch.Tensor | None:
    """(M, R, Q*K) the fixed base's log-probabilities of every label row, for every model: computed once
    per phase instead of at every step. None without a base (or before it joins at fine-tuning), or
    where it would take more than BASE_ROWS_ENTRIES floats (then each step computes its batch's)."""
    n_models, n_rows = net.n_models, len(rows.item)
    if not net.n_base or not net.base_active or n_models * n_rows * net.option_pad.numel() > BASE_ROWS_ENTRIES:
        return None
    x = X[rows.item].expand(n_models, -1, -1)
    return net.base_logits(x, rows.judge.expand(n_models, -1)).contiguous()


def _at(base_rows: torch.Tensor | None, models: torch.Tensor, idx: torch.Tensor) -> torch.Tensor | None:
    """The rows idx (M', B) of the models `models` (M',) of `_base_rows`: (M', B, Q*K)."""
    if base_rows is None:
        return None
    n_rows = base_rows.shape[1]
    flat = (models[:, None] * n_rows + idx).reshape(-1)  # whole-row index_select: ~4x faster than [models, idx]
    return base_rows.view(-1, base_rows.shape[-1]).index_select(0, flat).view(*idx.shape, -1)


@torch.no_grad()
def _val_loss(net, X, rows, idx, mask, weights, base=None) -> torch.Tensor:
    targets = rows.answers[idx].masked_fill(~mask[..., None], -1)
    logp = net(X[rows.item[idx]], rows.judge[idx], base=base)
    return CalibrationNet.nll_per_model(logp, targets, weights, row_weight=rows.weight_at(idx))


def _snapshot(net) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _keep_best(
    best: dict[str, torch.Tensor], work: CalibrationNet, alive: torch.Tensor, improved: torch.Tensor
) -> None:
    """Copy the improved models of `work` (which holds the models `alive` of the full batch) into `best`."""
    for name, value in work.named_parameters():
        best[name][alive[improved]] = value.detach()[improved]
