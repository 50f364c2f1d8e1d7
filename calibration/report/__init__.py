"""`role-rubric report`: everything a user needs to decide whether to trust a calibrator, with uncertainty.

`run_report(cfg)` (the CLI entry, report/build.py) cross-validates the calibrated model and its baselines, or
reuses a `role-rubric cv` folder, then writes out/report.html (self-contained), out/*.png and out/metrics.json.
Sections (LLM-Rubric paper in brackets), each a `prepare_*` (numbers, no drawing) and `plot_*(data, ax=None)
-> (fig, ax)` pair that notebooks use directly, all importable from here:
  reliability diagrams of the target (relplot smECE)                          report/reliability.py
  judges' answer distributions: observed, calibrated, raw LLM [Fig. 2]         report/tables.py
  metrics table: calibrated vs baselines, bootstrap CIs, perm. p [Table 1]     report/tables.py
  per-judge metrics                                                            report/tables.py
  ablations: no pretraining / fine-tuning / personalisation / question [Table 2]  report/variants.py
  every question as the target: expected-LLM vs calibrated [Table 3]           report/variants.py
  learning curve over the fraction of training judgments [Appendix J]         report/variants.py
The variants' cross-validations run on a process pool (report/pool.py), the page is built by report/page.py,
and the predictions frame is read by calibration/evaluation/cv_predictions.py (one row per item, judge,
method; p_<value> columns; expected; answer). Everything is seeded: a rerun writes identical numbers and
identical PNG bytes.
"""

from __future__ import annotations

from calibration.evaluation.cv_predictions import (
    KEYS,
    METHOD_LABELS,
    REFERENCE,
    method_arrays,
    method_rows,
    option_values,
    read_cv_folder,
)
from calibration.report.build import run_report
from calibration.report.page import PAGE
from calibration.report.pool import run_cvs
from calibration.report.reliability import plot_reliability, prepare_reliability
from calibration.report.tables import (
    COLORS,
    plot_distributions,
    plot_metrics_table,
    plot_per_judge,
    prepare_distributions,
    prepare_metrics_table,
    prepare_per_judge,
)
from calibration.report.variants import (
    ablation_variants,
    expected_llm_rows,
    plot_ablations,
    plot_learning_curve,
    plot_targets,
    prepare_ablations,
    prepare_learning_curve,
    prepare_targets,
)

__all__ = [
    "COLORS",
    "KEYS",
    "METHOD_LABELS",
    "PAGE",
    "REFERENCE",
    "ablation_variants",
    "expected_llm_rows",
    "method_arrays",
    "method_rows",
    "option_values",
    "plot_ablations",
    "plot_distributions",
    "plot_learning_curve",
    "plot_metrics_table",
    "plot_per_judge",
    "plot_reliability",
    "plot_targets",
    "prepare_ablations",
    "prepare_distributions",
    "prepare_learning_curve",
    "prepare_metrics_table",
    "prepare_per_judge",
    "prepare_reliability",
    "prepare_targets",
    "read_cv_folder",
    "run_cvs",
    "run_report",
]
