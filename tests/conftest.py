from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest

from bot.sandbox.base import SandboxSpec
from bot.sandbox.local import LocalProvider, LocalSandbox
from tests.leftovers import SANDBOX_ROOTS, survivors
from tests.redis_server import redis_url
from tests.support import local_provider_at

LEFTOVER_GRACE_S = 5.0  # a sandbox killed by the last test may take a moment to go


@pytest.fixture
def sandbox_root() -> Iterator[Path]:
    """A sandbox root the unprivileged sandbox uid can reach.

    When tests run as root each sandbox runs as a uid of its own, and bwrap (running as it)
    must be able to walk to the folders it mounts; pytest's tmp_path sits under a 0700
    folder, so it cannot be used here.
    """
    root = Path(tempfile.mkdtemp(prefix="sandbox-root-"))
    root.chmod(0o711)
    SANDBOX_ROOTS.append(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def local_provider(sandbox_root: Path) -> AsyncIterator[LocalProvider]:
    provider = local_provider_at(sandbox_root)
    yield provider
    await provider.close()


@pytest.fixture
async def local_sandbox(local_provider: LocalProvider) -> AsyncIterator[LocalSandbox]:
    sandbox = await local_provider.create(SandboxSpec(session_key="test"))
    yield sandbox
    await sandbox.destroy()


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy for clients that talk to the fakes on loopback."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=["sqlite", "redis"])
async def store_backend(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """Run the test on each store: the sandbox backend that goes with it and the settings
    that choose it. SQLite with local sandboxes; Redis (a private server) with Buddy's, as
    replicas sharing a Redis need sandboxes every replica can reach."""
    if request.param == "sqlite":
        yield "local", {}
        return
    async with redis_url() as url:
        yield "buddy", {"redis_url": url}


@pytest.fixture(params=["local", "buddy"])
def backend(request: pytest.FixtureRequest) -> str:
    """Run the test on each sandbox backend (Buddy against the fake Buddy API)."""
    return request.param


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The suite fails when a sandbox process of its own outlives it."""
    left = survivors(SANDBOX_ROOTS, LEFTOVER_GRACE_S)
    if left:
        listed = "\n".join(f"  pid {pid}: {cmd[:300]}" for pid, cmd in left)
        print(f"\nSandbox processes outlived the suite:\n{listed}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failure's report parses the test's source; CPython 3.11's AST converter keeps one
    depth counter for all threads (python/cpython#106905), so a parse in another thread at
    that moment raises SystemError and takes the worker down with it. The report is made
    again: the clash is of one moment."""
    try:
        return (yield)
    except SystemError as exc:
        if "recursion depth mismatch" not in str(exc):
            raise
        for _ in range(3):
            with contextlib.suppress(SystemError):
                return pytest.TestReport.from_item_and_call(item, call)
        raise
