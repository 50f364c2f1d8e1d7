"""Cross-validation grouped by conversation: the calibrated model and the baselines, out of fold (the
command: calibration/commands/cv.py).

All folds x ensemble members train as one batched computation; each fold's members are pooled and
recalibrated on their own validation rows (never on the fold's test rows). Every method predicts the target
question for every held-out (item, judge) row with a human answer; predictions are pooled over folds.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from calibration.data.dataset import Dataset
from calibration.data.union import data_paths, dataset_labels
from calibration.evaluation.baselines import BASELINES, FITTED_BASELINES, NEEDS_TARGET_DISTRIBUTION
from calibration.evaluation.cv_predictions import PREVIOUS_FILE, TRAINABLE
from calibration.evaluation.metrics import agreement, mean_nll
from calibration.evaluation.out_of_fold import Members, oof_members, oof_network, pool_members
from calibration.evaluation.releases import (
    PREVIOUS,
    deploy_basis,
    deploy_choice,
    deploy_rmse,
    item_folds,
)
from calibration.model.forked import map_dealt
from calibration.model.settings import Settings, torch_threads, training_workers
from rubric.files import atomic_to_csv
from rubric.jsonfile import write_json

METHODS = (
    "calibrated",
    "constant",
    "judge_mean",
    "random",
    "argmax_llm",
    "expected_llm",
    "calibrated_llm",
    "linear",
    "ordinal",
)


@dataclass
class CVResult:
    """Out-of-fold predictions of the target question (long form, see module docstring) and metrics."""

    predictions: pd.DataFrame
    metrics: dict[str, dict[str, float]]
    seconds: float
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    """Baselines that could not run on this data, with the reason."""
    members: Members | None = None
    """With keep_models=True: the calibrated model's trained (fold, member) models (`oof_members`)."""
    previous: pd.DataFrame | None = None
    """Several directories: the last directory's rows predicted by the network trained without it
    (`previous_predictions`), beside the out-of-fold predictions, not among them."""


def cross_validate(
    ds: Dataset,
    settings: Settings,
    *,
    folds: int = 5,
    seed: int = 0,
    fold_seed: int = 0,
    baselines: bool = True,
    progress: bool = False,
    groups: np.ndarray | None = None,
    keep_models: bool = False,
) -> CVResult:
    """Out-of-fold target predictions of the calibrated model (and the baselines) for every labelled row.

    `fold_seed` fixes which conversations share a fold; `seed` fixes everything random in training
    (initial weights, batch order, validation splits), so seeds can be compared on the same folds.
    groups: (N,) group of every item kept in one fold (default: its conversation; see `item_groups`).
    keep_models: keep the calibrated model's trained models in `CVResult.members` (otherwise they are
    freed before the baselines train: with many judges they are large).
    """
    start = time.perf_counter()
    t = ds.target_index
    rows = np.flatnonzero(ds.answers[:, t] >= 0)  # rows with a human answer to the target
    fold_of_row = item_folds(ds, groups, folds, fold_seed)[ds.label_item]
    trained = oof_members(ds, settings, fold_of_row, folds, seed, progress=progress)
    probs = {"calibrated": pool_members(ds, settings, fold_of_row, [trained])}
    members = trained if keep_models else None
    del trained  # without keep_models the trained models are freed here, before the baselines train
    skipped = {}
    if baselines:
        skipped = target_distribution_gaps(ds, rows)
        if "calibrated_llm" not in skipped:
            # the network on the target's own distribution, trained for the target alone
            probs["calibrated_llm"] = oof_network(
                ds.only_target(), settings.without_pretraining(), fold_of_row, folds, seed
            )
        probs.update(_baselines(ds, [name for name in BASELINES if name not in skipped], fold_of_row, folds, seed))
    frame, metrics = tabulate_predictions(ds, rows, fold_of_row, probs)
    previous = previous_predictions(ds, settings, seed) if baselines else None
    return CVResult(frame, metrics, time.perf_counter() - start, skipped, members, previous)


def previous_predictions(ds: Dataset, settings: Settings, seed: int = 0) -> pd.DataFrame | None:
    """Several directories: the network trained on every directory but the last (the model a team had
    before labelling the new release: no adaptation), predicting the last directory's labelled rows, as a
    predictions frame of method PREVIOUS. It never saw those rows, so no folds are needed for an honest score;
    the deploy choice weighs every adapted model against it (calibration/evaluation/releases.py). None for one
    directory, or when a side has no labelled rows."""
    from calibration.model.ensemble import last_directory_rows

    new = last_directory_rows(ds)
    t = ds.target_index
    if new is None or new.all() or not (rows := np.flatnonzero(new & (ds.answers[:, t] >= 0))).size:
        return None
    fold_of_row = np.where(new, 0, -1)  # fold 0 tested, the other directories always trained on
    probs = oof_network(ds, settings, fold_of_row, 1, seed)
    return tabulate_predictions(ds, rows, fold_of_row, {PREVIOUS: probs})[0]


def _baselines(ds: Dataset, names: list[str], fold_of_row: np.ndarray, folds: int, seed: int) -> dict[str, np.ndarray]:
    """Each baseline's out-of-fold distributions. The two fitted ones (linear, ordinal: one batched L-BFGS
    each, about 0.8 and 0.5 s on the LLM-Rubric data) run side by side (`map_dealt`), the rest in no time."""
    fitted = [name for name in names if name in FITTED_BASELINES]
    with torch_threads(None):  # one thread each (settings.torch_threads), which lets map_dealt fork
        probs = map_dealt(lambda name: BASELINES[name](ds, fold_of_row, folds, seed), fitted, training_workers(None))
    done = dict(zip(fitted, probs, strict=True))
    return {name: done[name] if name in done else BASELINES[name](ds, fold_of_row, folds, seed) for name in names}


def target_distribution_gaps(ds: Dataset, rows: np.ndarray) -> dict[str, str]:
    """The baselines that read the target's own judge distribution, with why they cannot run, when some
    labelled items have none (the judge was not asked the target): they would read zeros, never that."""
    missing = int((~ds.present[np.unique(ds.label_item[rows]), ds.target_index]).sum())
    if not missing:
        return {}
    items = len(np.unique(ds.label_item[rows]))
    reason = (
        f"{missing} of {items} labelled items have no judge distribution for the target "
        f"{ds.rubric.target!r} (the judge was not asked it)"
    )
    return dict.fromkeys(NEEDS_TARGET_DISTRIBUTION, reason)


def item_groups(ds: Dataset, data, field: str | None) -> np.ndarray | None:
    """(N,) group code of every item by a conversation-level field of DATA/conversations.jsonl (e.g. the
    chatbot's role), so conversations that share it stay in one fold; None for field None. data: the
    directory, or the directories `ds` was read from (their conversations.jsonl each)."""
    if not field or field == "conversation_id":
        return None
    paths = data_paths(data)
    labels = dataset_labels(paths) if len(paths) > 1 else [None]
    value_of = {}
    for label, path in zip(labels, paths, strict=True):
        for cid, value in _field_values(path / "conversations.jsonl", field).items():
            value_of[cid if label is None else f"{label}/{cid}"] = value
    conv = pd.Series(ds.conversation_keys())
    unknown = sorted(set(conv) - set(value_of))
    if unknown:
        from rubric.errors import InputError

        cid = unknown[0]
        where = next(
            (p for label, p in zip(labels, paths, strict=True) if label and cid.startswith(f"{label}/")), paths[0]
        )
        raise InputError(
            f"{len(unknown)} labelled conversation(s) are not in conversations.jsonl (e.g. {cid!r}).",
            path=where / "conversations.jsonl",
            fix="use the conversations.jsonl the distributions were gathered from.",
        )
    return pd.factorize(conv.map(value_of), sort=True)[0]


def _field_values(path, field: str) -> dict[str, str]:
    """{conversation_id: the field's value as JSON} of a conversations.jsonl."""
    from rubric.errors import InputError

    if not path.exists():
        raise InputError(
            f"group={field} needs the conversations, but there is no conversations.jsonl.",
            path=path.parent,
            fix="put conversations.jsonl (what `gather` writes) in the data folder, or drop group=.",
        )
    value_of = {}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if field not in record:
                raise InputError(
                    f"conversation {record.get('conversation_id')!r} has no field {field!r}.",
                    path=path,
                    row=line_no,
                    fix=f"add {field!r} to every conversation, or choose another group=.",
                )
            value_of[str(record.get("conversation_id"))] = json.dumps(record[field], sort_keys=True)
    return value_of


def tabulate_predictions(
    ds: Dataset, rows: np.ndarray, fold_of_row: np.ndarray, probs: dict[str, np.ndarray]
) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """(long predictions frame, metrics per method) of out-of-fold target distributions: probs maps a method
    to its (label rows, options) probabilities; `rows` are the label rows with a target answer, fold_of_row
    each label row's test fold. The frame has the ids, method, fold, p_OPTION, expected and answer columns
    of cv's predictions.csv; the metrics are `agreement` and the NLL."""
    t = ds.target_index
    values = ds.option_values()[t]
    k = int(ds.n_options[t])
    answer_idx = ds.answers[rows, t]
    answer = values[answer_idx]
    keys = ds.items.iloc[ds.label_item[rows]].reset_index(drop=True)
    frames, metrics = [], {}
    for method, p in probs.items():
        p = p[rows, :k]
        expected = p @ values[:k]
        frame = keys.assign(
            judge_id=[ds.judges[j] for j in ds.label_judge[rows]],
            question_id=ds.rubric.target,
            method=method,
            fold=fold_of_row[rows],
        )
        for j in range(k):
            frame[f"p_{ds.rubric.question(ds.rubric.target).options[j].key}"] = p[:, j]
        frame["expected"] = expected
        frame["answer"] = answer
        frames.append(frame)
        metrics[method] = agreement(expected, answer) | {"nll": mean_nll(p, answer_idx)}
    return pd.concat(frames, ignore_index=True), metrics


def format_table(metrics: dict[str, dict[str, float]], skipped: dict[str, str] | None = None) -> str:
    """The cv table; a correlation that is undefined (a constant prediction) reads n/a, with a note why."""
    head = f"{'method':<16}{'rmse':>8}{'pearson':>9}{'spearman':>9}{'kendall':>9}{'nll':>8}{'n':>6}"
    lines, undefined = [head], False

    def corr(x: float) -> str:
        nonlocal undefined
        undefined |= bool(np.isnan(x))
        return f"{'n/a':>9}" if np.isnan(x) else f"{x:9.4f}"

    for method, m in metrics.items():
        lines.append(
            f"{method:<16}{m['rmse']:8.4f}{corr(m['pearson'])}{corr(m['spearman'])}{corr(m['kendall'])}"
            f"{m['nll']:8.3f}{m['n']:6d}"
        )
    if undefined:
        lines.append("n/a: constant prediction (a correlation is undefined when every prediction is the same)")
    for method, reason in (skipped or {}).items():
        lines.append(f"{method}: skipped: {reason}")
    return "\n".join(lines)


def winner_line(
    metrics: dict[str, dict[str, float]], data, target: str | None = None, weights=None, by_dataset: dict | None = None
) -> str:
    """Which model to deploy (`releases.deploy_choice`: the lowest out-of-fold RMSE of the models `train`
    ships; with several directories, chosen on the last one's rows and weighed against the model trained
    without it) and the command that trains it."""
    by_dataset = by_dataset or {}
    best = deploy_choice(metrics, by_dataset, data, target, weights)
    if best is None:
        return "cv: no model that `role-rubric train` ships was cross-validated"
    basis = deploy_basis(by_dataset)
    rmse = deploy_rmse(metrics, by_dataset, basis)
    others = ", ".join(f"{TRAINABLE[m]} {rmse[m]:.4f}" for m in TRAINABLE if m in rmse and m != best["method"])
    where = "" if basis is None else f" ({basis['note']})"
    # on the last directory the network stays unless another model is significantly better: not always the lowest
    head = "model to deploy" if basis is not None and basis["by_last"] else "lowest RMSE of the models train ships"
    shown = "the network trained without the last directory" if best["method"] == PREVIOUS else best["model"]
    why = f"; {best['why']}" if best.get("why") else ""
    return (
        f"cv: {head}{where}: {shown} {best['rmse']:.4f} ({others}; "
        f"`role-rubric report` tests the difference{why}); train it: {best['command']}; "
        f"then report it: {report_command(best['command'])}"
    )


def report_command(train_command: str) -> str:
    """`role-rubric report` of the model a train command writes: its data, weights and target, model=MODEL_DIR."""
    keys = [k for k in train_command.split()[2:] if k.startswith(("data=", "weights=", "target="))]
    return f"role-rubric report {' '.join(keys)} model=MODEL_DIR out=REPORT_DIR"


def nested_cross_validate(
    ds: Dataset,
    settings: Settings,
    space: dict,
    *,
    trials: int,
    inner_folds: int,
    folds: int = 5,
    seed: int = 0,
    fold_seed: int = 0,
    progress: bool = False,
    groups: np.ndarray | None = None,
):
    """Nested cross-validation: for each outer fold, search on the other folds only (inner CV), then
    train the chosen settings there and predict the outer fold, so selection never sees its test rows.
    Returns (R, K) out-of-fold target distributions and the settings chosen per fold."""
    from calibration.evaluation.search import recommended_nll, recommended_params, search

    fold_of_row = item_folds(ds, groups, folds, fold_seed)[ds.label_item]
    out = np.zeros((len(fold_of_row), int(ds.n_options.max())))
    chosen = []
    for f in range(folds):
        inner = np.flatnonzero(fold_of_row != f)
        inner_ds = ds.with_label_rows(inner)
        study = search(inner_ds, settings, space, trials=trials, folds=inner_folds, seed=seed + f, progress=progress)
        params = recommended_params(study)
        best = dataclasses.replace(settings, **params)
        chosen.append({"fold": f, "inner_nll": recommended_nll(study), "kept_defaults": not params, **params})
        is_test = (fold_of_row == f).astype(np.int64)  # fold index 0 = this outer fold's test rows
        out[fold_of_row == f] = oof_network(ds, best, 1 - is_test, 1, seed)[fold_of_row == f]
    return out, chosen


def write_cv_folder(
    out: Path,
    ds: Dataset,
    settings: Settings,
    result: CVResult,
    *,
    folds: int,
    seed: int,
    fold_seed: int = 0,
    nested_choices=None,
    group: str | None = None,
    extra: dict | None = None,
) -> None:
    """predictions.csv and metrics.json of a cross-validation, as `role-rubric cv` and the demo write them
    (atomically, strict JSON): the one writer of a cv folder, which the report reads. extra: more keys of
    metrics.json (several directories: metrics_by_dataset and deploy_basis). Several directories: also
    PREVIOUS_FILE, the last directory's rows predicted by the network trained without it."""
    atomic_to_csv(result.predictions, out / "predictions.csv")
    if result.previous is not None:
        atomic_to_csv(result.previous, out / PREVIOUS_FILE)
    summary = {
        "target": ds.rubric.target,
        "folds": folds,
        "seed": seed,
        "fold_seed": fold_seed,
        "seconds": result.seconds,
        "settings": settings.to_dict(),
        "metrics": result.metrics,
        "nested_choices": nested_choices,
        "skipped": result.skipped,
        "group": group or "conversation_id",
    } | (extra or {})
    write_json(out / "metrics.json", summary)
