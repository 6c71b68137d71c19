"""A session: one conversation with its own sandbox, files and model history."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from bot.agent.events import Reporter, RunFailed, RunFinished
from bot.agent.loop import Agent
from bot.agent.prompt import DataFile, session_context
from bot.agent.tools import SandboxGetter
from bot.errors import SandboxPathError
from bot.sandbox.base import (
    OUT_DIR,
    REPORT_PATH,
    UPLOADS_DIR,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
)
from bot.sessions.files import Tap, safe_name

AgentFactory = Callable[[SandboxGetter], Agent]


class Session:
    """Turns run one at a time; the sandbox is created early, in parallel with other work."""

    def __init__(
        self,
        key: str,
        provider: SandboxProvider,
        make_agent: AgentFactory,
        *,
        repo_url: str | None = None,
        tags: tuple[str, ...] = (),
    ) -> None:
        self.key = key
        self.repo_url = repo_url
        self.files: list[DataFile] = []
        self._spec = SandboxSpec(session_key=key, repo_url=repo_url, tags=tags)
        self._provider = provider
        self._sandbox_task: asyncio.Task[Sandbox] | None = None
        self._turn_lock = asyncio.Lock()
        self.agent = make_agent(self.sandbox)

    def start(self) -> None:
        """Begin creating the sandbox now; callers await `sandbox()` when they need it."""
        if self._sandbox_task is None:
            self._sandbox_task = asyncio.create_task(self._provider.create(self._spec))

    async def sandbox(self) -> Sandbox:
        self.start()
        assert self._sandbox_task is not None
        return await asyncio.shield(self._sandbox_task)

    @property
    def sandbox_id(self) -> str | None:
        """The id of this session's sandbox once it exists."""
        task = self._sandbox_task
        if task is None or not task.done() or task.cancelled() or task.exception():
            return None
        return task.result().id

    async def sandbox_if_ready(self) -> Sandbox | None:
        """The sandbox if its creation was started and succeeded, else None."""
        task = self._sandbox_task
        if task is None:
            return None
        await asyncio.wait([task])
        return None if task.cancelled() or task.exception() else task.result()

    async def add_file(self, name: str, chunks: AsyncIterator[bytes]) -> DataFile:
        """Stream a file into the uploads folder under a safe, unique name."""
        taken = {f.path.rsplit("/", 1)[-1] for f in self.files}
        path = f"{UPLOADS_DIR}/{safe_name(name, taken)}"
        tap = Tap()
        sandbox = await self.sandbox()
        await sandbox.upload(path, tap.through(chunks))
        data_file = DataFile(path=path, size=tap.size, header=tap.header)
        self.files.append(data_file)
        return data_file

    async def ask(self, question: str, reporter: Reporter) -> RunFinished | RunFailed:
        async with self._turn_lock:
            context = session_context(self.files, self.repo_url, [])
            return await self.agent.run(question, context, reporter)

    async def save_outputs(self, dest: Path) -> list[Path]:
        """Copy report.md and the files in out/ to a local folder; returns what was saved."""
        sandbox = await self.sandbox()
        await asyncio.to_thread(dest.mkdir, parents=True, exist_ok=True)
        sources = [REPORT_PATH]
        with contextlib.suppress(SandboxPathError):
            entries = await sandbox.list_dir(OUT_DIR)
            sources += [f"{OUT_DIR}/{e.name}" for e in entries if e.kind == "file"]
        saved = []
        for source in sources:
            target = dest / safe_name(source.rsplit("/", 1)[-1], set())
            with contextlib.suppress(SandboxPathError):
                await _save(sandbox.download(source), target)
                saved.append(target)
        return saved

    async def close(self, *, destroy: bool = True) -> None:
        """Destroy the sandbox (or keep it). A creation still under way is waited for, not
        cancelled, so a sandbox that was about to exist is not leaked."""
        sandbox = await self.sandbox_if_ready()
        self._sandbox_task = None
        if sandbox and destroy:
            await sandbox.destroy()


async def _save(chunks: AsyncIterator[bytes], target: Path) -> None:
    """Write a stream to a local file without blocking the event loop."""
    partial = target.with_name(target.name + ".part")
    handle = await asyncio.to_thread(partial.open, "wb")
    try:
        async for chunk in chunks:
            await asyncio.to_thread(handle.write, chunk)
    finally:
        await asyncio.to_thread(handle.close)
    await asyncio.to_thread(partial.replace, target)
