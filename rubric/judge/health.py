"""Is a gather's output something a calibrator can learn from? The share of flagged fallbacks and the
distribution of coverage (the mass the judge put on the options before renormalising).

A judge that rarely names an option still yields distributions that sum to 1 and look confident: a
model whose median coverage is 0.003 answered something else 99.7% of the time, and its renormalised
leftovers are noise. So `role-rubric gather` fails on such output unless `judge.allow_low_coverage=true`,
and `train` / `cv` warn when they are given it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubric.errors import InputError

log = logging.getLogger(__name__)  # warnings about the run (stderr); calibration/cli.py prints them (rubric/notices.py)

MIN_MEDIAN_COVERAGE = 0.5
MAX_FALLBACK_SHARE = 0.05
QUANTILES = {"p10": 0.10, "p25": 0.25, "median": 0.50, "p75": 0.75, "p90": 0.90}


@dataclass(frozen=True)
class Health:
    """Fallback share and coverage quantiles over the (item, question) pairs of a gather."""

    pairs: int
    """Pairs with a distribution (fallbacks included)."""
    fallback_share: float
    """Share of pairs whose answer never named an option (source=fallback)."""
    coverage: dict[str, float]
    """Coverage quantiles (p10, p25, median, p75, p90) over the pairs, fallbacks counting 0."""

    @property
    def problems(self) -> list[str]:
        """What is wrong, in words; empty when the output is usable (or there is none)."""
        out = []
        if self.pairs and self.coverage["median"] < MIN_MEDIAN_COVERAGE:
            out.append(
                f"median coverage {self.coverage['median']:.3g} < {MIN_MEDIAN_COVERAGE} (the judge's answers "
                "mostly named no option; the distributions are renormalised leftovers)"
            )
        if self.pairs and self.fallback_share > MAX_FALLBACK_SHARE:
            out.append(f"{self.fallback_share:.1%} fallbacks > {MAX_FALLBACK_SHARE:.0%}")
        return out

    def describe(self) -> str:
        q = ", ".join(f"{k} {v:.3g}" for k, v in self.coverage.items())
        return f"fallbacks {self.fallback_share:.1%}; coverage {q}" if self.pairs else "no pairs"

    def warning(self) -> str | None:
        """One line for the user, or None."""
        if not self.problems:
            return None
        return f"WARNING: unreliable judge output: {'; '.join(self.problems)}."


def health_of(coverage: Sequence[float], sources: Sequence[str]) -> Health:
    """Health of one gather from each pair's coverage and source.

    >>> h = health_of([0.9, 0.8, 0.0, 0.95], ["logprobs", "logprobs", "fallback", "logprobs"])
    >>> h.fallback_share, h.coverage["median"], h.problems[0].startswith("25.0% fallbacks")
    (0.25, 0.85, True)
    """
    if len(coverage) != len(sources):
        raise ValueError("coverage and sources must have one entry per pair.")
    cov = np.asarray(coverage, dtype=float)
    if not len(cov):
        return Health(0, 0.0, {k: float("nan") for k in QUANTILES})
    fallbacks = sum(s == "fallback" for s in sources)
    quantiles = {k: round(float(np.quantile(cov, q)), 6) for k, q in QUANTILES.items()}
    return Health(len(cov), fallbacks / len(cov), quantiles)


def health_of_llm(llm: pd.DataFrame) -> Health | None:
    """Health of an llm.csv frame (one row per option); None when it records neither coverage nor source."""
    if "coverage" not in llm.columns and "source" not in llm.columns:
        return None
    keys = [c for c in ("conversation_id", "turn", "question_id") if c in llm.columns]
    pairs = llm.drop_duplicates(keys)
    coverage = (
        pd.to_numeric(pairs["coverage"], errors="coerce")  # text where read with dtype=str; "" = not recorded
        if "coverage" in pairs
        else pd.Series(1.0, index=pairs.index)
    )
    sources = pairs["source"].astype(str) if "source" in pairs else pd.Series("", index=pairs.index)
    return health_of(coverage.fillna(1.0).tolist(), sources.tolist())


class LowCoverage(InputError):
    """The gather finished and wrote its output, but the judge mostly named no option; the command line
    exits 4 with this as its last line (judge.allow_low_coverage=true accepts such output)."""

    exit_code = 4


def check_gather(summary: Any, *, allow: bool, path: Path | None = None) -> None:
    """After `role-rubric gather`: print the warning of an unhealthy gather (summary.warning) and raise
    LowCoverage unless `allow`."""
    if summary.warning is None:
        return
    log.warning(f"gather: {summary.warning}")
    if not allow:
        raise LowCoverage(
            f"the judge's answers are unreliable ({summary.health().describe()}); llm.csv is written but a "
            "calibrator would learn noise from it.",
            path=path,
            fix="use a larger or instruction-tuned judge, check its prompt format (judge.backend, "
            "judge.system_role, the server's chat format), or set judge.allow_low_coverage=true to keep it.",
        )
