"""Moved to :mod:`vkprovider.contract.support`; kept for imports by name from other test modules."""

from vkprovider.contract.support import CALL_TIMEOUT, new_uid, plugin_command, plugin_supervisor

__all__ = ["CALL_TIMEOUT", "new_uid", "plugin_command", "plugin_supervisor"]
