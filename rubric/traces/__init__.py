"""Conversations from where chatbots already log: spans of OpenTelemetry GenAI / OpenInference / OpenLLMetry
instrumentations, read from OTLP JSON exports (`otlp.py`), an MLflow server (`mlflow_source.py`) or a Phoenix
server (`phoenix_source.py`), normalised into `Span` records (`spans.py`), their messages read in every
convention in use (`messages.py`), and rebuilt into conversations once each, in time order (`assemble.py`);
reviewers' annotations stored beside them become labels in the labelling layer (calibration/labelling/annotations.py).

`role-rubric import source=otel|mlflow|phoenix` (calibration/commands/import_.py) calls this package.
"""
