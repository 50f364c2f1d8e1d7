"""target=mlflow: the calibrated scores as feedback on the traces, a release estimate and the reviewers'
agreement as runs, on an MLflow tracking server (the mlflow-skinny client).

Per judged turn, one feedback on the turn's trace, attached to the span of the reply: name
`role_rubric/adherence`, value the calibrated adherence, source LLM_JUDGE with the source id
`role-rubric/model-<checksum>`, a one-line rationale, and metadata (each question's calibrated and raw expected
answer, the shift check, the judge). Per conversation, one feedback `role_rubric/session_adherence` where MLflow
keeps session assessments: on the session's first trace (by request time), with `mlflow.trace.session` in its
metadata, as `mlflow.genai.evaluate` logs a session-level scorer's. A value already there from the same source
is updated in place (or left alone when equal), so publishing twice gives the same state and a stopped
publish resumes by running it again. Every trace is looked up before anything is written: traces deleted
since the import are one line, with nothing published.

`estimate=DIR` -> a run: the rate and mean with their intervals, overall, per role and per question, as
metrics; the gate and the transport audit as tags; alpha, crossfit, sequential and the model's checksum as
params; estimate.json and an HTML page of its table as artifacts; the baseline release's run, where it was
published, linked by a tag. `cv=DIR` -> a run: per question the reviewers' ceiling, the calibrated judge's
agreement and the alternative annotator test, and per reviewer the same, each reviewer apart. A run is found
again by the checksum of what it logs, so publishing twice keeps one run.

The token (MLFLOW_TRACKING_TOKEN, or a user and password in MLFLOW_TRACKING_USERNAME/PASSWORD) is read by the
client from the environment and never printed.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import re
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from calibration.publish.results import EVALUATION_NAME, SESSION_NAME, Scored, SessionScore, TurnScore
from calibration.publish.state import mask_url
from rubric.errors import InputError

SESSION_KEY = "mlflow.trace.session"
TAG = "role_rubric"
"""The prefix of every tag role-rubric sets on a run."""


def publish(
    tracking_uri: str,
    *,
    scored: Scored | None = None,
    estimate: str | Path | None = None,
    cv: str | Path | None = None,
    experiment: str | None = None,
    run_name: str | None = None,
    model: str | Path | None = None,
    timeout: float = 10.0,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The scores as feedback, an estimate= and a cv= folder as runs (experiment: the runs'; default the one
    the conversations were imported from; model: the calibrator an estimate used, its checksum a param)."""
    uri = str(tracking_uri).rstrip("/")
    out: dict[str, Any] = {}
    with connected(uri, float(timeout)):
        if scored is not None:
            out["feedback"] = publish_scores(uri, scored, say=say)
        if estimate is not None:
            out["estimate_run"] = publish_estimate(
                uri, Path(estimate), experiment=experiment, run_name=run_name, model=model, scored=scored, say=say
            )
        if cv is not None:
            out["cv_run"] = publish_cv(uri, Path(cv), experiment=experiment, run_name=run_name, say=say)
    return out


@contextlib.contextmanager
def connected(uri: str, timeout: float) -> Iterator[None]:
    """Check the server answers (one line naming it, within `timeout`, if not), then let the client retry
    little and wait at most `timeout` per request while publishing."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(uri + "/health", timeout=timeout) as reply:
            ok = reply.status == 200
    except OSError as exc:
        reason = getattr(exc, "reason", None) or exc
        raise InputError(
            f"the MLflow server at {mask_url(uri)} does not answer ({_masked(reason)}).",
            fix="start it (`mlflow server ...`) or pass tracking_uri= the address it listens on.",
        ) from None
    if not ok:
        raise InputError(
            f"{mask_url(uri)} is not an MLflow server (its /health did not answer OK).", fix="check tracking_uri=."
        )
    wanted = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, round(timeout)))}
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _masked(text: Any) -> str:
    from rubric.responses import mask_secrets

    return mask_secrets(str(text), os.environ.get("MLFLOW_TRACKING_TOKEN"), os.environ.get("MLFLOW_TRACKING_PASSWORD"))


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _tracing(uri: str) -> Any:
    from mlflow.tracing.client import TracingClient

    return TracingClient(tracking_uri=uri)


def _server_error(uri: str, exc: Exception, what: str) -> InputError:
    return InputError(
        f"the MLflow server at {mask_url(uri)} refused {what}: {_masked(getattr(exc, 'message', exc))[:300]}",
        fix="check the token in MLFLOW_TRACKING_TOKEN and the server's log, then publish again: it resumes.",
    )


# ---- per-turn and session feedback -------------------------------------------------------------------------


def trace_id_of(t: TurnScore) -> str:
    """The MLflow trace of a turn: the one it was imported from, else the id MLflow gives an OTel trace."""
    return t.mlflow_trace_id or f"tr-{t.trace_id}"


def publish_scores(uri: str, scored: Scored, *, say: Callable[[str], None]) -> dict[str, int]:
    """Log or update one feedback per turn and per conversation: counts of created, updated, unchanged."""
    from mlflow.entities import AssessmentSource, Feedback

    client = _tracing(uri)
    infos = _trace_infos(client, uri, scored)
    source = AssessmentSource(source_type="LLM_JUDGE", source_id=scored.model.source_id)
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    for t in scored.turns:
        tid = trace_id_of(t)
        wanted = Feedback(
            name=EVALUATION_NAME,
            value=t.adherence,
            source=source,
            rationale=scored.rationale(t),
            metadata=scored.metadata(t),
            span_id=t.span_id,
        )
        found = _existing(infos[tid], EVALUATION_NAME, source.source_id, lambda a, t=t: a.span_id == t.span_id)
        counts[_put(client, uri, tid, wanted, found)] += 1
    for s in scored.sessions:
        if not s.turns:
            continue
        tid = _first_trace(s, infos)
        metadata = {**scored.session_metadata(s), "success": str(s.success).lower(), SESSION_KEY: s.conversation_id}
        wanted = Feedback(
            name=SESSION_NAME,
            value=s.score,
            source=source,
            rationale=scored.session_rationale(s),
            metadata=metadata,
        )
        found = _existing(
            infos[tid],
            SESSION_NAME,
            source.source_id,
            lambda a, s=s: (a.metadata or {}).get(SESSION_KEY) == s.conversation_id,
        )
        counts[_put(client, uri, tid, wanted, found)] += 1
    say(
        f"publish: {len(scored.turns)} turn and {len(scored.sessions)} session feedbacks on {mask_url(uri)}: "
        f"{counts['created']} created, {counts['updated']} updated, {counts['unchanged']} unchanged "
        f"(source {scored.model.source_id})"
    )
    return counts


def _trace_infos(client: Any, uri: str, scored: Scored) -> dict[str, Any]:
    """Every trace of the scores, looked up before anything is written (a deleted one stops the publish)."""
    from mlflow.exceptions import MlflowException

    infos, missing = {}, []
    for tid in dict.fromkeys(trace_id_of(t) for t in scored.turns):
        try:
            infos[tid] = client.get_trace_info(tid)
        except MlflowException as exc:
            if exc.error_code not in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND", "INVALID_PARAMETER_VALUE"):
                raise _server_error(uri, exc, "a trace look-up") from None
            missing.append(tid)
    if missing:
        raise InputError(
            f"{len(missing)} of the {len(infos) + len(missing)} traces of these scores are not on {mask_url(uri)} "
            f"(deleted since the import, or another server): {', '.join(missing[:3])}"
            + (", ..." if len(missing) > 3 else "")
            + "; nothing was published.",
            path=scored.scores,
            fix="publish to the server the conversations were imported from, or import and score them again.",
        )
    return infos


def _existing(info: Any, name: str, source_id: str, same: Callable[[Any], bool]) -> Any | None:
    """This source's valid assessment `name` on the trace that `same` picks, if there is one."""
    for a in info.assessments or []:
        if (
            a.name == name
            and a.source is not None
            and a.source.source_id == source_id
            and a.valid is not False
            and same(a)
        ):
            return a
    return None


def _put(client: Any, uri: str, trace_id: str, wanted: Any, found: Any | None) -> str:
    """Create, update or leave one assessment: which it was."""
    from mlflow.exceptions import MlflowException

    try:
        if found is None:
            client.log_assessment(trace_id, wanted)
            return "created"
        same = (
            found.value == wanted.value
            and found.rationale == wanted.rationale
            and (found.metadata or {}) == (wanted.metadata or {})
        )
        if same:
            return "unchanged"
        client.update_assessment(trace_id=trace_id, assessment_id=found.assessment_id, assessment=wanted)
        return "updated"
    except MlflowException as exc:
        raise _server_error(uri, exc, f"a feedback on trace {trace_id}") from None


def _first_trace(s: SessionScore, infos: dict[str, Any]) -> str:
    """The session's first trace by request time: where MLflow keeps a session's assessments."""
    ids = list(dict.fromkeys(trace_id_of(t) for t in s.turns))
    return min(ids, key=lambda tid: (infos[tid].request_time or 0, ids.index(tid)))


# ---- runs: an estimate, a cv -------------------------------------------------------------------------------


def _experiment(uri: str, name: str | None, data: Path | None, scored: Scored | None) -> tuple[str, str]:
    """(experiment id, name): experiment= or the one the conversations were imported from; never created."""
    if name is None:
        for source in (scored.source if scored is not None else {}, _source_of(data)):
            if source.get("kind") == "mlflow" and source.get("experiment"):
                name = source["experiment"]
                break
    if name is None:
        raise InputError("which MLflow experiment should the run go to?", fix="pass experiment=NAME.")
    found = _client(uri).get_experiment_by_name(str(name))
    if found is None:
        raise InputError(
            f"there is no experiment {name!r} on {mask_url(uri)}.",
            fix="pass experiment= the name of an existing experiment (the one the traces are in).",
        )
    return found.experiment_id, str(name)


def _source_of(data: Path | None) -> dict[str, Any]:
    """The `source` block of a release folder's conversations (where they were imported from)."""
    file = None if data is None else data / "conversations.jsonl"
    if file is None or not file.is_file():
        return {}
    with file.open() as f:
        first = f.readline()
    with contextlib.suppress(json.JSONDecodeError):
        return dict(json.loads(first).get("source") or {})
    return {}


def metric_key(*parts: Any) -> str:
    """An MLflow metric key from parts (MLflow allows letters, digits, _ - . / and spaces)."""
    return "/".join(re.sub(r"[^A-Za-z0-9_\-. ]+", "_", str(p)).strip(" _") or "_" for p in parts)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _find_run(client: Any, experiment_id: str, kind: str, sha: str) -> Any | None:
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.`{TAG}.kind` = '{kind}' and tags.`{TAG}.sha256` = '{sha}'", max_results=1
    )
    return runs[0] if runs else None


def _log_run(
    uri: str,
    experiment_id: str,
    kind: str,
    sha: str,
    name: str,
    *,
    metrics: dict[str, float],
    params: dict[str, str],
    tags: dict[str, str],
    artifacts: list[Path],
) -> tuple[str, bool]:
    """Log a run once: (its id, whether it was there already). A run left unfinished is completed."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.exceptions import MlflowException

    client = _client(uri)
    try:
        found = _find_run(client, experiment_id, kind, sha)
        if found is not None and found.data.tags.get(f"{TAG}.complete") == "true":
            return found.info.run_id, True
        run = found or client.create_run(experiment_id, run_name=name, tags={f"{TAG}.kind": kind, f"{TAG}.sha256": sha})
        run_id = run.info.run_id
        stamp = 0  # every value at step 0, timestamp 0: logging them again changes nothing a reader sees
        items = [Metric(k, float(v), stamp, 0) for k, v in metrics.items()]
        for start in range(0, len(items), 900):  # the server's batch limit is 1000 metrics
            client.log_batch(run_id, metrics=items[start : start + 900])
        client.log_batch(
            run_id,
            params=[Param(k, str(v)[:6000]) for k, v in params.items()],
            tags=[RunTag(k, str(v)[:8000]) for k, v in tags.items()],
        )
        for path in artifacts:
            client.log_artifact(run_id, str(path))
        client.set_tag(run_id, f"{TAG}.complete", "true")
        client.set_terminated(run_id, "FINISHED")
    except MlflowException as exc:
        raise _server_error(uri, exc, f"the {kind} run") from None
    return run_id, False


def estimate_metrics(result: dict) -> dict[str, float]:
    """The rate and mean, overall, per role and per question: each method's estimate and interval, the counts."""
    metrics: dict[str, float] = {}

    def block(prefix: tuple, quantity: str, b: dict | None) -> None:
        if not b:
            return
        for method in ("ppi", "humans"):
            for part in ("estimate", "low", "high"):
                value = (b.get(method) or {}).get(part)
                if value is not None:
                    metrics[metric_key(*prefix, quantity, method if part == "estimate" else f"{method}_{part}")] = value
        for key in (
            "calibrator",
            "judge",
            "n_labelled_conversations",
            "n_labelled_turns",
            "n_conversations",
            "n_turns",
        ):
            if isinstance(b.get(key), int | float) and not isinstance(b.get(key), bool):
                metrics[metric_key(*prefix, quantity, key)] = b[key]
        effective = b.get("effective_labels")
        if isinstance(effective, int | float):
            metrics[metric_key(*prefix, quantity, "effective_labels")] = effective
        elif isinstance(effective, dict) and isinstance(effective.get("n"), int | float):
            metrics[metric_key(*prefix, quantity, "effective_labels")] = effective["n"]

    for quantity in ("rate", "mean"):
        block((), quantity, result.get(quantity))
        for role, blocks in (result.get("by_role") or {}).items():
            block(("role", role), quantity, blocks.get(quantity))
        for question, blocks in (result.get("by_question") or {}).items():
            block(("question", question), quantity, blocks.get(quantity))
        diff = (result.get("difference") or {}).get(quantity) or {}
        for part in ("estimate", "low", "high", "p"):
            if isinstance(diff.get(part), int | float):
                metrics[metric_key("vs_baseline", quantity, part)] = diff[part]
    audit = result.get("transport_audit") or {}
    for part in ("bias", "low", "high"):
        if isinstance(audit.get(part), int | float):
            metrics[metric_key("transport_audit", part)] = audit[part]
    return metrics


def _gate_tag(result: dict) -> str:
    gate = result.get("gate") or {}
    if gate.get("fail_under") is None and not gate.get("fail_if_worse"):
        return "none"
    return "passed" if gate.get("passed") else "failed: " + "; ".join(map(str, gate.get("failed") or []))


def publish_estimate(
    uri: str,
    folder: Path,
    *,
    experiment: str | None,
    run_name: str | None,
    model: str | Path | None,
    scored: Scored | None,
    say: Callable[[str], None],
) -> str:
    """An `estimate` output folder as a run (see the module docstring): its id."""
    from calibration.publish.results import model_info

    file = folder / "estimate.json" if folder.is_dir() else folder
    if not file.is_file():
        raise InputError(
            "no estimate.json here.", path=folder, fix="pass estimate= the out= folder of `role-rubric estimate`."
        )
    result = json.loads(file.read_text())
    data = Path(str(result.get("data", "")))
    experiment_id, experiment = _experiment(uri, experiment, data, scored)
    if model is None and scored is None:
        raise InputError(
            "estimate= needs model= (the calibrator it used), whose checksum the run records.", fix="pass model=DIR."
        )
    info = scored.model if scored is not None else model_info(model)
    page = _estimate_page(result, file.with_name("estimate.html") if folder.is_dir() else folder.with_suffix(".html"))
    release = str(data.resolve())
    tags = {
        f"{TAG}.release": release,
        f"{TAG}.gate": _gate_tag(result),
        f"{TAG}.transport_audit": str((result.get("transport_audit") or {}).get("verdict", "not run")),
        f"{TAG}.shift_check": "fired"
        if (result.get("shift") or {}).get("fired")
        else "passed"
        if (result.get("shift") or {}).get("checked")
        else "not checked",
        f"{TAG}.target": str(result.get("target")),
    }
    baseline = result.get("baseline") or {}
    if baseline.get("data"):
        tags[f"{TAG}.baseline_release"] = str(Path(str(baseline["data"])).resolve())
        linked = _baseline_run(uri, experiment_id, tags[f"{TAG}.baseline_release"])
        if linked is not None:
            tags[f"{TAG}.baseline_run_id"] = linked
    crossfit = result.get("crossfit")
    params = {
        "alpha": result.get("alpha"),
        "population": result.get("population"),
        "adheres_at": result.get("adheres_at"),
        "crossfit": (crossfit.get("k") if isinstance(crossfit, dict) else crossfit) or "none",
        "sequential": str("sequential" in result).lower(),
        "model_sha256": info.checksum,
    }
    run_id, there = _log_run(
        uri,
        experiment_id,
        "estimate",
        _sha(file) + info.checksum[:16],
        run_name or f"estimate {data.name or folder.name}",
        metrics=estimate_metrics(result),
        params={k: str(v) for k, v in params.items()},
        tags=tags,
        artifacts=[file, page],
    )
    say(
        f"publish: the estimate {'was already' if there else 'is now'} run {run_id} of experiment {experiment!r} on "
        f"{mask_url(uri)}"
        + (f" (baseline run {tags[f'{TAG}.baseline_run_id']})" if f"{TAG}.baseline_run_id" in tags else "")
    )
    return run_id


def _baseline_run(uri: str, experiment_id: str, release: str) -> str | None:
    """The latest published estimate run of the baseline release, if there is one."""
    runs = _client(uri).search_runs(
        [experiment_id],
        filter_string=f"tags.`{TAG}.kind` = 'estimate' and tags.`{TAG}.release` = '{release}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def _estimate_page(result: dict, path: Path) -> Path:
    """estimate.html beside estimate.json: the printed table, the gate and the audit on one page."""
    from calibration.release.gate import gate_line
    from calibration.release.table import format_table
    from rubric.files import atomic_write_text

    audit = (result.get("transport_audit") or {}).get("verdict", "not run")
    body = "\n".join(
        [
            "<!doctype html><meta charset='utf-8'><title>role-rubric estimate</title>",
            f"<h1>Release {html.escape(str(result.get('data')))}</h1>",
            f"<pre>{html.escape(format_table(result))}</pre>",
            f"<p>{html.escape(gate_line(result))}</p>",
            f"<p>Transport audit: {html.escape(str(audit))}</p>",
        ]
    )
    atomic_write_text(path, body + "\n")
    return path


def cv_metrics(reviewers: dict, predictions: Path | None) -> dict[str, float]:
    """Per question: the reviewers' ceiling, the calibrated judge's agreement, the alternative annotator
    test; per reviewer (the target question): the same, each reviewer apart."""
    metrics: dict[str, float] = {}
    for question, block in (reviewers.get("questions") or {}).items():
        for who in ("reviewers", "calibrated"):
            for stat, value in (block.get(who) or {}).items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    name = "reviewer_ceiling" if who == "reviewers" else "calibrated_judge"
                    metrics[metric_key(question, name, stat)] = value
        test = block.get("alt_test") or {}
        for stat in ("winning_rate", "advantage", "tested"):
            if isinstance(test.get(stat), int | float):
                metrics[metric_key(question, "alt_test", stat)] = test[stat]
        if test.get("outcome"):
            metrics[metric_key(question, "alt_test", "passes")] = float(test["outcome"] == "passes")
        for r in test.get("reviewers") or []:
            for stat in ("rho_judge", "rho_reviewer", "p_adjusted", "shared_turns"):
                if isinstance(r.get(stat), int | float):
                    metrics[metric_key(question, "reviewer", r["judge_id"], f"alt_test_{stat}")] = r[stat]
            metrics[metric_key(question, "reviewer", r["judge_id"], "alt_test_judge_wins")] = float(
                bool(r.get("judge_wins"))
            )
    if predictions is not None and predictions.is_file():
        metrics |= per_reviewer_agreement(predictions)
    return metrics


def per_reviewer_agreement(predictions: Path) -> dict[str, float]:
    """From cv's predictions.csv (the calibrated method): per question and reviewer, the RMSE of the reviewer's
    answer against the other reviewers' mean (the ceiling) and against the calibrated prediction for them."""
    import numpy as np
    import pandas as pd

    frame = pd.read_csv(predictions, dtype={"conversation_id": str, "judge_id": str})
    frame = frame[(frame["method"] == "calibrated") & frame["answer"].notna()]
    frame = frame.drop_duplicates(["conversation_id", "turn", "judge_id", "question_id"])
    metrics: dict[str, float] = {}
    for question, rows in frame.groupby("question_id"):
        turn = rows.groupby(["conversation_id", "turn"])["answer"]
        total, count = turn.transform("sum"), turn.transform("count")
        others = (total - rows["answer"]) / (count - 1).where(count > 1)
        for judge_id, mine in rows.assign(others=others).groupby("judge_id"):
            shared = mine["others"].notna()
            if shared.any():
                ceiling = float(np.sqrt(np.mean((mine["answer"][shared] - mine["others"][shared]) ** 2)))
                metrics[metric_key(question, "reviewer", judge_id, "ceiling_rmse")] = ceiling
            metrics[metric_key(question, "reviewer", judge_id, "calibrated_rmse")] = float(
                np.sqrt(np.mean((mine["answer"] - mine["expected"]) ** 2))
            )
            metrics[metric_key(question, "reviewer", judge_id, "n")] = float(len(mine))
    return metrics


def publish_cv(
    uri: str, folder: Path, *, experiment: str | None, run_name: str | None, say: Callable[[str], None]
) -> str:
    """A `cv` output folder as a run: the reviewers' agreement (see the module docstring); its id."""
    file = folder / "reviewers.json"
    if not file.is_file():
        raise InputError("no reviewers.json here.", path=folder, fix="pass cv= the out= folder of `role-rubric cv`.")
    reviewers = json.loads(file.read_text())
    metrics_file = folder / "metrics.json"
    cv_meta = json.loads(metrics_file.read_text()) if metrics_file.is_file() else {}
    experiment_id, experiment = _experiment(uri, experiment, None, None)
    tags = {f"{TAG}.verdict.{q}": b.get("verdict", "")[:5000] for q, b in (reviewers.get("questions") or {}).items()}
    params = {"target": cv_meta.get("target"), "folds": cv_meta.get("folds"), "seed": cv_meta.get("seed"),
              "epsilon": reviewers.get("epsilon")}  # fmt: skip
    run_id, there = _log_run(
        uri,
        experiment_id,
        "cv",
        _sha(file),
        run_name or f"cv {folder.name}",
        metrics=cv_metrics(reviewers, folder / "predictions.csv"),
        params={k: str(v) for k, v in params.items() if v is not None},
        tags=tags,
        artifacts=[p for p in (file, metrics_file) if p.is_file()],
    )
    say(f"publish: the reviewers' agreement {'was already' if there else 'is now'} run {run_id} of experiment "
        f"{experiment!r} on {mask_url(uri)}")  # fmt: skip
    return run_id
