"""`role-rubric compare-judges`: several judges of the same labelled turns, calibrated on shared folds, compared
question by question -> compare-judges.json/html, disagreements.csv, reviewer_disagreements.csv.

Its keys: calibration.schema.commands_judges `CompareJudges` (`role-rubric compare-judges --help`); the library
it calls: calibration.judges (`compare_judges`, the page).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from calibration.schema.commands_judges import CompareJudges as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

FILES = ("compare-judges.json", "compare-judges.html", "disagreements.csv", "reviewer_disagreements.csv")


def run(cfg: Schema) -> dict[str, Any]:
    """CLI: `role-rubric compare-judges data=[DIR_A,DIR_B] out=DIR [model=network|linear|ordinal] [width=W]`.
    Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.data.union import data_paths
    from calibration.judges import compare_judges
    from rubric.files import out_lock

    with out_lock(cfg.out) as out:
        result = compare_judges(
            data_paths(cfg.data),
            names=cfg.names,
            questions=cfg.questions,
            model=cfg.model,
            settings=cfg.settings,
            folds=cfg.folds,
            fold_seed=cfg.fold_seed,
            repeats=cfg.repeats,
            seed=cfg.seed,
            n_boot=cfg.n_boot,
            epsilon=cfg.epsilon,
            width=cfg.width,
            release=cfg.release,
            combine=cfg.combine_judges,
            agreement_width=cfg.agreement_width,
            unmatched_labels=cfg.unmatched_labels,
        )
        _write(result, Path(out))
    _log_table(result)
    for block in result["questions"].values():
        log.info(f"compare-judges: {block['recommendation']['line']}")
    log.info(f"compare-judges: {result['overall']['whole_judge']['line']}")
    if "combination" in result["overall"]:
        log.info(f"compare-judges: {result['overall']['combination']}")
    log.info(f"compare-judges: {result['winners_curse']}")
    if "second_reviewer" in result:
        log.info(f"compare-judges: {_plan_line(result['second_reviewer'])}")
    written = [*FILES, "second_reviewer.csv"] if "second_reviewer" in result else FILES
    log.info(f"compare-judges: wrote {', '.join(str(Path(out) / name) for name in written)}")
    return result


def _write(result: dict[str, Any], out: Path) -> None:
    """The two disagreement lists (popped from `result`), compare-judges.json and compare-judges.html."""
    from calibration.judges.page import write_page
    from rubric.files import atomic_to_csv
    from rubric.jsonfile import write_json

    disagreements = result.pop("_disagreements")
    atomic_to_csv(disagreements, out / "disagreements.csv")
    atomic_to_csv(result.pop("_reviewer_disagreements"), out / "reviewer_disagreements.csv")
    second = result.pop("_second_reviewer", None)
    if second is not None:
        atomic_to_csv(second, out / "second_reviewer.csv")
    write_json(out / "compare-judges.json", result, indent=1, newline=True, digits=6)
    write_page(result, out, disagreements, second)


def _plan_line(plan: dict[str, Any]) -> str:
    """The second-reviewer plan in one line: how many turns, and per question the width now and projected."""
    parts = []
    for qid, q in plan["questions"].items():
        now = "-" if q["width_now"] is None else f"{q['width_now']:.2f}"
        then = "after a pilot" if q["projected_width"] is None else f"{q['projected_width']:.2f}"
        parts.append(f"{qid} {now} -> {then}" + (f" (short by {q['short_by']})" if q["short_by"] else ""))
    return (
        f"second reviewer: {plan['turns']} turn(s) ranked in second_reviewer.csv for a reviewers' alpha interval "
        f"{plan['agreement_width']:g} wide; width now -> projected: " + "; ".join(parts)
    )


def _log_table(result: dict[str, Any]) -> None:
    """Per question: the reviewers' kappa with each other beside each calibrated judge's RMSE and kappa."""
    import pandas as pd

    rows = []
    for qid, block in result["questions"].items():
        rev = block["reviewers_kappa"]
        row = {"question": qid, "reviewers kappa": "-" if rev is None else f"{rev['kappa']:.3f}"}
        for name, j in block["judges"].items():
            row[f"{name} rmse"] = f"{j['rmse']:.3f}"
            row[f"{name} kappa"] = "-" if j["kappa"] is None else f"{j['kappa']:.3f}"
        rows.append(row)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        log.info(pd.DataFrame(rows).to_string(index=False))
