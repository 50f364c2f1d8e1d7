"""RoleRubricMetric: role-rubric's per-turn, calibrated role adherence as a deepeval conversational metric.

    from calibration.connectors.deepeval.metric import RoleRubricMetric
    metric = RoleRubricMetric(calibrator="runs/demo/model", judge="embedding", threshold=0.5)
    evaluate(test_cases=[ConversationalTestCase(turns=[...], chatbot_role="...")], metrics=[metric])

A `ConversationalTestCase` becomes one role-rubric conversation: its `chatbot_role`, and one turn per assistant
reply with the user message(s) before it. `RoleAdherence` (calibration/api/role_adherence.py, which defines every number)
measures it: `score` is the session score (mean turn score), `success` the RoleAdherence success, and `reason`
names the lowest turns, as `result.turns` numbers them (turn k = the k-th assistant reply) with their position
in `test_case.turns`, their adherence and the rubric questions whose expected answer pulled them down. Per turn, `metric.result` (an AdherenceResult) and
`metric.turn_indices` (where each scored turn sits in `test_case.turns`) keep everything; `metric.results`
collects every conversation measured by the metric and the copies deepeval makes of it during `evaluate`.

Mapping rules: consecutive user messages are one user message; consecutive assistant messages are one reply
(one scored turn); a trailing user message with no reply is not scored (the reason says so). A test case with
no `chatbot_role` or no assistant turn raises deepeval's MissingTestCaseParamsError; an assistant message
before any user message, or an empty message, raises MismatchedTestCaseInputsError. deepeval reports both the
usual way (`ignore_errors`, `skip_on_missing_params` apply).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    from deepeval.errors import MismatchedTestCaseInputsError, MissingTestCaseParamsError
    from deepeval.metrics import BaseConversationalMetric
except ModuleNotFoundError as exc:  # only deepeval itself missing gets the hint; a broken install shows as is
    from rubric.extras import missing_module

    raise missing_module("deepeval", by="RoleRubricMetric (calibration.connectors.deepeval.metric)", cause=exc) from exc

from calibration.api import RoleAdherence
from calibration.api.results import AdherenceResult, TurnResult
from rubric.conversations import Conversation, conversations_from_records
from rubric.errors import InputError
from rubric.judge.gather import run_sync
from rubric.judge.settings import judge_config
from rubric.schema import Rubric

NAME = "Role Rubric"


class RoleRubricMetric(BaseConversationalMetric):
    """role-rubric's role adherence of a deepeval `ConversationalTestCase` (with `chatbot_role`).

    A drop-in for deepeval's RoleAdherenceMetric: every argument of it is accepted, by name, with its meaning
    (threshold, include_reason, async_mode, strict_mode, verbose_mode, flaky; model names the judge's model).

    Args (calibrator, judge, threshold, strict_mode, judges and risk as in RoleAdherence, calibration/api/role_adherence.py):
        calibrator: a model directory from `role-rubric train` (None: the raw judge, uncalibrated).
        judge: a judge name in conf/judge ("embedding", "openai", "vllm", ...), a mapping of judge settings
            (with "name": that judge's file changed by the other keys) or a `judge_config(...)` result.
            Default: the offline embedding judge; with `model=`, the OpenAI judge.
        threshold: adherence a turn needs to adhere, and the session score needed for success.
        strict_mode: success only if every turn adheres (the score stays the session score; deepeval's own
            sets the threshold to 1, which on its 0/1 turn verdicts asks the same of every turn).
        judges: None (all training judges), a list of trusted judge ids, or "population".
        risk, delta: decide every turn (adheres / violates / escalate) with risk control; see RoleAdherence.
        rubric, adheres_at, output_mode, cache, allow_judge_mismatch: passed to RoleAdherence.
        include_reason: as deepeval's: False leaves `reason` None.
        judge_reason: ask the (LLM) judge for a short justification and quote it for the lowest turns.
        async_mode: as deepeval's: `measure` runs `a_measure` on an event loop (True) or the synchronous
            path (False); both give the same numbers, bit for bit.
        model: deepeval's judge model, as a model name: the judge's `model` setting. role-rubric reads the
            judge's answer distributions through its own OpenAI-protocol client, so a DeepEvalBaseLLM object
            is refused; pass judge= settings for another endpoint.
        system_one_model, eval_mode, evaluation_template: deepeval's; only their defaults (None, "llm") are
            accepted: the rubric (rubric.yaml) is role-rubric's template.
        flaky: deepeval's flaky flag, reported with the result.
        lowest_turns: how many of the lowest turns the reason names.
        verbose_mode: print the per-turn table after every measurement.
        adherence: an existing RoleAdherence to measure with instead of building one (its threshold and
            strict_mode become the metric's). deepeval copies the metric once per test case; the copies get
            this object, so a calibrator and an embedding model load once.
        results: a list that every measured AdherenceResult is appended to (default: a new one), shared the
            same way, so `metric.results` holds every conversation `evaluate` measured.
        on_shift: warn (a ShiftWarning) | refuse | ignore when a conversation's judge answers differ from the
            calibrator's training data (RoleAdherence's; `metric.shift` holds the last check).

    Turns are numbered as in `result.turns` and `violating_turn_indices`: turn k is the k-th assistant reply
    (0-based); the reason and the per-turn log add its position in `test_case.turns`.
    """

    # What deepeval reads after a measurement (its base class declares them untyped).
    score: float | None
    success: bool | None
    reason: str | None
    error: str | None
    score_breakdown: dict[str, float] | None
    verbose_logs: str | None

    _requires_chatbot_role = True

    def __init__(
        self,
        calibrator: str | Path | None = None,
        judge: str | Mapping[str, Any] | Any = None,
        threshold: float = 0.5,
        strict_mode: bool = False,
        judges: None | str | Sequence[str] = None,
        risk: float | None = None,
        *,
        delta: float = 0.1,
        rubric: str | Path | Rubric | None = None,
        adheres_at: float | None = None,
        output_mode: str = "continuous",
        include_reason: bool = True,
        judge_reason: bool = False,
        async_mode: bool = True,
        model: str | None = None,
        system_one_model: Any = None,
        eval_mode: str | None = None,
        evaluation_template: Any = None,
        flaky: bool = False,
        cache: str | Path | None = None,
        allow_judge_mismatch: bool = False,
        lowest_turns: int = 3,
        verbose_mode: bool = False,
        adherence: RoleAdherence | None = None,
        results: list[AdherenceResult] | None = None,
        on_shift: str = "warn",
    ):
        if isinstance(calibrator, (int, float)) and not isinstance(calibrator, bool):
            raise InputError(
                f"RoleRubricMetric's first argument is the calibrator (a model directory), not {calibrator!r}.",
                fix=f"pass threshold={calibrator} by name (RoleAdherenceMetric's first argument is the threshold).",
            )
        _check_deepeval_only(model, system_one_model, eval_mode, evaluation_template)
        if adherence is None:
            adherence = RoleAdherence(
                calibrator,
                judge=_judge_of(judge, model),
                threshold=threshold,
                strict_mode=strict_mode,
                output_mode=output_mode,
                judges=judges,
                include_reason=judge_reason,
                risk=risk,
                delta=delta,
                rubric=rubric,
                adheres_at=adheres_at,
                cache=cache,
                allow_judge_mismatch=allow_judge_mismatch,
                on_shift=on_shift,
            )
        if int(lowest_turns) < 1:
            raise InputError(f"lowest_turns={lowest_turns} names no turn.", fix="pass lowest_turns >= 1.")
        # Every __init__ argument is kept under its own name: deepeval copies a metric by passing these back.
        self.calibrator, self.judge, self.judges = calibrator, judge, judges
        self.risk, self.delta = risk, delta
        self.rubric, self.adheres_at, self.output_mode, self.cache = rubric, adheres_at, output_mode, cache
        self.allow_judge_mismatch, self.include_reason = allow_judge_mismatch, bool(include_reason)
        self.judge_reason, self.async_mode, self.flaky = bool(judge_reason), bool(async_mode), bool(flaky)
        self.model, self.system_one_model, self.eval_mode = model, system_one_model, eval_mode
        self.evaluation_template = evaluation_template
        self.lowest_turns, self.verbose_mode = int(lowest_turns), bool(verbose_mode)
        self.adherence, self.on_shift = adherence, on_shift
        self.results = [] if results is None else results
        self.threshold, self.strict_mode = adherence.threshold, adherence.strict_mode
        self.evaluation_model = _model_name(adherence)
        self.result: AdherenceResult | None = None
        self.turn_indices: list[tuple[int, ...]] = []

    @property
    def shift(self) -> dict | None:
        """The shift check of the last measurement (calibration/model/shift.py; None without a calibrator)."""
        return self.adherence.shift

    @property
    def __name__(self) -> str:
        return NAME

    # deepeval's interface -----------------------------------------------------------------------------------
    def measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        """Score the test case (deepeval passes private keyword arguments such as _show_indicator: unused).
        async_mode=True runs `a_measure` on an event loop, as deepeval's metrics do; the numbers are the same."""
        if self.async_mode:
            return run_sync(self.a_measure(test_case))
        conversation, indices, unanswered = self._prepare(test_case)
        return self._finish(self.adherence.measure(conversation), indices, unanswered)

    async def a_measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
        """`measure` on the running event loop: RoleAdherence.a_measure, the judge's async gather."""
        conversation, indices, unanswered = self._prepare(test_case)
        return self._finish(await self.adherence.a_measure(conversation), indices, unanswered)

    def is_successful(self) -> bool:
        # RoleAdherence decides success (strict_mode: every turn adheres), not score >= threshold.
        if self.error is not None or self.success is None:
            self.success = False
        return bool(self.success)

    # internals ----------------------------------------------------------------------------------------------
    def _prepare(self, test_case: Any) -> tuple[Conversation, list[tuple[int, ...]], list[int]]:
        """Reset the last measurement and map the test case, recording deepeval's error text on failure. The
        mapping is returned, not stored, so measurements running at once on one metric never mix turns."""
        self.error, self.score, self.success, self.reason, self.result = None, None, None, None, None
        self.score_breakdown, self.verbose_logs, self.turn_indices = None, None, []
        try:
            return conversation_from_test_case(test_case)
        except (MissingTestCaseParamsError, MismatchedTestCaseInputsError) as exc:
            self.error = str(exc)
            raise

    def _finish(self, result: AdherenceResult, indices: list[tuple[int, ...]], unanswered: list[int]) -> float:
        labels = [_label(k, ix) for k, ix in enumerate(indices)]
        self.result, self.turn_indices = result, indices
        self.results.append(result)
        self.score, self.success = result.score, result.success
        self.score_breakdown = {f"turn {k}": t.adherence for k, t in enumerate(result.turns)}
        reason = _reason(result, labels, self.adherence.rubric, self.lowest_turns, unanswered)
        self.reason = reason if self.include_reason else None
        self.verbose_logs = _turn_table(result, labels)
        if self.verbose_mode:
            print(f"{NAME} ({self.evaluation_model}):\n{self.verbose_logs}\n{reason}")
        return result.score


def conversation_from_test_case(test_case: Any) -> tuple[Conversation, list[tuple[int, ...]], list[int]]:
    """(the role-rubric conversation, for each of its turns the positions in `test_case.turns` of the assistant
    message(s) judged, the positions of trailing user messages with no reply)."""
    role = getattr(test_case, "chatbot_role", None)
    if not isinstance(role, str) or not role.strip():
        raise MissingTestCaseParamsError(
            f"'chatbot_role' in a conversational test case cannot be empty for the '{NAME}' metric: it is the "
            "role every assistant turn is judged against. Pass ConversationalTestCase(chatbot_role=...)."
        )
    turns = list(getattr(test_case, "turns", None) or [])
    if not turns:
        raise MissingTestCaseParamsError("'turns' in conversational test case cannot be empty.")
    groups: list[tuple[list[str], list[str], list[int]]] = []  # (user messages, assistant messages, indices)
    pending: list[int] = []  # user messages since the last reply
    for i, turn in enumerate(turns):
        text = turn.content if isinstance(turn.content, str) else ""
        if not text.strip():
            raise MismatchedTestCaseInputsError(
                f"turns[{i}] ({turn.role}) has empty content; the '{NAME}' metric judges the text of every "
                "message. Give it the text the user saw, or drop the turn."
            )
        if turn.role == "user":
            pending.append(i)
        elif pending:
            groups.append(([turns[j].content for j in pending], [text], [i]))
            pending = []
        elif groups:  # a second assistant message in a row: the same reply, sent in parts
            groups[-1][1].append(text)
            groups[-1][2].append(i)
        else:
            raise MismatchedTestCaseInputsError(
                f"turns[{i}] is an assistant message before any user message; the '{NAME}' metric judges "
                "replies to the user. Start the turns with the user's first message (an opening greeting "
                "cannot be scored on its own)."
            )
    if not groups:
        raise MissingTestCaseParamsError(
            f"the conversational test case has no assistant turn, so the '{NAME}' metric has no reply to "
            "judge. Add at least one Turn(role='assistant', ...) after a user turn."
        )
    name = getattr(test_case, "name", None)
    record = {
        "conversation_id": str(name) if name else "test_case",
        "chatbot_role": role,
        "turns": [{"user": "\n\n".join(u), "assistant": "\n\n".join(a)} for u, a, _ in groups],
    }
    try:
        (conversation,) = conversations_from_records([record], source="deepeval test case")
    except InputError as exc:  # e.g. text that is not valid Unicode
        raise MismatchedTestCaseInputsError(f"{exc.problem} {exc.fix}".strip()) from None
    return conversation, [tuple(ix) for _, _, ix in groups], pending


def _label(k: int, indices: Sequence[int]) -> str:
    """Turn k as `result.turns[k]` and `violating_turn_indices` number it, with its place in test_case.turns."""
    where = f"turns[{indices[0]}]" if len(indices) == 1 else f"turns[{indices[0]}..{indices[-1]}]"
    return f"turn {k} ({where})"


def _judge_of(judge: Any, model: str | None) -> Any:
    """RoleAdherence's judge: the embedding judge by default; deepeval's model= names the judge's model (the
    OpenAI judge's unless judge= names another)."""
    if model is None:
        return "embedding" if judge is None else judge
    return judge_config("openai" if judge is None else judge, model=model)


def _check_deepeval_only(model: Any, system_one_model: Any, eval_mode: Any, evaluation_template: Any) -> None:
    """deepeval's arguments that have no role-rubric meaning: refused with the reason unless left at default."""
    if model is not None and not isinstance(model, str):
        raise InputError(
            f"model={type(model).__name__}: role-rubric reads the judge's answer distributions (log-probabilities) "
            "through its own client, not through a deepeval model object.",
            fix="give model the model's name as a string (the OpenAI judge), or give judge a dict of settings such as "
            "{'name': 'vllm', 'model': ..., 'base_url': ...}.",
        )
    if system_one_model is not None or eval_mode not in (None, "llm"):
        raise InputError(
            "system_one_model / eval_mode other than 'llm' are deepeval's own judging modes.",
            fix="leave them out: the rubric's questions are always asked of the judge.",
        )
    if evaluation_template is not None and getattr(evaluation_template, "__name__", "") != "RoleAdherenceTemplate":
        raise InputError(
            "evaluation_template: role-rubric's prompts come from the rubric's questions, not from a template.",
            fix="leave evaluation_template out and write the questions in a rubric.yaml (rubric=PATH).",
        )


def _model_name(adherence: RoleAdherence) -> str:
    judge = "no judge" if adherence.judge is None else f"{adherence.judge.backend} judge {adherence.judge.model}"
    return f"role-rubric: {judge}, " + (
        f"calibrated to {adherence.judges_label}" if adherence.model is not None else "not calibrated"
    )


def _pulled_down(turn: TurnResult, rubric: Rubric) -> str:
    """The rubric questions (other than the target) whose expected answer lies below the upper half of their
    scale, lowest first; if none does, the weakest one."""
    scored = []
    for q in rubric.questions:
        if q.id == rubric.target or q.id not in turn.expected:
            continue
        values = sorted(q.values)
        lo, hi, cut = values[0], values[-1], values[len(values) // 2]
        e = turn.expected[q.id]
        scored.append(((e - lo) / (hi - lo), e < cut, f"{q.id} {e:.1f} of {lo:g}-{hi:g}"))
    if not scored:
        return ""
    scored.sort()
    below = [text for _, low, text in scored if low][:3]
    return ", ".join(below) if below else "weakest: " + scored[0][2]


def _reason(result: AdherenceResult, labels: list[str], rubric: Rubric, lowest: int, unanswered: list[int]) -> str:
    """One paragraph: the score and verdict, then the lowest turns and what pulled each down."""
    turns = result.turns
    below = sum(not t.adheres for t in turns)
    source = f"calibrated to {result.judges}" if result.calibrated else "raw judge, not calibrated"
    text = (
        f"Score {result.score:.3f}: mean turn {'adherence' if result.output_mode == 'continuous' else 'score'} "
        f"over {len(turns)} assistant turn(s), {below} below adherence {result.threshold:g}; "
        f"{'pass' if result.success else 'fail'}{' (strict: every turn must adhere)' if result.strict_mode else ''}; "
        f"{source}."
    )
    order = sorted(range(len(turns)), key=lambda k: turns[k].adherence)[:lowest]
    parts = []
    for k in order:
        t = turns[k]
        why = _pulled_down(t, rubric)
        part = f"{labels[k]} adherence {t.adherence:.2f}" + (f" ({why})" if why else "")
        if t.decision is not None:
            part += f", decision {t.decision}"
        if t.reason:
            part += f', judge: "{t.reason.strip()}"'
        parts.append(part)
    text += f" Lowest turn{'s' if len(parts) > 1 else ''}: " + "; ".join(parts) + "."
    if unanswered:
        text += f" Not scored: {', '.join(f'turns[{i}]' for i in unanswered)} (a user message with no reply)."
    return text


def _turn_table(result: AdherenceResult, labels: list[str]) -> str:
    """Every scored turn: where it is, its adherence and its expected answer to each question."""
    rows = []
    for label, t in zip(labels, result.turns, strict=True):
        expected = ", ".join(f"{q} {v:.2f}" for q, v in t.expected.items())
        mark = "adheres" if t.adheres else "BELOW"
        rows.append(f"  {label}: adherence {t.adherence:.3f} {mark}; expected {expected}")
    return "\n".join(rows)
