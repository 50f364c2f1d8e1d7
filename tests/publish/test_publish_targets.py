"""The publish targets' seam: every registered target implements `PublishTarget` with its own keys (one
dataclass of the schema), the command chooses by the registry alone, a key the chosen target does not take is
refused naming the keys it does, a missing extra is one line, and a disagreement list that is not
compare-judges' is one line (no server needed)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from calibration.cli import main
from calibration.connectors.targets import TARGETS, PublishTarget
from calibration.schema.build import command_config
from calibration.schema.commands_publish import TARGET_KEYS, MlflowKeys, OtelKeys, PhoenixKeys, Publish
from tests.loopback import LoopbackServer, QuietHandler

ROOT = Path(__file__).resolve().parents[2]


def test_every_registered_target_implements_the_interface_with_its_own_keys():
    assert TARGETS.names() == list(TARGET_KEYS) == ["otel", "mlflow", "phoenix"]
    for name in TARGETS.names():
        cls = TARGETS.load(name)
        assert issubclass(cls, PublishTarget) and not inspect.isabstract(cls), name
        assert cls.__orig_bases__[0].__args__[0] is TARGET_KEYS[name]  # PublishTarget[ItsKeys]
        assert cls.address_key in {f.name for f in dataclasses.fields(TARGET_KEYS[name])}


def test_the_command_names_no_target():
    """It loads the target by name from the registry: no branch on target names."""
    tree = ast.parse((ROOT / "calibration" / "commands" / "publish.py").read_text())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not strings & {"otel", "mlflow", "phoenix"}


def test_each_target_gets_its_own_keys_with_its_own_defaults():
    cfg = command_config("publish", ["target=phoenix", "scores=s.csv", "url=http://localhost:6006"])
    assert isinstance(cfg, Publish) and cfg.scores == Path("s.csv")
    assert cfg.keys() == PhoenixKeys(url="http://localhost:6006", token_env="PHOENIX_API_KEY", timeout=10)
    cfg = command_config(
        "publish", ["target=mlflow", "cv=c", "tracking_uri=http://h:5000", "experiment=e", "timeout=3"]
    )
    assert cfg.keys() == MlflowKeys(tracking_uri="http://h:5000", experiment="e", run_name=None, timeout=3)
    cfg = command_config("publish", ["target=otel", "scores=s.csv", "out=e.jsonl"])
    assert cfg.keys() == OtelKeys(out=Path("e.jsonl"), endpoint=None, timeout=10)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["target=phoenix", "scores=s.csv", "url=http://localhost:6006", "tracking_uri=http://h:5000"],
         "target=phoenix does not take tracking_uri= (a key of target=mlflow); its keys are timeout=, url=, "
         "token_env=."),
        (["target=otel", "scores=s.csv", "out=e.jsonl", "experiment=support"],
         "target=otel does not take experiment= (a key of target=mlflow); its keys are timeout=, out=, endpoint=."),
        (["target=mlflow", "scores=s.csv", "tracking_uri=http://h:5000", "token_env=MY_KEY"],
         "target=mlflow does not take token_env= (a key of target=phoenix)"),
        (["target=otel", "disagreements=d.csv", "scores=s.csv", "out=e.jsonl"],
         "disagreements= is published to MLflow (feedback on each trace) or Phoenix (span annotations)"),
        (["target=mlflow", "scores=s.csv", "tracking_uri=http://h:5000", "top=5"], "top= needs disagreements=."),
        (["target=phoenix", "url=http://localhost:6006"], "target=phoenix needs scores= or disagreements=."),
    ],
)  # fmt: skip
def test_a_key_the_target_does_not_take_is_one_line_naming_its_keys(args, expected, capsys):
    assert main(["publish", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and "Fix: " in err[0], err


def test_a_missing_extra_is_one_line_with_the_install_command(monkeypatch, capsys, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "mlflow", None)  # stands for an environment without the [mlflow] extra
    args = ["publish", "target=mlflow", f"cv={tmp_path}", "tracking_uri=http://127.0.0.1:9"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "publish target=mlflow needs the optional extra [mlflow]" in err[0]
    assert "pip install 'role-rubric[mlflow]'" in err[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "no disagreements.csv here"),
        ("conversation_id,turn,answer\nc,0,1\n", "not the disagreements.csv that compare-judges writes (no column "
         "llm_judge, rank, question_id"),
        ("llm_judge,rank,conversation_id,turn,question_id,reviewer_id,answer,calibrated,gap,gap_share,trace_id,span_id"
         "\nj,1,c,0,q,r,x,2,1,0.5,,\n", "disagreements.csv, row 2: a value is not a number"),
    ],
)  # fmt: skip
def test_a_disagreement_list_that_is_not_compare_judges_is_one_line(tmp_path, capsys, text, expected):
    folder = tmp_path / "compare"
    folder.mkdir()
    if text is not None:
        (folder / "disagreements.csv").write_text(text)
    assert main(["publish", "target=mlflow", f"disagreements={folder}", "tracking_uri=http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and "Fix: " in err[0], err


def test_rows_without_trace_ids_are_kept_apart_and_named(tmp_path):
    from calibration.publish.disagreements import read_disagreements

    head = (
        "llm_judge,rank,conversation_id,turn,question_id,reviewer_id,answer,calibrated,gap,gap_share,trace_id,span_id"
    )
    body = [f"j,{i + 1},c{i},0,q,r,1,2.5,1.5,0.5,{'' if i % 2 else f'{i:032x}'},{'' if i % 2 else f'{i:016x}'}"
            for i in range(5)]  # fmt: skip
    (tmp_path / "disagreements.csv").write_text("\n".join([head, *body]) + "\n")
    found = read_disagreements(tmp_path)
    assert [r.conversation_id for r in found.rows] == ["c0", "c2", "c4"]
    assert [r.conversation_id for r in found.untraced] == ["c1", "c3"]
    assert found.untraced_line().startswith("2 of the 5 disagreement rows have no trace id")
    assert found.untraced_line().endswith(": c1/0, c3/0")
    assert [r.rank for r in read_disagreements(tmp_path, top=2).rows] == [1]


class _Proxy(LoopbackServer):
    """A forward proxy on this machine that answers every request with 200 "OK" and records what it was asked."""

    def __init__(self) -> None:
        seen = self.seen = []

        class Handler(QuietHandler):
            def do_GET(self):  # noqa: N802
                seen.append(self.path)  # a proxy is asked for the whole URL
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

        super().__init__(Handler)


@pytest.mark.parametrize("target", ["mlflow", "phoenix"])
def test_the_probes_go_through_the_environments_proxy_except_for_this_machine(target, monkeypatch):
    from calibration.connectors.mlflow.publish_client import probe as mlflow_probe
    from calibration.connectors.phoenix.publish import _probe as phoenix_probe
    from rubric.errors import InputError

    probe, path = {"mlflow": (mlflow_probe, "/health"), "phoenix": (phoenix_probe, "/healthz")}[target]
    with _Proxy() as proxy:
        for var in ("HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(var, proxy.url)
        for var in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(var, raising=False)
        probe("http://tracking.example.invalid:5000", 5)  # a remote server: reached through the proxy
        assert proxy.seen == [f"http://tracking.example.invalid:5000{path}"]
        with pytest.raises(InputError, match="does not answer"):
            probe("http://127.0.0.1:9", 5)  # this machine: asked directly (nothing listens on port 9)
        assert len(proxy.seen) == 1
