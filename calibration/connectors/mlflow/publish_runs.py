"""target=mlflow's runs: an `estimate` output and a `cv` output, each one run in an MLflow experiment.

`estimate=DIR` -> a run: the rate and mean with their intervals, overall, per role and per question, as
metrics; the gate and the transport audit as tags; alpha, crossfit, sequential and the model's checksum as
params; estimate.json and an HTML page of its table as artifacts; the baseline release's run, where it was
published, linked by the tag `role_rubric.baseline_run_id`. `cv=DIR` -> a run: per question the reviewers'
ceiling, the calibrated judge's agreement and the alternative annotator test, and per reviewer the same, each
reviewer apart. A run is found again by the checksum of what it logs (tag `role_rubric.sha256`), so
publishing twice keeps one run, and a run left unfinished is completed by the next publish.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calibration.connectors.mlflow.publish_client import client, server_error
from calibration.publish.results import Scored
from calibration.publish.state import mask_url
from rubric.errors import InputError

TAG = "role_rubric"
"""The prefix of every tag role-rubric sets on a run."""


def _experiment(uri: str, name: str | None, data: Path | None, scored: Scored | None) -> tuple[str, str]:
    """(experiment id, name): experiment= or the one the conversations were imported from; never created."""
    if name is None:
        for source in (scored.source if scored is not None else {}, _source_of(data)):
            if source.get("kind") == "mlflow" and source.get("experiment"):
                name = source["experiment"]
                break
    if name is None:
        raise InputError("which MLflow experiment should the run go to?", fix="pass experiment=NAME.")
    found = client(uri).get_experiment_by_name(str(name))
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


def _find_run(api: Any, experiment_id: str, kind: str, sha: str) -> Any | None:
    runs = api.search_runs(
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

    api = client(uri)
    try:
        found = _find_run(api, experiment_id, kind, sha)
        if found is not None and found.data.tags.get(f"{TAG}.complete") == "true":
            return found.info.run_id, True
        run = found or api.create_run(experiment_id, run_name=name, tags={f"{TAG}.kind": kind, f"{TAG}.sha256": sha})
        run_id = run.info.run_id
        stamp = 0  # every value at step 0, timestamp 0: logging them again changes nothing a reader sees
        items = [Metric(k, float(v), stamp, 0) for k, v in metrics.items()]
        for start in range(0, len(items), 900):  # the server's batch limit is 1000 metrics
            api.log_batch(run_id, metrics=items[start : start + 900])
        api.log_batch(
            run_id,
            params=[Param(k, str(v)[:6000]) for k, v in params.items()],
            tags=[RunTag(k, str(v)[:8000]) for k, v in tags.items()],
        )
        for path in artifacts:
            api.log_artifact(run_id, str(path))
        api.set_tag(run_id, f"{TAG}.complete", "true")
        api.set_terminated(run_id, "FINISHED")
    except MlflowException as exc:
        raise server_error(uri, exc, f"the {kind} run") from None
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
    from calibration.publish.results import model_info, read_output

    file, result = read_output(folder, "estimate.json", command="estimate", key="estimate", needs="rate")
    data = Path(str(result.get("data", "")))
    experiment_id, experiment = _experiment(uri, experiment, data, scored)
    if scored is not None:
        info = scored.model
    elif model is not None:
        info = model_info(model)
    else:
        raise InputError(
            "estimate= needs model= (the calibrator it used), whose checksum the run records.", fix="pass model=DIR."
        )
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
        "ci_level": 1 - float(result.get("alpha", 0.1)),  # every *_low/*_high metric's interval level
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
    runs = client(uri).search_runs(
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
    from calibration.publish.results import read_output

    file, reviewers = read_output(folder, "reviewers.json", command="cv", key="cv")
    metrics_file = folder / "metrics.json"
    cv_meta = read_output(metrics_file, "metrics.json", command="cv", key="cv")[1] if metrics_file.is_file() else {}
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
