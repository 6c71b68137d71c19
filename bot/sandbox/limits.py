"""Per-call resource limits for the local sandbox, applied as rlimits with `prlimit(1)`."""

from __future__ import annotations

from dataclasses import dataclass

# V8 reserves about 10 GiB of (inaccessible) address space per WebAssembly memory, so the
# address-space limit is only a loose backstop; RLIMIT_DATA is the real memory limit.
ADDRESS_SPACE_FACTOR = 4
# Grace between the soft CPU limit (SIGXCPU, catchable) and the hard one (SIGKILL).
CPU_HARD_GRACE_S = 5
# After a Python cell is interrupted, how long it has to return before the kernel is killed.
KERNEL_GRACE_S = 3.0


@dataclass(frozen=True)
class Limits:
    # RLIMIT_CPU per process; also the budget of a call's, command's or cell's whole process
    # tree, watched from outside (local.cpu), plus CPU_HARD_GRACE_S
    cpu_s: int = 300
    cpus: float | None = None  # cores one sandbox may keep busy at once, where cgroups allow
    memory_bytes: int = 4 << 30  # RLIMIT_DATA: private writable memory per process
    sandbox_memory_bytes: int = 8 << 30  # all of a sandbox's memory, where cgroups allow
    processes: int = 256  # RLIMIT_NPROC, per host uid: per sandbox when the bot is root
    file_size_bytes: int = 1 << 30  # RLIMIT_FSIZE
    # RLIMIT_NOFILE, per process: the host's inherited hard limit (often 500k) times the
    # process cap could fill the host's whole file table (fs.file-max), for every session.
    open_files: int = 1024
    disk_bytes: int = 5 << 30  # a session's folders together (quota.py); caps one file too
    output_bytes: int = 1 << 20  # per captured stream: head + tail kept, the rest counted
    command_max_s: float = 6 * 3600  # wall-clock cap for detached commands
    max_commands: int = 8  # detached commands running at once in one sandbox
    max_files: int = 200_000  # inodes (files, folders, links) in a session's folders
    kernel_grace_s: float = KERNEL_GRACE_S

    @property
    def cpu_budget_s(self) -> int:
        """CPU seconds a call, detached command or cell may use, all its processes together."""
        return self.cpu_s + CPU_HARD_GRACE_S

    def prlimit_args(self, *, cpu: bool = True) -> list[str]:
        """Options for `prlimit` (each sets soft and hard limit unless given as soft:hard).
        Without `cpu` there is no CPU limit: a kernel sets its own, per cell."""
        return [
            f"--cpu={self.cpu_s}:{self.cpu_s + CPU_HARD_GRACE_S}" if cpu else "--cpu=unlimited",
            f"--data={self.memory_bytes}",
            f"--as={self.memory_bytes * ADDRESS_SPACE_FACTOR}",
            f"--nproc={self.processes}",
            f"--fsize={min(self.file_size_bytes, self.disk_bytes)}",
            f"--nofile={self.open_files}",
            "--core=0",
        ]
