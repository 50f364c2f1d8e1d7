"""model.json as one validated record: the only place that parses, checks and writes it.

`ModelRecord.read(path)` turns a model directory's model.json into a typed record, or raises one `InputError`
naming model.json and the fix: its format, the model's kind, every field's type (unknown keys refused), the
settings (those this version no longer offers handled as `REMOVED_SETTINGS` says), the rubric, the judge map,
a linear model's block and feature spec, the recalibration's sizes, and its own checksum. `to_json()` is the
only writer: the same keys, in the order `train` has always written them, with `json.dumps(..., indent=2)` and
numbers as they were given (3 stays 3, 3.0 stays 3.0), so model.json's bytes and checksums are what they were
before this module. Fields older files lack (`model`, `shift_reference`, `integrity`, ...) are optional and
stay absent when written back; the judge identity is kept as gather wrote it (rubric/judge/identity.py reads it).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    PrivateAttr,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from calibration.model.integrity import model_sha256, refuse_a_deleted_checksum
from calibration.model.linear_calibrator import MODELS
from calibration.model.recalibrate import Recalibration
from calibration.model.settings import REMOVED_SETTINGS, Settings
from rubric.errors import InputError
from rubric.schema import Rubric, rubric_from_dict

FORMAT = "role-rubric-calibrator/1"
KINDS = ("network", *MODELS)
RETRAIN = "retrain the model; do not edit model.json."
LIMITS = {"n_models": 1024, "n_inputs": 100_000}


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("input should be a number")
    return value


Real = Annotated[Any, AfterValidator(_number)]  # a number kept as written: 3 stays 3, 3.0 stays 3.0 (the bytes)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExpectedSpec(_Record):
    """The expected answers a linear model (or the network's base) reads, standardised as at training."""

    questions: list[str]
    mean: list[float]
    scale: list[float]


class FeatureSpec(_Record):
    """What the network input holds (Dataset.feature_spec); a linear model reads only `expected`."""

    questions: list[str]
    coverage: StrictBool
    mask: StrictBool
    expected: ExpectedSpec | None = None


class LinearBlock(_Record):
    """What `train model=linear|ordinal` says about the fit (linear_calibrator.train_linear)."""

    kind: str
    l2: Real | None = None
    inner_folds: StrictInt | None = None
    seed: StrictInt | None = None
    inner_cv_rmse: dict[str, Real] | None = None


class TrainingRecord(_Record):
    """One directory the model trained on (calibration/model/provenance.py): its labelled conversations by
    content; `fingerprints` in models from before content records; `weight` and `files` for `data=[...]`."""

    data: str = ""
    n_conversations: StrictInt | None = None
    conversations: list[tuple[str | None, str]] | None = None
    fingerprints: list[str] | None = None
    weight: Real | None = None
    files: dict[str, str] | None = None

    @field_serializer("conversations")
    def _as_lists(self, conversations: list[tuple[str | None, str]] | None) -> list[list[str | None]] | None:
        return None if conversations is None else [list(entry) for entry in conversations]  # as JSON reads them


class ShiftReference(_Record):
    """The shift check's training sample (calibration/model/shift.py `training_summary`)."""

    method: str
    questions: list[str]
    mean: list[float]
    scale: list[float]
    low: list[float]
    high: list[float]
    n_conversations: StrictInt
    conversations: list[list[float]]
    roles: list[str | None] | None = None


class PhaseHistory(_Record):
    steps: StrictInt
    best_val_nll: list[float | None] | None = None


class RecalibrationBlock(_Record):
    """The target's vector scaling (calibration/model/recalibrate.py)."""

    question: StrictInt
    scale: list[float]
    bias: list[float]


class Integrity(_Record):
    weights_sha256: str
    model_sha256: str


def bad_meta(meta_path: Path | str, what: str) -> InputError:
    return InputError(f"model.json {what}.", path=meta_path, fix=RETRAIN)


def _path(info: ValidationInfo) -> Path:
    return Path((info.context or {}).get("path", "model.json"))


class ModelRecord(_Record):
    """Everything model.json holds; fields in the order they are written."""

    format: str
    model: Literal["network", "linear", "ordinal"] | None = None  # absent: a network saved before linear models
    package_version: str | None = None
    torch_version: str | None = None
    settings: InstanceOf[Settings] | None = None  # a network's
    linear: LinearBlock | None = None  # a linear model's
    spec: FeatureSpec
    n_inputs: Annotated[StrictInt, Field(ge=1, le=LIMITS["n_inputs"])]  # the length of x
    n_models: Annotated[StrictInt, Field(ge=1, le=LIMITS["n_models"])]
    judges: list[str]
    rubric: dict[str, Any]
    rubric_fingerprint: str | None = None
    judge: dict[str, Any] | None = None  # rubric/judge/identity.py, copied from gather_summary.json as it was written
    trained_on: list[TrainingRecord] | None = None
    shift_reference: ShiftReference | None = None
    history: dict[str, PhaseHistory] | None = None
    recalibration: RecalibrationBlock | None = None
    integrity: Integrity | None = None

    _rubric: Rubric | None = PrivateAttr(None)

    # -- reading ------------------------------------------------------------------------------------------------
    @classmethod
    def read(cls, meta_path: Path) -> ModelRecord:
        """model.json of a model directory, validated (one InputError naming the file and the fix)."""
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(
                f"model.json is not valid JSON ({exc.msg}).", path=meta_path, row=exc.lineno, fix="retrain the model."
            ) from None
        record = cls.parse(meta, meta_path)
        if record.integrity is None:
            refuse_a_deleted_checksum(meta, meta_path)
        return record

    @classmethod
    def parse(cls, meta: Any, meta_path: Path | str = "model.json") -> ModelRecord:
        """The record of a parsed model.json; any problem is one InputError naming `meta_path`."""
        try:
            return cls.model_validate(meta, context={"path": Path(meta_path)})
        except ValidationError as exc:
            raise _one_line(exc, Path(meta_path)) from None

    @model_validator(mode="before")
    @classmethod
    def _format_and_kind(cls, meta: Any, info: ValidationInfo) -> Any:
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise InputError(
                f"unknown model format {meta.get('format') if isinstance(meta, dict) else None!r}.",
                path=_path(info),
                fix=f"pass a model written by role-rubric ({FORMAT}).",
            )
        name = meta.get("model", "network")
        if name not in KINDS:
            raise InputError(
                f"model.json names an unknown model {name!r} (this version knows {', '.join(KINDS)}).",
                path=_path(info),
                fix="load it with the role-rubric version that trained it, or retrain the model.",
            )
        for key, kind in (("settings", dict), ("linear", dict), ("spec", dict), ("judges", list), ("rubric", dict)):
            wanted = key not in ("settings", "linear") or (key == "linear") == (name in MODELS)
            if wanted and not isinstance(meta.get(key), kind):
                raise bad_meta(_path(info), f"has no valid {key!r} ({kind.__name__} expected)")
        return meta

    @field_validator("judges", mode="before")
    @classmethod
    def _judge_map(cls, judges: Any, info: ValidationInfo) -> Any:
        if not all(isinstance(j, str) for j in judges) or len(set(judges)) != len(judges):
            raise bad_meta(_path(info), "has a judge map that is not a list of distinct judge ids")
        return judges

    @field_validator("settings", mode="before")
    @classmethod
    def _settings(cls, settings: Any, info: ValidationInfo) -> Settings | None:
        if settings is None or isinstance(settings, Settings):
            return settings
        if not isinstance(settings, dict):
            raise bad_meta(_path(info), "has no valid 'settings' (dict expected)")
        return settings_from_dict(settings, _path(info))

    @field_serializer("settings")
    def _settings_as_dict(self, settings: Settings | None) -> dict | None:
        return None if settings is None else settings.to_dict()

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ModelRecord:
        """What ties the fields together: the rubric, the kind's own block, the recalibration's sizes."""
        path = _path(info)
        rubric = self._rubric = rubric_from_dict(self.rubric, source=path)
        if self.kind in MODELS:
            self._check_linear(path, rubric)
        elif self.settings is None:
            raise bad_meta(path, "has no valid 'settings' (dict expected)")
        elif self.linear is not None:
            raise bad_meta(path, f"has a 'linear' block but says model {self.kind!r}")
        recal, questions = self.recalibration, rubric.questions
        if recal is not None and (
            not 0 <= recal.question < len(questions)
            or len(recal.scale) != len(recal.bias)
            or len(recal.scale) != len(questions[recal.question].options)
            or not (np.isfinite(recal.scale).all() and np.isfinite(recal.bias).all())
        ):
            raise InputError(
                "the recalibration block of model.json is not valid (its sizes do not fit the rubric).",
                path=path,
                fix="retrain the model.",
            )
        return self

    def _check_linear(self, path: Path, rubric: Rubric) -> None:
        name, spec = self.kind, self.spec
        kind = None if self.linear is None else self.linear.kind  # a missing block: "but kind None"
        if kind != MODELS[name]:
            raise bad_meta(path, f"says model {name!r} but kind {kind!r} (expected {MODELS[name]!r})")
        if self.settings is not None or self.recalibration is not None:
            raise bad_meta(path, f"has network settings but says model {name!r}")
        if (
            self.n_models != 1
            or spec.expected is None
            or len(spec.expected.questions) != self.n_inputs
            or spec.questions
        ):
            raise bad_meta(
                path,
                "has a feature spec that is not a linear model's (one model on "
                f"n_inputs={self.n_inputs} expected answers)",
            )
        unknown = sorted(set(spec.expected.questions) - set(rubric.ids))
        if unknown:
            raise bad_meta(path, f"reads questions {unknown} that its rubric does not ask")

    @model_validator(mode="wrap")
    @classmethod
    def _checksum(cls, meta: Any, handler, info: ValidationInfo) -> ModelRecord:
        """model.json's own checksum over what it was written with (models from before it have none), once
        every field is known to be valid."""
        record = handler(meta)
        if record.integrity is not None and record.integrity.model_sha256 != model_sha256(meta):
            raise InputError(
                "model.json was changed after training: its judge map, rubric or settings no longer match its checksum.",
                path=_path(info),
                fix="restore the model.json written by `role-rubric train`, or retrain the model.",
            )
        return record

    # -- what the rest of the package reads ----------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """network, linear or ordinal."""
        return self.model or "network"

    @property
    def parsed_rubric(self) -> Rubric:
        if self._rubric is None:  # built with model_construct: never validated
            self._rubric = rubric_from_dict(self.rubric)
        return self._rubric

    @property
    def n_base(self) -> int:
        """How many expected answers the network's base (or a linear model) reads: the last inputs."""
        return len(self.spec.expected.questions) if self.spec.expected else 0

    def feature_spec(self) -> dict:
        """The spec as the dict Dataset.features reads."""
        return self.spec.model_dump(exclude_unset=True)

    def shift_summary(self) -> dict | None:
        """The shift check's training sample as calibration/model/shift.py reads it (None: not recorded)."""
        return None if self.shift_reference is None else self.shift_reference.model_dump(exclude_unset=True)

    def recalibration_map(self) -> Recalibration | None:
        return None if self.recalibration is None else Recalibration.from_dict(self.recalibration.model_dump())

    # -- writing -------------------------------------------------------------------------------------------------
    def as_dict(self) -> dict:
        """model.json's content: the fields it was read or built with, in the order they are written."""
        return self.model_dump(exclude_unset=True)

    def sealed(self, weights_sha256: str) -> ModelRecord:
        """The record with its integrity block: the weights' checksum and its own."""
        meta = {k: v for k, v in self.as_dict().items() if k != "integrity"}
        integrity = Integrity(weights_sha256=weights_sha256, model_sha256=model_sha256(meta))
        return self.model_copy(update={"integrity": integrity})

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)


def settings_from_dict(settings: dict, meta_path: Path) -> Settings:
    """The Settings of a network's model.json block, after checking every value; blocks saved before a setting
    existed get the value models of that time had, those this version no longer offers are refused unless they
    hold the value it always uses."""
    from calibration.schema import check_settings

    names = {f.name for f in dataclasses.fields(Settings)}
    kept = _without_removed_settings(settings, meta_path)
    unknown = sorted(set(kept) - names)
    if unknown:
        raise bad_meta(meta_path, f"has unknown setting(s) {unknown}")
    check_settings(kept, source=meta_path)
    # Models saved before pooling and recalibration were settings averaged their members arithmetically.
    legacy = {"pool": "arithmetic", "recalibrate": "none", "base": "none"}  # settings before each existed
    merged = {**legacy, **kept}
    merged["drop_questions"] = tuple(merged.get("drop_questions") or ())
    return Settings(**merged)


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


def _one_line(exc: ValidationError, meta_path: Path) -> InputError:
    """The first problem pydantic found, as the one line the command line prints."""
    error = exc.errors(include_url=False)[0]
    raised = (error.get("ctx") or {}).get("error")
    if isinstance(raised, InputError):
        return raised
    loc, kind = error["loc"], error["type"]
    value = None if kind == "missing" else error.get("input")  # a missing field's input is its parent
    field = ".".join(str(part) for part in loc)
    if loc and loc[0] in LIMITS and len(loc) == 1:
        return bad_meta(meta_path, f"has {loc[0]}={value!r}, not a whole number in 1..{LIMITS[loc[0]]}")
    if loc and loc[0] == "recalibration":
        detail = f"no {loc[-1]!r}" if kind == "missing" else f"{field}: {error['msg']}"
        return InputError(
            f"the recalibration block of model.json is not valid ({detail}).", path=meta_path, fix="retrain the model."
        )
    if loc and loc[0] == "integrity":
        return InputError("model.json has a malformed integrity block.", path=meta_path, fix="retrain the model.")
    if kind == "missing":
        return bad_meta(meta_path, f"has no {field!r}")
    if kind == "extra_forbidden":
        return bad_meta(meta_path, f"has an unknown field {field!r}")
    message = error["msg"].removeprefix("Value error, ")
    return bad_meta(meta_path, f"has an invalid {field!r} ({message[0].lower() + message[1:]})")
