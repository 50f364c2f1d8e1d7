"""`role-rubric compare`: reference-based scorers and judges on one scale: AUC table -> compare.json/html.

Its keys: calibration.schema.commands_data `Compare` (`role-rubric compare --help`); the library it calls:
calibration.compare (`compare`, the tables, the page).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from calibration.schema.commands_data import Compare as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> dict[str, Any]:
    """CLI: `role-rubric compare conversations=FILE labels=FILE out=DIR [sizes=[...]] [methods=[...]]`.
    Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.compare.stage import compare

    out = cfg.out
    out.mkdir(parents=True, exist_ok=True)
    result = compare(
        cfg.conversations,
        cfg.labels,
        methods=list(cfg.methods),
        sizes=[int(n) for n in cfg.sizes],  # the schema takes any list: whole numbers here
        params=cfg.params or {},
        extra=cfg.extra or {},
        extra_options={"target": cfg.target}
        | ({"adheres_at": cfg.adheres_at} if cfg.adheres_at is not None else {})
        | ({"method": cfg.extra_method} if cfg.extra_method else {}),
        n_boot=cfg.n_boot,
        seed=cfg.seed,
        cache=cfg.cache,
    )
    _write(result, out)
    _log_tables(result)
    for name in ("compare.json", "compare.html", "scores.csv"):
        log.info(f"compare: wrote {out / name}")
    return result


def _write(result: dict[str, Any], out: Path) -> None:
    """OUT/scores.csv (the per-turn scores, popped from `result`), compare.json and compare.html."""
    from calibration.compare.page import write_page
    from rubric.files import atomic_to_csv
    from rubric.jsonfile import write_json

    scores = result.pop("_scores")
    atomic_to_csv(scores, out / "scores.csv")
    write_json(out / "compare.json", result, indent=1, newline=True, digits=6)
    write_page(result, out)


def _log_tables(result: dict[str, Any]) -> None:
    """The unified table, the AUC per violation type at the largest size, the unavailable methods, the totals."""
    import pandas as pd

    from calibration.compare.tables import per_type_table, unified_table

    table = pd.DataFrame(result["results"])
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        log.info(unified_table(table).to_string(index=False))
        log.info("\nAUC per violation type (adherent turns against that type alone), largest size:")
        log.info(per_type_table(table).round(3).to_string(index=False))
    for name, why in result["unavailable"].items():
        log.info(f"compare: {name}: unavailable ({why})")
    log.info(f"compare: {result['data']['labelled']} turns, {result['timing_s']['total']:.1f} s")
