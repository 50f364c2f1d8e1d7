"""Model directories (weights in safetensors, everything else in JSON; never pickle) and `role-rubric train`.

A model directory holds `weights.safetensors` (the ensemble's tensors, leading model axis) and
`model.json` (format version, settings, feature spec, rubric, judge map, package version, training
history), so a saved model loads with nothing else.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from calibration.data.dataset import load_dataset
from calibration.model.ensemble import ensemble_proba, train_ensemble
from calibration.model.network import CalibrationNet
from calibration.model.recalibrate import Recalibration
from calibration.model.settings import Settings
from rubric.errors import InputError
from rubric.identity import dataset_judge_identity, describe
from rubric.schema import Rubric, load_rubric, rubric_from_dict

FORMAT = "role-rubric-calibrator/1"


@dataclass
class LoadedModel:
    """A trained seed ensemble with what is needed to rebuild its inputs."""

    net: CalibrationNet
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
            return self.judges.index(str(judge_id))
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


def save_model(out: Path, net: CalibrationNet, ds, spec: dict, settings: Settings, *, history: dict | None = None,
               recalibration: Recalibration | None = None, judge: dict | None = None) -> Path:
    """judge: the identity of the judge whose distributions it was trained on (rubric.identity), or None."""
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
    save_file(tensors, str(out / "weights.safetensors"), metadata={"format": FORMAT})
    meta = {
        "format": FORMAT,
        "package_version": _version(),
        "torch_version": torch.__version__,
        "settings": settings.to_dict(),
        "spec": spec,
        "n_inputs": int(net.W1.shape[1] - 1),
        "n_models": net.n_models,
        "judges": list(ds.judges),
        "rubric": ds.rubric.to_dict(),
        "rubric_fingerprint": ds.rubric.fingerprint(),
        "history": history or {},
        "recalibration": None if recalibration is None else recalibration.to_dict(),
        "judge": judge,  # predict and score refuse distributions from another judge (rubric/identity.py)
    }
    (out / "model.json").write_text(json.dumps(meta, indent=2))
    return out


def load_model(path: str | Path) -> LoadedModel:
    path = Path(path)
    meta_path, weights_path = path / "model.json", path / "weights.safetensors"
    if not path.is_dir() or not meta_path.exists() or not weights_path.exists():
        raise InputError("not a model directory (needs model.json and weights.safetensors).", path=path,
                         fix="pass model=DIR written by `role-rubric train`.")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"model.json is not valid JSON ({exc.msg}).", path=meta_path, row=exc.lineno,
                         fix="retrain the model.") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"unknown model format {meta.get('format') if isinstance(meta, dict) else None!r}.",
                         path=meta_path, fix=f"pass a model written by role-rubric ({FORMAT}).")
    # Models saved before pooling and recalibration were settings averaged their members arithmetically.
    legacy = {"pool": "arithmetic", "recalibrate": "none"}
    settings = Settings(**{**legacy, **meta["settings"], "drop_questions": tuple(meta["settings"]["drop_questions"])})
    rubric = rubric_from_dict(meta["rubric"], source=meta_path)
    net = CalibrationNet(meta["n_models"], meta["n_inputs"], len(meta["judges"]), [len(q.options) for q in rubric.questions],
                         hidden1=settings.hidden1, hidden2=settings.hidden2, personalised=settings.personalised)
    try:
        net.load_state_dict(load_file(str(weights_path)))
    except (SafetensorError, RuntimeError, OSError) as exc:
        raise InputError(f"weights do not match model.json ({str(exc).splitlines()[0][:120]}).", path=weights_path,
                         fix="retrain the model; do not mix files of different models.") from None
    net.eval()
    recalibration = Recalibration.from_dict(meta["recalibration"]) if meta.get("recalibration") else None
    return LoadedModel(net, rubric, meta["spec"], list(meta["judges"]), settings, meta, recalibration)


def _version() -> str:
    try:
        return metadata.version("role-rubric")
    except metadata.PackageNotFoundError:
        return "unknown"


def run_train(cfg) -> Path:
    """CLI: `role-rubric train data=DIR out=MODEL_DIR [target=Q] [network.*=..] [train.*=..]`."""
    settings = Settings.from_cfg(cfg)
    ds = load_dataset(cfg.data, target=cfg.get("target"))
    start = time.perf_counter()
    judge = dataset_judge_identity(cfg.data)
    net, spec, plan = train_ensemble(ds, settings, seed=int(cfg.seed), progress=True)
    out = save_model(Path(cfg.out), net, ds, spec, settings, history=plan.history, recalibration=plan.recalibration,
                     judge=judge)
    print(f"train: {settings.ensemble} models on {len(ds.label_item)} label rows, {len(ds.judges)} judges, "
          f"target {ds.rubric.target!r} in {time.perf_counter() - start:.1f}s")
    print(f"train: trained on the distributions of the {describe(judge)}")
    print(f"train: wrote model to {out}")
    return out
