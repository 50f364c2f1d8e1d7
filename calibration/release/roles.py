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
    """A role's short name for rows and `by_role` keys: the conversation's `role` field where it has one,
    else the chatbot_role itself where it is short, else its first words and a short hash of it (two
    prompts that start alike stay apart)."""
    import hashlib

    short = conv.record.get("role") if isinstance(getattr(conv, "record", None), dict) else None
    if isinstance(short, str) and short.strip():
        return short.strip()
    prompt = (conv.chatbot_role or "").strip()
    if not prompt:
        return "(no role)"
    if len(prompt) <= 40 and "\n" not in prompt:  # already a short name
        return prompt
    words = prompt.split()
    head = " ".join(words[:4]) + (" ..." if len(words) > 4 else "")
    return f"{head[:40]} #{hashlib.sha256(prompt.encode()).hexdigest()[:6]}"
