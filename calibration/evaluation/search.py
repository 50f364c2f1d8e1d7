"""Hyperparameter search with Optuna: TPE sampling, pruning, SQLite storage, resumable.

The objective is the held-out log-likelihood of the target question by inner cross-validation
(lower NLL is better). Each trial is pruned in two rungs: one ensemble member per fold first
(reported to the pruner), then the rest of the ensemble, pooled with the first (`train.pool`). The
current settings are scored as they are too, and the best trial is recommended only if it beats them.
The command: calibration/commands/search.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing
import os
import re
import time

import numpy as np
import optuna
from tqdm.auto import tqdm

from calibration.data.dataset import Dataset
from calibration.data.splits import group_folds
from calibration.evaluation.metrics import mean_nll
from calibration.evaluation.out_of_fold import oof_members, pool_members
from calibration.evaluation.study import (
    bind_study,
    fingerprint,
    open_study,
    queued,
    quiet_experimental,
    stamp_dead_local_trials,
    worker_name,
)
from calibration.model.settings import Settings, default_training_workers

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

NETWORK_KEYS = ("hidden1", "hidden2", "personalised", "drop_questions")


def suggest(trial: optuna.Trial, space: dict) -> dict:
    """Settings overrides for one trial from a search space: a list = categorical choices, a dict with
    low/high (and log: true, step) = a numeric range."""
    out = {}
    for name, spec in space.items():
        if isinstance(spec, (list, tuple)):
            out[name] = trial.suggest_categorical(name, list(spec))
        elif isinstance(spec.get("low"), int) and isinstance(spec.get("high"), int) and not spec.get("log"):
            out[name] = trial.suggest_int(name, spec["low"], spec["high"], step=spec.get("step", 1))
        else:
            out[name] = trial.suggest_float(name, float(spec["low"]), float(spec["high"]), log=bool(spec.get("log")))
    return out


def inner_objective(
    ds: Dataset, settings: Settings, *, folds: int, seed: int, trial: optuna.Trial | None = None
) -> float:
    """Held-out target NLL of `settings` by `folds`-fold cross-validation of `ds`, pruned after one member."""
    t = ds.target_index
    fold_of_row = group_folds(ds.groups, folds, seed)[ds.label_item]
    rows = np.flatnonzero(ds.answers[:, t] >= 0)
    first = oof_members(ds, dataclasses.replace(settings, ensemble=1), fold_of_row, folds, seed)
    probs = pool_members(ds, settings, fold_of_row, [first])
    score = mean_nll(probs[rows, : ds.n_options[t]], ds.answers[rows, t])
    if trial is not None:
        trial.report(score, step=1)
        if trial.should_prune():
            raise optuna.TrialPruned()
    if settings.ensemble > 1:
        rest = oof_members(
            ds, dataclasses.replace(settings, ensemble=settings.ensemble - 1), fold_of_row, folds, seed, first_member=1
        )
        probs = pool_members(ds, settings, fold_of_row, [first, rest])
        score = mean_nll(probs[rows, : ds.n_options[t]], ds.answers[rows, t])
    return score


def _base_params(base: Settings, space: dict) -> dict:
    """The current settings as a study's first trial (clipped into the space; a categorical value outside
    its choices is left to the sampler), so the search starts from what is known to work."""
    params = {}
    for name, spec in space.items():
        value = getattr(base, name, None)
        if isinstance(spec, (list, tuple)):
            if value in spec:
                params[name] = value
        elif value is not None:
            params[name] = min(max(value, spec["low"]), spec["high"])
    return params


def search(
    ds: Dataset,
    base: Settings,
    space: dict,
    *,
    trials: int,
    folds: int = 5,
    seed: int = 0,
    storage: str | None = None,
    study_name: str = "role-rubric",
    timeout: float | None = None,
    workers: int = 1,
    progress: bool = False,
    resume: bool = True,
    heartbeat: int | None = None,
) -> optuna.Study:
    """Run (or resume) a study until it holds `trials` finished (complete or pruned) trials.

    workers > 1 adds processes that share the study through its storage (one core each; the networks
    are too small to use more than one thread well). They need a storage URL, not the in-memory default.
    A stored study is resumed only for the same data and settings (`fingerprint`); otherwise InputError,
    or with resume=False a new study replaces it. heartbeat: share the study with other searches (other
    processes or machines running the same command on the same storage; see open_study).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print_ = fingerprint(ds, base, space, folds=folds, seed=seed)

    def start(new: optuna.Study) -> None:  # by whichever search creates the study: the first trial queued once
        new.set_user_attr("fingerprint", print_)  # before the trial, so that bind_study finds the study this run's
        with quiet_experimental():
            new.enqueue_trial(_base_params(base, space))

    study = open_study(storage, study_name, seed, heartbeat=heartbeat, on_create=start)
    study = bind_study(
        study, print_, storage=storage, name=study_name, seed=seed, resume=resume, heartbeat=heartbeat, on_create=start
    )
    done = finished_trials(study)
    bar = tqdm(total=trials, initial=min(done, trials), desc="search", unit="trial", disable=None if progress else True)
    job = (ds, base, space, trials, folds, seed, storage, study_name, timeout, heartbeat)
    parallel = done < trials and workers > 1 and storage is not None
    # Processes already fill the cores: each trains its models in one slice (see fit_models).
    with default_training_workers(1) if parallel else contextlib.nullcontext():
        _search_until_done(study, job, trials, workers if parallel else 1, bar)
    bar.close()
    if heartbeat is not None:
        _finish_shared(study, job, heartbeat)
    _score_defaults(study, ds, base, folds=folds, seed=seed)
    return open_study(storage, study_name, seed, clean=False, heartbeat=heartbeat) if storage is not None else study


def _finish_shared(study: optuna.Study, job: tuple, heartbeat: int) -> None:
    """Wait for the other searches' trials; where one of them was found dead meanwhile, its retry is queued
    (Optuna's RetryFailedTrialCallback) after every search may have reached the total: run it here (one
    trial: the total is reached, so `_optimize` stops after it), or it would stay queued for good with its
    parameters never finished. Two searches that both see it queued at once may run one fresh trial more."""
    _wait_for_others(study, heartbeat)
    while queued(study):
        _optimize(study, *job)
        _wait_for_others(study, heartbeat)


def _wait_for_others(study: optuna.Study, heartbeat: int) -> None:
    """Wait until the trials other searches are running on the shared study end (a silent one is failed
    after its grace period), so that every search of the study reports the same best trial."""
    printed = False
    while True:
        stamp_dead_local_trials(study)
        with quiet_experimental():
            optuna.storages.fail_stale_trials(study)
        running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        if not running:
            return
        if not printed:
            log.info(f"search: waiting for {len(running)} trial(s) that other processes are running on the study")
            printed = True
        time.sleep(min(1.0, heartbeat / 2))


def _score_defaults(study: optuna.Study, ds: Dataset, base: Settings, *, folds: int, seed: int) -> None:
    """The current settings' own held-out NLL, as they are (study user attr `defaults_nll`, once per study).
    The enqueued trial is clipped into the space, whose ensembles of at most 5 members are never
    recalibrated (Settings.recalibrates): on the LLM-Rubric data it scored 1.113 where the defaults
    themselves score 1.054, and every trial of a search lost to them. `best_overrides` recommends a trial
    only if it beats this."""
    if "defaults_nll" not in study.user_attrs:
        study.set_user_attr("defaults_nll", inner_objective(ds, base, folds=folds, seed=seed))


def _search_until_done(study, job, trials: int, workers: int, bar) -> None:
    """Optimise here, with workers - 1 more processes, until the study holds `trials` finished trials."""
    done = finished_trials(study)
    extra = []
    if workers > 1:
        context = multiprocessing.get_context("spawn")
        extra = [context.Process(target=_work, args=(*job, w, os.getpid()), daemon=True) for w in range(1, workers)]
        for process in extra:
            process.start()

    def tick(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        finished = finished_trials(study)
        bar.update(min(finished, trials) - bar.n)
        if any(t.state == optuna.trial.TrialState.COMPLETE for t in study.get_trials(deepcopy=False)):
            bar.set_postfix(best_nll=f"{study.best_value:.4f}")

    if done < trials:
        _optimize(study, *job, callbacks=[tick])
    for process in extra:
        process.join()


def _optimize(
    study,
    ds,
    base,
    space,
    trials,
    folds,
    seed,
    storage,
    study_name,
    timeout,
    heartbeat,
    *,
    callbacks=(),
    parent: int | None = None,
) -> None:
    def objective(trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", worker_name())
        settings = dataclasses.replace(base, **suggest(trial, space))
        return inner_objective(ds, settings, folds=folds, seed=seed, trial=trial)

    def stop_when_done(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        # A worker whose parent was killed stops too (its parent id changes), like the parent did.
        if finished_trials(study) >= trials or (parent is not None and os.getppid() != parent):
            study.stop()

    study.optimize(objective, timeout=timeout, callbacks=[*callbacks, stop_when_done], gc_after_trial=False)


def _work(
    ds, base, space, trials, folds, seed, storage, study_name, timeout, heartbeat, index: int, parent: int
) -> None:
    """A worker process: its own sampler seed, the shared study, stops when the study is complete."""
    _die_with(parent)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(storage, study_name, seed + index, clean=False, heartbeat=heartbeat)
    if finished_trials(study) < trials:
        _optimize(study, ds, base, space, trials, folds, seed, storage, study_name, timeout, heartbeat, parent=parent)


def _die_with(parent: int) -> None:
    """End this worker as soon as the search process that started it is gone (killed), not at the end of
    its trial: the kernel sends SIGKILL on Linux (PR_SET_PDEATHSIG); elsewhere a thread polls the parent
    id. The trial it was running stays RUNNING and the next search marks it failed and redoes it."""
    from rubric.lifetime import die_with_parent

    die_with_parent(parent, poll_s=0.2)


def finished_trials(study: optuna.Study) -> int:
    """How many trials of the study are finished: completed or pruned (a failed or running one is not)."""
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


def beats_defaults(study: optuna.Study) -> bool:
    """Whether the best trial's held-out NLL is lower than the current settings' own (`_score_defaults`)."""
    defaults = study.user_attrs.get("defaults_nll")
    return defaults is None or study.best_value < defaults


def recommended_params(study: optuna.Study) -> dict:
    """The best trial's parameters, or none (keep the current settings) when no trial beat them."""
    return study.best_params if beats_defaults(study) else {}


def recommended_nll(study: optuna.Study) -> float:
    """The held-out NLL of what `recommended_params` recommends."""
    return min(study.best_value, study.user_attrs.get("defaults_nll", study.best_value))


def best_overrides(study: optuna.Study) -> dict[str, dict]:
    """`recommended_params` split into the `network` and `train` config groups."""
    params = recommended_params(study)
    return {
        "network": {k: v for k, v in params.items() if k in NETWORK_KEYS},
        "train": {k: v for k, v in params.items() if k not in NETWORK_KEYS},
    }


def shown_storage(url: str) -> str:
    """A storage URL as printed and written: never its password.

    >>> shown_storage("postgresql://bob:s3cret@db/studies")
    'postgresql://bob:***@db/studies'
    """
    return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", url)
