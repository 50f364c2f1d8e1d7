"""`role-rubric search`: Optuna search of hyperparameters by inner cross-validation -> best.yaml.

Its keys: calibration.schema.commands_train `Search` (`role-rubric search --help`); the library it calls:
calibration.evaluation.search (`search`, the recommendation, the storage as shown).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from calibration.schema.commands_train import Search as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Any:
    """CLI: `role-rubric search data=DIR [out=DIR] [search.trials=100] [search.storage=URL]`: the Optuna
    study. Imports inside, so that `role-rubric --help` loads no stage."""
    import time

    from calibration.data.union import training_data_of
    from calibration.evaluation.search import search
    from rubric.files import out_lock

    ds = training_data_of(cfg).ds
    out = cfg.out
    with out_lock(out):
        storage = cfg.search.storage or f"sqlite:///{(out / 'search.db').resolve()}"
        # a storage of the user's may be shared with other searches: heartbeats tell killed trials apart
        heartbeat = cfg.search.heartbeat if cfg.search.storage else None
        start = time.perf_counter()
        study = search(
            ds,
            cfg.settings,
            cfg.search.space,
            trials=cfg.search.trials,
            folds=cfg.search.inner_folds,
            seed=cfg.seed,
            storage=storage,
            study_name=cfg.search.study,
            timeout=cfg.search.timeout,
            workers=cfg.search.workers,
            progress=True,
            resume=cfg.search.resume,
            heartbeat=heartbeat,
        )
        summary = _write(cfg, out, study, storage, start)
    _log_summary(study, summary, out, storage)
    return study


def _write(cfg: Schema, out: Path, study: Any, storage: str, start: float) -> dict:
    """OUT/best.yaml (the recommended overrides, none when no trial beat the current settings) and
    OUT/search.json (the summary, the storage shown without its password; seconds since `start`): the summary."""
    import json
    import time

    import yaml

    from calibration.evaluation.search import (
        beats_defaults,
        best_overrides,
        finished_trials,
        recommended_nll,
        shown_storage,
    )
    from rubric.files import atomic_write_text

    best = best_overrides(study)
    atomic_write_text(out / "best.yaml", yaml.safe_dump(best, sort_keys=False))
    summary = {
        "best_nll": recommended_nll(study),
        "best_trial_nll": study.best_value,
        "defaults_nll": study.user_attrs["defaults_nll"],
        "kept_defaults": not beats_defaults(study),
        "best": best,
        "finished_trials": finished_trials(study),
        "seconds": time.perf_counter() - start,
        "storage": shown_storage(storage),
        "study": cfg.search.study,
    }
    atomic_write_text(out / "search.json", json.dumps(summary, indent=2))
    return summary


def _log_summary(study: Any, summary: dict, out: Path, storage: str) -> None:
    """The trials, the held-out NLL of the best trial and of the current settings, and the overrides."""
    from calibration.evaluation.search import finished_trials, shown_storage

    flat = " ".join(f"{g}.{k}={v}" for g, kv in summary["best"].items() for k, v in kv.items())
    log.info(
        f"search: {finished_trials(study)} trials in {summary['seconds']:.0f}s; held-out NLL of the best trial "
        f"{study.best_value:.4f}, of the current settings as they are {summary['defaults_nll']:.4f}"
    )
    if summary["kept_defaults"]:
        log.info("search: no trial beat the current settings: best.yaml keeps them (no overrides)")
    else:
        log.info(f"search: best overrides: {flat}")
    log.info(f"search: wrote {out / 'best.yaml'}, {out / 'search.json'}; study in {shown_storage(storage)}")
