"""Per-turn decisions with a guarantee: `adheres`, `violates` or `escalate` (to a human).

Definitions (what is promised):
- p(turn) = the adherence probability: P(target answer >= adheres_at) under the calibrator's predicted
  distribution averaged over every training judge (a randomly chosen reviewer of the panel), as in
  `RoleAdherence(judges=None)`.
- A turn is decided when its confidence max(p, 1 - p) reaches the threshold; the decision is `adheres`
  where p >= 0.5, else `violates`; otherwise it is escalated.
- Disagreement of a decided turn with its human reviewers, each reviewer's target answer binarised
  (answer >= adheres_at = adheres):
  `majority` (default): 1 if the decision differs from the reviewers' majority, and 1 on a tie (no
  majority, so no decision can be confirmed); `reviewers`: the share of the turn's reviewers whose
  binarised answer differs from the decision (in [0, 1]).
- Risk = the expected disagreement on decided turns (selective risk). The threshold is chosen by
  Learn-then-Test (Angelopoulos et al. 2021) with fixed-sequence testing, as in "Trust or Escalate"
  (Jung et al., ICLR 2025): on labelled calibration turns the model never trained on, thresholds of a
  fixed grid are tested from the most confident down; at each, the null "risk > target" is rejected when
  its p-value is <= delta (exact binomial for `majority`, Hoeffding-Bentkus for `reviewers`), and the
  lowest threshold reached before the first failure is kept. Then, with probability >= 1 - delta over
  the draw of the calibration turns, the risk on new turns from the same distribution is <= the target.
  The sequence starts at the first threshold that decides enough calibration turns for a pass to be
  possible at all (log delta / log(1 - risk) of them, 22 at 0.1/0.1): with fewer, even no disagreement
  cannot reject, and the sequence would stop before it began. This start depends on the calibration turns'
  confidences only, never on their labels; it is the one step outside textbook fixed-sequence testing, and
  the property test and the 20-split check (README) measure that the promise still holds. If no threshold
  passes, every turn is escalated. The calibration turns must be exchangeable with the turns decided later; turns of one
  conversation are not independent, so calibrate on many conversations.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from rubric.errors import InputError

AGAINST = ("majority", "reviewers")
GRID = np.round(np.linspace(1.0, 0.5, 201), 4)  # fixed before seeing data, most confident first
CALIBRATION_FILE = "decide_calibration.csv"


@dataclass(frozen=True)
class Threshold:
    """A calibrated decision threshold and what it did on the calibration turns."""

    threshold: float
    """Decide a turn when max(p, 1 - p) >= threshold (inf: escalate every turn)."""
    risk: float
    delta: float
    against: str
    n_calibration: int
    coverage: float
    """Share of calibration turns decided."""
    disagreement: float
    """Mean disagreement on the decided calibration turns (NaN when none)."""


def losses(
    n_adheres: np.ndarray, n_reviewers: np.ndarray, against: str = "majority"
) -> tuple[np.ndarray, np.ndarray]:
    """(loss if decided `adheres`, loss if decided `violates`) per turn, from its reviewers' votes.

    >>> [x.tolist() for x in losses(np.array([3, 1, 1]), np.array([3, 3, 2]))]
    [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]]
    """
    if against not in AGAINST:
        raise InputError(f"against={against!r}.", fix=f"use one of {list(AGAINST)}.")
    n_adheres, n_reviewers = np.asarray(n_adheres, float), np.asarray(n_reviewers, float)
    if (n_reviewers <= 0).any() or (n_adheres > n_reviewers).any() or (n_adheres < 0).any():
        raise ValueError("every turn needs 0 <= n_adheres <= n_reviewers and at least one reviewer.")
    if against == "reviewers":
        share = n_adheres / n_reviewers
        return 1.0 - share, share
    tie = 2 * n_adheres == n_reviewers
    majority = 2 * n_adheres > n_reviewers
    return np.where(tie | ~majority, 1.0, 0.0), np.where(tie | majority, 1.0, 0.0)


def decide(p: np.ndarray, threshold: float) -> np.ndarray:
    """(B,) 'adheres' / 'violates' / 'escalate' for adherence probabilities p.

    >>> decide(np.array([0.97, 0.5, 0.02]), 0.9).tolist()
    ['adheres', 'escalate', 'violates']
    """
    p = np.asarray(p, float)
    out = np.where(p >= 0.5, "adheres", "violates").astype(object)
    out[np.maximum(p, 1 - p) < threshold] = "escalate"
    return out


def p_value(loss: np.ndarray, risk: float, *, binary: bool) -> float:
    """P-value of the null "expected loss > risk" from losses in [0, 1]: exact binomial tail for 0/1
    losses, else Hoeffding-Bentkus (Bates et al. 2021)."""
    n = len(loss)
    if n == 0:
        return 1.0
    mean = float(np.mean(loss))
    if binary:
        return float(stats.binom.cdf(round(mean * n), n, risk))
    if mean >= risk:
        return 1.0
    kl = (
        mean * math.log(mean / risk) + (1 - mean) * math.log((1 - mean) / (1 - risk))
        if mean > 0
        else -math.log(1 - risk)
    )
    return float(min(math.exp(-n * kl), math.e * stats.binom.cdf(math.ceil(n * mean), n, risk)))


def calibrate(
    p: np.ndarray,
    n_adheres: np.ndarray,
    n_reviewers: np.ndarray,
    *,
    risk: float = 0.1,
    delta: float = 0.1,
    against: str = "majority",
) -> Threshold:
    """The lowest grid threshold that Learn-then-Test certifies at (risk, delta) on calibration turns:
    p (n,) adherence probabilities, n_adheres / n_reviewers (n,) the reviewers' binarised votes."""
    if not 0 < risk < 1 or not 0 < delta < 1:
        raise InputError(f"risk={risk}, delta={delta}.", fix="pass risk and delta in (0, 1).")
    p = np.asarray(p, float)
    if len(p) == 0:
        raise InputError(
            "no calibration turn has a human answer to the target.",
            fix="calibrate on labelled turns the model was not trained on.",
        )
    loss_yes, loss_no = losses(n_adheres, n_reviewers, against)
    loss = np.where(p >= 0.5, loss_yes, loss_no)
    confidence = np.maximum(p, 1 - p)
    chosen = math.inf
    least = math.ceil(
        math.log(delta) / math.log(1 - risk)
    )  # fewer decided turns cannot pass even with no loss
    for t in GRID:
        decided = confidence >= t
        if decided.sum() < least:
            continue
        if p_value(loss[decided], risk, binary=against == "majority") > delta:
            break
        chosen = float(t)
    decided = confidence >= chosen
    return Threshold(
        chosen,
        risk,
        delta,
        against,
        len(p),
        float(decided.mean()),
        float(loss[decided].mean()) if decided.any() else math.nan,
    )


def validate(
    p: np.ndarray,
    n_adheres: np.ndarray,
    n_reviewers: np.ndarray,
    groups: np.ndarray,
    *,
    risk: float = 0.1,
    delta: float = 0.1,
    against: str = "majority",
    splits: int = 20,
    seed: int = 0,
) -> dict:
    """Calibrate on a random half of the conversations, measure on the other half, `splits` times.

    Needs held-out p for every turn (e.g. out-of-fold). Returns per split the threshold, the realised
    disagreement on decided test turns (NaN when none is decided) and the test coverage, and a summary:
    the share of splits whose realised disagreement is <= risk (the guarantee asks >= 1 - delta)."""
    loss_yes, loss_no = losses(n_adheres, n_reviewers, against)
    loss = np.where(np.asarray(p) >= 0.5, loss_yes, loss_no)
    rng = np.random.default_rng(seed)
    unique = np.unique(groups)
    rows = []
    for _ in range(splits):
        cal = np.isin(groups, rng.permutation(unique)[: len(unique) // 2])
        th = calibrate(p[cal], n_adheres[cal], n_reviewers[cal], risk=risk, delta=delta, against=against)
        decided = (np.maximum(p, 1 - p) >= th.threshold) & ~cal
        rows.append(
            {
                "threshold": th.threshold,
                "coverage": float(decided.sum() / (~cal).sum()),
                "disagreement": float(loss[decided].mean()) if decided.any() else math.nan,
            }
        )
    realised = np.array([r["disagreement"] for r in rows])
    held = np.where(np.isnan(realised), 0.0, realised) <= risk  # nothing decided: no disagreement
    return {
        "risk": risk,
        "delta": delta,
        "against": against,
        "splits": splits,
        "share_within_risk": float(held.mean()),
        "disagreement_mean": float(np.nanmean(realised)) if (~np.isnan(realised)).any() else math.nan,
        "disagreement_q90": float(np.nanquantile(realised, 0.9)) if (~np.isnan(realised)).any() else math.nan,
        "coverage_mean": float(np.mean([r["coverage"] for r in rows])),
        "coverage_min": float(np.min([r["coverage"] for r in rows])),
        "per_split": rows,
    }


def turn_votes(ds, adheres_at: float) -> pd.DataFrame:
    """Per labelled item of `ds`: n_reviewers with a target answer and n_adheres among them."""
    t = ds.target_index
    rows = np.flatnonzero(ds.answers[:, t] >= 0)
    value = ds.option_values()[t][ds.answers[rows, t]]
    frame = pd.DataFrame({"item": ds.label_item[rows], "adheres": (value >= adheres_at).astype(int)})
    votes = (
        frame.groupby("item")["adheres"]
        .agg(["sum", "count"])
        .rename(columns={"sum": "n_adheres", "count": "n_reviewers"})
    )
    return votes.reset_index()


def default_adheres_at(question) -> float:
    """The lowest value of the upper half of the options (3 on 1-4), as in RoleAdherence."""
    values = sorted(question.values)
    return float(values[len(values) // 2])


def adherence_probability(model, ds, adheres_at: float) -> np.ndarray:
    """(N,) P(target >= adheres_at) per item of `ds`, the model's distribution averaged over every training
    judge (the population model where it has none or is not personalised)."""
    import torch

    X = torch.from_numpy(ds.features(model.spec))
    items = np.arange(len(ds.items))
    judges = range(len(model.judges)) if model.judges and model.settings.personalised else [-1]
    probs = sum(model.proba(X, items, np.full(len(items), j, dtype=np.int64)) for j in judges) / len(judges)
    t = ds.target_index
    k = int(ds.n_options[t])
    above = ds.option_values()[t, :k] >= adheres_at
    if not above.any():
        raise InputError(
            f"adheres_at={adheres_at:g} is above every option of {ds.rubric.target!r}.",
            fix="pass a value among the target's options.",
        )
    return probs[:, t, :k][:, above].sum(1)


def calibration_table(model, ds, adheres_at: float) -> pd.DataFrame:
    """The calibration turns: ids, p_adheres and the reviewers' votes (turns without a target answer out)."""
    votes = turn_votes(ds, adheres_at)
    p = adherence_probability(model, ds, adheres_at)
    keys = ds.items.iloc[votes["item"]].reset_index(drop=True)
    return keys.assign(
        p_adheres=p[votes["item"]],
        n_adheres=votes["n_adheres"].to_numpy(),
        n_reviewers=votes["n_reviewers"].to_numpy(),
        adheres_at=adheres_at,
    )


def load_calibration(model_dir: str | Path) -> pd.DataFrame:
    """The calibration turns `role-rubric decide` stored beside a model."""
    path = Path(model_dir) / CALIBRATION_FILE
    if not path.exists():
        raise InputError(
            "the model has no decision calibration.",
            path=path,
            fix="run `role-rubric decide model=DIR calibration=LABELLED_DIR` first.",
        )
    return pd.read_csv(path, dtype={"conversation_id": str, "turn": str}, keep_default_na=False)


def threshold_from(table: pd.DataFrame, *, risk: float, delta: float, against: str = "majority") -> Threshold:
    return calibrate(
        table["p_adheres"].to_numpy(float),
        table["n_adheres"].to_numpy(int),
        table["n_reviewers"].to_numpy(int),
        risk=risk,
        delta=delta,
        against=against,
    )


RISK_LEVELS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def run_decide(cfg) -> Path:
    """CLI: `role-rubric decide model=MODEL_DIR calibration=LABELLED_DIR [data=DIR] risk=0.1 delta=0.1
    [against=majority|reviewers] out=DIR`. Stores the calibration turns beside the model (for
    `RoleAdherence(risk=...)`), writes threshold.json (with the risk-coverage curve on the calibration
    turns) and, given data=DIR, decisions.csv (one row per turn)."""
    from calibration import load_dataset, load_model

    model = load_model(cfg.model)
    rubric = model.check_rubric(Path(cfg.calibration) / "rubric.yaml")
    cal = load_dataset(cfg.calibration, rubric=rubric)
    adheres_at = (
        default_adheres_at(rubric.question(rubric.target))
        if cfg.get("adheres_at") is None
        else float(cfg.adheres_at)
    )
    table = calibration_table(model, cal, adheres_at)
    table.to_csv(Path(cfg.model) / CALIBRATION_FILE, index=False)
    risk, delta, against = float(cfg.risk), float(cfg.delta), str(cfg.against)
    chosen = threshold_from(table, risk=risk, delta=delta, against=against)
    curve = [asdict(threshold_from(table, risk=r, delta=delta, against=against)) for r in RISK_LEVELS]
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "threshold.json").write_text(
        json.dumps(jsonable({**asdict(chosen), "adheres_at": adheres_at, "risk_coverage": curve}), indent=2)
    )
    print(
        f"decide: {len(table)} calibration turns; at risk {risk:g}, delta {delta:g} ({against}): threshold "
        f"{chosen.threshold:.4g}, decides {chosen.coverage:.1%} of them (disagreement there {chosen.disagreement:.3f})"
    )
    if cfg.get("data"):
        ds = load_dataset(
            cfg.data, rubric=model.check_rubric(Path(cfg.data) / "rubric.yaml"), require_labels=False
        )
        p = adherence_probability(model, ds, adheres_at)
        frame = ds.items.assign(p_adheres=p, decision=decide(p, chosen.threshold))
        frame.to_csv(out / "decisions.csv", index=False)
        counts = frame["decision"].value_counts().to_dict()
        print(
            "decide: "
            + ", ".join(f"{counts.get(k, 0)} {k}" for k in ("adheres", "violates", "escalate"))
            + f" of {len(frame)} turns"
        )
    print(
        f"decide: wrote {out / 'threshold.json'}{' and decisions.csv' if cfg.get('data') else ''}; "
        f"calibration turns stored in {Path(cfg.model) / CALIBRATION_FILE}"
    )
    return out


def jsonable(value):
    """NaN and inf -> None, recursively (strict JSON)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value
