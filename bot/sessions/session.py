"""A session: one conversation with its own sandbox, files and model history.

The sandbox can be destroyed when the conversation goes quiet and made again later: the
history and the list of files survive, and the files are fetched again from their source.
Or it is stopped (by the bot, or by its service after a time without activity) and started
again on the next question, with its files as they were but none of its processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shlex
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bot.agent.loop import Agent
from bot.agent.prompt import session_context
from bot.agent.tools import SandboxGetter
from bot.datacard import CardTap
from bot.datacard.data_file import DataFile
from bot.errors import BotError, SandboxGone, SandboxPathError
from bot.run_events import AgentView, Event, RunFailed, RunFinished
from bot.sandbox.base import (
    OUT_DIR,
    UPLOADS_DIR,
    WORK_DIR,
    FileEntry,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
)
from bot.sessions.events import Outputs, SandboxWaiting
from bot.sessions.files import FileOpener, Spooled, Tap, read_spool, safe_name, spool
from bot.sessions.intake import Prepared, card_spooled, prepare
from bot.sessions.outputs import (
    DEFAULT_CAPS,
    LeftOut,
    OutputBudget,
    OutputCaps,
    OutputFile,
    write_stream,
)
from bot.sessions.sandbox_changes import RESTORED, STOPPED, fresh_sandbox, not_posted
from bot.store.base import StoreError

log = logging.getLogger(__name__)

AgentFactory = Callable[[SandboxGetter], Agent]
# What the front end adds to a run's system prompt for its question (channel notes).
ExtraContext = Callable[[str], Awaitable[str]]
# A sandbox made ahead (the warm pool), or None.
Claim = Callable[[], Awaitable[Sandbox | None]]
# Keeps a sandbox's disk before it goes (its id in, the snapshot's id or None out).
Keep = Callable[[str], Awaitable[str | None]]
DEFAULT_SPOOL_DIR = Path(tempfile.gettempdir()) / "slack-code-interpreter" / "spool"


@dataclass(frozen=True)
class Intake:
    """A file the session took in, and how to fetch it again for a fresh sandbox."""

    name: str
    file: DataFile
    opener: FileOpener
    sha256: str = ""


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
        spool_dir: Path = DEFAULT_SPOOL_DIR,
        output_caps: OutputCaps = DEFAULT_CAPS,
        on_sandbox: Callable[[str | None], Awaitable[None]] | None = None,
        extra_context: ExtraContext | None = None,
        claim: Claim | None = None,
        warm_imports: tuple[str, ...] = (),
    ) -> None:
        """`warm_imports`: what a new sandbox's kernel imports at once (none: it is not
        started ahead)."""
        self._warm_imports = warm_imports
        self.key = key
        # a thread with a repository to fetch boots its own (the fetch is set at creation)
        self._claim = claim if repo_url is None else None
        self._extra_context = extra_context
        self.repo_url = repo_url
        self.intakes: list[Intake] = []
        self._spec = SandboxSpec(session_key=key, repo_url=repo_url, tags=tags)
        self._provider = provider
        self._spool_dir = spool_dir
        self._output_caps = output_caps
        self._sandbox_task: asyncio.Task[Sandbox] | None = None
        self._uploads: list[asyncio.Task[None]] = []
        self._sandboxes_made = 0
        self._notes: list[str] = []
        self._turn_lock = asyncio.Lock()
        self._taking_in = 0  # files on their way in now
        self.agent = make_agent(self.sandbox)
        # Told the sandbox id as soon as one exists (or None when it is gone), to record it.
        self._on_sandbox = on_sandbox
        self._background: asyncio.Future[None] | None = None
        self._reporter: AgentView | None = None  # the run's, while one goes
        self._warming: asyncio.Task[None] | None = None  # the new sandbox's kernel imports
        self._snapshot: str | None = None  # what the next sandbox is made from, if anything
        self._restoring = False  # the sandbox being made comes from a snapshot
        self._ready_at = 0.0  # when the current sandbox was made (monotonic)
        self._needed_at: float | None = None  # when the current run first needed it

    @property
    def files(self) -> list[DataFile]:
        return [intake.file for intake in self.intakes]

    def start(self) -> None:
        """Begin creating the sandbox now; callers await `sandbox()` when they need it.

        After a teardown this makes a fresh sandbox and queues the files to be taken in again.
        """
        if self._sandbox_task is not None:
            return
        self._sandbox_task = asyncio.create_task(self._create())
        self._sandbox_task.add_done_callback(self._report_sandbox)
        self._sandboxes_made += 1
        self._restoring = self._snapshot is not None
        if self._sandboxes_made > 1 and not self._restoring:
            self._take_in_again()

    def _take_in_again(self) -> None:
        """A fresh sandbox after an earlier one: the files come again, and the model is told."""
        self._uploads += [self._upload_later(i.file.path, _again(i)) for i in self.intakes]
        self._notes.append(fresh_sandbox(self.files))

    def attach(self, sandbox: Sandbox, intakes: list[Intake]) -> None:
        """Take over a sandbox that already holds these files (after a restart)."""
        future: asyncio.Future[Sandbox] = asyncio.get_running_loop().create_future()
        future.set_result(sandbox)
        # a finished future stands for the task that made it: only awaited and asked done()
        self._sandbox_task = future  # type: ignore[assignment]
        self._sandboxes_made = 1
        self.intakes = list(intakes)

    def remember(self, intakes: list[Intake], snapshot_id: str | None = None) -> None:
        """Files taken in before a restart whose sandbox is gone: fetched again on start,
        unless the sandbox is made again from its `snapshot_id`, files and all."""
        self.intakes = list(intakes)
        self._sandboxes_made = 1  # the next sandbox is a fresh one, and the model is told
        self._snapshot = snapshot_id

    async def _create(self) -> Sandbox:
        """A new sandbox; its kernel then starts and makes its imports in the background,
        while the model thinks."""
        began = time.monotonic()
        sandbox = await self._restored() or await self._claimed()
        sandbox = sandbox or await self._provider.create(self._spec)
        self._ready_at = time.monotonic()
        if self._warm_imports:
            self._warming = asyncio.create_task(self._warm(sandbox, began))
        return sandbox

    async def _restored(self) -> Sandbox | None:
        """The sandbox made again from the thread's snapshot, and the model told; None (the
        files then taken in again) if there is none or it could not be restored."""
        snapshot_id, self._snapshot = self._snapshot, None
        if snapshot_id is None:
            return None
        try:
            sandbox = await self._provider.create(
                dataclasses.replace(self._spec, snapshot_id=snapshot_id)
            )
        except BotError as exc:
            log.warning("%s: restoring snapshot %s failed: %s", self.key, snapshot_id, exc)
            self._take_in_again()
            return None
        self._notes.append(RESTORED)
        return sandbox

    async def _claimed(self) -> Sandbox | None:
        if self._claim is None:
            return None
        try:
            return await self._claim()
        except (BotError, StoreError) as exc:  # a shortcut: without it, a sandbox is made
            log.warning("no warm sandbox could be taken: %s", exc)
            return None

    async def _warm(self, sandbox: Sandbox, began: float) -> None:
        running = self._ready_at - began
        try:
            up = await sandbox.warm(self._warm_imports)
        except BotError as exc:
            log.info("the kernel of sandbox %s was not warmed: %s", sandbox.id, exc)
            return
        ready = time.monotonic() - began
        log.info(
            "sandbox %s running after %.2fs, its kernel %s after %.2fs",
            sandbox.id, running, "ready" if up else "not warmed", ready,
            extra={"sandbox_running_s": running, "kernel_ready_s": ready if up else None},
        )  # fmt: skip

    async def sandbox(self) -> Sandbox:
        """The sandbox, once it exists and every file queued for it has arrived."""
        self.start()
        assert self._sandbox_task is not None
        if self._reporter is not None and self._needed_at is None:
            self._needed_at = time.monotonic()
        await self._tell_if_held_back(self._sandbox_task)
        sandbox = await asyncio.shield(self._sandbox_task)
        while self._uploads:
            pending = list(self._uploads)
            try:
                await asyncio.shield(asyncio.gather(*pending))
            finally:
                self._uploads = [task for task in self._uploads if not task.done()]
        return sandbox

    async def _tell_if_held_back(self, task: asyncio.Task[Sandbox]) -> None:
        """A new sandbox waiting for one of the MAX_SANDBOXES slots: the run says so, once."""
        while self._reporter is not None and not task.done():
            if held_back := self._provider.waiting_for_slot(self.key):
                # the reporter takes the engine's events as well as the model loop's
                await self._reporter(SandboxWaiting(held_back))  # type: ignore[arg-type]
                return
            await asyncio.wait({task}, timeout=0.25)

    @property
    def in_use(self) -> bool:
        """Whether a turn goes, or a file is on its way in: its sandbox is not to go now."""
        return self._turn_lock.locked() or self._taking_in > 0

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

    async def add_file(self, name: str, opener: FileOpener) -> Intake:
        """Take a file in under a safe, unique name in the uploads folder, profiled into a
        data card on the way.

        Its kind is recognised by its content (`intake.prepare`). Text data with the sandbox up
        streams straight into it; while the sandbox boots, or for a workbook or Parquet file
        (checked and profiled whole), it is spooled to local disk first, so the model can be
        told about it at once; it reaches the sandbox as soon as it can.
        """
        self._taking_in += 1  # its sandbox does not go to make room meanwhile
        try:
            return await self._add_file(name, opener)
        finally:
            self._taking_in -= 1

    async def _add_file(self, name: str, opener: FileOpener) -> Intake:
        prepared = await prepare(name, opener())
        self.start()  # only for a file its bytes say is data: a photo makes no sandbox
        taken = {intake.file.path.rsplit("/", 1)[-1] for intake in self.intakes}
        path = f"{UPLOADS_DIR}/{safe_name(prepared.name, taken)}"
        ready = self.sandbox_id is not None and not self._uploads and not prepared.spooled
        intake = await (self._stream_in if ready else self._spool_in)(prepared, path, opener)
        self.intakes.append(intake)
        return intake

    async def _stream_in(self, prepared: Prepared, path: str, opener: FileOpener) -> Intake:
        tap, sandbox = Tap(CardTap(_base(path), prepared.kind)), await self.sandbox()
        try:
            await sandbox.upload(path, tap.through(prepared.chunks))
        except BaseException:
            # A file refused or cut off part-way must not stay behind, half written.
            with contextlib.suppress(Exception):
                await asyncio.shield(sandbox.run_code("bash", f"rm -f {shlex.quote(path)}", 30))
            raise
        data = DataFile(path, tap.size, tap.header, await tap.cards())
        return Intake(prepared.name, data, opener, tap.sha256)

    async def _spool_in(self, prepared: Prepared, path: str, opener: FileOpener) -> Intake:
        card = None if prepared.spooled else CardTap(_base(path), prepared.kind)
        spooled = await spool(prepared.chunks, self._spool_dir, card)
        cards, header = spooled.cards, spooled.header
        if prepared.spooled:
            try:  # checked whole before a byte of it reaches the sandbox
                cards, header = (
                    tuple(await card_spooled(prepared.kind, spooled.path, _base(path))),
                    "",
                )
            except BaseException:
                await asyncio.to_thread(spooled.path.unlink, missing_ok=True)
                raise
        self._uploads.append(self._upload_later(path, read_spool(spooled), spooled))
        data = DataFile(path, spooled.size, header, cards)
        return Intake(prepared.name, data, opener, spooled.sha256)

    async def ask(
        self, question: str, view: AgentView, budget_usd: float | None = None
    ) -> RunFinished | RunFailed:
        async with self._turn_lock:
            self.start()
            if self._restoring and (made := self._sandbox_task) is not None:
                await asyncio.wait([made])  # the files came back or not: known once made
            await self._wake()
            notes, self._notes = self._notes, []
            context = session_context(self.files, self.repo_url)
            if self._extra_context is not None and (extra := await self._extra_context(question)):
                context = f"{context}\n\n{extra}"
            self._reporter, self._needed_at = view, None
            try:
                ended = await self.agent.run(
                    question, context, self._timed(view), budget_usd, notes=notes
                )
            finally:
                self._reporter = None
            return self._with_wait(ended) if isinstance(ended, RunFinished) else ended

    def _timed(self, view: AgentView) -> AgentView:
        """`view`, told at the end how long the run waited for its sandbox to be made."""

        async def timed(event: Event) -> None:
            await view(self._with_wait(event) if isinstance(event, RunFinished) else event)

        return timed

    def _with_wait(self, finished: RunFinished) -> RunFinished:
        needed = self._needed_at
        waited = 0.0 if needed is None else max(0.0, self._ready_at - needed)
        return dataclasses.replace(finished, sandbox_wait_s=waited)

    async def outputs(self) -> AsyncIterator[OutputFile]:
        """report.md (if written), then each file in out/, by safe name: its byte stream
        within the output caps, or why it was left out (its listed, apparent size). Links
        and other non-files are not posted; the model is told with its next question."""
        sandbox = await self.sandbox()
        budget = OutputBudget(self._output_caps)
        work = {entry.name: entry for entry in await sandbox.list_dir(WORK_DIR)}
        sources = self._deliverables([work["report.md"]] if "report.md" in work else [], WORK_DIR)
        with contextlib.suppress(SandboxPathError):
            entries = await sandbox.list_dir(OUT_DIR)
            sources += self._deliverables([e for e in entries if e.kind != "dir"], OUT_DIR)
        for source, size in sources:
            name = safe_name(source.rsplit("/", 1)[-1], set())
            if why := budget.refusal(size):
                yield OutputFile(name, None, why)
                continue
            chunks = await _opened(sandbox.download(source))
            if chunks is None:  # it changed since the listing (into a link, say)
                self._notes.append(not_posted(source, "other"))
                continue
            yield OutputFile(name, budget.capped(chunks))

    def _deliverables(self, entries: list[FileEntry], folder: str) -> list[tuple[str, int]]:
        """The paths and sizes of the regular files among `entries`; the others noted for
        the model."""
        paths = []
        for entry in entries:
            if entry.kind == "file":
                paths.append((f"{folder}/{entry.name}", entry.size))
            else:
                self._notes.append(not_posted(f"{folder}/{entry.name}", entry.kind))
        return paths

    async def suspend(self, before: Keep | None = None) -> str | None:
        """Destroy the sandbox but keep the conversation; the next `start` makes a new one.
        A question asked meanwhile waits for it (the turn is taken), then goes on afresh.
        `before` is given the sandbox's id first (to snapshot it); what it returns is
        returned."""
        async with self._turn_lock:
            kept = None
            if before is not None and (sandbox_id := self.sandbox_id) is not None:
                kept = await before(sandbox_id)
            await self.close()
            return kept

    async def stop_sandbox(self) -> bool:
        """Stop the sandbox but keep it, files and all; the next question starts it again
        (asked meanwhile, it waits for the stop). False if there is no sandbox to stop."""
        async with self._turn_lock:
            sandbox = await self.sandbox_if_ready()
            if sandbox is None:
                return False
            await sandbox.stop()
            return True

    async def close(self, *, destroy: bool = True) -> None:
        """Destroy the sandbox (or keep it). A creation still under way is waited for, not
        cancelled, so a sandbox that was about to exist is not leaked. The sandbox is let
        go of first: whatever needs one meanwhile (a file coming in) makes a new one."""
        task, self._sandbox_task = self._sandbox_task, None
        uploads, self._uploads = self._uploads, []
        for upload in uploads:
            upload.cancel()
        await asyncio.gather(*uploads, return_exceptions=True)
        if task is not None:
            await asyncio.wait([task])
        # after the creation: a sandbox made meanwhile has just begun warming its kernel
        warming, self._warming = self._warming, None
        if warming is not None:
            warming.cancel()
            await asyncio.gather(warming, return_exceptions=True)
        if task is None or task.cancelled() or task.exception() or not destroy:
            return
        await task.result().destroy()
        if self._on_sandbox is not None and self._sandbox_task is None:
            await self._on_sandbox(None)  # unless a new one is on its way, and recorded

    async def _wake(self) -> None:
        """Before a question: a sandbox that was stopped is started again and the model told
        what survived; one that vanished meanwhile is replaced by a fresh one."""
        if self.sandbox_id is None:
            return  # none yet, or still being made
        assert self._sandbox_task is not None
        try:
            if await self._sandbox_task.result().wake():
                self._notes.append(STOPPED)
        except SandboxGone:
            self._sandbox_task = None
            self.start()  # the files are taken in again, and the model told

    def _report_sandbox(self, task: asyncio.Task[Sandbox]) -> None:
        if self._on_sandbox is not None and not task.cancelled() and not task.exception():
            self._background = asyncio.ensure_future(self._on_sandbox(task.result().id))

    def _upload_later(
        self, path: str, chunks: AsyncIterator[bytes], spooled: Spooled | None = None
    ) -> asyncio.Task[None]:
        async def upload() -> None:
            try:
                assert self._sandbox_task is not None
                sandbox = await asyncio.shield(self._sandbox_task)
                await sandbox.upload(path, chunks)
            finally:
                if spooled is not None:
                    await asyncio.to_thread(spooled.path.unlink, missing_ok=True)

        return asyncio.create_task(upload())


def _base(path: str) -> str:
    """The file's safe name in the sandbox: what its card calls it."""
    return path.rsplit("/", 1)[-1]


async def _opened(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes] | None:
    """`chunks` with its first chunk read, so a path that is no regular file any more
    fails here (None) rather than in the middle of posting."""
    try:
        first = await anext(chunks)
    except StopAsyncIteration:
        first = b""
    except SandboxPathError:
        return None
    return _prepend(first, chunks)


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if first:
        yield first
    async for chunk in rest:
        yield chunk


async def _again(intake: Intake) -> AsyncIterator[bytes]:
    """A file's bytes fetched again for a fresh sandbox, unpacked as they were the first time."""
    prepared = await prepare(intake.name, intake.opener())
    async for chunk in prepared.chunks:
        yield chunk


async def save_outputs(
    files: Outputs, dest: Path, left_out: list[tuple[str, str]] | None = None
) -> list[Path]:
    """Copy report.md and the files in out/ to a local folder, streamed and within the
    output caps; returns what was saved. What was not, and why, goes to `left_out`."""
    saved = []
    await asyncio.to_thread(dest.mkdir, parents=True, exist_ok=True)
    async for file in files():
        try:
            if file.chunks is None:
                raise LeftOut(file.why)
            await _save(file.chunks, dest / file.name)
            saved.append(dest / file.name)
        except LeftOut as exc:
            if left_out is not None:
                left_out.append((file.name, str(exc)))
        except SandboxPathError:
            pass
    return saved


async def _save(chunks: AsyncIterator[bytes], target: Path) -> None:
    """Write a stream to a local file, whole or not at all (never half-written)."""
    partial = target.with_name(target.name + ".part")
    await write_stream(chunks, partial)
    await asyncio.to_thread(partial.replace, target)
