"""The LLM-Rubric data the benchmarks measure on: where it lies and how it is read.

`--anchors DIR` (added by `add_anchors_argument`) names the folder with LLM-Rubric's llm_evaluations.tsv and
human_judgments.tsv (default: ../shared/anchors/llm_rubric_synth beside the repository); `load_llm_rubric`
imports them into a temporary dataset folder and reads it, as `role-rubric` would.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from calibration.data.dataset import Dataset, load_dataset
from calibration.data.importers import import_llm_rubric

ANCHORS = Path(__file__).resolve().parents[2] / "shared/anchors/llm_rubric_synth"


def add_anchors_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--anchors", default=str(ANCHORS))


def load_llm_rubric(anchors: str | Path) -> Dataset:
    """The LLM-Rubric dataset of the folder `anchors`, imported into a temporary folder and read."""
    anchors = Path(anchors)
    with tempfile.TemporaryDirectory() as tmp:
        import_llm_rubric(anchors / "llm_evaluations.tsv", anchors / "human_judgments.tsv", tmp)
        return load_dataset(tmp)
