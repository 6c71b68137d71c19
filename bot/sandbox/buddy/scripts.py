"""What the Buddy backend sends: sandbox identifiers, the create request, the first-boot
and run wrapper scripts, and the scripts that start and reach the Python kernel. Nothing
here does I/O."""

from __future__ import annotations

import hashlib
import posixpath
import secrets
import shlex
from collections.abc import Callable
from typing import Any

from bot.sandbox.base import (
    DATA_DIR,
    INTERPRETERS,
    NOT_FOUND_EXIT,
    RUN_DIR,
    SANDBOX_PATH,
    SNIPPET_ENV,
    WORK_DIR,
    WORK_FOLDERS,
    SandboxSpec,
    not_installed,
    unsupported_language,
)
from bot.sandbox.buddy.config import BuddyConfig
from bot.sandbox.buddy.netns import first_boot_check, offline
from bot.sandbox.kernel.frames import INTERRUPT, KERNEL_FILES, KERNEL_MAIN, Cell, run_request

OS = "ubuntu:24.04"
IDENTIFIER_PREFIX = "sci-"
SNIPPET_VARS = " ".join(f"{name}={value}" for name, value in SNIPPET_ENV.items())


# -- identifiers and the create request --


def make_identifier(session_key: str) -> str:
    """Unique, traceable to the session, and within Buddy's rules (letters, digits, _ and -;
    no '-' first or last)."""
    digest = hashlib.sha256(session_key.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{IDENTIFIER_PREFIX}{digest}-{secrets.token_hex(2)}"


def is_ours(identifier: Any) -> bool:
    """Whether a listed sandbox may be one this backend made (no identifier: maybe)."""
    return str(identifier or IDENTIFIER_PREFIX).startswith(IDENTIFIER_PREFIX)


def sandbox_name(session_key: str) -> str:
    return f"Code interpreter {session_key}"[:100]


def first_boot_script(
    *,
    make_data_dir: bool,
    clone_url: str | None = None,
    setup_command: str | None = None,
    network: bool = False,
) -> str:
    """The folders the bot relies on, owned by the user commands run as (`buddy` when this
    runs as root); sudo only where needed. Then the repository for a snapshot, the check
    that model code can run without network (unless `network`), and the setup. Safe under
    `set -e`."""
    lines = [
        "u=$(id -un 2>/dev/null || id -u)",
        '[ "$(id -u)" != 0 ] || ! id buddy >/dev/null 2>&1 || u=buddy',
        f"for d in {' '.join((WORK_DIR, *WORK_FOLDERS))}; do",
        '  if [ ! -d "$d" ]; then mkdir -p "$d" 2>/dev/null || sudo -n mkdir -p "$d" || exit 1; fi',
        '  if [ "$(id -u)" = 0 ]; then chown "$u" "$d" || exit 1',
        '  elif [ ! -w "$d" ]; then sudo -n chown "$u" "$d" || exit 1; fi',
        "done",
    ]
    if make_data_dir:
        lines.append(f"mkdir -p {DATA_DIR} 2>/dev/null || sudo -n mkdir -p {DATA_DIR} || exit 1")
    if clone_url:  # a sandbox made from a snapshot takes no `fetch`
        url = shlex.quote(clone_url)
        lines.append(
            f"[ -d {DATA_DIR}/.git ] || git clone --quiet --depth 1 -- {url} {DATA_DIR} "
            f"|| sudo -n git clone --quiet --depth 1 -- {url} {DATA_DIR} || exit 1"
        )
    if not network:
        lines += first_boot_check()
    if setup_command:
        lines.append(setup_command)
    return "\n".join(lines)


def create_body(spec: SandboxSpec, identifier: str, config: BuddyConfig) -> dict[str, Any]:
    """The create request: a new sandbox (§5.1 a) or one restored from a snapshot (§5.1 b)."""
    snapshot_id = spec.snapshot_id or config.snapshot_id
    body: dict[str, Any] = {
        "name": sandbox_name(spec.session_key),
        "identifier": identifier,
        "resources": config.resources,
        "timeout": config.timeout_s,
        "tags": list(spec.tags),
        "first_boot_commands": first_boot_script(
            make_data_dir=not spec.repo_url,
            clone_url=spec.repo_url if snapshot_id else None,
            # the thread's own snapshot holds what the setup installed
            setup_command=None if spec.snapshot_id else config.setup_command,
            network=config.network,
        ),
    }
    if snapshot_id:
        return {"snapshot_id": snapshot_id, **body}
    body["os"] = OS
    if spec.repo_url:
        body["fetch"] = [{"type": "PUBLIC_REPO", "repository": spec.repo_url, "path": DATA_DIR}]
    return body


# -- the run wrapper --

TRUSTED_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # root's folders: model code cannot write them
# The start of every script the bot runs outside the namespace. Buddy's PATH may name
# folders model code can write (~/.local/bin, /usr/local/bin through sudo), so the
# wrapper's tools come from TRUSTED_PATH; the snippet keeps Buddy's PATH ($o), as it
# runs in the namespace anyway. $h: the home folder model code sees read-only.
PRELUDE = (
    "set -u\n"
    f"o=${{PATH:-{SANDBOX_PATH}}}\nh=${{HOME:-}}\nPATH={TRUSTED_PATH}\n"
    "unset -v BASH_ENV ENV CDPATH GLOBIGNORE PROMPT_COMMAND\n"
    "IFS=$' \\t\\n'\n"
)


def run_script(
    language: str,
    code: str,
    timeout_s: float,
    *,
    run_dir: str = RUN_DIR,
    work_dir: str = WORK_DIR,
    network: bool = False,
    new_token: Callable[[], str] = lambda: secrets.token_hex(8),
) -> str:
    """The BASH command that runs one snippet, without network unless `network`.

    The snippet travels in a quoted heredoc (no expansion) whose delimiter does not occur in
    the code; it is written to `run_dir`, or under $TMPDIR where that is not writable.
    `timeout -s KILL` kills the snippet's whole process group at the limit, and itself, so
    the wrapper exits 137. A TERM, INT or HUP to the wrapper (a terminate) kills that group
    too: `timeout` runs in the background and the wrapper waits for it.
    """
    if (problem := unsupported_language(language)) is not None:
        return _fail_script(problem)
    extension = INTERPRETERS[language].extension
    token = _token(code, new_token)
    q = shlex.quote
    return (
        PRELUDE + f"d={q(run_dir)}\n"
        '{ mkdir -p "$d" && [ -w "$d" ]; } 2>/dev/null || d="${TMPDIR:-/tmp}/.sci-run"\n'
        'mkdir -p "$d" || exit 1\n'
        f"mkdir -p {q(work_dir + '/out')} 2>/dev/null\n"
        f'f="$d/{token}.{extension}"\n'
        + _heredoc('"$f"', code, token)
        + _find_program(language)
        + _supervised('"$p" "$f"', timeout_s, work_dir, cleanup='rm -f "$f"', network=network)
    )


def clear_way_script(target: str, work_dir: str = WORK_DIR) -> str:
    """The BASH command, run before an upload to `target`, that removes the links model
    code may have left in its way (Buddy's upload would follow them): at `target`, or in
    place of a folder between `work_dir` and it. It prints `removed` if it removed any."""
    return PRELUDE + _clear_way(target, work_dir) + " || exit 1\n"


def _clear_way(target: str, work_dir: str) -> str:
    """A subshell that removes the links at `target` and in place of the folders on its
    way from `work_dir` (the caller's cwd stays)."""
    q = shlex.quote
    relative = posixpath.relpath(posixpath.dirname(target), work_dir)
    lines = [f"cd -P {q(work_dir)} || exit 1"]
    for part in [] if relative == "." else relative.split("/"):
        lines += [_unlink(part), f"cd -P {q(part)} 2>/dev/null || exit 0"]  # made next
    return "(\n" + "\n".join([*lines, _unlink(posixpath.basename(target))]) + "\n)"


def _unlink(name: str) -> str:
    word = shlex.quote(name)
    return f"if [ -L {word} ]; then rm -f -- {word} && echo removed; fi"


# -- the kernel's scripts (see `kernel`) --

KERNEL_MEMORY_SHARE = 0.75  # of the sandbox's memory: past it, MemoryError, state kept
CELL_POLL_S = 0.05
READER_EXTRA_S = 10.0  # a cell's reader outlives the kernel's hand-off by this much
ABSENT = '{"t": "absent"}'  # the frame a cell script sends when no kernel is there


def kernel_script(
    folder: str,
    *,
    output_bytes: int,
    timeout_s: float,
    work_dir: str = WORK_DIR,
    network: bool = False,
    new_token: Callable[[], str] = lambda: secrets.token_hex(8),
) -> str:
    """The BASH command that starts a kernel: its files are written to `folder`, then it
    runs as a snippet does (clean environment, no network unless `network`, its process
    group killed on terminate) and serves cells through the FIFO it makes there. Links
    model code left in place of the folder or above it are removed first; the files are
    written only once in the folder for real."""
    q = shlex.quote
    files = ""
    for name, data in KERNEL_FILES.items():  # in the folder, the cwd by then
        text = data.decode()
        files += _heredoc(q(name), text, _token(text, new_token))
    args = (
        f"--fifo {q(folder)} --output-bytes {output_bytes} "
        f"--memory-share {KERNEL_MEMORY_SHARE} --out-dir {q(work_dir + '/out')}"
    )
    command = f'"$p" {q(f"{folder}/{KERNEL_MAIN}")} {args}'
    return (
        PRELUDE
        + f"k={q(folder)}\n"
        + _clear_way(folder, work_dir)
        + " >/dev/null || exit 1\n"
        + f"mkdir -p {q(folder)} || exit 1\n"
        + f"{_in_folder(folder, work_dir)} || exit 1\n"
        + "set -C\n"  # noclobber: each file is made new, never written through a link
        + files
        + _find_program("python")
        + _supervised(command, timeout_s, work_dir, cleanup=":", network=network)
    )


def cell_script(
    folder: str,
    cell: Cell,
    *,
    wait_s: float,
    hand_off_s: float,
    work_dir: str = WORK_DIR,
    new_token: Callable[[], str] = lambda: secrets.token_hex(8),
) -> str:
    """The BASH command that hands one cell to the kernel in `folder` and streams the
    cell's frames back as its own output, for `hand_off_s` at most: the kernel then ends
    the stream with a "more" frame, and `resume_script` reads on. A kernel holds
    folder/lock while it lives; the script waits up to `wait_s` for one, else it says the
    kernel is absent.

    Model code can write the folder: the script works in it only once it is in it for
    real (not through a link), never writes through a link or onto a file there, and takes
    a kernel whose FIFO is not one for absent (the bot then starts another)."""
    q = shlex.quote
    source, out = f"{cell.id}.py", f"{cell.id}.out"  # in the folder, the script's cwd
    request = run_request(cell, file=f"{folder}/{source}", out=f"{folder}/{out}", more_s=hand_off_s)
    tries = round(wait_s / CELL_POLL_S)
    absent = f"{{ echo {q(ABSENT)}; exit 0; }}"
    return (
        PRELUDE + f"k={q(folder)}\ni=0\n"
        "while :; do\n"
        f"  if {_in_folder(folder, work_dir)}; then\n"
        "    [ -L lock ] || flock -n -E 75 lock true 2>/dev/null\n"
        "    [ $? = 75 ] && break\n"
        "  fi\n"
        f'  [ "$i" -ge {tries} ] && {absent}\n'
        f"  i=$((i + 1))\n  sleep {CELL_POLL_S}\n"
        "done\n"
        f"{{ {_fifo('in')}; }} || {absent}\n"
        "set -C\n"  # noclobber: the cell's file is made new (O_EXCL), not written through
        + _heredoc(q(source), cell.code, _token(cell.code, new_token))
        + f"mkfifo {q(out)} || exit 1\n"
        + _send_to_kernel(request.decode().strip())
        + _read_frames(out, hand_off_s)
    )


def resume_script(
    folder: str, cell: Cell, hand_offs: int, *, hand_off_s: float, work_dir: str = WORK_DIR
) -> str:
    """The BASH command that reads on from a cell whose reader was handed off `hand_offs`
    times: it makes the FIFO the kernel waits for (OUT.N), in place of anything cell code
    left there, and reads it. Nothing if the cell's own FIFO is gone (the kernel ended the
    cell without a reader)."""
    q = shlex.quote
    out = f"{cell.id}.out"
    reader = q(f"{out}.{hand_offs}")
    return (
        PRELUDE
        + f"k={q(folder)}\n"
        + f"{_in_folder(folder, work_dir)} && {_fifo(out)} || exit 0\n"
        + f"rm -f {reader}; mkfifo {reader} || exit 0\n"
        + _read_frames(f"{out}.{hand_offs}", hand_off_s)
    )


def _fifo(name: str) -> str:
    """A test that `name`, in the current folder, is a FIFO and not a link to one."""
    return f"[ -p {shlex.quote(name)} ] && [ ! -L {shlex.quote(name)} ]"


def _read_frames(out: str, hand_off_s: float) -> str:
    """Copy a cell's FIFO to stdout until the kernel ends the stream (at a hand-off or the
    cell's end). The kill after READER_EXTRA_S more is for a kernel that never opens it."""
    return f"exec /usr/bin/timeout -s KILL {hand_off_s + READER_EXTRA_S:g} cat {shlex.quote(out)}\n"


def interrupt_script(folder: str, work_dir: str = WORK_DIR) -> str:
    """The BASH command that interrupts the kernel's running cell (if there is a kernel)."""
    return (
        PRELUDE
        + f"k={shlex.quote(folder)}\n"
        + f"{_in_folder(folder, work_dir)} && {_fifo('in')} || exit 0\n"
        + _send_to_kernel(INTERRUPT.decode().strip())
    )


def _in_folder(folder: str, work_dir: str) -> str:
    """A test that changes into `folder` ($k), true if that is the folder itself: no link
    on the way from `work_dir` (model code can replace any of them with one)."""
    tail = shlex.quote(posixpath.relpath(folder, work_dir))
    real = f'"$(cd -P {shlex.quote(work_dir)} && pwd -P)"/{tail}'
    return f'cd -P "$k" 2>/dev/null && [ "$(pwd -P)" = {real} ]'


def _send_to_kernel(request: str) -> str:
    """Opened for reading and writing, the kernel's FIFO (./in) never blocks the writer.
    What was opened is checked to be a FIFO before anything is written to it."""
    return (
        "exec 3<>in\n"
        '[ -p /proc/self/fd/3 ] || { echo "the kernel\'s FIFO is not one" >&2; exit 1; }\n'
        f"printf '%s\\n' {shlex.quote(request)} >&3\nexec 3>&-\n"
    )


def _supervised(
    command: str, timeout_s: float, work_dir: str, cleanup: str, *, network: bool
) -> str:
    """Run `command` in `work_dir` with a clean environment (and no network unless
    `network`), killed with its whole process group at `timeout_s` or when the wrapper is
    terminated; `cleanup` runs either way. `unshare` execs the command: same process group."""
    q = shlex.quote
    command = command if network else offline(command)
    return (
        f"cd {q(work_dir)} || exit 1\n"
        "c=\n"
        f"""trap '[ -z "$c" ] || kill -KILL -- "-$c" "$c" 2>/dev/null; {cleanup}; exit 143' """
        "TERM INT HUP\n"
        f"/usr/bin/timeout -s KILL {max(timeout_s, 0.001):.3f} "
        f'/usr/bin/env -i PATH="$o" HOME={q(work_dir)} {SNIPPET_VARS} {command} &\n'
        "c=$!\n"
        "exec 2>/dev/null\n"  # the snippet keeps its stderr; bash's "Killed" notice is dropped
        'wait "$c"\n'
        "r=$?\n"
        f"{cleanup}\n"
        'exit "$r"\n'
    )


def _find_program(language: str) -> str:
    """Sets $p to the interpreter, or exits as a shell does for a missing program."""
    missing = shlex.quote(not_installed(language))
    program = INTERPRETERS[language].program
    found = f'p=$(PATH="$o" command -v {program})'
    return f"{found} || {{ echo {missing} >&2; exit {NOT_FOUND_EXIT}; }}\n"


def _heredoc(target: str, content: str, token: str) -> str:
    """Write `content` verbatim to `target` (a shell word); `token` must not occur in it."""
    body = content if content.endswith("\n") else content + "\n"
    return f"cat > {target} <<'SCI_{token}' || exit 1\n{body}SCI_{token}\n"


def _token(content: str, new_token: Callable[[], str]) -> str:
    """A heredoc token whose delimiter (SCI_<token>) does not occur in `content`."""
    token = new_token()
    while f"SCI_{token}" in content:
        token = new_token()
    return token


def _fail_script(message: str) -> str:
    """A command that reports `message` like a shell would for a missing program."""
    return f"echo {shlex.quote(message)} >&2\nexit {NOT_FOUND_EXIT}\n"
