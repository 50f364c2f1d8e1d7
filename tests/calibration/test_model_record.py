"""model.json is read and written through one validated record (calibration/model/record.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.cli import main
from calibration.model.files import load_model
from calibration.model.integrity import model_sha256
from calibration.model.record import FORMAT, FeatureSpec, ModelRecord, TrainingRecord
from calibration.model.settings import Settings
from rubric.errors import InputError

SMALL = ["train.ensemble=2", "train.pretrain_steps=20", "train.finetune_steps=20", "train.recalibrate_min_members=2"]
KINDS = ("network", "linear", "ordinal")


@pytest.fixture(scope="module")
def models(synthetic_dir, tmp_path_factory) -> dict[str, Path]:
    """One trained model of every kind (the network small, with its recalibration)."""
    root = tmp_path_factory.mktemp("record_models")
    out = {}
    for kind in KINDS:
        extra = SMALL if kind == "network" else [f"model={kind}"]
        assert main(["train", f"data={synthetic_dir}", f"out={root / kind}", *extra]) == 0
        out[kind] = root / kind
    return out


def _meta(model: Path) -> dict:
    return json.loads((model / "model.json").read_text())


def _refused(meta, match: str) -> InputError:
    with pytest.raises(InputError) as caught:
        ModelRecord.parse(meta, Path("/m/model.json"))
    line = str(caught.value)
    assert len(line.splitlines()) == 1 and line.startswith("/m/model.json: ") and " Fix: " in line, line
    assert match in line, line
    return caught.value


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_is_byte_for_byte(models, kind):
    """Read, then written back: the same bytes; rebuilt without its integrity block and sealed again with the
    same weights: the same checksums (what `train` writes is the record's own serialisation)."""
    path = models[kind] / "model.json"
    record = ModelRecord.read(path)
    assert record.to_json() == path.read_text()
    assert record.kind == kind and record.format == FORMAT
    meta = json.loads(path.read_text())
    integrity = meta.pop("integrity")
    again = ModelRecord.parse(meta).sealed(integrity["weights_sha256"])
    assert again.to_json() == path.read_text() and again.integrity.model_sha256 == model_sha256(meta)


def test_every_kind_loads_through_the_record(models):
    network, linear, ordinal = (load_model(models[k]) for k in KINDS)
    assert isinstance(network.record.settings, Settings) and network.settings is network.record.settings
    assert network.recalibration is not None and network.record.recalibration.question == network.rubric.ids.index(
        network.rubric.target
    )
    assert network.record.n_base == len(network.spec["expected"]["questions"]) > 0
    assert linear.record.linear.kind == "multinomial" and ordinal.record.linear.kind == "ordinal"
    assert linear.record.settings is None and linear.recalibration is None
    for model in (network, linear, ordinal):
        assert model.meta == json.loads(model.record.to_json())
        assert isinstance(model.record.trained_on[0], TrainingRecord) and model.record.trained_on[0].conversations
        assert model.record.shift_summary()["questions"] and model.judges == model.record.judges


CORRUPTIONS = [
    # (what, edit of the parsed model.json, part of the one line)
    ("format", lambda m: m.update(format="role-rubric-calibrator/0"), "unknown model format"),
    ("model kind", lambda m: m.update(model="forest"), "names an unknown model 'forest'"),
    ("unknown key", lambda m: m.update(notes="hand-written"), "model.json has an unknown field 'notes'"),
    ("unknown nested key", lambda m: m["spec"].update(extra=1), "unknown field 'spec.extra'"),
    ("missing spec", lambda m: m.pop("spec"), "model.json has no valid 'spec' (dict expected)"),
    ("missing n_inputs", lambda m: m.pop("n_inputs"), "has n_inputs=None, not a whole number"),
    ("n_models a float", lambda m: m.update(n_models=2.0), "has n_models=2.0, not a whole number in 1..1024"),
    ("n_models true", lambda m: m.update(n_models=True), "has n_models=True"),
    ("judges not text", lambda m: m.update(judges=[1, 2]), "judge map that is not a list of distinct judge ids"),
    ("coverage text", lambda m: m["spec"].update(coverage="yes"), "invalid 'spec.coverage'"),
    ("expected mean text", lambda m: m["spec"]["expected"].update(mean="x"), "invalid 'spec.expected.mean'"),
    ("trained_on entry", lambda m: m["trained_on"][0].update(n_conversations="40"), "'trained_on.0.n_conversations'"),
    ("shift sample", lambda m: m["shift_reference"].pop("scale"), "has no 'shift_reference.scale'"),
    ("history", lambda m: m.update(history={"pretrain": {"steps": "many"}}), "'history.pretrain.steps'"),
    ("integrity", lambda m: m.update(integrity="ok"), "malformed integrity block"),
    ("integrity field", lambda m: m["integrity"].pop("weights_sha256"), "malformed integrity block"),
    ("recalibration", lambda m: m["recalibration"].update(scale="x"), "recalibration block of model.json is not valid"),
    ("rubric", lambda m: m.update(rubric={"questions": []}), "a rubric needs a non-empty"),
    ("settings", lambda m: m["settings"].update(hidden1="25"), "setting hidden1='25'"),
    ("judges swapped", lambda m: m.update(judges=m["judges"][::-1]), "model.json was changed after training"),
    ("shift sample edited", lambda m: m["shift_reference"]["mean"].__setitem__(0, 9.0), "changed after training"),
]


@pytest.mark.parametrize("edit, match", [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def test_a_corrupted_field_is_one_line_naming_model_json_and_the_fix(models, edit, match):
    meta = _meta(models["network"])
    edit(meta)
    _refused(meta, match)


LINEAR_CORRUPTIONS = [
    ("network settings", lambda m: m.update(settings=Settings().to_dict()), "network settings but says model"),
    ("kind", lambda m: m["linear"].update(kind="ordinal"), "says model 'linear' but kind 'ordinal'"),
    ("l2 text", lambda m: m["linear"].update(l2="0.1"), "invalid 'linear.l2'"),
    ("no block", lambda m: m.pop("linear"), "has no valid 'linear' (dict expected)"),
    ("questions not asked", lambda m: m["spec"]["expected"]["questions"].__setitem__(0, "zzz"), "does not ask"),
]


@pytest.mark.parametrize("edit, match", [c[1:] for c in LINEAR_CORRUPTIONS], ids=[c[0] for c in LINEAR_CORRUPTIONS])
def test_a_linear_model_json_is_checked_as_one(models, edit, match):
    meta = _meta(models["linear"])
    meta.pop("integrity")  # as a hand-edited file without its checksum
    edit(meta)
    _refused(meta, match)


def test_the_command_line_refuses_it_in_one_line(models, synthetic_dir, tmp_path, capsys):
    shutil.copytree(models["ordinal"], tmp_path / "m")
    meta = _meta(tmp_path / "m")
    meta["n_models"] = "1"
    (tmp_path / "m" / "model.json").write_text(json.dumps(meta))
    assert main(["predict", f"model={tmp_path / 'm'}", f"data={synthetic_dir}", f"out={tmp_path / 'p.csv'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.json has n_models='1'" in err and "Fix: retrain the model" in err
    assert not (tmp_path / "p.csv").exists()


def test_older_files_without_the_later_fields_still_load(models):
    """Fields added over time stay optional, and absent when written back: the record does not invent them."""
    meta = _meta(models["network"])
    for key in ("model", "shift_reference", "integrity", "recalibration", "judge", "trained_on", "history"):
        meta.pop(key)
    record = ModelRecord.parse(meta)
    assert record.kind == "network" and record.shift_summary() is None and record.recalibration_map() is None
    assert json.loads(record.to_json()) == meta
    meta["trained_on"] = [{"data": "x", "n_conversations": 2, "fingerprints": ["a", "b"]}]  # before content records
    assert ModelRecord.parse(meta).trained_on[0].fingerprints == ["a", "b"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(ModelRecord.model_fields)), value=JSON)
def test_any_value_in_any_field_is_a_record_or_one_line(models, key, value):
    """Whatever a field is replaced by, parsing gives a record or one InputError line naming model.json, never
    another exception; a value that parses is written back as it was read."""
    meta = _meta(models["network"])
    meta.pop("integrity")
    meta[key] = value
    try:
        record = ModelRecord.parse(meta, Path("/m/model.json"))
    except InputError as exc:
        assert len(str(exc).splitlines()) == 1 and str(exc).startswith("/m/model.json: ")
        return
    if key != "settings":  # settings are written back complete (what the network runs with)
        assert json.loads(record.to_json())[key] == value


@settings(max_examples=40, deadline=None)
@given(
    weight=st.integers(1, 10) | st.floats(0.01, 100),
    means=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=5),
)
def test_numbers_are_written_back_exactly(weight, means):
    """A weight written as 3 stays 3 and one written as 3.0 stays 3.0; floats keep every digit."""
    entry = {"data": "d", "n_conversations": 1, "conversations": [[None, "s:x"]], "weight": weight, "files": {}}
    assert json.dumps(TrainingRecord.model_validate(entry).model_dump(exclude_unset=True)) == json.dumps(entry)
    spec = {"questions": [], "coverage": False, "mask": False, "expected": {"questions": ["q"], "mean": means}}
    spec["expected"]["scale"] = means
    assert json.dumps(FeatureSpec.model_validate(spec).model_dump(exclude_unset=True)) == json.dumps(spec)
