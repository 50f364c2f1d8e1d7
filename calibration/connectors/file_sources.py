"""`import source=llm-rubric` and `import source=sheet`: datasets and labels from files role-rubric knows the
shape of (calibration/data/importers.py reads LLM-Rubric's TSVs, calibration/labelling/sheet.py the sheet).
Each is a source of calibration/connectors/sources.py's registry; Label Studio's is
calibration/connectors/label_studio/source.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

from calibration.connectors.labels_import import import_labels
from calibration.schema.source_keys import LlmRubricKeys, SheetKeys

__all__ = ["LlmRubricFiles", "SheetLabels"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


class LlmRubricFiles:
    """source=llm-rubric: LLM-Rubric's evaluations and judgments TSVs -> a native dataset folder."""

    settings: ClassVar[type[LlmRubricKeys]] = LlmRubricKeys

    def __init__(self, settings: LlmRubricKeys):
        self.keys = settings

    def import_into(self, out: Path, *, progress: bool) -> dict[str, int]:
        from calibration.data.importers import import_llm_rubric

        counts = import_llm_rubric(str(self.keys.evaluations), str(self.keys.judgments), str(out))
        log.info("import: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
        log.info(
            f"import: wrote {Path(out) / 'rubric.yaml'}, llm.csv, labels.csv, gather_summary.json (the judge: "
            "LLM-Rubric's evaluations)"
        )
        return counts


class SheetLabels:
    """source=sheet: the filled sheet's labels, checked against the conversations (or, without them, the turns
    of llm.csv; labels per conversation where those turns are whole conversations)."""

    settings: ClassVar[type[SheetKeys]] = SheetKeys

    def __init__(self, settings: SheetKeys):
        self.keys = settings

    def import_into(self, out: Path, *, progress: bool) -> dict[str, int]:
        keys = self.keys
        return import_labels(keys.data, out, self._labels, plan=keys.plan, beside={"sheet": keys.sheet})

    def _labels(self, rubric: Any) -> tuple[Any, dict[str, int]]:
        from calibration.labelling.items import dataset_conversations, llm_items
        from calibration.labelling.sheet import sheet_labels

        data = self.keys.data
        conversations = dataset_conversations(data) if (data / "conversations.jsonl").exists() else None
        items = llm_items(data, required=conversations is None)
        whole = items is not None and any(turn == "" for _, turn in items)  # labels per conversation, not per turn
        return sheet_labels(
            str(self.keys.sheet),
            rubric,
            conversations=conversations,
            known=None if conversations is not None else items,
            whole_conversations=whole,
        )
