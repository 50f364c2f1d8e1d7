"""The degraded copies of the LLM-Rubric anchors' judge that benchmarks/compare_judges.py compares with the real
one (its module docstring says what each is): resampled across dialogues or the anchors' own sampled answers,
never invented; written as compare-judges data directories (the same labels and rubric)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from calibration.data.importers import import_llm_rubric

COPIES = {
    "shuffled-25": ("shuffled", 0.25),
    "shuffled-50": ("shuffled", 0.5),
    "shuffled-100": ("shuffled", 1.0),
    "mixed-50": ("mixed", 0.5),
    "no-logprobs": ("sampled", 1.0),
}
NO_INFORMATION = "shuffled-100"
"""The copy with no information about any dialogue: the information ceiling compares the real judge with it."""
ONE_QUESTION = "Q7"
SCENARIO = f"{ONE_QUESTION}-real"
"""The one-question scenario: SCENARIO is shuffled-50's kind of copy (another permutation) on every question but
ONE_QUESTION, where it keeps the real distributions; against shuffled-50 its distributions are better on
ONE_QUESTION alone (a calibrator reads every question's distributions, so they help the others a little)."""
SPOILED = f"{ONE_QUESTION}-spoiled"
"""--spoil-one-question: the real judge against SPOILED, the real judge with ONE_QUESTION's distributions alone
permuted across every dialogue (the real judge is better on ONE_QUESTION, the others only through it)."""


def sampled_only(llm: pd.DataFrame, evaluations: Path) -> pd.DataFrame:
    """The long llm.csv frame with each distribution replaced by the anchors' one sampled answer (`sample_llm`,
    llm_evaluations.tsv) as a one-hot distribution: the judge as it would be without log-probabilities."""
    tsv = pd.read_csv(evaluations, sep="\t", dtype={"text_id": str, "criterion": str})
    sample = tsv.set_index(["text_id", "criterion"])["sample_llm"]
    drawn = sample.reindex(pd.MultiIndex.from_arrays([llm["conversation_id"], llm["question_id"]])).to_numpy()
    if pd.isna(drawn).any():
        raise ValueError(f"{evaluations}: a (dialogue, question) of llm.csv has no sample_llm")
    out = llm.copy()
    out["prob"] = (out["option"].astype(int).to_numpy() == drawn.astype(int)).astype(float)
    if not np.allclose(out.groupby(["conversation_id", "question_id"])["prob"].sum(), 1.0):
        raise ValueError(f"{evaluations}: a sample_llm is not one of its question's options")
    return out


def degrade(llm: pd.DataFrame, kind: str, amount: float, seed: int, keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """A copy of the long llm.csv frame with the whole judge degraded (module docstring): every question's
    distributions of a dialogue move together, as rows of a (dialogues, dialogues) mixing matrix; the
    questions in keep keep their real distributions."""
    rng = np.random.default_rng(seed)
    wide = llm.pivot_table(index="conversation_id", columns=["question_id", "option"], values="prob")
    n = len(wide)
    mix = np.eye(n)
    if kind == "shuffled":
        chosen = np.flatnonzero(rng.random(n) < amount)
        mix[chosen] = mix[rng.permutation(chosen)]
    else:  # mixed: every question of a dialogue with the same random other dialogue's
        other = (np.arange(n) + rng.integers(1, n, size=n)) % n
        mix = (1 - amount) * mix + amount * np.eye(n)[other]
    new = pd.DataFrame(mix @ wide.to_numpy(), index=wide.index, columns=wide.columns)
    kept = wide.columns.get_level_values("question_id").isin(keep)
    new.loc[:, kept] = wide.loc[:, kept].to_numpy()
    long = new.stack(["question_id", "option"], future_stack=True).rename("prob").reset_index()
    out = llm.drop(columns="prob").merge(long, on=["conversation_id", "question_id", "option"], how="left")
    if out["prob"].isna().any():
        raise ValueError("a degraded copy took a distribution its source dialogue does not have")
    return out[llm.columns]


def write_judges(anchors: Path, work: Path, seed: int, spoil_one: bool = False) -> list[Path]:
    """The real judge's directory and one per degraded copy (the same labels and rubric); with spoil_one, the
    real judge and SPOILED only."""
    real = work / "real"
    import_llm_rubric(anchors / "llm_evaluations.tsv", anchors / "human_judgments.tsv", real)
    llm = pd.read_csv(real / "llm.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    if spoil_one:
        d = work / SPOILED
        d.mkdir()
        for f in ("rubric.yaml", "labels.csv"):
            (d / f).write_bytes((real / f).read_bytes())
        others = tuple(q for q in llm["question_id"].unique() if q != ONE_QUESTION)
        degrade(llm, "shuffled", 1.0, seed + 1, keep=others).to_csv(d / "llm.csv", index=False)
        return [real, d]
    dirs = [real]
    for i, (name, (kind, amount)) in enumerate(COPIES.items()):
        d = work / name
        d.mkdir()
        for f in ("rubric.yaml", "labels.csv"):
            (d / f).write_bytes((real / f).read_bytes())
        copy = sampled_only(llm, anchors / "llm_evaluations.tsv") if kind == "sampled" else None
        copy = degrade(llm, kind, amount, seed + 1 + i) if copy is None else copy
        copy.to_csv(d / "llm.csv", index=False)
        dirs.append(d)
    d = work / SCENARIO
    d.mkdir()
    for f in ("rubric.yaml", "labels.csv"):
        (d / f).write_bytes((real / f).read_bytes())
    degrade(llm, "shuffled", 0.5, seed + 1 + len(COPIES), keep=(ONE_QUESTION,)).to_csv(d / "llm.csv", index=False)
    dirs.append(d)
    return dirs
