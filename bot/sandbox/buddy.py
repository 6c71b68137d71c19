"""Buddy.Works backend: each sandbox is a Buddy sandbox VM driven over the REST API.

The VM is created in the configured project with /buddy/work (uploads/, out/) made by its
first-boot commands and the optional repository fetched into /buddy/data. Code runs as
tracked BASH commands whose JSONL logs are streamed back; files move through Buddy's
content, upload and download endpoints. All HTTP, retries and error messages live in
`bot.sandbox.buddy_http`.

Why tracked commands (`POST …/commands`) for `run_code`: the synchronous `/exec` endpoint
gives up after 60 s, cannot be killed and streams nothing; the non-BASH runtimes give no
control over the working directory or environment. One BASH command carries a wrapper that
writes the snippet, checks the interpreter and runs it under `timeout` in a clean
environment, so a run costs one POST, one followed log stream and usually one status read.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import posixpath
import re
import secrets
import shlex
import signal
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import httpx

from bot.errors import (
    BotError,
    ConfigError,
    SandboxError,
    SandboxGone,
    SandboxPathError,
    SandboxUnavailable,
)
from bot.sandbox.base import (
    DATA_DIR,
    LANGUAGES,
    OUT_DIR,
    UPLOADS_DIR,
    WORK_DIR,
    CommandState,
    ExecResult,
    ExecStatus,
    FileEntry,
    Language,
    SandboxInfo,
    SandboxSpec,
)
from bot.sandbox.buddy_http import (
    COMMAND_TIMEOUT,
    CREATE_TIMEOUT,
    DEFAULT_TIMEOUT,
    GONE_MESSAGE,
    READ_ATTEMPTS,
    STREAM_TIMEOUT,
    BuddyHttp,
    CommandNotFound,
    LogParser,
    OutcomeUnknown,
    StreamInterrupted,
    api_url_for,
    encode_path,
    multipart_body,
    multipart_boundary,
    multipart_content_type,
)
from bot.sandbox.limits import Limits
from bot.sandbox.local import sandbox_path
from bot.sandbox.output import CappedBuffer

if TYPE_CHECKING:
    from bot.settings import Settings

__all__ = ["BuddyConfig", "BuddyProvider", "BuddySandbox"]

log = logging.getLogger(__name__)

OS = "ubuntu:24.04"
IDENTIFIER_PREFIX = "sci-"
RUN_DIR = "/buddy/.run"  # snippet files, outside the folders the tools can list
OUTPUT_LIMIT = Limits().output_bytes  # per stream, as in the local backend
COMMAND_MAX_S = Limits().command_max_s  # wall-clock cap of a detached command
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SNIPPET_ENV = "LANG=C.UTF-8 MPLBACKEND=Agg PYTHONUNBUFFERED=1 TMPDIR=/tmp"  # plus PATH, HOME
# Language -> (interpreter looked up on PATH, snippet file extension).
INTERPRETERS: dict[str, tuple[str, str]] = {
    "python": ("python3", "py"),
    "bash": ("bash", "sh"),
    "node": ("node", "js"),
}

CLIENT_GRACE_S = 15.0  # past the snippet's limit before the client terminates it itself
TIMING_SLACK_S = 1.0  # the client starts its clock a little after the sandbox does
FINISH_PATIENCE_S = 5.0  # a log stream ended this long before the status did: re-read it
KILL_ATTEMPTS = 3  # a failed terminate leaves the process running, so it is retried
KILL_WAIT_S = 5.0
MAX_POLL_DELAY_S = 1.0
CLEANUP_TIMEOUT_S = 60.0
BOOT_LOG_LINES = 5
LIST_CONCURRENCY = 4
FINISHED = ("SUCCESSFUL", "FAILED")
TIMEOUT_EXIT = 128 + signal.SIGKILL  # GNU `timeout -s KILL` kills its own group, itself too
# Exits that mean a signal from a limit, as the local backend reports them: "killed".
SIGNAL_EXITS = {128 + signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGXFSZ}
ARCHIVE_RE = re.compile(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)", re.IGNORECASE)


@dataclass(frozen=True)
class BuddyConfig:
    token: str = field(repr=False)
    workspace: str
    project: str | None
    api_url: str
    resources: str = "1x2"
    timeout_s: int = 900  # Buddy's inactivity auto-stop
    snapshot_id: str | None = None
    setup_command: str | None = None
    ready_timeout_s: float = 300
    retry_base_delay_s: float = 1.0
    poll_interval_s: float = 0.1

    @classmethod
    def from_settings(cls, settings: Settings) -> BuddyConfig:
        """The Buddy part of the settings; a missing one is a one-line ConfigError."""
        token = settings.buddy_token.get_secret_value().strip() if settings.buddy_token else ""
        if not token:
            raise ConfigError(
                _missing(
                    "BUDDY_TOKEN",
                    "a personal access token with the scopes WORKSPACE, SANDBOX_READ and "
                    "SANDBOX_WRITE",
                )
            )
        if not settings.buddy_workspace:
            raise ConfigError(
                _missing("BUDDY_WORKSPACE", "the part after app.buddy.works/ in its address")
            )
        if not settings.buddy_project:
            raise ConfigError(
                _missing(
                    "BUDDY_PROJECT",
                    "the project the sandboxes live in; outside a project needs admin rights",
                )
            )
        return cls(
            token=token,
            workspace=settings.buddy_workspace,
            project=settings.buddy_project,
            api_url=api_url_for(settings.buddy_api_url, settings.buddy_region),
            resources=settings.buddy_resources,
            timeout_s=settings.buddy_sandbox_timeout,
            snapshot_id=settings.buddy_snapshot or None,
            setup_command=settings.sandbox_setup_command or None,
            ready_timeout_s=settings.buddy_ready_timeout_s,
            retry_base_delay_s=settings.buddy_retry_delay_s,
        )


def _missing(name: str, what: str) -> str:
    return (
        f"Configuration error: {name} is not set. "
        f"Set {name} ({what}) in the environment or in .env."
    )


# -- pure helpers: identifiers, request bodies, scripts, statuses --


def make_identifier(session_key: str) -> str:
    """Unique, traceable to the session, and within Buddy's rules (letters, digits, _ and -;
    no '-' first or last)."""
    digest = hashlib.sha256(session_key.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{IDENTIFIER_PREFIX}{digest}-{secrets.token_hex(2)}"


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
        f"for d in {WORK_DIR} {UPLOADS_DIR} {OUT_DIR}; do",
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
    if language not in INTERPRETERS:
        names = ", ".join(LANGUAGES)
        return _fail_script(f"{language} is not a supported language (use {names})")
    program, extension = INTERPRETERS[language]
    token = new_token()
    while f"SCI_{token}" in code:
        token = new_token()
    delimiter = f"SCI_{token}"
    body = code if code.endswith("\n") else code + "\n"
    missing = shlex.quote(f"{language} is not installed in this sandbox")
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
        f"p=$(command -v {program}) || {{ echo {missing} >&2; exit 127; }}\n"
        f"cd {q(work_dir)} || exit 1\n"
        "c=\n"
        """trap '[ -z "$c" ] || kill -KILL -- "-$c" "$c" 2>/dev/null; rm -f "$f"; exit 143' """
        "TERM INT HUP\n"
        f"timeout -s KILL {max(timeout_s, 0.001):.3f} "
        f'env -i PATH="${{PATH:-{DEFAULT_PATH}}}" HOME={q(work_dir)} {SNIPPET_ENV} "$p" "$f" &\n'
        "c=$!\n"
        "exec 2>/dev/null\n"  # the snippet keeps its stderr; bash's "Killed" notice is dropped
        'wait "$c"\n'
        "r=$?\n"
        'rm -f "$f"\n'
        'exit "$r"\n'
    )


def _fail_script(message: str) -> str:
    """A command that reports `message` like a shell would for a missing program."""
    return f"echo {shlex.quote(message)} >&2\nexit 127\n"


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
    if exit_code in SIGNAL_EXITS:
        return "killed", exit_code
    return "error", exit_code


def parse_listing(items: list[Any], target: str, shown: str) -> list[FileEntry]:
    """FileEntries of a `content/` answer; a file answers with itself, which is an error."""
    entries = [item for item in items if isinstance(item, dict)]
    if len(entries) == 1 and _is_itself(entries[0], target):
        raise SandboxPathError(f"{shown} is not a folder")
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


def _exit_code(view: dict[str, Any]) -> int | None:
    code = view.get("exit_code")
    if isinstance(code, str) and code.lstrip("-").isdigit():
        code = int(code)
    if not isinstance(code, int) or isinstance(code, bool):
        return 0 if view.get("status") == "SUCCESSFUL" else None
    return code


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _boot_tail(view: dict[str, Any]) -> str:
    lines = [str(line)[:200] for line in view.get("boot_logs") or [] if str(line).strip()]
    return ":\n" + "\n".join(lines[-BOOT_LOG_LINES:]) if lines else ""


class _Capture:
    """A command's stdout and stderr, capped, fed from its JSONL log."""

    def __init__(self) -> None:
        self.stdout = CappedBuffer(OUTPUT_LIMIT)
        self.stderr = CappedBuffer(OUTPUT_LIMIT)
        self.parser = LogParser(self.stdout, self.stderr)

    def result(self, status: ExecStatus, exit_code: int | None, duration_s: float) -> ExecResult:
        return ExecResult(status, exit_code, self.stdout.output(), self.stderr.output(), duration_s)


class _Counter:
    def __init__(self) -> None:
        self.total = 0

    async def through(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            self.total += len(chunk)
            yield chunk


# -- provider --


class BuddyProvider:
    """Creates Buddy sandboxes in one workspace/project over one shared HTTP client."""

    def __init__(
        self, config: BuddyConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self.http = BuddyHttp(
            config.api_url,
            config.token,
            workspace=config.workspace,
            project=config.project,
            retry_base_delay_s=config.retry_base_delay_s,
            transport=transport,
        )
        self._sandboxes: dict[str, BuddySandbox] = {}
        self._background: set[asyncio.Task[None]] = set()

    async def create(self, spec: SandboxSpec) -> BuddySandbox:
        if self.http.closed:
            raise SandboxUnavailable("the Buddy sandbox provider is closed")
        identifier = make_identifier(spec.session_key)
        sandbox_id = await self._post_create(identifier, create_body(spec, identifier, self.config))
        try:
            await self._wait_ready(sandbox_id)
        except BaseException:
            await self.shielded(self._delete_quietly(sandbox_id))
            raise
        sandbox = BuddySandbox(self, sandbox_id)
        self._sandboxes[sandbox_id] = sandbox
        return sandbox

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        """This bot's sandboxes carrying `tag`. The list shows no tags (and has no filter),
        so each candidate is read; only identifiers this backend makes are candidates."""
        response = await self.http.request(
            "GET",
            self.http.workspace_url("sandboxes"),
            params=self.http.scope_params(),
            scope="project",
            what="listing sandboxes",
            idempotent=True,
        )
        items = self.http.json_of(response, "listing sandboxes").get("sandboxes") or []
        candidates = [
            item["id"]
            for item in items
            if isinstance(item, dict)
            and isinstance(item.get("id"), str)
            and str(item.get("identifier") or IDENTIFIER_PREFIX).startswith(IDENTIFIER_PREFIX)
        ]
        gate = asyncio.Semaphore(LIST_CONCURRENCY)

        async def tagged(sandbox_id: str) -> SandboxInfo | None:
            async with gate:
                try:
                    view = await self._get_sandbox(sandbox_id, "reading a sandbox's tags")
                except SandboxGone:
                    return None
            if tag not in (view.get("tags") or []):
                return None
            return SandboxInfo(sandbox_id, _timestamp(view.get("create_date")))

        found = await asyncio.gather(*(tagged(sandbox_id) for sandbox_id in candidates))
        return [info for info in found if info is not None]

    async def list_ids(self, tag: str) -> list[str]:
        return [info.id for info in await self.list_tagged(tag)]

    async def destroy_id(self, sandbox_id: str) -> None:
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is not None:
            await sandbox.destroy()
        else:
            await self.delete(sandbox_id)

    async def close(self) -> None:
        """Close the HTTP client once clean-ups still under way have finished. Sandboxes are
        left as they are (the sessions destroy theirs)."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=CLEANUP_TIMEOUT_S)
        await self.http.aclose()

    # -- shared with BuddySandbox --

    async def shielded(self, cleanup: Coroutine[Any, Any, None]) -> None:
        """Run a clean-up to its end even if the caller is being cancelled."""
        task = asyncio.ensure_future(cleanup)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        await asyncio.shield(task)

    async def delete(self, sandbox_id: str) -> None:
        """DELETE, never resent blindly: if the answer is lost, one GET says whether it went."""
        what = f"deleting sandbox {sandbox_id}"
        try:
            await self.http.request(
                "DELETE", self.http.sandbox_url(sandbox_id), scope="sandbox", what=what
            )
        except SandboxGone:
            pass  # 404: already gone
        except OutcomeUnknown as exc:
            try:
                await self._get_sandbox(sandbox_id, "checking whether the sandbox was deleted")
            except SandboxGone:
                pass
            else:
                raise SandboxError(f"could not delete sandbox {sandbox_id}: {exc}") from None
        self._sandboxes.pop(sandbox_id, None)

    def forget(self, sandbox_id: str) -> None:
        self._sandboxes.pop(sandbox_id, None)

    # -- internals --

    async def _post_create(self, identifier: str, body: dict[str, Any]) -> str:
        """The new sandbox's id. Never resent: if the outcome is unknown (timeout, 5xx,
        cancellation), the identifier is looked up and a sandbox made by it deleted."""
        try:
            response = await self.http.request(
                "POST",
                self.http.workspace_url("sandboxes"),
                params=self.http.scope_params(),
                json=body,
                scope="project",
                what="creating a sandbox",
                timeouts=CREATE_TIMEOUT,
            )
            try:
                sandbox_id = self.http.json_of(response, "creating a sandbox").get("id")
            except SandboxError:
                sandbox_id = None
            if not isinstance(sandbox_id, str) or not sandbox_id:
                raise OutcomeUnknown("Buddy's answer did not include the sandbox's id")
        except OutcomeUnknown as exc:
            await self.shielded(self._remove_identifier(identifier))
            raise SandboxUnavailable(
                f"creating the sandbox failed ({exc}). Try again in a moment."
            ) from None
        except asyncio.CancelledError:
            await self.shielded(self._remove_identifier(identifier))
            raise
        return sandbox_id

    async def _wait_ready(self, sandbox_id: str) -> None:
        """Poll until setup SUCCESS and status RUNNING; fail fast on FAILED or STALE."""
        cfg = self.config
        view: dict[str, Any] = {}
        delay = cfg.poll_interval_s
        try:
            async with asyncio.timeout(cfg.ready_timeout_s):
                while True:
                    view = await self._get_sandbox(sandbox_id, "waiting for the sandbox to start")
                    if _booted(view):
                        return
                    await asyncio.sleep(delay)
                    delay = min(delay * 1.5, MAX_POLL_DELAY_S)
        except TimeoutError:
            raise SandboxUnavailable(
                f"the sandbox was not ready after {cfg.ready_timeout_s:g} s (status "
                f"{view.get('status', '?')}, setup {view.get('setup_status', '?')}); "
                "try again, or raise BUDDY_READY_TIMEOUT_S if the setup command is slow."
            ) from None

    async def _get_sandbox(self, sandbox_id: str, what: str) -> dict[str, Any]:
        response = await self.http.request(
            "GET", self.http.sandbox_url(sandbox_id), scope="sandbox", what=what, idempotent=True
        )
        return self.http.json_of(response, what)

    async def _delete_quietly(self, sandbox_id: str) -> None:
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_S):
                await self.delete(sandbox_id)
        except (BotError, TimeoutError) as exc:
            log.warning("could not delete Buddy sandbox %s: %s", sandbox_id, exc)

    async def _remove_identifier(self, identifier: str) -> None:
        """Delete the sandbox made under `identifier`, if there is one (best effort)."""
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_S):
                sandbox_id = await self._find_identifier(identifier)
                if sandbox_id:
                    await self.delete(sandbox_id)
        except (BotError, TimeoutError) as exc:
            log.warning("could not check for a Buddy sandbox named %s: %s", identifier, exc)

    async def _find_identifier(self, identifier: str) -> str | None:
        """Identifier -> id through /identifiers; else by listing (older servers lack it)."""
        params = {"sandbox": identifier, **({"project": p} if (p := self.config.project) else {})}
        with contextlib.suppress(BotError):
            response = await self.http.request(
                "GET",
                self.http.workspace_url("identifiers"),
                params=params,
                scope="project",
                what="looking up a sandbox",
                idempotent=True,
            )
            found = self.http.json_of(response, "looking up a sandbox").get("sandbox_id")
            if isinstance(found, str) and found:
                return found
        response = await self.http.request(
            "GET",
            self.http.workspace_url("sandboxes"),
            params=self.http.scope_params(),
            scope="project",
            what="listing sandboxes",
            idempotent=True,
        )
        for item in self.http.json_of(response, "listing sandboxes").get("sandboxes") or []:
            if isinstance(item, dict) and item.get("identifier") == identifier:
                return str(item.get("id") or "") or None
        return None


def _booted(view: dict[str, Any]) -> bool:
    setup, status = view.get("setup_status"), view.get("status")
    if setup == "FAILED":
        raise SandboxUnavailable(f"the sandbox's setup commands failed{_boot_tail(view)}")
    if setup == "STALE":
        raise SandboxUnavailable("the sandbox's setup commands were changed and not applied")
    if status == "FAILED":
        raise SandboxUnavailable(f"the sandbox failed to start{_boot_tail(view)}")
    return setup == "SUCCESS" and status == "RUNNING"


# -- sandbox --


class BuddySandbox:
    """One Buddy sandbox, addressed by its id."""

    def __init__(self, provider: BuddyProvider, sandbox_id: str) -> None:
        self.id = sandbox_id
        self._provider = provider
        self._http = provider.http
        self._config = provider.config
        self._destroyed = False
        self._gone = False
        self._killed: set[str] = set()
        self._started: dict[str, float] = {}
        self._dirs: set[str] = set()  # folders known to exist (upload parents)

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        script = run_script(language, code, timeout_s)
        async with self._guard():
            command_id = await self._post_command(script)
            return await self._collect(command_id, timeout_s)

    async def start_command(self, language: Language, code: str) -> str:
        script = run_script(language, code, COMMAND_MAX_S)
        async with self._guard():
            return await self._post_command(script)

    async def command_state(self, command_id: str) -> CommandState:
        """Status first, then the log: a finished status means the log is complete."""
        async with self._guard():
            view = await self._get_command(command_id)
            capture = _Capture()
            await self._read_logs(command_id, capture, follow=False)
        duration = self._duration(command_id, view)
        if view.get("status") not in FINISHED:
            return CommandState(command_id, True, capture.result("ok", None, duration))
        killed = command_id in self._killed
        status, code = exec_status(_exit_code(view), duration, COMMAND_MAX_S, killed=killed)
        return CommandState(command_id, False, capture.result(status, code, duration))

    async def kill_command(self, command_id: str) -> None:
        async with self._guard():
            view = await self._get_command(command_id)
            if view.get("status") in FINISHED:
                return
            self._killed.add(command_id)
            await self._terminate(command_id)
            await self._wait_finished(command_id, limit_s=KILL_WAIT_S)

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        target = sandbox_path(path, writable=True)
        if target == WORK_DIR:
            raise SandboxPathError(f"{path} is a folder; give a file path under it")
        async with self._guard():
            await self._make_parents(target)
            counter = _Counter()
            boundary = multipart_boundary()
            body = multipart_body(posixpath.basename(target), counter.through(chunks), boundary)
            try:
                await self._http.request(
                    "POST",
                    self._http.sandbox_url(self.id, "content", "upload", encode_path(target)),
                    content=body,
                    headers={"Content-Type": multipart_content_type(boundary)},
                    timeouts=STREAM_TIMEOUT,
                    replayable=False,  # the chunks cannot be read twice
                    scope="path",
                    subject=path,
                    what=f"uploading {path}",
                )
            except BaseException:
                self._dirs.clear()  # a folder may have been removed since it was checked
                raise
        return counter.total

    def download(self, path: str) -> AsyncIterator[bytes]:
        target = sandbox_path(path)
        self._check_usable()
        return self._download(path, target)

    async def list_dir(self, path: str) -> list[FileEntry]:
        target = sandbox_path(path)
        async with self._guard():
            response = await self._http.request(
                "GET",
                self._http.sandbox_url(self.id, "content", encode_path(target)),
                scope="path",
                subject=path,
                what=f"listing {path}",
                idempotent=True,
            )
        contents = self._http.json_of(response, f"listing {path}").get("contents") or []
        return parse_listing(contents, target, path)

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        try:
            await self._provider.delete(self.id)
        except BaseException:
            self._destroyed = False  # still there: a later destroy may succeed
            raise
        self._provider.forget(self.id)

    # -- internals --

    def _check_usable(self) -> None:
        if self._destroyed:
            raise SandboxUnavailable(f"sandbox {self.id} was destroyed")
        if self._gone:
            raise SandboxGone(GONE_MESSAGE)
        if self._http.closed:
            raise SandboxUnavailable("the Buddy sandbox provider is closed")

    @contextlib.asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """Check the sandbox is usable; tell a missing path or command from a vanished
        sandbox (Buddy answers 404 for both), and remember a vanished one."""
        self._check_usable()
        try:
            yield
        except SandboxGone:
            self._gone = True
            raise
        except (CommandNotFound, SandboxPathError):
            if await self._vanished():
                self._gone = True
                raise SandboxGone(GONE_MESSAGE) from None
            raise

    async def _vanished(self) -> bool:
        try:
            await self._http.request(
                "GET",
                self._http.sandbox_url(self.id),
                scope="sandbox",
                what="checking the sandbox",
                idempotent=True,
            )
        except SandboxGone:
            return True
        except BotError:
            return False  # cannot tell: the original error stands
        return False

    async def _post_command(self, script: str) -> str:
        """Start a BASH command. Never resent (it would run twice); a 429 is waited out, as
        a refused request did not run."""
        what = "starting a command"
        try:
            response = await self._http.request(
                "POST",
                self._http.sandbox_url(self.id, "commands"),
                json={"command": script, "runtime": "BASH"},
                timeouts=COMMAND_TIMEOUT,
                scope="sandbox",
                what=what,
            )
            command_id = self._http.json_of(response, what).get("id")
        except OutcomeUnknown as exc:
            raise SandboxError(f"the command may or may not have run: {exc}") from None
        except asyncio.CancelledError:
            await self._provider.shielded(self._terminate_matching(script))
            raise
        if not isinstance(command_id, str) or not command_id:
            raise SandboxError("the command may or may not have run: Buddy did not give its id")
        self._started[command_id] = time.monotonic()
        return command_id

    async def _collect(self, command_id: str, timeout_s: float) -> ExecResult:
        """Output and result of a run; past the limit plus a grace the client kills it."""
        capture = _Capture()
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout_s + CLIENT_GRACE_S):
                view = await self._follow(command_id, capture)
        except TimeoutError:
            await self._terminate_quietly(command_id)
            return capture.result("timeout", None, time.monotonic() - started)
        except asyncio.CancelledError:
            await self._provider.shielded(self._terminate_quietly(command_id))
            raise
        except SandboxUnavailable:
            raise
        except BotError:
            await self._terminate_quietly(command_id)
            raise
        elapsed = time.monotonic() - started
        killed = command_id in self._killed
        status, code = exec_status(_exit_code(view), elapsed, timeout_s, killed=killed)
        return capture.result(status, code, elapsed)

    async def _follow(self, command_id: str, capture: _Capture) -> dict[str, Any]:
        """Stream the log to its end, then read the final status. If the stream broke, or
        ended long before the status did, the stored log is read again from the start."""
        clean = await self._read_logs(command_id, capture, follow=True)
        view, waited = await self._wait_finished(command_id)
        if not clean or waited > FINISH_PATIENCE_S:
            fresh = _Capture()
            if await self._read_logs(command_id, fresh, follow=False):
                capture.stdout, capture.stderr = fresh.stdout, fresh.stderr
        return view

    async def _read_logs(self, command_id: str, capture: _Capture, *, follow: bool) -> bool:
        """Feed the command's log into `capture`; False if the stream broke off."""
        what = "reading the command's output"
        clean = True
        try:
            async with self._http.stream(
                self._http.sandbox_url(self.id, "commands", _segment(command_id), "logs"),
                params={"follow": "true"} if follow else None,
                accept_type="application/jsonl",
                # a followed log is quiet while the code is; the stored log is not
                timeouts=STREAM_TIMEOUT if follow else DEFAULT_TIMEOUT,
                scope="command",
                subject=command_id,
                what=what,
            ) as response:
                async for chunk in self._http.chunks(response, what):
                    capture.parser.feed(chunk)
        except StreamInterrupted as exc:
            log.info("Buddy log stream of command %s broke: %s", command_id, exc)
            clean = False
        capture.parser.close()
        return clean

    async def _wait_finished(
        self, command_id: str, limit_s: float | None = None
    ) -> tuple[dict[str, Any], float]:
        """The command's view once finished (or after `limit_s`), and how long that took.
        Right after its log ends a command may still say INPROGRESS for a moment."""
        started = time.monotonic()
        delay = self._config.poll_interval_s
        while True:
            view = await self._get_command(command_id)
            waited = time.monotonic() - started
            if view.get("status") in FINISHED or (limit_s is not None and waited >= limit_s):
                return view, waited
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, MAX_POLL_DELAY_S)

    async def _get_command(self, command_id: str) -> dict[str, Any]:
        what = f"reading command {command_id}"
        response = await self._http.request(
            "GET",
            self._http.sandbox_url(self.id, "commands", _segment(command_id)),
            scope="command",
            subject=command_id,
            what=what,
            idempotent=True,
        )
        return self._http.json_of(response, what)

    async def _terminate(self, command_id: str) -> None:
        """POST terminate, up to KILL_ATTEMPTS times unless the command ended meanwhile."""
        url = self._http.sandbox_url(self.id, "commands", _segment(command_id), "terminate")
        failure: SandboxError | None = None
        for attempt in range(KILL_ATTEMPTS):
            try:
                await self._http.request(
                    "POST", url, scope="command", subject=command_id, what="stopping a command"
                )
                return
            except (SandboxUnavailable, CommandNotFound):
                raise
            except SandboxError as exc:
                failure = exc
            view = await self._get_command(command_id)
            if view.get("status") in FINISHED:
                return
            await asyncio.sleep(self._config.retry_base_delay_s * 2**attempt)
        raise SandboxError(f"could not stop command {command_id}; it may still run: {failure}")

    async def _terminate_quietly(self, command_id: str) -> None:
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_S):
                await self._terminate(command_id)
        except (BotError, TimeoutError) as exc:
            log.warning("could not stop Buddy command %s: %s", command_id, exc)

    async def _terminate_matching(self, script: str) -> None:
        """After a cancelled POST: find the command by its (unique) text and stop it."""
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_S):
                response = await self._http.request(
                    "GET",
                    self._http.sandbox_url(self.id, "commands"),
                    scope="sandbox",
                    what="listing commands",
                    idempotent=True,
                )
                commands = self._http.json_of(response, "listing commands").get("commands")
                for item in commands or []:
                    if isinstance(item, dict) and item.get("command") == script:
                        await self._terminate(str(item.get("id")))
        except (BotError, TimeoutError) as exc:
            log.warning("could not stop a cancelled command in sandbox %s: %s", self.id, exc)

    def _duration(self, command_id: str, view: dict[str, Any]) -> float:
        start, finish = _timestamp(view.get("start_date")), _timestamp(view.get("finish_date"))
        if start is not None and finish is not None:
            return max(0.0, finish - start)
        if command_id in self._started:
            return time.monotonic() - self._started[command_id]
        return max(0.0, time.time() - start) if start is not None else 0.0

    async def _make_parents(self, target: str) -> None:
        """Create the folders between /buddy/work and `target`, top down (409: exists)."""
        relative = posixpath.relpath(posixpath.dirname(target), WORK_DIR)
        folder = WORK_DIR
        for part in [] if relative == "." else relative.split("/"):
            folder = f"{folder}/{part}"
            if folder in self._dirs:
                continue
            await self._http.request(
                "POST",
                self._http.sandbox_url(self.id, "content", encode_path(folder)),
                json={},
                accept=(409,),
                idempotent=True,  # a repeat answers 409, which is success here
                scope="path",
                subject=folder,
                what=f"creating folder {folder}",
            )
            self._dirs.add(folder)

    async def _download(self, path: str, target: str) -> AsyncIterator[bytes]:
        """Stream a file; a connection that breaks before the first byte is reopened."""
        url = self._http.sandbox_url(self.id, "download", encode_path(target))
        what = f"downloading {path}"
        async with self._guard():
            for attempt in range(READ_ATTEMPTS):
                sent = 0
                try:
                    async with self._http.stream(
                        url, scope="path", subject=path, what=what
                    ) as response:
                        _check_is_file(response, target, path)
                        async for chunk in self._http.chunks(response, what):
                            sent += len(chunk)
                            yield chunk
                    return
                except StreamInterrupted:
                    if sent or attempt == READ_ATTEMPTS - 1:
                        raise
                await asyncio.sleep(self._config.retry_base_delay_s * 2**attempt)


def _segment(value: str) -> str:
    return quote(value, safe="")


def _check_is_file(response: httpx.Response, target: str, shown: str) -> None:
    """Buddy sends a folder as a tar.gz archive; the local backend refuses, and so do we."""
    match = ARCHIVE_RE.search(response.headers.get("content-disposition", ""))
    name = match.group(1).strip() if match else ""
    archive = name.endswith((".tar.gz", ".tgz"))
    if archive and not posixpath.basename(target).endswith((".tar.gz", ".tgz")):
        raise SandboxPathError(f"{shown} is not a regular file")
