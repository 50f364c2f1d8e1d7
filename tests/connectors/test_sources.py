"""The registry of `import` sources (calibration/connectors/sources.py): every source registered loads and keeps
the contract, each takes its own keys (a key of another source is refused, naming the source's keys), token_env=
means each service's own variable by default and is honoured as given, and a new source is one module plus its
registration: a tiny one, registered in a registry of the test's own, imports through the command's code path."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from calibration.cli import main
from calibration.connectors.sources import SOURCES, SpanReader, TraceSource, open_source
from calibration.connectors.trace_import import import_traces
from calibration.schema.build import command_config
from calibration.schema.commands_import import Import, source_settings
from calibration.schema.keys import required
from calibration.schema.source_keys import SOURCE_KEYS, SourceKeys, TraceKeys
from rubric.config.settings import path, settings_of
from rubric.errors import InputError
from rubric.plugins import Plugin, Registry
from rubric.traces.assemble import TraceSelection
from rubric.traces.otlp import read_otlp_file
from rubric.traces.spans import Annotation, Span
from tests.traces.otlp_json import conversation_spans, jsonl, request


@pytest.mark.parametrize("name", SOURCES.names())
def test_every_registered_source_loads_and_keeps_the_contract(name):
    cls = SOURCES.load(name)
    assert SOURCES.get(name).summary
    assert issubclass(cls.settings, SourceKeys) and cls.settings.source == name
    assert SOURCE_KEYS[name] is cls.settings  # the command's keys are built from the same class
    assert settings_of(cls.settings), f"{name} declares no keys"
    for f in settings_of(cls.settings):  # every key described, with a rule --help and the checks read
        assert f.metadata["doc"] and f.metadata["rule"].want, f"{name}: {f.name}"
    assert list(inspect.signature(cls.import_into).parameters) == ["self", "out", "progress"]
    made = cls.__new__(cls)
    assert isinstance(made, TraceSource)  # the Protocol's members, checked structurally


def test_the_registry_and_the_command_name_the_same_sources():
    (choice,) = [f for f in dataclasses.fields(Import) if f.name == "source"]
    assert SOURCES.names() == list(SOURCE_KEYS)
    assert choice.metadata["rule"].type == " | ".join(SOURCES.names())


def test_an_unknown_source_lists_the_names(capsys):
    with pytest.raises(InputError, match=r"no import source is named 'zipkin' \(the names are: llm-rubric, label-st"):
        SOURCES.load("zipkin")
    assert main(["import", "source=zipkin", "out=o"]) == 2
    err = capsys.readouterr().err
    assert "zipkin" in err and all(name in err for name in SOURCES.names()), err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["source=otel", "files=x.jsonl", "tracking_uri=http://localhost:5000"],
            "source=otel does not take tracking_uri= (a key of source=mlflow); its keys are conversation_key=,",
        ),
        (
            ["source=phoenix", "url=http://localhost:6006", "project=p", "export=e.json"],
            "source=phoenix does not take export= (a key of source=label-studio); its keys are",
        ),
        (
            ["source=sheet", "data=d", "sheet=s.csv", "since=2026-01-01"],
            "source=sheet does not take since= (a key of source=otel|mlflow|phoenix); its keys are data=, sheet=, plan=.",
        ),
        (
            ["source=llm-rubric", "evaluations=e.tsv", "judgments=j.tsv", "token_env=MY_TOKEN"],
            "source=llm-rubric does not take token_env= (a key of source=label-studio|mlflow|phoenix); its keys are "
            "evaluations=, judgments=.",
        ),
    ],
)
def test_a_key_of_another_source_is_refused_naming_the_sources_keys(argv, said, capsys, tmp_path):
    assert main(["import", *argv, f"out={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_token_env_defaults_to_each_services_own_variable_and_is_honoured_as_given(tmp_path, monkeypatch):
    out = f"out={tmp_path / 'o'}"
    phoenix = ["source=phoenix", "url=http://127.0.0.1:1", "project=p", out]
    defaults = {
        "phoenix": phoenix,
        "mlflow": ["source=mlflow", "tracking_uri=http://127.0.0.1:1", "experiment=e", out],
        "label-studio": ["source=label-studio", "data=d", "url=http://127.0.0.1:1", "project=1", out],
    }
    expected = {"phoenix": "PHOENIX_API_KEY", "mlflow": "MLFLOW_TRACKING_TOKEN", "label-studio": "LABEL_STUDIO_API_KEY"}
    for name, argv in defaults.items():
        cfg = command_config("import", argv)
        assert source_settings(SOURCE_KEYS[name], cfg).token_env == expected[name]
    cfg = command_config("import", [*phoenix, "token_env=LABEL_STUDIO_API_KEY"])
    assert source_settings(SOURCE_KEYS["phoenix"], cfg).token_env == "LABEL_STUDIO_API_KEY"
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    with pytest.raises(InputError, match="token_env=LABEL_STUDIO_API_KEY names an environment variable that is not"):
        open_source(cfg).import_into(tmp_path / "o", progress=False)  # read, not mistaken for "not given"


# -- a new source: one module (here, this one) and its registration ---------------------------------------------


@dataclass(frozen=True)
class TinyKeys(TraceKeys):
    """source=tiny: the spans of one OTLP file, read with rubric/traces/otlp.py's reader."""

    source: ClassVar[str] = "tiny"
    files: str = required("one OTLP JSON file", path(), fix="pass files=FILE.")


class TinyReader:
    def __init__(self, file: Path):
        self.file = file
        self.description = f"the tiny file {file}"

    @property
    def record(self) -> dict[str, Any]:
        return {"file": str(self.file)}

    def spans(self) -> Iterator[Span]:
        return read_otlp_file(self.file)

    def annotations(self) -> Iterator[Annotation]:
        return iter(())


class TinySource:
    settings: ClassVar[type[TinyKeys]] = TinyKeys

    def __init__(self, settings: TinyKeys):
        self.keys = settings

    def import_into(self, out: Path, *, progress: bool) -> dict[str, int]:
        def reader(selection: TraceSelection) -> SpanReader:
            return TinyReader(Path(self.keys.files))

        return import_traces(self.keys, reader, out=out, progress=progress)


def test_a_new_source_is_one_module_and_its_registration(tmp_path):
    file = tmp_path / "export.jsonl"
    file.write_text(jsonl([request(conversation_spans("genai", 1, "c0"))]))
    registry: Registry[type[TraceSource]] = Registry(
        "import source", [*SOURCES, Plugin("tiny", __name__, "TinySource", summary="one OTLP file")]
    )
    # the command's object as the command line gives it (files= is a key the command has), then source=tiny
    cfg = command_config("import", ["source=otel", f"files={file}", f"out={tmp_path / 'out'}"])
    cfg = dataclasses.replace(cfg, source="tiny")
    source = open_source(cfg, registry)
    assert isinstance(source, TinySource) and isinstance(TinyReader(file), SpanReader)
    counts = source.import_into(cfg.out, progress=False)
    assert counts["conversations"] == 1 and counts["turns"] == 3
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    assert record["conversation_id"] == "c0" and record["source"] == {"kind": "tiny", "file": str(file)}
    assert all(turn["trace_id"] and turn["span_id"] for turn in record["turns"])  # ids kept, for publishing back
    with pytest.raises(InputError, match="no import source is named 'tinny'"):
        open_source(dataclasses.replace(cfg, source="tinny"), registry)
