"""Local sandbox backend: every call runs in a fresh bubblewrap (`bwrap`) container."""

from bot.sandbox.limits import Limits
from bot.sandbox.local.bwrap import require_bubblewrap
from bot.sandbox.local.provider import LocalProvider, LocalSandbox

__all__ = ["Limits", "LocalProvider", "LocalSandbox", "require_bubblewrap"]
