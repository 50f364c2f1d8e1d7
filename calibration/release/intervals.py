"""The release estimators' arithmetic, vectorised over samples: every array is (..., n), one row per sample
of n labelled conversations, so that `estimate` (one row) and the benchmark (thousands of draws) run the
same code. calibration/release/inference.py states the estimators; this module computes them.

Everything is built from weighted sums over the sample (the Hajek ratio's linearised variance expands into
them), so the delete-one-conversation jackknife is the totals minus each conversation's share: O(n), not
O(n^2). Per conversation: Y (reviewers' total), G (the control variate: the predictions' total, centred
on the sample's panel when personalised), m (turns), d (1 / inclusion probability) and fpc (the finite-
population factor, 1 - pi, or 1 for the process).

Small samples (issues 36 and 51). These make the textbook interval fall short at 10-20 conversations, each
answered here and chosen by benchmarks/estimate.py:
- lam tuned on the same sample makes the correction's noise look smaller than it is: lam is cross-fitted
  (each conversation's correction uses the lam tuned without it, a leave-one-out cross-fit);
- the linearised variance of a ratio is too small at small n: the larger of it and the jackknife;
- the linearised variance takes the cross-fitted lams as given, but they move with the sample: the
  jackknife is of the whole estimator, lam refitted as the estimator fits it (issue 51: each delete-one
  estimate cross-fits again, conversation j's lam tuned without i and j; `_refit_jackknife`), so lam's own
  noise enters the variance. Without it (the delete-one estimates using one lam tuned on each delete-one
  sample) ppi, even never swapped for humans-only, covered up to a point less than humans-only where the
  calibrator barely helps (its population variance ratio 0.94-0.97: the new chatbot's tutor role at 20
  conversations, 0.884 for the mean; shift up's rate at 40);
- lam estimated from the sample is a fitted slope: the cross-fitted lam spends one degree of freedom per
  predictor (the residual variance over n - 1 - p, Student's t on n - 1 - p; `lam_degrees_of_freedom`);
  without it ppi undercovered humans-only by up to 2.5 points on far-shifted releases where the calibrator
  helps little;
- a rate near 0 or 1 has a skewed estimate, and a Wald interval runs past [0, 1]: rates use a Wilson score
  interval with the effective sample size p(1-p)/var (the design effect of clustering and of the
  calibrator's help both in it; Kott & Carr 1997, Korn & Graubard 1998), with Student's t quantile.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["lam_degrees_of_freedom", "ratio_interval"]


def _contributions(Y, G, m, d, fpc) -> dict[str, np.ndarray]:
    """Each conversation's share of the sums the estimators are built from; G is (..., n, p), one column
    per predictor."""
    w2 = fpc * d * d
    return {
        "D": d * m,
        "SY": d * Y,
        "SG": d[..., None] * G,
        "PYY": w2 * Y * Y,
        "PYm": w2 * Y * m,
        "Pmm": w2 * m * m,
        "PYG": (w2 * Y)[..., None] * G,
        "PGm": (w2 * m)[..., None] * G,
        "PGG": w2[..., None, None] * G[..., :, None] * G[..., None, :],
    }


def _parts(tot: dict, n, ddof):
    """rho_Y, rho_G (p,) and the linearised (co)variances S_aa, S_ab (p,), S_bb (p, p) (each with the
    n / (n - ddof) factor)."""
    D = tot["D"]
    rY, rG = tot["SY"] / D, tot["SG"] / D[..., None]
    S_aa = (tot["PYY"] - 2 * rY * tot["PYm"] + rY**2 * tot["Pmm"]) / D**2
    cross = rG[..., :, None] * tot["PGm"][..., None, :]
    S_bb = (tot["PGG"] - cross - np.swapaxes(cross, -1, -2)) / (D**2)[..., None, None] + (
        rG[..., :, None] * rG[..., None, :] * (tot["Pmm"] / D**2)[..., None, None]
    )
    S_ab = (
        tot["PYG"]
        - rY[..., None] * tot["PGm"]
        - rG * tot["PYm"][..., None]
        + rY[..., None] * rG * tot["Pmm"][..., None]
    ) / (D**2)[..., None]
    c = n / np.maximum(n - ddof, 1)
    diagonal = np.arange(S_bb.shape[-1])
    S_bb[..., diagonal, diagonal] = np.maximum(S_bb[..., diagonal, diagonal], 0)
    return rY, rG, np.maximum(S_aa, 0) * c, S_ab * c, S_bb * c


def _tuned(S_ab, S_bb, V_A):
    """The lam (..., p) that minimises the variance, lam' (V_A + S_bb) lam - 2 lam' S_ab, over lam >= 0 with
    sum(lam) <= 1: one predictor, the variance-optimal lam clipped to [0, 1]; two, the best mixture of them
    shrunk towards humans-only (each face of the triangle tried where the optimum lies outside it)."""
    B = V_A + S_bb
    if B.shape[-1] == 1:
        denom = B[..., 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(denom > 0, S_ab / np.where(denom > 0, denom, 1), 0.0)
        return np.clip(lam, 0.0, 1.0)
    return _tuned_pair(S_ab, B)


def _tuned_pair(a, B):
    """argmin over the triangle lam1, lam2 >= 0, lam1 + lam2 <= 1 of lam' B lam - 2 a' lam (B PSD)."""
    b11, b12, b22 = B[..., 0, 0], B[..., 0, 1], B[..., 1, 1]
    a1, a2 = a[..., 0], a[..., 1]

    def on_axis(num, den):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.clip(np.where(den > 0, num / np.where(den > 0, den, 1), 0.0), 0.0, 1.0)

    det = b11 * b22 - b12 * b12
    with np.errstate(divide="ignore", invalid="ignore"):
        safe = np.where(det > 1e-12 * np.maximum(b11 * b22, 1e-300), det, np.nan)
        inner = np.stack([(b22 * a1 - b12 * a2) / safe, (b11 * a2 - b12 * a1) / safe], -1)
    inside = np.all(inner >= 0, -1) & (inner.sum(-1) <= 1) & np.isfinite(inner).all(-1)
    zero = np.zeros_like(a1)
    # the edge lam1 + lam2 = 1: lam = (t, 1 - t)
    t = on_axis(a1 - a2 - b12 + b22, b11 - 2 * b12 + b22)
    candidates = np.stack(
        [
            np.stack([on_axis(a1, b11), zero], -1),
            np.stack([zero, on_axis(a2, b22)], -1),
            np.stack([t, 1 - t], -1),
            np.where(inside[..., None], np.nan_to_num(inner), 0.0),
        ],
        -2,
    )  # (..., 4, 2)
    Bc = np.einsum("...ij,...cj->...ci", B, candidates)
    value = (candidates * Bc).sum(-1) - 2 * (candidates * a[..., None, :]).sum(-1)
    best = np.argmin(value, -1)
    return np.take_along_axis(candidates, best[..., None, None], -2)[..., 0, :]


def ratio_interval(
    Y,
    G,
    m,
    d,
    fpc,
    *,
    alpha=0.1,
    lam=None,
    ddof=1,
    V_A=0.0,
    offset=0.0,
    quantile="t",
    variance="jackknife",
    bounds=None,
    n_turns=None,
    lam_df=True,
    refit=True,
) -> dict[str, np.ndarray]:
    """The PPI++ estimate of the per-turn mean and its (1 - alpha) interval for each row.

    G: the control variate (..., n), or (..., n, 2) for two predictors at once (the cross-fitted calibrators
    and the unadapted model: calibration/release/crossfit.py), whose lam, cross-fitted, weighs them, lam >=
    0 and their sum <= 1 (lam=None only). lam: a number (fixed; 0 = humans only, 1 = plain PPI), None
    (cross-fitted leave-one-out, see the module docstring; the lam returned is the conversations' mean, of
    the two lams' sum for two predictors) or "tuned" (on the same sample, the PPI++ paper's and ppi-python's
    choice; kept for comparison); V_A: the variance of the imputed mean (0 for the finite release; (p, p)
    for p predictors); offset: the calibrator's per-turn mean the control variate is centred on (0 when G
    is already centred); bounds: (low, high) the values' range (0, 1 for a rate): a Wilson score interval
    inside it, on the rescaled value (n_turns: labelled turns per row, the effective sample size where the
    variance is 0); None: estimate +- t * se. lam_df: the cross-fitted lam spends a degree of freedom per
    predictor (`lam_degrees_of_freedom`; False: as if lam were known, for comparison). refit (lam=None): the
    jackknife's delete-one estimates cross-fit lam again (`_refit_jackknife`; False: each uses the one lam
    tuned on its delete-one sample, before issue 51, for comparison). Returns arrays estimate, low, high, se,
    lam, lam_parts (each predictor's, (..., p)), df."""
    Y, m, d, fpc = np.broadcast_arrays(*(np.asarray(a, float) for a in (Y, m, d, fpc)))
    G = np.asarray(G, float)
    one = G.shape == Y.shape
    G = G[..., None] if one else np.broadcast_to(G, Y.shape + G.shape[-1:])
    if not one and (lam is not None or G.shape[-1] != 2):
        raise ValueError("two predictors take lam=None (cross-fitted); one predictor, G shaped like Y.")
    p = G.shape[-1]
    V_A = np.asarray(V_A, float).reshape(p, p) if np.ndim(V_A) else np.full((p, p), float(V_A))
    n = Y.shape[-1]
    if n <= ddof:
        raise ValueError(f"{n} labelled conversations: at least {ddof + 1} are needed for an interval.")
    Gc = G - np.asarray(offset, float) * m[..., None]
    parts = _contributions(Y, Gc, m, d, fpc)
    tot = {k: v.sum(Y.ndim - 1) for k, v in parts.items()}  # over the n conversations
    # delete-one totals, (..., n, ...): conversation i left out
    drop = {k: np.expand_dims(tot[k], Y.ndim - 1) - v for k, v in parts.items()}
    ddof_1 = min(ddof, n - 2) if n > 2 else 0
    jY, jG, _, j_ab, j_bb = _parts(drop, n - 1, ddof_1)
    estimate, lin, lam_used, lam_jack = _corrected(lam, (Y, Gc, m, d, fpc), tot, (j_ab, j_bb), ddof, V_A)
    lam_VA = np.einsum("...i,ij,...j->...", lam_used, V_A, lam_used)
    # two predictors spend two degrees of freedom unless the sample cannot tell them apart
    rank = 1 if p == 1 or lam is not None else np.linalg.matrix_rank(Gc)
    lost = lam_degrees_of_freedom(lam, rank, n, ddof) if lam_df else 0
    spent = (n - ddof) / (n - ddof - lost)  # the residual variance over the n - ddof - lost left
    var = lam_VA + lin * spent
    if variance == "jackknife" and n >= 3:
        if lam is None and refit:
            thetas = _refit_jackknife(parts, tot, (Y, Gc, m, d), ddof, V_A)
        else:
            thetas = jY - (lam_jack * jG).sum(-1)
        fpc_bar = fpc.mean(-1)
        jack = fpc_bar * (n - 1) / n * ((thetas - thetas.mean(-1, keepdims=True)) ** 2).sum(-1)
        var = np.maximum(var, lam_VA + jack * spent)
    elif variance not in ("jackknife", "linearised"):
        raise ValueError(f"variance={variance!r}: use 'jackknife' or 'linearised'.")
    low, high, se, df = _interval_from(estimate, var, alpha, quantile, bounds, n_turns, fpc.mean(-1), n - lost)
    return {
        "estimate": estimate,
        "low": low,
        "high": high,
        "se": se,
        "lam": lam_used.sum(-1),
        "lam_parts": lam_used,
        "df": df,
    }


def lam_degrees_of_freedom(lam, p, n: int, ddof: int):
    """The degrees of freedom the cross-fitted lam spends: one per predictor (p: their number, or the rank
    of their columns in each sample, an array), as a regression estimator's fitted slope does (the residual
    variance over n - 1 - p, Student's t on n - 1 - p). Without it the interval treats the correction as if
    lam were known; on a release where the calibrator helps little (its apparent gain at 10-20
    conversations is mostly the noise of estimating lam) the ppi interval then undercovered the humans-only
    one by 1-2.5 points (benchmarks/estimate.py, the far-shift cells and single roles). A fixed lam and the
    same-sample "tuned" lam (ppi-python's, for comparison) spend none; never more than leaves one degree of
    freedom."""
    if lam is not None:
        return 0
    return np.maximum(np.minimum(p, n - ddof - 1), 0)


REFIT_CHUNK = 2_000_000  # _refit_jackknife: delete-two cells (samples x n x n x p x p) computed at once


def _refit_jackknife(parts, tot, sample, ddof, V_A):
    """The delete-one estimates (..., n) of the cross-fitted estimator, refitted as it is fitted: with
    conversation i left out, each other conversation j's correction uses the lam tuned without i and j (the
    delete-two totals), so the spread of the delete-one estimates carries lam's own noise. O(n^2) per sample,
    computed in chunks of samples."""
    Y, Gc, m, d = sample
    lead, n, p = Y.shape[:-1], Y.shape[-1], Gc.shape[-1]
    flat = {k: v.reshape((-1,) + v.shape[len(lead) :]) for k, v in parts.items()}  # (B, n, ...)
    flat_tot = {k: v.reshape((-1,) + v.shape[len(lead) :]) for k, v in tot.items()}  # (B, ...)
    Yf, mf, df_ = (np.reshape(x, (-1, n)) for x in (Y, m, d))
    dG = df_[..., None] * Gc.reshape(-1, n, p)  # (B, n, p)
    ddof_2 = min(ddof, n - 3) if n > 3 else 0
    out = np.empty(Yf.shape)
    step = max(1, REFIT_CHUNK // (n * n * p * p))
    for a in range(0, len(Yf), step):
        b = slice(a, a + step)
        pair = {}
        for k, v in flat.items():  # (B, i, j, ...): conversations i and j left out
            t = flat_tot[k][b][:, None, None]
            pair[k] = t - v[b][:, :, None] - v[b][:, None, :]
        _, _, _, ab, bb = _parts(pair, n - 2, ddof_2)
        lam = _tuned(ab, bb, V_A)  # (B, i, j, p)
        share = (lam * dG[b][:, None, :, :]).sum(-1)  # (B, i, j): j's correction without i
        share[:, np.arange(n), np.arange(n)] = 0.0
        num = flat_tot["SY"][b][:, None] - df_[b] * Yf[b] - share.sum(-1)
        out[b] = num / (flat_tot["D"][b][:, None] - df_[b] * mf[b])
    return out.reshape(Y.shape)


def _corrected(lam, sample, tot, jack_parts, ddof, V_A):
    """The estimate, its linearised variance, the lam used (..., p) and each delete-one estimate's lam,
    for lam a number, None (cross-fitted) or "tuned" (see ratio_interval)."""
    Y, Gc, m, d, fpc = sample
    j_ab, j_bb = jack_parts
    n = Y.shape[-1]
    rY, rG, S_aa, S_ab, S_bb = _parts(tot, n, ddof)
    if isinstance(lam, str) and lam == "tuned":  # tuned on the same sample (before issue 36; for comparison)
        lam_used = _tuned(S_ab, S_bb, V_A)
        lin = S_aa - 2 * (lam_used * S_ab).sum(-1) + np.einsum("...i,...ij,...j->...", lam_used, S_bb, lam_used)
        estimate = rY - (lam_used * rG).sum(-1)
        lam_jack = _tuned(j_ab, j_bb, V_A)
    elif lam is None:
        lam_i = _tuned(j_ab, j_bb, V_A)  # each conversation's lam (..., n, p), tuned without it
        z = d * ((Y - rY[..., None] * m) - (lam_i * (Gc - rG[..., None, :] * m[..., None])).sum(-1))
        estimate = rY - (d * (lam_i * Gc).sum(-1)).sum(-1) / tot["D"]
        zc = z - z.mean(-1, keepdims=True)
        lin = (fpc * zc * zc).sum(-1) / tot["D"] ** 2 * n / max(n - ddof, 1)
        lam_used = lam_i.mean(-2)
        lam_jack = lam_i
    else:
        lam_used = np.full(rY.shape + (1,), float(lam))
        estimate = rY - lam * rG[..., 0]
        lin = S_aa - 2 * lam * S_ab[..., 0] + lam**2 * S_bb[..., 0, 0]
        lam_jack = lam_used[..., None, :]
    return estimate, lin, lam_used, lam_jack


def _interval_from(estimate, var, alpha, quantile, bounds, n_turns, fpc_bar, n):
    """(low, high, se, df) at Student's t on n - 1 degrees of freedom (or the normal quantile; n: the
    conversations less the degrees of freedom the cross-fitted lam spent, an array where samples differ): the
    Wilson score interval inside `bounds`, else estimate +- q * se."""
    se = np.sqrt(np.maximum(var, 0.0))
    if quantile == "t":
        df = np.asarray(n - 1, float)  # an array where samples spend different degrees of freedom
        q = stats.t.ppf(1 - alpha / 2, df)
        df, q = (float(df), float(q)) if df.ndim == 0 else (df, q)
    elif quantile == "normal":
        df, q = None, float(stats.norm.ppf(1 - alpha / 2))
    else:
        raise ValueError(f"quantile={quantile!r}: use 't' or 'normal'.")
    if bounds is None:
        return estimate - q * se, estimate + q * se, se, df
    lo, span = float(bounds[0]), float(bounds[1]) - float(bounds[0])
    low, high = _wilson((estimate - lo) / span, var / span**2, q, n_turns, fpc_bar)
    return lo + span * low, lo + span * high, se, df


def _wilson(estimate, var, q, n_turns, fpc_bar):
    """The Wilson score interval at the effective sample size n_eff = p(1-p) / var: p is the estimate
    clipped half a turn inside [0, 1], so that an all-adherent sample still has a width; where the variance
    is 0 (every label alike, no calibrator help) n_eff is the labelled turns over the finite-population
    factor (infinite, a point, when the whole release is labelled)."""
    n_turns = np.asarray(n_turns, float)
    edge = 0.5 / np.maximum(n_turns, 1)
    p = np.clip(estimate, edge, 1 - edge)
    with np.errstate(divide="ignore", invalid="ignore"):
        fallback = np.where(fpc_bar > 0, n_turns / fpc_bar, np.inf)
        n_eff = np.where(var > 0, p * (1 - p) / np.where(var > 0, var, 1), fallback)
    p0 = np.clip(estimate, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(np.isfinite(n_eff), q * q / n_eff, 0.0)
    centre = (p0 + k / 2) / (1 + k)
    half = np.sqrt(k * p0 * (1 - p0) + k * k / 4) / (1 + k)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)  # clip: rounding at p = 0 or 1


def confidence_sequence(estimate, se, n, *, alpha=0.1, t_star=20, bounds=None):
    """The asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2024, "Time-
    uniform central limit theory"): estimate +- sigma * sqrt(2 (n r^2 + 1) / (n^2 r^2) * log(sqrt(n r^2 + 1)
    / alpha)), sigma = se * sqrt(n) the per-conversation spread (se without the finite-population factor: the
    sequence holds for the process, so also for the release), r^2 = (-2 log alpha + log(1 - 2 log alpha)) /
    t_star, which makes it narrowest at t_star conversations. It holds at every n at once, so it may be
    looked at after every batch of labels; clipped to `bounds`."""
    n = np.asarray(n, float)
    r2 = (-2 * np.log(alpha) + np.log(1 - 2 * np.log(alpha))) / t_star
    sigma = np.asarray(se, float) * np.sqrt(n)
    half = sigma * np.sqrt(2 * (n * r2 + 1) / (n**2 * r2) * np.log(np.sqrt(n * r2 + 1) / alpha))
    low, high = np.asarray(estimate) - half, np.asarray(estimate) + half
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    return low, high


def wilson_or_t(estimate, var, *, alpha, df, bounds=None, n_turns=1.0, fpc_bar=1.0):
    """One interval from an estimate and its variance at Student's t on df degrees of freedom: Wilson inside
    `bounds`, else estimate +- t * se (for estimators combined outside ratio_interval, e.g. strata)."""
    q = float(stats.t.ppf(1 - alpha / 2, df))
    if bounds is None:
        se = np.sqrt(max(var, 0.0))
        return estimate - q * se, estimate + q * se
    lo, span = float(bounds[0]), float(bounds[1]) - float(bounds[0])
    low, high = _wilson(np.asarray((estimate - lo) / span), np.asarray(var / span**2), q, n_turns, fpc_bar)
    return lo + span * float(low), lo + span * float(high)
