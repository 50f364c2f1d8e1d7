"""A release's roles, by a short id: `estimate`'s per-role rows and `by_role` keys, and the strata of
`suggest purpose=estimate strata=role`."""

from __future__ import annotations

from pathlib import Path

__all__ = ["role_key", "roles_of_release"]


def roles_of_release(root: Path) -> dict[str, set[str]]:
    path = root / "conversations.jsonl"
    if not path.exists():
        return {}
    from rubric.conversations import load_conversations

    roles: dict[str, set[str]] = {}
    for conv in load_conversations(path):
        roles.setdefault(role_key(conv), set()).add(conv.conversation_id)
    return roles


def role_key(conv) -> str:
    """A role's short name for rows and `by_role` keys (rubric.conversations.role_name)."""
    from rubric.conversations import role_name

    return role_name(conv.chatbot_role, conv.record if isinstance(getattr(conv, "record", None), dict) else None)
