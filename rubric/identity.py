"""Which judge produced a set of answer distributions, so that a calibrator is never fed another judge's.

A calibrator learns the habits of one judge (model, endpoint, prompt, rubric wording, way of reading
answers); on distributions from another it is silently wrong. `gather` records `judge_identity(...)` in
gather_summary.json, `train` copies it into model.json, and `predict`/`score` compare it with the judge
they are given (`check_same_judge`), refusing a mismatch unless allow_judge_mismatch=true.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rubric.errors import InputError

IDENTITY_KEYS = ("backend", "model", "base_url_host", "prompt_template", "rubric", "answer_mode")
_NAMES = {
    "backend": "backend",
    "model": "model",
    "base_url_host": "endpoint host",
    "prompt_template": "prompt template hash",
    "rubric": "rubric hash",
    "answer_mode": "answer mode",
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
    from rubric.prompts import render_prompt
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


def judge_identity(judge: Any, rubric: Any) -> dict[str, str]:
    """The judge's identity: backend, model, endpoint host (no path, no key), prompt template hash,
    rubric hash and answer mode ("distribution/auto", "binary/logprobs", ...)."""
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
        f"rubric {identity.get('rubric')})"
    )


def identity_differences(trained: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """'model: trained on 'a', given 'b'' for every recorded key whose value differs."""
    out = []
    for key in IDENTITY_KEYS:
        a, b = trained.get(key), current.get(key)
        if a is not None and b is not None and a != b:
            out.append(f"{_NAMES[key]}: trained on {a!r}, given {b!r}")
    return out


def check_same_judge(
    trained: Mapping[str, Any] | None,
    current: Mapping[str, Any] | None,
    *,
    allow: bool,
    command: str,
) -> list[str]:
    """Refuse distributions from another judge than the calibrator was trained on (InputError naming
    what differs), or with allow=True print a warning; returns the differences. Unknown identities
    (old models, imported data) are not compared."""
    if not trained or not current:
        return []
    diffs = identity_differences(trained, current)
    if diffs and not allow:
        raise InputError(
            "the calibrator was trained on another judge's distributions (" + "; ".join(diffs) + ").",
            fix="use the judge it was trained on, retrain on this judge, or pass allow_judge_mismatch=true "
            "to use it anyway (its calibration then does not hold).",
        )
    if diffs:
        print(
            f"{command}: warning: judge mismatch allowed ({'; '.join(diffs)}); the calibration does not hold."
        )
    return diffs
