"""Every bad input an adversarial user tried (issue 13), one row each: the command line, in process, must
exit with the documented status and one clear last line `role-rubric CMD: error: [FILE[, row N]: ]what.
Fix: what to do.` naming the file or key, and nothing may be half-written.

Rows are (id, setup, argv, exit status, pattern). `setup(tmp, good)` writes the files the row needs; argv may
use {tmp}, {conv}, {rubric}, {data} and {url} (a tiny endpoint that answers whatever the row asks).
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
import yaml

from calibration.cli import main
from tests.calibration.conftest import make_native_dataset

CONVERSATIONS = [
    {
        "conversation_id": f"c{i}",
        "chatbot_role": "A bank's support agent.",
        "turns": [{"user": f"Card question {i}.{t}", "assistant": f"Let me check card {i}.{t}."} for t in range(2)],
    }
    for i in range(2)
]
RUBRIC = {
    "questions": [
        {"id": "scope", "text": "In scope?", "options": [{"value": 1, "label": "no"}, {"value": 2, "label": "yes"}]},
        {"id": "overall", "text": "Adheres?", "options": [{"value": v, "label": f"o{v}"} for v in (1, 2, 3, 4)]},
    ]
}


@dataclass(frozen=True)
class Case:
    id: str
    argv: list[str]
    code: int
    pattern: str
    setup: Callable[[Path, Path], None] | None = None
    reply: tuple[int, dict[str, str], bytes] | None = None
    """For gather rows: what the endpoint answers to every request."""
    after: Callable[[Path, str], None] | None = None
    """Further checks on the output folder and stderr."""


def _write(name: str, content: str | bytes) -> Callable[[Path, Path], None]:
    def apply(tmp: Path, good: Path | None = None) -> None:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())

    return apply


def _jsonl(*records: object) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _rubric_with(**question: object) -> str:
    """The valid rubric with its first question's fields replaced (None: removed)."""
    rub = json.loads(json.dumps(RUBRIC))
    rub["questions"][0].update(question)
    return yaml.safe_dump(rub, sort_keys=False)


def _option(**fields: object) -> str:
    rub = json.loads(json.dumps(RUBRIC))
    rub["questions"][0]["options"][0].update(fields)
    return yaml.safe_dump(rub, sort_keys=False)


def _conv(**fields: object) -> dict:
    conv = json.loads(json.dumps(CONVERSATIONS[0]))
    conv.update(fields)
    return {k: v for k, v in conv.items() if v is not None}


# -- config values: `CMD key=value` -> exit 2, naming the key and the range --------------------------------
NEEDS = {
    "train": ["data={data}", "out={tmp}/model"],
    "cv": ["data={data}", "out={tmp}/cv"],
    "search": ["data={data}", "out={tmp}/search"],
    "predict": ["model={tmp}/model", "data={data}", "out={tmp}/p.csv"],
    "evaluate": ["predictions={tmp}/p.csv", "data={data}", "out={tmp}/m.json"],
    "report": ["data={data}", "out={tmp}/report"],
    "demo": ["out={tmp}/demo"],
    "score": ["conversations={conv}", "out={tmp}/s.csv"],
    "gather": ["conversations={conv}", "judge=vllm", "out={tmp}/g"],
    "import": ["evaluations={tmp}/e.tsv", "judgments={tmp}/j.tsv", "out={tmp}/i"],
}

CONFIG_VALUES = [
    ("train", "train.lr=fast", r"train\.lr='fast' is not a finite number\. Fix: set train\.lr to a number > 0"),
    ("train", "train.lr=0", r"train\.lr=0 is out of range"),
    ("train", "train.lr=-0.1", r"train\.lr=-0\.1 is out of range"),
    ("train", "train.lr=nan", r"train\.lr=nan is not a finite number"),
    ("train", "train.lr=true", r"train\.lr=True is not a finite number"),
    ("train", "train.finetune_lr=0", r"train\.finetune_lr=0 is out of range"),
    (
        "train",
        "train.ensemble=0",
        r"train\.ensemble=0 is out of range\. Fix: set train\.ensemble to a whole number >= 1",
    ),
    ("train", "train.ensemble=-2", r"train\.ensemble=-2 is out of range"),
    ("train", "train.ensemble=2.5", r"train\.ensemble=2\.5 is not a whole number"),
    ("train", "train.ensemble=many", r"train\.ensemble='many' is not a whole number"),
    ("train", "train.val_fraction=2", r"train\.val_fraction=2 is out of range.*<= 0\.5"),
    ("train", "train.val_fraction=0", r"train\.val_fraction=0 is out of range"),
    ("train", "train.val_fraction=0.9", r"train\.val_fraction=0\.9 is out of range"),
    ("train", "train.batch_size=-1", r"train\.batch_size=-1 is out of range"),  # 0 = full batch
    ("train", "train.pretrain_steps=-1", r"train\.pretrain_steps=-1 is out of range"),
    ("train", "train.finetune_steps=0", r"train\.finetune_steps=0 is out of range"),
    ("train", "train.l2_judge=-1", r"train\.l2_judge=-1 is out of range"),
    ("train", "train.weight_decay=-0.1", r"train\.weight_decay=-0\.1 is out of range"),
    ("train", "train.eval_every=0", r"train\.eval_every=0 is out of range"),
    ("train", "train.patience=0", r"train\.patience=0 is out of range"),
    ("train", "train.train_fraction=0", r"train\.train_fraction=0 is out of range"),
    ("train", "train.train_fraction=1.5", r"train\.train_fraction=1\.5 is out of range"),
    ("train", "train.pool=median", r"train\.pool='median' is not one of the choices\. Fix: .*geometric, arithmetic"),
    ("train", "train.recalibrate=platt", r"train\.recalibrate='platt' is not one of the choices"),
    ("train", "train.recalibrate_prior=-1", r"train\.recalibrate_prior=-1 is out of range"),
    ("train", "train.recalibrate_min_members=0", r"train\.recalibrate_min_members=0 is out of range"),
    ("train", "network.hidden1=0", r"network\.hidden1=0 is out of range"),
    ("train", "network.hidden2=-5", r"network\.hidden2=-5 is out of range"),
    ("train", "network.hidden1=big", r"network\.hidden1='big' is not a whole number"),
    ("train", "network.hidden1=100000", r"network\.hidden1=100000 is out of range.*<= 4096"),
    ("train", "network.personalised=maybe", r"network\.personalised='maybe' is not true or false"),
    ("train", "network.drop_questions=scope", r"network\.drop_questions='scope' is not a list of names"),
    ("train", "seed=abc", r"seed='abc' is not a whole number"),
    ("train", "seed=-1", r"seed=-1 is out of range"),
    ("train", "seed=1.5", r"seed=1\.5 is not a whole number"),
    ("train", "target=[a,b]", r"target=\['a', 'b'\] is not a non-empty text"),
    ("cv", "folds=abc", r"folds='abc' is not a whole number\. Fix: set folds to a whole number >= 2"),
    ("cv", "folds=-3", r"folds=-3 is out of range"),
    ("cv", "folds=1", r"folds=1 is out of range"),
    ("cv", "folds=0", r"folds=0 is out of range"),
    ("cv", "folds=5000", r"folds=5000 is out of range"),
    ("cv", "fold_seed=x", r"fold_seed='x' is not a whole number"),
    ("cv", "nested=perhaps", r"nested='perhaps' is not true or false"),
    ("cv", "search.inner_folds=1", r"search\.inner_folds=1 is out of range"),
    ("search", "search.trials=0", r"search\.trials=0 is out of range"),
    ("search", "search.trials=many", r"search\.trials='many' is not a whole number"),
    ("search", "search.inner_folds=1", r"search\.inner_folds=1 is out of range"),
    ("search", "search.storage=notaurl://x", r"search\.storage='notaurl://x' has the unknown scheme 'notaurl'"),
    (
        "search",
        "search.storage=just-a-path.db",
        r"search\.storage='just-a-path\.db' is not a database URL\. Fix: .*sqlite:///",
    ),
    ("search", "search.workers=0", r"search\.workers=0 is out of range"),
    ("search", "search.timeout=0", r"search\.timeout=0 is out of range"),
    ("search", "search.timeout=-5", r"search\.timeout=-5 is out of range"),
    ("search", "search.timeout=soon", r"search\.timeout='soon' is not a finite number"),
    ("search", "search.study=''", r"search\.study='' is not a non-empty text"),
    ("gather", "judge.timeout=0", r"judge\.timeout=0 is out of range\. Fix: set judge\.timeout to a number > 0"),
    ("gather", "judge.timeout=-5", r"judge\.timeout=-5 is out of range"),
    ("gather", "judge.timeout=slow", r"judge\.timeout='slow' is not a finite number"),
    ("gather", "judge.max_retries=-1", r"judge\.max_retries=-1 is out of range"),
    ("gather", "judge.concurrency=many", r"judge\.concurrency='many' is not a whole number"),
    ("gather", "judge.concurrency=0", r"judge\.concurrency=0 is out of range"),
    ("gather", "judge.floor=2", r"judge\.floor=2 is out of range.*< 0\.05"),
    ("gather", "judge.floor=0", r"judge\.floor=0 is out of range"),
    ("gather", "judge.floor=-0.1", r"judge\.floor=-0\.1 is out of range"),
    ("gather", "limit=-1", r"limit=-1 is out of range\. Fix: set limit to a whole number >= 1 \(or null\)"),
    ("gather", "limit=0", r"limit=0 is out of range"),
    ("gather", "limit=all", r"limit='all' is not a whole number"),
    ("gather", "judge.top_logprobs=0", r"judge\.top_logprobs=0 is out of range"),
    ("gather", "judge.top_logprobs=21", r"judge\.top_logprobs=21 is out of range.*<= 20"),
    ("gather", "judge.samples=0", r"judge\.samples=0 is out of range"),
    ("gather", "judge.backoff=-1", r"judge\.backoff=-1 is out of range"),
    ("gather", "judge.max_backoff=-1", r"judge\.max_backoff=-1 is out of range"),
    ("gather", "judge.reasks=-1", r"judge\.reasks=-1 is out of range"),
    ("gather", "judge.processes=-2", r"judge\.processes=-2 is out of range"),
    ("gather", "judge.processes=many", r"judge\.processes='many' is not a whole number.*auto"),
    ("gather", "judge.sample_temperature=-1", r"judge\.sample_temperature=-1 is out of range"),
    ("gather", "judge.price_input_per_mtok=-1", r"judge\.price_input_per_mtok=-1 is out of range"),
    ("gather", "judge.reason_max_tokens=0", r"judge\.reason_max_tokens=0 is out of range"),
    ("gather", "granularity=sentence", r"granularity='sentence' is not one of the choices.*turn, conversation"),
    ("gather", "include_reason=maybe", r"include_reason='maybe' is not true or false"),
    ("gather", "progress=2", r"progress=2 is not true or false"),
    ("gather", "judge.http_client=curl", r"judge\.http_client='curl' is not one of the choices"),
    ("gather", "judge.answer_mode=always", r"judge\.answer_mode='always' is not one of the choices"),
    ("gather", "judge.output_mode=text", r"judge\.output_mode='text' is not one of the choices"),
    ("gather", "judge.backend=grpc", r"judge\.backend='grpc' is not one of the choices"),
    ("gather", "judge.seed=x", r"judge\.seed='x' is not a whole number"),
    ("gather", "judge.base_url=notaurl", r"judge\.base_url='notaurl' is not an http\(s\) URL"),
    ("gather", "judge.answer_tokens=0", r"judge\.answer_tokens=0 is out of range"),
    ("gather", "judge.temperature=-1", r"judge\.temperature=-1 is out of range"),
    ("gather", "judge.allow_low_coverage=maybe", r"judge\.allow_low_coverage='maybe' is not true or false"),
    ("predict", "judges=[]", r"judges=\[\] is an empty list"),
    ("predict", "judges=everyone", r"judges='everyone' is not a list of names.*labelled, population"),
    ("predict", "judges=5", r"judges=5 is not a list of names"),
    ("score", "threshold=2", r"threshold=2 is out of range"),
    ("score", "threshold=-0.1", r"threshold=-0\.1 is out of range"),
    ("score", "output_mode=fuzzy", r"output_mode='fuzzy' is not one of the choices"),
    ("score", "show=-1", r"show=-1 is out of range"),
    ("score", "strict_mode=maybe", r"strict_mode='maybe' is not true or false"),
    ("report", "report.n_boot=0", r"report\.n_boot=0 is out of range"),
    ("report", "report.workers=0", r"report\.workers=0 is out of range"),
    (
        "report",
        "report.learning_curve.fractions=[0,2]",
        r"report\.learning_curve\.fractions=\[0, 2\] is not a list of fractions",
    ),
    ("report", "report.ensemble=0", r"report\.ensemble=0 is out of range"),
    ("report", "report.max_judges=0", r"report\.max_judges=0 is out of range"),
    ("report", "folds=1", r"folds=1 is out of range"),
    ("demo", "threads=0", r"threads=0 is out of range"),
    ("demo", "folds=1", r"folds=1 is out of range"),
    ("demo", "limit=-2", r"limit=-2 is out of range"),
    ("import", "source=other", r"source='other' is not one of the choices"),
]

CASES = [Case(f"{cmd} {ov}", [cmd, *NEEDS[cmd], ov], 2, pat) for cmd, ov, pat in CONFIG_VALUES]

# -- output paths --------------------------------------------------------------------------------------------
CASES += [
    Case(
        "train out is a file",
        ["train", "data={data}", "out={tmp}/f"],
        2,
        r"/f: out= is a file, but this command writes a folder",
        setup=_write("f", "x"),
    ),
    Case("cv out is a file", ["cv", "data={data}", "out={tmp}/f"], 2, r"out= is a file", setup=_write("f", "x")),
    Case(
        "train out below a file",
        ["train", "data={data}", "out={tmp}/f/model"],
        2,
        r"cannot write there: .*/f is not a folder\. Fix: set out= to a path",
        setup=_write("f", "x"),
    ),
    Case(
        "predict out is a folder",
        ["predict", "model={tmp}/m", "data={data}", "out={tmp}"],
        2,
        r"out= is a folder, but this command writes a file",
    ),
    Case(
        "evaluate out is a folder",
        ["evaluate", "predictions={tmp}/p.csv", "data={data}", "out={tmp}"],
        2,
        r"out= is a folder, but this command writes a file",
    ),
    Case(
        "gather out is a file",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/f"],
        2,
        r"out= is a file",
        setup=_write("f", "x"),
    ),
    Case(
        "gather cache is a folder",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/g", "cache={tmp}"],
        2,
        r"the request cache is a folder\. Fix: set cache=",
    ),
    Case(
        "gather cache is not a database",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/g", "cache={tmp}/c.sqlite"],
        2,
        r"c\.sqlite: the request cache is not usable \(file is not a database\)",
        setup=_write("c.sqlite", "hello" * 400),
    ),
    Case(
        "gather cache below a file",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/g", "cache={tmp}/f/c.sqlite"],
        2,
        r"the request cache is not usable",
        setup=_write("f", "x"),
    ),
]


# -- gather stopping on an input error leaves nothing behind; an earlier out and cache are kept as they were --
def _gone(name: str) -> Callable[[Path, str], None]:
    def check(tmp: Path, err: str) -> None:
        assert not (tmp / name).exists(), sorted(p.name for p in (tmp / name).rglob("*"))

    return check


def _earlier_cache(tmp: Path, good: Path) -> None:
    from rubric.judge.cache import RequestCache

    (tmp / "bad.jsonl").write_text('{"conversation_id": "c0", "turns": [\n')
    store = RequestCache(tmp / "g" / "cache.sqlite")
    store.put("earlier", '{"answer": 1}')
    store.close()
    (tmp / "cache.before").write_bytes((tmp / "g" / "cache.sqlite").read_bytes())


def _cache_kept(tmp: Path, err: str) -> None:
    assert sorted(p.name for p in (tmp / "g").iterdir()) == ["cache.sqlite"]
    assert (tmp / "g" / "cache.sqlite").read_bytes() == (tmp / "cache.before").read_bytes()


_NO_KEY = ["judge=openai", "judge.api_key_env=ROLE_RUBRIC_TEST_UNSET_KEY", "judge.api_key=null"]
CASES += [
    Case(
        "gather with a malformed conversations file leaves no out folder",
        ["gather", "conversations={tmp}/bad.jsonl", "judge=embedding", "out={tmp}/fresh"],
        2,
        r"bad\.jsonl, row 1: malformed JSON",
        setup=_write("bad.jsonl", '{"conversation_id": "c0", "turns": [\n'),
        after=_gone("fresh"),
    ),
    Case(
        "gather refused a judge without a key leaves no out folder nor an empty cache",
        ["gather", "conversations={conv}", *_NO_KEY, "out={tmp}/fresh", "cache={tmp}/new/c.sqlite"],
        2,
        r"no API key: the environment variable ROLE_RUBRIC_TEST_UNSET_KEY is not set",
        after=lambda tmp, err: (_gone("fresh")(tmp, err), _gone("new")(tmp, err)),
    ),
    Case(
        "gather with a malformed conversations file keeps an earlier cache byte for byte",
        ["gather", "conversations={tmp}/bad.jsonl", "judge=embedding", "out={tmp}/g"],
        2,
        r"bad\.jsonl, row 1: malformed JSON",
        setup=_earlier_cache,
        after=_cache_kept,
    ),
    Case(
        "gather refused a judge without a key keeps an earlier cache byte for byte",
        ["gather", "conversations={conv}", *_NO_KEY, "out={tmp}/g"],
        2,
        r"no API key: the environment variable ROLE_RUBRIC_TEST_UNSET_KEY is not set",
        setup=_earlier_cache,
        after=_cache_kept,
    ),
]


_CLOSED = ["judge=fake", "judge.base_url=http://127.0.0.1:1/v1"]  # nothing listens on port 1
CASES += [
    Case(
        "gather mode=batch without a key writes no batch file, no out folder nor an empty cache",
        ["gather", "conversations={conv}", *_NO_KEY, "mode=batch", "out={tmp}/fresh", "cache={tmp}/new/c.sqlite"],
        2,
        r"no API key: the environment variable ROLE_RUBRIC_TEST_UNSET_KEY is not set",
        after=lambda tmp, err: (_gone("fresh")(tmp, err), _gone("new")(tmp, err)),
    ),
    Case(
        "gather mode=batch where nothing listens writes no batch file nor an out folder",
        ["gather", "conversations={conv}", *_CLOSED, "mode=batch", "out={tmp}/fresh"],
        2,
        r"connection refused at http://127\.0\.0\.1:1/v1: nothing listens there",
        after=_gone("fresh"),
    ),
    Case(
        "gather mode=batch without a key keeps an earlier cache byte for byte and writes no batch file",
        ["gather", "conversations={conv}", *_NO_KEY, "mode=batch", "out={tmp}/g"],
        2,
        r"no API key: the environment variable ROLE_RUBRIC_TEST_UNSET_KEY is not set",
        setup=_earlier_cache,
        after=_cache_kept,
    ),
    Case(
        "gather mode=batch with a malformed conversations file leaves no out folder",
        ["gather", "conversations={tmp}/bad.jsonl", *_CLOSED, "mode=batch", "out={tmp}/fresh"],
        2,
        r"bad\.jsonl, row 1: malformed JSON",
        setup=_write("bad.jsonl", '{"conversation_id": "c0", "turns": [\n'),
        after=_gone("fresh"),
    ),
    Case(
        "gather scorer= with a bad parameter leaves no out folder nor an empty cache",
        [
            "gather",
            "conversations={conv}",
            "scorer=knn",
            "+scorer.params.bogus=1",
            "out={tmp}/fresh",
            "cache={tmp}/new/c.sqlite",
        ],
        2,
        r"bad parameter for scorer 'knn'",
        after=lambda tmp, err: (_gone("fresh")(tmp, err), _gone("new")(tmp, err)),
    ),
    Case(
        "gather scorer.beside= without llm.csv leaves no out folder nor a cache (checked before scoring)",
        [
            "gather",
            "conversations={conv}",
            "scorer=cosine",
            "scorer.beside={tmp}",
            "out={tmp}/fresh",
            "cache={tmp}/new/c.sqlite",
        ],
        2,
        r"no llm\.csv in the dataset dir to add the scores to",
        after=lambda tmp, err: (_gone("fresh")(tmp, err), _gone("new")(tmp, err)),
    ),
    Case(
        "gather scorer= with a malformed conversations file leaves no out folder",
        ["gather", "conversations={tmp}/bad.jsonl", "scorer=cosine", "out={tmp}/fresh", "cache={tmp}/new/c.sqlite"],
        2,
        r"bad\.jsonl, row 1: malformed JSON",
        setup=_write("bad.jsonl", '{"conversation_id": "c0", "turns": [\n'),
        after=lambda tmp, err: (_gone("fresh")(tmp, err), _gone("new")(tmp, err)),
    ),
]


# -- gather's out holding its own inputs: refused, inputs untouched -----------------------------------------
def _unchanged(name: str, content: bytes) -> Callable[[Path, str], None]:
    def check(tmp: Path, err: str) -> None:
        assert (tmp / name).read_bytes() == content

    return check


_OWN = _jsonl(*CONVERSATIONS[:1], {**CONVERSATIONS[1], "extra": "kept"})
_HAND_RUBRIC = yaml.safe_dump(RUBRIC, sort_keys=False)
CASES += [
    Case(
        "gather into the conversations' own folder",
        ["gather", "conversations={tmp}/ds", "judge=embedding", "out={tmp}/ds", "limit=1"],
        2,
        r"ds/conversations\.jsonl: the output folder already holds conversations\.jsonl, which is this run's input",
        setup=_write("ds/conversations.jsonl", _OWN),
        after=_unchanged("ds/conversations.jsonl", _OWN),
    ),
    Case(
        "gather over a hand-written rubric",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/ds"],
        2,
        r"ds/rubric\.yaml: the output folder already holds rubric\.yaml, which was not written by an earlier gather",
        setup=_write("ds/rubric.yaml", _HAND_RUBRIC),
        after=_unchanged("ds/rubric.yaml", _HAND_RUBRIC.encode()),
    ),
    Case(
        "gather over an imported llm.csv",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/ds"],
        2,
        r"ds/llm\.csv: the output folder already holds an llm\.csv that no earlier gather wrote",
        setup=_write("ds/llm.csv", "conversation_id,turn,question_id,option,prob\n"),
        after=_unchanged("ds/llm.csv", b"conversation_id,turn,question_id,option,prob\n"),
    ),
    Case(
        "gather over its own rubric_file",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/ds", "rubric_file={tmp}/ds/rubric.yaml"],
        2,
        r"rubric\.yaml, which is this run's input",
        setup=_write("ds/rubric.yaml", "# mine\n" + _HAND_RUBRIC),
        after=_unchanged("ds/rubric.yaml", ("# mine\n" + _HAND_RUBRIC).encode()),
    ),
]

# -- rubric files (gather rubric_file=...) ---------------------------------------------------------------------
RUBRIC_FILES = [
    ("id null", _rubric_with(id=None), r"question 1 has id None, not a name"),
    ("id list", _rubric_with(id=["a"]), r"question 1 has id \['a'\], not a name"),
    ("id empty", _rubric_with(id=""), r"question 1 has id '', not a name"),
    ("id boolean", _rubric_with(id=True), r"question 1 has id True"),
    ("value nan", _option(value=float("nan")), r"option 1 has the value nan, not a finite number"),
    ("value inf", _option(value=float("inf")), r"option 1 has the value inf, not a finite number"),
    ("value -inf", _option(value=float("-inf")), r"option 1 has the value -inf"),
    ("value true", _option(value=True), r"option 1 has a non-numeric value True"),
    ("value text", _option(value="high"), r"option 1 has a non-numeric value 'high'"),
    ("value list", _option(value=[1]), r"option 1 has a non-numeric value \[1\]"),
    ("text list", _rubric_with(text=["a", "b"]), r"question 'scope''s text must be text, not list"),
    ("text mapping", _rubric_with(text={"a": 1}), r"question 'scope''s text must be text, not dict"),
    ("text boolean", _rubric_with(text=True), r"text must be text, not bool"),
    ("label list", _option(label=["x"]), r"option 1's label must be text, not list"),
    ("label mapping", _option(label={"x": 1}), r"option 1's label must be text, not dict"),
    ("label true", _option(label=True), r"option 1's label must be text, not bool.*quote it"),
    ("one option", _rubric_with(options=[{"value": 1}]), r"question 'scope' needs at least two options"),
    ("options not a list", _rubric_with(options="1,2"), r"needs at least two options"),
    ("option without value", _rubric_with(options=[{"label": "a"}, {"value": 2}]), r"option 1 has no 'value'"),
    ("repeated value", _rubric_with(options=[{"value": 1}, {"value": 1.0}]), r"repeats an option value"),
    ("no questions", "name: x\n", r"a rubric needs a non-empty 'questions' list"),
    ("questions empty", "questions: []\n", r"non-empty 'questions' list"),
    ("not a mapping", "- a\n- b\n", r"non-empty 'questions' list"),
    ("empty file", "", r"non-empty 'questions' list"),
    ("name is a list", "name: [a]\n" + yaml.safe_dump(RUBRIC), r"the rubric's 'name' must be text, not list"),
    ("invalid yaml", "questions: [\n  - id: a\n    options: {", r"row \d+: not valid YAML"),
    ("not UTF-8", b"questions:\n  - id: \xff\n", r", row 2: not UTF-8 text.*Fix: save the file as UTF-8"),
    (
        "duplicate ids",
        yaml.safe_dump({"questions": [RUBRIC["questions"][0]] * 2}),
        r"duplicate question id\(s\): scope",
    ),
]
CASES += [
    Case(
        f"rubric {name}",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/g", "rubric_file={tmp}/r/rubric.yaml"],
        2,
        "rubric\\.yaml.*" + pat,
        setup=_write("r/rubric.yaml", text),
    )
    for name, text, pat in RUBRIC_FILES
]
CASES += [
    Case(
        "rubric folder without rubric.yaml",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/g", "rubric_file={tmp}"],
        2,
        r"rubric\.yaml: rubric file not found",
    ),
    Case(
        "target not in the rubric",
        ["gather", "conversations={conv}", "judge=embedding", "out={tmp}/g", "target=nope"],
        2,
        r"target question 'nope' is not in the rubric",
    ),
]

# -- conversations files (gather conversations=...) -------------------------------------------------------------
GOOD = CONVERSATIONS[0]
CONV_FILES = [
    ("malformed JSON", _jsonl(GOOD) + b"{oops\n", r"row 2: malformed JSON"),
    ("a list per line", _jsonl([GOOD]), r"row 1: a line must be a JSON object"),
    ("missing id", _jsonl(_conv(conversation_id=None)), r"row 1: missing conversation_id"),
    ("id is a list", _jsonl(_conv(conversation_id=["a"])), r"row 1: conversation_id \['a'\] is not text"),
    ("id is a mapping", _jsonl(_conv(conversation_id={"a": 1})), r"row 1: conversation_id \{'a': 1\} is not text"),
    ("no turns", _jsonl(_conv(turns=[])), r"row 1: conversation 'c0' has no turns"),
    ("turns not a list", _jsonl(_conv(turns="hello")), r"has no turns"),
    ("turn not an object", _jsonl(_conv(turns=["hi"])), r"turn 0 is not an object"),
    ("turn without reply", _jsonl(_conv(turns=[{"user": "u"}])), r"turn 0 has no assistant reply"),
    (
        "reply without user",
        _jsonl(_conv(turns=[{"assistant": "a"}])),
        r"turn 0: assistant reply without a preceding user",
    ),
    (
        "reply is a number",
        _jsonl(_conv(turns=[{"user": "u", "assistant": 3}])),
        r"turn 0: \"assistant\" is a number \(3\), not text",
    ),
    ("missing role", _jsonl(_conv(chatbot_role=None)), r"row 1: conversation 'c0' has no chatbot_role"),
    ("role is a list", _jsonl(_conv(chatbot_role=["x"])), r"has no chatbot_role"),
    ("duplicate id", _jsonl(GOOD, GOOD), r"row 2: duplicate conversation_id 'c0' \(first on line 1\)"),
    (
        "lone surrogate",
        _jsonl(GOOD)[:-1] + b"\n" + b'{"conversation_id": "x", "chatbot_role": "r", "turns": '
        b'[{"user": "u\\ud800", "assistant": "a"}]}\n',
        r"row 2: text with an unpaired surrogate \(\\ud800\)",
    ),
    ("not UTF-8", _jsonl(GOOD) + b'{"conversation_id": "\xff"}\n', r", row 2: not UTF-8 text"),
    ("Latin-1 text", _jsonl(GOOD).replace(b"Card", b"Caf\xe9"), r"row 1: not UTF-8 text \(byte 0xe9"),
    ("empty file", b"", r"no conversations in the file"),
    ("blank lines only", b"\n\n  \n", r"no conversations in the file"),
    (
        "messages: reply first",
        _jsonl(_conv(turns=[{"role": "assistant", "content": "a"}])),
        r"message 0: assistant reply without a preceding user message",
    ),
    (
        "messages: ends with user",
        _jsonl(
            _conv(
                turns=[
                    {"role": "user", "content": "u"},
                    {"role": "assistant", "content": "a"},
                    {"role": "user", "content": "u2"},
                ]
            )
        ),
        r"ends with a user message",
    ),
    (
        "messages: unknown role",
        _jsonl(_conv(turns=[{"role": "user", "content": "u"}, {"role": "bot", "content": "a"}])),
        r"message 1 has role 'bot'",
    ),
]
CASES += [
    Case(
        f"conversations {name}",
        ["gather", "conversations={tmp}/c/conversations.jsonl", "judge=embedding", "out={tmp}/g"],
        2,
        "conversations\\.jsonl.*" + pat,
        setup=_write("c/conversations.jsonl", content),
    )
    for name, content, pat in CONV_FILES
]
CASES += [
    Case(
        "conversations missing",
        ["gather", "conversations={tmp}/none.jsonl", "judge=embedding", "out={tmp}/g"],
        2,
        r"none\.jsonl: conversations file not found",
    ),
    Case(
        "conversations folder without the file",
        ["gather", "conversations={tmp}", "judge=embedding", "out={tmp}/g"],
        2,
        r"conversations\.jsonl: conversations file not found",
    ),
    Case(
        "conversations not given",
        ["gather", "judge=embedding", "out={tmp}/g"],
        2,
        r"missing required key 'conversations'\. Fix: pass conversations=FILE \(see role-rubric gather --help\)\.$",
    ),
]


# -- endpoint answers of the wrong shape: every pair a counted failure with its reason; exit 3 -------------------
def _reply(body: object, status: int = 200, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return status, headers or {}, raw


def _failures_say(reason: str) -> Callable[[Path, str], None]:
    def check(tmp: Path, err: str) -> None:
        failures = pd.read_csv(tmp / "g" / "failures.csv")
        assert len(failures) == 8 and failures["error"].str.contains(reason, regex=True).all(), failures["error"][0]
        assert (tmp / "g" / "llm.csv").exists() and (tmp / "g" / "gather_summary.json").exists()

    return check


def _no_key(tmp: Path, err: str) -> None:
    assert SECRET not in err and SECRET not in (tmp / "g" / "failures.csv").read_text()
    assert "***" in (tmp / "g" / "failures.csv").read_text()


SECRET = "sk-test-0123456789abcdef"
GOOD_LP = {"content": [{"token": "2", "logprob": -0.1, "top_logprobs": [{"token": "2", "logprob": -0.1}]}]}
ENDPOINT = [
    ("choices of text", _reply({"choices": ["x"]}), r"choices\[0\] is a str 'x', not an object"),
    ("choices an object", _reply({"choices": {"a": 1}}), r"response choices is a dict, not a non-empty list"),
    ("choices empty", _reply({"choices": []}), r"response choices is a list, not a non-empty list"),
    ("no choices", _reply({"id": "x"}), r"response choices is None"),
    ("body a list", _reply([1, 2]), r"response body is a list, not an object"),
    ("body not JSON", _reply(b"<html>oops</html>"), r"malformed JSON in the response"),
    (
        "logprobs.content text",
        _reply({"choices": [{"message": {"content": "2"}, "logprobs": {"content": "abc"}}]}),
        r"logprobs\.content is a str 'abc', not a list",
    ),
    (
        "top_logprobs an object",
        _reply(
            {
                "choices": [
                    {
                        "message": {"content": "2"},
                        "logprobs": {"content": [{"token": "2", "logprob": -0.1, "top_logprobs": {"2": -0.1}}]},
                    }
                ]
            }
        ),
        r"top_logprobs is a dict, not a list",
    ),
    (
        "logprob text",
        _reply(
            {"choices": [{"message": {"content": "2"}, "logprobs": {"content": [{"token": "2", "logprob": "high"}]}}]}
        ),
        r"content\[0\]\.logprob is a str 'high', not a number",
    ),
    (
        "logprob positive",
        _reply({"choices": [{"message": {"content": "2"}, "logprobs": {"content": [{"token": "2", "logprob": 3.5}]}}]}),
        r"logprob is 3\.5, not a number <= 0",
    ),
    (
        "token a number",
        _reply({"choices": [{"message": {"content": "2"}, "logprobs": {"content": [{"token": 2, "logprob": -0.1}]}}]}),
        r"content\[0\]\.token is 2, not a text",
    ),
    (
        "message a list",
        _reply({"choices": [{"message": ["2"], "logprobs": GOOD_LP}]}),
        r"choices\[0\]\.message is a list",
    ),
    (
        "content a number",
        _reply({"choices": [{"message": {"content": 2}, "logprobs": GOOD_LP}]}),
        r"message\.content is 2, not a text",
    ),
    (
        "usage a list",
        _reply({"choices": [{"message": {"content": "2"}, "logprobs": GOOD_LP}], "usage": [1]}),
        r"response usage is a list, not an object",
    ),
    (
        "usage tokens text",
        _reply({"choices": [{"message": {"content": "2"}, "logprobs": GOOD_LP}], "usage": {"prompt_tokens": "many"}}),
        r"usage\.prompt_tokens is a str 'many'",
    ),
    (
        "usage tokens negative",
        _reply({"choices": [{"message": {"content": "2"}, "logprobs": GOOD_LP}], "usage": {"completion_tokens": -3}}),
        r"usage\.completion_tokens is -3",
    ),
    ("HTTP 500 always", _reply({"error": "boom"}, status=500), r"HTTP 500 \(after 1 retries\)"),
    (
        "HTTP 429 with Retry-After soon",
        _reply({"error": "slow"}, status=429, headers={"Retry-After": "soon"}),
        r"HTTP 429",
    ),
    (
        "HTTP 400 echoing the key",
        _reply({"error": {"message": f"bad request; Authorization: Bearer {SECRET}"}}, status=400),
        r"HTTP 400: bad request; Authorization: Bearer \*\*\*",
    ),
]
_GATHER = [
    "gather",
    "conversations={conv}",
    "rubric_file={rubric}",
    "out={tmp}/g",
    "judge=vllm",
    "judge.base_url={url}",
    "judge.model=m",
    f"judge.api_key={SECRET}",
    "judge.max_retries=1",
    "judge.backoff=0",
    "judge.max_backoff=0",
    "judge.answer_mode=logprobs",
    "progress=false",
    "judge.processes=1",
    "judge.allow_low_coverage=true",
]
CASES += [
    Case(
        f"endpoint {name}",
        _GATHER,
        3,
        r"g/failures\.csv: 8 of 8 requests failed after every retry; they are listed here and left out of llm\.csv "
        r"\(0 rows written\)\. Fix: ",
        reply=reply,
        after=_no_key if "key" in name else _failures_say(reason),
    )
    for name, reply, reason in ENDPOINT
]


# -- dataset files (train data=...): a copy of the good dataset, one file edited ---------------------------------
def _dataset(edit: Callable[[Path], None]) -> Callable[[Path, Path], None]:
    def apply(tmp: Path, good: Path) -> None:
        shutil.copytree(good / "data", tmp / "d")
        edit(tmp / "d")

    return apply


def _cell(name: str, column: str, value: str, row: int = 0) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        df = pd.read_csv(root / name, dtype=str, keep_default_na=False)
        if column not in df.columns:
            df[column] = "1"
        df.loc[row, column] = value
        df.to_csv(root / name, index=False)

    return edit


def _append_row(name: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        df = pd.read_csv(root / name, dtype=str, keep_default_na=False)
        pd.concat([df, change(df.iloc[[0]].copy())]).to_csv(root / name, index=False)

    return edit


DATASETS = [
    ("coverage inf", _cell("llm.csv", "coverage", "inf"), r"llm\.csv, row 1: coverage 'inf' is outside \[0, 1\]"),
    (
        "coverage negative",
        _cell("llm.csv", "coverage", "-0.2"),
        r"llm\.csv, row 1: coverage '-0\.2' is outside \[0, 1\]",
    ),
    ("coverage above 1", _cell("llm.csv", "coverage", "1.5"), r"row 1: coverage '1\.5' is outside"),
    ("coverage text", _cell("llm.csv", "coverage", "most"), r"row 1: coverage is not a number \('most'\)"),
    (
        "option 3 and 3.0",
        _append_row("llm.csv", lambda r: r.assign(option=r["option"] + ".0")),
        r"llm\.csv, row \d+: duplicate key \(.*option='1'\)",
    ),
    ("prob inf", _cell("llm.csv", "prob", "inf"), r"row 1: prob inf is outside \[0, 1\]"),
    (
        "labels unmatched",
        _cell("labels.csv", "conversation_id", "ghost"),
        r"labels\.csv, row 1: .*no judge distributions.*Fix: .*unmatched_labels='skip'",
    ),
    ("labels judge blank", _cell("labels.csv", "judge_id", "  "), r"labels\.csv, row 1: judge_id is empty"),
    ("labels answer inf", _cell("labels.csv", "answer", "inf"), r"labels\.csv, row 1: answer 'inf' is not an option"),
    (
        "llm not UTF-8",
        lambda root: (root / "llm.csv").write_bytes(b"conversation_id,turn\n\xff,0\n"),
        r"llm\.csv: cannot be read",
    ),
    (
        "llm is a folder",
        lambda root: ((root / "llm.csv").unlink(), (root / "llm.csv").mkdir()),
        r"llm\.csv: cannot be read",
    ),
]
CASES += [
    Case(
        f"dataset {name}",
        ["train", "data={tmp}/d", "out={tmp}/m"],
        2,
        pat,
        setup=_dataset(edit),
        after=lambda tmp, err: not (tmp / "m").exists() or pytest.fail("out written"),
    )
    for name, edit, pat in DATASETS
]
CASES += [
    Case(
        "cv more folds than conversations",
        ["cv", "data={data}", "out={tmp}/cv", "folds=20"],
        2,
        r"8 .*conversation.* cannot fill 20 folds.*Fix: .*8",
    ),
    Case(
        "search storage in a missing folder",
        ["search", "data={data}", "out={tmp}/s", "search.storage=sqlite:////nonexistent/x.db"],
        2,
        r"cannot open the search storage sqlite:////nonexistent/x\.db \(.*unable to open database file\)",
    ),
    Case(
        "search.db not a database",
        ["search", "data={data}", "out={tmp}/s"],
        2,
        r"cannot open the search storage .*search\.db \(.*file is not a database\)",
        setup=_write("s/search.db", "x" * 2000),
    ),
    Case(
        "search storage password",
        ["search", "data={data}", "out={tmp}/s", "search.storage=postgresql://me:hunter2@127.0.0.1:1/db"],
        2,
        # without the [postgres] extra the driver is missing, which is said first (one line either way)
        r"cannot open the search storage postgresql://\*\*\*@127\.0\.0\.1:1/db"
        r"|search\.storage postgresql:// needs the optional extra \[postgres\] \(psycopg\).*role-rubric\[postgres\]",
        after=lambda tmp, err: "hunter2" not in err or pytest.fail("password shown"),
    ),
    Case(
        "search another dataset into the same out",
        ["search", "data={data}", "out={tmp}/s", "search.workers=1"],
        2,
        r"s/search\.db: study 'role-rubric' \(1 trials\) was run on another dataset or other settings.*"
        r"Fix: pass search\.resume=false",
        setup=lambda tmp, good: _other_study(tmp / "s"),
    ),
]


def _other_study(out: Path) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out.mkdir()
    study = optuna.create_study(study_name="role-rubric", storage=f"sqlite:///{out / 'search.db'}")
    study.set_user_attr("fingerprint", "another dataset")
    study.enqueue_trial({"lr": 0.01})
    study.tell(study.ask(), 1.0)


# -- model files (predict model=...): a copy of a trained model, one field edited ----------------------------------
def _model(edit: Callable[[dict, Path], None]) -> Callable[[Path, Path], None]:
    def apply(tmp: Path, good: Path) -> None:
        shutil.copytree(good / "model", tmp / "m")
        meta = json.loads((tmp / "m" / "model.json").read_text())
        edit(meta, tmp / "m")
        (tmp / "m" / "model.json").write_text(json.dumps(meta))

    return apply


def _unchecked(**fields: object) -> Callable[[dict, Path], None]:
    """Edit model.json fields and drop its checksum, as an older file (before checksums: no `model` or
    `shift_reference` either) would be."""

    def edit(meta: dict, root: Path) -> None:
        meta.pop("integrity")
        meta.pop("shift_reference", None)
        if meta.get("model", "network") == "network":
            meta.pop("model", None)
        for key, value in fields.items():
            if value is None:
                meta.pop(key)
            else:
                meta[key] = value

    return edit


def _setting(**fields: object) -> Callable[[dict, Path], None]:
    def edit(meta: dict, root: Path) -> None:
        _unchecked()(meta, root)
        meta["settings"].update(fields)

    return edit


MODELS = [
    (
        "judges swapped",
        lambda m, r: m["judges"].__setitem__(slice(0, 2), m["judges"][1::-1]),
        r"model\.json: model\.json was changed after training: its judge map.*checksum",
    ),
    ("rubric edited", lambda m, r: m["rubric"]["questions"][0].update(text="changed"), r"was changed after training"),
    (
        "integrity deleted, judges reversed",
        lambda m, r: (m.pop("integrity"), m["judges"].reverse()),
        r"model\.json has no integrity block, yet fields written only since checksums exist.*edited after training",
    ),
    (
        "weights replaced",
        lambda m, r: (r / "weights.safetensors").write_bytes((r / "weights.safetensors").read_bytes()[:-8] + b"\0" * 8),
        r"weights\.safetensors: the weights are not the ones",
    ),
    (
        "weights truncated",
        lambda m, r: (r / "weights.safetensors").write_bytes((r / "weights.safetensors").read_bytes()[:-64]),
        r"weights\.safetensors: weights do not match model\.json \(the file is shorter",
    ),
    (
        "n_models 200000",
        _unchecked(n_models=200000),
        r"model\.json has n_models=200000, not a whole number in 1\.\.1024",
    ),
    ("n_models 1000", _unchecked(n_models=1000), r"weights do not match model\.json \(W1 has shape \[2, "),
    ("n_inputs text", _unchecked(n_inputs="many"), r"model\.json has n_inputs='many'"),
    ("settings missing", _unchecked(settings=None), r"model\.json has no valid 'settings'"),
    ("settings a list", _unchecked(settings=[1]), r"model\.json has no valid 'settings'"),
    ("unknown setting", _setting(momentum=0.9), r"model\.json has unknown setting\(s\) \['momentum'\]"),
    ("hidden1 zero", _setting(hidden1=0), r"setting hidden1=0 is out of range"),
    ("pool unknown", _setting(pool="median"), r"setting pool='median' is not one of the choices"),
    ("judges not a list", _unchecked(judges="j0"), r"model\.json has no valid 'judges'"),
    ("judges repeated", _unchecked(judges=["j0", "j0"]), r"judge map that is not a list of distinct judge ids"),
    (
        "recalibration garbage",
        _unchecked(recalibration={"question": 9}),
        r"recalibration block of model\.json is not valid",
    ),
    (
        "recalibration sizes",
        _unchecked(recalibration={"question": 0, "scale": [1, 2], "bias": [0]}),
        r"recalibration block .* not valid \(its sizes do not fit the rubric\)",
    ),
    ("rubric without questions", _unchecked(rubric={"questions": []}), r"model\.json: a rubric needs a non-empty"),
]
CASES += [
    Case(
        f"model {name}",
        ["predict", "model={tmp}/m", "data={data}", "out={tmp}/p.csv"],
        2,
        pat,
        setup=_model(edit),
        after=lambda tmp, err: not (tmp / "p.csv").exists() or pytest.fail("predictions written"),
    )
    for name, edit, pat in MODELS
]


# -- predictions files (evaluate predictions=...) -------------------------------------------------------------------
def _predictions(edit: Callable[[pd.DataFrame], pd.DataFrame] | bytes) -> Callable[[Path, Path], None]:
    def apply(tmp: Path, good: Path) -> None:
        if isinstance(edit, bytes):
            (tmp / "p.csv").write_bytes(edit)
            return
        df = pd.read_csv(good / "predictions.csv", dtype=str, keep_default_na=False)
        edit(df).to_csv(tmp / "p.csv", index=False)

    return apply


def _target_row(df: pd.DataFrame) -> int:
    return int(df.index[df["question_id"] == "overall"][0])


PREDICTIONS = [
    (
        "expected empty",
        lambda d: d.assign(expected=d["expected"].where(d.index != 0, "")),
        r"p\.csv, row 1: expected is empty",
    ),
    (
        "expected text",
        lambda d: d.assign(expected=d["expected"].where(d.index != 0, "high")),
        r"row 1: expected is not a finite number \('high'\)",
    ),
    (
        "expected nan",
        lambda d: d.assign(expected=d["expected"].where(d.index != 0, "nan")),
        r"row 1: expected is not a finite number \('nan'\)",
    ),
    (
        "expected off the scale",
        lambda d: d.assign(expected=d["expected"].where(d.index != _target_row(d), "17")),
        r"row \d+: expected 17 of question 'overall' is outside its scale \[1, 4\]",
    ),
    ("duplicate rows", lambda d: pd.concat([d, d.iloc[[0]]]), r"row \d+: duplicate prediction"),
    ("missing column", lambda d: d.drop(columns=["expected"]), r"p\.csv: missing column expected"),
    ("header only", lambda d: d.iloc[:0], r"p\.csv: the file has a header but no rows"),
    ("empty file", b"", r"p\.csv: the file is empty"),
    ("not UTF-8", b"conversation_id,turn\n\xff,0\n", r"p\.csv, row 2: not UTF-8 text"),
]
CASES += [
    Case(
        f"predictions {name}",
        ["evaluate", "predictions={tmp}/p.csv", "data={data}", "out={tmp}/m.json"],
        2,
        pat,
        setup=_predictions(edit),
        after=lambda tmp, err: not (tmp / "m.json").exists() or pytest.fail("metrics written"),
    )
    for name, edit, pat in PREDICTIONS
]
CASES += [
    Case(
        "predictions missing",
        ["evaluate", "predictions={tmp}/none.csv", "data={data}", "out={tmp}/m.json"],
        2,
        r"none\.csv: predictions file not found",
    ),
]

# -- import (LLM-Rubric TSV files) -------------------------------------------------------------------------------------
_EVALS = "text_id\tcriterion\tanswer1_prob\tanswer2_prob\tanswer3_prob\tanswer4_prob\n"
_JUDGED = "text_id\tannotator_id\tDQQ0\tQ0\nd1\t1\t1\t3\n"
IMPORTS = [
    ("prob text", _EVALS + "d1\tQ0\t0.1\thigh\t0.3\t0.4\n", r"e\.tsv, row 1: answer2_prob 'high' is not a probability"),
    ("prob above 1", _EVALS + "d1\tQ0\t0.1\t0.2\t3\t0.4\n", r"e\.tsv, row 1: answer3_prob '3' is not a probability"),
    ("prob empty", _EVALS + "d1\tQ0\t0.1\t\t0.3\t0.4\n", r"row 1: answer2_prob 'nan' is not a probability"),
    ("wrong file", _JUDGED, r"e\.tsv: missing column\(s\) criterion.*right LLM-Rubric file"),
    ("empty", "", r"e\.tsv: the file is empty"),
]
CASES += [
    Case(
        f"import {name}",
        ["import", "evaluations={tmp}/e.tsv", "judgments={tmp}/j.tsv", "out={tmp}/i"],
        2,
        pat,
        setup=lambda tmp, good, text=text: (_write("e.tsv", text)(tmp), _write("j.tsv", _JUDGED)(tmp)),
    )
    for name, text, pat in IMPORTS
]
CASES += [
    Case(
        "endpoint 401 echoing the key",
        _GATHER,
        2,
        r"the judge endpoint refused the key \(HTTP 401: no: Bearer \*\*\*\)",
        reply=_reply({"error": {"message": f"no: Bearer {SECRET}"}}, status=401),
        after=lambda tmp, err: SECRET not in err or pytest.fail("key shown"),
    ),
]


# -- outputs that would replace the command's own inputs ----------------------------------------------------------------
def _keeps(name: str) -> Callable[[Path, str], None]:
    def check(tmp: Path, err: str) -> None:
        assert (tmp / name).read_bytes() == (tmp / (name + ".orig")).read_bytes()

    return check


def _copy_data(tmp: Path, good: Path) -> None:
    shutil.copytree(good / "model", tmp / "m")
    shutil.copytree(good / "data", tmp / "d")
    shutil.copy(tmp / "d" / "llm.csv", tmp / "d" / "llm.csv.orig")


CASES += [
    Case(
        "predict over the data's llm.csv",
        ["predict", "model={tmp}/m", "data={tmp}/d", "out={tmp}/d/llm.csv"],
        2,
        r"d/llm\.csv: out= would overwrite llm\.csv, one of this command's own inputs\. Fix: choose another out=",
        setup=_copy_data,
        after=_keeps("d/llm.csv"),
    ),
    Case(
        "predict over model.json",
        ["predict", "model={tmp}/m", "data={data}", "out={tmp}/m/model.json"],
        2,
        r"m/model\.json: out= would overwrite model\.json",
        setup=_model(lambda m, r: None),
    ),
    Case(
        "evaluate over its predictions",
        ["evaluate", "predictions={tmp}/p.csv", "data={data}", "out={tmp}/p.csv"],
        2,
        r"p\.csv: out= would overwrite p\.csv",
        setup=_predictions(lambda d: d),
    ),
    Case(
        "score over its conversations",
        ["score", "conversations={tmp}/c.jsonl", "out={tmp}/c.jsonl"],
        2,
        r"c\.jsonl: out= would overwrite c\.jsonl",
        setup=_write("c.jsonl", _jsonl(*CONVERSATIONS)),
    ),
    Case(
        "import over its own TSV",
        ["import", "evaluations={tmp}/i/llm.csv", "judgments={tmp}/j.tsv", "out={tmp}/i"],
        2,
        r"i/llm\.csv: out= would overwrite llm\.csv",
        setup=_write("i/llm.csv", "x"),
    ),
    Case(
        "llm.csv of an all-failed gather",
        ["train", "data={tmp}/d", "out={tmp}/m"],
        2,
        r"llm\.csv: the file has a header but no rows\. Fix: every request of the gather that wrote it failed: see "
        r".*failures\.csv",
        setup=_dataset(
            lambda root: (
                (root / "llm.csv").write_text("conversation_id,turn,question_id,option,prob\n"),
                (root / "failures.csv").write_text("x\n"),
            )
        ),
    ),
]


# -- a cv folder reused by report (report cv=DIR) ---------------------------------------------------------------------
_CV_PRED = "conversation_id,turn,judge_id,question_id,method,expected,answer\nc000,0,j1,overall,calibrated,2.5,3\n"


def _cv_folder(predictions: str = _CV_PRED, metrics: str | None = None) -> Callable[[Path, Path], None]:
    def apply(tmp: Path, good: Path) -> None:
        _write("cv/predictions.csv", predictions)(tmp)
        if metrics is not None:
            _write("cv/metrics.json", metrics)(tmp)

    return apply


CV_FOLDERS = [
    ("metrics.json garbage", _cv_folder(metrics="garbage"), r"cv/metrics\.json: not valid JSON"),
    (
        "settings not an object",
        _cv_folder(metrics='{"settings": 5}'),
        r"cv/metrics\.json: is not the metrics\.json of a cv run",
    ),
    ("folds 1", _cv_folder(metrics='{"settings": {}, "folds": 1}'), r"cv/metrics\.json: folds=1 is not valid"),
    (
        "settings out of range",
        _cv_folder(metrics='{"settings": {"lr": -1}}'),
        r"cv/metrics\.json: setting lr=-1 is out of range",
    ),
    (
        "expected text",
        _cv_folder(_CV_PRED.replace("2.5", "high")),
        r"cv/predictions\.csv, row 1: expected 'high' is not a number",
    ),
    ("predictions empty", _cv_folder(""), r"cv/predictions\.csv: cannot be read"),
    ("no predictions", lambda tmp, good: (tmp / "cv").mkdir(), r"cv: no predictions\.csv in the cv folder"),
]
CASES += [
    Case(f"report cv {name}", ["report", "data={data}", "out={tmp}/r", "cv={tmp}/cv"], 2, pat, setup=setup)
    for name, setup, pat in CV_FOLDERS
]


# -- the runner ----------------------------------------------------------------------------------------------------
class _Endpoint(BaseHTTPRequestHandler):
    reply: tuple[int, dict[str, str], bytes] = (500, {}, b"{}")
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        status, headers, body = type(self).reply
        self.send_response(status)
        for k, v in {"content-type": "application/json", **headers}.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """Silent: a run that stops early (a 401) closes its other requests' connections mid-reply, and
        socketserver would print that traceback into the stderr under test."""


@pytest.fixture(scope="module")
def endpoint():
    server = _Server(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.fixture(scope="module")
def good_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("good")
    (root / "conversations.jsonl").write_bytes(_jsonl(*CONVERSATIONS))
    (root / "rubric.yaml").write_text(yaml.safe_dump(RUBRIC, sort_keys=False))
    make_native_dataset(root / "data", n_conversations=8)
    tiny = [
        "train.ensemble=2",
        "train.pretrain_steps=5",
        "train.finetune_steps=5",
        "network.hidden1=4",
        "network.hidden2=4",
    ]
    assert main(["train", f"data={root / 'data'}", f"out={root / 'model'}", *tiny]) == 0
    assert main(["predict", f"model={root / 'model'}", f"data={root / 'data'}", f"out={root / 'predictions.csv'}"]) == 0
    return root


_GROUPS = {"judge", "rubric", "network", "train", "search"}
_BASE: dict[tuple[str, tuple[str, ...]], object] = {}


def _fast_compose(real: Callable) -> Callable:
    """Hydra's compose takes 0.2 s; the table composes each command (and config-group choice) once and
    applies each row's key=value overrides as Hydra parses them. Anything else (an unknown key, +key)
    goes to the real compose."""
    import copy

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from omegaconf import DictConfig, OmegaConf

    parser = OverridesParser.create()

    def compose(command: str, overrides=()) -> object:
        parsed = parser.parse_overrides(list(overrides))
        if any(o.type != OverrideType.CHANGE or o.package is not None for o in parsed):
            return real(command, overrides)
        groups = tuple(o.input_line for o in parsed if o.key_or_group in _GROUPS)
        values = [o for o in parsed if o.key_or_group not in _GROUPS]
        key = (command, groups)
        if key not in _BASE:
            _BASE[key] = real(command, list(groups))
        cfg = copy.deepcopy(_BASE[key])
        for o in values:
            parent, _, leaf = o.key_or_group.rpartition(".")
            node = OmegaConf.select(cfg, parent) if parent else cfg
            if not isinstance(node, DictConfig) or leaf not in list(node):  # `in` skips ??? values
                return real(command, overrides)
            OmegaConf.update(cfg, o.key_or_group, o.value(), merge=False)
        return cfg

    return compose


@pytest.fixture(autouse=True)
def quick_compose(monkeypatch):
    import calibration.cli

    monkeypatch.setattr(calibration.cli, "compose_config", _fast_compose(calibration.cli.compose_config))


def test_quick_compose_equals_hydra():
    from omegaconf import OmegaConf

    import calibration.cli

    argv = ["judge=vllm", "judge.timeout=-5", "limit=all", "conversations=x", "out=/tmp/o"]
    fast = _fast_compose(calibration.cli.compose_config)("gather", argv)
    assert OmegaConf.to_container(fast) == OmegaConf.to_container(calibration.cli.compose_config("gather", argv))


def run_case(case: Case, tmp: Path, good: Path, url: str, capsys) -> str:
    if case.setup is not None:
        case.setup(tmp, good)
    _Endpoint.reply = case.reply or (500, {}, b"{}")
    fill = {
        "tmp": tmp,
        "conv": good / "conversations.jsonl",
        "rubric": good / "rubric.yaml",
        "data": good / "data",
        "url": url,
    }
    code = main([a.format(**fill) for a in case.argv])
    err = capsys.readouterr().err.strip()
    assert code == case.code, err
    last = err.splitlines()[-1] if err else ""
    command = case.argv[0]
    assert last.startswith(f"role-rubric {command}: error: "), err
    assert re.search(case.pattern, last), last
    assert " Fix: " in last and last.endswith("."), last
    if case.code == 2:
        assert len(err.splitlines()) == 1, err
    if case.after is not None:
        case.after(tmp, err)
    return last


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_clear_line(case, tmp_path, good_files, endpoint, capsys):
    run_case(case, tmp_path, good_files, endpoint, capsys)


def test_the_table_covers_enough_cases():
    assert len(CASES) >= 150, len(CASES)
