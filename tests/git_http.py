"""A smart-HTTP git server on loopback (`git http-backend` behind aiohttp), and a server
that answers every request with a redirect; both record who asked for what."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from types import TracebackType

from aiohttp import web

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def make_repo(root: Path, files: dict[str, bytes], commits: int = 2) -> Path:
    """A bare repository `root/repo.git` whose last commit holds `files`, after `commits - 1`
    earlier ones (so a shallow clone can be told from a full one)."""
    git = shutil.which("git")
    assert git, "git is needed for the fetch tests"
    source, bare = root / "source", root / "repo.git"
    source.mkdir(parents=True)
    env = {**os.environ, **GIT_ENV}

    def run(*args: str, cwd: Path = source) -> None:
        subprocess.run([git, *args], cwd=cwd, env=env, check=True, capture_output=True)

    run("init", "-q", "-b", "main")
    for n in range(commits):
        (source / "history.txt").write_text(f"commit {n}\n")
        if n == commits - 1:
            for name, data in files.items():
                (source / name).write_bytes(data)
        run("add", ".")
        run("commit", "-qm", f"commit {n}")
    run("clone", "-q", "--bare", str(source), str(bare), cwd=root)
    return bare


class Recorded:
    """Base: an aiohttp server on `host`, with the requests it got."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.requests: list[tuple[str, str]] = []  # (Host header, path with query)
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

    async def _record(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.headers.get("Host", ""), request.path_qs))
        return await self.handle(request)

    async def __aenter__(self) -> Recorded:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._record)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class GitHttpServer(Recorded):
    """Serves the bare repositories under `root` over git's smart HTTP protocol."""

    def __init__(self, root: Path, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self.root = root

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()  # aiohttp has undone any Content-Encoding
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "PATH_INFO": request.path,
            "QUERY_STRING": request.query_string,
            "REQUEST_METHOD": request.method,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),
            "REMOTE_ADDR": request.remote or "",
        }
        proc = await asyncio.create_subprocess_exec(
            "git", "http-backend", env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await proc.communicate(body)
        return _cgi_response(out)


def _cgi_response(out: bytes) -> web.Response:
    sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
    head, _, payload = out.partition(sep)
    status, headers = 200, {}
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            headers[name.strip()] = value.strip()
    return web.Response(status=status, body=payload, headers=headers)


class Redirector(Recorded):
    """Answers every request with a 302 to the same path on `target`."""

    def __init__(self, target: str, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self.target = target

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(self.target + request.path_qs)
