"""The results of `RoleAdherence` (calibration/api/role_adherence.py): `TurnResult`, one scored assistant turn (or whole
conversation), and `AdherenceResult`, one measured conversation with its turns. What the numbers mean is in
calibration/api/role_adherence.py's docstring; `role-rubric score` (calibration/api/frames.py) writes them as CSV rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class TurnResult:
    """One scored item: an assistant turn (or, granularity="conversation", the whole conversation)."""

    turn: int | None
    distributions: dict[str, dict[float, float]]
    """question id -> {option value: probability} (calibrated if a calibrator is used, else the raw judge)."""
    expected: dict[str, float]
    """question id -> expected answer value under `distributions`."""
    adherence: float
    """P(target answer >= adheres_at) under `distributions`."""
    adheres: bool
    """adherence >= threshold."""
    turn_score: float
    """adherence (continuous) or 1.0/0.0 (binary)."""
    judge_distributions: dict[str, dict[float, float]] = field(default_factory=dict)
    """The raw judge's distributions for the same item (equal to `distributions` without a calibrator)."""
    reason: str | None = None
    """The judge's short justification (include_reason=True, LLM judges only)."""
    decision: str | None = None
    """With risk=: 'adheres', 'violates' or 'escalate' (calibration/release/decide.py); else None."""


@dataclass
class AdherenceResult:
    """The role-adherence measurement of one conversation."""

    conversation_id: str
    score: float
    """Mean turn_score over the turns (the conversation score)."""
    success: bool
    """strict_mode=False: score >= threshold (the mean, so a conversation can succeed beside a turn below
    the threshold); strict_mode=True: every turn adheres."""
    threshold: float
    strict_mode: bool
    output_mode: str
    calibrated: bool
    """True if the distributions come from a calibrator, False if from the raw judge."""
    target: str
    adheres_at: float
    judges: str
    """Whose answers are predicted: "raw judge", "population", "all N training judges" or a list."""
    turns: list[TurnResult]

    @property
    def violating_turn_indices(self) -> list[int | None]:
        """The 0-based indices of the turns whose adherence is below the threshold (not a count: their
        number is `len(...)`). `success` can be True beside such turns: without strict_mode it compares
        the mean score with the threshold, not each turn."""
        return [t.turn for t in self.turns if not t.adheres]

    @property
    def reason(self) -> str:
        """A one-line account of the score."""
        bad = self.violating_turn_indices
        where = "no turn below the threshold" if not bad else f"turn(s) {bad} below the threshold"
        source = "calibrated to " + self.judges if self.calibrated else "raw judge, not calibrated"
        return (
            f"score {self.score:.3f} ({'pass' if self.success else 'fail'} at threshold {self.threshold:g}"
            f"{', strict' if self.strict_mode else ''}); {where}; {source}."
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"violating_turn_indices": self.violating_turn_indices, "reason": self.reason}
