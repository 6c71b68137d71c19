"""The suite's check for sandbox processes that outlive it finds them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.leftovers import survivors


def test_a_process_naming_a_sandbox_root_is_found_until_it_ends() -> None:
    root = Path(tempfile.gettempdir()) / "sandbox-root-leftover-probe"
    other = Path(tempfile.gettempdir()) / "sandbox-root-someone-else"
    # one process whose command line names the root (no fork, whose copy would name it too
    # until it exec'd); Popen may return before the new program's command line is set
    command = [sys.executable, "-c", "import time; time.sleep(60)", str(root / "lcl-1" / "work")]
    process = subprocess.Popen(command, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not survivors([root]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [pid for pid, _ in survivors([root])] == [process.pid]
        assert survivors([other]) == []
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert survivors([root], grace_s=1.0) == []
