"""The host side of a local sandbox: its folder under the provider's root.

Per sandbox there is a host folder `<root>/<id>/` holding `work/` (mounted read-write at
/buddy/work), `data/` (read-only at /buddy/data, the optional git checkout), `tmp/` and
`shm/` (the containers' /tmp and /dev/shm: on disk, so the quota counts them) and
`sandbox.json` (tags, for orphan clean-up).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import time
from pathlib import Path

from bot.sandbox.base import WORK_DIR, WORK_FOLDERS, SandboxInfo, SandboxSpec

META_FILE = "sandbox.json"
ID_PREFIX = "lcl-"
ID_RE = re.compile(r"lcl-[0-9a-f]{12}")
SCRATCH = {"tmp": "/tmp", "shm": "/dev/shm"}  # in a container's scratch folder -> its path
QUOTA_FOLDERS = ("work", "data", "scratch")  # what the disk quota counts


def make_folders(home: Path, spec: SandboxSpec, uid: int | None) -> None:
    """Create the sandbox folder `home`; `uid` (if not None) owns what the sandbox writes."""
    home.mkdir(mode=0o700)
    meta = {
        "id": home.name,
        "session_key": spec.session_key,
        "tags": list(spec.tags),
        "created_at": time.time(),
    }
    (home / META_FILE).write_text(json.dumps(meta))
    data, work = home / "data", home / "work"
    data.mkdir()
    work.mkdir()
    subdirs = [work / posixpath.relpath(d, WORK_DIR) for d in WORK_FOLDERS]
    for sub in subdirs:
        sub.mkdir()
    # Explicit modes: the bot's umask must not decide what the sandbox user can reach.
    home.chmod(0o711)
    data.chmod(0o755)
    work.chmod(0o700)
    if uid is not None:
        for path in (work, *subdirs):
            os.chown(path, uid, uid)
    (home / "scratch").mkdir(mode=0o711)
    (home / "scratch").chmod(0o711)


def make_scratch(home: Path, name: str, uid: int | None) -> Path:
    """A container's scratch folder, holding its /tmp and /dev/shm (owned by `uid`). Only the
    bot writes in `scratch/` itself, so no link can be planted on this path."""
    folder = home / "scratch" / name
    folder.mkdir(mode=0o711, parents=True)  # parents: a sandbox made by an older bot
    folder.chmod(0o711)
    for sub in SCRATCH:
        (folder / sub).mkdir(mode=0o700)
        if uid is not None:
            os.chown(folder / sub, uid, uid)
    return folder


def tagged(root: Path, tag: str) -> list[SandboxInfo]:
    found = []
    for entry in sorted(root.iterdir()):
        if not ID_RE.fullmatch(entry.name):
            continue
        try:
            meta = json.loads((entry / META_FILE).read_text())
        except (OSError, ValueError):
            continue
        if tag in meta.get("tags", []):
            created = meta.get("created_at")
            found.append(SandboxInfo(entry.name, float(created) if created else None))
    return found
