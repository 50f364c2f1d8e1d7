"""The Python API: score a conversation's role adherence, calibrated to human judges (or with the raw judge).

    from calibration.api import RoleAdherence
    metric = RoleAdherence(calibrator="runs/demo/model", judge="embedding")
    result = metric.measure({"conversation_id": "c1", "chatbot_role": "...", "turns": [{"user": ..., "assistant": ...}]})
    result.score, result.success, result.turns[0].adherence, result.turns[0].expected["overall"]

Definitions (what the numbers mean):
- Per turn, every rubric question gets a distribution over its options: the calibrated model's prediction
  of what the chosen human judges would answer, or (no calibrator) the judge's own distribution.
- `expected[q]` = the expected answer value of question q under that distribution (this minimises
  squared error against a human answer).
- `adherence` = the **adherence probability** of a turn: P(answer to the target question >= `adheres_at`)
  under that distribution. For the role-adherence rubric the target is `overall` (1-4) and `adheres_at`
  defaults to the lower edge of the upper half of the scale (3 = "mostly adheres"), so adherence is the
  probability that a human judge would call the turn at least "mostly adherent".
- `turn_score` = `adherence` (output_mode="continuous") or 1.0/0.0 for adherence >= threshold ("binary").
- `score` = the mean turn_score over the conversation's turns (the conversation score).
- `success` = score >= threshold, i.e. the *mean* against the threshold, so a conversation can succeed beside a
  turn below it; with strict_mode=True, every turn's adherence >= threshold.
- `judge_distributions` / `judge_expected_<q>` in `score`'s CSV: the raw judge's, before calibration, for
  comparison with the calibrated `expected` (equal to it without a calibrator).

Which human judges (`judges=`): None (default) averages the personalised predicted distributions over every
judge the calibrator was trained on, i.e. "what a randomly chosen member of the training panel would
answer", idiosyncrasies included; a list averages over those trusted judges only (a judge never seen in
training is predicted by the population model); "population" uses the shared weights only (the
judge-independent model). Without a calibrator `judges` is ignored.

`role-rubric score conversations=FILE [calibrator=DIR] [judge=embedding] out=FILE.csv` scores a whole file.

The result types live in calibration/api/results.py and the argument checks in calibration/api/inputs.py;
both are imported here, so `from calibration.api import AdherenceResult, TurnResult` keeps working.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from calibration.api.inputs import (
    adherence_cut,
    as_conversations,
    as_rubric,
    check_arguments,
    check_scorer_calibrator,
    decision_threshold,
    judge_indices,
    scorer_spec,
)
from calibration.api.results import AdherenceResult, TurnResult
from calibration.evaluation.risk_control import decide
from calibration.model.shift import RoleTexts, ShiftWarning, handle_shift  # noqa: F401  (ShiftWarning: re-exported)
from rubric.conversations import Conversation, role_name
from rubric.errors import InputError
from rubric.ids import clean_id_list
from rubric.judge.gather import a_gather, make_backend, run_sync
from rubric.judge.outputs import GatherResult
from rubric.judge.settings import JudgeConfig, judge_config
from rubric.schema import Rubric

if TYPE_CHECKING:
    from calibration.data.dataset import Dataset
    from calibration.model.files import LoadedModel
    from rubric.judge.embedding import EmbeddingBackend
    from rubric.scorers.base import Scorer


class RoleAdherence:
    """Role adherence of a chatbot, turn by turn, as (calibrated) human judges would rate it.

    Args:
        calibrator: a model directory written by `role-rubric train` (or the demo), or None to report the
            raw judge. The calibrator must have been trained on distributions from the same judge.
        judge: a judge name in conf/judge ("embedding", "openai", "vllm", ...); a dict of judge settings, with
            "name" that judge's file with the dict's keys changed ({"name": "fake", "base_url": URL}), without
            a whole set of settings; or a `rubric.judge_config(...)` result (docs/reference/api.md).
        threshold: adherence probability a turn needs to adhere, and the conversation score needed for success.
        strict_mode: success only if every turn adheres.
        output_mode: "continuous" (turn score = adherence probability) or "binary" (1/0 at threshold).
        granularity: "turn" (one item per assistant turn) or "conversation" (one item per conversation).
        judges: None (average over all training judges), a list of trusted judge ids, or "population".
        include_reason: ask the judge for a short justification per item (LLM judges only).
        rubric: the rubric when there is no calibrator: a path, a Rubric or a name in conf/rubric
            (default role_adherence). With a calibrator the calibrator's rubric is used.
        risk: decide each turn (`TurnResult.decision`) so that, with probability 1 - delta, the
            disagreement with the reviewers on decided turns is <= risk, escalating the rest; needs a calibrator
            on which `role-rubric decide` has run (its held-out calibration turns) and judges=None.
        delta: the allowed probability that the risk bound fails (with risk).
        adheres_at: an answer >= this value adheres; default the lowest value of the upper half of the target's
            options (3 on a 1-4 scale).
        cache: SQLite request cache path (None: in memory; reruns then ask the judge again).
        allow_judge_mismatch: use a calibrator with distributions from another judge than the one it was
            trained on (model.json records it); by default that is refused, naming what differs.
        scorer: a reference-based scorer (rubric/scorers: "cosine", "knn", "bertscore", "nli",
            "mahalanobis", "pca_mahalanobis", "kl", or {"name": ..., "params": {...}}); every turn needs a
            `reference`. Without a calibrator, adherence = the score itself (the only question is
            `ref_<name>`) and no judge is asked. With a calibrator trained on `gather scorer=` features,
            the score is its `ref_<name>` input, beside the judge's distributions unless judge=None.
            Distribution scorers and kNN are fitted on the references of the conversations measured together.
        on_shift: with a calibrator, every measurement checks whether the conversations' judge answers differ
            from the calibrator's training data (calibration/model/shift.py; the block is `self.shift`):
            "warn" (a `ShiftWarning`), "refuse" (raise `ShiftRefused`) or "ignore" (not checked).
    """

    def __init__(
        self,
        calibrator: str | Path | None = None,
        judge: str | Mapping[str, Any] | JudgeConfig | None = "embedding",
        threshold: float = 0.5,
        strict_mode: bool = False,
        output_mode: str = "continuous",
        granularity: str = "turn",
        judges: None | str | Sequence[str] = None,
        include_reason: bool = False,
        *,
        risk: float | None = None,
        delta: float = 0.1,
        rubric: str | Path | Rubric | None = None,
        adheres_at: float | None = None,
        cache: str | Path | None = None,
        allow_judge_mismatch: bool = False,
        scorer: str | Mapping[str, Any] | None = None,
        on_shift: str = "warn",
    ):
        check_arguments(
            threshold=threshold,
            strict_mode=strict_mode,
            output_mode=output_mode,
            granularity=granularity,
            include_reason=include_reason,
            adheres_at=adheres_at,
            allow_judge_mismatch=allow_judge_mismatch,
            on_shift=on_shift,
            risk=risk,
            delta=delta,
        )
        self.on_shift = on_shift
        self.shift: dict | None = None
        """The shift check of the last measurement (None: no calibrator)."""
        self.command = "RoleAdherence"
        """Whose the shift check's ShiftWarning is ("score" when the command line scores)."""
        if isinstance(judges, str) and judges != "population":  # "a,b" as the command line passes it
            judges = clean_id_list(judges)
        self.threshold = float(threshold)  # an int 1 is the threshold 1.0
        self.strict_mode = strict_mode
        self.output_mode = output_mode
        self.granularity = granularity
        self.include_reason = include_reason
        self.scorer = scorer_spec(scorer)
        if self.scorer is not None and calibrator is None:
            judge = None  # the raw score is the measurement
        self.judge = None if judge is None else judge_config(judge)
        if self.judge is None and self.scorer is None:
            raise InputError("neither a judge nor a scorer.", fix="pass judge= or scorer=.")
        self.cache = cache
        self.model: LoadedModel | None = None
        self.judge_mismatch: list[str] = []
        if calibrator is not None:
            self._load_calibrator(calibrator, allow_judge_mismatch)
        elif self.scorer is not None:
            from rubric.scorers.features import feature_question

            question = feature_question(self.scorer["name"])
            self.rubric = Rubric(f"reference_{self.scorer['name']}", (question,), question.id)
        else:
            self.rubric = as_rubric(rubric)
        self.judges = judges
        self._judge_idx, self.judges_label, self.unseen_judges = judge_indices(self.model, judges)
        self.adheres_at, self._above = adherence_cut(self.rubric, adheres_at)
        self._backend: EmbeddingBackend | None = None
        self._scorer: Scorer | None = None
        self.decision_threshold = (
            None
            if risk is None
            else decision_threshold(self.model, self.judges, calibrator, self.adheres_at, risk, delta)
        )

    # public ---------------------------------------------------------------------------------------------
    def measure(self, conversation: Conversation | Mapping[str, Any]) -> AdherenceResult:
        """Score one conversation (a Conversation or a record as in conversations.jsonl)."""
        return self.measure_many([conversation])[0]

    async def a_measure(self, conversation: Conversation | Mapping[str, Any]) -> AdherenceResult:
        """`measure` for async code: the judge is queried on the running event loop."""
        return (await self.a_measure_many([conversation]))[0]

    def measure_many(
        self, conversations: Iterable[Conversation | Mapping[str, Any]], *, progress: bool = False
    ) -> list[AdherenceResult]:
        """Score many conversations with one gather (one batch for the embedding judge)."""
        return run_sync(self.a_measure_many(conversations, progress=progress))

    async def a_measure_many(
        self, conversations: Iterable[Conversation | Mapping[str, Any]], *, progress: bool = False
    ) -> list[AdherenceResult]:
        convs = as_conversations(conversations)
        gathered = None
        if self.judge is not None:
            gathered = await a_gather(
                convs,
                self._judge_rubric(),
                self.judge,
                granularity=self.granularity,
                cache=self.cache,
                include_reason=self.include_reason,
                progress=progress,
                backend=self._reusable_backend(),
            )
        if self.scorer is not None:
            gathered = self._with_scores(convs, gathered, self.scorer)
        assert gathered is not None, "RoleAdherence has a judge or a scorer (__init__ refuses neither)"
        return self._results(convs, gathered)

    # internals ------------------------------------------------------------------------------------------
    def _load_calibrator(self, calibrator: str | Path, allow_judge_mismatch: bool) -> None:
        """Set the model and its rubric from a calibrator directory, refusing one that does not fit the
        scorer or (unless allowed) was trained on another judge's distributions."""
        from calibration.model.files import load_model
        from rubric.judge.identity import check_same_judge, judge_identity

        if not Path(calibrator).is_dir():
            raise InputError(
                "calibrator not found.", path=calibrator, fix="pass calibrator=DIR written by `role-rubric train`."
            )
        self.model = model = load_model(calibrator)
        self.rubric = model.rubric
        if self.scorer is not None:
            check_scorer_calibrator(model, self.scorer["name"], with_judge=self.judge is not None)
        if self.judge is not None and self.scorer is None:
            self.judge_mismatch = check_same_judge(
                model.judge_identity,
                judge_identity(self.judge, self.rubric),
                allow=allow_judge_mismatch,
                command="score",
            )

    def _judge_rubric(self) -> Rubric:
        """The rubric the judge is asked: without the scorer's feature question."""
        if self.scorer is None:
            return self.rubric
        own = f"ref_{self.scorer['name']}"
        return Rubric(self.rubric.name, tuple(q for q in self.rubric.questions if q.id != own), self.rubric.target)

    def _with_scores(
        self, convs: list[Conversation], gathered: GatherResult | None, spec: dict[str, Any]
    ) -> GatherResult:
        """The scorer's feature rows (ref_<name>) appended to the judge's answers; spec: self.scorer."""
        from rubric.judge.outputs import GatherSummary
        from rubric.scorers import EmbeddingStore, make_scorer
        from rubric.scorers.features import feature_question, feature_rows, score_turns

        if self.granularity != "turn":
            raise InputError("reference scorers score turns only.", fix="use granularity='turn'.")
        if self._scorer is None:
            store = EmbeddingStore(cache=self.cache)
            self._scorer = make_scorer(spec["name"], store=store, **spec["params"])
        rows = feature_rows(score_turns(convs, self._scorer), feature_question(spec["name"]))
        if gathered is None:
            return GatherResult(rows, None, pd.DataFrame(), GatherSummary(items=len(rows) // 2, questions=1))
        return GatherResult(
            pd.concat([gathered.llm, rows], ignore_index=True),
            gathered.reasons,
            gathered.failures,
            gathered.summary,
        )

    def _reusable_backend(self) -> EmbeddingBackend | None:
        # The embedding judge is a local model: load it once per RoleAdherence. LLM clients are bound to an
        # event loop, so gather builds (and closes) them per call.
        if self.judge is not None and self.judge.backend == "embedding":
            if self._backend is None:
                self._backend = make_backend(self.judge)
            return self._backend
        return None

    def _results(self, convs: list[Conversation], gathered: GatherResult) -> list[AdherenceResult]:
        """One result per conversation from the gathered answers, in the order of `convs`."""
        from calibration.data.dataset import dataset_from_frames

        if gathered.llm.empty:  # name what failed: score writes no failures.csv to look in
            failed = gathered.failures
            first = f"; first: {failed['error'].iloc[0]}" if len(failed) and "error" in failed else ""
            raise InputError(
                f"the judge answered no question ({len(failed)} requests failed{first}).",
                fix="check judge.base_url, the key and the model, then retry.",
            )
        llm = gathered.llm.copy()
        llm["turn"] = llm["turn"].map(lambda t: "" if pd.isna(t) else str(int(t)))  # conversation items: ""
        ds = dataset_from_frames(self.rubric, llm)
        raw = ds.probs.astype(np.float64)
        probs = raw if self.model is None else self._calibrated(ds, self.model)
        if self.model is not None:
            self.shift = handle_shift(
                self.model.record.shift_summary(),
                ds,
                RoleTexts(
                    {c.conversation_id: c.chatbot_role for c in convs if c.chatbot_role},
                    {c.chatbot_role: role_name(c.chatbot_role, c.record) for c in convs if c.chatbot_role},
                ),
                self.on_shift,
                self.command,
            )
        index = {key: i for i, key in enumerate(ds.item_keys())}
        reasons = {}
        if gathered.reasons is not None:
            reasons = {
                (str(c), "" if pd.isna(t) else str(t)): r for c, t, r in gathered.reasons.itertuples(index=False)
            }
        t = ds.target_index
        out = []
        for conv in convs:
            turns = range(len(conv.turns)) if self.granularity == "turn" else [None]
            results = []
            for turn in turns:
                key = (conv.conversation_id, "" if turn is None else str(turn))
                if key not in index:
                    raise InputError(
                        f"no judge answers for conversation {conv.conversation_id!r} turn {turn}.",
                        fix="the judge failed on this item; check the endpoint and retry.",
                    )
                i = index[key]
                results.append(self._turn_result(turn, probs[i], raw[i], t, reasons.get(key)))
            out.append(self._conversation_result(conv.conversation_id, results))
        return out

    def _turn_result(self, turn: int | None, p: np.ndarray, raw: np.ndarray, t: int, reason: str | None) -> TurnResult:
        """One item's result from its (Q, K) distributions `p` (calibrated, or the judge's) and the judge's
        own `raw`; `t` is the target question's index."""
        k = len(self.rubric.questions[t].options)
        adherence = float(p[t, :k][self._above].sum())
        adheres = adherence >= self.threshold
        return TurnResult(
            turn=turn,
            distributions=self._dists(p),
            expected={
                q.id: float(p[n, : len(q.options)] @ np.asarray(q.values)) for n, q in enumerate(self.rubric.questions)
            },
            adherence=adherence,
            adheres=adheres,
            turn_score=adherence if self.output_mode == "continuous" else float(adheres),
            judge_distributions=self._dists(raw),
            reason=reason,
            decision=None
            if self.decision_threshold is None
            else str(decide(np.array([adherence]), self.decision_threshold)[0]),
        )

    def _conversation_result(self, conversation_id: str, results: list[TurnResult]) -> AdherenceResult:
        """The conversation score and success of one conversation's turn results."""
        score = float(np.mean([r.turn_score for r in results]))
        success = all(r.adheres for r in results) if self.strict_mode else score >= self.threshold
        return AdherenceResult(
            conversation_id,
            score,
            bool(success),
            self.threshold,
            self.strict_mode,
            self.output_mode,
            self.model is not None,
            self.rubric.target,
            self.adheres_at,
            self.judges_label,
            results,
        )

    def _calibrated(self, ds: Dataset, model: LoadedModel) -> np.ndarray:
        """(N, Q, K) calibrated distributions averaged over the chosen judges (mixture of their answers)."""
        import torch

        assert self._judge_idx is not None, "judge_indices chooses judges wherever there is a model"
        X = torch.from_numpy(ds.features(model.spec))
        items = np.arange(len(ds.items))
        total = np.zeros(ds.probs.shape, dtype=np.float64)
        for j in self._judge_idx:
            total += model.proba(X, items, np.full(len(items), int(j), dtype=np.int64))
        return total / len(self._judge_idx)

    def _dists(self, p: np.ndarray) -> dict[str, dict[float, float]]:
        return {
            q.id: {float(v): float(p[n, o]) for o, v in enumerate(q.values)}
            for n, q in enumerate(self.rubric.questions)
        }
