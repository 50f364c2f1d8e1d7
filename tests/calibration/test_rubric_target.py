"""The training target: a bad one is one line naming the rubric file, and a target that nobody chose (no
`target:`, no `overall` question) is announced once, with how to choose another."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from calibration.cli import main
from calibration.data.dataset import load_dataset
from rubric.errors import InputError
from rubric.judge.gather import rubric_from_config
from rubric.notices import cli_notices
from rubric.schema import load_rubric

from .conftest import SYNTH_RUBRIC, make_native_dataset

FAST = ["network.hidden1=4", "network.hidden2=4", "train.ensemble=1", "train.pretrain_steps=5",
        "train.finetune_steps=5", "train.eval_every=5"]  # fmt: skip


def _rewrite_rubric(data, **changes):
    rubric = yaml.safe_load((data / "rubric.yaml").read_text())
    rubric.update(changes)
    (data / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))


def test_an_unknown_target_names_the_rubric_file(tmp_path, capsys):
    data = make_native_dataset(tmp_path / "d", n_conversations=4)
    assert main(["train", f"data={data}", f"out={tmp_path / 'm'}", "target=nope", *FAST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{data / 'rubric.yaml'}: target question 'nope' is not in the rubric" in err[0]
    assert "target=" in err[0]

    _rewrite_rubric(data, target="missing")
    assert main(["train", f"data={data}", f"out={tmp_path / 'm'}", *FAST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{data / 'rubric.yaml'}: the rubric's target 'missing' is not one of" in err[0]
    assert "'target:' in this file" in err[0]
    assert not (tmp_path / "m").exists()
    with pytest.raises(InputError, match="rubric.yaml: target question 'nope'"):
        load_rubric(data / "rubric.yaml", target="overall").with_target("nope")


def _without_overall(tmp_path):
    """A dataset whose rubric has no target and no 'overall' question: 'overall' renamed 'verdict'."""
    data = make_native_dataset(tmp_path / "d", n_conversations=6)
    rubric = {k: v for k, v in SYNTH_RUBRIC.items() if k != "target"}
    rubric["questions"] = [{**q, "id": "verdict" if q["id"] == "overall" else q["id"]} for q in rubric["questions"]]
    (data / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    for name in ("llm.csv", "labels.csv"):
        frame = pd.read_csv(data / name)
        frame["question_id"] = frame["question_id"].replace("overall", "verdict")
        frame.to_csv(data / name, index=False)
    return data


def test_a_target_nobody_chose_is_announced_once(tmp_path, capsys):
    data = _without_overall(tmp_path)
    assert main(["train", f"data={data}", f"out={tmp_path / 'm'}", *FAST]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "no 'target:' and no 'overall' question" in line]
    assert len(notes) == 1, err
    assert str(data / "rubric.yaml") in notes[0] and "'verdict'" in notes[0]
    assert "'target: ID' in rubric.yaml or target=ID on the command line" in notes[0]
    with cli_notices():
        load_dataset(data)  # the same rubric again in the same command: not announced again
    assert "no 'target:'" not in capsys.readouterr().err

    other = tmp_path / "chosen"
    other.mkdir()
    for name in ("rubric.yaml", "llm.csv", "labels.csv"):
        (other / name).write_bytes((data / name).read_bytes())
    with cli_notices():
        assert load_dataset(other, target="scope").rubric.target == "scope"  # chosen on the command line
        _rewrite_rubric(other, target="verdict")
        assert load_dataset(other).rubric.target == "verdict"  # chosen in rubric.yaml
    assert "no 'target:'" not in capsys.readouterr().err


def test_gather_announces_the_target_of_its_rubric(tmp_path, capsys):
    rubric = {k: v for k, v in SYNTH_RUBRIC.items() if k != "target"}
    rubric["questions"] = rubric["questions"][:2]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(rubric, sort_keys=False))
    with cli_notices():  # the note on stderr, as the command line prints it
        assert rubric_from_config(None, rubric_file=path, target=None).target == "tone"
    err = capsys.readouterr().err
    assert err.startswith(f"gather: {path}: no 'target:' and no 'overall' question") and "'tone'" in err
    assert rubric_from_config(None, rubric_file=path, target="scope").target == "scope"
    assert capsys.readouterr().err == ""


def test_a_question_the_labelling_interface_reserves_names_the_rubric_file(tmp_path):
    from calibration.connectors.label_studio.tasks import label_config

    data = make_native_dataset(tmp_path / "d", n_conversations=2)
    rubric = yaml.safe_load((data / "rubric.yaml").read_text())
    rubric["questions"][0]["id"] = "dialogue"
    (data / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    with pytest.raises(InputError, match=r"d/rubric\.yaml: the rubric has a question named 'dialogue'"):
        label_config(load_rubric(data / "rubric.yaml"))


def test_score_without_a_calibrator_announces_the_target(tmp_path, capsys):
    from rubric.conversations import save_conversations
    from rubric.servers.fake import FakeOpenAI
    from tests.rubric.conftest import make_conversations

    rubric = {k: v for k, v in SYNTH_RUBRIC.items() if k != "target"}
    rubric["questions"] = rubric["questions"][:2]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(rubric, sort_keys=False))
    convs = save_conversations(make_conversations(1), tmp_path / "c.jsonl")
    with FakeOpenAI() as server:
        args = [f"conversations={convs}", f"rubric_file={path}", "judge=fake", f"judge.base_url={server.base_url}",
                f"out={tmp_path / 's.csv'}", "progress=false"]  # fmt: skip
        assert main(["score", *args]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "no 'target:'" in line]
    assert len(notes) == 1 and notes[0].startswith(f"score: {path}:") and "'tone'" in notes[0]
