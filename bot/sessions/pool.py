"""The warm pool (WARM_SANDBOXES): sandboxes booted, set up and with their kernel's imports
made before any thread asks, so a new thread's first cell does not wait for a boot.

The store holds the members; a thread takes one with one atomic claim, so two replicas
never take the same. One replica at a time refills (its `turn`), within the provider's
room (MAX_SANDBOXES). A member this process made is handed over as it is, kernel warm; one
made by another replica, or before a restart, is attached and its kernel warmed again.

Nothing leaks on a crash: a sandbox made but not yet recorded is young, and the orphan
sweeper spares only what is recorded (`owned`) once it is old enough; a recorded member
whose sandbox has gone is forgotten when a claim finds it gone. A taken member stays owned
by the pool's record for CLAIMED_GRACE_S, the time its thread has to record it as its own.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence

from bot.errors import BotError
from bot.sandbox.base import Sandbox, SandboxProvider, SandboxSpec
from bot.sessions.periodic import Periodic
from bot.store.base import PoolRecord, PoolStore

log = logging.getLogger(__name__)

POOL_TAG = "warm-pool"  # beside the bot's tag, on each member
CLAIMED_GRACE_S = 600.0
FILL_INTERVAL_S = 5.0
KEEP_AWAKE_LIMIT_S = 30.0


class WarmPool:
    def __init__(
        self,
        provider: SandboxProvider,
        store: PoolStore,
        size: int,
        *,
        tag: str,
        interval_s: float = FILL_INTERVAL_S,
        keep_awake_s: float | None = None,
        warm_imports: Sequence[str] = (),
        turn: Callable[[], Awaitable[bool]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`keep_awake_s`: how often a free member runs a trivial command, where the
        provider stops a sandbox left idle (Buddy); None where it does not. `warm_imports`:
        what each member's kernel imports once started."""
        self._warm_imports = tuple(warm_imports)
        self._provider, self._store, self.size = provider, store, size
        self._tags = (tag, POOL_TAG)
        self._clock = clock
        self._keep_awake_s = keep_awake_s
        self._live: dict[str, Sandbox] = {}  # members made here: their kernels are warm
        self._active: dict[str, float] = {}  # when each free member last ran something
        self._job = Periodic("the warm pool", self.fill, interval_s, turn)

    async def claim(self) -> Sandbox | None:
        """A member for a new thread, or None when none is free (the thread boots its own)."""
        while (sandbox_id := await self._store.pool_claim(self._clock())) is not None:
            self._job.soon()
            sandbox = self._live.pop(sandbox_id, None) or await self._attach(sandbox_id)
            if sandbox is not None:
                log.info("a thread took warm sandbox %s", sandbox_id)
                return sandbox
        return None

    async def _attach(self, sandbox_id: str) -> Sandbox | None:
        try:
            sandbox = await self._provider.attach(sandbox_id)
            if sandbox is not None:
                # its kernel was another process's: the first cell starts one, as for a new
                # sandbox (no note of lost state), warmed meanwhile by the session
                await sandbox.restart_kernel()
                return sandbox
        except BotError as exc:
            log.warning("warm sandbox %s could not be taken: %s", sandbox_id, exc)
        await self._store.pool_forget(sandbox_id)
        return None

    async def fill(self) -> int:
        """Make members until `size` are free (as room allows); returns how many it made.
        Taken members are forgotten once their grace is over."""
        records, now = await self._store.pool(), self._clock()
        for record in records:
            if record.claimed_at is not None and now - record.claimed_at > CLAIMED_GRACE_S:
                await self._store.pool_forget(record.sandbox_id)
        free = sum(record.claimed_at is None for record in records)
        await self._keep_awake([r for r in records if r.claimed_at is None], now)
        while free > self.size and await self._drop_one():
            free -= 1  # WARM_SANDBOXES was lowered
        made = 0
        while free + made < self.size and self._provider.has_room():
            await self._add()
            made += 1
        return made

    async def _keep_awake(self, free: list[PoolRecord], now: float) -> None:
        """A trivial command in each free member idle for `keep_awake_s`: Buddy stops a
        sandbox after its inactivity timeout, and a stopped member would boot again."""
        every = self._keep_awake_s
        if every is None:
            return
        self._active = {r.sandbox_id: self._active.get(r.sandbox_id, r.added_at) for r in free}
        for record in free:
            if now - self._active[record.sandbox_id] < every:
                continue
            sandbox = self._live.get(record.sandbox_id)
            try:
                sandbox = sandbox or await self._provider.attach(record.sandbox_id)
                if sandbox is not None:
                    await sandbox.run_code("bash", "true", KEEP_AWAKE_LIMIT_S)
            except BotError as exc:
                log.info("warm sandbox %s was not kept awake: %s", record.sandbox_id, exc)
            self._active[record.sandbox_id] = now

    async def _drop_one(self) -> bool:
        if (sandbox_id := await self._store.pool_claim(self._clock())) is None:
            return False
        self._live.pop(sandbox_id, None)
        try:
            await self._provider.destroy_id(sandbox_id)
        except BotError as exc:  # left to the orphan sweep
            log.warning("could not destroy warm sandbox %s: %s", sandbox_id, exc)
        await self._store.pool_forget(sandbox_id)
        return True

    async def _add(self) -> None:
        spec = SandboxSpec(session_key=f"pool-{secrets.token_hex(4)}", tags=self._tags)
        sandbox = await self._provider.create(spec)
        try:
            await sandbox.warm(self._warm_imports)
        except BotError as exc:  # still a booted sandbox: the thread's first cell starts one
            log.info("warm sandbox %s has no warm kernel: %s", sandbox.id, exc)
        self._live[sandbox.id] = sandbox
        await self._store.pool_add(sandbox.id, self._clock())

    async def owned(self) -> set[str]:
        """The members the orphan sweeper is to leave: free ones, and those taken lately."""
        now = self._clock()
        return {
            r.sandbox_id
            for r in await self._store.pool()
            if r.claimed_at is None or now - r.claimed_at <= CLAIMED_GRACE_S
        }

    def start(self) -> None:
        """Fill now, then keep it filled, in the background."""
        if self.size > 0:
            self._job.start()

    async def stop(self) -> None:
        """Stop refilling. The members stay, recorded, for the next start or another replica."""
        await self._job.stop()
