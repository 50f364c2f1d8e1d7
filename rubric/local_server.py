"""Kept so that imports of `rubric.local_server` written before the move still work: the module is
rubric/servers/local.py."""

from rubric.servers.local import LocalServer, free_port, resolve_model_path, served_model_name, server_command

__all__ = ["LocalServer", "free_port", "resolve_model_path", "served_model_name", "server_command"]
