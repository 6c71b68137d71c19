"""The bot's working folders (SANDBOX_ROOT, SPOOL_DIR): where they are by default, and made
or checked at start so that no other user can read, swap or plant anything in them.

They default to the bot's state folder, `$XDG_STATE_HOME/slack-code-interpreter` or else
`./.state/slack-code-interpreter`, never a shared folder such as /tmp, where another user
could create the path first (or as a symlink) and then read every upload, or point the
sandboxes' folders elsewhere. An existing folder must be a real folder (not a symlink)
owned by the bot's own user; its mode is then narrowed to the one below.
"""

from __future__ import annotations

import os
from pathlib import Path

from bot.errors import ConfigError

APP = "slack-code-interpreter"
PREFIX = "Configuration error: "
PRIVATE = 0o700  # the spool: only the bot reads what is on its way in
# The sandbox root when the bot runs as root: each sandbox then runs as a uid of its own,
# and bwrap, running as that uid, must walk through the root (and every folder above it)
# to its folders. Search only (x): others can pass to a name they know, never list the root
# (the names hold 48 random bits) or create anything in it. The sandboxes' own folders
# keep their own modes below it.
WALKABLE = 0o711


def state_dir() -> Path:
    """`$XDG_STATE_HOME/slack-code-interpreter`, else `.state/slack-code-interpreter` here."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(".state")
    return base / APP


def sandbox_root_mode() -> int:
    """0711 when sandboxes run as other uids (the bot is root, see uids.py), else 0700."""
    return WALKABLE if os.geteuid() == 0 else PRIVATE


def own_folder(path: Path, mode: int, setting: str) -> Path:
    """`path` (absolute) once it is a folder of this user's with `mode`: made if missing
    (missing parents searchable only), else checked. ConfigError, one line, otherwise."""
    path = path.absolute()
    for parent in reversed(path.parents):
        if not parent.exists():
            _make(parent, WALKABLE, setting)
    if not os.path.lexists(path):
        _make(path, mode, setting)
    if os.path.islink(path):
        raise ConfigError(f"{PREFIX}{setting}: {path} is a symlink; give the folder itself.")
    try:  # checked and set through one handle: nothing can swap the folder in between
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"{PREFIX}{setting}: {path} is not a folder ({exc.strerror}).") from None
    try:
        owner = os.fstat(fd).st_uid
        if owner != os.geteuid():
            raise ConfigError(
                f"{PREFIX}{setting}: {path} belongs to uid {owner}, not to this bot's user "
                f"(uid {os.geteuid()}); use a folder of the bot's own."
            )
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return path


def _make(path: Path, mode: int, setting: str) -> None:
    try:
        os.mkdir(path, mode)  # the umask may narrow it further: own_folder sets it after
    except FileExistsError:
        pass  # made meanwhile (another replica on this host): checked by the caller
    except OSError as exc:
        why = exc.strerror or exc
        raise ConfigError(f"{PREFIX}{setting}: {path} could not be made ({why}).") from None
