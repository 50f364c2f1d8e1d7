"""`role-rubric estimate`: a release's adherence rate with valid intervals, a comparison and a CI gate.

Its keys: calibration.schema.commands_release `Estimate` (`role-rubric estimate --help`); the library:
calibration.release.estimate `estimate_release` (the estimate), calibration.release.gate (the gate and the
looks of sequential=true), calibration.release.table (the printed table).
"""

from __future__ import annotations

import logging
from pathlib import Path

from calibration.schema.commands_release import Estimate as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Path:
    """CLI: `role-rubric estimate data=DIR model=MODEL_DIR out=OUT [alpha=0.1] [baseline=DIR2] [fail_under=X]
    [fail_if_worse=true]`: estimate.json's path; a failed gate raises GateFailed (exit status 1) once
    everything is written. Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.release.gate import GateFailed, gate, sequential_looks
    from rubric.files import out_lock

    with out_lock(cfg.out) as out:
        result = _estimate(cfg, Path(out))
        ident = (
            sequential_looks(result, out, data=cfg.data, model=cfg.model, baseline=cfg.baseline, alpha=cfg.alpha)
            if cfg.sequential
            else None
        )
        failed = gate(result, fail_under=cfg.fail_under, fail_if_worse=cfg.fail_if_worse)
        result["gate"] = {
            "fail_under": cfg.fail_under,
            "fail_if_worse": cfg.fail_if_worse,
            "passed": not failed,
            "failed": failed,
        }
        path = _write(result, out, ident, verbose=cfg.verbose)
    log.info(f"estimate: wrote {path}")
    if failed:
        raise GateFailed("; ".join(failed) + ".", fix="")
    return path


def _estimate(cfg: Schema, out: Path) -> dict:
    """The estimate (calibration/release/estimate.py) with the command's keys; crossfit=K writes the adapted
    model into OUT/adapted_model."""
    from calibration.release.estimate import estimate_release

    return estimate_release(
        cfg.data,
        cfg.model,
        alpha=cfg.alpha,
        adheres_at=cfg.adheres_at,
        baseline=cfg.baseline,
        plan=cfg.plan,
        population=cfg.population,
        allow_judge_mismatch=cfg.allow_judge_mismatch,
        bias_margin=cfg.bias_margin,
        on_shift=cfg.on_shift,
        width=cfg.width,
        crossfit=cfg.crossfit,
        adapted_out=out / "adapted_model",
    )


def _write(result: dict, out: Path, ident: dict | None, *, verbose: bool) -> Path:
    """The table, the audit, the width plan and the gate on the terminal (calibration/release/table.py);
    estimate.json; with sequential=true, this look appended to OUT/looks.jsonl."""
    from calibration.release.estimate import strip_private
    from calibration.release.table import terminal_lines
    from rubric.jsonfile import write_json

    for line in terminal_lines(result, verbose=verbose):
        log.info(line)
    path = out / "estimate.json"
    write_json(path, strip_private(result))
    if ident is not None:
        from calibration.release.sequential import LOOKS_FILE, record

        record(out, ident, result["sequential"])
        seq = result["sequential"]
        log.info(
            f"estimate: look {seq['look']} ({seq['n_labelled_conversations']} labelled conversations): rate "
            f"{seq['estimate']:.3f}, confidence sequence [{seq['low']:.3f}, {seq['high']:.3f}] (valid at every "
            f"look; recorded in {out / LOOKS_FILE})"
        )
    return path
