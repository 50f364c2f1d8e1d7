"""What every publish target reads: `score`'s outputs joined with the conversations' trace and span ids.

`read_scored` reads the per-turn table (<out stem>_turns.csv), the per-conversation table (out=), the shift
check and what the scores were made with (<out stem>_shift.json's `scored_with`), the calibrator's model.json
(its checksum names the source of every published value) and the conversations.jsonl an import from traces
wrote (each turn's `trace_id`, `span_id` and, from MLflow, `mlflow_trace_id`). Scores of another model than
the one named, turns without a trace id, or tables that disagree with the conversations are one clear line
before anything is published.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibration.publish.consistency import check_tables_agree, check_unchanged
from rubric.errors import InputError

EVALUATION_NAME = "role_rubric/adherence"
"""The name every per-turn value is published under (MLflow feedback, Phoenix annotation, OTel evaluation)."""
SESSION_NAME = "role_rubric/session_adherence"
"""The name of the conversation-level value (MLflow session feedback, Phoenix session annotation)."""


@dataclass(frozen=True)
class ModelInfo:
    """The calibrator the scores came from: what names the published values' source."""

    path: Path
    checksum: str
    """model.json's own checksum (`integrity.model_sha256`): changes whenever a prediction could."""
    judge: dict[str, Any]
    """The judge the model was trained on (model.json's `judge`: backend, model, host, prompt and rubric hashes)."""
    questions: tuple[str, ...]

    @property
    def source_id(self) -> str:
        """role-rubric and the model's checksum: a second publish of the same model finds its own values."""
        return f"role-rubric/model-{self.checksum[:16]}"

    @property
    def judge_line(self) -> str:
        j = self.judge or {}
        parts = [str(j.get("model") or "unknown judge")]
        if j.get("backend"):
            parts.append(f"({j['backend']})")
        if j.get("base_url_host"):
            parts.append(f"at {j['base_url_host']}")
        if j.get("prompt_template"):
            parts.append(f"prompt {j['prompt_template']}")
        return " ".join(parts)


@dataclass(frozen=True)
class TurnScore:
    """One judged turn: its calibrated values and the span of the reply it judged."""

    conversation_id: str
    turn: int
    trace_id: str
    span_id: str
    mlflow_trace_id: str | None
    adherence: float
    adheres: bool
    expected: dict[str, float]
    judge_expected: dict[str, float]

    @property
    def key(self) -> str:
        return f"{self.conversation_id}/{self.turn}"


@dataclass(frozen=True)
class SessionScore:
    """One conversation: its score (the mean turn score), success, and its turns in order."""

    conversation_id: str
    score: float
    success: bool
    min_adherence: float
    violating_turns: str
    turns: tuple[TurnScore, ...]


@dataclass(frozen=True)
class Scored:
    """Everything a target publishes from one `score` run."""

    model: ModelInfo
    turns: tuple[TurnScore, ...]
    sessions: tuple[SessionScore, ...]
    shift: dict[str, Any]
    threshold: float | None
    adheres_at: float | None
    target: str | None
    judges: str
    scores: Path | None
    """The scores file (None: measured in memory, by the MLflow scorers)."""
    source: dict[str, Any] = field(default_factory=dict)
    """The conversations' `source` block (kind, and where they were imported from)."""

    @property
    def shift_line(self) -> str:
        """The shift check's result in a few words (metadata of every value)."""
        if not self.shift.get("checked"):
            return "not checked"
        return "fired: the conversations differ from the training data" if self.shift.get("fired") else "passed"

    def rationale(self, t: TurnScore) -> str:
        """One line: the value, what it means and the questions that pulled it down."""
        at = f"{self.target} >= {self.adheres_at:g}" if self.target and self.adheres_at is not None else "adherent"
        verdict = "adheres" if t.adheres else "does not adhere"
        threshold = f" at threshold {self.threshold:g}" if self.threshold is not None else ""
        low = sorted(t.expected.items(), key=lambda kv: kv[1])[:2]
        lows = ", ".join(f"{q} {v:.2f}" for q, v in low)
        return (
            f"Calibrated P({at}) = {t.adherence:.3f}: {verdict}{threshold}; lowest expected answers: {lows} "
            f"({self.judges}, model {self.model.checksum[:12]}, shift check {self.shift_line})."
        )

    def session_rationale(self, s: SessionScore) -> str:
        verdict = "succeeds" if s.success else "fails"
        below = f"; turns below the threshold: {s.violating_turns}" if s.violating_turns else ""
        return (
            f"Mean turn score {s.score:.3f} over {len(s.turns)} turns: {verdict}"
            f"{f' at threshold {self.threshold:g}' if self.threshold is not None else ''}; lowest turn adherence "
            f"{s.min_adherence:.3f}{below} (model {self.model.checksum[:12]})."
        )

    def metadata(self, t: TurnScore) -> dict[str, str]:
        """The turn's metadata as strings (MLflow and Phoenix keep string values)."""
        out = {
            "conversation_id": t.conversation_id,
            "turn": str(t.turn),
            "model_sha256": self.model.checksum,
            "judge": self.model.judge_line,
            "judges": self.judges,
            "shift_check": self.shift_line,
        }
        out |= {f"expected_{q}": f"{v:g}" for q, v in t.expected.items()}
        out |= {f"judge_expected_{q}": f"{v:g}" for q, v in t.judge_expected.items()}
        if self.threshold is not None:
            out["threshold"] = f"{self.threshold:g}"
        if self.adheres_at is not None and self.target:
            out["adheres_at"] = f"{self.target} >= {self.adheres_at:g}"
        return out

    def session_metadata(self, s: SessionScore) -> dict[str, str]:
        return {
            "conversation_id": s.conversation_id,
            "turns": str(len(s.turns)),
            "min_adherence": f"{s.min_adherence:g}",
            "violating_turn_indices": s.violating_turns,
            "model_sha256": self.model.checksum,
            "judge": self.model.judge_line,
            "judges": self.judges,
            "shift_check": self.shift_line,
            **({"threshold": f"{self.threshold:g}"} if self.threshold is not None else {}),
        }


def model_info(model: str | Path) -> ModelInfo:
    """The calibrator's identity from its model.json (its recorded checksum, else one computed the same way)."""
    from calibration.model.integrity import model_sha256

    path = Path(model)
    file = path / "model.json" if path.is_dir() else path
    if not file.is_file():
        raise InputError("no model.json here.", path=path, fix="pass model= the calibrator folder that `score` used.")
    try:
        meta = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("model.json is not JSON.", path=file, fix="pass the folder `train` wrote.") from None
    checksum = (meta.get("integrity") or {}).get("model_sha256") or model_sha256(meta)
    questions = tuple(q["id"] for q in (meta.get("rubric") or {}).get("questions", []))
    return ModelInfo(path=file.parent, checksum=checksum, judge=meta.get("judge") or {}, questions=questions)


def turns_path(scores: Path) -> Path:
    return scores.with_name(scores.stem + "_turns.csv")


def shift_path(scores: Path) -> Path:
    return scores.with_name(scores.stem + "_shift.json")


def read_scored(
    scores: str | Path, *, model: str | Path | None = None, conversations: str | Path | None = None
) -> Scored:
    """`score`'s outputs (out=SCORES) joined with the conversations' trace ids; model= and conversations=
    default to what the scores record they were made with."""
    import pandas as pd

    from rubric.conversations import load_conversations

    scores = Path(scores)
    if not scores.is_file():
        raise InputError(
            "scores file not found.", path=scores, fix="pass scores= the out= file of `role-rubric score`."
        )
    made_with = _made_with(scores)
    model = model if model is not None else made_with.get("model")
    if model is None:
        raise InputError(
            "these scores record no calibrator: only calibrated scores are published.",
            path=scores,
            fix="score the conversations with calibrator=MODEL, or pass model= the calibrator they came from.",
        )
    info = model_info(model)
    recorded = made_with.get("model_sha256")
    if recorded and recorded != info.checksum:
        raise InputError(
            f"these scores come from another model (checksum {recorded[:12]}) than model= ({info.checksum[:12]}, "
            f"{info.path}).",
            path=scores,
            fix="pass model= the calibrator that `score` used, or score again with this one.",
        )
    conv_path = conversations if conversations is not None else made_with.get("conversations")
    if conv_path is None:
        raise InputError(
            "these scores do not record their conversations file.",
            path=scores,
            fix="pass conversations= the conversations.jsonl that `score` read (written by `import source=...`).",
        )
    loaded = load_conversations(conv_path)
    convs = {c.conversation_id: c for c in loaded}
    turns_file = turns_path(scores)
    if not turns_file.is_file():
        raise InputError("the per-turn table is missing.", path=turns_file, fix="run `role-rubric score` again.")
    turn_frame = pd.read_csv(turns_file, dtype={"conversation_id": str})
    conv_frame = pd.read_csv(scores, dtype={"conversation_id": str, "violating_turn_indices": str})
    _check_questions(turn_frame, info, turns_file)
    check_tables_agree(conv_frame, turn_frame, scores, turns_file)
    turns = tuple(_turn(row, convs, turns_file, n) for n, row in enumerate(turn_frame.to_dict("records"), start=1))
    by_conv: dict[str, list[TurnScore]] = {}
    for t in turns:
        by_conv.setdefault(t.conversation_id, []).append(t)
    sessions = tuple(
        SessionScore(
            conversation_id=str(r["conversation_id"]),
            score=float(r["score"]),
            success=_truth(r["success"]),
            min_adherence=float(r["min_adherence"]),
            violating_turns="" if _missing(r.get("violating_turn_indices")) else str(r["violating_turn_indices"]),
            turns=tuple(sorted(by_conv.get(str(r["conversation_id"]), []), key=lambda t: t.turn)),
        )
        for r in conv_frame.to_dict("records")
    )
    check_unchanged(loaded, conv_path, made_with.get("conversations_sha256"), scores)  # after what names a row
    judges = str(conv_frame["judges"].iloc[0]) if "judges" in conv_frame and len(conv_frame) else "calibrated"
    first = next(iter(convs.values()), None)
    return Scored(
        model=info,
        turns=turns,
        sessions=sessions,
        shift=made_with.get("shift") or {},
        threshold=made_with.get("threshold"),
        adheres_at=made_with.get("adheres_at"),
        target=made_with.get("target"),
        judges=judges,
        scores=scores,
        source=dict((first.record or {}).get("source") or {}) if first is not None else {},
    )


def _made_with(scores: Path) -> dict[str, Any]:
    """The shift file's check and `scored_with` block (model, its checksum, conversations, threshold)."""
    path = shift_path(scores)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("not JSON.", path=path, fix="run `role-rubric score` again.") from None
    return {"shift": data.get("shift") or {}, **(data.get("scored_with") or {})}


def _check_questions(frame: Any, info: ModelInfo, path: Path) -> None:
    """The table's calibrated questions must be the model's (scores of another rubric are another model's)."""
    asked = {c.removeprefix("expected_") for c in frame.columns if c.startswith("expected_")}
    if info.questions and asked != set(info.questions):
        raise InputError(
            f"these scores answer the questions {sorted(asked)}, the model {info.path} {sorted(info.questions)}.",
            path=path,
            fix="pass model= the calibrator that `score` used.",
        )


def _turn(row: dict[str, Any], convs: dict[str, Any], path: Path, n: int) -> TurnScore:
    cid = str(row["conversation_id"])
    if _missing(row.get("turn")):
        raise InputError(
            "a whole-conversation score (granularity=conversation) has no turn span to publish on.",
            path=path,
            row=n,
            fix="score with granularity=turn.",
        )
    turn = int(row["turn"])
    conv = convs.get(cid)
    if conv is None or turn >= len(conv.turns):
        raise InputError(
            f"turn {turn} of conversation {cid!r} is not in the conversations file.",
            path=path,
            row=n,
            fix="pass conversations= the file that `score` read.",
        )
    record = ((conv.record or {}).get("turns") or [{}] * len(conv.turns))[turn]
    trace_id, span_id = record.get("trace_id"), record.get("span_id")
    if not trace_id or not span_id:
        raise InputError(
            f"turn {turn} of conversation {cid!r} has no trace_id/span_id: these conversations were not imported "
            "from traces.",
            path=path,
            row=n,
            fix="import them with `role-rubric import source=otel|mlflow|phoenix` and score that file.",
        )
    return TurnScore(
        conversation_id=cid,
        turn=turn,
        trace_id=str(trace_id),
        span_id=str(span_id),
        mlflow_trace_id=record.get("mlflow_trace_id"),
        adherence=float(row["adherence"]),
        adheres=_truth(row["adheres"]),
        expected={k.removeprefix("expected_"): float(v) for k, v in row.items() if k.startswith("expected_")},
        judge_expected={
            k.removeprefix("judge_expected_"): float(v) for k, v in row.items() if k.startswith("judge_expected_")
        },
    )


def _truth(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""


def read_output(
    folder: str | Path, name: str, *, command: str, key: str, needs: str | None = None
) -> tuple[Path, dict]:
    """(the file, its JSON) of what `role-rubric COMMAND` wrote: `name` in `folder` (or `folder` itself, a
    file), as one line naming it when it is missing, not JSON or not that command's (no `needs` key)."""
    folder = Path(folder)
    file = folder / name if folder.is_dir() else folder
    fix = f"pass {key}= the out= folder of `role-rubric {command}`."
    if not file.is_file():
        raise InputError(f"no {name} here.", path=folder, fix=fix)
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        row = getattr(exc, "lineno", None)
        raise InputError(f"not JSON ({str(exc).splitlines()[0]}): cut short, or not {command}'s.", path=file, row=row,
                         fix=f"{fix[:-1]}, or run `role-rubric {command}` again.") from None  # fmt: skip
    if not isinstance(value, dict) or (needs is not None and not isinstance(value.get(needs), dict)):
        raise InputError(
            f"not the {name} that `role-rubric {command}` writes (no {needs!r} in it).", path=file, fix=fix
        )
    return file, value
