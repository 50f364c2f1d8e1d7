"""`role-rubric COMMAND --help` documents every key from the schema; bad overrides get "did you mean"."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from calibration.cli import COMMANDS, compose_config, main
from calibration.schema.help import _flatten


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_lists_every_key_with_its_default(command, capsys):
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: role-rubric {command}") and COMMANDS[command][1] in text
    flat = _flatten(OmegaConf.to_container(compose_config(command), resolve=False))
    for key, value in flat.items():
        assert f"  {key}=" in text, key
        if value == "???":
            assert f"{key}=???  (required)" in text


def test_short_flag_and_descriptions(capsys):
    assert main(["train", "-h"]) == 0
    text = capsys.readouterr().out
    assert "train.patience=12" in text and "evaluations without improvement" in text
    assert "train=default" in text and "Training: pretrain on all questions" in text  # the group's header
    assert main(["gather", "--help", "judge=vllm"]) == 0  # other arguments do not stop --help
    text = capsys.readouterr().out
    assert "judge=openai" in text and "vllm-completions" in text  # the group's choices
    assert "cache=${out}/cache.sqlite" in text  # defaults as written, interpolation kept


def test_top_level_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert all(f"  {name} " in text for name in COMMANDS) and "--help" in text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["train", "data=x", "out=y", "train.ensembel=4"],
            "unknown key 'train.ensembel'. Did you mean 'train.ensemble'?",
        ),
        (["gather", "conversations=x", "judge=opanai"], "unknown judge 'opanai'. Did you mean 'openai'?"),
        (["report", "data=x", "out=y", "report.nboot=3"], "Did you mean 'report.n_boot'?"),
        (["cv", "data=x", "out=y", "fold=3"], "unknown key 'fold'. Did you mean 'folds'?"),
        (["traim"], "unknown command 'traim'. Did you mean 'train'?"),
    ],
)
def test_unknown_names_get_did_you_mean_and_the_valid_list(argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1
    assert "Fix:" in err and ("openai, tgi" in err or "Valid" in err or "use one of" in err)


def test_help_shows_each_keys_type_and_description(capsys):
    assert main(["gather", "--help"]) == 0
    text = capsys.readouterr().out
    assert "judge.timeout=60.0\n      float in (0, inf): seconds per request" in text  # JudgeConfig's field
    assert "batch.max_mb=200.0\n      float in (0, inf): megabytes per batch file" in text  # a nested block
    assert "long_turns=warn\n      warn | refuse" in text


def test_a_closed_pipe_ends_quietly():
    """`role-rubric train --help | head -1`: the reader leaves early; no traceback, SIGPIPE's exit status."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from calibration.cli import main; sys.exit(main(['train', '--help']))"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader goes away before the help is printed
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == "", err
