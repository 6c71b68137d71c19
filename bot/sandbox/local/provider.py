"""Making, finding and removing local sandboxes.

A sandbox is a host folder (see `folders`) whose `work/` and `data/` are mounted at
/buddy/work and /buddy/data. Files persist between calls; processes do not, except
detached commands and the Python kernel. Each bash or Node call starts its own isolated,
rlimited container (`bwrap`), Python cells go to the kernel's; the optional repository is
checked out by `git`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Mapping
from pathlib import Path

from bot.errors import SandboxError, SandboxUnavailable
from bot.sandbox.base import MakeRoom, SandboxInfo, SandboxSpec
from bot.sandbox.limits import Limits
from bot.sandbox.local import cgroups
from bot.sandbox.local.bwrap import Launcher, check_reachable, kill_containers_of
from bot.sandbox.local.folders import ID_PREFIX, ID_RE, make_folders, make_scratch, tagged
from bot.sandbox.local.git import git_clone
from bot.sandbox.local.hostfs import remove_tree
from bot.sandbox.local.programs import Programs
from bot.sandbox.local.sandbox import LocalSandbox
from bot.sandbox.local.slots import Slots
from bot.sandbox.local.uids import UidsExhausted, claim_uid, owner
from bot.sandbox.output import last_line
from bot.sandbox.repo_net import NO_RULES, FetchRules
from bot.settings.sandbox import DEFAULT_UID_BASE

log = logging.getLogger(__name__)


class LocalProvider:
    """Creates bubblewrap sandboxes whose folders live under `root`."""

    def __init__(
        self,
        root: Path,
        limits: Limits = Limits(),  # noqa: B008 - frozen dataclass, safe as a default
        *,
        sandbox_uid: int | None = None,
        uid_base: int = DEFAULT_UID_BASE,
        allowed_git_protocols: tuple[str, ...] = ("https",),
        fetch_rules: FetchRules = NO_RULES,
        interpreters: Mapping[str, str] | None = None,
        python_kernel: bool = True,
        network: bool = False,
        user_namespaces: bool = False,
        max_sandboxes: int | None = None,
        wait_s: float = 120.0,
        memory_cgroups: Path | None = None,
    ) -> None:
        # uid_base: the first of the host uids sandboxes run as, one each (as root, `uids`);
        # network, user_namespaces: see `isolation.static_bwrap_args` (tests only);
        # max_sandboxes (None: no cap) live at once, a new one waiting up to wait_s (`slots`);
        # memory_cgroups: where the sandboxes' memory cgroups go (by default the bot's own)
        self._launcher = Launcher(
            limits,
            sandbox_uid,
            uid_base=uid_base,
            network=network,
            user_namespaces=user_namespaces,
        )
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        uids = self._launcher.uids
        if uids is not None:
            check_reachable(self.root, uids if isinstance(uids, int) else uids.start)
        self.limits = limits
        self._git_protocols = allowed_git_protocols
        # The checkout lies in the session's folders: it may not take more than their quota.
        cap = min(fetch_rules.max_bytes, limits.disk_bytes)
        self._fetch_rules = dataclasses.replace(fetch_rules, max_bytes=cap)
        self._programs = Programs(interpreters)
        self._python_kernel = python_kernel  # False: Python runs as a process per call
        self._sandboxes: dict[str, LocalSandbox] = {}
        self.slots = Slots(max_sandboxes, wait_s)
        self._memory = None
        if self._launcher.uids is not None:
            self._memory = memory_cgroups or cgroups.memory_parent()
        if self._memory is None:
            log.info("no memory cgroups here: a local sandbox's memory is capped per process")
        self._cpu = cgroups.cpu_parent() if self._launcher.uids is not None else None
        if self._cpu is None:
            log.info("no cpu cgroups here: a local sandbox's CPU time is capped per call")
        self._probed = False
        self._closed = False

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        if self._closed:
            raise SandboxUnavailable("the local sandbox provider is closed")
        sandbox_id = ID_PREFIX + secrets.token_hex(6)
        home = self.root / sandbox_id
        await self.slots.take(spec.session_key)
        sandbox = self._sandboxes[sandbox_id] = self._sandbox(sandbox_id, home)
        try:
            sandbox.uid = await asyncio.to_thread(self._make_home, home, spec)
            await self._cgroups(sandbox)
            await self._probe(home, sandbox.uid)
            if spec.repo_url:
                await git_clone(
                    spec.repo_url, home / "data", self._git_protocols, self._fetch_rules
                )
        except BaseException:
            await sandbox.destroy()
            raise
        return sandbox

    def has_room(self) -> bool:
        return self.slots.has_room()

    def waiting_for_slot(self, session_key: str) -> int:
        return self.slots.holds_back(session_key)

    def on_full(self, make_room: MakeRoom) -> None:
        self.slots.make_room = make_room

    async def attach(self, sandbox_id: str) -> LocalSandbox | None:
        """A sandbox left by an earlier process: its folder is all there is to it."""
        if sandbox_id in self._sandboxes:
            return self._sandboxes[sandbox_id]
        home = self.root / sandbox_id
        if not ID_RE.fullmatch(sandbox_id) or not await asyncio.to_thread((home / "work").is_dir):
            return None
        uid = self._launcher.uids
        if isinstance(uid, range) and (uid := await asyncio.to_thread(owner, home, uid)) is None:
            return None  # not made by a provider like this one
        await asyncio.to_thread(kill_containers_of, home)
        await self.slots.take()
        sandbox = self._sandbox(sandbox_id, home, attached=True)
        sandbox.uid = uid
        try:
            await self._cgroups(sandbox)
        except BaseException:  # no sandbox came of it: its slot and cgroups go again
            self.slots.give_back()
            for cgroup in sandbox.cgroups:
                await asyncio.to_thread(cgroups.remove, cgroup)
            raise
        self._sandboxes[sandbox_id] = sandbox
        return sandbox

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        return await asyncio.to_thread(tagged, self.root, tag)

    async def destroy_id(self, sandbox_id: str) -> None:
        if not ID_RE.fullmatch(sandbox_id):
            raise SandboxError(f"{sandbox_id!r} is not a local sandbox id")
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is not None:
            await sandbox.destroy()
        else:  # left over from an earlier run
            await asyncio.to_thread(kill_containers_of, self.root / sandbox_id)
            await asyncio.to_thread(remove_tree, self.root / sandbox_id)
            for parent in filter(None, (self._memory, self._cpu)):
                await asyncio.to_thread(cgroups.remove, parent / f"{cgroups.PREFIX}{sandbox_id}")

    async def close(self) -> None:
        """Stop every process of this provider's sandboxes; their folders stay (their
        cgroups, empty now, go: an attach makes them again)."""
        self._closed = True
        sandboxes = list(self._sandboxes.values())
        await asyncio.gather(*(sb.stop_all() for sb in sandboxes))
        for cgroup in (c for sb in sandboxes for c in sb.cgroups):
            await asyncio.to_thread(cgroups.remove, cgroup)
        await self._launcher.cpu_watch.close()

    # -- internals --

    def _sandbox(self, sandbox_id: str, home: Path, *, attached: bool = False) -> LocalSandbox:
        """`attached`: made by an earlier process, whose kernel (if any) is gone."""
        return LocalSandbox(
            sandbox_id,
            home,
            launcher=self._launcher,
            programs=self._programs,
            forget=self._forget,
            slots=self.slots,
            python_kernel=self._python_kernel,
            attached=attached,
        )

    async def _cgroups(self, sandbox: LocalSandbox) -> None:
        """Its memory and cpu cgroups, where the host offers them."""
        name, uid = sandbox.id, sandbox.uid
        if self._memory is not None:
            limit = self.limits.sandbox_memory_bytes
            sandbox.cgroup = await asyncio.to_thread(cgroups.make, self._memory, name, limit, uid)
        if self._cpu is not None:
            cpus = self.limits.cpus
            sandbox.cpu_cgroup = await asyncio.to_thread(
                cgroups.make_cpu, self._cpu, name, cpus, uid
            )

    def _make_home(self, home: Path, spec: SandboxSpec) -> int | None:
        """Make the sandbox's folders, owned by the uid it will run as (returned)."""
        uids = self._launcher.uids
        if not isinstance(uids, range):
            make_folders(home, spec, uids)
            return uids
        try:
            return claim_uid(self.root, lambda uid: make_folders(home, spec, uid), uids)
        except UidsExhausted as exc:
            raise SandboxUnavailable(str(exc)) from None

    def _forget(self, sandbox_id: str) -> None:
        self._sandboxes.pop(sandbox_id, None)

    async def _probe(self, home: Path, uid: int | None) -> None:
        """Start one trivial sandbox so a host that cannot run bwrap fails at create time."""
        if self._probed:
            return
        scratch = await asyncio.to_thread(make_scratch, home, "probe", uid)
        container = await self._launcher.spawn(
            home, scratch, ["/bin/true"], stdout=asyncio.subprocess.DEVNULL, uid=uid
        )
        try:
            _, err = await container.proc.communicate()
        finally:
            container.close()
            await asyncio.to_thread(remove_tree, scratch)
        if container.proc.returncode != 0:
            raise SandboxUnavailable(
                f"bubblewrap cannot start a sandbox on this host: {last_line(err)} "
                "(bubblewrap 0.8 or newer and unprivileged user namespaces are needed)"
            )
        self._probed = True
