"""The CI gate of `estimate`: `fail_under=X` on the rate's lower bound and `fail_if_worse=true` on the
difference from the baseline, read from the fixed-n intervals or, with `sequential=true`, from the confidence
sequences that stay valid however often the gate is re-run (calibration/release/sequential.py)."""

from __future__ import annotations

from pathlib import Path

from calibration.release.inference import ppi_mean
from rubric.errors import InputError

__all__ = ["GateFailed", "gate", "gate_line", "sequential_looks"]


class GateFailed(InputError):
    """`fail_under=` or `fail_if_worse=` failed: the command line exits 1 with this line (the only exit 1)."""

    exit_code = 1
    label = "gate failed"


def sequential_looks(
    result: dict, out: Path, *, data: str | Path, model: str | Path, baseline: str | Path | None, alpha: float
) -> dict:
    """sequential=true: the rate's confidence sequence and, with a baseline, the difference's (both read
    the earlier looks in OUT/looks.jsonl); returns the looks file's identity for `record`. data, model,
    baseline: the paths the estimate read; alpha: its level."""
    from calibration.release.sequential import identity, sequential_difference, sequential_rate

    ident = identity(Path(data), Path(model), None if baseline is None else Path(baseline))
    result["sequential"] = sequential_rate(out, ident, result["rate"], alpha=alpha)
    if "difference" in result:
        release, base = result["rate"], result["baseline"]["rate"]
        process = ppi_mean(release["_sample"], alpha=alpha, population="process")
        fixed = ppi_mean(base["_sample"], alpha=alpha / 2, population="process")
        result["sequential"]["difference"] = sequential_difference(
            out, ident, process, release["n_labelled_conversations"], fixed, alpha=alpha
        )
    return ident


def gate(result: dict, *, fail_under: float | None, fail_if_worse: bool) -> list[str]:
    """The failed checks, one line each (empty: pass). fail_if_worse needs a result with a baseline (the
    schema's rule: calibration/schema/commands_release.py)."""
    failed = []
    rate = result.get("sequential") or result["rate"]["ppi"]  # sequential=true: the confidence sequence
    what = "confidence sequence, look " + str(rate["look"]) if "look" in rate else "ppi"
    if fail_under is not None and rate["low"] < fail_under:
        failed.append(
            f"the adherence rate's lower bound {rate['low']:.3f} is below fail_under={fail_under:g} "
            f"({what} {rate['estimate']:.3f} [{rate['low']:.3f}, {rate['high']:.3f}])"
        )
    if fail_if_worse:
        seq = result.get("sequential", {}).get("difference")
        diff = seq or result["difference"]["rate"]
        detail = "confidence sequence" if seq else f"p={diff['p']:.3g}"
        if diff["high"] < 0:
            failed.append(
                f"the release is worse than the baseline: the rate difference's upper bound "
                f"{diff['high']:+.3f} is below 0 ({diff['estimate']:+.3f}, {detail})"
            )
    return failed


def gate_line(result: dict) -> str:
    """A passed (or absent) gate's line for the terminal, with the bounds that decided it (result["gate"], set
    by the command); a failed gate's line is the command's error (GateFailed, exit status 1)."""
    settings = result["gate"]
    if settings["fail_under"] is None and not settings["fail_if_worse"]:
        return (
            "gate: none set (fail_under=X exits 1 when the rate's lower bound is below X; fail_if_worse=true, "
            "with baseline=, when the release is worse than the baseline)"
        )
    passed = []
    rate = result.get("sequential") or result["rate"]["ppi"]
    what = "confidence sequence, look " + str(rate["look"]) if "look" in rate else "ppi"
    if settings["fail_under"] is not None:
        passed.append(
            f"the adherence rate's lower bound {rate['low']:.3f} is at or above fail_under={settings['fail_under']:g} "
            f"({what} {rate['estimate']:.3f} [{rate['low']:.3f}, {rate['high']:.3f}])"
        )
    if settings["fail_if_worse"]:
        seq = result.get("sequential", {}).get("difference")
        diff = seq or result["difference"]["rate"]
        detail = "confidence sequence" if seq else f"p={diff['p']:.3g}"
        passed.append(
            f"the rate difference's upper bound {diff['high']:+.3f} is not below 0 "
            f"({diff['estimate']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}], {detail})"
        )
    return "gate: passed: " + "; ".join(passed)
