"""The far-shift benchmark's new release (benchmarks/far_shift.py): a restyled judge on half of each role's
conversations, the humans' labels untouched, and a release a classifier tells apart."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from calibration.data.dataset import load_dataset
from tests.calibration.conftest import make_native_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from far_shift import far_shift_dataset, restyled, separability  # noqa: E402


def test_restyled_flattens_tilts_and_keeps_distributions():
    probs = np.array([[[0.7, 0.2, 0.1, 0.0], [0.1, 0.2, 0.3, 0.4]]], dtype=np.float32)
    present = np.array([[True, False]])
    out = restyled(probs, present, np.array([3, 4]), temperature=2.5, tilt=0.5)
    np.testing.assert_allclose(out[0, 0].sum(), 1, atol=1e-6)
    assert out[0, 0, 3] == 0 and (out[0, 1] == 0).all()  # padding and a missing question stay empty
    assert out[0, 0].max() < probs[0, 0].max()  # flatter
    values = np.arange(1, 4)
    assert out[0, 0, :3] @ values > probs[0, 0, :3] @ values  # leaner towards the higher options
    np.testing.assert_allclose(restyled(probs, present, np.array([3, 4]), 1.0, 0.0)[0, 0], probs[0, 0], atol=1e-6)


def test_far_shift_restyles_half_of_each_role_and_keeps_the_labels(tmp_path):
    ds = load_dataset(make_native_dataset(tmp_path / "d", n_conversations=40, seed=3))
    roles = np.where(ds.items["conversation_id"].str[1:].astype(int) % 2 == 0, "alpha", "beta")
    ds = dataclasses.replace(ds, items=ds.items.assign(conversation_id=roles + "-" + ds.items["conversation_id"]))
    shifted, new_item = far_shift_dataset(ds)
    conv_new = np.bincount(ds.groups, new_item) > 0
    role_of_conv = np.array(["alpha" if k.startswith("alpha") else "beta" for k in sorted(set(ds.conversation_keys()))])
    assert [int(conv_new[role_of_conv == r].sum()) for r in ("alpha", "beta")] == [10, 10]
    np.testing.assert_array_equal(shifted.probs[~new_item], ds.probs[~new_item])
    assert not np.allclose(shifted.probs[new_item], ds.probs[new_item])
    np.testing.assert_array_equal(shifted.answers, ds.answers)  # the humans' answers do not move
    # the classifier finds a strong restyle (on the bundled benchmark the default one gives AUC 0.99:
    # benchmarks/results/separability.json) and nothing on the same split unrestyled
    fold_of_row = np.where(new_item[ds.label_item], 0, -1)
    assert separability(far_shift_dataset(ds, 8.0, 2.0)[0], fold_of_row, 1)["auc_mean"] >= 0.95
    assert separability(ds, fold_of_row, 1)["auc_mean"] < 0.7
