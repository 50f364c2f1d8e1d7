"""Model directories (weights in safetensors, everything else in JSON; never pickle) and `role-rubric train`.

A model directory holds `weights.safetensors` (the ensemble's tensors, leading model axis) and
`model.json` (format version, settings, feature spec, rubric, judge map, package version, training
history), so a saved model loads with nothing else. model.json is read, checked and written only through
`ModelRecord` (calibration/model/record.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from calibration.model.ensemble import ensemble_proba
from calibration.model.integrity import check_finite, check_weights
from calibration.model.linear import LinearFit, parameter_shapes
from calibration.model.linear_calibrator import MODELS, LinearCalibrator
from calibration.model.linear_calibrator import expected_shapes as linear_shapes
from calibration.model.network import BASE_KIND, CalibrationNet
from calibration.model.provenance import training_record
from calibration.model.recalibrate import Recalibration
from calibration.model.record import FORMAT, ModelRecord
from calibration.model.settings import Settings
from calibration.model.shift import roles_of, training_summary
from rubric.errors import InputError
from rubric.files import atomic_path, atomic_write_text, file_sha256
from rubric.ids import clean_id
from rubric.schema import Rubric, load_rubric

__all__ = ["FORMAT", "LoadedModel", "ModelRecord", "load_model", "save_linear_model", "save_model"]


@dataclass
class LoadedModel:
    """A trained calibrator (a seed ensemble of networks, or one linear model) with what is needed to rebuild its
    inputs."""

    net: CalibrationNet | LinearCalibrator  # both called as net(x, judge) -> (M, B, Q, K) log-probabilities
    rubric: Rubric
    spec: dict
    judges: list[str]
    settings: Settings
    record: ModelRecord  # model.json, validated (calibration/model/record.py)
    recalibration: Recalibration | None = None

    @property
    def meta(self) -> dict:
        """model.json's content as a plain dict (read it through `record` instead)."""
        return self.record.as_dict()

    def proba(self, X: torch.Tensor, item, judge):
        """(B, Q, K) distributions of the ensemble for (item, judge) pairs: pooled, target recalibrated."""
        return ensemble_proba(self.net, X, item, judge, pool=self.settings.pool, recalibration=self.recalibration)

    @property
    def judge_identity(self) -> dict | None:
        """The judge whose distributions the model was trained on (None: not recorded, e.g. imported data)."""
        return self.record.judge

    def judge_index(self, judge_id: str) -> int:
        """Index of a training judge, or -1 (population model) for a judge never seen in training."""
        try:
            return self.judges.index(clean_id(judge_id))
        except ValueError:
            return -1

    def check_rubric(self, path: str | Path) -> Rubric:
        """The model's rubric, after checking that the data's rubric (if any) asks the same questions."""
        path = Path(path)
        if path.exists():
            theirs = load_rubric(path)
            if theirs.fingerprint() != self.rubric.fingerprint():
                raise InputError(
                    f"this rubric (questions {theirs.ids}) differs from the one the model was trained on "
                    f"(questions {self.rubric.ids}, same option values required).",
                    path=path,
                    fix="gather with the model's rubric, or train a model on this rubric.",
                )
        return self.rubric

    def check_data(
        self, folder: str | Path, *, command: str, model_dir: str | Path | None, allow_judge_mismatch: bool
    ) -> Rubric:
        """The model's rubric, after checking a dataset folder against the model: the same rubric first (the
        more basic mismatch), then the same judge (`rubric.judge.identity.check_same_judge`: refused unless
        allow_judge_mismatch, naming the folder and model_dir's model.json)."""
        from rubric.judge.identity import check_same_judge, dataset_judge_identity

        rubric = self.check_rubric(Path(folder) / "rubric.yaml")
        check_same_judge(
            self.judge_identity,
            dataset_judge_identity(folder),
            allow=allow_judge_mismatch,
            command=command,
            where=folder,
            model=model_dir,
        )
        return rubric


def save_model(
    out: Path,
    net: CalibrationNet,
    ds,
    spec: dict,
    settings: Settings,
    *,
    history: dict | None = None,
    recalibration: Recalibration | None = None,
    judge: dict | None = None,
    data: str | Path = "",
    trained_on: list[dict] | None = None,
    roles: dict[str, str] | None = None,
) -> Path:
    """judge: the identity of the judge whose distributions it was trained on (rubric.judge.identity), or None;
    data: the dataset directory `ds` was read from, recorded with its conversations' fingerprints;
    trained_on: instead, the records of the directories it was read from (`TrainingData.records`);
    roles: conversation id -> chatbot role, for the per-role shift check (default: data's conversations.jsonl)."""
    meta = {
        "format": FORMAT,
        "model": "network",
        "package_version": _version(),
        "torch_version": torch.__version__,
        "settings": settings.to_dict(),
        "spec": spec,
        "n_inputs": int(net.n_inputs),  # the length of x (W1 reads fewer: not the base's inputs)
        "n_models": net.n_models,
        **_provenance(ds, judge, data, trained_on, roles),
        "history": history or {},
        "recalibration": None if recalibration is None else recalibration.to_dict(),
    }
    return _write_model(out, net.state_dict(), ModelRecord.parse(meta, out / "model.json"))


def save_linear_model(
    out: Path,
    calibrator: LinearCalibrator,
    ds,
    spec: dict,
    record: dict,
    *,
    model: str,
    judge: dict | None = None,
    data: str | Path = "",
    trained_on: list[dict] | None = None,
    roles: dict[str, str] | None = None,
) -> Path:
    """A `train model=linear|ordinal` calibrator in the same directory format: record is what
    linear_calibrator.train_linear says about the fit (kind, chosen L2, inner-cv errors)."""
    meta = {
        "format": FORMAT,
        "model": model,
        "package_version": _version(),
        "torch_version": torch.__version__,
        "linear": record,
        "spec": spec,
        "n_inputs": calibrator.n_inputs,  # the expected answers: the last n_inputs columns of the features
        "n_models": 1,
        **_provenance(ds, judge, data, trained_on, roles),
    }
    return _write_model(out, calibrator.state_dict(), ModelRecord.parse(meta, out / "model.json"))


def _provenance(
    ds, judge: dict | None, data: str | Path, trained_on: list[dict] | None, roles: dict[str, str] | None = None
) -> dict:
    """What every model.json records about its training data: judge map, rubric, the judge's identity,
    the conversations it trained on and a sample of their judge features (for the shift check)."""
    if roles is None and data:
        roles = roles_of([Path(data)])
    return {
        "judges": list(ds.judges),
        "rubric": ds.rubric.to_dict(),
        "rubric_fingerprint": ds.rubric.fingerprint(),
        "judge": judge,  # predict and score refuse distributions from another judge (rubric/judge/identity.py)
        # estimate and decide refuse labelled samples the model trained on (calibration/model/provenance.py)
        "trained_on": trained_on if trained_on is not None else [training_record(ds, data)],
        # score, predict and estimate compare new data with this sample (calibration/model/shift.py)
        "shift_reference": training_summary(ds, roles),
    }


def _write_model(out: Path, tensors: dict[str, torch.Tensor], record: ModelRecord) -> Path:
    """weights.safetensors, then model.json with both files' checksums."""
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    check_finite(tensors, out / "weights.safetensors", saving=True)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "weights.safetensors") as tmp:
        save_file(tensors, str(tmp), metadata={"format": FORMAT})
        weights_sha256 = file_sha256(tmp)
    atomic_write_text(out / "model.json", record.sealed(weights_sha256).to_json())
    return out


def load_model(path: str | Path) -> LoadedModel:
    path = Path(path)
    meta_path, weights_path = path / "model.json", path / "weights.safetensors"
    if not path.is_dir() or not meta_path.exists() or not weights_path.exists():
        raise InputError(
            "not a model directory (needs model.json and weights.safetensors).",
            path=path,
            fix="pass model=DIR written by `role-rubric train`.",
        )
    record = ModelRecord.read(meta_path)
    if record.kind in MODELS:
        return _load_linear(record, weights_path)
    settings, rubric = record.settings, record.parsed_rubric
    assert settings is not None  # every kind but the linear ones has them (ModelRecord's validation)
    check_weights(weights_path, _weights_sha256(record), _expected_shapes(record))
    net = CalibrationNet(
        record.n_models,
        record.n_inputs,
        len(record.judges),
        [len(q.options) for q in rubric.questions],
        hidden1=settings.hidden1,
        hidden2=settings.hidden2,
        personalised=settings.personalised,
        n_base=record.n_base,
    )
    try:
        tensors = load_file(str(weights_path))
        check_finite(tensors, weights_path, saving=False)
        net.load_state_dict(tensors)
    except (SafetensorError, RuntimeError, OSError) as exc:
        raise InputError(
            f"weights do not match model.json ({str(exc).splitlines()[0][:120]}).",
            path=weights_path,
            fix="retrain the model; do not mix files of different models.",
        ) from None
    if record.n_base:  # the base joined the target alone
        net.base_only_for(rubric.ids.index(rubric.target))
    net.eval()
    return LoadedModel(
        net, rubric, record.feature_spec(), list(record.judges), settings, record, record.recalibration_map()
    )


def _weights_sha256(record: ModelRecord) -> str | None:
    return None if record.integrity is None else record.integrity.weights_sha256


def _load_linear(record: ModelRecord, weights_path: Path) -> LoadedModel:
    """A `train model=linear|ordinal` calibrator, with the network's checks: model.json's fields and checksum
    (ModelRecord), the weights' shapes against them before anything is allocated, then the weights' checksum."""
    assert record.linear is not None  # the linear kinds have their block (ModelRecord's validation)
    kind, rubric = record.linear.kind, record.parsed_rubric
    n_options = [len(q.options) for q in rubric.questions]
    shapes = linear_shapes(kind, len(n_options), record.n_inputs, len(record.judges), max(n_options))
    check_weights(weights_path, _weights_sha256(record), shapes)
    try:
        tensors = load_file(str(weights_path))
    except (SafetensorError, OSError) as exc:
        raise InputError(
            f"weights do not match model.json ({str(exc).splitlines()[0][:120]}).",
            path=weights_path,
            fix="retrain the model; do not mix files of different models.",
        ) from None
    check_finite(tensors, weights_path, saving=False)
    if set(tensors) != set(shapes):
        raise InputError(
            f"weights do not match model.json (tensors {sorted(tensors)}, expected {sorted(shapes)}).",
            path=weights_path,
            fix="retrain the model; do not mix files of different models.",
        )
    fit = LinearFit(kind, *(tensors[n].double() for n in ("weight", "bias", "judge")))
    # One model with judge offsets: no pooling to do, no recalibration (Settings only answers what the
    # prediction code asks a calibrator: personalised, pool).
    settings = Settings(ensemble=1, recalibrate="none", base="none", pool="arithmetic")
    net = LinearCalibrator(fit, n_options)
    return LoadedModel(net, rubric, record.feature_spec(), list(record.judges), settings, record)


def _expected_shapes(record: ModelRecord) -> dict[str, tuple[int, ...]]:
    """The tensor shapes CalibrationNet(...) would allocate for this model.json (calibration/model/network.py)."""
    settings, rubric = record.settings, record.parsed_rubric
    assert settings is not None  # every kind but the linear ones has them (ModelRecord's validation)
    m, d, h1, h2 = record.n_models, record.n_inputs, settings.hidden1, settings.hidden2
    n_q, n_k = len(rubric.questions), max(len(q.options) for q in rubric.questions)
    j = max(len(record.judges), 1) if settings.personalised else 0
    e = record.n_base
    d_net = d - e  # what the hidden layers read: not the base's inputs
    shapes = {
        "W1": (m, d_net + 1, h1),
        "W2": (m, h1 + 1, h2),
        "V": (m, h2 + 1, n_q * n_k),
        "U1": (m, j, d_net + 1, h1),
        "U2": (m, j, h1 + 1, h2),
        "UV": (m, j, h2 + 1, n_q * n_k),
        "option_pad": (n_q, n_k),
    }
    if e:
        base = parameter_shapes(BASE_KIND, n_q, e, j, n_k)
        shapes |= {f"base_{name}": (m, *shape) for name, shape in base.items()}
    return shapes


def _version() -> str:
    try:
        return metadata.version("role-rubric")
    except metadata.PackageNotFoundError:
        return "unknown"
