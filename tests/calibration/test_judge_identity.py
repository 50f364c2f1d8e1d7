"""model.json records which judge produced the training distributions; predict and score refuse another
judge's distributions unless allow_judge_mismatch=true, naming what differs; the same judge at another
endpoint is accepted."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import yaml

from calibration.api import RoleAdherence
from calibration.commands.predict import run as run_predict
from calibration.commands.train import run as run_train
from calibration.model.files import load_model
from calibration.schema.build import command_config
from rubric.errors import InputError
from rubric.judge.identity import IDENTITY_KEYS, check_same_judge, judge_identity
from rubric.judge.settings import judge_config
from rubric.notices import cli_notices
from rubric.schema import load_rubric

from .conftest import make_native_dataset

FAST = ["network.hidden1=4", "network.hidden2=4", "train.ensemble=1", "train.pretrain_steps=5",
        "train.finetune_steps=5", "train.eval_every=5"]  # fmt: skip


def test_identity_names_backend_model_host_prompt_rubric_answer_mode_and_sampling(tmp_path):
    rubric = load_rubric(make_native_dataset(tmp_path / "d", n_conversations=2) / "rubric.yaml")
    fake = judge_identity(judge_config("fake"), rubric)
    assert set(fake) == set(IDENTITY_KEYS)
    assert fake["model"] == "fake-judge" and fake["base_url_host"] == "127.0.0.1:8765"
    assert fake["sampling"].startswith("temperature 0.0;")
    other = judge_identity(judge_config("fake", base_url="https://api.example.com/v1", answer_mode="sampled"), rubric)
    assert other["base_url_host"] == "api.example.com" and other["prompt_template"] == fake["prompt_template"]
    with pytest.raises(
        InputError,
        match=r"answer mode: trained on .*endpoint host: trained at '127.0.0.1:8765'.*allow_judge_mismatch=true",
    ):
        check_same_judge(fake, other, allow=False, command="score")
    assert len(check_same_judge(fake, other, allow=True, command="score")) == 1  # the answer mode only
    assert check_same_judge(None, other, allow=False, command="score") == []  # unknown: not compared


def test_the_same_judge_at_another_port_or_host_is_accepted(tmp_path, capsys):
    rubric = load_rubric(make_native_dataset(tmp_path / "d", n_conversations=2) / "rubric.yaml")
    fake = judge_identity(judge_config("fake"), rubric)
    for url in ("http://127.0.0.1:9123/v1", "http://judge.internal:8765/v1"):
        moved = judge_identity(judge_config("fake", base_url=url), rubric)
        assert moved["base_url_host"] != fake["base_url_host"]
        with cli_notices():  # the command line's printing of the library's status lines
            assert check_same_judge(fake, moved, allow=False, command="predict") == []
        line = capsys.readouterr().out
        assert "predict: the same judge at another endpoint" in line and moved["base_url_host"] in line
    # what determines the answers is still compared, wherever the judge is served
    for change, key in (({"model": "other-model"}, "model"), ({"temperature": 0.7}, "sampling")):
        other = judge_identity(judge_config("fake", base_url="http://127.0.0.1:9123/v1", **change), rubric)
        with pytest.raises(InputError, match=f"{key}: trained on"):
            check_same_judge(fake, other, allow=False, command="predict")
    with pytest.raises(InputError, match="prompt template hash: trained on 'aaaa'"):
        check_same_judge({**fake, "prompt_template": "aaaa"}, fake, allow=False, command="predict")
    old = {k: v for k, v in fake.items() if k != "sampling"}  # recorded before sampling was
    assert check_same_judge(old, {**fake, "sampling": "temperature 1.0"}, allow=False, command="predict") == []


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("identity")
    data = make_native_dataset(root / "data", n_conversations=12)
    identity = judge_identity(judge_config("embedding"), load_rubric(data / "rubric.yaml"))
    (data / "gather_summary.json").write_text(json.dumps({"judge_identity": identity}))
    run_train(command_config("train", [f"data={data}", f"out={root / 'model'}", *FAST]))
    return root, data, identity


def test_train_records_the_judge_and_predict_refuses_another(trained):
    root, data, identity = trained
    assert load_model(root / "model").judge_identity == identity
    other = root / "other"
    shutil.copytree(data, other)
    (other / "gather_summary.json").write_text(json.dumps({"judge_identity": {**identity, "model": "gpt-4o-mini"}}))
    args = [f"model={root / 'model'}", f"data={other}", f"out={root / 'p.csv'}"]
    with pytest.raises(InputError, match="model: trained on 'all-MiniLM-L6-v2', given 'gpt-4o-mini'"):
        run_predict(command_config("predict", args))
    assert not (root / "p.csv").exists()
    run_predict(command_config("predict", [*args, "allow_judge_mismatch=true"]))
    assert (root / "p.csv").stat().st_size > 0


def test_report_refuses_a_model_of_another_judge_or_rubric_as_predict_does(trained, tmp_path):
    """`report model=` presents the model as the one shipped: a model that does not apply to data= is refused
    before any cross-validation, with predict's line."""
    from calibration.commands.report import run as run_report
    from tests.calibration.test_report import FAST as REPORT_FAST

    root, data, identity = trained
    other_judge = tmp_path / "other_judge"
    shutil.copytree(data, other_judge)
    (other_judge / "gather_summary.json").write_text(
        json.dumps({"judge_identity": {**identity, "model": "gpt-4o-mini"}})
    )
    args = [f"model={root / 'model'}", f"out={tmp_path / 'rep'}", *REPORT_FAST]
    with pytest.raises(InputError, match="model: trained on 'all-MiniLM-L6-v2', given 'gpt-4o-mini'"):
        run_report(command_config("report", [f"data={other_judge}", *args]))
    other_rubric = tmp_path / "other_rubric"
    shutil.copytree(data, other_rubric)
    rubric = yaml.safe_load((other_rubric / "rubric.yaml").read_text())
    rubric["questions"][0]["options"][0]["value"] = 9
    (other_rubric / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    with pytest.raises(InputError, match="differs from the one the model was trained on"):
        run_report(command_config("report", [f"data={other_rubric}", *args]))
    assert not (tmp_path / "rep" / "report.html").exists()


def test_score_refuses_a_calibrator_of_another_judge(trained):
    root, _, _ = trained
    with pytest.raises(InputError, match="backend: trained on 'embedding', given 'chat'"):
        RoleAdherence(calibrator=root / "model", judge="fake")
    metric = RoleAdherence(calibrator=root / "model", judge="fake", allow_judge_mismatch=True)
    assert metric.judge_mismatch and any("model" in d for d in metric.judge_mismatch)
    with pytest.raises(InputError, match="calibrator=DIR"):
        RoleAdherence(calibrator=root / "absent", judge="fake")


def test_population_predictions_can_be_evaluated(trained):
    from calibration.commands.evaluate import run as run_evaluate

    root, data, _ = trained
    pred = root / "population.csv"
    run_predict(
        command_config("predict", [f"model={root / 'model'}", f"data={data}", f"out={pred}", "judges=population"])
    )
    metrics = run_evaluate(
        command_config("evaluate", [f"predictions={pred}", f"data={data}", f"out={root / 'm.json'}"])
    )
    labels = pd.read_csv(data / "labels.csv")
    assert metrics["n"] == int(
        (labels["question_id"] == "overall").sum()
    )  # every human answer, one prediction per item
    assert -1 <= metrics["pearson"] <= 1
