"""The judge canary: the same frozen transcripts read by the judge as it was and as it is now, compared pairwise.

A moving calibrated rate has two causes a rate cannot tell apart: the chatbot changed, or the judge did (a new
model version behind the same name, an edited prompt, another endpoint). The canary separates them. It is a
fixed set of conversations (a folder gathered once, `monitor canary=DIR`, e.g. labelled training conversations)
whose calibrated rates are kept in the monitor's state; when the judge may have changed, the same conversations
are gathered again with the judge as it is now and each conversation's new rate is compared with its old one.
The chatbot cannot have changed them: a difference is the judge's.

The test: a paired sign-flip permutation test of the mean difference (exact under "the judge's answers on each
transcript are as likely to have moved up as down", which holds when nothing changed), two-sided, at the
canary's share of alpha (calibration/monitor/alarms.py). Doctest:

>>> import numpy as np
>>> before = np.random.default_rng(0).uniform(0.4, 0.9, 40)
>>> canary_test(before, before - 0.05, level=0.01, seed=0)["changed"]
True
>>> canary_test(before, before, level=0.01, seed=0)["changed"]
False
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["canary_test"]

DRAWS = 19_999


def canary_test(before: ArrayLike, after: ArrayLike, *, level: float, seed: int = 0) -> dict:
    """Did the judge's calibrated rates on the same conversations move? before, after: (n,) each canary
    conversation's calibrated rate under the recorded judge and under the current one, in the same order.
    Returns n, the mean difference (after - before), its p-value (two-sided), the level and `changed`."""
    before, after = np.asarray(before, float), np.asarray(after, float)
    if before.shape != after.shape or before.ndim != 1:
        raise ValueError("before and after must be 1-D and pair the same conversations")
    d = after - before
    n = len(d)
    observed = abs(d.mean()) if n else 0.0
    if n < 2 or not np.any(d):
        p = 1.0
    else:
        draws = max(DRAWS, math.ceil(20 / level))
        signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(draws, n))
        exceed = int(np.sum(np.abs(signs @ d) / n >= observed - 1e-12))
        p = (1 + exceed) / (draws + 1)
    return {
        "n": n,
        "mean_difference": float(d.mean()) if n else 0.0,
        "p_value": float(p),
        "level": float(level),
        "changed": bool(p < level),
    }
