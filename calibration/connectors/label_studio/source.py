"""`import source=label-studio`: reviewers' labels from a Label Studio project -> a labelled copy of data=DIR.

The labels come from the project's JSON export (export=), or from the project pulled through Label Studio's API
(url= and project=: api.py), read by export.py, checked against data='s rubric and conversations, and written with
the sampling plan by calibration/connectors/labels_import.py. A pulled export is saved beside the labels
(OUT/label-studio-export.json, annotators named by email) once every check has passed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

from calibration.connectors.labels_import import import_labels
from calibration.schema.source_keys import LabelStudioKeys

__all__ = ["EXPORT_NAME", "LabelStudioLabels"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

EXPORT_NAME = "label-studio-export.json"
"""The export pulled with url= and project=, saved in the output folder."""


class LabelStudioLabels:
    """source=label-studio (calibration/connectors/sources.py's contract)."""

    settings: ClassVar[type[LabelStudioKeys]] = LabelStudioKeys

    def __init__(self, settings: LabelStudioKeys):
        self.keys = settings
        self._pulled: str | None = None  # the export pulled from the server, saved once every check has passed

    def import_into(self, out: Path, *, progress: bool) -> dict[str, int]:
        keys = self.keys
        beside = {"export": keys.export} if keys.export is not None else {}
        return import_labels(
            keys.data, out, self._labels, plan=keys.plan, beside=beside, before_writing=lambda: self._save_export(out)
        )

    def _labels(self, rubric: Any) -> tuple[Any, dict[str, int]]:
        """The labels of an export file (export=), or of the project pulled from the server (url= and project=;
        its text kept for `_save_export`)."""
        import json

        from calibration.connectors.label_studio.api import LabelStudio, api_token
        from calibration.connectors.label_studio.export import (
            label_studio_labels,
            read_export,
            read_judge_map,
            with_emails,
        )
        from calibration.connectors.label_studio.export_shape import check_export
        from calibration.labelling.items import dataset_conversations

        keys = self.keys
        conversations = dataset_conversations(keys.data)
        judge_map = read_judge_map(str(keys.judge_map)) if keys.judge_map is not None else None
        if keys.export is not None:  # export= or url= with project=, not both: the settings' rules
            tasks = read_export(str(keys.export))
            return label_studio_labels(tasks, rubric, conversations, path=keys.export, users=None, judge_map=judge_map)
        assert keys.url is not None and keys.project is not None, (
            "source=label-studio needs export=, or url= and project="
        )
        client = LabelStudio(keys.url, api_token(keys.token_env), timeout=keys.timeout)
        where = f"project {keys.project} at {keys.url.rstrip('/')}"
        tasks, users = check_export(client.export(keys.project), where), client.users()
        labels, counts = label_studio_labels(tasks, rubric, conversations, path=where, users=users, judge_map=judge_map)
        self._pulled = json.dumps(with_emails(tasks, users), ensure_ascii=False, indent=1)
        return labels, counts

    def _save_export(self, out: Path) -> None:
        """The export pulled from the server, saved as OUT/label-studio-export.json: only once every answer and
        the plan are checked, so bad input leaves nothing half-written."""
        from rubric.files import atomic_write_text, ensure_out_dir

        if self._pulled is None:
            return
        path = ensure_out_dir(out) / EXPORT_NAME
        atomic_write_text(path, self._pulled)
        log.info(f"import: wrote {path} (project {self.keys.project} as exported, annotators named by email)")
