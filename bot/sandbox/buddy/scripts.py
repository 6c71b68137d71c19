"""The pure parts of the Buddy backend: identifiers, the create request, the first-boot
and run wrapper scripts, and the reading of Buddy's sandbox, command and content views.
Nothing here does I/O."""

from __future__ import annotations

import hashlib
import posixpath
import re
import secrets
import shlex
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from bot.errors import SandboxUnavailable
from bot.sandbox.base import (
    DATA_DIR,
    INTERPRETERS,
    KILL_EXIT,
    NOT_FOUND_EXIT,
    RUN_DIR,
    SANDBOX_PATH,
    SNIPPET_ENV,
    WORK_DIR,
    WORK_FOLDERS,
    ExecStatus,
    FileEntry,
    SandboxSpec,
    exit_status,
    not_installed,
    unsupported_language,
    wrong_kind,
)

if TYPE_CHECKING:
    from bot.sandbox.buddy import BuddyConfig

OS = "ubuntu:24.04"
IDENTIFIER_PREFIX = "sci-"
SNIPPET_VARS = " ".join(f"{name}={value}" for name, value in SNIPPET_ENV.items())
FINISHED = ("SUCCESSFUL", "FAILED")  # a command's final statuses
TIMING_SLACK_S = 1.0  # the client starts its clock a little after the sandbox does
TIMEOUT_EXIT = KILL_EXIT  # GNU `timeout -s KILL` kills its own group, itself too
BOOT_LOG_LINES = 5
ARCHIVE_RE = re.compile(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)", re.IGNORECASE)


# -- identifiers and the create request --


def make_identifier(session_key: str) -> str:
    """Unique, traceable to the session, and within Buddy's rules (letters, digits, _ and -;
    no '-' first or last)."""
    digest = hashlib.sha256(session_key.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{IDENTIFIER_PREFIX}{digest}-{secrets.token_hex(2)}"


def is_ours(identifier: Any) -> bool:
    """Whether a listed sandbox may be one this backend made (no identifier: maybe)."""
    return str(identifier or IDENTIFIER_PREFIX).startswith(IDENTIFIER_PREFIX)


def sandbox_name(session_key: str) -> str:
    return f"Code interpreter {session_key}"[:100]


def first_boot_script(
    *, make_data_dir: bool, clone_url: str | None = None, setup_command: str | None = None
) -> str:
    """The folders the bot relies on, owned by the user commands run as (`buddy` when this
    runs as root); sudo only where needed. Then the repository for a snapshot, and the setup.
    Safe under `set -e`."""
    lines = [
        "u=$(id -un 2>/dev/null || id -u)",
        '[ "$(id -u)" != 0 ] || ! id buddy >/dev/null 2>&1 || u=buddy',
        f"for d in {' '.join((WORK_DIR, *WORK_FOLDERS))}; do",
        '  if [ ! -d "$d" ]; then mkdir -p "$d" 2>/dev/null || sudo -n mkdir -p "$d" || exit 1; fi',
        '  if [ "$(id -u)" = 0 ]; then chown "$u" "$d" || exit 1',
        '  elif [ ! -w "$d" ]; then sudo -n chown "$u" "$d" || exit 1; fi',
        "done",
    ]
    if make_data_dir:
        lines.append(f"mkdir -p {DATA_DIR} 2>/dev/null || sudo -n mkdir -p {DATA_DIR} || exit 1")
    if clone_url:  # a sandbox made from a snapshot takes no `fetch`
        url = shlex.quote(clone_url)
        lines.append(
            f"[ -d {DATA_DIR}/.git ] || git clone --quiet --depth 1 -- {url} {DATA_DIR} "
            f"|| sudo -n git clone --quiet --depth 1 -- {url} {DATA_DIR} || exit 1"
        )
    if setup_command:
        lines.append(setup_command)
    return "\n".join(lines)


def create_body(spec: SandboxSpec, identifier: str, config: BuddyConfig) -> dict[str, Any]:
    """The create request: a new sandbox (§5.1 a) or one restored from a snapshot (§5.1 b)."""
    from_snapshot = config.snapshot_id is not None
    body: dict[str, Any] = {
        "name": sandbox_name(spec.session_key),
        "identifier": identifier,
        "resources": config.resources,
        "timeout": config.timeout_s,
        "tags": list(spec.tags),
        "first_boot_commands": first_boot_script(
            make_data_dir=not spec.repo_url,
            clone_url=spec.repo_url if from_snapshot else None,
            setup_command=config.setup_command,
        ),
    }
    if from_snapshot:
        return {"snapshot_id": config.snapshot_id, **body}
    body["os"] = OS
    if spec.repo_url:
        body["fetch"] = [{"type": "PUBLIC_REPO", "repository": spec.repo_url, "path": DATA_DIR}]
    return body


# -- the run wrapper --


def run_script(
    language: str,
    code: str,
    timeout_s: float,
    *,
    run_dir: str = RUN_DIR,
    work_dir: str = WORK_DIR,
    new_token: Callable[[], str] = lambda: secrets.token_hex(8),
) -> str:
    """The BASH command that runs one snippet.

    The snippet travels in a quoted heredoc (no expansion) whose delimiter does not occur in
    the code; it is written to `run_dir`, or under $TMPDIR where that is not writable.
    `timeout -s KILL` kills the snippet's whole process group at the limit, and itself, so
    the wrapper exits 137. A TERM, INT or HUP to the wrapper (a terminate) kills that group
    too: `timeout` runs in the background and the wrapper waits for it.
    """
    if (problem := unsupported_language(language)) is not None:
        return _fail_script(problem)
    program, extension = INTERPRETERS[language].program, INTERPRETERS[language].extension
    token = new_token()
    while f"SCI_{token}" in code:
        token = new_token()
    delimiter = f"SCI_{token}"
    body = code if code.endswith("\n") else code + "\n"
    missing = shlex.quote(not_installed(language))
    q = shlex.quote
    return (
        "set -u\n"
        f"d={q(run_dir)}\n"
        '{ mkdir -p "$d" && [ -w "$d" ]; } 2>/dev/null || d="${TMPDIR:-/tmp}/.sci-run"\n'
        'mkdir -p "$d" || exit 1\n'
        f"mkdir -p {q(work_dir + '/out')} 2>/dev/null\n"
        f'f="$d/{token}.{extension}"\n'
        f"cat > \"$f\" <<'{delimiter}' || exit 1\n"
        f"{body}{delimiter}\n"
        f"p=$(command -v {program}) || {{ echo {missing} >&2; exit {NOT_FOUND_EXIT}; }}\n"
        f"cd {q(work_dir)} || exit 1\n"
        "c=\n"
        """trap '[ -z "$c" ] || kill -KILL -- "-$c" "$c" 2>/dev/null; rm -f "$f"; exit 143' """
        "TERM INT HUP\n"
        f"timeout -s KILL {max(timeout_s, 0.001):.3f} "
        f'env -i PATH="${{PATH:-{SANDBOX_PATH}}}" HOME={q(work_dir)} {SNIPPET_VARS} "$p" "$f" &\n'
        "c=$!\n"
        "exec 2>/dev/null\n"  # the snippet keeps its stderr; bash's "Killed" notice is dropped
        'wait "$c"\n'
        "r=$?\n"
        'rm -f "$f"\n'
        'exit "$r"\n'
    )


def _fail_script(message: str) -> str:
    """A command that reports `message` like a shell would for a missing program."""
    return f"echo {shlex.quote(message)} >&2\nexit {NOT_FOUND_EXIT}\n"


# -- reading Buddy's views --


def exec_status(
    exit_code: int | None, elapsed_s: float, limit_s: float, *, killed: bool
) -> tuple[ExecStatus, int | None]:
    """(status, exit code) of a finished command, as the local backend reports them."""
    if exit_code == 0:
        return "ok", 0
    if killed or exit_code is None:  # stopped by us, or by Buddy without an exit code
        return "killed", None
    if exit_code == TIMEOUT_EXIT and elapsed_s >= limit_s - TIMING_SLACK_S:
        return "timeout", None
    return exit_status(exit_code), exit_code


def exit_code_of(view: dict[str, Any]) -> int | None:
    """A command view's exit code; a SUCCESSFUL one without it exited 0."""
    code = view.get("exit_code")
    if isinstance(code, str) and code.lstrip("-").isdigit():
        code = int(code)
    if not isinstance(code, int) or isinstance(code, bool):
        return 0 if view.get("status") == "SUCCESSFUL" else None
    return code


def parse_timestamp(value: Any) -> float | None:
    """Unix seconds of an ISO 8601 date as Buddy writes it; None if there is none."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def booted(view: dict[str, Any]) -> bool:
    """Whether a sandbox view is ready for use (setup SUCCESS, status RUNNING); a failed
    or stale setup or a failed start raises SandboxUnavailable."""
    setup, status = view.get("setup_status"), view.get("status")
    if setup == "FAILED":
        raise SandboxUnavailable(f"the sandbox's setup commands failed{_boot_tail(view)}")
    if setup == "STALE":
        raise SandboxUnavailable("the sandbox's setup commands were changed and not applied")
    if status == "FAILED":
        raise SandboxUnavailable(f"the sandbox failed to start{_boot_tail(view)}")
    return setup == "SUCCESS" and status == "RUNNING"


def _boot_tail(view: dict[str, Any]) -> str:
    lines = [str(line)[:200] for line in view.get("boot_logs") or [] if str(line).strip()]
    return ":\n" + "\n".join(lines[-BOOT_LOG_LINES:]) if lines else ""


def parse_listing(items: list[Any], target: str, shown: str) -> list[FileEntry]:
    """FileEntries of a `content/` answer; a file answers with itself, which is an error."""
    entries = [item for item in items if isinstance(item, dict)]
    if len(entries) == 1 and _is_itself(entries[0], target):
        raise wrong_kind(shown, "folder")
    result = []
    for item in entries:
        name = str(item.get("name") or posixpath.basename(str(item.get("path", ""))))
        size = item.get("size")
        size = size if isinstance(size, int) and not isinstance(size, bool) else 0
        result.append(FileEntry(name, _kind(item.get("type")), size))
    return sorted(result, key=lambda entry: entry.name)


def _kind(value: Any) -> Literal["file", "dir", "other"]:
    kind = str(value or "").upper()
    return "file" if kind == "FILE" else "dir" if kind == "DIR" else "other"


def _is_itself(item: dict[str, Any], target: str) -> bool:
    path = item.get("path")
    if isinstance(path, str) and path:
        return posixpath.normpath(path) == target
    named_so = item.get("name") == posixpath.basename(target)
    return named_so and _kind(item.get("type")) == "file"


def check_is_file(headers: Mapping[str, str], target: str, shown: str) -> None:
    """Buddy sends a folder as a tar.gz archive; the local backend refuses, and so do we."""
    match = ARCHIVE_RE.search(headers.get("content-disposition", ""))
    name = match.group(1).strip() if match else ""
    archive = name.endswith((".tar.gz", ".tgz"))
    if archive and not posixpath.basename(target).endswith((".tar.gz", ".tgz")):
        raise wrong_kind(shown, "regular file")
