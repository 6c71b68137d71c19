"""Unit tests of the Buddy backend's pure parts: wire formats, error mapping, scripts, request
bodies and the reading of Buddy's views. The backend's traffic with a server is tested against
the fake Buddy server in test_buddy_backend.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.errors import (
    ConfigError,
    SandboxConfigError,
    SandboxError,
    SandboxGone,
    SandboxPathError,
    SandboxUnavailable,
)
from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig
from bot.sandbox.buddy.config import api_url_for
from bot.sandbox.buddy.errors import CommandNotFound, api_error, error_text
from bot.sandbox.buddy.retries import RATE_LIMIT_MAX_WAIT_S, request_timeouts, retry_delay
from bot.sandbox.buddy.scripts import (
    IDENTIFIER_PREFIX,
    create_body,
    first_boot_script,
    make_identifier,
    run_script,
)
from bot.sandbox.buddy.views import exec_status, parse_listing
from bot.sandbox.buddy.wire import LogParser, encode_path, multipart_body, multipart_content_type
from bot.sandbox.output import CappedBuffer
from tests.support import settings_for

TOKEN = "buddy-secret-token-123"

# -- JSONL log parsing --


def _parser(limit: int = 1 << 20, max_line: int = 1 << 20) -> LogParser:
    return LogParser(CappedBuffer(limit), CappedBuffer(limit), max_line=max_line)


def _texts(parser: LogParser) -> tuple[str, str]:
    return parser.stdout.output().text, parser.stderr.output().text


def _jsonl(*records: tuple[str, Any]) -> bytes:
    return b"".join(
        json.dumps({"type": kind, "data": data}).encode() + b"\n" for kind, data in records
    )


def test_log_records_go_to_their_stream_with_a_newline_each() -> None:
    parser = _parser()
    parser.feed(_jsonl(("STDOUT", "a"), ("STDERR", "warn"), ("STDOUT", "b")))
    parser.close()
    assert _texts(parser) == ("a\nb\n", "warn\n")


def test_log_split_at_every_byte_gives_the_same_result() -> None:
    stream = _jsonl(("STDOUT", "héllo → 世界 🎉"), ("STDERR", "ünïcode"), ("STDOUT", ""))
    whole = _parser()
    whole.feed(stream)
    whole.close()
    bytewise = _parser()
    for i in range(len(stream)):
        bytewise.feed(stream[i : i + 1])
    bytewise.close()
    assert _texts(bytewise) == _texts(whole) == ("héllo → 世界 🎉\n\n", "ünïcode\n")


def test_log_raw_utf8_split_inside_a_character() -> None:
    line = '{"type":"STDOUT","data":"€uro"}\n'.encode()  # raw UTF-8, not \\u-escaped
    cut = line.index("€".encode()) + 1  # in the middle of the 3-byte character
    parser = _parser()
    parser.feed(line[:cut])
    parser.feed(line[cut:])
    parser.close()
    assert _texts(parser) == ("€uro\n", "")


def test_log_blank_lines_skipped_and_last_line_without_newline_parsed() -> None:
    parser = _parser()
    parser.feed(b'\n\r\n  \n{"type":"STDOUT","data":"one"}\n\n{"type":"STDERR","data":"two"}')
    assert _texts(parser) == ("one\n", "")
    parser.close()
    assert _texts(parser) == ("one\n", "two\n")


def test_log_line_separator_inside_json_is_not_a_line_break() -> None:
    parser = _parser()
    parser.feed('{"type":"STDOUT","data":"a\u2028b\u0085c"}\n'.encode())
    parser.close()
    assert _texts(parser)[0] == "a\u2028b\u0085c\n"


def test_log_odd_records_do_not_break_the_stream() -> None:
    parser = _parser()
    parser.feed(b'not json\n[1,2]\n{"type":"STDOUT","data":null}\n{"data":"no type"}\n')
    parser.feed(b'{"type":"stderr","data":42}\n')
    parser.close()
    assert parser.bad_lines == 2
    assert _texts(parser) == ("\nno type\n", "42\n")


def test_log_huge_line_keeps_its_start_counts_the_rest_as_cut_and_stays_bounded() -> None:
    max_line = 10_000
    parser = _parser(limit=4096, max_line=max_line)
    parser.feed(_jsonl(("STDERR", "before")))
    huge = json.dumps({"type": "STDERR", "data": "é\\" + "x" * 1_000_000}).encode() + b"\n"
    for i in range(0, len(huge), 65536):  # arrives in many chunks
        parser.feed(huge[i : i + 65536])
        assert len(parser._pending) <= max_line
    parser.feed(_jsonl(("STDERR", "after"), ("STDOUT", "still here")))
    parser.close()
    out, err = _texts(parser)
    assert out == "still here\n"
    assert err.startswith("before\né\\xxxx")
    assert err.endswith("xxx\nafter\n")
    assert parser.stderr.cut_bytes >= 1_000_000 - max_line
    assert err.count("bytes cut") == 1


def _feed_in_pieces(parser: LogParser, data: bytes, size: int = 10) -> None:
    for i in range(0, len(data), size):
        parser.feed(data[i : i + size])


def test_log_huge_line_with_data_first_or_without_data() -> None:
    parser = _parser(max_line=100)
    _feed_in_pieces(parser, b'{"data":"' + b"\\u00e9" * 100 + b'","type":"STDERR"}\n')
    _feed_in_pieces(parser, b'{"type":"STDERR","other":"' + b"z" * 500 + b'"}\n')
    parser.close()
    out, err = _texts(parser)
    assert out.startswith("é" * 10)  # the type came too late: stdout by default
    assert parser.stderr.cut_bytes == 528  # no data to keep: the whole line is cut
    assert err.strip() == "[... 528 bytes cut ...]"


def test_log_long_line_that_arrives_whole_is_parsed() -> None:
    parser = _parser(max_line=100)
    parser.feed(_jsonl(("STDOUT", "w" * 5000)))
    parser.close()
    assert _texts(parser) == ("w" * 5000 + "\n", "")


def test_log_huge_unterminated_last_line_is_counted_at_close() -> None:
    parser = _parser(max_line=1000)
    _feed_in_pieces(parser, b'{"type":"STDERR","data":"' + b"y" * 5000, size=100)
    parser.close()
    assert 3900 <= parser.stderr.cut_bytes <= 4100
    assert parser.stderr.output().text.startswith("y" * 900)


def test_log_output_beyond_the_cap_keeps_head_and_tail() -> None:
    parser = _parser(limit=100)
    for i in range(1000):
        parser.feed(_jsonl(("STDOUT", f"line {i}")))
    parser.close()
    out = parser.stdout.output()
    assert out.text.startswith("line 0\n")
    assert out.text.endswith("line 999\n")
    assert out.cut_bytes > 0


# -- multipart uploads --


async def _collect(body: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in body])


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_multipart_body_is_one_file_part_and_binary_safe() -> None:
    data = bytes(range(256)) * 3 + b"\r\n--not-a-boundary\r\n"
    boundary = "b0undary123"
    body = await _collect(
        multipart_body("data.bin", _chunks(data[:100], b"", data[100:]), boundary)
    )
    assert body.startswith(b"--b0undary123\r\n")
    assert body.endswith(b"\r\n--b0undary123--\r\n")
    head = f"Content-Type: {multipart_content_type(boundary)}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    (part,) = message.iter_parts()
    assert part.get_param("name", header="content-disposition") == "file"
    assert part.get_filename() == "data.bin"
    assert part.get_content_type() == "application/octet-stream"
    assert part.get_payload(decode=True) == data


async def test_multipart_body_streams_without_reading_ahead() -> None:
    pulled: list[int] = []

    async def source() -> AsyncIterator[bytes]:
        for i in range(3):
            pulled.append(i)
            yield b"x" * 10

    body = multipart_body("f.csv", source(), "bnd")
    assert b"filename=" in await anext(body) and pulled == []
    await anext(body)
    assert pulled == [0]  # one chunk read per chunk sent: the file is never held whole
    assert (await _collect(body)).endswith(b"--bnd--\r\n")
    assert pulled == [0, 1, 2]


async def test_multipart_filename_quotes_and_newlines_are_escaped() -> None:
    body = await _collect(multipart_body('a"b\r\nc.txt', _chunks(b"1"), "bnd"))
    header = body.split(b"\r\n\r\n", 1)[0]
    assert b'filename="a%22b%0D%0Ac.txt"' in header
    assert header.count(b"\r\n") == 2  # boundary line, disposition, type


# -- paths and URLs --


@pytest.mark.parametrize(
    ("path", "encoded"),
    [
        ("/buddy/work/report.md", "buddy/work/report.md"),
        ("/buddy/work/a b#c?d%e.csv", "buddy/work/a%20b%23c%3Fd%25e.csv"),
        ("/buddy/work/über/日本.txt", "buddy/work/%C3%BCber/%E6%97%A5%E6%9C%AC.txt"),
        ("/buddy/work/+&=;,'@$.txt", "buddy/work/%2B%26%3D%3B%2C%27%40%24.txt"),
        ("/", ""),
    ],
)
def test_encode_path(path: str, encoded: str) -> None:
    assert encode_path(path) == encoded


@pytest.mark.parametrize(
    ("region", "url"),
    [
        ("US", "https://api.buddy.works"),
        ("EU", "https://api.eu.buddy.works"),
        ("AS", "https://api.asia.buddy.works"),
        ("AP", "https://api.asia.buddy.works"),
        ("eu", "https://api.eu.buddy.works"),
    ],
)
def test_api_url_by_region(region: str, url: str) -> None:
    assert api_url_for(None, region) == url


def test_explicit_api_url_wins() -> None:
    assert api_url_for("https://buddy.corp/api/", "EU") == "https://buddy.corp/api"
    with pytest.raises(ConfigError, match="BUDDY_REGION"):
        api_url_for(None, "MARS")


# -- error mapping --


def _errors(*messages: str) -> bytes:
    return json.dumps({"errors": [{"message": m} for m in messages]}).encode()


def test_error_text_shapes() -> None:
    assert error_text(_errors("first", "second")) == "first; second"
    assert error_text(b'{"message": "plain json", "code": 7}') == "plain json"
    assert error_text(b"Bad gateway\nmore") == "Bad gateway"
    assert error_text(b"<html><body>502</body></html>") == ""
    assert error_text(b"") == ""
    assert len(error_text(_errors("x" * 5000))) <= 300


def _map(status: int, body: bytes = b"", scope: str = "sandbox", **kw: Any) -> SandboxError:
    kw.setdefault("what", "creating a sandbox")
    return api_error(status, body, scope=scope, workspace="acme", project="analytics", **kw)  # type: ignore[arg-type]


def test_401_is_a_token_problem() -> None:
    error = _map(401, _errors("Unauthorized"))
    assert isinstance(error, SandboxConfigError) and isinstance(error, ConfigError)
    assert isinstance(error, SandboxUnavailable)
    assert "BUDDY_TOKEN" in str(error) and "expired" in str(error)


def test_403_api_disabled_says_where_to_enable_it() -> None:
    error = _map(403, _errors("API is disabled in this workspace"))
    assert isinstance(error, SandboxConfigError)
    assert "enable the developer API in the workspace settings" in str(error)


def test_other_403_names_the_scopes() -> None:
    error = _map(403, _errors("You cannot receive data"))
    assert isinstance(error, SandboxConfigError)
    for scope in ("WORKSPACE", "SANDBOX_READ", "SANDBOX_WRITE", "SANDBOX_INFO", "SANDBOX_MANAGE"):
        assert scope in str(error)


def test_404_depends_on_what_was_asked() -> None:
    project = _map(404, _errors("Not found"), scope="project")
    assert isinstance(project, SandboxConfigError)
    assert "'acme'" in str(project) and "'analytics'" in str(project)
    assert "BUDDY_WORKSPACE" in str(project) and "BUDDY_PROJECT" in str(project)
    gone = _map(404, scope="sandbox")
    assert isinstance(gone, SandboxGone)
    assert "no longer exists" in str(gone) and "fresh one" in str(gone)
    assert isinstance(_map(404, scope="command", subject="c1"), CommandNotFound)
    missing = _map(404, scope="path", subject="/buddy/work/x.csv")
    assert isinstance(missing, SandboxPathError)
    assert str(missing) == "/buddy/work/x.csv does not exist"


def test_400_path_not_found_is_a_path_error() -> None:
    error = _map(400, _errors("Path not find in browser"), scope="path", subject="/buddy/work/a")
    assert isinstance(error, SandboxPathError)
    other = _map(400, _errors("Path not find in browser"), scope="sandbox")
    assert not isinstance(other, SandboxPathError)


def test_400_invalid_url_on_a_sandbox_means_gone() -> None:
    assert isinstance(_map(400, _errors("Invalid url"), scope="sandbox"), SandboxGone)


@pytest.mark.parametrize(
    "message",
    [
        "Sandbox limit reached",
        "You have exceeded the limit of sandboxes in this workspace",
        "Workspace quota exceeded",
        "Maximum number of sandboxes",
    ],
)
def test_quota_messages(message: str) -> None:
    error = _map(400, _errors(message))
    assert isinstance(error, SandboxUnavailable)
    assert "delete unused sandboxes" in str(error)


def test_429_5xx_and_others() -> None:
    limited = _map(429, _errors("Rate limit exceeded"))
    assert "rate limiting" in str(limited) and "quota" not in str(limited)
    server = _map(502, b"<html>Bad Gateway</html>")
    assert "Buddy server error" in str(server) and "try again" in str(server)
    assert "<html>" not in str(server)
    rejected = _map(400, _errors("'identifier' must be unique"))
    assert type(rejected) is SandboxError
    assert "'identifier' must be unique" in str(rejected) and "HTTP 400" in str(rejected)
    not_running = _map(400, _errors("Instance is not running"), scope="path", subject="/x")
    assert isinstance(not_running, SandboxUnavailable) and "not running" in str(not_running)


# -- timeouts --


def test_request_timeouts_by_kind() -> None:
    timeouts = request_timeouts()
    assert timeouts["default"] == httpx.Timeout(30.0)
    assert timeouts["create"] == httpx.Timeout(60.0, connect=30.0)
    assert timeouts["command"] == httpx.Timeout(120.0, connect=30.0)  # held while booting
    assert timeouts["stream"] == httpx.Timeout(None, connect=30.0, pool=30.0)
    assert request_timeouts(0.5)["command"] == httpx.Timeout(2.0, connect=0.5)


# -- Retry-After --


def test_retry_delay_waits_until_the_rate_limit_resets() -> None:
    now = 1_800_000_000.0
    assert retry_delay({"X-Rate-Limit-Reset": str(int(now + 5))}, 1.0, now=now) == 5
    assert retry_delay({"x-rate-limit-reset": str(int((now + 5) * 1000))}, 1.0, now=now) == 5
    assert retry_delay({}, 2.5, now=now) == 2.5
    assert retry_delay({"X-Rate-Limit-Reset": "soon"}, 2.5, now=now) == 2.5
    late = str(int(now + 3600))
    assert retry_delay({"X-Rate-Limit-Reset": late}, 1.0, now=now) == RATE_LIMIT_MAX_WAIT_S
    # a reset already past (or a clock ahead of Buddy's): back off, do not burst
    assert retry_delay({"X-Rate-Limit-Reset": str(int(now - 30))}, 1.5, now=now) == 1.5
    # Retry-After is not something Buddy is documented to send
    assert retry_delay({"Retry-After": "7"}, 1.5, now=now) == 1.5


# -- the run wrapper, run for real with bash in a temporary layout --


def _tool_path(tmp_path: Path, *, with_node: bool = False) -> str:
    """A PATH holding just the tools the wrapper needs (and no node unless asked)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tools = ["bash", "mkdir", "cat", "timeout", "env", "sleep", "rm", "unshare"]
    for tool in [*tools, "node"] if with_node else tools:
        found = shutil.which(tool, path="/usr/bin:/bin")
        if found is None:
            pytest.skip(f"{tool} is not installed")
        (bin_dir / tool).symlink_to(found)
    python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if python is None:
        pytest.skip("python3 is not installed")
    (bin_dir / "python3").symlink_to(python)
    return str(bin_dir)


def _run(
    tmp_path: Path, language: str, code: str, timeout_s: float = 20, **kw: Any
) -> subprocess.CompletedProcess[str]:
    run_dir, work_dir = tmp_path / "run", tmp_path / "work"
    work_dir.mkdir(exist_ok=True)
    script = run_script(language, code, timeout_s, run_dir=str(run_dir), work_dir=str(work_dir))
    env = {"PATH": _tool_path(tmp_path, **kw), "SECRET": "leak-me"}
    return subprocess.run(
        [f"{env['PATH']}/bash", "-c", script], env=env, capture_output=True, text=True, timeout=30
    )


def test_wrapper_runs_python_in_the_work_dir_with_a_clean_environment(tmp_path: Path) -> None:
    code = "import os, sys\nprint(os.getcwd())\nprint(sorted(os.environ))\nsys.exit(3)"
    done = _run(tmp_path, "python", code)
    cwd, names = done.stdout.splitlines()
    assert done.returncode == 3, done.stderr
    assert cwd == str(tmp_path / "work")
    expected = ["HOME", "LANG", "MPLBACKEND", "PATH", "PYTHONUNBUFFERED", "TMPDIR"]
    assert [n for n in eval(names) if n != "LC_CTYPE"] == expected
    assert (tmp_path / "work" / "out").is_dir()


def test_wrapper_passes_the_code_through_verbatim(tmp_path: Path) -> None:
    code = (
        "s = '''$HOME `id` $(echo x) \\\\ \\n \" ' EOF\nSCI_\n'''\n"
        "print(repr(s), end='')"  # no trailing newline in the snippet
    )
    done = _run(tmp_path, "python", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == repr("$HOME `id` $(echo x) \\ \n \" ' EOF\nSCI_\n")


def test_wrapper_falls_back_to_tmpdir_when_the_run_dir_is_not_writable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    script = run_script("bash", "echo $0", 5, run_dir=str(blocker / "run"), work_dir=str(tmp_path))
    env = {"PATH": _tool_path(tmp_path), "TMPDIR": str(tmp_path / "tmp")}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str(tmp_path / "tmp" / ".sci-run") + "/")


def test_wrapper_heredoc_delimiter_never_occurs_in_the_code() -> None:
    tokens = iter(["aaaa", "aaaa", "bbbb"])
    code = "print('SCI_aaaa')\nSCI_aaaa\n"
    script = run_script("python", code, 5, new_token=lambda: next(tokens))
    assert "<<'SCI_bbbb'" in script
    assert script.count("\nSCI_bbbb\n") == 1
    assert 'f="$d/bbbb.py"' in script


def test_wrapper_bash_and_exit_codes(tmp_path: Path) -> None:
    done = _run(tmp_path, "bash", 'echo "out $0"; echo err >&2; exit 42')
    assert done.returncode == 42
    assert done.stdout.startswith("out ") and done.stdout.strip().endswith(".sh")
    assert done.stderr == "err\n"


def test_wrapper_kills_at_the_limit_with_137(tmp_path: Path) -> None:
    done = _run(tmp_path, "bash", "sleep 30 & sleep 30", timeout_s=0.5)
    assert done.returncode == 137
    assert done.stderr == ""  # no "Killed" notice from the wrapper's shell


def test_wrapper_terminated_kills_the_snippet_and_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = f"sleep 60 &\necho $! > {pid_file}\nwait"
    work = tmp_path / "work"
    work.mkdir()
    script = run_script("bash", code, 60, run_dir=str(tmp_path / "run"), work_dir=str(work))
    env = {"PATH": _tool_path(tmp_path)}
    wrapper = subprocess.Popen([f"{env['PATH']}/bash", "-c", script], env=env)
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = int(pid_file.read_text())
    wrapper.terminate()  # what a terminate is expected to send
    assert wrapper.wait(timeout=10) == 143
    deadline = time.monotonic() + 5
    while _alive(child):
        assert time.monotonic() < deadline, "the snippet's child outlived the terminate"
        time.sleep(0.02)
    assert list((tmp_path / "run").iterdir()) == []  # the snippet file is removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_wrapper_reports_a_missing_interpreter(tmp_path: Path) -> None:
    done = _run(tmp_path, "node", "console.log(1)")
    assert done.returncode == 127
    assert done.stderr == "node is not installed in this sandbox\n"


def test_wrapper_runs_node_when_present(tmp_path: Path) -> None:
    if shutil.which("node", path="/usr/bin:/bin") is None:
        pytest.skip("node is not installed")
    done = _run(tmp_path, "node", "console.log(6 * 7)", with_node=True)
    assert (done.returncode, done.stdout) == (0, "42\n")


def test_wrapper_refuses_an_unknown_language(tmp_path: Path) -> None:
    done = _run(tmp_path, "ruby", "puts 1")
    assert done.returncode == 127
    assert "ruby is not a supported language (use python, bash, node)" in done.stderr


def test_wrapper_shape() -> None:
    script = run_script("python", "print(1)", 12.5)
    assert script.startswith("set -u\n")
    assert "\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\n" in script  # the wrapper's own tools
    assert "\nd=/buddy/.run\n" in script
    assert "mkdir -p /buddy/work/out" in script
    assert "cd /buddy/work" in script
    assert '/usr/bin/timeout -s KILL 12.500 /usr/bin/env -i PATH="$o"' in script
    assert " /usr/bin/unshare --user --map-root-user --net --mount -- /bin/bash " in script
    assert ' sci "$h" "$p" "$f" &\n' in script
    assert "unshare" not in run_script("python", "print(1)", 12.5, network=True)
    for setting in ("HOME=/buddy/work", "LANG=C.UTF-8", "MPLBACKEND=Agg", "PYTHONUNBUFFERED=1"):
        assert setting in script
    assert "TMPDIR=/tmp" in script


# -- statuses --


@pytest.mark.parametrize(
    ("exit_code", "elapsed", "killed", "expected"),
    [
        (0, 1.0, False, ("ok", 0)),
        (1, 1.0, False, ("error", 1)),
        (127, 0.1, False, ("error", 127)),
        (137, 10.0, False, ("timeout", None)),
        (137, 9.5, False, ("timeout", None)),  # the client's clock starts a little late
        (137, 2.0, False, ("killed", 137)),  # a SIGKILL before the limit (out of memory)
        (153, 2.0, False, ("killed", 153)),
        (143, 2.0, True, ("killed", None)),
        (None, 2.0, False, ("killed", None)),
        (0, 2.0, True, ("ok", 0)),  # finished before the kill landed
    ],
)
def test_exec_status(
    exit_code: int | None, elapsed: float, killed: bool, expected: tuple[str, int | None]
) -> None:
    assert exec_status(exit_code, elapsed, 10.0, killed=killed) == expected


# -- create requests --


def _config(**kw: Any) -> BuddyConfig:
    values: dict[str, Any] = {
        "token": TOKEN,
        "workspace": "acme",
        "project": "analytics",
        "api_url": "https://buddy.example",
        "retry_base_delay_s": 0.001,
        "poll_interval_s": 0.001,
    }
    return BuddyConfig(**{**values, **kw})


def test_identifiers_follow_buddys_rules_and_are_unique() -> None:
    made = {make_identifier("slack:T1:C2:1712.0001") for _ in range(50)}
    assert len(made) > 40
    for identifier in made:
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*[A-Za-z0-9_]", identifier)
        assert identifier.startswith(IDENTIFIER_PREFIX)
    assert len({m.rsplit("-", 1)[0] for m in made}) == 1  # same session, same stem


def test_create_body_new_sandbox_with_repo() -> None:
    spec = SandboxSpec("s1", repo_url="https://github.com/o/r", tags=("bot", "session:s1"))
    body = create_body(spec, "sci-abc-1234", _config(setup_command="pip install polars"))
    assert body["os"] == "ubuntu:24.04"
    assert body["identifier"] == "sci-abc-1234" and "s1" in body["name"]
    assert (body["resources"], body["timeout"], body["tags"]) == ("1x2", 900, ["bot", "session:s1"])
    assert body["fetch"] == [
        {"type": "PUBLIC_REPO", "repository": "https://github.com/o/r", "path": "/buddy/data"}
    ]
    boot = body["first_boot_commands"]
    assert "/buddy/work/uploads" in boot and "/buddy/work/out" in boot
    assert boot.endswith("\npip install polars")
    assert "snapshot_id" not in body


def test_create_body_without_repo_makes_the_data_folder() -> None:
    body = create_body(SandboxSpec("s1"), "sci-x-0000", _config())
    assert "fetch" not in body
    assert "/buddy/data" in body["first_boot_commands"]


def test_create_body_from_snapshot() -> None:
    spec = SandboxSpec("s1", repo_url="https://github.com/o/r")
    body = create_body(spec, "sci-x-0000", _config(snapshot_id="snap1", timeout_s=1200))
    assert body["snapshot_id"] == "snap1" and body["timeout"] == 1200
    assert "fetch" not in body and "os" not in body
    assert (
        "git clone --quiet --depth 1 -- https://github.com/o/r /buddy/data"
        in (body["first_boot_commands"])
    )


def test_first_boot_fails_when_model_code_cannot_go_offline(tmp_path: Path) -> None:
    """No network namespace for model code: the setup fails and says why."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "unshare").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "unshare").chmod(0o755)
    script = first_boot_script(make_data_dir=True).replace("/buddy", str(tmp_path / "buddy"))
    assert "/usr/bin/unshare --user" in script
    script = script.replace("/usr/bin/unshare", str(bin_dir / "unshare"))
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "set SANDBOX_NETWORK=on" in done.stderr
    assert "unshare" not in first_boot_script(make_data_dir=True, network=True)


def test_first_boot_script_runs(tmp_path: Path) -> None:
    script = first_boot_script(make_data_dir=True, setup_command="echo setup-ran")
    script = script.replace("/buddy", str(tmp_path / "buddy"))
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "setup-ran\n"
    for sub in ("work/uploads", "work/out", "data"):
        assert (tmp_path / "buddy" / sub).is_dir()
    again = subprocess.run(["bash", "-c", "set -e\n" + script], capture_output=True, timeout=30)
    assert again.returncode == 0  # idempotent, and safe under set -e


# -- listings --


def test_parse_listing_of_a_folder() -> None:
    items = [
        {"type": "FILE", "name": "b.csv", "path": "/buddy/work/b.csv", "size": 12},
        {"type": "DIR", "name": "out", "path": "/buddy/work/out"},
        {"type": "LINK", "name": "a", "path": "/buddy/work/a", "size": "7"},
        "junk",
    ]
    entries = parse_listing(items, "/buddy/work", "/buddy/work")
    assert [(e.name, e.kind, e.size) for e in entries] == [
        ("a", "other", 0),
        ("b.csv", "file", 12),
        ("out", "dir", 0),
    ]


def test_parse_listing_of_a_file_is_a_path_error() -> None:
    item = {"type": "FILE", "name": "x.csv", "path": "/buddy/work/x.csv", "size": 3}
    with pytest.raises(SandboxPathError, match="is not a folder"):
        parse_listing([item], "/buddy/work/x.csv", "/buddy/work/x.csv")
    # a folder holding one file of the same name is still a folder
    inner = {"type": "FILE", "name": "x", "path": "/buddy/work/x/x", "size": 3}
    assert len(parse_listing([inner], "/buddy/work/x", "/buddy/work/x")) == 1
    assert parse_listing([], "/buddy/work/empty", "/buddy/work/empty") == []


# -- configuration --


def test_config_from_settings(tmp_path: Path) -> None:
    settings = settings_for(
        "http://unused",
        tmp_path,
        buddy_token=TOKEN,
        buddy_workspace="acme",
        buddy_project="analytics",
        buddy_region="EU",
        sandbox_setup_command="apt-get install -y jq",
    )
    config = BuddyConfig.from_settings(settings)
    assert config.api_url == "https://api.eu.buddy.works"
    assert (config.workspace, config.project, config.token) == ("acme", "analytics", TOKEN)
    assert config.setup_command == "apt-get install -y jq"
    assert TOKEN not in repr(config)


@pytest.mark.parametrize(
    ("missing", "name"),
    [
        ("buddy_token", "BUDDY_TOKEN"),
        ("buddy_workspace", "BUDDY_WORKSPACE"),
        ("buddy_project", "BUDDY_PROJECT"),
    ],
)
def test_config_missing_setting(tmp_path: Path, missing: str, name: str) -> None:
    values = {"buddy_token": TOKEN, "buddy_workspace": "acme", "buddy_project": "analytics"}
    values[missing] = None
    with pytest.raises(ConfigError) as caught:
        BuddyConfig.from_settings(settings_for("http://unused", tmp_path, **values))
    message = str(caught.value)
    assert name in message and "\n" not in message and TOKEN not in message
