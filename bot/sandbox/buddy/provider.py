"""Buddy.Works backend: each sandbox is a Buddy sandbox VM driven over the REST API.

The VM is created in the configured project with /buddy/work (uploads/, out/) made by its
first-boot commands and the optional repository fetched into /buddy/data. Code runs as
tracked BASH commands whose JSONL logs are streamed back (`bot.sandbox.buddy.commands`);
files move through the content, upload and download endpoints (`bot.sandbox.buddy.files`).
Request bodies, scripts and the reading of Buddy's views are in `bot.sandbox.buddy.scripts`;
all HTTP, retries and error messages in `bot.sandbox.buddy.http`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.errors import (
    BotError,
    ConfigError,
    SandboxError,
    SandboxGone,
    SandboxPathError,
    SandboxUnavailable,
)
from bot.sandbox.base import (
    CommandState,
    ExecResult,
    FileEntry,
    Language,
    SandboxInfo,
    SandboxSpec,
    destroyed,
    sandbox_path,
    upload_path,
)
from bot.sandbox.buddy.commands import (
    CLEANUP_TIMEOUT_S,
    COMMAND_MAX_S,
    MAX_POLL_DELAY_S,
    BuddyCommands,
)
from bot.sandbox.buddy.files import BuddyFiles
from bot.sandbox.buddy.http import (
    GONE_MESSAGE,
    REQUEST_TIMEOUT_S,
    BuddyHttp,
    CommandNotFound,
    OutcomeUnknown,
    api_url_for,
)
from bot.sandbox.buddy.scripts import (
    IDENTIFIER_PREFIX,
    booted,
    create_body,
    exec_status,
    first_boot_script,
    is_ours,
    make_identifier,
    parse_listing,
    parse_timestamp,
    run_script,
)

if TYPE_CHECKING:
    from bot.settings import Settings

__all__ = [
    "IDENTIFIER_PREFIX",
    "BuddyConfig",
    "BuddyProvider",
    "BuddySandbox",
    "create_body",
    "exec_status",
    "first_boot_script",
    "make_identifier",
    "parse_listing",
    "run_script",
]

log = logging.getLogger(__name__)

LIST_CONCURRENCY = 4


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
    request_timeout_s: float = REQUEST_TIMEOUT_S  # see http.request_timeouts

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


# -- provider --


class BuddyProvider:
    """Creates Buddy sandboxes in one workspace/project over one shared HTTP client."""

    def __init__(self, config: BuddyConfig) -> None:
        self.config = config
        self.http = BuddyHttp(
            config.api_url,
            config.token,
            workspace=config.workspace,
            project=config.project,
            retry_base_delay_s=config.retry_base_delay_s,
            timeout_s=config.request_timeout_s,
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

    async def attach(self, sandbox_id: str) -> BuddySandbox | None:
        """A sandbox made by an earlier process, if it is still running and ready. A stopped
        one (Buddy's inactivity timeout) counts as gone: its processes are gone anyway."""
        if sandbox_id in self._sandboxes:
            return self._sandboxes[sandbox_id]
        try:
            view = await self._get_sandbox(sandbox_id, "checking a sandbox")
        except SandboxGone:
            return None
        if not booted(view):
            return None
        sandbox = self._sandboxes[sandbox_id] = BuddySandbox(self, sandbox_id)
        return sandbox

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        """This bot's sandboxes carrying `tag`. The list shows no tags (and has no filter),
        so each candidate is read; only identifiers this backend makes are candidates."""
        candidates = [
            item["id"]
            for item in await self._list()
            if isinstance(item.get("id"), str) and is_ours(item.get("identifier"))
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
            return SandboxInfo(sandbox_id, parse_timestamp(view.get("create_date")))

        found = await asyncio.gather(*(tagged(sandbox_id) for sandbox_id in candidates))
        return [info for info in found if info is not None]

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
                timing="create",
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
                    if booted(view):
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

    async def _list(self) -> list[dict[str, Any]]:
        """The project's sandboxes as listed (id views: no tags)."""
        response = await self.http.request(
            "GET",
            self.http.workspace_url("sandboxes"),
            params=self.http.scope_params(),
            scope="project",
            what="listing sandboxes",
            idempotent=True,
        )
        items = self.http.json_of(response, "listing sandboxes").get("sandboxes") or []
        return [item for item in items if isinstance(item, dict)]

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
        for item in await self._list():
            if item.get("identifier") == identifier:
                return str(item.get("id") or "") or None
        return None


# -- sandbox --


class BuddySandbox:
    """One Buddy sandbox, addressed by its id."""

    def __init__(self, provider: BuddyProvider, sandbox_id: str) -> None:
        self.id = sandbox_id
        self._provider = provider
        self._http = provider.http
        self._commands = BuddyCommands(
            provider.http,
            sandbox_id,
            shield=provider.shielded,
            poll_interval_s=provider.config.poll_interval_s,
            retry_base_delay_s=provider.config.retry_base_delay_s,
        )
        self._files = BuddyFiles(
            provider.http, sandbox_id, retry_base_delay_s=provider.config.retry_base_delay_s
        )
        self._destroyed = False
        self._gone = False

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        script = run_script(language, code, timeout_s)
        async with self._guard():
            command_id = await self._commands.start(script)
            return await self._commands.collect(command_id, timeout_s)

    async def start_command(self, language: Language, code: str) -> str:
        script = run_script(language, code, COMMAND_MAX_S)
        async with self._guard():
            return await self._commands.start(script)

    async def command_state(self, command_id: str) -> CommandState:
        async with self._guard():
            return await self._commands.state(command_id)

    async def kill_command(self, command_id: str) -> None:
        async with self._guard():
            await self._commands.kill(command_id)

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        target = upload_path(path)
        async with self._guard():
            return await self._files.upload(target, path, chunks)

    def download(self, path: str) -> AsyncIterator[bytes]:
        target = sandbox_path(path)
        self._check_usable()
        return self._download(path, target)

    async def list_dir(self, path: str) -> list[FileEntry]:
        target = sandbox_path(path)
        async with self._guard():
            contents = await self._files.contents(target, path)
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
            raise destroyed(self.id)
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

    async def _download(self, path: str, target: str) -> AsyncIterator[bytes]:
        async with self._guard():
            async for chunk in self._files.download(target, path):
                yield chunk
