"""`estimate crossfit=K`: adapt the calibrator and estimate the release from the same labels (cross-
prediction-powered inference, Zrnic & Candes, PNAS 2024).

The release's labelled conversations are split into K folds. Calibrator k is trained, with the model's
recorded settings, on the model's training directories (model.json `trained_on`, with their weights) plus
the labelled conversations outside fold k, and predicts fold k: each labelled turn is compared with a
calibrator that never saw it. Every other turn of the release gets the average of the K calibrators. One
more calibrator, trained on everything, is the adapted model written beside the estimate. The interval
is then computed as for a plain estimate (the K calibrators' dependence on the labels is what cross-
fitting makes harmless, to first order: Zrnic & Candes 2024, Theorem 1), with the unadapted model's
predictions as a second control variate: adapting on a few conversations can make the calibrator a
worse predictor of the release (it fixes a level that ppi corrects anyway, and adds the noise of its new
labels), and ppi then leans on the unadapted model instead, the two weighed by their cross-fitted lams
(calibration/release/intervals.py; benchmarks/estimate_crossfit.py measures the widths).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from calibration.release.turns import ReviewerPredictions, judge_probabilities, reviewer_predictions
from rubric.errors import InputError

__all__ = ["FoldModels", "check_folds", "train_folds"]

_READ = {"dtype": {"conversation_id": str, "turn": str, "judge_id": str}, "keep_default_na": False}


class FoldModels:
    """The K calibrators, which fold each labelled conversation is in, and the adapted model's folder."""

    def __init__(self, models: list, fold_of: dict[str, int], adapted: Path | None, unadapted=None):
        self.models, self.fold_of, self.adapted, self.unadapted = models, fold_of, adapted, unadapted
        self._inputs_for: object = None  # the dataset that _inputs were computed over
        self._inputs: list = []

    def _probabilities(self, ds) -> list:
        """Each model's `judge_probabilities` over ds (the K, then the unadapted one), computed once per
        release: every question and quantity of an estimate reads the same distributions."""
        import torch

        if self._inputs_for is not ds:
            models = self.models + ([self.unadapted] if self.unadapted is not None else [])
            X = [torch.from_numpy(ds.features(model.spec)) for model in models]
            self._inputs = [(model, x, judge_probabilities(model, x)) for model, x in zip(models, X, strict=True)]
            self._inputs_for = ds
        return self._inputs

    def predictions(self, ds, question: int, *, kind: str, adheres_at: float) -> ReviewerPredictions:
        """Each labelled conversation's turns predicted by the calibrator of its fold, the others by the
        average of the K; reviewers matched by name across the K (a reviewer one calibrator never saw gets
        its population prediction). The unadapted model's predictions ride along as `other`."""
        predicted = [
            reviewer_predictions(model, ds, X, question, kind=kind, adheres_at=adheres_at, proba=proba)
            for model, X, proba in self._probabilities(ds)
        ]
        per_model, rest = predicted[: len(self.models)], predicted[len(self.models) :]
        other = rest[0] if rest else None  # the unadapted model's
        first = per_model[0]
        rows = np.arange(len(first.row_item))
        names = np.array(
            [str(ds.judges[j]) for j in ds.label_judge[np.flatnonzero(ds.answers[:, question] >= 0)]], dtype=object
        )
        reviewers = sorted(set(names))
        column = np.searchsorted(np.array(reviewers, dtype=object), names)

        def named(p: ReviewerPredictions) -> np.ndarray:
            out = np.repeat(p.P[:, :1], len(reviewers), axis=1)  # column 0 of P is the population model (-1)
            out[:, column] = p.P[:, p.row_column[rows]]
            return out

        P = np.stack([named(p) for p in per_model])  # (K, N_items, reviewers)
        cal = np.stack([p.calibrator for p in per_model])
        fold = np.array([self.fold_of.get(str(c), -1) for c in first.conversation])
        own = fold >= 0
        P_out, cal_out = P.mean(0), cal.mean(0)
        P_out[own] = P[fold[own], np.flatnonzero(own)]
        cal_out[own] = cal[fold[own], np.flatnonzero(own)]
        return ReviewerPredictions(
            first.conversation, P_out, cal_out, first.raw, first.row_item, column, first.row_value, other
        )


def check_folds(k, labelled: int, *, path) -> int:
    if isinstance(k, bool) or not float(k).is_integer() or int(k) < 2:
        raise InputError(
            f"crossfit={k}: cross-fitting needs a whole number of folds >= 2.",
            path=path,
            fix="pass crossfit=5 (or crossfit=N with 2 <= N <= the labelled conversations).",
        )
    if int(k) > labelled:
        raise InputError(
            f"crossfit={k} is more folds than the {labelled} labelled conversations.",
            path=path,
            fix=f"pass crossfit=N with 2 <= N <= {labelled}.",
        )
    return int(k)


def _sources(model, model_path) -> tuple[list[Path], list[float]]:
    records = model.record.trained_on or []
    paths = [Path(r.data) for r in records]
    if not records or any(not str(p) or not (p / "labels.csv").exists() for p in paths):
        missing = next((str(p) for p in paths if not str(p) or not (p / "labels.csv").exists()), "none recorded")
        raise InputError(
            f"crossfit= retrains on the model's training directories, and model.json trained_on "
            f"names one that is not there ({missing}).",
            path=Path(model_path) / "model.json",
            fix="run estimate where the training directories are, or without crossfit=.",
        )
    return paths, [float(1.0 if r.weight is None else r.weight) for r in records]


def _release_tables(root: Path) -> dict[str, pd.DataFrame]:
    """The release's labels and judge distributions, read once for every fold (CSV or parquet)."""
    tables = {}
    for stem in ("labels", "llm"):
        path = root / f"{stem}.csv"
        tables[stem] = pd.read_csv(path, **_READ) if path.exists() else pd.read_parquet(root / f"{stem}.parquet")
    return tables


def _labels_subset(root: Path, tables: dict[str, pd.DataFrame], dst: Path, conversations: set[str]) -> Path:
    """The release with only these conversations' labels and turns (what a training directory holds)."""
    dst.mkdir(parents=True, exist_ok=True)
    for stem, frame in tables.items():
        frame[frame.conversation_id.isin(conversations)].to_csv(dst / f"{stem}.csv", index=False)
    for name in ("rubric.yaml", "gather_summary.json"):
        if (root / name).exists():
            shutil.copy(root / name, dst / name)
    return dst


def _load(sources, weights, extra: Path, root: Path):
    """The model's training directories plus one labelled subset of the release, read and checked as `train
    data=[...]` reads them. A refusal names the release folder the user gave, not the temporary subset."""
    from calibration.data.union import load_training_data

    try:
        return load_training_data([*sources, extra], weights=[*weights, 1.0])
    except InputError as exc:
        here = str(extra)

        def mine(text: str) -> str:
            return text.replace(here, str(root))

        path = None if exc.path is None else mine(exc.path)
        raise InputError(mine(exc.problem), path=path, row=exc.row, fix=exc.fix) from None


def _train(model, data, out: Path, seed: int, *, root: Path | None = None):
    """One calibrator trained on `data` (from `_load`) with the model's settings. root: the release folder,
    recorded in model.json `trained_on` in place of the temporary subset (which is deleted after the run),
    with its labelled conversations by content, so that the adapted model can be cross-fitted again."""
    from calibration.data.union import file_checksums
    from calibration.model.ensemble import train_ensemble
    from calibration.model.files import load_model, save_model
    from calibration.model.provenance import training_record, training_records

    net, spec, plan = train_ensemble(data.ds, model.settings, seed=seed)
    records = training_records(data)
    if root is not None:
        subset = data.sources[-1]
        records[-1] = training_record(subset.dataset, root) | {"weight": subset.weight, "files": file_checksums(root)}
    save_model(
        out,
        net,
        data.ds,
        spec,
        model.settings,
        history=plan.history,
        recalibration=plan.recalibration,
        judge=data.judge,
        trained_on=records,
    )
    return load_model(out)


def train_folds(
    model, model_path, root: Path, labelled: list[str], k: int, work: Path, adapted: Path | None, *, seed: int = 0
) -> FoldModels:
    """Train the K fold calibrators in `work` and the adapted one in `adapted` (None: not trained; the
    benchmark's draws need only the K) (see the module docstring)."""
    from calibration.model.linear_calibrator import LinearCalibrator

    if isinstance(model.net, LinearCalibrator):
        raise InputError(
            "crossfit= retrains a network calibrator; this model is linear.",
            fix="train the model with model=network, or estimate without crossfit=.",
        )
    sources, weights = _sources(model, model_path)
    order = np.random.default_rng(seed).permutation(sorted(labelled))
    folds = np.array_split(order, k)
    fold_of = {str(c): i for i, part in enumerate(folds) for c in part}
    tables = _release_tables(root)
    # Every label at once first: a release the model was trained on is refused before any calibrator trains.
    everything = _load(sources, weights, _labels_subset(root, tables, work / "all-labels", set(labelled)), root)
    models = []
    for i, part in enumerate(folds):
        rest = set(labelled) - {str(c) for c in part}
        extra = _labels_subset(root, tables, work / f"fold{i}-labels", rest)
        models.append(_train(model, _load(sources, weights, extra, root), work / f"fold{i}-model", seed))
    if adapted is not None:
        _train(model, everything, adapted, seed, root=root)
    (work / "folds.json").write_text(json.dumps(fold_of, indent=1))
    return FoldModels(models, fold_of, adapted, unadapted=model)
