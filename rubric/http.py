"""Kept so that imports of `rubric.http` written before the move still work: the module is
rubric/transport/http.py."""

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
