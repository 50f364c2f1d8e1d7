"""Kept for calibration/publish/mlflow_client.py only, until publish moves to calibration/connectors/ and MLflow's
public client (engineer B, issue 59): the import's MLflow source is calibration/connectors/mlflow/source.py,
which changes no environment variable. Remove this module with that move."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def environment(wanted: Mapping[str, str]) -> Iterator[None]:
    """These environment variables set for the block, and put back as they were after it (MLflow's client reads
    its timeout, retries and credentials from the environment at each request)."""
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
