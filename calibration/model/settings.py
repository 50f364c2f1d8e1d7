"""The settings of the network and its training (`Settings`), and how many threads and workers train.

`Settings` is the one home of the `network` and `train` keys (default, range, description); `torch_threads` and `training_workers` decide
how the CPU is used, never the numbers a seed gives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rubric.config.settings import (
    boolean,
    check_values,
    choice,
    integer,
    number,
    setting,
    settings_of,
    text_list,
)

BASES = ("linear", "none")
REMOVED_SETTINGS = {
    "base_crossfit": 0,
    "base_inputs_to_net": False,
    "base_phase": "finetune",
    "judge_updates": "lazy",
    "use_coverage": True,
}
"""Settings that earlier versions offered, with the one value this version always uses (the default they
had). A model.json that records another value is refused by load_model: retrain it."""


NETWORK_KEYS = ("hidden1", "hidden2", "personalised", "drop_questions", "base", "base_l2")
"""The settings of the `network` config group; the others are the `train` group's."""


@dataclass(frozen=True)
class Settings:
    """Hyperparameters of the network and its training: the `network` and `train` config groups (their
    defaults, descriptions and ranges are these fields; calibration/schema registers them with Hydra)."""

    # network (the `network` config group)
    hidden1: int = setting(
        25, "units of the first hidden layer (chosen by `role-rubric search` on the LLM-Rubric data)", integer(1, 4096)
    )
    hidden2: int = setting(25, "units of the second hidden layer", integer(1, 4096))
    personalised: bool = setting(
        True, 'per-reviewer weights; false is the report\'s "no personalisation" ablation', boolean()
    )
    drop_questions: tuple[str, ...] = setting(
        (), 'input questions left out; the report\'s "without QUESTION" ablations use it', text_list()
    )
    # training (the `train` config group)
    lr: float = setting(0.03, "pretraining learning rate (all questions)", number(above=0, high=10))
    finetune_lr: float = setting(
        0.02, "fine-tuning learning rate (the target, with a fresh optimiser)", number(above=0, high=10)
    )
    batch_size: int = setting(128, "rows per step; 0 = full batch (every training row each step)", integer(0))
    pretrain_steps: int = setting(250, '0 is the report\'s "no pretraining" ablation', integer(0))
    finetune_steps: int = setting(
        400, 'steps on the target after pretraining (the report\'s "no fine-tuning" ablation skips them)', integer(1)
    )
    l2_judge: float = setting(2e-3, "L2 penalty of the per-judge offsets", number(0))
    weight_decay: float = setting(0.0, "AdamW weight decay", number(0))
    ensemble: int = setting(
        16,
        "seed ensemble members; 16 make the pooled Pearson/RMSE the same to +-0.002 "
        "whatever the seed (search keeps its trials cheap with 1-5)",
        integer(1, 1024),
    )
    val_fraction: float = setting(
        0.1,
        "validation share for early stopping, grouped by conversation (each member its own split)",
        number(above=0, high=0.5),
    )
    eval_every: int = setting(10, "steps between validations", integer(1))
    patience: int = setting(
        12, "evaluations without improvement before a model stops (each model on its own)", integer(1)
    )
    train_fraction: float = setting(
        1.0, "share of the training conversations used; the report's learning curve sets it", number(above=0, high=1)
    )
    pool: str = setting(
        "geometric",
        "how the members' distributions are combined: geometric (normalised "
        "geometric mean) | arithmetic (plain averaging, as models saved without it)",
        choice("geometric", "arithmetic"),
    )
    recalibrate: str = setting(
        "vector",
        "the target's recalibration (calibration/model/recalibrate.py): vector "
        "scaling fitted on the rows members validated on | none",
        choice("vector", "none"),
    )
    recalibrate_prior: float = setting(1.0, "penalty of the recalibration's distance from the identity", number(0))
    recalibrate_min_members: int = setting(
        8, "smaller ensembles are not recalibrated: too few rows are out of bag (1 - 0.9^E of them)", integer(1)
    )
    # network, continued (added after the training settings; the order is model.json's)
    base: str = setting(
        "linear",
        "the fixed simple model the network adds its residual to: linear (cv's `linear` "
        "baseline, fitted first; the network learns only what validation supports) | none (the "
        "LLM-Rubric paper's network: network.base=none train.lr=0.03 train.finetune_lr=0.0015)",
        choice(*BASES),
    )
    base_l2: float = setting(3e-4, "L2 penalty of the base's weights and judge offsets, per mean NLL", number(0))

    @classmethod
    def from_groups(cls, network: Mapping[str, Any] | None = None, train: Mapping[str, Any] | None = None) -> Settings:
        """The `network` and `train` config groups' values merged (unknown keys are an error, not ignored)."""
        merged = {**dict(network or {}), **dict(train or {})}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(merged) - names)
        if unknown:
            from rubric.errors import InputError

            raise InputError(f"unknown setting(s) {unknown}.", fix=f"use network.*/train.* keys among {sorted(names)}.")
        merged["drop_questions"] = tuple(merged.get("drop_questions") or ())
        return cls(**merged).checked()

    def checked(self) -> Settings:
        """Self, after checking every setting's type and range (the field's rule)."""
        values = self.to_dict()
        for f in settings_of(Settings):
            group = "network" if f.name in NETWORK_KEYS else "train"
            check_values(Settings, {f.name: values[f.name]}, prefix=f"{group}.")
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
    import torch  # here, so that the settings (and --help) load without torch

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

            raise InputError(
                f"ROLE_RUBRIC_WORKERS={raw!r} is not a whole number.", fix="set it to 1, 2, ... or unset it."
            )
        from rubric.judge.parallel import available_cpus

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
