"""Foreign formats -> native dataset directories: `role-rubric import source=llm-rubric ...`
(calibration/connectors/file_sources.py, `import source=llm-rubric`) calls `import_llm_rubric`.

LLM-Rubric (Hashemi et al., 2024) files: `llm_evaluations.tsv` (one row per dialogue x question with
answer1_prob..answer4_prob) and `human_judgments.tsv` (one row per dialogue x annotator, wide, 0 = not
answered, DQQ0 == 2 = failed the annotators' guardrail check).
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from rubric.errors import InputError, read_text_file
from rubric.files import atomic_to_csv, atomic_write_text, out_lock
from rubric.ids import clean_id_columns
from rubric.schema import Rubric, format_value, rubric_from_dict, save_rubric

EVAL_COLUMNS = ("text_id", "criterion", "answer1_prob", "answer2_prob", "answer3_prob", "answer4_prob")
JUDGMENT_COLUMNS = ("text_id", "annotator_id", "DQQ0")
SOURCE_ROW = "_source_row"  # 1-based data row of the TSV a converted row came from (dropped before writing)


def llm_rubric_template() -> dict:
    """The packaged LLM-Rubric question texts (conf/rubric/llm_rubric.yaml)."""
    text = importlib.resources.files("conf").joinpath("rubric/llm_rubric.yaml").read_text()
    return yaml.safe_load(text)


def import_llm_rubric(evaluations: str | Path, judgments: str | Path, out: str | Path) -> dict[str, int]:
    """Convert LLM-Rubric TSV files into a native dataset directory; returns counts of what was done."""
    evaluations, judgments, out = Path(evaluations), Path(judgments), Path(out)
    evals = _read_tsv(evaluations, EVAL_COLUMNS)
    _check_probabilities(evals, evaluations)
    human = _read_tsv(judgments, JUDGMENT_COLUMNS)
    rubric = _rubric_for(sorted(evals["criterion"].astype(str).unique(), key=_question_order), evals, evaluations)
    llm = _llm_long(evals, rubric, evaluations)
    human, counts = _usable_judgments(human, set(llm["conversation_id"]))
    labels, counts["unanswered_cells"] = _labels_long(human, rubric)
    _check_as_train_reads(rubric, llm, labels, evaluations, judgments)
    llm, labels = llm.drop(columns=SOURCE_ROW), labels.drop(columns=SOURCE_ROW)
    with out_lock(out):
        save_rubric(rubric, out / "rubric.yaml")
        atomic_to_csv(llm, out / "llm.csv")
        atomic_to_csv(labels, out / "labels.csv")
        atomic_write_text(
            out / "gather_summary.json", json.dumps({"judge_identity": llm_rubric_judge(rubric)}, indent=2)
        )
    counts.update(
        items=llm["conversation_id"].nunique(),
        judgment_rows=len(human),
        label_cells=len(labels),
        judges=labels["judge_id"].nunique(),
    )
    return counts


def llm_rubric_judge(rubric: Rubric) -> dict[str, str]:
    """The judge of LLM-Rubric's llm_evaluations.tsv as an identity (rubric/judge/identity.py): not gathered here, but
    known, so that a calibrator trained on it is refused on another judge's distributions and the reverse."""
    from rubric.judge.identity import rubric_hash

    return {
        "backend": "imported",
        "model": "LLM-Rubric llm_evaluations.tsv (the paper's judge)",
        "base_url_host": "none (imported)",
        "prompt_template": "llm-rubric",
        "rubric": rubric_hash(rubric),
        "answer_mode": "distribution/probabilities",
    }


def _check_as_train_reads(
    rubric: Rubric, llm: pd.DataFrame, labels: pd.DataFrame, evaluations: Path, judgments: Path
) -> None:
    """Refuse to write what `train` would refuse to read: the native checks (calibration/data/reading.py)
    run on the converted tables, and an error names the source file and its row, not the row of a file
    that was never written. So a dataset `import` wrote is never refused later."""
    from calibration.data.dataset import dataset_from_frames

    try:
        dataset_from_frames(
            rubric,
            llm.drop(columns=SOURCE_ROW),
            labels.drop(columns=SOURCE_ROW),
            llm_source="llm.csv",
            labels_source="labels.csv",
        )
    except InputError as exc:
        frame, source = (llm, evaluations) if exc.path == "llm.csv" else (labels, judgments)
        row = None if exc.row is None else int(frame[SOURCE_ROW].iloc[exc.row - 1])
        raise InputError(
            f"{exc.problem} (in the converted {exc.path})",
            path=source,
            row=row,
            fix=f"correct that row of {source.name} and import again ({exc.fix})",
        ) from None


def _usable_judgments(human: pd.DataFrame, known: set[str]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Drop guardrail failures, judgments of dialogues without LLM distributions and repeated
    judgments of a dialogue by the same annotator (the first round is kept); count each."""
    failed = human["DQQ0"] == 2
    unmatched = ~failed & ~human["text_id"].isin(known)
    kept = human[~failed & ~unmatched]
    repeated = kept.duplicated(["text_id", "annotator_id"], keep="first")
    counts = {
        "guardrail_failed_rows_excluded": int(failed.sum()),
        "rows_without_distributions_excluded": int(unmatched.sum()),
        "repeated_judgments_excluded": int(repeated.sum()),
    }
    return kept[~repeated], counts


def _read_tsv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    if not path.exists():
        raise InputError("file not found.", path=path, fix="pass the path of the LLM-Rubric TSV file.")
    read_text_file(path)  # not UTF-8 (or a folder): one line naming the file
    try:
        df = pd.read_csv(path, sep="\t", dtype={"text_id": str, "criterion": str, "annotator_id": str})
    except pd.errors.EmptyDataError:
        raise InputError("the file is empty.", path=path, fix="pass the LLM-Rubric TSV file.") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(
            f"cannot be read ({str(exc).splitlines()[0]}).",
            path=path,
            fix="pass the LLM-Rubric TSV file (tab-separated).",
        ) from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}; is this the right LLM-Rubric file?",
            path=path,
            fix="evaluations= takes llm_evaluations.tsv and judgments= takes human_judgments.tsv.",
        )
    return clean_id_columns(df, ("text_id", "criterion", "annotator_id"))  # one rule for ids (rubric/ids.py)


def _check_probabilities(evals: pd.DataFrame, path: Path) -> None:
    """Every answerK_prob a number in [0, 1] (the row named otherwise), as numbers from here on."""
    for k in range(1, 5):
        column = f"answer{k}_prob"
        values = pd.to_numeric(evals[column], errors="coerce")
        bad = np.flatnonzero(
            (~np.isfinite(values.to_numpy(dtype=float))) | (values < 0).to_numpy() | (values > 1).to_numpy()
        )
        if bad.size:
            raise InputError(
                f"{column} {str(evals[column].iloc[bad[0]])!r} is not a probability in [0, 1].",
                path=path,
                row=int(bad[0]) + 1,
                fix="write a number in [0, 1] in every answerK_prob column.",
            )
        evals[column] = values.astype(float)


def _question_order(qid: str) -> tuple[int, str]:
    digits = "".join(ch for ch in qid if ch.isdigit())
    return (int(digits) if digits else 10**6, qid)


def _rubric_for(qids: list[str], evals: pd.DataFrame, path: Path) -> Rubric:
    """The packaged texts for the questions found; options are those that ever get probability mass
    (Q8's always-zero fourth column is dropped)."""
    template = {q["id"]: q for q in llm_rubric_template()["questions"]}
    questions = []
    for qid in qids:
        mass = evals.loc[evals["criterion"] == qid, [f"answer{k}_prob" for k in range(1, 5)]].sum()
        n = int(np.flatnonzero(mass.to_numpy() > 0).max()) + 1
        base = template.get(
            qid, {"id": qid, "text": qid, "options": [{"value": v, "label": str(v)} for v in range(1, 5)]}
        )
        options = base["options"][:n] + [{"value": v, "label": str(v)} for v in range(len(base["options"]) + 1, n + 1)]
        questions.append({"id": qid, "text": base["text"], "options": options})
    target = "Q0" if "Q0" in qids else qids[0]
    return rubric_from_dict({"name": "llm_rubric", "target": target, "questions": questions}, source=path)


def _llm_long(evals: pd.DataFrame, rubric: Rubric, path: Path) -> pd.DataFrame:
    dup = evals.duplicated(["text_id", "criterion"])
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0]) + 1
        raise InputError(
            "duplicate (text_id, criterion) row.", path=path, row=row, fix="keep one row per dialogue and question."
        )
    frames = []
    for question in rubric.questions:
        part = evals[evals["criterion"] == question.id]
        for k, option in enumerate(question.options, start=1):
            frames.append(
                pd.DataFrame(
                    {
                        "conversation_id": part["text_id"].to_numpy(),
                        "turn": "",
                        "question_id": question.id,
                        "option": option.key,
                        "prob": part[f"answer{k}_prob"].to_numpy(dtype=float),
                        SOURCE_ROW: part.index.to_numpy() + 1,
                    }
                )
            )
    llm = pd.concat(frames, ignore_index=True).sort_values(["conversation_id", "question_id", "option"], kind="stable")
    return llm.reset_index(drop=True)


def _labels_long(human: pd.DataFrame, rubric: Rubric) -> tuple[pd.DataFrame, int]:
    """Wide judgments -> long labels; 0 or empty means not answered and becomes a missing row."""
    frames, unanswered = [], 0
    for question in rubric.questions:
        if question.id not in human.columns:
            continue
        answer = pd.to_numeric(human[question.id], errors="coerce")
        given = answer.notna() & (answer != 0)
        unanswered += int((~given).sum())
        frames.append(
            pd.DataFrame(
                {
                    "conversation_id": human.loc[given, "text_id"].to_numpy(),
                    "turn": "",
                    "judge_id": human.loc[given, "annotator_id"].to_numpy(),
                    "question_id": question.id,
                    "answer": [format_value(v) for v in answer[given]],
                    SOURCE_ROW: human.index[given.to_numpy()].to_numpy() + 1,
                }
            )
        )
    return pd.concat(frames, ignore_index=True), unanswered
