"""Local sandbox backend: every call runs in a fresh bubblewrap (`bwrap`) container.

`provider` makes and finds sandboxes (host folders, `folders`; the optional repository,
`git`); `sandbox` runs snippets (`programs`, `run`) and file helpers (`fileops`) in
containers started by `bwrap` and set up by `isolation`.
"""

from bot.sandbox.limits import Limits
from bot.sandbox.local.bwrap import require_bubblewrap
from bot.sandbox.local.provider import LocalProvider
from bot.sandbox.local.sandbox import LocalSandbox

__all__ = ["Limits", "LocalProvider", "LocalSandbox", "require_bubblewrap"]
