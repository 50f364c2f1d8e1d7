"""Model directories (weights in safetensors, everything else in JSON; never pickle) and `role-rubric train`.

A model directory holds `weights.safetensors` (the ensemble's tensors, leading model axis) and
`model.json` (format version, settings, feature spec, rubric, judge map, package version, training
history), so a saved model loads with nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from calibration.model.ensemble import ensemble_proba
from calibration.model.integrity import check_finite, check_integrity, check_weights, model_sha256
from calibration.model.linear import LinearFit, parameter_shapes
from calibration.model.linear_calibrator import MODELS, LinearCalibrator
from calibration.model.linear_calibrator import expected_shapes as linear_shapes
from calibration.model.network import BASE_KIND, CalibrationNet
from calibration.model.provenance import training_record
from calibration.model.recalibrate import Recalibration
from calibration.model.settings import REMOVED_SETTINGS, Settings
from calibration.model.shift import roles_of, training_summary
from calibration.model.train import n_base
from rubric.errors import InputError
from rubric.files import atomic_path, atomic_write_text, file_sha256
from rubric.ids import clean_id
from rubric.schema import Rubric, load_rubric, rubric_from_dict

FORMAT = "role-rubric-calibrator/1"


@dataclass
class LoadedModel:
    """A trained calibrator (a seed ensemble of networks, or one linear model) with what is needed to rebuild its
    inputs."""

    net: CalibrationNet | LinearCalibrator  # both called as net(x, judge) -> (M, B, Q, K) log-probabilities
    rubric: Rubric
    spec: dict
    judges: list[str]
    settings: Settings
    meta: dict
    recalibration: Recalibration | None = None

    def proba(self, X: torch.Tensor, item, judge):
        """(B, Q, K) distributions of the ensemble for (item, judge) pairs: pooled, target recalibrated."""
        return ensemble_proba(self.net, X, item, judge, pool=self.settings.pool, recalibration=self.recalibration)

    @property
    def judge_identity(self) -> dict | None:
        """The judge whose distributions the model was trained on (None: not recorded, e.g. imported data)."""
        return self.meta.get("judge")

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
    """judge: the identity of the judge whose distributions it was trained on (rubric.identity), or None;
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
    return _write_model(out, net.state_dict(), meta)


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
    return _write_model(out, calibrator.state_dict(), meta)


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
        "judge": judge,  # predict and score refuse distributions from another judge (rubric/identity.py)
        # estimate and decide refuse labelled samples the model trained on (calibration/model/provenance.py)
        "trained_on": trained_on if trained_on is not None else [training_record(ds, data)],
        # score, predict and estimate compare new data with this sample (calibration/model/shift.py)
        "shift_reference": training_summary(ds, roles),
    }


def _write_model(out: Path, tensors: dict[str, torch.Tensor], meta: dict) -> Path:
    """weights.safetensors, then model.json with both files' checksums."""
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    check_finite(tensors, out / "weights.safetensors", saving=True)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "weights.safetensors") as tmp:
        save_file(tensors, str(tmp), metadata={"format": FORMAT})
        weights_sha256 = file_sha256(tmp)
    meta["integrity"] = {"weights_sha256": weights_sha256, "model_sha256": model_sha256(meta)}
    atomic_write_text(out / "model.json", json.dumps(meta, indent=2))
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
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(
            f"model.json is not valid JSON ({exc.msg}).", path=meta_path, row=exc.lineno, fix="retrain the model."
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(
            f"unknown model format {meta.get('format') if isinstance(meta, dict) else None!r}.",
            path=meta_path,
            fix=f"pass a model written by role-rubric ({FORMAT}).",
        )
    name = meta.get("model", "network")  # absent: a network saved before linear models existed
    if name in MODELS:
        return _load_linear(meta, meta_path, weights_path)
    if name != "network":
        raise InputError(
            f"model.json names an unknown model {name!r} (this version knows network, {', '.join(MODELS)}).",
            path=meta_path,
            fix="load it with the role-rubric version that trained it, or retrain the model.",
        )
    settings, rubric = _checked_meta(meta, meta_path)
    check_weights(weights_path, check_integrity(meta, meta_path), _expected_shapes(meta, settings, rubric))
    net = CalibrationNet(
        meta["n_models"],
        meta["n_inputs"],
        len(meta["judges"]),
        [len(q.options) for q in rubric.questions],
        hidden1=settings.hidden1,
        hidden2=settings.hidden2,
        personalised=settings.personalised,
        n_base=n_base(meta["spec"]),
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
    if n_base(meta["spec"]):  # the base joined the target alone
        net.base_only_for(rubric.ids.index(rubric.target))
    net.eval()
    try:
        recalibration = Recalibration.from_dict(meta["recalibration"]) if meta.get("recalibration") else None
        if recalibration is not None and (
            not 0 <= recalibration.question < len(rubric.questions)
            or recalibration.scale.shape != recalibration.bias.shape
            or len(recalibration.scale) != len(rubric.questions[recalibration.question].options)
            or not (np.isfinite(recalibration.scale).all() and np.isfinite(recalibration.bias).all())
        ):
            raise ValueError("its sizes do not fit the rubric")
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        detail = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InputError(
            f"the recalibration block of model.json is not valid ({detail}).", path=meta_path, fix="retrain the model."
        ) from None
    return LoadedModel(net, rubric, meta["spec"], list(meta["judges"]), settings, meta, recalibration)


def _bad_meta(meta_path: Path, what: str) -> InputError:
    return InputError(f"model.json {what}.", path=meta_path, fix="retrain the model; do not edit model.json.")


def _check_common_meta(meta: dict, meta_path: Path, fields: tuple[tuple[str, type], ...]) -> Rubric:
    """The rubric of a model.json, after checking `fields`' types, the model and input counts and the
    judge map: what every model is rebuilt from."""
    for key, kind in (*fields, ("spec", dict), ("judges", list), ("rubric", dict)):
        if not isinstance(meta.get(key), kind):
            raise _bad_meta(meta_path, f"has no valid {key!r} ({kind.__name__} expected)")
    for key, high in (("n_models", 1024), ("n_inputs", 100_000)):
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise _bad_meta(meta_path, f"has {key}={value!r}, not a whole number in 1..{high}")
    if not all(isinstance(j, str) for j in meta["judges"]) or len(set(meta["judges"])) != len(meta["judges"]):
        raise _bad_meta(meta_path, "has a judge map that is not a list of distinct judge ids")
    return rubric_from_dict(meta["rubric"], source=meta_path)


def _checked_meta(meta: dict, meta_path: Path) -> tuple[Settings, Rubric]:
    """The settings and rubric of a network's model.json, after checking every field the model is rebuilt from."""
    import dataclasses

    from calibration.schema import check_settings

    def bad(what: str) -> InputError:
        return _bad_meta(meta_path, what)

    rubric = _check_common_meta(meta, meta_path, (("settings", dict),))
    names = {f.name for f in dataclasses.fields(Settings)}
    kept = _without_removed_settings(meta["settings"], meta_path)
    unknown = sorted(set(kept) - names)
    if unknown:
        raise bad(f"has unknown setting(s) {unknown}")
    check_settings(kept, source=meta_path)
    # Models saved before pooling and recalibration were settings averaged their members arithmetically.
    legacy = {"pool": "arithmetic", "recalibrate": "none", "base": "none"}  # settings before each existed
    merged = {**legacy, **kept}
    merged["drop_questions"] = tuple(merged.get("drop_questions") or ())
    return Settings(**merged), rubric


def _load_linear(meta: dict, meta_path: Path, weights_path: Path) -> LoadedModel:
    """A `train model=linear|ordinal` calibrator, with the network's checks: model.json's fields and checksum,
    the weights' shapes against them before anything is allocated, then the weights' checksum."""
    name = meta["model"]
    rubric = _check_common_meta(meta, meta_path, (("linear", dict),))
    kind, expected = meta["linear"].get("kind"), meta["spec"].get("expected")
    if kind != MODELS[name]:
        raise _bad_meta(meta_path, f"says model {name!r} but kind {kind!r} (expected {MODELS[name]!r})")
    if (
        meta["n_models"] != 1
        or not isinstance(expected, dict)
        or not isinstance(expected.get("questions"), list)
        or len(expected["questions"]) != meta["n_inputs"]
        or meta["spec"].get("questions")
    ):
        raise _bad_meta(
            meta_path,
            "has a feature spec that is not a linear model's (one model on "
            f"n_inputs={meta['n_inputs']} expected answers)",
        )
    unknown = sorted(set(expected["questions"]) - set(rubric.ids))
    if unknown:
        raise _bad_meta(meta_path, f"reads questions {unknown} that its rubric does not ask")
    integrity = check_integrity(meta, meta_path)
    n_options = [len(q.options) for q in rubric.questions]
    shapes = linear_shapes(kind, len(n_options), meta["n_inputs"], len(meta["judges"]), max(n_options))
    check_weights(weights_path, integrity, shapes)
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
    return LoadedModel(LinearCalibrator(fit, n_options), rubric, meta["spec"], list(meta["judges"]), settings, meta)


def _without_removed_settings(settings: dict, meta_path: Path) -> dict:
    """The settings of a model.json without those this version no longer offers (REMOVED_SETTINGS), which
    must hold the value this version always uses: a model trained otherwise cannot be rebuilt here. Without a
    base the base's variants mean nothing (the network is the paper's whatever they say). A model with a base
    saved before they existed had its hidden layers read the base's inputs: the weights' shapes refuse it."""
    with_base = settings.get("base", "none") != "none"
    for key, value in settings.items():
        if key.startswith("base_") and not with_base:
            continue
        if key in REMOVED_SETTINGS and value != REMOVED_SETTINGS[key]:
            raise InputError(
                f"the model was trained with {key}={value!r}, which this version no longer offers "
                f"(it always uses {REMOVED_SETTINGS[key]!r}).",
                path=meta_path,
                fix="retrain the model.",
            )
    return {k: v for k, v in settings.items() if k not in REMOVED_SETTINGS}


def _expected_shapes(meta: dict, settings: Settings, rubric: Rubric) -> dict[str, tuple[int, ...]]:
    """The tensor shapes CalibrationNet(...) would allocate for this model.json (calibration/model/network.py)."""
    m, d, h1, h2 = meta["n_models"], meta["n_inputs"], settings.hidden1, settings.hidden2
    n_q, n_k = len(rubric.questions), max(len(q.options) for q in rubric.questions)
    j = max(len(meta["judges"]), 1) if settings.personalised else 0
    e = n_base(meta["spec"]) if isinstance(meta.get("spec"), dict) else 0
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
