"""Training, top to bottom: settings, data, model, optimiser, loop with early stopping, checkpoint.

`fit_models` trains M models at once (a leading model axis): each model m has its own training rows,
validation rows and seed. It pretrains on all questions, then fine-tunes on the target question with a
fresh optimiser; each phase stops early per model on its validation loss and keeps its best weights.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from calibration.dataset import Dataset, load_dataset
from calibration.network import CalibrationNet
from calibration.recalibrate import Recalibration, fit_recalibration
from calibration.splits import subsample, validation_split


@dataclass(frozen=True)
class Settings:
    """Hyperparameters of the network and its training; the defaults equal conf/network and conf/train."""

    hidden1: int = 25
    hidden2: int = 25
    personalised: bool = True
    use_coverage: bool = True
    drop_questions: tuple[str, ...] = ()
    lr: float = 0.03
    finetune_lr: float = 0.0015
    batch_size: int = 128
    pretrain_steps: int = 250
    finetune_steps: int = 400
    l2_judge: float = 2e-3
    weight_decay: float = 0.0
    ensemble: int = 16
    val_fraction: float = 0.1
    eval_every: int = 10
    patience: int = 12
    train_fraction: float = 1.0
    pool: str = "geometric"
    recalibrate: str = "vector"
    recalibrate_prior: float = 0.25
    recalibrate_min_members: int = 8
    """Smaller ensembles are not recalibrated: too few rows are out of bag (1 - 0.9^E of them)."""

    @classmethod
    def from_cfg(cls, cfg) -> Settings:
        """Merge the `network` and `train` config groups (unknown keys are an error, not ignored)."""
        merged = {**dict(cfg.get("network") or {}), **dict(cfg.get("train") or {})}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(merged) - names)
        if unknown:
            from rubric.errors import InputError

            raise InputError(f"unknown setting(s) {unknown}.", fix=f"use network.*/train.* keys among {sorted(names)}.")
        merged["drop_questions"] = tuple(merged.get("drop_questions") or ())
        return cls(**merged).checked()

    def checked(self) -> Settings:
        """Self, after checking the settings that take one of a few names."""
        from calibration.recalibrate import METHODS, POOLS

        for name, allowed in (("pool", POOLS), ("recalibrate", METHODS)):
            if getattr(self, name) not in allowed:
                from rubric.errors import InputError

                raise InputError(f"train.{name}={getattr(self, name)!r} is not one of {list(allowed)}.",
                                 fix=f"set train.{name} to one of {list(allowed)}.")
        return self

    def recalibrates(self, members: int) -> bool:
        """Whether an ensemble of `members` gets the target recalibration. With few members few training
        rows are out of bag (19% with 2, 41% with 5, 57% with 8), and the map costs more accuracy than it
        gives: on the LLM-Rubric data 5 members went from Pearson 0.449 / RMSE 0.737 to 0.440 / 0.741
        (5 seeds), and the report's 2-member ablation reference from 0.432 / 0.744 to 0.422 / 0.750."""
        return self.recalibrate != "none" and members >= self.recalibrate_min_members

    def without_pretraining(self) -> Settings:
        """Train on the target only, from scratch, at the pretraining learning rate: `finetune_lr` is tuned
        for adjusting a pretrained network and leaves a fresh one under-trained (on the LLM-Rubric data the
        calibrated-LLM baseline scored RMSE 0.776 at the fine-tune rate and 0.757 at this one)."""
        return dataclasses.replace(self, pretrain_steps=0, finetune_lr=self.lr)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["drop_questions"] = list(self.drop_questions)
        return out


@dataclass
class Rows:
    """Label rows as tensors: the item, judge and answers (option index, -1 = none) of each."""

    item: torch.Tensor  # (R,)
    judge: torch.Tensor  # (R,)
    answers: torch.Tensor  # (R, Q)

    @classmethod
    def of(cls, ds: Dataset) -> Rows:
        return cls(*(torch.tensor(a, dtype=torch.long) for a in (ds.label_item, ds.label_judge, ds.answers)))


@dataclass
class Plan:
    """What each of the M models trains and validates on, and its seed."""

    fit_rows: list[np.ndarray]
    val_rows: list[np.ndarray]
    seeds: list[int]
    history: dict = field(default_factory=dict)
    recalibration: Recalibration | None = None  # train_ensemble's, fitted after training

    def subset(self, models: np.ndarray) -> Plan:
        """The plan of some of the models (a fresh history)."""
        return Plan([self.fit_rows[m] for m in models], [self.val_rows[m] for m in models],
                    [self.seeds[m] for m in models])


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


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Run with `n` torch threads (None: ROLE_RUBRIC_THREADS, default 1), then restore the setting.

    The network's tensors are small: with several threads each operation pays for waking and joining
    them, and on a busy machine spinning threads wait on each other. Measured on 2 cores under load, a
    5-seed cv took 12 s on one thread and 320 s on two."""
    n = int(os.environ.get("ROLE_RUBRIC_THREADS", "1")) if n is None else n
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fit_models(X: torch.Tensor, rows: Rows, plan: Plan, settings: Settings, *, n_judges: int, n_options: list[int],
               target: int, progress: bool = False, threads: int | None = None,
               workers: int | None = None) -> CalibrationNet:
    """Train len(plan.seeds) models side by side and return them with their best validation weights.

    X: (N, D) item features. Pretraining weighs every question; fine-tuning only `target`.
    workers: Python threads that each train a contiguous slice of the models (None: ROLE_RUBRIC_WORKERS,
    default the number of CPUs, at most 4). torch releases the GIL inside its kernels, so two slices on two
    cores run about 1.5x faster than one batch on one core; unlike two intra-op threads per operation,
    which spin and wait on each other, they slow down gracefully on a busy machine. A model's result does
    not depend on the models that share its batch beyond float rounding (the padded size of the judge
    groups, and so the matrix kernels, depend on the whole batch), so `workers` changes predictions by
    about 1e-9 at most (tested to 1e-6). The same settings and workers give bit-identical results.
    """
    # At least two models a slice: a one-model batch takes other kernels, which round more differently.
    n_slices = max(1, min(training_workers(workers), len(plan.seeds) // 2))
    slices = np.array_split(np.arange(len(plan.seeds)), n_slices)
    steps = settings.pretrain_steps + settings.finetune_steps
    bar = tqdm(total=steps * len(slices), desc=f"training {len(plan.seeds)} models", disable=None if progress else True,
               unit="step", leave=False)

    def fit(models: np.ndarray) -> tuple[CalibrationNet, dict]:
        part = plan.subset(models)
        net = _fit_models(X, rows, part, settings, n_judges=n_judges, n_options=n_options, target=target, bar=bar)
        return net, part.history

    with torch_threads(threads), bar:
        if len(slices) == 1:
            fitted = [fit(slices[0])]
        else:
            with ThreadPoolExecutor(len(slices)) as pool:
                fitted = list(pool.map(fit, slices))
    plan.history.update(_merge_histories([h for _, h in fitted]))
    return CalibrationNet.concat([net for net, _ in fitted])


def training_workers(n: int | None) -> int:
    """How many model slices train at once (see fit_models): n, else ROLE_RUBRIC_WORKERS, else the CPU count
    (at most 4: beyond that the slices get too small to keep a core busy)."""
    if n is None:
        raw = os.environ.get("ROLE_RUBRIC_WORKERS", "0")
        if not raw.strip().isdigit():
            from rubric.errors import InputError

            raise InputError(f"ROLE_RUBRIC_WORKERS={raw!r} is not a whole number.", fix="set it to 1, 2, ... or unset it.")
        from rubric.parallel import available_cpus

        n = int(raw) or min(available_cpus(), 4)
    return max(1, int(n))


@contextlib.contextmanager
def default_training_workers(n: int):
    """Make `n` the default of fit_models' `workers` inside the block and in processes started from it,
    unless ROLE_RUBRIC_WORKERS is set. For callers that already run trainings in parallel processes."""
    before = os.environ.get("ROLE_RUBRIC_WORKERS")
    if before is None:
        os.environ["ROLE_RUBRIC_WORKERS"] = str(n)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ROLE_RUBRIC_WORKERS", None)


def _fit_models(X, rows, plan, settings, *, n_judges, n_options, target, bar) -> CalibrationNet:
    net = CalibrationNet(
        len(plan.seeds), X.shape[1], n_judges, n_options,
        hidden1=settings.hidden1, hidden2=settings.hidden2, personalised=settings.personalised, seeds=plan.seeds,
    )
    all_questions = torch.ones(len(n_options))
    target_only = torch.zeros(len(n_options))
    target_only[target] = 1.0
    phases = [("pretrain", settings.pretrain_steps, settings.lr, all_questions),
              ("finetune", settings.finetune_steps, settings.finetune_lr, target_only)]
    for name, steps, lr, weights in phases:
        if steps > 0:
            plan.history[name] = _run_phase(net, X, rows, plan, settings, steps, lr, weights, salt=len(plan.history), bar=bar)
    return net


def _merge_histories(histories: list[dict]) -> dict:
    """Per-phase history of the whole batch: the most steps any slice ran, every model's best loss."""
    out: dict = {}
    for name in histories[0]:
        phase = [h[name] for h in histories]
        losses = [p["best_val_nll"] for p in phase]
        out[name] = {"steps": max(p["steps"] for p in phase),
                     "best_val_nll": None if losses[0] is None else [x for part in losses for x in part]}
    return out


def _run_phase(net, X, rows, plan, settings, steps, lr, weights, *, salt, bar) -> dict:
    """Train every model of `net` for up to `steps` steps; with validation rows, each model stops on its
    own and `net` ends with each model's best weights.

    Stopped models leave the computation (`work` holds the models still training, `alive` their indices
    in `net`): in fine-tuning most stop long before the last one (on the LLM-Rubric data 17 of 25 had
    stopped after 130 of 370 steps), and a smaller batch is a cheaper step. At least two stay in it,
    since a one-model batch takes other kernels, which round more differently."""
    work, alive = net, torch.arange(net.n_models)
    optimiser = _adam(work, settings, lr)
    batches = torch.from_numpy(_batch_indices(plan.fit_rows, plan.seeds, steps, settings.batch_size, salt))
    val_idx, val_mask = _padded(plan.val_rows)
    early = bool(val_mask.any())
    best = _snapshot(net)
    best_loss = _val_loss(net, X, rows, val_idx, val_mask, weights) if early else None
    stale = torch.zeros(net.n_models, dtype=torch.long)
    # A model without a validation label for this phase (its validation rows answer no weighted question,
    # or it has none) cannot stop early: it trains every step and keeps its last weights.
    unvalidated = ~_has_validation_labels(rows, val_idx, val_mask, weights)
    ran = steps
    for step in range(steps):
        b = batches[alive, step]  # (M', B) label-row indices
        _, loss = work(X[rows.item[b]], rows.judge[b], rows.answers[b], weights)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        bar.update(1)
        if early and ((step + 1) % settings.eval_every == 0 or step + 1 == steps):
            current = _val_loss(work, X, rows, val_idx[alive], val_mask[alive], weights)
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
                work, optimiser = _compact(work, optimiser, keep, settings, lr)
                alive = alive[keep]
    bar.update(steps - ran)
    if early:
        net.load_state_dict(best)
    return {"steps": ran, "best_val_nll": None if best_loss is None else best_loss.tolist()}


def _has_validation_labels(rows: Rows, val_idx: torch.Tensor, val_mask: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """(M,) whether each model's validation rows hold at least one answer the phase's loss weighs."""
    observed = (rows.answers[val_idx] >= 0) & val_mask[..., None]  # (M, L, Q)
    return (observed * (weights > 0)).flatten(1).any(dim=1)


def _adam(net: CalibrationNet, settings: Settings, lr: float) -> torch.optim.Adam:
    # Fresh per phase. Adam's weight_decay adds wd * w to the gradient, i.e. the L2 penalty (wd / 2)|w|^2.
    return torch.optim.Adam(
        [{"params": net.shared_parameters(), "weight_decay": 2 * settings.weight_decay},
         {"params": net.judge_parameters(), "weight_decay": 2 * settings.l2_judge}],
        lr=lr, fused=True,
    )


def _still_training(active: torch.Tensor) -> torch.Tensor:
    """Which models stay in the batch: the active ones, topped up with stopped ones to at least two."""
    keep = active.clone()
    for m in torch.nonzero(~active).flatten().tolist():
        if int(keep.sum()) >= min(2, len(keep)):
            break
        keep[m] = True
    return keep


def _compact(work: CalibrationNet, optimiser: torch.optim.Adam, keep: torch.Tensor, settings: Settings,
             lr: float) -> tuple[CalibrationNet, torch.optim.Adam]:
    """The models `keep` of `work`, with their Adam state, as a smaller network and optimiser."""
    smaller = work.subset(torch.nonzero(keep).flatten())
    moved = _adam(smaller, settings, lr)
    for old, new in zip(work.parameters(), smaller.parameters(), strict=True):
        state = optimiser.state.get(old)
        if state:  # 'step' is one count for all models; the moments have the model axis first
            moved.state[new] = {k: v.clone() if v.dim() == 0 else v[keep].clone() for k, v in state.items()}
    return smaller, moved


def _batch_indices(fit_rows: list[np.ndarray], seeds: list[int], steps: int, batch: int, salt: int) -> np.ndarray:
    """(M, steps, B) row indices: each model walks through its own reshuffled rows, epoch after epoch.
    batch <= 0 means full batch (the largest model's row count)."""
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


def _padded(groups: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged per-model row lists -> (M, L) indices and a (M, L) mask."""
    length = max(1, max(len(g) for g in groups))
    idx = np.zeros((len(groups), length), dtype=np.int64)
    mask = np.zeros((len(groups), length), dtype=bool)
    for m, g in enumerate(groups):
        idx[m, : len(g)] = g
        mask[m, : len(g)] = True
    return torch.from_numpy(idx), torch.from_numpy(mask)


@torch.no_grad()
def _val_loss(net, X, rows, idx, mask, weights) -> torch.Tensor:
    targets = rows.answers[idx].masked_fill(~mask[..., None], -1)
    logp, _ = net(X[rows.item[idx]], rows.judge[idx])
    return CalibrationNet.nll_per_model(logp, targets, weights)


def _snapshot(net) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _keep_best(best: dict[str, torch.Tensor], work: CalibrationNet, alive: torch.Tensor, improved: torch.Tensor) -> None:
    """Copy the improved models of `work` (which holds the models `alive` of the full batch) into `best`."""
    for name, value in work.named_parameters():
        best[name][alive[improved]] = value.detach()[improved]


def recalibrations(net: CalibrationNet, X: torch.Tensor, ds: Dataset, plan: Plan, ensembles: list[list[int]],
                   settings: Settings) -> list[Recalibration | None]:
    """The target recalibration of each ensemble (a list of model indices of `net`), fitted on its
    members' validation rows (calibration/recalibrate.py); None where Settings.recalibrates says no."""
    if not any(settings.recalibrates(len(members)) for members in ensembles):
        return [None] * len(ensembles)
    from calibration.predict import member_logproba

    t = ds.target_index
    val_logp = member_logproba(net, X, [ds.label_item[v] for v in plan.val_rows],
                               [ds.label_judge[v] for v in plan.val_rows])
    return [target_recalibration(ds, settings, [plan.val_rows[m] for m in members],
                                 [val_logp[m][:, t] for m in members]) for members in ensembles]


def target_recalibration(ds: Dataset, settings: Settings, val_rows: list[np.ndarray],
                         val_logp: list[np.ndarray]) -> Recalibration | None:
    """The target recalibration of one ensemble from its members' validation rows and target
    log-probabilities there; None where Settings.recalibrates says no."""
    if not settings.recalibrates(len(val_rows)):
        return None
    t = ds.target_index
    return fit_recalibration(val_rows, val_logp, ds.answers[:, t], question=t, n_options=int(ds.n_options[t]),
                             how=settings.pool, prior=settings.recalibrate_prior)


def train_ensemble(ds: Dataset, settings: Settings, *, seed: int = 0, progress: bool = False):
    """Train the final ensemble on every label row of `ds`; returns (net, feature spec, plan), with the
    ensemble's target recalibration in plan.recalibration."""
    spec = ds.feature_spec(drop_questions=settings.drop_questions, use_coverage=settings.use_coverage)
    X = torch.from_numpy(ds.features(spec))
    seeds = [seed * 1000 + e for e in range(settings.ensemble)]
    all_rows = np.arange(len(ds.label_item))
    plan = plan_models(ds, [all_rows] * settings.ensemble, seeds, settings)
    net = fit_models(X, Rows.of(ds), plan, settings, n_judges=len(ds.judges), n_options=ds.n_options.tolist(),
                     target=ds.target_index, progress=progress)
    plan.recalibration = recalibrations(net, X, ds, plan, [list(range(net.n_models))], settings)[0]
    return net, spec, plan


def run_train(cfg) -> Path:
    """CLI: `role-rubric train data=DIR out=MODEL_DIR [target=Q] [network.*=..] [train.*=..]`."""
    from calibration.modelio import save_model

    settings = Settings.from_cfg(cfg)
    ds = load_dataset(cfg.data, target=cfg.get("target"))
    start = time.perf_counter()
    net, spec, plan = train_ensemble(ds, settings, seed=int(cfg.seed), progress=True)
    out = save_model(Path(cfg.out), net, ds, spec, settings, history=plan.history, recalibration=plan.recalibration)
    print(f"train: {settings.ensemble} models on {len(ds.label_item)} label rows, {len(ds.judges)} judges, "
          f"target {ds.rubric.target!r} in {time.perf_counter() - start:.1f}s")
    print(f"train: wrote model to {out}")
    return out
