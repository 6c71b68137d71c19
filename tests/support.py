"""Shared test plumbing: a runtime wired to the fakes on loopback and a recording view."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from bot.compose import Runtime
from bot.run_events import Event, RunFailed, RunFinished, ToolCallFinished, ToolCallStarted
from bot.sandbox.local import LocalProvider
from bot.settings import Settings
from bot.settings.sandbox import DEFAULT_UID_BASE
from bot.sql.config import Scope
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.buddy import FakeBuddy

DATA = Path(__file__).parent / "data"
POPULATION_CSV = DATA / "population_2000_2010_2020.csv"

# Each xdist worker's sandboxes run as uids of their own: the uid lock is per sandbox root,
# and sandboxes of two workers sharing a uid would share its process cap.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WORKER_UID_BASE = DEFAULT_UID_BASE + (1_000 * int(_WORKER[2:]) if _WORKER.startswith("gw") else 0)


def local_provider_at(root: Path, *args: Any, **options: Any) -> LocalProvider:
    """A local sandbox provider under `root`, with this worker's sandbox uids."""
    return LocalProvider(root, *args, uid_base=WORKER_UID_BASE, **options)


def settings_for(base_url: str, root: Path, **overrides: Any) -> Settings:
    """Settings that ignore the developer's environment and .env file."""
    values: dict[str, Any] = {
        "anthropic_api_key": "sk-ant-test-secret",
        "anthropic_base_url": base_url,
        "anthropic_max_retries": 2,
        "sandbox_backend": "local",
        "sandbox_root": root,
        "sandbox_uid_base": WORKER_UID_BASE,
        "tool_timeout_s": 20,
        # the kernel starts on the first call, as it did: a warm-up in every test's sandbox
        # would cost the suite minutes (the tests of the warm-up ask for it)
        "kernel_warm_imports": "",
        "model_retry_delay_s": 0.01,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def runtime_for(
    base_url: str, root: Path, *, scope: Scope | None = None, **overrides: Any
) -> Runtime:
    """`scope`: which SQL connections a session may use (none by default)."""
    return Runtime.from_settings(settings_for(base_url, root, **overrides), scope=scope)


def buddy_settings(api_url: str) -> dict[str, Any]:
    """Settings that point the Buddy backend at a fake Buddy API."""
    return {
        "sandbox_backend": "buddy",
        "buddy_token": "buddy-test-token",
        "buddy_workspace": "acme",
        "buddy_project": "analytics",
        "buddy_api_url": api_url,
        "buddy_retry_delay_s": 0.01,
    }


@asynccontextmanager
async def runtime_on(
    backend: str, model_url: str, root: Path, *, scope: Scope | None = None, **overrides: Any
) -> AsyncIterator[Runtime]:
    """A runtime on the local backend, or on the Buddy backend against a fake Buddy."""
    if backend == "local":
        runtime = runtime_for(model_url, root, scope=scope, **overrides)
        try:
            yield runtime
        finally:
            await runtime.close()
        return
    async with FakeBuddy(root, boot_delay_s=0.05) as fake:
        settings = {**buddy_settings(fake.base_url), **overrides}
        runtime = runtime_for(model_url, root, scope=scope, **settings)
        try:
            yield runtime
        finally:
            await runtime.close()
        assert not fake.sandboxes, "a Buddy sandbox was left behind"


def matplotlib_in_sandbox() -> bool:
    """Whether the sandbox's python3 (the system's) has matplotlib, which charts need."""
    found = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], capture_output=True)
    return found.returncode == 0


class Recorder:
    """A view that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def started(self) -> list[ToolCallStarted]:
        return self.of(ToolCallStarted)

    @property
    def finished(self) -> list[ToolCallFinished]:
        return self.of(ToolCallFinished)

    @property
    def final(self) -> RunFinished | RunFailed:
        return [e for e in self.events if isinstance(e, RunFinished | RunFailed)][-1]


async def file_chunks(path: Path, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(size):
            yield chunk


@contextmanager
def in_thread(make: Callable[[], Any]) -> Iterator[Any]:
    """A fake server (an async context manager) on an event loop of its own, for code that
    runs its own loop (`bot.cli.main`); yields the entered server. What the server raises on
    exit (a script's failed assertion) is raised here, in the test."""
    ready, state = threading.Event(), {}

    async def serve() -> None:
        async with make() as fake:
            state.update(fake=fake, stop=asyncio.Event(), loop=asyncio.get_running_loop())
            ready.set()
            await state["stop"].wait()

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:  # handed to the test's thread
            state["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield state["fake"]
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(10)
        if "error" in state:
            raise state["error"]  # the script's error explains the test's


def model_in_thread(script: Callable) -> Any:
    """The fake Messages API on a loop of its own."""
    return in_thread(lambda: FakeAnthropic(script))


CHECKOUT = Path(__file__).resolve().parents[1]


def settings_env(settings: Settings, **extra: Any) -> dict[str, str]:
    """The settings as the environment variables a fresh bot process reads; the process
    imports this checkout's `bot` (an installed copy may be another checkout's)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "ANTHROPIC_", "BUDDY_", "SANDBOX_"))
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), env.get("PYTHONPATH")]))
    for name, value in {**settings.model_dump(), **extra}.items():
        if value is not None:
            value = value.get_secret_value() if isinstance(value, SecretStr) else value
            env[name.upper()] = str(value)
    return env
