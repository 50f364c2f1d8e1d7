"""Settings that earlier versions offered and this one does not (calibration/model/settings.py,
REMOVED_SETTINGS): a saved model that recorded the value this version always uses still loads and predicts
the same; one trained with another value is refused with one line that says to retrain."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from calibration.data.dataset import load_dataset
from calibration.model.files import load_model
from calibration.model.integrity import model_sha256
from calibration.model.settings import REMOVED_SETTINGS
from rubric.errors import InputError

OTHER_VALUE = {
    "base_crossfit": 3,
    "base_inputs_to_net": True,
    "base_phase": "both",
    "judge_updates": "dense",
    "use_coverage": False,
}
"""A value each removed setting could take before, other than the one kept."""


def _with_setting(model, tmp_path, key, value):
    """A copy of `model` whose model.json records `key`=`value`, checksum rewritten as training would."""
    copy = tmp_path / f"{key}-{value}"
    shutil.copytree(model, copy)
    meta = json.loads((copy / "model.json").read_text())
    meta["settings"][key] = value
    meta["integrity"]["model_sha256"] = model_sha256(meta)
    (copy / "model.json").write_text(json.dumps(meta))
    return copy


def test_every_removed_setting_has_a_case():
    assert set(OTHER_VALUE) == set(REMOVED_SETTINGS)


@pytest.mark.parametrize("key", sorted(REMOVED_SETTINGS))
def test_a_model_that_recorded_the_kept_value_loads_and_predicts_the_same(tiny_model, synthetic_dir, tmp_path, key):
    now = load_model(tiny_model)
    old = load_model(_with_setting(tiny_model, tmp_path, key, REMOVED_SETTINGS[key]))
    assert old.settings == now.settings
    ds = load_dataset(synthetic_dir)
    X = torch.from_numpy(ds.features(now.spec))
    item, judge = ds.label_item[:20], ds.label_judge[:20]
    assert (old.proba(X, item, judge) == now.proba(X, item, judge)).all()


@pytest.mark.parametrize("key", sorted(REMOVED_SETTINGS))
def test_a_model_trained_with_a_removed_variant_is_refused(tiny_model, tmp_path, key):
    path = _with_setting(tiny_model, tmp_path, key, OTHER_VALUE[key])
    with pytest.raises(InputError, match=rf"trained with {key}=.*no longer offers") as info:
        load_model(path)
    assert "retrain" in str(info.value) and "\n" not in str(info.value)


def test_a_model_whose_hidden_layers_read_the_base_inputs_is_refused(tiny_model, tmp_path):
    """Saved before base_inputs_to_net existed (no such key): W1 reads the base's inputs too, one row per
    expected answer more than this version's network has."""
    copy = tmp_path / "old"
    shutil.copytree(tiny_model, copy)
    weights = load_file(str(copy / "weights.safetensors"))
    extra = len(json.loads((copy / "model.json").read_text())["spec"]["expected"]["questions"])
    for name in ("W1", "U1"):
        wide = weights[name]
        weights[name] = torch.cat([wide, wide[..., -extra:, :]], dim=-2)
    save_file(weights, str(copy / "weights.safetensors"))
    meta = json.loads((copy / "model.json").read_text())
    meta["settings"].pop("base_inputs_to_net", None)
    del meta["integrity"]  # models of that time carried no checksums (nor the fields written since them)
    meta.pop("shift_reference", None)
    if meta.get("model") == "network":
        del meta["model"]
    (copy / "model.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"W1 has shape .*retrain") as info:
        load_model(copy)
    assert "\n" not in str(info.value)


def test_without_a_base_the_base_variants_mean_nothing(synthetic_dir, tmp_path):
    """The paper's network (network.base=none) is the same whatever they said: it loads."""
    from calibration.cli import main

    model = tmp_path / "paper"
    assert (
        main(
            [
                "train",
                f"data={synthetic_dir}",
                f"out={model}",
                "network.base=none",
                "train.ensemble=2",
                "train.pretrain_steps=10",
                "train.finetune_steps=10",
            ]
        )
        == 0
    )
    for key, value in OTHER_VALUE.items():
        if key.startswith("base_"):
            model = _with_setting(model, tmp_path, key, value)
    assert load_model(model).settings.base == "none"


def test_a_model_with_the_ordinal_base_is_refused(tiny_model, tmp_path):
    """network.base=ordinal, the default before the linear base, is no longer offered."""
    with pytest.raises(InputError, match=r"base='ordinal'.*retrain") as info:
        load_model(_with_setting(tiny_model, tmp_path, "base", "ordinal"))
    assert "\n" not in str(info.value)
