"""What `publish disagreements=` reads: compare-judges' disagreements.csv, the label rows where a calibrated
judge and a reviewer disagree most, ranked per judge, and its reviewer_disagreements.csv, the turns whose
reviewers disagree with each other most, ranked, each with the trace and span ids of the turn where its
conversation came from traces (calibration/judges/disagreements.py writes them; docs/reference/files.md).

Each row is published on its turn's span under a stable name and source (`name`, `source_id`, `identifier`):
publishing the list again updates the same entries. Rows without a trace id (conversations not imported from
traces, or a whole-conversation row) cannot be put on a trace: they are counted and named, never dropped
silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rubric.errors import InputError

__all__ = [
    "COLUMNS",
    "NAME",
    "REVIEWER_COLUMNS",
    "REVIEWERS_NAME",
    "Disagreement",
    "Disagreements",
    "ReviewerDisagreement",
    "read_disagreements",
    "read_reviewer_disagreements",
]

NAME = "role_rubric/disagreement"
"""The prefix of every published row's name: `role_rubric/disagreement/<question_id>`."""
COLUMNS = ("llm_judge", "rank", "conversation_id", "turn", "question_id", "reviewer_id", "answer", "calibrated",
           "gap", "gap_share", "trace_id", "span_id")  # fmt: skip
"""The columns of disagreements.csv that publish reads."""
REVIEWERS_NAME = "role_rubric/reviewer_disagreement"
"""The prefix of every published reviewer-against-reviewer row: `role_rubric/reviewer_disagreement/<question_id>`."""
REVIEWER_COLUMNS = ("rank", "conversation_id", "turn", "reviewers", "answers", "question_id", "spread_share",
                    "trace_id", "span_id")  # fmt: skip
"""The columns of reviewer_disagreements.csv that publish reads."""


class _RankedTurn:
    """What both lists' rows share: a rank and the turn it is about."""

    rank: int
    conversation_id: str
    turn: int | None

    @property
    def label(self) -> str:
        return f"rank {self.rank}"

    @property
    def where(self) -> str:
        return f"{self.conversation_id}/{'' if self.turn is None else self.turn}"


@dataclass(frozen=True)
class Disagreement(_RankedTurn):
    """One row of disagreements.csv: a reviewer's answer against the calibrated judge's expected answer."""

    llm_judge: str
    rank: int
    """Its place in the judge's list (1: the largest gap)."""
    conversation_id: str
    turn: int | None
    """The 0-based assistant turn; None for a whole-conversation row."""
    question_id: str
    reviewer_id: str
    answer: float
    calibrated: float
    """The calibrated judge's out-of-fold expected answer for this reviewer."""
    gap: float
    """calibrated - answer."""
    gap_share: float
    """|gap| as a share of the question's range."""
    trace_id: str
    span_id: str

    source_type: ClassVar[str] = "LLM_JUDGE"
    """Who says so, in MLflow's words: a calibrated LLM judge against a reviewer."""
    annotator_kind: ClassVar[str] = "LLM"
    """The same in Phoenix's words."""

    @property
    def name(self) -> str:
        return f"{NAME}/{self.question_id}"

    @property
    def value(self) -> float:
        """The published value: the gap."""
        return self.gap

    def same_entry(self, metadata: dict[str, str]) -> bool:
        """Whether an entry of this name, source and span with this metadata is this row's (one per reviewer)."""
        return metadata.get("reviewer_id") == self.reviewer_id

    @property
    def source_id(self) -> str:
        """Who says so: role-rubric's compare-judges for this LLM judge (an MLflow assessment's source)."""
        return f"role-rubric/compare-judges/{self.llm_judge}"

    @property
    def identifier(self) -> str:
        """The judge and the reviewer: with the name and the span, what identifies the row (Phoenix)."""
        return f"role-rubric/{self.llm_judge}/{self.reviewer_id}"

    def rationale(self) -> str:
        return (
            f"Rank {self.rank} for judge {self.llm_judge}: the calibrated judge expects {self.calibrated:.2f} on "
            f"{self.question_id}, reviewer {self.reviewer_id} answered {self.answer:g} (gap {self.gap:+.2f}, "
            f"{self.gap_share:.0%} of the question's range)."
        )

    def metadata(self) -> dict[str, str]:
        """Everything of the row as strings (MLflow and Phoenix keep string values)."""
        return {
            "llm_judge": self.llm_judge,
            "rank": str(self.rank),
            "conversation_id": self.conversation_id,
            "turn": "" if self.turn is None else str(self.turn),
            "question_id": self.question_id,
            "reviewer_id": self.reviewer_id,
            "answer": f"{self.answer:g}",
            "calibrated": f"{self.calibrated:.10g}",
            "gap": f"{self.gap:.10g}",
            "gap_share": f"{self.gap_share:.10g}",
        }


@dataclass(frozen=True)
class ReviewerDisagreement(_RankedTurn):
    """One row of reviewer_disagreements.csv: a turn whose reviewers answered a question differently."""

    rank: int
    """Its place in the list (1: the widest spread)."""
    conversation_id: str
    turn: int | None
    question_id: str
    reviewers: int
    """How many reviewers answered the question for this turn."""
    answers: str
    """Their answers, space-separated."""
    spread_share: float
    """Highest minus lowest answer as a share of the question's range."""
    trace_id: str
    span_id: str

    source_type: ClassVar[str] = "CODE"
    """Who says so, in MLflow's words: role-rubric's arithmetic on the reviewers' answers."""
    annotator_kind: ClassVar[str] = "CODE"
    source_id: ClassVar[str] = "role-rubric/compare-judges/reviewers"
    identifier: ClassVar[str] = "role-rubric/reviewers"
    """One entry per span and question (Phoenix's identifier; a second publish replaces it)."""

    @property
    def name(self) -> str:
        return f"{REVIEWERS_NAME}/{self.question_id}"

    @property
    def value(self) -> float:
        """The published value: the spread."""
        return self.spread_share

    def same_entry(self, metadata: dict[str, str]) -> bool:
        """One entry per name, source and span: any such entry is this row's."""
        return True

    def rationale(self) -> str:
        return (
            f"Rank {self.rank} among the turns whose reviewers disagree: {self.reviewers} reviewers answered "
            f"{self.answers} to {self.question_id} (spread {self.spread_share:.0%} of the question's range)."
        )

    def metadata(self) -> dict[str, str]:
        return {
            "rank": str(self.rank),
            "conversation_id": self.conversation_id,
            "turn": "" if self.turn is None else str(self.turn),
            "question_id": self.question_id,
            "reviewers": str(self.reviewers),
            "answers": self.answers,
            "spread_share": f"{self.spread_share:.10g}",
        }


Row = Disagreement | ReviewerDisagreement


@dataclass(frozen=True)
class Disagreements:
    """The rows of one list (disagreements.csv or reviewer_disagreements.csv): those on a trace, and those that
    are not."""

    path: Path
    rows: tuple[Row, ...]
    """The rows with a trace id, in the file's order."""
    untraced: tuple[Row, ...]
    """The rows without one."""
    kind: str = "disagreement"
    """What a row is, in the status lines: "disagreement" (judge against reviewer) or "reviewer disagreement"."""

    @property
    def result_key(self) -> str:
        """Its key in what publish returns: disagreements, reviewer_disagreements."""
        return self.kind.replace(" ", "_") + "s"

    def untraced_line(self) -> str:
        """'' where every row is on a trace; else how many are not, naming the first few."""
        if not self.untraced:
            return ""
        named = ", ".join(r.where for r in self.untraced[:3]) + (", ..." if len(self.untraced) > 3 else "")
        return (
            f"{len(self.untraced)} of the {len(self.rows) + len(self.untraced)} {self.kind} rows have no trace id "
            f"(their conversations were not imported from traces), not published: {named}"
        )


def read_disagreements(path: str | Path, *, top: int | None = None) -> Disagreements:
    """compare-judges' disagreements.csv (`path`: the file or the out= folder holding it); top: the first N
    rows of each LLM judge by rank. One line naming the file where it is missing or not compare-judges'."""
    path = Path(path)
    file = path / "disagreements.csv" if path.is_dir() else path
    fix = "pass disagreements= the out= folder of `role-rubric compare-judges` (or its disagreements.csv)."
    if not file.is_file():
        raise InputError("no disagreements.csv here.", path=path, fix=fix)
    return _read_list(file, COLUMNS, _row, name="disagreements.csv", fix=fix, top=top, kind="disagreement")


def read_reviewer_disagreements(path: str | Path, *, top: int | None = None) -> Disagreements | None:
    """compare-judges' reviewer_disagreements.csv beside disagreements.csv (`path`: the out= folder; None where it
    is a file or the folder has none, as before compare-judges wrote it); top: its first N rows by rank."""
    path = Path(path)
    file = path / "reviewer_disagreements.csv"
    if not path.is_dir() or not file.is_file():
        return None
    fix = "run compare-judges again (its out= folder holds reviewer_disagreements.csv)."
    return _read_list(
        file, REVIEWER_COLUMNS, _reviewer_row, name=file.name, fix=fix, top=top, kind="reviewer disagreement"
    )


def _read_list(
    file: Path,
    columns: tuple[str, ...],
    make_row: Callable[[dict[str, Any], Path, int], Row],
    *,
    name: str,
    fix: str,
    top: int | None,
    kind: str,
) -> Disagreements:
    """One of compare-judges' lists (name: the file compare-judges writes): read, its columns checked, each row made (line numbers as a spreadsheet
    shows them), the first `top` by rank kept, split into the rows on a trace and the rest."""
    import pandas as pd

    try:
        frame = pd.read_csv(file, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not a CSV file ({str(exc).splitlines()[0]}).", path=file, fix=fix) from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            f"not the {name} that compare-judges writes (no column {', '.join(missing)}).", path=file, fix=fix
        )
    rows = [make_row(record, file, n) for n, record in enumerate(frame.to_dict("records"), start=2)]
    if top is not None:
        rows = [r for r in rows if r.rank <= top]
    traced = tuple(r for r in rows if r.trace_id and r.turn is not None)
    untraced = tuple(r for r in rows if not (r.trace_id and r.turn is not None))
    return Disagreements(path=file, rows=traced, untraced=untraced, kind=kind)


def _reviewer_row(record: dict[str, Any], file: Path, line: int) -> ReviewerDisagreement:
    try:
        turn = None if str(record["turn"]).strip() == "" else int(float(record["turn"]))
        spread = float(record["spread_share"])
        rank, reviewers = int(float(record["rank"])), int(float(record["reviewers"]))
    except ValueError as exc:
        raise InputError(
            f"a value is not a number ({exc}).", path=file, row=line, fix="run compare-judges again."
        ) from None
    if not math.isfinite(spread):
        raise InputError("a value is not a finite number.", path=file, row=line, fix="run compare-judges again.")
    return ReviewerDisagreement(
        rank=rank,
        conversation_id=str(record["conversation_id"]),
        turn=turn,
        question_id=str(record["question_id"]),
        reviewers=reviewers,
        answers=str(record["answers"]),
        spread_share=spread,
        trace_id=str(record["trace_id"]).strip(),
        span_id=str(record["span_id"]).strip(),
    )


def _row(record: dict[str, Any], file: Path, line: int) -> Disagreement:
    try:
        turn = None if str(record["turn"]).strip() == "" else int(float(record["turn"]))
        numbers = {k: float(record[k]) for k in ("answer", "calibrated", "gap", "gap_share")}
        rank = int(float(record["rank"]))
    except ValueError as exc:
        raise InputError(
            f"a value is not a number ({exc}).", path=file, row=line, fix="run compare-judges again."
        ) from None
    if not all(math.isfinite(v) for v in numbers.values()):
        raise InputError("a value is not a finite number.", path=file, row=line, fix="run compare-judges again.")
    return Disagreement(
        llm_judge=str(record["llm_judge"]),
        rank=rank,
        conversation_id=str(record["conversation_id"]),
        turn=turn,
        question_id=str(record["question_id"]),
        reviewer_id=str(record["reviewer_id"]),
        trace_id=str(record["trace_id"]).strip(),
        span_id=str(record["span_id"]).strip(),
        **numbers,
    )
