"""Local sandbox backend on bubblewrap (`bwrap`): each bash or Node call runs in a fresh
container; Python cells run in the sandbox's kernel, a long-lived container (`kernel`).

`provider` makes and finds sandboxes (host folders, `folders`; the optional repository,
`git`); `sandbox` runs snippets (`programs`, `run`, `kernel`) and file helpers (`fileops`)
in containers started by `bwrap` and set up by `isolation`.
"""

from bot.sandbox.limits import Limits
from bot.sandbox.local.bwrap import require_bubblewrap
from bot.sandbox.local.provider import LocalProvider
from bot.sandbox.local.sandbox import LocalSandbox

__all__ = ["Limits", "LocalProvider", "LocalSandbox", "require_bubblewrap"]
