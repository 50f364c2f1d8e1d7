"""`import` carries the sampling plan into the labelled folder, so that `estimate data=OUT` weights the labels as
they were drawn (a stratified plan read as a uniform sample would give a biased rate), and refuses a plan the
labels were not drawn with before anything is written."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from calibration.cli import main
from calibration.connectors.label_studio.tasks import make_tasks
from calibration.labelling.items import dataset_conversations
from calibration.release.plan import read_plan, release_fingerprint
from rubric.files import file_sha256
from tests.labelling.conftest import make_labelling_dataset


@pytest.fixture()
def release(tmp_path):
    return make_labelling_dataset(tmp_path / "release", n_conversations=8)


def _suggested(release, folder, *, budget=3, seed=0):
    """An estimate sheet with its plan beside it, every row answered by one reviewer."""
    sheet = folder / "to_label.csv"
    argv = ["suggest", "purpose=estimate", f"data={release}", f"budget={budget}", f"seed={seed}", f"out={sheet}"]
    assert main(argv) == 0
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    frame["judge_id"], frame["answer"] = "ana", "3"
    frame.to_csv(folder / "answered.csv", index=False)
    return folder / "answered.csv", folder / "sample_plan.csv"


def _import(release, out, *extra):
    return main(["import", "source=sheet", f"data={release}", f"out={out}", *extra])


def test_the_plan_beside_the_sheet_comes_along_and_estimate_reads_it(release, tmp_path, capsys):
    answered, plan = _suggested(release, tmp_path / "labelling")
    out = tmp_path / "labelled"
    assert _import(release, out, f"sheet={answered}") == 0
    assert (out / "sample_plan.csv").read_bytes() == plan.read_bytes()
    printed = capsys.readouterr().out
    assert f"and the sampling plan {plan} as {out / 'sample_plan.csv'}" in printed
    labelled = set(pd.read_csv(out / "labels.csv", dtype=str)["conversation_id"])
    release_ids = set(dataset_conversations(release))
    assert len(labelled) == 3 and read_plan(out / "sample_plan.csv", release_ids, labelled) is None  # uniform
    # a second import into the same folder (a corrected sheet) finds the same plan there: no conflict
    assert _import(release, out, f"sheet={answered}") == 0


def test_plan_none_carries_no_plan(release, tmp_path):
    answered, _ = _suggested(release, tmp_path / "labelling")
    assert _import(release, tmp_path / "labelled", f"sheet={answered}", "plan=none") == 0
    assert not (tmp_path / "labelled" / "sample_plan.csv").exists()
    assert (tmp_path / "labelled" / "labels.csv").exists()


def test_a_sheet_with_no_plan_beside_it_imports_as_before(release, tmp_path):
    answered, plan = _suggested(release, tmp_path / "labelling")
    plan.unlink()
    assert _import(release, tmp_path / "labelled", f"sheet={answered}") == 0
    assert not (tmp_path / "labelled" / "sample_plan.csv").exists()


def test_a_plan_of_another_draw_is_refused_before_anything_is_written(release, tmp_path, capsys):
    answered, plan = _suggested(release, tmp_path / "labelling")
    drawn = set(pd.read_csv(answered, dtype=str)["conversation_id"])
    frame = pd.read_csv(plan, dtype={"conversation_id": str})
    frame["sampled"] = (~frame["conversation_id"].isin(drawn)).astype(int)  # another seed's draw, say
    frame.to_csv(plan, index=False)
    out = tmp_path / "labelled"
    assert _import(release, out, f"sheet={answered}") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"role-rubric import: error: {plan}: ")
    assert "ones the plan did not sample" in err and "(This plan was found beside sheet=.)" in err
    assert "Or pass plan=none" in err
    assert not out.exists()  # nothing written
    assert _import(release, out, f"sheet={answered}", "plan=none") == 0  # the fix it names works


def test_a_plan_named_for_another_release_is_refused(release, tmp_path, capsys):
    other = make_labelling_dataset(tmp_path / "other", n_conversations=12)  # a later release, say
    _, other_plan = _suggested(other, tmp_path / "other-labelling")
    answered, _ = _suggested(release, tmp_path / "labelling")
    assert _import(release, tmp_path / "labelled", f"sheet={answered}", f"plan={other_plan}") == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"role-rubric import: error: {other_plan}: ")
        and "names 4 conversations not in the release" in err
    )
    assert "plan=none" not in err  # named by the user: the fix is the right plan, not dropping it
    assert not (tmp_path / "labelled").exists()


def test_a_different_plan_already_in_out_is_kept(release, tmp_path, capsys):
    answered, plan = _suggested(release, tmp_path / "labelling")
    out = tmp_path / "labelled"
    assert _import(release, out, f"sheet={answered}") == 0
    frame = pd.read_csv(plan, dtype={"conversation_id": str})
    frame["inclusion_probability"] = 0.5  # same draw, other probabilities: another plan file
    frame.to_csv(plan, index=False)
    before = (out / "sample_plan.csv").read_bytes()
    assert _import(release, out, f"sheet={answered}") == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"role-rubric import: error: {out / 'sample_plan.csv'}: out= holds another sampling plan than {plan}; it is kept."
    )
    assert (out / "sample_plan.csv").read_bytes() == before


def test_a_label_studio_export_takes_the_plan_from_data_or_plan(release, tmp_path, capsys):
    """Label Studio's export knows nothing of the sheet's folder: the plan comes from data= or plan=."""
    _, plan = _suggested(release, tmp_path / "labelling")
    frame = pd.read_csv(plan, dtype={"conversation_id": str})
    picked = frame.loc[frame["sampled"] == 1, "conversation_id"].iloc[0]
    conversations = dataset_conversations(release)
    tasks = make_tasks([(picked, "0")], conversations)
    result = [{"from_name": "scope", "to_name": "dialogue", "type": "choices", "value": {"choices": ["4"]}}]
    tasks[0].update(
        id=1,
        drafts=[],
        annotations=[
            {"id": 1, "completed_by": {"id": 1, "email": "a@x.org"}, "was_cancelled": False, "result": result}
        ],
    )
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks))
    argv = ["import", "source=label-studio", f"data={release}", f"export={export}"]
    assert main([*argv, f"out={tmp_path / 'plain'}"]) == 0
    assert not (tmp_path / "plain" / "sample_plan.csv").exists()
    assert main([*argv, f"out={tmp_path / 'planned'}", f"plan={plan}"]) == 0
    assert (tmp_path / "planned" / "sample_plan.csv").read_bytes() == plan.read_bytes()
    # a plan that did not sample the labelled conversation, named by plan=: refused, nothing written
    frame["sampled"] = (frame["conversation_id"] != picked).astype(int)
    frame.to_csv(tmp_path / "wrong_plan.csv", index=False)
    capsys.readouterr()
    assert main([*argv, f"out={tmp_path / 'wrong'}", f"plan={tmp_path / 'wrong_plan.csv'}"]) == 2
    assert "ones the plan did not sample" in capsys.readouterr().err
    assert not (tmp_path / "wrong").exists()


def test_earlier_labels_outside_the_plan_are_kept_and_said(release, tmp_path, capsys):
    """A release folder that already holds labels (for training, say) of conversations the plan did not draw:
    the import goes on, and says now that `estimate` on the folder will refuse the plan for them."""
    answered, plan = _suggested(release, tmp_path / "labelling")
    frame = pd.read_csv(plan, dtype={"conversation_id": str})
    other = frame.loc[frame["sampled"] == 0, "conversation_id"].iloc[0]
    pd.DataFrame(
        [(other, "0", "bo", "overall", "2")], columns=["conversation_id", "turn", "judge_id", "question_id", "answer"]
    ).to_csv(release / "labels.csv", index=False)
    out = tmp_path / "labelled"
    assert _import(release, out, f"sheet={answered}") == 0
    printed = capsys.readouterr().err  # a warning: on standard error, apart from the results
    assert (
        f"import: warning: 1 conversations labelled in {release} before (e.g. {other!r}) are not ones the plan"
        in printed
    )
    assert (out / "sample_plan.csv").exists() and other in set(
        pd.read_csv(out / "labels.csv", dtype=str)["conversation_id"]
    )
    assert _import(release, tmp_path / "quiet", f"sheet={answered}", "plan=none") == 0
    assert "are not ones the plan" not in capsys.readouterr().err


def test_the_plan_records_its_seed_and_release_and_import_refuses_it_for_another(release, tmp_path, capsys):
    answered, plan = _suggested(release, tmp_path / "labelling", seed=7)
    frame = pd.read_csv(plan, dtype=str)
    assert set(frame["seed"]) == {"7"} and set(frame["release_sha256"]) == {file_sha256(release / "llm.csv")}
    assert list(frame.columns[:3]) == ["conversation_id", "inclusion_probability", "sampled"]  # readers unchanged
    # the same conversations gathered again with other answers: the same ids, another release
    other = make_labelling_dataset(tmp_path / "regathered", n_conversations=8, seed=1)
    assert set(dataset_conversations(other)) == set(dataset_conversations(release))
    assert release_fingerprint(other) != release_fingerprint(release)
    out = tmp_path / "labelled"
    assert _import(other, out, f"sheet={answered}", f"plan={plan}") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"role-rubric import: error: {plan}: ")
    assert "(seed 7) was drawn for another release" in err and "suggest purpose=estimate" in err
    assert not out.exists()
    # the labelled folder's copy of llm.csv gives the release's fingerprint: estimate accepts the plan there
    assert _import(release, out, f"sheet={answered}") == 0
    assert release_fingerprint(out) == release_fingerprint(release)


def test_an_old_style_plan_without_seed_or_release_is_read_as_before(release, tmp_path):
    answered, plan = _suggested(release, tmp_path / "labelling")
    pd.read_csv(plan, dtype=str).drop(columns=["seed", "release_sha256"]).to_csv(plan, index=False)
    other = make_labelling_dataset(tmp_path / "regathered", n_conversations=8, seed=1)
    assert _import(other, tmp_path / "labelled", f"sheet={answered}", f"plan={plan}") == 0  # nothing to check it by
    labelled = set(pd.read_csv(tmp_path / "labelled" / "labels.csv", dtype=str)["conversation_id"])
    assert read_plan(plan, set(dataset_conversations(release)), labelled, fingerprint="0" * 64) is None


def _annotated_export(tasks_json, export):
    """Label Studio's export of the tasks label-studio wrote: every task answered once."""
    tasks = json.loads(tasks_json.read_text())
    result = [{"from_name": "scope", "to_name": "dialogue", "type": "choices", "value": {"choices": ["4"]}}]
    for i, task in enumerate(tasks):
        who = {"id": 1, "email": "a@x.org"}
        task.update(
            id=i + 1,
            drafts=[],
            annotations=[{"id": i + 1, "completed_by": who, "was_cancelled": False, "result": result}],
        )
    export.write_text(json.dumps(tasks))
    return export


@pytest.mark.parametrize("select", ["sheet", "plan"])
def test_label_studio_select_records_the_plan_and_the_exports_import_carries_it(release, tmp_path, capsys, select):
    """label-studio select= a suggest purpose=estimate sheet (its plan beside it) or the plan itself: the plan is
    copied into out= beside the tasks, and importing the export saved there carries it into the labelled folder,
    as importing the filled sheet would."""
    _suggested(release, tmp_path / "labelling")
    plan = tmp_path / "labelling" / "sample_plan.csv"
    chosen = tmp_path / "labelling" / ("to_label.csv" if select == "sheet" else "sample_plan.csv")
    ls = tmp_path / "ls"
    capsys.readouterr()
    assert main(["label-studio", f"data={release}", f"select={chosen}", f"out={ls}"]) == 0
    assert (ls / "sample_plan.csv").read_bytes() == plan.read_bytes()
    assert f"and the sampling plan {plan} as {ls / 'sample_plan.csv'}" in capsys.readouterr().out
    export = _annotated_export(ls / "tasks.json", ls / "export.json")
    out = tmp_path / "labelled"
    assert main(["import", "source=label-studio", f"data={release}", f"export={export}", f"out={out}"]) == 0
    assert (out / "sample_plan.csv").read_bytes() == plan.read_bytes()
    drawn = set(pd.read_csv(plan, dtype=str).query("sampled == '1'")["conversation_id"])
    assert set(pd.read_csv(out / "labels.csv", dtype=str)["conversation_id"]) == drawn
    # a selection drawn without a plan records none, and its export imports without one
    learn = tmp_path / "learn.csv"
    pd.read_csv(tmp_path / "labelling" / "to_label.csv", dtype=str).to_csv(learn, index=False)
    assert main(["label-studio", f"data={release}", f"select={learn}", f"out={tmp_path / 'ls2'}"]) == 0
    assert not (tmp_path / "ls2" / "sample_plan.csv").exists()


def test_label_studio_refuses_a_plan_beside_the_sheet_that_did_not_draw_its_turns(release, tmp_path, capsys):
    _suggested(release, tmp_path / "labelling")
    plan = tmp_path / "labelling" / "sample_plan.csv"
    frame = pd.read_csv(plan, dtype={"conversation_id": str})
    frame["sampled"] = 1 - frame["sampled"]  # another draw
    frame.to_csv(plan, index=False)
    capsys.readouterr()
    out = tmp_path / "ls"
    assert (
        main(["label-studio", f"data={release}", f"select={tmp_path / 'labelling' / 'to_label.csv'}", f"out={out}"])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"role-rubric label-studio: error: {plan}: ")
    assert "(This plan was found beside select=.)" in err and "move that sample_plan.csv away" in err
    assert not out.exists()


def test_label_studio_keeps_another_plan_that_out_holds(release, tmp_path, capsys):
    _suggested(release, tmp_path / "labelling")
    out = tmp_path / "ls"
    out.mkdir()
    (out / "sample_plan.csv").write_text("conversation_id,inclusion_probability,sampled\n")
    capsys.readouterr()
    assert (
        main(["label-studio", f"data={release}", f"select={tmp_path / 'labelling' / 'to_label.csv'}", f"out={out}"])
        == 2
    )
    assert "out= holds another sampling plan" in capsys.readouterr().err
    assert (out / "sample_plan.csv").read_text() == "conversation_id,inclusion_probability,sampled\n"
    assert not (out / "tasks.json").exists()
