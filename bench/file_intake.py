"""Benchmark: taking a CSV from Slack into a sandbox, against a raw copy of the same bytes.

Run from the repository root: `.venv/bin/python -m bench.file_intake [--sizes 10,100,1000]`.

For each size (MB of 10^6 bytes, so 1 GB stays under the local sandbox's 1 GiB file size
limit; the CSVs are written once to a temporary folder) and each backend (local bubblewrap,
and Buddy against the fake Buddy API in a process of its own):

* intake: what the bot does with a file shared in a thread. `Session.add_file` with the
  Slack handler's opener (`checked(SlackFiles.stream(file), …)`) streams the download to
  the sandbox (with the sandbox up, the file streams straight in; only while it boots is
  it spooled first), then `await session.sandbox()` waits for anything still queued.
* raw: the same HTTP download streamed straight into `Sandbox.upload`, no spool.

Both run on a sandbox that is already up (made and awaited before the clock starts), so
the comparison is of the bytes' path only. Slack is a small aiohttp server on 127.0.0.1 in
the benchmark's own process: it checks the bot token like Slack and sends the file from
disk (sendfile). Each measured case runs in a fresh bot process built the way
`bot.compose` builds it, so its memory is the bot's alone. Memory is the RSS high-water
mark (VmHWM), reset through /proc/self/clear_refs just before the clock starts, minus the
RSS at that moment. Each case runs `--reps` times, raw and intake taking turns to go
first (this machine's disk and memory speeds drift); times are medians, memory the largest
growth seen. Expect about two minutes with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import hashlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench import CSV_HEADER, csv_rows, sandbox_root
from bench.servers import served
from bot.compose import Runtime
from bot.sandbox.base import UPLOADS_DIR
from bot.sessions.files import checked
from bot.slack.listen.files import SlackFiles
from tests.fakes.loopback import serve
from tests.support import buddy_settings, settings_for

REPO = str(Path(__file__).resolve().parents[1])
MB = 10**6
BOT_TOKEN = "xoxb-bench-file-intake"
TEAM = "T0BENCH01"
LOGIN_PAGE = "<!DOCTYPE html><html><body>Sign in to Slack</body></html>"
TARGET_RATIO = 0.5
TARGET_GROWTH_MB = 64
NO_MODEL = "http://127.0.0.1:9"  # the model is never called


# -- the CSV files


def write_csv(path: Path, size: int) -> str:
    """A CSV of exactly `size` bytes ending in a newline; returns its SHA-256."""
    header, rows = CSV_HEADER, csv_rows(0, 20_000)
    digest = hashlib.sha256()
    with path.open("wb") as handle:
        left = size
        for block in _blocks(header, rows):
            piece = block[:left]
            if len(piece) == left:
                piece = piece[:-1] + b"\n"
            handle.write(piece)
            digest.update(piece)
            left -= len(piece)
            if not left:
                break
    return digest.hexdigest()


def write_speed(folder: Path, size: int) -> float:
    """MB/s of writing a new file of `size` bytes here (it is deleted again).

    Context for the figures: on a virtual machine whose host backs memory lazily and takes
    freed memory back (a balloon with free page reporting), writes that only fill the page
    cache can still run at the speed of the host's page faults.
    """
    block, scratch = bytes(1 << 20), folder / "scratch"
    started = time.perf_counter()
    with scratch.open("wb") as handle:
        for _ in range(size // len(block)):
            handle.write(block)
    speed = size / MB / (time.perf_counter() - started)
    scratch.unlink()
    return speed


def _blocks(header: bytes, rows: bytes):
    yield header
    while True:
        yield rows


# -- a Slack file host: the token is checked, the file is sent from disk


def slack_file(base_url: str, file_id: str, path: Path) -> dict[str, Any]:
    """A Slack file object as `files.info` or a `file_share` event carries it."""
    prefix = f"{base_url}/files-pri/{TEAM}-{file_id}"
    return {
        "id": file_id,
        "name": path.name,
        "title": path.name,
        "mimetype": "text/csv",
        "filetype": "csv",
        "size": path.stat().st_size,
        "mode": "hosted",
        "url_private": f"{prefix}/{path.name}",
        "url_private_download": f"{prefix}/download/{path.name}",
    }


@contextlib.asynccontextmanager
async def slack_files_host(files: dict[str, Path]):
    """Serves `files` (by Slack file id) on 127.0.0.1; yields the base URL."""

    async def download(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            return web.Response(text=LOGIN_PAGE, content_type="text/html")  # as Slack does
        path = files.get(request.match_info["team_file"].rpartition("-")[2])
        if path is None:
            return web.Response(status=404, text=LOGIN_PAGE, content_type="text/html")
        return web.FileResponse(path, chunk_size=1 << 20, headers={"Content-Type": "text/csv"})

    app = web.Application()
    app.router.add_get("/files-pri/{team_file}/download/{name}", download)
    app.router.add_get("/files-pri/{team_file}/{name}", download)
    runner, base_url = await serve(app)
    try:
        yield base_url
    finally:
        await runner.cleanup()


# -- one case, in a bot process of its own


def rss_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} is not in /proc/self/status")


def reset_high_water() -> int:
    """Give freed heap back, reset VmHWM to the current RSS; returns that RSS (kB)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return rss_kb("VmRSS")


async def one_case(case: dict[str, Any]) -> dict[str, float]:
    """One measurement in this (fresh) bot process: times, CPU and peak RSS growth."""
    extra = buddy_settings(case["buddy_url"]) if case["backend"] == "buddy" else {}
    settings = settings_for(
        NO_MODEL,
        Path(case["root"]) / "sandboxes",
        spool_dir=Path(case["root"]) / "spool",
        slack_bot_token=BOT_TOKEN,
        slack_api_url=case["slack_url"] + "/api/",
        max_file_bytes=2 * case["size"],  # the bot's default (200 MiB) would refuse 1 GB
        **extra,
    )
    runtime = Runtime.from_settings(settings)
    http = aiohttp.ClientSession()  # as bot.slack.listen.app makes it
    files = SlackFiles(BOT_TOKEN, settings.slack_api_url, http)
    file, name = case["file"], case["file"]["name"]
    limit = settings.max_file_bytes
    try:
        session = runtime.sessions.new(f"bench-intake-{case['mode']}")
        sandbox = await session.sandbox()
        rss0 = reset_high_water()
        wall, cpu = time.perf_counter(), time.process_time()
        if case["mode"] == "intake":
            opener = lambda f=file: checked(files.stream(f), name, limit)  # noqa: E731
            intake = await session.add_file(name, opener)
            spooled, spool_cpu = time.perf_counter(), time.process_time()
            await session.sandbox()  # waits for the upload from the spool
            path, digest = intake.file.path, intake.sha256
        else:
            path, digest = f"{UPLOADS_DIR}/{name}", case["sha256"]
            await sandbox.upload(path, files.stream(file))
            spooled, spool_cpu = wall, cpu
        done = time.perf_counter()
        result = {
            "wall": done - wall,
            "spool": spooled - wall,
            "upload": done - spooled,
            "cpu": time.process_time() - cpu,
            "spool_cpu": spool_cpu - cpu,
            "growth_mb": (rss_kb("VmHWM") - rss0) / 1024,
        }
        listed = {e.name: e.size for e in await sandbox.list_dir(UPLOADS_DIR)}
        assert listed.get(path.rsplit("/", 1)[-1]) == case["size"], (path, listed)
        assert digest == case["sha256"], "the bytes taken in differ from the file's"
        await session.close()
    finally:
        await http.close()
        await runtime.close()
    return result


async def run_case(case: dict[str, Any]) -> dict[str, float]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.file_intake", "--case", json.dumps(case),
        cwd=REPO, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"case {case['backend']} {case['mode']} {case['size']} failed")
    return json.loads(out.decode().strip().splitlines()[-1])


def summary(results: list[dict[str, float]]) -> dict[str, float]:
    """Medians of the times, the largest memory growth."""
    merged = {key: statistics.median(r[key] for r in results) for key in results[0]}
    merged["growth_mb"] = max(r["growth_mb"] for r in results)
    return merged


# -- the run and its table


WIDTHS = (7, 8, 8, 8, 6, 8, 8, 9, 7, 6, 6, 5)


def cells(*values: str) -> str:
    """One line of the table: the first cell left-aligned, the others right-aligned."""
    first, *rest = (*values, *[""] * (len(WIDTHS) - len(values)))
    padded = (v.rjust(w) for v, w in zip(rest, WIDTHS[1:], strict=True))
    return " ".join([first.ljust(WIDTHS[0]), *padded]).rstrip()


HEADER = "\n".join(
    [
        cells("", "", "raw", "intake", "", "intake", "phases", "peak RSS", "+MB", "bot", "CPU"),
        cells("backend", "size", "MB/s", "MB/s", "ratio", "add s", "wait s", "intake", "raw")
        + "  spool upload  raw",
        cells("target", "", "", "", f">={TARGET_RATIO:.2f}", "", "", f"<{TARGET_GROWTH_MB}"),
    ]
)


@dataclass
class Row:
    backend: str
    size: int
    raw: dict[str, float]
    intake: dict[str, float]

    def line(self) -> str:
        raw_mbs = self.size / MB / self.raw["wall"]
        in_mbs = self.size / MB / self.intake["wall"]
        ratio = in_mbs / raw_mbs
        growth = self.intake["growth_mb"]
        ok = "ok" if ratio >= TARGET_RATIO and growth < TARGET_GROWTH_MB else "MISS"
        intake = self.intake
        upload_cpu = intake["cpu"] - intake["spool_cpu"]
        return (
            cells(
                self.backend,
                f"{self.size // MB} MB",
                f"{raw_mbs:.1f}",
                f"{in_mbs:.1f}",
                f"{ratio:.2f}",
                f"{intake['spool']:.2f}",
                f"{intake['upload']:.2f}",
                f"{growth:.1f}",
                f"{self.raw['growth_mb']:.1f}",
                f"{intake['spool_cpu'] / intake['spool']:.0%}",
                f"{upload_cpu / intake['upload']:.0%}",
                f"{self.raw['cpu'] / self.raw['wall']:.0%}",
            )
            + f"  {ok}"
        )


LEGEND = """\
raw: the Slack download streamed straight into Sandbox.upload (no spool), both backends.
intake: Session.add_file (download through checked(); with the sandbox up it streams
  straight in), then await session.sandbox() until anything queued is in; the phases are
  add_file's time and that wait.
peak RSS +MB: the bot process's RSS high-water mark (VmHWM, reset before the clock
  starts) minus its RSS then. bot CPU: the bot process's CPU time (all its threads, not
  the sandbox's or the fakes' processes) over wall time, per intake phase and for raw."""


async def run(root: Path, sizes: list[int], reps: int) -> None:
    data = root / "data"
    data.mkdir()
    paths, digests = {}, {}
    started = time.perf_counter()
    for size in sizes:
        path = data / f"sales_{size // MB}mb.csv"
        digests[size] = await asyncio.to_thread(write_csv, path, size)
        paths[f"F0BENCH{size // MB:05d}"] = path
    print(f"wrote {len(sizes)} CSV files in {time.perf_counter() - started:.1f} s")
    speed = await asyncio.to_thread(write_speed, root, max(sizes))
    print(f"a new {max(sizes) // MB} MB file is written here at {speed:.0f} MB/s (1 MiB writes)")
    print(HEADER, flush=True)
    async with slack_files_host(paths) as slack_url:
        for backend in ("local", "buddy"):
            home = root / backend
            home.mkdir()
            async with contextlib.AsyncExitStack() as stack:
                buddy_url = ""
                if backend == "buddy":
                    buddy_url = await stack.enter_async_context(served("buddy", str(home / "fake")))
                for (file_id, path), size in zip(paths.items(), sizes, strict=True):
                    results: dict[str, list[dict[str, float]]] = {"raw": [], "intake": []}
                    for rep in range(reps):
                        order = ("raw", "intake") if rep % 2 == 0 else ("intake", "raw")
                        for mode in order:
                            case = {
                                "backend": backend,
                                "mode": mode,
                                "root": str(home),
                                "slack_url": slack_url,
                                "buddy_url": buddy_url,
                                "file": slack_file(slack_url, file_id, path),
                                "size": size,
                                "sha256": digests[size],
                            }
                            results[mode].append(await run_case(case))
                    row = Row(backend, size, summary(results["raw"]), summary(results["intake"]))
                    print(row.line(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000", help="MB (10^6 bytes), comma-separated")
    parser.add_argument("--reps", type=int, default=3, help="runs of each case")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # a bot process running one case
    args = parser.parse_args()
    if args.case:
        print(json.dumps(asyncio.run(one_case(json.loads(args.case)))))
        return
    sizes = [int(s) * MB for s in args.sizes.split(",")]
    print(
        f"CSV from Slack into a sandbox that is already up; {os.cpu_count()} CPUs; "
        f"median of {args.reps} runs (memory: the largest)."
    )
    started = time.perf_counter()
    with sandbox_root() as root:
        asyncio.run(run(root, sizes, args.reps))
    print(LEGEND)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
