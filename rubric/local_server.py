"""The old path of rubric.servers.local: its names, with a DeprecationWarning (import rubric.servers.local instead; nothing
in role-rubric imports this one)."""

import warnings

from rubric.servers.local import LocalServer, free_port, resolve_model_path, served_model_name, server_command

__all__ = ["LocalServer", "free_port", "resolve_model_path", "served_model_name", "server_command"]

warnings.warn("rubric.local_server is deprecated: import rubric.servers.local", DeprecationWarning, stacklevel=2)
