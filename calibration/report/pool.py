"""Many cross-validations of the calibrated model, here or on a process pool, for the report's variants.

A job is (dataset, settings, folds, seed, threads); `_cv_job` runs one and returns the calibrated
model's out-of-fold rows with the seconds it took. `run_cvs` runs a list of labelled jobs in order, on an
executor if given. Every job is seeded and self-contained, so a pool gives the same predictions as running
them one after another. `prefetching_pool` starts spawned worker processes and submits every job the
report will ask for up front, so the workers train while the main process computes the other sections;
`PrefetchedPool.map` then hands back those results. `report_threads` applies `report.torch_threads`.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from calibration.evaluation.cv_predictions import REFERENCE, method_rows

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def report_threads(n: int | None) -> contextlib.AbstractContextManager[None]:
    """Run torch with `n` intra-op threads inside the block, then restore (`report.torch_threads`).

    None or 0 leaves the caller's setting as it is, unlike `calibration.model.settings.torch_threads`, where None
    means ROLE_RUBRIC_THREADS. The report trains dozens of small batched models one after another; with
    more than one thread each tiny matmul pays a thread hand-off, and on a busy 2-core machine that costs
    10-100x (measured: a 2-fold cv of 2 small models took 3-14 s with 2 threads and 0.1 s with 1).
    """
    if not n:
        return contextlib.nullcontext()
    from calibration.model.settings import torch_threads

    return torch_threads(int(n))


def _cv_calibrated(ds: Any, settings: Any, *, folds: int, fold_seed: int, seed: int) -> pd.DataFrame:
    from calibration.evaluation.crossval import cross_validate

    result = cross_validate(ds, settings, folds=folds, seed=seed, fold_seed=fold_seed, baselines=False)
    return method_rows(result.predictions, REFERENCE)


def _cv_job(job: tuple[Any, Any, int, int, int, int | None]) -> tuple[pd.DataFrame, float]:
    """One cross-validation (top-level so a process pool can pickle it):
    (ds, settings, folds, fold_seed, seed, threads)."""
    ds, settings, folds, fold_seed, seed, threads = job
    start = time.perf_counter()
    with report_threads(threads):
        rows = _cv_calibrated(ds, settings, folds=folds, fold_seed=fold_seed, seed=seed)
    return rows, time.perf_counter() - start


def run_cvs(
    jobs: Sequence[tuple[str, Any, Any, int]],
    *,
    folds: int = 5,
    fold_seed: int = 0,
    executor: Executor | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> list[pd.DataFrame]:
    """Cross-validate the calibrated model for each job (label, dataset, settings, seed), in job order.

    Every job is seeded and self-contained, so running them on a process pool (`executor`) gives the
    same predictions as running them here one after another.
    """
    args = [(ds, settings, folds, fold_seed, seed, threads) for _, ds, settings, seed in jobs]
    results = executor.map(_cv_job, args) if executor is not None else map(_cv_job, args)
    out = []
    for i, ((label, *_), (rows, seconds)) in enumerate(zip(jobs, results, strict=True)):
        out.append(rows)
        if progress:
            log.info(
                f"report: {label} ({i + 1}/{len(jobs)}): rmse {np.sqrt(np.mean((rows['expected'] - rows['answer']) ** 2)):.3f} ({seconds:.1f}s)"
            )
    return out


class PrefetchedPool(Executor):
    """A process pool whose cross-validations were submitted ahead of time, so the workers train while
    this process computes the other sections. `map(_cv_job, jobs)` hands back the result of a matching
    earlier submission (same target, settings, folds, fold seed, seed) and submits anything it has not seen, so a
    prefetch list that misses a job costs time, never correctness."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool
        self.pending: dict[tuple, Any] = {}

    @staticmethod
    def _key(job: tuple) -> tuple:
        ds, settings, folds, fold_seed, seed, _ = job
        return (ds.rubric.target, settings, folds, fold_seed, seed)

    def prefetch(self, jobs: Sequence[tuple]) -> None:
        for job in jobs:
            self.pending.setdefault(self._key(job), self.pool.submit(_cv_job, job))

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.pool.submit(fn, *args, **kwargs)

    def map(self, fn: Any, *iterables: Any, timeout: float | None = None, chunksize: int = 1) -> Iterator[Any]:
        futures = [self.pending.pop(self._key(job), None) or self.pool.submit(fn, job) for job in iterables[0]]
        return (f.result() for f in futures)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait, cancel_futures=cancel_futures)


def _one_training_slice() -> None:
    """Pool worker start-up: the processes fill the cores, so each trains its models in one slice (see
    calibration.model.train.fit_models) unless ROLE_RUBRIC_WORKERS says otherwise."""
    os.environ.setdefault("ROLE_RUBRIC_WORKERS", "1")


def prefetching_pool(workers: int, jobs: Sequence[tuple]) -> PrefetchedPool:
    """A pool of `workers` processes with every job of `jobs` (`_cv_job` tuples) already submitted."""
    # Spawned (not forked) workers: forking a process that has started torch's thread pools can hang.
    pool = PrefetchedPool(
        ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_one_training_slice)
    )
    pool.prefetch(jobs)
    return pool
