"""`role-rubric score`: score a conversations file per conversation -> CSV.

Its keys: calibration.schema.commands_release `Score` (`role-rubric score --help`); the library it calls:
calibration.api `RoleAdherence` (the measurement), calibration.api.frames (the frames and the table).
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from calibration.schema.commands_release import Score as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Any:
    """CLI: `role-rubric score conversations=FILE [calibrator=DIR] [judge=embedding] out=FILE.csv`: the
    per-conversation frame. Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.api.frames import results_frames
    from rubric.conversations import load_conversations
    from rubric.errors import InputError

    conversations = load_conversations(cfg.conversations)
    out = cfg.out
    metric, cache = _metric(cfg, out)
    results = metric.measure_many(conversations, progress=cfg.progress)
    conv_frame, turn_frame = results_frames(results, conversations)
    turns_out, shift_out = _write(cfg, out, metric, conv_frame, turn_frame, conversations)
    _log_summary(cfg, metric, conv_frame)
    log.info(
        f"score: wrote {out} (per conversation) and {turns_out} (per turn)"
        + (f", {shift_out} (shift check)" if shift_out else "")
        + f"; cache {cache}"
    )
    if math.isnan(conv_frame["score"].mean()):
        raise InputError("no scores were produced.", fix="check the conversations file.")
    return conv_frame


def _metric(cfg: Schema, out: Path) -> tuple[Any, Any]:
    """(the `RoleAdherence` the keys describe, its cache path): the cache defaults to OUT.cache.sqlite."""
    from calibration.api import RoleAdherence
    from rubric.ids import clean_id_list

    judges = cfg.judges
    if judges is not None and not isinstance(judges, str):
        judges = clean_id_list(judges)
    rubric = None
    if cfg.calibrator is None:
        from rubric.judge.gather import rubric_from_config

        rubric = rubric_from_config(cfg.rubric, rubric_file=cfg.rubric_file, target=cfg.target, command="score")
    cache = cfg.cache or gathered_cache(cfg.calibrator) or out.with_suffix(".cache.sqlite")
    metric = RoleAdherence(
        calibrator=cfg.calibrator,
        judge=cfg.judge,
        threshold=cfg.threshold,
        strict_mode=cfg.strict_mode,
        output_mode=cfg.output_mode,
        granularity=cfg.granularity,
        judges=judges,
        include_reason=cfg.include_reason,
        rubric=rubric,
        adheres_at=cfg.adheres_at,
        cache=cache,
        allow_judge_mismatch=cfg.allow_judge_mismatch,
        on_shift=cfg.on_shift,
    )
    metric.command = "score"  # the shift check's warning prints as "score: warning: ..."
    return metric, cache


def gathered_cache(calibrator: str | None) -> Path | None:
    """The request cache of the gathered folder the calibrator was trained on (its model.json `trained_on`),
    where there is one: `score` after `gather` then asks the judge nothing it was already asked (the cache's
    key is the request itself, so another judge or prompt simply misses). None: no calibrator, or no such cache."""
    if calibrator is None:
        return None
    model_json = Path(calibrator) / "model.json"
    try:
        trained_on = json.loads(model_json.read_text(encoding="utf-8")).get("trained_on") or []
    except (OSError, ValueError, AttributeError):
        return None  # the calibrator's own loading says what is wrong with it
    for source in trained_on:
        data = source.get("data") if isinstance(source, dict) else None
        cache = Path(str(data)) / "cache.sqlite" if data else None
        if cache is not None and cache.is_file() and os.access(cache, os.W_OK):
            log.info(f"score: reusing the judge's answers gather cached in {cache} (cache= names another)")
            return cache
    return None


def _write(
    cfg: Schema, out: Path, metric: Any, conv_frame: Any, turn_frame: Any, conversations: Any
) -> tuple[Path, Path | None]:
    """Write the per-conversation CSV (out=), the per-turn CSV (turns_out=, else OUT_turns.csv) and, when
    calibrated, the shift check (OUT_shift.json): (the per-turn path, the shift path or None)."""
    from rubric.files import atomic_to_csv
    from rubric.jsonfile import write_json

    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_to_csv(conv_frame, out)
    turns_out = cfg.turns_out or out.with_name(out.stem + "_turns.csv")
    atomic_to_csv(turn_frame, turns_out)
    shift_out = None
    if metric.shift is not None:  # calibrated: the shift check's block (calibration/model/shift.py)
        shift_out = out.with_name(out.stem + "_shift.json")
        write_json(shift_out, {"shift": metric.shift, "scored_with": _scored_with(cfg, metric, conversations)})
    return turns_out, shift_out


def _scored_with(cfg: Schema, metric: Any, conversations: Any) -> dict[str, Any]:
    """What the scores were made with, so that `publish` names their source and refuses another model's (and
    conversations whose text changed since)."""
    from calibration.publish.results import model_info
    from rubric.conversations import content_sha256

    assert cfg.calibrator is not None  # the shift check, which this record is written with, needs a calibrator
    return {
        "model": str(Path(cfg.calibrator).resolve()),
        "model_sha256": model_info(cfg.calibrator).checksum,
        "conversations": str(cfg.conversations.resolve()),
        "conversations_sha256": content_sha256(conversations),
        "threshold": metric.threshold,
        "adheres_at": metric.adheres_at,
        "target": metric.rubric.target,
    }


def _log_summary(cfg: Schema, metric: Any, conv_frame: Any) -> None:
    """The table (its first show= rows), the mean score and pass count, and the notes about the judges."""
    from calibration.api.frames import format_results
    from rubric.judge.identity import stand_in_note

    log.info(format_results(conv_frame, limit=cfg.show))
    mean = conv_frame["score"].mean()
    log.info(
        f"score: {len(conv_frame)} conversations, mean score {mean:.3f}, "
        f"{int(conv_frame['success'].sum())} pass at threshold {metric.threshold:g}"
        f"{' (strict)' if metric.strict_mode else ''}; "
        + ("calibrated to " + metric.judges_label if metric.model is not None else "raw judge (no calibrator)")
        + f"; adherence = P({metric.rubric.target} >= {metric.adheres_at:g})"
    )
    note = stand_in_note(metric.judge.model)
    if note:
        log.info(f"score: note: {note}.")
    if metric.unseen_judges:
        log.info(f"score: judge(s) not seen in training, predicted by the population model: {metric.unseen_judges}")
