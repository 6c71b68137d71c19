"""What the model is told at the start of a question when its sandbox changed while the
thread was quiet."""

from __future__ import annotations

from bot.datacard.data_file import DataFile
from bot.sandbox.base import WORK_DIR

STOPPED = (
    "Note: the sandbox was stopped while the conversation was quiet and has been started "
    f"again. The files in {WORK_DIR} are as they were (the uploads, report.md, out/, and "
    "anything you wrote there). Processes did not survive: the Python kernel's variables "
    "are gone and background commands have ended, so load or compute again what you need."
)


RESTORED = (
    "Note: the sandbox was shut down while the conversation was quiet and has been made "
    f"again from a snapshot of its disk. The files in {WORK_DIR} are as they were (the "
    "uploads, report.md, out/, and anything you wrote there). Processes did not survive: "
    "the Python kernel's variables are gone and background commands have ended, so load "
    "or compute again what you need."
)


def fresh_sandbox(files: list[DataFile]) -> str:
    names = ", ".join(f.path for f in files) or "none"
    return (
        "Note: the sandbox was shut down while the conversation was quiet and this is a "
        "fresh one, with a fresh Python kernel. Anything you made earlier (variables, files "
        f"in {WORK_DIR}, report.md, out/) is gone. The files given to you were taken in "
        f"again: {names}."
    )


def not_posted(path: str, kind: str) -> str:
    """A deliverable that was not a regular file (a link, a folder): it was not posted."""
    what = {"link": "a symbolic link", "dir": "a folder"}.get(kind, "not a regular file")
    return (
        f"Note: {path} was {what}, not a regular file, so it was not posted to the thread. "
        "Write deliverables as regular files (links are never followed)."
    )
