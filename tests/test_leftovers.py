"""The suite's check for sandbox processes that outlive it finds them."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.leftovers import survivors


def test_a_process_naming_a_sandbox_root_is_found_until_it_ends() -> None:
    root = Path(tempfile.gettempdir()) / "sandbox-root-leftover-probe"
    other = Path(tempfile.gettempdir()) / "sandbox-root-someone-else"
    # the shell's own command line names the root ($0); it waits for its sleep
    command = ["sh", "-c", "sleep 30; true", str(root / "lcl-1" / "work")]
    process = subprocess.Popen(command, start_new_session=True)
    try:
        for _ in range(250):  # until the child has exec'd `sleep` (until then, a forked
            # copy of the shell names the root too)
            if [pid for pid, _ in survivors([root])] == [process.pid]:
                break
            time.sleep(0.02)
        assert [pid for pid, _ in survivors([root])] == [process.pid]
        assert survivors([other]) == []
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert survivors([root], grace_s=1.0) == []
