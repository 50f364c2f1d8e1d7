"""What publish reads and writes, checked before anything is sent: its out= never replaces the scores it
publishes or a file it did not write (calibration/path_checks.py), the two score tables are joined by
conversation and turn and refused naming the row that does not line up, the conversations file must be the
one `score` read (its checksum), and a server that answers with something other than JSON is one line naming
it."""

from __future__ import annotations

import json
from pathlib import Path

from calibration.cli import main


def _refused(capsys, path, before: bytes) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert path.read_bytes() == before
    return err[0]


def test_publish_never_writes_over_the_scores_it_publishes(scored_copy, capsys):
    """The issue's case: out= naming the scores being published replaced them with OTLP events (exit 0)."""
    scores = scored_copy["scores"]
    before = scores.read_bytes()
    for extra in ([], ["overwrite=true"]):  # an input is never replaced, overwrite or not
        assert main(["publish", "target=otel", f"scores={scores}", f"out={scores}", *extra]) == 2
        assert "out= would overwrite scores.csv, one of this command's own inputs" in _refused(capsys, scores, before)
    turns = scores.with_name("scores_turns.csv")  # read beside it, not an out= of publish
    assert main(["publish", "target=otel", f"scores={scores}", f"out={turns}"]) == 2
    assert "would replace scores_turns.csv" in _refused(capsys, turns, turns.read_bytes())


def test_publish_replaces_its_own_output_and_with_overwrite_any_file(scored_copy, tmp_path):
    scores, out = scored_copy["scores"], tmp_path / "events.jsonl"
    assert main(["publish", "target=otel", f"scores={scores}", f"out={out}"]) == 0
    first = out.read_bytes()
    assert main(["publish", "target=otel", f"scores={scores}", f"out={out}"]) == 0  # a rerun: its own file
    assert out.read_bytes() == first
    other = tmp_path / "notes.txt"
    other.write_text("mine\n")
    assert main(["publish", "target=otel", f"scores={scores}", f"out={other}", "overwrite=true"]) == 0
    assert other.read_bytes() == first and "resourceLogs" in json.loads(first.splitlines()[0])


def test_score_tables_that_do_not_line_up_are_refused_naming_the_row(scored_copy, tmp_path, capsys):
    """The issue's case: a _turns.csv short of a row published the rest ("54 turns" of 55)."""
    import pandas as pd

    scores = scored_copy["scores"]
    turns_file = scores.with_name("scores_turns.csv")
    whole = pd.read_csv(turns_file, dtype={"conversation_id": str})
    out = tmp_path / "events.jsonl"
    args = ["publish", "target=otel", f"scores={scores}", f"out={out}"]
    cid = whole["conversation_id"].iloc[-1]
    cases = {
        "short of a row": (whole.iloc[:-1], f"conversation '{cid}' has {(whole['conversation_id'] == cid).sum() - 1} "),
        "a row twice": (pd.concat([whole, whole.iloc[[3]]]), f"scores_turns.csv, row {len(whole) + 1}: turn "),
        "another conversation": (
            pd.concat([whole, whole.iloc[[0]].assign(conversation_id="stray")]),
            f"scores_turns.csv, row {len(whole) + 1}: conversation 'stray' is not in scores.csv",
        ),
    }
    for frame, said in cases.values():
        frame.to_csv(turns_file, index=False)
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0] and "nothing was published" in err[0], err
        assert not out.exists()
    whole.to_csv(turns_file, index=False)
    assert main(args) == 0  # the same table whole again: published


def test_conversations_changed_since_score_are_refused(scored_copy, tmp_path, capsys):
    """score records the checksum of the conversations it read; publish puts values on their turns' spans."""
    scores = scored_copy["scores"]
    made = json.loads(scores.with_name("scores_shift.json").read_text())["scored_with"]
    edited = tmp_path / "conversations.jsonl"
    record = json.loads(Path(made["conversations"]).read_text().splitlines()[0])
    record["turns"] = record["turns"][1:]  # a turn dropped: the later turns' values would go on other spans
    edited.write_text(json.dumps(record) + "\n")
    args = ["publish", "target=otel", f"scores={scores}", f"conversations={edited}", f"out={tmp_path / 'e.jsonl'}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "this conversations file changed since `score` read it" in err and str(edited) in err
