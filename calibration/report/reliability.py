"""Reliability diagrams of a predicted answer distribution, with relplot's smooth ECE (smECE).

relplot handles binary outcomes only, so a question with K options gives K one-vs-rest diagrams
("answer = v": predicted P(answer = v) against whether the human answered v) plus one for "adheres":
P(answer >= threshold) against whether the human answer reached the threshold.

`prepare_reliability` computes (arrays and numbers, no drawing); `plot_reliability` draws.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import relplot
from matplotlib.figure import Figure

from calibration.evaluation.significance import bootstrap_counts
from rubric.progress import progress_iter


@contextmanager
def _global_numpy_seed(seed: int) -> Iterator[None]:
    """Seed numpy's global RNG for the duration of the block, then restore the caller's state.

    relplot's confidence band is a scikit-learn BaggingRegressor built with random_state=None, which draws
    from numpy's global RandomState; it takes no seed argument. Seeding the global state here makes the
    band repeatable, and restoring it keeps this function free of side effects on the caller's randomness.
    """
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _validate(probs: np.ndarray, labels: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    probs = np.asarray(probs, dtype=float)
    labels = np.asarray(labels, dtype=float)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if probs.ndim != 2 or probs.shape[1] != len(values):
        raise ValueError(f"probs must have shape (n, {len(values)}) (one column per option value), got {probs.shape}.")
    if labels.ndim != 1 or len(labels) != len(probs):
        raise ValueError(f"labels must be 1-D with {len(probs)} rows (one per row of probs), got shape {labels.shape}.")
    if len(labels) == 0:
        raise ValueError("no rows: probs and labels are empty.")
    if not np.all(np.isfinite(probs)) or probs.min() < 0 or probs.max() > 1:
        raise ValueError("probs has values outside [0, 1] or NaN.")
    worst = np.abs(probs.sum(axis=1) - 1).max()
    if worst > 1e-3:
        raise ValueError(f"probs rows must sum to 1 (worst row is off by {worst:.3g}); pass full distributions.")
    unknown = sorted(set(labels.tolist()) - set(values.tolist()))
    if unknown:
        raise ValueError(f"labels contain {unknown[:5]}, which are not option values {values.tolist()}.")
    return probs, labels


def _smece_interval(f: np.ndarray, y: np.ndarray, counts: np.ndarray, level: float) -> tuple[float, float]:
    """Interval for smECE from bootstrap resamples given as row counts (B, n), built as relplot builds its own.

    Resampling duplicates rows, which biases a calibration error upwards (the resamples of a calibrated
    model look miscalibrated), so a plain percentile interval can miss the estimate altogether. relplot
    takes the basic (reverse-percentile) interval, which corrects that bias, and reports the estimate
    +- the larger of its two half-widths; we do the same, with resamples of whole groups, clipped at 0.
    """
    estimate = relplot.smECE(f, y)
    replicates = []
    for row_counts in counts.astype(int):
        rows = np.repeat(np.arange(len(f)), row_counts)
        replicates.append(relplot.smECE(f[rows], y[rows]))
    tail = (1 - level) / 2 * 100
    q_low, q_high = np.percentile(replicates, [tail, 100 - tail])
    basic_low, basic_high = 2 * estimate - q_high, 2 * estimate - q_low
    half_width = max(estimate - basic_low, basic_high - estimate)
    return float(max(estimate - half_width, 0.0)), float(estimate + half_width)


def prepare_reliability(
    probs: np.ndarray,
    labels: np.ndarray,
    *,
    values: Sequence[float] | np.ndarray,
    threshold: float | None = None,
    groups: Sequence | np.ndarray | None = None,
    seed: int = 0,
    n_boot: int = 100,
    band_bootstrap: int = 100,
    level: float = 0.95,
    progress: bool = False,
) -> dict[str, Any]:
    """One-vs-rest reliability diagrams and smECE with a bootstrap interval, for every option and "adheres".

    Args:
        probs: (n, K) predicted probability of each option, columns in the order of `values`.
        labels: (n,) the observed (human) answer values.
        values: (K,) the options' numeric values.
        threshold: "adheres" means answer >= threshold; None leaves that diagram out.
        groups: (n,) group of each row (e.g. conversation id) for the smECE interval; whole groups are
            resampled. None resamples rows.
        seed: seeds both relplot's confidence band and the smECE interval, so reruns match exactly.
        n_boot: resamples for the smECE interval.
        band_bootstrap: relplot's bootstrap regressions for the confidence band of the curve.
        level: coverage of the smECE interval (relplot's band is always 95%).
        progress: a progress bar over the panels (on a terminal only).

    Returns:
        {"curves": [{"name", "kind" ("value" | "adheres"), "value", "n", "positives", "smece", "low",
        "high", "diagram" (relplot.prepare_rel_diagram's dict)}], "level", "seed"}.

    >>> probs = np.tile([0.1, 0.2, 0.3, 0.4], (400, 1))
    >>> labels = np.repeat([1, 2, 3, 4], 100)
    >>> data = prepare_reliability(probs, labels, values=[1, 2, 3, 4], threshold=3, n_boot=5, band_bootstrap=5)
    >>> [(c["name"], round(c["smece"], 3)) for c in data["curves"]]
    [('answer = 1', 0.15), ('answer = 2', 0.05), ('answer = 3', 0.05), ('answer = 4', 0.15), ('answer >= 3', 0.2)]
    """
    values_arr = np.asarray(values, dtype=float)
    probs, labels = _validate(probs, labels, values_arr)
    outcomes = [(f"answer = {v:g}", "value", float(v), probs[:, k], labels == v) for k, v in enumerate(values_arr)]
    if threshold is not None:
        above = values_arr >= threshold
        outcomes.append(
            (
                f"answer >= {threshold:g}",
                "adheres",
                float(threshold),
                probs[:, above].sum(axis=1),
                labels >= threshold,
            )
        )
    counts = bootstrap_counts(groups, len(labels), rng=np.random.default_rng(seed), n_boot=n_boot)
    curves = []
    panels = progress_iter(outcomes, progress, desc="report: reliability", unit="panel")
    for name, kind, value, f, y in panels:
        f = np.clip(f, 0.0, 1.0)
        y = y.astype(float)
        with _global_numpy_seed(seed):
            diagram = relplot.prepare_rel_diagram(f, y, num_bootstrap=band_bootstrap, report_CE_std=False)
        low, high = _smece_interval(f, y, counts, level)
        curves.append(
            {
                "name": name,
                "kind": kind,
                "value": value,
                "n": len(y),
                "positives": int(y.sum()),
                "smece": float(diagram["ce"]),
                "low": low,
                "high": high,
                "diagram": diagram,
            }
        )
    return {"curves": curves, "level": level, "seed": seed}


def plot_reliability(data: dict[str, Any], ax: Any = None) -> tuple[Figure, Any]:
    """Draw the diagrams of `prepare_reliability`, one panel per curve.

    Args:
        data: the dict returned by `prepare_reliability`.
        ax: None (a new figure with one row of panels), or a sequence of Axes, one per curve
            (a single Axes when there is one curve).

    Returns:
        (figure, axes): an array of Axes, or the single Axes passed in.
    """
    curves = data["curves"]
    if ax is None:
        fig, axes = plt.subplots(1, len(curves), figsize=(3.3 * len(curves), 3.9), squeeze=False)
        axes = axes[0]
    else:
        axes = np.atleast_1d(np.asarray(ax, dtype=object))
        if len(axes) != len(curves):
            raise ValueError(f"got {len(axes)} axes for {len(curves)} curves; pass one Axes per curve.")
        fig = axes[0].figure
    for panel, curve in zip(axes, curves, strict=True):
        # The smECE goes in the title with its interval, so drop relplot's own in-plot label.
        diagram = {k: v for k, v in curve["diagram"].items() if k not in ("ce", "ce_ci_width")}
        relplot.plot_rel_diagram(diagram, fig=fig, ax=panel, use_default_style=False, plot_density=True)
        few = int(curve["positives"]) < 10  # an smECE on a handful of positives says little
        panel.set_title(
            f"{curve['name']} (n={curve['n']}, {curve['positives']} yes)\n"
            + ("too few positives to judge: " if few else "")
            + f"smECE {curve['smece']:.3f} [{curve['low']:.3f}, {curve['high']:.3f}]",
            fontsize=9,
            color="#b00020" if few else "black",
        )
        panel.set_xlabel("predicted probability", fontsize=8)
        panel.set_ylabel("observed frequency", fontsize=8)
        panel.tick_params(labelsize=7)
    fig.tight_layout()
    return fig, (ax if ax is not None and np.ndim(ax) == 0 else axes)
