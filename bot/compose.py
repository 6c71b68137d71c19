"""The composition root: settings → store → sandbox provider → model client → engine.

Both front ends build what they run here, handing in how they show a thread (`view_for`)
and how they fetch a stored file again (`opener_for`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anthropic

from bot.agent.model_client import build_client
from bot.coord import Coordinator, LocalCoordinator
from bot.coord.redis import RedisCoordinator
from bot.folders import PRIVATE, own_folder, sandbox_root_mode
from bot.networks import parse_networks, parse_ports
from bot.sandbox.base import SandboxProvider, Snapshots
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from bot.sandbox.limits import Limits
from bot.sandbox.local import LocalProvider
from bot.sandbox.repo_net import FetchRules
from bot.scrub import Scrubber
from bot.sessions.budget import Budgets
from bot.sessions.engine import Engine
from bot.sessions.events import Observer, ViewFor
from bot.sessions.factory import ContextFor, DefinitionFor, SessionFactory
from bot.sessions.lifecycle import Upkeep
from bot.sessions.orphans import OrphanSweeper
from bot.sessions.pool import WarmPool
from bot.sessions.pruning import Pruner, Retention, redis_ttl_s
from bot.sessions.retry import Backoff
from bot.sessions.snapshots import SnapshotKeeper
from bot.sessions.thread_table import OpenerFor
from bot.settings import Settings
from bot.sql.config import Scope, load_connections
from bot.sql.databases import Databases
from bot.store.base import Store
from bot.store.redis_store import RedisStore
from bot.store.sqlite import SqliteStore


def build_provider(settings: Settings) -> SandboxProvider:
    if settings.backend == "buddy":
        return BuddyProvider(BuddyConfig.from_settings(settings))
    root = own_folder(settings.sandbox_root, sandbox_root_mode(), "SANDBOX_ROOT")
    return LocalProvider(
        root,
        limits_from(settings),
        uid_base=settings.sandbox_uid_base,
        max_sandboxes=settings.max_sandboxes,
        wait_s=settings.sandbox_wait_s,
        fetch_rules=repo_rules(settings),
    )


def repo_rules(settings: Settings) -> FetchRules:
    """What a repository fetch may reach (addresses, ports) and take in, as the settings
    say: the local fetch and every front end's check of a URL read the same rules."""
    return FetchRules(
        parse_networks(settings.repo_allowed_addresses),
        settings.repo_max_bytes,
        ports=parse_ports(settings.repo_allowed_ports),
    )


def limits_from(settings: Settings) -> Limits:
    """The local sandbox's limits, as the settings give them."""
    return Limits(
        cpu_s=settings.sandbox_cpu_s,
        cpus=settings.sandbox_cpus,
        memory_bytes=settings.sandbox_process_memory_bytes,
        sandbox_memory_bytes=settings.sandbox_memory_bytes,
        processes=settings.sandbox_processes,
        file_size_bytes=settings.sandbox_file_bytes,
        open_files=settings.sandbox_open_files,
        disk_bytes=settings.sandbox_disk_bytes,
        output_bytes=settings.sandbox_output_bytes,
        command_max_s=settings.sandbox_command_max_s,
        max_commands=settings.sandbox_max_commands,
        max_files=settings.sandbox_max_files,
    )


def build_coordinator(settings: Settings) -> Coordinator:
    """How this process shares the work: with replicas over Redis, or alone."""
    if settings.redis_url:
        return RedisCoordinator(settings.redis_url, lease_s=settings.replica_lease_s)
    return LocalCoordinator()


def build_store(settings: Settings) -> Store:
    """Redis when REDIS_URL is set (replicas share it), else the local SQLite file."""
    if settings.redis_url:
        return RedisStore(settings.redis_url, ttl_s=redis_ttl_s(settings))
    return SqliteStore(settings.store_path)


@dataclass
class Runtime:
    """What a running bot holds once: settings, the model client, the sandbox provider, and
    the factory that makes sessions from them."""

    settings: Settings
    client: anthropic.AsyncAnthropic
    provider: SandboxProvider
    sessions: SessionFactory

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        provider: SandboxProvider | None = None,
        scope: Scope | None = None,
        context: ContextFor | None = None,
        definitions: DefinitionFor | None = None,
    ) -> Runtime:
        """`provider` replaces the one the settings describe (benchmarks bring their own);
        `scope` says which SQL connections a session may use (None: none); `context`, what
        the front end adds to each run's system prompt (channel notes). A bad
        connections file stops here, with one line naming the connection and field."""
        databases = Databases(load_connections(settings.connections_file))
        client = build_client(settings)
        own_folder(settings.spool_dir, PRIVATE, "SPOOL_DIR")
        provider = provider or build_provider(settings)
        sessions = SessionFactory(
            settings, client, provider, databases, scope or Scope(), context, definitions
        )
        return cls(settings, client, provider, sessions)

    @property
    def scrubber(self) -> Scrubber:
        return self.sessions.scrubber

    def engine(
        self,
        store: Store,
        view_for: ViewFor,
        opener_for: OpenerFor,
        *,
        coord: Coordinator | None = None,
        observers: Callable[[], Observer] | None = None,
    ) -> Engine:
        """`coord`: the replicas' leases, through which a thread held elsewhere is claimed
        before it is reaped (None: this process alone). `observers`: what hears every
        view's events first (metrics)."""
        s = self.settings
        return Engine(
            store,
            self.sessions,
            view_for,
            opener_for,
            claim=_claim_with(coord) if coord else None,
            release=coord.release if coord else None,
            observers=observers,
            budgets=Budgets.from_settings(s),
            upkeep=Upkeep(
                s.session_idle_timeout,
                s.session_idle_action,
                s.session_retain_s,
                s.run_repair_grace_s,
            ),
            end_retry=Backoff(s.run_end_attempts, s.run_end_retry_delay_s),
            keeper=self.snapshot_keeper(store),
        )

    def snapshot_keeper(self, store: Store) -> SnapshotKeeper | None:
        """What snapshots quiet threads' sandboxes (None: SESSION_IDLE_ACTION is not
        snapshot, or the provider keeps no snapshots)."""
        s = self.settings
        if s.session_idle_action != "snapshot" or not isinstance(self.provider, Snapshots):
            return None
        return SnapshotKeeper(
            self.provider, store, tag=s.sandbox_tag, max_kept=s.buddy_snapshots_max
        )

    def warm_pool(
        self, store: Store, turn: Callable[[], Awaitable[bool]] | None = None
    ) -> WarmPool | None:
        """The warm pool, new threads' sessions taking from it (None: WARM_SANDBOXES is 0).
        `turn`: whether this process refills it now (one replica at a time)."""
        s = self.settings
        if s.warm_sandboxes <= 0:
            return None
        # Buddy stops a sandbox idle for its timeout: a free member runs something before
        keep_awake_s = s.buddy_sandbox_timeout / 3 if s.backend == "buddy" else None
        pool = WarmPool(
            self.provider, store, s.warm_sandboxes, tag=s.sandbox_tag,
            keep_awake_s=keep_awake_s, turn=turn,
            warm_imports=s.warm_imports,
        )  # fmt: skip
        self.sessions.claim = pool.claim
        return pool

    def orphan_sweeper(
        self,
        engine: Engine,
        turn: Callable[[], Awaitable[bool]] | None = None,
        pool: WarmPool | None = None,
        keeper: SnapshotKeeper | None = None,
    ) -> OrphanSweeper:
        """`turn`: whether this process sweeps now (one replica at a time); `pool`'s
        members are left too; `keeper`'s snapshots no thread names are swept as well."""
        s = self.settings

        async def owned() -> set[str]:
            held = await engine.owned_sandbox_ids()
            return held | await pool.owned() if pool else held

        return OrphanSweeper(
            self.provider,
            s.sandbox_tag,
            owned,
            interval_s=s.orphan_sweep_interval_s,
            min_age_s=s.orphan_min_age_s,
            turn=turn,
            also=keeper.sweep if keeper else None,
        )

    def pruner(self, store: Store, turn: Callable[[], Awaitable[bool]] | None = None) -> Pruner:
        """Retention in the background; `turn`: whether this process prunes now."""
        s = self.settings
        retention = Retention.from_settings(s)
        return Pruner(store, retention, interval_s=s.prune_interval_s, turn=turn)

    async def close(self) -> None:
        await self.provider.close()
        await self.client.close()
        await self.sessions.databases.close()


def _claim_with(coord: Coordinator) -> Callable[[str], Awaitable[bool]]:
    async def claim(key: str) -> bool:
        return (await coord.claim(key))[1]

    return claim
