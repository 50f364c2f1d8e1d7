"""Conversations from where chatbots already log: spans of OpenTelemetry GenAI / OpenInference / OpenLLMetry
instrumentations, normalised into `Span` records (`spans.py`; OTLP JSON exports are read here, `otlp.py`; MLflow
and Phoenix servers by calibration/connectors/), their messages read in every convention in use
(`messages.py`), and rebuilt into conversations once each, in time order (`assemble.py`); reviewers'
annotations stored beside them become labels in the labelling layer (calibration/labelling/annotations.py).

Nothing here reads a command's settings or talks to a server: `role-rubric import source=otel|mlflow|phoenix`
(calibration/connectors/sources.py) does, and calls this package.
"""
