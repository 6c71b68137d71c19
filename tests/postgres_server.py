"""A private PostgreSQL for tests: its own cluster in a temporary folder, on a free loopback
port, run as a non-root user (initdb and pg_ctl refuse root), stopped when the test is done.
Never a system-wide server.

A cluster is made once per worker (initdb, then the seed: the population table, a writable
owner and a read-only role) and copied for each test, which then starts its own server on
its own copy: a test can break its database without touching another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.redis_server import free_port
from tests.support import POPULATION_CSV

ANALYST = "analyst"
ANALYST_PASSWORD = "pg-Secret-4f9c2e71b8"  # long enough for the scrubber to know it
OWNER = "shop_owner"
DATABASE = "shop"
RUN_AS = "postgres"  # the user the Debian package makes

SEED = f"""
CREATE ROLE {OWNER} LOGIN;
CREATE DATABASE {DATABASE} OWNER {OWNER};
\\connect {DATABASE}
SET ROLE {OWNER};
CREATE TABLE population (country_name text, country_code text, year int, value bigint);
\\copy population FROM '{POPULATION_CSV}' WITH (FORMAT csv, HEADER true)
CREATE TABLE secrets_log (id int, note text);
INSERT INTO secrets_log VALUES (1, 'untouched');
CREATE SEQUENCE counter;
ANALYZE population;
RESET ROLE;
CREATE ROLE {ANALYST} LOGIN PASSWORD '{ANALYST_PASSWORD}' CONNECTION LIMIT 20;
REVOKE CONNECT, TEMPORARY ON DATABASE {DATABASE} FROM PUBLIC;
GRANT CONNECT ON DATABASE {DATABASE} TO {ANALYST};
GRANT USAGE ON SCHEMA public TO {ANALYST};
GRANT SELECT ON population TO {ANALYST};
GRANT USAGE ON SEQUENCE counter TO {ANALYST};
REVOKE EXECUTE ON FUNCTION lo_create(oid), lo_from_bytea(oid, bytea) FROM PUBLIC;
"""


def bin_dir() -> Path:
    found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
    if found.returncode == 0 and Path(found.stdout.strip(), "initdb").exists():
        return Path(found.stdout.strip())
    for version in sorted(Path("/usr/lib/postgresql").glob("*"), reverse=True):
        if (version / "bin" / "initdb").exists():
            return version / "bin"
    raise RuntimeError("PostgreSQL's server programs are missing (Debian package postgresql)")


def _as_server_user(argv: list[str]) -> list[str]:
    """initdb and pg_ctl refuse root: as root, run them as the postgres user."""
    if os.geteuid() != 0:
        return argv
    return ["setpriv", f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--init-groups", *argv]


def _owned(folder: Path) -> None:
    if os.geteuid() == 0:
        user = pwd.getpwnam(RUN_AS)
        for path in (folder, *folder.rglob("*")):
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


@cache
def _template() -> Path:
    """A seeded, stopped cluster, made once per worker process."""
    root = Path(tempfile.mkdtemp(prefix="pg-template-"))
    os.chmod(root, 0o755)
    _owned(root)
    data = root / "data"
    initdb = [str(bin_dir() / "initdb"), "-D", str(data), "-U", "postgres", "--no-sync"]
    initdb += ["--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8"]
    subprocess.run(_as_server_user(initdb), check=True, capture_output=True)
    server = _Cluster(root, data, free_port())
    server.start_sync()
    try:
        psql = ["psql", "-h", str(root), "-p", str(server.port), "-U", "postgres"]
        subprocess.run(
            [*psql, "-v", "ON_ERROR_STOP=1", "-q", "-d", "postgres"],
            input=SEED,
            text=True,
            check=True,
            capture_output=True,
        )
    finally:
        server.stop_sync()
    return data


@dataclass
class _Cluster:
    folder: Path
    data: Path
    port: int

    def _ctl(self, *args: str) -> list[str]:
        return _as_server_user([str(bin_dir() / "pg_ctl"), "-D", str(self.data), *args])

    def start_args(self) -> list[str]:
        options = f"-k {self.folder} -p {self.port} -c listen_addresses=127.0.0.1"
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        return self._ctl("-l", str(self.folder / "log"), "-w", "-o", options, "start")

    def start_sync(self) -> None:
        subprocess.run(self.start_args(), check=True, capture_output=True)

    def stop_sync(self) -> None:
        subprocess.run(self._ctl("-m", "fast", "-w", "stop"), capture_output=True)


class PostgresServer:
    """One running server on a copy of the seeded cluster."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cluster = _Cluster(folder, folder / "data", 0)

    @property
    def port(self) -> int:
        return self._cluster.port

    @property
    def url(self) -> str:
        """The analyst's URL, without its password (a connection entry's `url`)."""
        return f"postgresql://{ANALYST}@127.0.0.1:{self.port}/{DATABASE}"

    async def start(self) -> None:
        for _ in range(5):  # a free port may be taken before the server binds it
            self._cluster.port = self._cluster.port or free_port()
            if await _run(self._cluster.start_args()) == 0:
                return
            self._cluster.port = 0
        raise RuntimeError(f"postgres did not start: {self.log_tail()}")

    async def stop(self, mode: str = "fast") -> None:
        await _run(self._cluster._ctl("-m", mode, "-w", "stop"))

    async def psql(self, sql: str, *, database: str = DATABASE) -> str:
        """Run `sql` as the superuser over the socket; its output, unaligned."""
        argv = ["psql", "-h", str(self.folder), "-p", str(self.port), "-U", "postgres"]
        argv += ["-d", database, "-At", "-v", "ON_ERROR_STOP=1", "-c", sql]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await proc.communicate()
        if proc.returncode:
            raise RuntimeError(err.decode())
        return out.decode().strip()

    async def until(self, sql: str, expected: str, timeout: float = 30) -> None:
        """Poll `sql` (server state: nothing to wait on) until it answers `expected`."""
        async with asyncio.timeout(timeout):
            while True:
                if await self.psql(sql) == expected:
                    return
                await asyncio.sleep(0.05)

    def log_tail(self) -> str:
        log = self.folder / "log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"


async def _run(argv: list[str]) -> int:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    return await proc.wait()


@contextlib.asynccontextmanager
async def postgres_server() -> AsyncIterator[PostgresServer]:
    """A running private server on its own copy of the seeded cluster, removed afterwards."""
    template = await asyncio.to_thread(_template)
    folder = Path(tempfile.mkdtemp(prefix="pg-"))
    os.chmod(folder, 0o755)
    await asyncio.to_thread(shutil.copytree, template, folder / "data", symlinks=True)
    await asyncio.to_thread(_owned, folder)
    (folder / "data" / "postmaster.pid").unlink(missing_ok=True)
    server = PostgresServer(folder)
    try:
        await server.start()
        yield server
    finally:
        await server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)
