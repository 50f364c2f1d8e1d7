"""The readers of OpenInference's messages (`llm.input_messages.N.message.*`, `llm.output_messages.N...`, else
an OpenAI request and completion in `input.value` / `output.value`) and MLflow's (`mlflow.spanInputs`, an
OpenAI request, and `mlflow.spanOutputs`, a chat completion or plain text). messages.py says which is tried
when.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rubric.traces.llm_call import LlmCall, flat_message, flattened, openai_exchange, parse_json, with_system
from rubric.traces.spans import Span

_OPENINFERENCE_KEY = re.compile(r"llm\.(input|output)_messages\.(\d+)\.message\.(.+)")


# OpenInference: llm.input_messages.N.message.* -------------------------------------------------------------


def read_openinference(span: Span) -> LlmCall | None:
    attrs = span.attributes
    tree = flattened(attrs, _OPENINFERENCE_KEY, "llm.input_messages.", "llm.output_messages.")
    if tree is not None:
        inputs = [flat_message(m, "user") for _, m in sorted(tree.get("input", {}).items())]
        outputs = [flat_message(m, "assistant") for _, m in sorted(tree.get("output", {}).items())]
        call = with_system(None, inputs, outputs, "openinference")
        ids = _response_ids(attrs)
        if not ids:
            return call
        return call._replace(
            response_id=ids.get("response_id", call.response_id),
            previous_response_id=ids.get("previous_response_id", call.previous_response_id),
        )
    if attrs.get("openinference.span.kind") != "LLM":
        return None
    request = _json_value(attrs, "input.value", "input.mime_type")
    response = _json_value(attrs, "output.value", "output.mime_type")
    if request is None and response is None:
        return None
    return openai_exchange(request, response, "openinference")


def _response_ids(attrs: Mapping[str, Any]) -> dict[str, str]:
    """A Responses API call's own id and the one it continues, from the request and Response OpenInference
    keeps whole in input.value / output.value (parsed only where they are a Response's: most calls are not)."""
    raw_out, raw_in = attrs.get("output.value"), attrs.get("input.value")
    if not isinstance(raw_out, str) or ('"object":"response"' not in raw_out and '"object": "response"' not in raw_out):
        return {}
    response, request = parse_json(raw_out), parse_json(raw_in)
    ids = {"response_id": response.get("id") if isinstance(response, dict) else None}
    ids["previous_response_id"] = request.get("previous_response_id") if isinstance(request, dict) else None
    return {k: str(v) for k, v in ids.items() if v}


def _json_value(attrs: Mapping[str, Any], key: str, mime_key: str) -> Any:
    value = attrs.get(key)
    if value is None or "json" not in str(attrs.get(mime_key, "application/json")):
        return None
    return parse_json(value)


# MLflow --------------------------------------------------------------------------------------------------


def read_mlflow(span: Span) -> LlmCall | None:
    attrs = span.attributes
    if "mlflow.spanInputs" not in attrs and "mlflow.spanOutputs" not in attrs:
        return None
    return openai_exchange(
        parse_json(attrs.get("mlflow.spanInputs")), parse_json(attrs.get("mlflow.spanOutputs")), "mlflow"
    )
