"""The settings of the network and its training (`Settings`), and how many threads and workers train.

The defaults of `Settings` equal conf/network and conf/train; `torch_threads` and `training_workers` decide
how the CPU is used, never the numbers a seed gives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from dataclasses import dataclass

import torch

BASES = ("linear", "none")
REMOVED_SETTINGS = {"base_crossfit": 0, "base_inputs_to_net": False, "base_phase": "finetune", "judge_updates": "lazy",
                    "use_coverage": True}
"""Settings that earlier versions offered, with the one value this version always uses (the default they
had). A model.json that records another value is refused by load_model: retrain it."""


@dataclass(frozen=True)
class Settings:
    """Hyperparameters of the network and its training; the defaults equal conf/network and conf/train."""

    hidden1: int = 25
    hidden2: int = 25
    personalised: bool = True
    drop_questions: tuple[str, ...] = ()
    lr: float = 0.03
    finetune_lr: float = 0.02
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
    recalibrate_prior: float = 1.0
    recalibrate_min_members: int = 8
    """Smaller ensembles are not recalibrated: too few rows are out of bag (1 - 0.9^E of them)."""
    base: str = "linear"
    """The fixed simple model the network adds its residual to: "linear" (multinomial logistic: the `linear`
    baseline of cv) or "none" (the paper's network). Pretraining trains
    the paper's network alone on every question; fine-tuning restarts the target's columns of V and UV at
    zero and adds the base to the target's logits, so the target is the base plus a residual read from
    hidden layers pretrained as the paper's."""
    base_l2: float = 3e-4
    """L2 penalty of the base's weights and judge offsets, per mean NLL."""

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
        from calibration.model.recalibrate import METHODS, POOLS
        from rubric.errors import InputError

        for name, allowed in (("pool", POOLS), ("recalibrate", METHODS), ("base", BASES)):
            if getattr(self, name) not in allowed:
                key = f"{'network' if name.startswith('base') else 'train'}.{name}"
                raise InputError(f"{key}={getattr(self, name)!r} is not one of {list(allowed)}.",
                                 fix=f"set {key} to one of {list(allowed)}.")
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


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Run with `n` torch threads, and as many BLAS threads for numpy (None: ROLE_RUBRIC_THREADS, default 1),
    then restore the settings.

    The network's tensors are small: with several threads each operation pays for waking and joining
    them, and on a busy machine spinning threads wait on each other. Measured on 2 cores under load, a
    5-seed cv took 12 s on one thread and 320 s on two. The personalised layers multiply with numpy
    (calibration/model/personal_layer.py), whose OpenBLAS would otherwise start its own threads."""
    keep_freed_memory()
    n = int(os.environ.get("ROLE_RUBRIC_THREADS", "1")) if n is None else n
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, n))
    try:
        with _blas_threads().limit(limits=max(1, n), user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


@functools.cache
def _blas_threads():
    """threadpoolctl's view of the loaded BLAS libraries, found once: finding them (threadpool_limits) takes
    ~0.6 ms, and torch_threads wraps every prediction; limiting through the found view takes ~0.01 ms."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


_MALLOC_TUNED = False


def keep_freed_memory() -> None:
    """Let glibc keep freed memory for reuse (once per process; no-op elsewhere than glibc).

    A training step allocates and frees arrays of 1-10 MB. By default glibc serves them with fresh mmap
    pages and hands them back on free, so every step pays ~2,000 page faults of zeroed memory: a third of
    the step at the LLM-Rubric sizes (26.6 -> 17.3 ms CPU a step measured; docs/results.md "Scaling"). Above 64 MB
    allocations still map fresh pages, and up to 256 MB of freed heap is kept: the process's resident memory
    stays near its peak until it exits instead of shrinking after training."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    libc.mallopt(m_mmap_threshold, 64 << 20)
    libc.mallopt(m_trim_threshold, 256 << 20)


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
