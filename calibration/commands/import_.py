"""`role-rubric import`: a dataset folder from where conversations and reviewers' labels live.

    role-rubric import source=label-studio data=DIR export=EXPORT.json out=DIR     (or url= and project=)
    role-rubric import source=sheet data=DIR sheet=FILLED.csv out=DIR
    role-rubric import source=llm-rubric evaluations=TSV judgments=TSV out=DIR
    role-rubric import source=otel files=EXPORT.jsonl|DIR|GLOB out=DIR
    role-rubric import source=mlflow tracking_uri=URL experiment=NAME out=DIR
    role-rubric import source=phoenix url=URL project=NAME out=DIR

The sources are calibration/connectors/sources.py's registry (`SOURCES`): this command loads the one source=
names, with its settings (calibration/schema/commands_import.py: each source's own keys), and lets it import.
Its keys: `role-rubric import --help`.
"""

from __future__ import annotations

from calibration.schema.commands_import import Import as Schema

__all__ = ["Schema", "run"]


def run(cfg: Schema) -> dict[str, int]:
    """CLI: `role-rubric import source=NAME ... out=DIR`: the counts. Imports inside, so that `role-rubric
    --help` loads no stage."""
    from calibration.connectors.sources import open_source

    return open_source(cfg).import_into(cfg.out, progress=cfg.progress)
