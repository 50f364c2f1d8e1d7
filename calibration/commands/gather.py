"""`role-rubric gather`: ask the LLM judge every rubric question about every turn -> llm.csv.

Its keys: calibration.schema.commands_data `Gather` (`role-rubric gather --help`);
the work: rubric.judge.gather `run_gather` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_data import Gather as Schema

__all__ = ["Schema", "run"]


def run(cfg: Schema) -> Any:
    """Run `gather` on its checked object (calibration.cli builds it and locks its outputs): the rubric from
    rubric_file= or the `rubric` group, then the judge (or scorer=NAME's reference scorer) on every turn."""
    from rubric.judge.gather import rubric_from_config, run_gather

    rubric = rubric_from_config(cfg.rubric, rubric_file=cfg.rubric_file, target=cfg.target)
    if cfg.scorer:  # a reference-based scorer instead of a judge (rubric/scorers/features.py)
        from rubric.scorers.features import run_scorer_gather

        return run_scorer_gather(cfg.conversations, rubric, cfg.scorer, out=cfg.out, cache=cfg.cache, limit=cfg.limit)
    return run_gather(
        cfg.conversations,
        rubric,
        cfg.judge,
        out=cfg.out,
        cache=cfg.cache,
        granularity=cfg.granularity,
        include_reason=cfg.include_reason,
        limit=cfg.limit,
        long_turn_tokens=cfg.long_turn_tokens,
        long_turns=cfg.long_turns,
        progress=cfg.progress,
        batch=_batch_settings(cfg),
        rubric_file=cfg.rubric_file,
    )


def _batch_settings(cfg: Schema) -> Any:
    """mode=batch's settings (rubric/judge/batch/lines.py), or None for an online gather (results= without
    mode=batch is refused by the schema's rule)."""
    if cfg.mode != "batch":
        return None
    from rubric.judge.batch.lines import BatchSettings

    return BatchSettings(
        submit=cfg.submit,
        results=cfg.results,
        max_requests=cfg.batch.max_requests,
        max_mb=cfg.batch.max_mb,
        poll_s=cfg.batch.poll_s,
        price_factor=cfg.batch.price_factor,
    )
