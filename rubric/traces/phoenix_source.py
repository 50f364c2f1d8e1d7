"""Kept for calibration/publish/phoenix.py only, until publish moves to calibration/connectors/ (engineer B,
issue 59): the import's Phoenix source is calibration/connectors/phoenix/source.py, which holds the same
`TOKEN_ENV` and `api_key` for the publish target to import from there. Remove this module with that move."""

from __future__ import annotations

import os

from rubric.errors import InputError
from rubric.responses import looks_like_secret

TOKEN_ENV = "PHOENIX_API_KEY"
"""Where the API key is read from by default (the variable Phoenix's own clients read)."""


def api_key(token_env: str | None) -> str | None:
    """The API key from `token_env` (None: PHOENIX_API_KEY, optional: a Phoenix without authentication needs
    none); a variable named on purpose must be set, and a name that looks like the key itself is refused."""
    name = token_env or TOKEN_ENV
    if looks_like_secret(name):
        raise InputError(
            "token_env= is given what looks like the API key itself (not shown here); it takes the name of an "
            "environment variable.",
            fix=f"export {TOKEN_ENV}=<your key> and leave token_env= out; the key never goes on the command line.",
        )
    key = os.environ.get(name, "").strip()
    if not key and token_env:
        raise InputError(
            f"token_env={name} names an environment variable that is not set.",
            fix=f"export {name}=<your Phoenix API key>, or leave token_env= out for a Phoenix without "
            f"authentication (or a key in {TOKEN_ENV}).",
        )
    return key or None
