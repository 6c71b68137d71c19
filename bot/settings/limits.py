"""Limits: what one sandbox call, one sandbox, one answer, one thread and one person may use."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator


class LimitSettings(BaseModel):
    sandbox_disk_bytes: int = Field(
        default=5 << 30,
        gt=0,
        description=(
            "disk quota of one local session's folders (`/buddy/work`, `/buddy/data`, each "
            "container's `/tmp` and `/dev/shm`): one file can be no larger; whenever anything "
            "of the session runs (a call, the kernel between cells, a background job) and the "
            "folders pass it, everything in the sandbox is stopped (the model is told); an "
            "upload that would pass it is refused"
        ),
    )
    sandbox_max_files: int = Field(
        default=200_000,
        gt=0,
        description=(
            "inodes (files, folders, links) a local session's folders may hold, under the same "
            "watch as the disk quota"
        ),
    )
    sandbox_memory_bytes: int = Field(
        default=8 << 30,
        gt=0,
        description=(
            "memory of all of a local sandbox's processes together, RAM-backed files included "
            "(needs root and cgroup v1's memory controller; else only the 4 GB per process "
            "holds)"
        ),
    )
    sandbox_max_commands: int = Field(
        default=8,
        gt=0,
        description=(
            "background jobs (`detached: true`) running at once in one local sandbox; one more "
            "is refused with a note to the model"
        ),
    )
    output_file_max_bytes: int = Field(
        default=50 << 20,
        gt=0,
        description=(
            "an answer's files (`report.md`, `out/`), on both backends and front ends: one "
            "larger than the first is left out, and, in name order, each that would take the "
            "answer's files past the second in all. Sizes are what the files read as (a sparse "
            "file counts in full, though it holds no disk), from the listing and again from the "
            "bytes read. The thread (or terminal) names what was left out and why"
        ),
    )
    output_total_max_bytes: int = Field(
        default=200 << 20,
        gt=0,
        description=(
            "an answer's files (`report.md`, `out/`), on both backends and front ends: one "
            "larger than the first is left out, and, in name order, each that would take the "
            "answer's files past the second in all. Sizes are what the files read as (a sparse "
            "file counts in full, though it holds no disk), from the listing and again from the "
            "bytes read. The thread (or terminal) names what was left out and why"
        ),
    )
    sandbox_cpu_s: int = Field(
        default=300,
        ge=1,
        description=(
            "CPU seconds one call, kernel cell or background job may use, all its processes "
            "together (local): past it plus 5 s the bot kills them and tells the model; also "
            "each process's `RLIMIT_CPU`"
        ),
    )
    sandbox_cpus: float | None = Field(
        default=None,
        gt=0,
        description=(
            "cores one local sandbox may keep busy at once (needs root and cgroup v1's cpu "
            "controller, which also gives each sandbox an equal share); unset: no cap"
        ),
    )
    sandbox_process_memory_bytes: int = Field(
        default=4 << 30,
        ge=64 << 20,
        description=(
            "per local process: data memory (`RLIMIT_DATA`), processes per sandbox "
            "(`RLIMIT_NPROC`, per uid), open files, and the largest file (never more than "
            "`SANDBOX_DISK_BYTES`)"
        ),
    )
    sandbox_processes: int = Field(
        default=256,
        ge=16,
        description=(
            "per local process: data memory (`RLIMIT_DATA`), processes per sandbox "
            "(`RLIMIT_NPROC`, per uid), open files, and the largest file (never more than "
            "`SANDBOX_DISK_BYTES`)"
        ),
    )
    sandbox_file_bytes: int = Field(
        default=1 << 30,
        gt=0,
        description=(
            "per local process: data memory (`RLIMIT_DATA`), processes per sandbox "
            "(`RLIMIT_NPROC`, per uid), open files, and the largest file (never more than "
            "`SANDBOX_DISK_BYTES`)"
        ),
    )
    sandbox_open_files: int = Field(
        default=1024,
        ge=64,
        description=(
            "per local process: data memory (`RLIMIT_DATA`), processes per sandbox "
            "(`RLIMIT_NPROC`, per uid), open files, and the largest file (never more than "
            "`SANDBOX_DISK_BYTES`)"
        ),
    )
    sandbox_output_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        description="output kept per call and stream, head and tail (both backends)",
    )
    sandbox_command_max_s: float = Field(
        default=6 * 3600,
        gt=0,
        description="wall-clock cap of one background job (both backends)",
    )
    max_file_bytes: int = Field(
        default=200 << 20,
        gt=0,
        description="limits on the files a thread takes in",
    )
    max_files_per_thread: int = Field(
        default=20,
        gt=0,
        description="limits on the files a thread takes in",
    )
    max_cost_usd_per_run: float = Field(
        default=2.0,
        gt=0,
        description="budgets (model cost at list price)",
    )
    max_cost_usd_per_thread: float = Field(
        default=10.0,
        gt=0,
        description="budgets (model cost at list price)",
    )
    max_cost_usd_per_user_day: float = Field(
        default=25.0,
        gt=0,
        description="budgets (model cost at list price)",
    )

    @field_validator("sandbox_cpus", mode="before")
    @classmethod
    def _blank_cpus_is_no_cap(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value
