"""Which judge produced a set of answer distributions, so that a calibrator is never fed another judge's.

A calibrator learns the habits of one judge (model, prompt, rubric wording, way of reading answers,
sampling); on distributions from another it is silently wrong. `gather` records `judge_identity(...)` in
gather_summary.json, `train` copies it into model.json, and `predict`/`score`/`estimate` compare it with
the judge they are given (`check_same_judge`), refusing a mismatch unless allow_judge_mismatch=true.
A folder or a model that records no judge beside one that does is refused the same way (neither can be
shown to be the other's judge). A model without a record used with a live judge (score, the Python API)
is only named: models trained on data written by hand score that way, and the live judge is the one the
user chose.
Only what determines the answers is compared: the endpoint (a local server restarted on another port,
the same model behind another host name) is recorded and shown, never a reason to refuse.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rubric.errors import InputError
from rubric.notices import warn_data

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

COMPARED_KEYS = ("backend", "model", "prompt_template", "rubric", "answer_mode", "sampling")
"""What determines the answers; "sampling" is absent from identities recorded before it was."""
INFO_KEYS = ("base_url_host",)
"""Recorded and shown, not compared: the same model answers the same wherever it is served."""
IDENTITY_KEYS = COMPARED_KEYS + INFO_KEYS
_NAMES = {
    "backend": "backend",
    "model": "model",
    "base_url_host": "endpoint host",
    "prompt_template": "prompt template hash",
    "rubric": "rubric hash",
    "answer_mode": "answer mode",
    "sampling": "sampling",
}


STAND_INS = {
    "fake-judge": "the local fake judge answers with a fixed hash of each prompt: its scores are noise, "
    "useful to check the plumbing only",
    "all-MiniLM-L6-v2": "the offline embedding judge is a weak stand-in for an LLM judge (it cannot see tone, "
    "and it rates some clear violations as adherent): its scores show how the pipeline works, not how well "
    "a chatbot keeps to its role",
}


def stand_in_note(model: str | None) -> str | None:
    """What to say about a judge model that only stands in for a real LLM judge, or None."""
    return STAND_INS.get(str(model))


def prompt_template_hash() -> str:
    """Hash of the prompt a judge sees, rendered for a fixed probe conversation and question: it changes
    when the instructions or the layout of the prompt change, not with the conversations scored."""
    from rubric.conversations import Conversation, Item, Turn
    from rubric.judge.prompts import render_prompt
    from rubric.schema import Option, Question

    probe = Conversation("probe", "ROLE", (Turn("USER 0", "ASSISTANT 0"), Turn("USER 1", "ASSISTANT 1")))
    question = Question("q", "QUESTION", (Option(1.0, "LOW"), Option(2.0, "HIGH")))
    messages = render_prompt(Item(probe, 1), question).messages
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


def rubric_hash(rubric: Any) -> str:
    """Hash of what the judge reads of the rubric: question ids and texts, option values and labels (not
    its name, description or training target)."""
    questions = rubric.to_dict()["questions"]
    return hashlib.sha256(json.dumps(questions, sort_keys=True).encode()).hexdigest()[:16]


def sampling_settings(judge: Any) -> str:
    """The request settings that change a chat judge's answers, as one comparable line ("temperature 0.0;
    20 logprobs; 10 samples at temperature 1.0; 3 answer tokens" plus any extra request fields); the
    embedding judge has none."""
    if judge.backend == "embedding":
        return "none"
    text = (
        f"temperature {float(judge.temperature)}; {judge.top_logprobs} logprobs; {judge.samples} samples at "
        f"temperature {float(judge.sample_temperature)}; {judge.answer_tokens} answer tokens"
    )
    extra = {**(judge.params or {}), **(judge.extra_body or {})}
    return text + (f"; {json.dumps(extra, sort_keys=True)}" if extra else "")


def judge_identity(judge: Any, rubric: Any) -> dict[str, str]:
    """The judge's identity: backend, model, prompt template hash, rubric hash, answer mode
    ("distribution/auto", "binary/logprobs", ...) and sampling settings, which are compared, plus the
    endpoint host (no path, no key), which is only shown."""
    url = judge.resolved_base_url()
    if judge.backend == "embedding":
        host = "local"
    elif url == "local":
        host = "local server"
    elif url:
        host = urlparse(url).netloc or url
    else:
        host = "provider default"
    return {
        "backend": str(judge.backend),
        "model": str(judge.model),
        "base_url_host": host,
        "prompt_template": prompt_template_hash(),
        "rubric": rubric_hash(rubric),
        "answer_mode": f"{judge.output_mode}/{judge.answer_mode}",
        "sampling": sampling_settings(judge),
    }


def dataset_judge_identity(folder: str | Path) -> dict[str, str] | None:
    """The identity recorded by `gather` in FOLDER/gather_summary.json, or None (e.g. imported data)."""
    path = Path(folder) / "gather_summary.json"
    if not path.exists():
        return None
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("judge_identity")
    except ValueError:
        return None
    return dict(recorded) if isinstance(recorded, Mapping) else None


def describe(identity: Mapping[str, Any] | None) -> str:
    """One line naming a judge: 'chat judge fake-judge at 127.0.0.1:8765 (distribution/auto)'."""
    if not identity:
        return "unknown judge (the distributions were not gathered by role-rubric gather)"
    return (
        f"{identity.get('backend')} judge {identity.get('model')} at {identity.get('base_url_host')} "
        f"({identity.get('answer_mode')}; prompt {identity.get('prompt_template')}, "
        f"rubric {identity.get('rubric')}"
        + (f"; sampling {identity['sampling']}" if identity.get("sampling") else "")
        + ")"
    )


def identity_differences(trained: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """'model: trained on 'a', given 'b'' for every compared key recorded on both sides whose value
    differs (the endpoint is not compared: see `endpoint_note`)."""
    out = []
    for key in COMPARED_KEYS:
        a, b = trained.get(key), current.get(key)
        if a is not None and b is not None and a != b:
            out.append(f"{_NAMES[key]}: trained on {a!r}, given {b!r}")
    return out


def endpoint_note(trained: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """'endpoint host: trained at 'a', given 'b'' when the judge is served elsewhere now, else None."""
    a, b = trained.get("base_url_host"), current.get("base_url_host")
    if a is None or b is None or a == b:
        return None
    return f"{_NAMES['base_url_host']}: trained at {a!r}, given {b!r}"


NO_RECORD = (
    "has no judge record (no gather_summary.json with a judge_identity: data imported or written by hand), "
    "so the judge of its distributions is unknown"
)


def check_same_judge(
    trained: Mapping[str, Any] | None,
    current: Mapping[str, Any] | None,
    *,
    allow: bool,
    command: str,
    where: str | Path | None = None,
    model: str | Path | None = None,
) -> list[str]:
    """Refuse distributions from another judge than the calibrator was trained on (InputError naming
    what differs and `where` they come from), or with allow=True print a warning; returns the differences.
    Data without a judge record beside a model that records one is refused the same way (its judge cannot
    be shown to be the model's), and so is a model without a record (trained before judges were recorded,
    or on data without one; `model` its folder, named in the error) beside a folder that has one. A model
    without a record beside a live judge (`where` None) is named in one line and not compared; neither
    side recorded is not compared. The same judge at another endpoint is accepted with one information
    line."""
    if not trained:
        if not current:
            return []
        if where is None:  # a live judge (score, the Python API): named, not refused (see the module's notes)
            log.info(
                f"{command}: note: the model records no judge (trained before judges were recorded, or on data "
                "without a judge record), so the judge cannot be checked."
            )
            return []
        given = f"{where}'s distributions"
        if not allow:
            raise InputError(
                f"the model records no judge (trained before judges were recorded, or on data without a judge "
                f"record), so it cannot be shown to be the judge of {given} ({describe(current)}).",
                path=None if model is None else Path(model) / "model.json",
                fix="retrain the calibrator on distributions of this judge (train records it), or pass "
                "allow_judge_mismatch=true if it was trained on this judge (an older model without a judge "
                "record is used that way).",
            )
        warn_data(command, [f"the model records no judge; used with {given} anyway (allow_judge_mismatch=true)."])
        return ["judge: unknown"]
    if not current:
        if where is None:  # a live judge always has an identity: only directories lack one
            return []
        if not allow:
            raise InputError(
                f"{NO_RECORD}, and the calibrator was trained on the {describe(trained)}.",
                path=Path(where),
                fix="import the labels again from the gathered folder (import carries its gather_summary.json), "
                "copy gather_summary.json from the folder its llm.csv was gathered in, or pass "
                "allow_judge_mismatch=true if the judge is the model's.",
            )
        warn_data(command, [f"{where} {NO_RECORD}; used anyway (allow_judge_mismatch=true)."])
        return ["judge: unknown"]
    diffs = identity_differences(trained, current)
    moved = endpoint_note(trained, current)
    if diffs and not allow:
        seen = diffs + ([moved] if moved else [])
        raise InputError(
            "the calibrator was trained on another judge's distributions (" + "; ".join(seen) + ").",
            path=None if where is None else Path(where),
            fix="use the judge it was trained on, retrain on this judge, or pass allow_judge_mismatch=true "
            "to use it anyway (its calibration then does not hold).",
        )
    if diffs:
        warn_data(command, [f"judge mismatch allowed ({'; '.join(diffs)}); the calibration does not hold."])
    elif moved:
        log.info(
            f"{command}: the same judge at another endpoint ({moved}); model, prompt, rubric, answer mode "
            "and sampling match, so the calibration holds."
        )
    return diffs
