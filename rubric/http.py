"""The old path of rubric.transport.http: its names, with a DeprecationWarning (import rubric.transport.http instead; nothing
in role-rubric imports this one)."""

import warnings

from rubric.transport.http import (
    HTTP_CLIENTS,
    Reply,
    Retryable,
    env_proxy,
    error_message,
    make_channel,
    refused_at,
    retry_after,
    ssl_context_for,
)

__all__ = [
    "HTTP_CLIENTS",
    "Reply",
    "Retryable",
    "env_proxy",
    "error_message",
    "make_channel",
    "refused_at",
    "retry_after",
    "ssl_context_for",
]

warnings.warn("rubric.http is deprecated: import rubric.transport.http", DeprecationWarning, stacklevel=2)
