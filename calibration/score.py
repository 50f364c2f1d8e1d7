"""`role-rubric score`: a conversations file -> per-conversation and per-turn CSVs, through `RoleAdherence`."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from calibration.api import AdherenceResult, RoleAdherence
from rubric.conversations import Conversation, load_conversations
from rubric.errors import InputError
from rubric.files import atomic_to_csv
from rubric.identity import stand_in_note
from rubric.ids import clean_id_list
from rubric.jsonfile import write_json

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


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


def run_score(cfg) -> pd.DataFrame:
    """CLI: `role-rubric score conversations=FILE [calibrator=DIR] [judge=embedding] out=FILE.csv`."""
    from omegaconf import OmegaConf

    if not cfg.get("conversations") or str(cfg.conversations) == "???":
        raise InputError("no conversations file given.", fix="pass conversations=PATH/conversations.jsonl.")
    conversations = load_conversations(cfg.conversations)
    out = Path(cfg.out)
    judges = cfg.get("judges")
    if judges is not None and not isinstance(judges, str):
        judges = clean_id_list(OmegaConf.to_container(judges))
    rubric = None
    if cfg.get("calibrator") is None:
        from rubric.gather import rubric_from_config

        rubric = rubric_from_config(cfg, "score")
    cache = cfg.get("cache") or out.with_suffix(".cache.sqlite")
    metric = RoleAdherence(
        calibrator=cfg.get("calibrator"),
        judge=OmegaConf.to_container(cfg.judge, resolve=True),
        threshold=float(cfg.threshold),
        strict_mode=bool(cfg.strict_mode),
        output_mode=str(cfg.output_mode),
        granularity=str(cfg.granularity),
        judges=judges,
        include_reason=bool(cfg.include_reason),
        rubric=rubric,
        adheres_at=cfg.get("adheres_at"),
        cache=cache,
        allow_judge_mismatch=bool(cfg["allow_judge_mismatch"]),
        on_shift=str(cfg["on_shift"]),
    )
    metric.command = "score"  # the shift check's warning prints as "score: warning: ..."
    results = metric.measure_many(conversations, progress=bool(cfg["progress"]))
    conv_frame, turn_frame = results_frames(results, conversations)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_to_csv(conv_frame, out)
    turns_out = Path(cfg.get("turns_out") or out.with_name(out.stem + "_turns.csv"))
    atomic_to_csv(turn_frame, turns_out)
    shift_out = None
    if metric.shift is not None:  # calibrated: the shift check's block (calibration/model/shift.py)
        shift_out = out.with_name(out.stem + "_shift.json")
        write_json(shift_out, {"shift": metric.shift})
    log.info(format_results(conv_frame, limit=cfg.get("show")))
    mean = conv_frame["score"].mean()
    log.info(
        f"score: {len(conv_frame)} conversations, mean score {mean:.3f}, "
        f"{int(conv_frame['success'].sum())} pass at threshold {metric.threshold:g}"
        f"{' (strict)' if metric.strict_mode else ''}; "
        + ("calibrated to " + metric.judges_label if metric.model is not None else "raw judge (no calibrator)")
        + f"; adherence = P({metric.rubric.target} >= {metric.adheres_at:g})"
    )
    note = stand_in_note(metric.judge.model)
    if note:
        log.info(f"score: note: {note}.")
    if metric.unseen_judges:
        log.info(f"score: judge(s) not seen in training, predicted by the population model: {metric.unseen_judges}")
    log.info(
        f"score: wrote {out} (per conversation) and {turns_out} (per turn)"
        + (f", {shift_out} (shift check)" if shift_out else "")
        + f"; cache {cache}"
    )
    if math.isnan(mean):
        raise InputError("no scores were produced.", fix="check the conversations file.")
    return conv_frame
