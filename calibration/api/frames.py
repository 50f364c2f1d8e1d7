"""What `role-rubric score` writes and shows: `RoleAdherence` results as per-conversation and per-turn frames
(the CSVs), and the per-conversation table (its command: calibration/commands/score.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from calibration.api.results import AdherenceResult
from rubric.conversations import Conversation


def results_frames(
    results: Sequence[AdherenceResult], conversations: Sequence[Conversation] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-conversation frame, per-turn frame) of measurement results; with the conversations, the
    per-turn frame carries each turn's user message and assistant reply. Probabilities are rounded to 4
    decimals, expected answers to 3."""
    texts = {c.conversation_id: c for c in conversations or ()}
    conv_rows, turn_rows = [], []
    for r in results:
        conv_rows.append(
            {
                "conversation_id": r.conversation_id,
                "turns": len(r.turns),
                "score": round(r.score, 4),
                "success": r.success,
                "min_adherence": round(min(t.adherence for t in r.turns), 4),
                "violating_turn_count": len(r.violating_turn_indices),
                # 0-based turn indices, space-separated: the turns below the threshold
                "violating_turn_indices": " ".join("" if t is None else str(t) for t in r.violating_turn_indices),
                "calibrated": r.calibrated,
                "judges": r.judges,
            }
        )
        for t in r.turns:
            row = {
                "conversation_id": r.conversation_id,
                "turn": "" if t.turn is None else t.turn,
                "adherence": round(t.adherence, 4),
                "adheres": t.adheres,
                "turn_score": round(t.turn_score, 4),
            }
            row |= {f"expected_{q}": round(v, 3) for q, v in t.expected.items()}
            row |= {
                f"judge_expected_{q}": round(sum(v * p for v, p in d.items()), 3)
                for q, d in t.judge_distributions.items()
            }
            conv = texts.get(r.conversation_id)
            if conv is not None and t.turn is not None:
                row |= {"user": conv.turns[t.turn].user, "assistant": conv.turns[t.turn].assistant}
            if t.reason is not None:
                row["reason"] = t.reason
            turn_rows.append(row)
    return pd.DataFrame(conv_rows), pd.DataFrame(turn_rows)


def format_results(frame: pd.DataFrame, limit: int | None = 40) -> str:
    """A fixed-width per-conversation table (the first `limit` rows)."""
    head = f"{'conversation_id':<24}{'turns':>6}{'score':>8}{'min':>7}  {'success':<8}turns below threshold (0-based)"
    lines = [head]
    shown = frame if limit is None else frame.head(limit)
    for row in shown.itertuples(index=False):
        lines.append(
            f"{str(row.conversation_id)[:23]:<24}{row.turns:>6}{row.score:8.3f}{row.min_adherence:7.3f}  "
            f"{'yes' if row.success else 'no':<8}{row.violating_turn_indices or '-'}"
        )
    if limit is not None and len(frame) > limit:
        lines.append(f"... {len(frame) - limit} more rows in the CSV")
    return "\n".join(lines)
