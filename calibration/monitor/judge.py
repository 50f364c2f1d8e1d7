"""The judge behind each window, and what `monitor` does when it changes: a judge change is told apart from a
chatbot change.

Every window records the judge identity its directories were gathered with (gather_summary.json, rubric/
identity.py: backend, model, prompt template, rubric, answer mode, sampling and the endpoint's host). The first
window's is the monitor's judge. A window gathered by another judge raises its own alarm ("judge_changed": the
rates may move because the judge did, not the chatbot) and HOLDS the rate checks from that window on: rates
are still measured and shown, but no evidence is added and no rate alarm is raised, until the canary clears
the new judge or the team starts a new out=.

The canary (`canary=DIR`, calibration/monitor/canary.py): a folder of fixed conversations gathered once with
the judge. Its calibrated rates are kept in the state on the first run; whenever its llm.csv changes (the team
gathered the same conversations again, with the judge as it is now: after an announced change, or on a
schedule to catch a silent one), the monitor compares each conversation's new rate with its old one. A
significant difference is an alarm of its own ("judge_answers_changed"); none, under the identity the windows
now carry, releases the hold and adopts that identity as the monitor's judge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from calibration.monitor.canary import canary_test
from calibration.monitor.evidence import role_shares
from rubric.errors import InputError
from rubric.judge.identity import IDENTITY_KEYS, dataset_judge_identity, describe

__all__ = ["canary_run", "window_judge"]


def _key(identity: dict | None) -> dict | None:
    return None if identity is None else {k: identity.get(k) for k in IDENTITY_KEYS if identity.get(k) is not None}


def window_judge(directories: list[Path], members: list[int], state: dict) -> dict:
    """The window's judge and what it means: {"identity", "changed" (a new change: alarm), "held" (rate checks
    held in this window), "differences"}; the state's judge and hold moved on."""
    found = [_key(dataset_judge_identity(directories[d])) for d in members]
    identity = next((i for i in found if i is not None), None)
    if any(i is not None and i != identity for i in found):
        raise InputError(
            "one window's conversations were gathered by different judges.",
            path=directories[members[0]],
            fix="gather each window with one judge (or monitor them with window=directory, one folder a window).",
        )
    if state.get("judge") is None:
        state["judge"] = identity
    changed = identity is not None and state["judge"] is not None and identity != state["judge"]
    new = changed and (state.get("judge_hold") or {}).get("identity") != identity
    if new:
        state["judge_hold"] = {"identity": identity}
    before = state["judge"]
    differences = (
        [f"{k}: {before.get(k)!r} -> {identity.get(k)!r}" for k in IDENTITY_KEYS if before.get(k) != identity.get(k)]
        if changed and identity is not None
        else []
    )
    return {
        "identity": identity,
        "changed": new,
        "held": state.get("judge_hold") is not None,
        "differences": differences,
        "described": describe(identity),
    }


def canary_run(
    canary: Path | None, state: dict, *, level: Callable[[], float], score: Callable[[Path], dict[str, float]]
) -> dict | None:
    """The canary's step of a run: its baseline kept on the first run; its paired test when its llm.csv changed
    since (the result: {"test", "alarm" (bool), "released" (bool)}); None when nothing is to be done.
    score(folder) -> {conversation id: calibrated rate} (calibration/monitor/statistics.py); level() -> the canary's
    share of alpha, asked after the canary was scored."""
    if canary is None:
        return None
    table = canary / "llm.csv"
    if not table.is_file():
        raise InputError("no llm.csv here.", path=canary, fix="pass canary= a folder that gather wrote.")
    checksum = hashlib.sha256(table.read_bytes()).hexdigest()
    kept = state.get("canary")
    if kept is None:
        state["canary"] = {
            "path": str(canary),
            "checksum": checksum,
            "identity": _key(dataset_judge_identity(canary)),
            "rates": score(canary),
            "tests": 0,
        }
        return None
    if kept["checksum"] == checksum:
        return None
    now = score(canary)
    common = sorted(set(now) & set(kept["rates"]))
    if len(common) < 2:
        raise InputError(
            f"the canary's llm.csv changed, and shares {len(common)} conversation(s) with the one the monitor kept.",
            path=table,
            fix="gather the SAME conversations again (conversations=CANARY/conversations.jsonl) into this folder.",
        )
    kept["tests"] += 1
    at = level() * role_shares(kept["tests"])  # the k-th canary test's share: a fixed split over every test to come
    test = canary_test([kept["rates"][c] for c in common], [now[c] for c in common], level=at, seed=kept["tests"])
    identity = _key(dataset_judge_identity(canary))
    hold = state.get("judge_hold")
    released = not test["changed"] and hold is not None and identity == hold["identity"]
    if test["changed"] and hold is None:
        state["judge_hold"] = {"identity": identity}  # the same name, other answers: held as a change is
    if released:
        state["judge"], state["judge_hold"] = identity, None
    kept.update(checksum=checksum, identity=identity, rates=now)
    return {"test": test, "alarm": test["changed"], "released": released, "identity": describe(identity)}
