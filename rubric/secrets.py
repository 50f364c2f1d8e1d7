"""Secrets kept out of what role-rubric shows: `mask_secrets` removes API keys and tokens from text a server
sent back (an error body that echoes the request's headers) or a URL, and `looks_like_secret` tells a key
given where a variable's name belongs. One home for the judge client, the REST client, the trace readers
and the config checks alike. `secret_in_env` reads a token from the variable token_env= names, for every
service that takes one.
"""

from __future__ import annotations

import os
import re

from rubric.errors import InputError

_SECRET_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s\"',;]+"),
    re.compile(r"(?i)((?:api[_-]?key|authorization|x-api-key)[\"']?\s*[:=]\s*[\"']?)(?!bearer\b)[^\s\"',;]+"),
    re.compile(r"\b(sk-)[A-Za-z0-9_\-]{8,}"),
    # Label Studio: a legacy token after its scheme word, and any JWT (personal access, refresh, access)
    re.compile(r"(?i)(\btoken\s+)[A-Za-z0-9_\-.]{16,}"),
    re.compile(r"\b(eyJ)[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]*)?"),
)
MASK = "***"


def mask_secrets(text: str, *secrets: str | None) -> str:
    """`text` with every given secret, and anything that looks like a key or bearer token, replaced by ***.

    >>> mask_secrets("bad key sk-abcdefghijkl in Authorization: Bearer xyz", "xyz")
    'bad key sk-*** in Authorization: Bearer ***'
    >>> mask_secrets("Token 0123456789abcdef0123 or eyJhbGciOi.eyJ0b2tlbl90eXBlIjoi.c2lnbmF0dXJl refused")
    'Token *** or eyJ*** refused'
    """
    for secret in secrets:
        if secret and len(secret) >= 4 and secret != "EMPTY":
            text = text.replace(secret, MASK)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


def looks_like_secret(text: str) -> bool:
    """A value that is a key or token rather than a name: given where a variable's name belongs, it is
    never shown. Hex of 20+ characters (a Label Studio legacy token), a JWT, an sk- key, or a long mix of
    letters and digits without the underscores of a variable name."""
    text = text.strip()
    if mask_secrets(text) != text or re.fullmatch(r"[0-9a-fA-F]{20,}", text):
        return True
    return (
        len(text) >= 24
        and "_" not in text
        and bool(re.search(r"\d", text))
        and bool(re.search(r"[a-z]", text))
        and bool(re.search(r"[A-Z]", text))
    )


def secret_in_env(name: str, *, what: str, fix: str) -> str:
    """The value of the environment variable `name` (stripped; "" where it is unset), after refusing a `name`
    that looks like the secret itself, which must never be echoed (what: "token", "API key"; fix: how to pass
    it instead). Whether an empty value is an error is the caller's: some services need no authentication."""
    if looks_like_secret(name):
        raise InputError(
            f"token_env= is given what looks like the {what} itself (not shown here); it takes the name of an "
            "environment variable.",
            fix=fix,
        )
    return os.environ.get(name, "").strip()
