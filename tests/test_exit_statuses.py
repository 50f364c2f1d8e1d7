"""Every command's exit statuses, as docs/reference/commands.md states them: 0 done, 1 a failed CI gate only,
2 bad input or a refusal (a missing key, a bad value, a broken rule between keys, on_shift=refuse), 3 gather's
partial failure; each error is one line on stderr, before any file is read."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from calibration.cli import COMMANDS, main
from calibration.schema import SCHEMAS, flat_settings
from calibration.schema.build import missing_keys
from tests.calibration.conftest import make_native_dataset

ROOT = Path(__file__).resolve().parents[1]

# what the rules between keys need besides the required keys (the schemas' `rules`)
RULES_NEED = {"import": ["evaluations=e.tsv", "judgments=j.tsv"], "suggest": ["model=m"]}


def _stand_ins(command: str, tmp_path: Path) -> list[str]:
    """A value for every required key (paths that do not exist: the checks fail before any is read)."""
    out = [*RULES_NEED.get(command, [])]
    for key, what in missing_keys(SCHEMAS[command], {}):
        value = "1" if what == "N" else what.split("|")[0] if "|" in what else str(tmp_path / f"no_{key}")
        out.append(f"{key}={value}")
    return out


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err.strip()


def _one_line(err: str) -> bool:
    return len(err.splitlines()) == 1


REQUIRING = [c for c in COMMANDS if next(missing_keys(SCHEMAS[c], {}), None) is not None]


def test_every_command_but_the_offline_ones_has_a_required_key():
    assert set(COMMANDS) - set(REQUIRING) <= {"demo", "serve-fake-judge"}, set(COMMANDS) - set(REQUIRING)


@pytest.mark.parametrize("command", REQUIRING)
def test_a_missing_required_key_is_one_line_and_exit_2(command, capsys, tmp_path):
    key, what = next(missing_keys(SCHEMAS[command], {}))
    assert what in {"DIR", "FILE", "N"} or ("|" in what and "path" not in what), what  # DIR, or otel|mlflow|...
    code, err = _run([command], capsys)
    assert code == 2 and _one_line(err), err
    assert err == (
        f"role-rubric {command}: error: missing required key {key!r}. "
        f"Fix: pass {key}={what} (see role-rubric {command} --help)."
    )
    assert not list(tmp_path.iterdir())


def test_the_missing_key_names_what_to_pass():
    """The line the issue asked for, word for word."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["estimate", "data=release", "out=runs/est"])
    assert code == 2
    assert err.getvalue().strip() == (
        "role-rubric estimate: error: missing required key 'model'. "
        "Fix: pass model=DIR (see role-rubric estimate --help)."
    )


def _bad_value(command: str) -> tuple[str, str]:
    """A key of the command whose rule a text breaks (a whole number, a number, true/false or a choice)."""
    for key, f in flat_settings(SCHEMAS[command]):
        if f.metadata["rule"].check("notavalue") is not None:
            return key, "notavalue"
    raise AssertionError(f"{command} has no key a text breaks")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_value_is_one_line_and_exit_2(command, capsys, tmp_path):
    key, value = _bad_value(command)
    code, err = _run([command, *_stand_ins(command, tmp_path), f"{key}={value}"], capsys)
    assert code == 2 and _one_line(err), err
    assert err.startswith(f"role-rubric {command}: error: {key}='{value}' ") and " Fix: set " in err, err


# one command line per rule between keys that a schema declares: (command, arguments, the line's start)
REFUSALS = [
    ("estimate", ["fail_if_worse=true"], "fail_if_worse=true needs baseline=."),
    ("suggest", ["purpose=estimate", "width=0.1", "decide_at=0.5"], "width= and decide_at= both given."),
    ("suggest", ["purpose=learn", "model=null"], "purpose=learn needs model=."),
    ("suggest", ["purpose=estimate", "model=null", "width=0.1"], "width= needs model=."),
    ("suggest", ["purpose=learn", "cv=somewhere"], "cv= plans how many conversations"),
    ("gather", ["results=batch_results.jsonl"], "results= is read in batch mode only."),
    ("gather", ["scorer=cosine", "granularity=conversation"], "reference scorers score turns only."),
    ("label-studio", ["out=null"], "nowhere to put the tasks."),
    ("import", ["source=sheet", "data=d"], "source=sheet needs sheet=."),
    ("import", ["source=sheet", "sheet=s.csv"], "source=sheet needs data=."),
    ("import", ["source=mlflow", "tracking_uri=http://localhost:5000"], "source=mlflow needs experiment=."),
    ("import", ["source=otel"], "source=otel needs files=."),
    ("import", ["source=label-studio", "data=d"], "source=label-studio needs export=FILE.json, or url= and project="),
    ("import", ["source=label-studio", "data=d", "export=e.json", "url=http://localhost:8080"], "both export="),
]


@pytest.mark.parametrize(("command", "args", "start"), REFUSALS, ids=[f"{c} {' '.join(a)}" for c, a, _ in REFUSALS])
def test_a_broken_rule_between_keys_is_one_line_and_exit_2_before_any_work(command, args, start, capsys, tmp_path):
    code, err = _run([command, *_stand_ins(command, tmp_path), *args], capsys)
    assert code == 2 and _one_line(err), err
    assert err.startswith(f"role-rubric {command}: error: {start}") and " Fix: " in err, err
    assert not list(tmp_path.iterdir())  # nothing read, nothing written


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    """An ordinal calibrator trained on a synthetic dataset, its data, and a release whose judge answers
    every question with the lowest option (far from the training data)."""
    root = tmp_path_factory.mktemp("exit")
    data = make_native_dataset(root / "data")
    model = root / "model"
    assert main(["train", f"data={data}", f"out={model}", "model=ordinal"]) == 0
    release = make_native_dataset(root / "release", seed=1)
    llm = pd.read_csv(release / "llm.csv")
    llm["prob"] = (llm["option"] == llm.groupby("question_id")["option"].transform("min")).astype(float)
    llm.to_csv(release / "llm.csv", index=False)
    return data, model, release


def test_on_shift_refuse_is_a_refusal_exit_2_not_a_failed_gate(shifted, capsys, tmp_path):
    _, model, release = shifted
    out = tmp_path / "p.csv"
    code, err = _run(["predict", f"model={model}", f"data={release}", f"out={out}", "on_shift=refuse"], capsys)
    assert code == 2 and _one_line(err), err
    assert err.startswith("role-rubric predict: refused: ") and "gate" not in err, err
    assert not out.exists()


def test_the_shift_warning_is_on_stderr_and_the_results_on_stdout(shifted, capsys, tmp_path):
    """`role-rubric predict ... > log.txt` (or score's table into a file) must still show the warning."""
    _, model, release = shifted
    out = tmp_path / "p.csv"
    assert main(["predict", f"model={model}", f"data={release}", f"out={out}"]) == 0
    stdout, err = capsys.readouterr()
    assert err.startswith("predict: warning: these conversations differ from the training data"), err
    assert "warning:" not in stdout and f"wrote {out}" in stdout


def test_a_failed_gate_is_exit_1_and_a_passed_one_0(shifted, capsys, tmp_path):
    _, model, release = shifted
    args = ["estimate", f"data={release}", f"model={model}", "on_shift=ignore"]
    code, err = _run([*args, f"out={tmp_path / 'a'}", "fail_under=0.99"], capsys)
    assert code == 1 and err.startswith("role-rubric estimate: gate failed: ") and _one_line(err), err
    assert (tmp_path / "a" / "estimate.json").exists()  # written before the gate decides
    code, err = _run([*args, f"out={tmp_path / 'b'}", "fail_under=0"], capsys)
    assert code == 0, err


def test_a_crash_is_not_exit_1(monkeypatch, capsys, tmp_path):
    """An exception that is no InputError is a bug: its traceback and its own status (70), never 1."""

    def boom(cfg):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(COMMANDS["evaluate"][0], "run", boom)
    code, err = _run(["evaluate", *_stand_ins("evaluate", tmp_path)], capsys)
    assert code == 70 and "ZeroDivisionError" in err and err.splitlines()[-1].endswith("please report it."), err


def test_gather_partial_failure_is_exit_3(tmp_path, capsys):
    """Requests that fail after every retry: what succeeded is written, the run ends with exit status 3."""
    from rubric.servers.fake import FakeOpenAI

    conversations = tmp_path / "c.jsonl"
    conversations.write_text(
        "".join(
            f'{{"conversation_id": "c{i}", "chatbot_role": "A bank\'s support agent.", '
            f'"turns": [{{"user": "Hello {word}?", "assistant": "How can I help with your card?"}}]}}\n'
            for i, word in enumerate(["there", "FAILME"])
        )
    )
    with FakeOpenAI() as server:
        server.fail_when = "FAILME"
        code = main(
            [
                "gather",
                f"conversations={conversations}",
                "judge=fake",
                f"judge.base_url={server.base_url}",
                "judge.max_retries=0",
                f"out={tmp_path / 'g'}",
                "progress=false",
            ]
        )
    err = capsys.readouterr().err.strip()
    assert code == 3, err
    assert err.splitlines()[-1].startswith("role-rubric gather: error: ") and "requests failed" in err, err
    assert (tmp_path / "g" / "llm.csv").exists() and (tmp_path / "g" / "failures.csv").exists()
