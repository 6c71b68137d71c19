"""The `Store` seam: durable session state, so a thread can resume after a restart or crash.

Kept small and record-shaped so that a shared store (Redis) for several replicas can
implement it as well as the local SQLite one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from bot.errors import ConfigError

# active: has a sandbox. idle: its sandbox was destroyed after quiet time. closed: its
# sandbox is gone for another reason. An idle or closed session resumes on the next message.
SessionState = Literal["active", "idle", "closed"]
SESSION_STATES: tuple[SessionState, ...] = ("active", "idle", "closed")

RunOutcome = Literal["finished", "failed", "stopped", "interrupted"]
RUN_OUTCOMES: tuple[RunOutcome, ...] = ("finished", "failed", "stopped", "interrupted")

# The session fields `update_session` may change; the rest are fixed when it is made.
SESSION_UPDATABLE = frozenset(
    {"sandbox_id", "state", "last_activity", "repo_url", "canvas", "chart_files"}
)


class StoreError(Exception):
    """The store cannot do what was asked (not open, schema too new, ...)."""


class NotFound(StoreError, LookupError):
    """A write refers to a session or run that is not in the store."""


class Fenced(StoreError):
    """A write for a thread carried a fencing token older than the thread's current one:
    another replica has taken the thread over since, so this one must stop writing for it."""


class StoreConfigError(StoreError, ConfigError):
    """The store cannot be opened as configured (a server that cannot be reached, a refused
    login); the message is one line naming the setting to fix."""


@dataclass(frozen=True)
class SessionRecord:
    # The front end's name for the thread ("team:channel:thread_ts" in Slack,
    # "terminal:NAME" in the terminal): opaque to the engine and to the store.
    key: str
    sandbox_id: str | None
    state: SessionState
    repo_url: str | None
    created_at: float  # Unix time
    last_activity: float
    cost_usd: float = 0.0  # the sum of its turns' costs; ignored by save_session
    granted_usd: float = 0.0  # Continue allowances added to its budget; ignored by save_session
    # The latest model turn's prompt (input + cache writes + cache reads) and the model's
    # context window then (0: not known); set by add_turn, ignored by save_session.
    prompt_tokens: int = 0
    window_tokens: int = 0
    # The thread's report canvas, as the Slack side wrote it (its id and what it holds, JSON;
    # "" for none); set by update_session, ignored by save_session.
    canvas: str = ""
    # The chart images the bot shared in the thread (JSON: {Slack file id: name}; "" for
    # none), so a notebook takes its own charts only; set by update_session.
    chart_files: str = ""


@dataclass(frozen=True)
class FileRecord:
    """A file the thread took in."""

    slack_file_id: str
    name: str
    size: int
    sha256: str
    sandbox_path: str
    source: dict[str, Any]  # enough to fetch it again: the Slack file object
    cards: list[dict[str, Any]] = field(default_factory=list)  # its data cards, as JSON


@dataclass(frozen=True)
class ToolCallRecord:
    """The audit record of one tool call."""

    run_id: str
    call_id: str
    tool: str
    language: str | None
    code: str
    status: str
    exit_code: int | None
    duration_s: float
    excerpt: str
    at: float


@dataclass(frozen=True)
class RunRecord:
    key: str
    run_id: str
    question: str
    started_at: float
    ended_at: float | None
    outcome: RunOutcome | None  # None while in flight
    user: str = ""  # who asked
    stopped_by: str | None = None  # who pressed Stop, once someone has
    # What the answer said of its figures: each {"text", "step" (None: in no output),
    # "line", "call_id", "earlier" (questions back of the step's run; 0: this run)}; set by
    # record_figures.
    figures: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class FeedbackRecord:
    """One click of an answer's feedback buttons."""

    run_id: str
    user: str
    value: str  # good | bad
    at: float


@dataclass(frozen=True)
class Queued:
    """A question waiting for its thread's current run to end."""

    id: int  # increasing: the order questions arrived in
    question: str
    user: str
    at: float


@dataclass(frozen=True)
class Pruned:
    """What a prune removed (or, on a dry run, would remove): sessions with all they held,
    and runs with their tool calls and feedback (those of the sessions removed included)."""

    sessions: int = 0
    runs: int = 0
    tool_calls: int = 0
    feedback: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(
            self.sessions + other.sessions,
            self.runs + other.runs,
            self.tool_calls + other.tool_calls,
            self.feedback + other.feedback,
        )


# proposed: shown with Confirm and Cancel, never fired; active: fires; paused: kept, not fired.
ScheduleState = Literal["proposed", "active", "paused"]
SCHEDULE_STATES: tuple[ScheduleState, ...] = ("proposed", "active", "paused")
# The schedule fields `update_schedule` may change; the rest are fixed when it is made.
SCHEDULE_UPDATABLE = frozenset(
    {"state", "paused_why", "cron", "zone", "question", "failures", "run_now_at"}
)


@dataclass(frozen=True)
class ScheduleRecord:
    """A question rerun in a thread on a cron schedule, in its owner's time zone."""

    id: str
    key: str  # the thread it posts in (opaque, as a session's key)
    owner: str  # who confirmed it
    cron: str  # five fields
    zone: str  # IANA
    question: str
    created_at: float
    state: ScheduleState = "active"
    paused_why: str = ""
    last_fire_at: float | None = None  # the newest firing claimed (its due time); by claims
    failures: int = 0  # firings failed in a row; by end_firing
    # A firing asked for outside the cadence (Retry, run-now), due at this time: fired once.
    run_now_at: float | None = None
    # thread: each firing is a run of the thread; channel: a new message in the channel,
    # the run in its thread
    post_as: str = "thread"


@dataclass(frozen=True)
class FiringRecord:
    """One firing of a schedule: claimed once, by one replica, for one due time."""

    schedule_id: str
    fire_at: float  # the due time, Unix time (UTC)
    claimed_by: str
    claimed_at: float
    outcome: str = ""  # "" while it goes; then a RunOutcome, or "skipped"
    run_id: str = ""
    cost_usd: float = 0.0  # what its run cost


@dataclass(frozen=True)
class NoteRecord:
    """A note a person saved for a place (a channel, or a DM): text, who, when."""

    id: str
    place: str  # "team:channel": the notes of one channel are never read in another
    text: str
    saved_by: str
    saved_at: float


@dataclass(frozen=True)
class DefinitionRecord:
    """A step of a finished run saved under a name for a channel: its code (the SQL of a
    query, or a cell) and the figures it computed, for later runs to reuse."""

    place: str  # "team:channel"
    name: str
    tool: str  # run_sql | run_code
    language: str
    code: str
    figures: tuple[str, ...]
    run_id: str
    saved_by: str
    saved_at: float


class SessionStore(Protocol):
    """A thread's session: its record, its conversation."""

    async def save_session(self, record: SessionRecord) -> None:
        """Insert or replace the session's fields; its history, files and runs are kept."""
        ...

    async def get_session(self, key: str) -> SessionRecord | None: ...

    async def list_sessions(self) -> list[SessionRecord]:
        """All sessions, the most recently active first."""
        ...

    async def update_session(self, key: str, *, token: int | None = None, **fields: Any) -> None:
        """Change some of SESSION_UPDATABLE: sandbox_id, state, last_activity, repo_url,
        canvas, chart_files."""
        ...

    async def save_history(
        self,
        key: str,
        messages: list[dict[str, Any]],
        *,
        token: int | None = None,
        archive: dict[str, Any] | None = None,
    ) -> None:
        """Replace the conversation (any JSON-able messages). `archive`: what this save
        replaces (cleared or compacted turns, as they were), kept in the same write."""
        ...

    async def archived_history(self, key: str) -> list[dict[str, Any]]:
        """Every `archive` saved for the session, oldest first."""
        ...

    async def load_history(self, key: str) -> list[dict[str, Any]]:
        """The conversation, or [] when none was saved."""
        ...


class FileStore(Protocol):
    """The files a session took in."""

    async def add_file(self, key: str, file: FileRecord, *, token: int | None = None) -> None: ...

    async def files(self, key: str) -> list[FileRecord]:
        """The session's files in the order they were taken in."""
        ...


class RunStore(Protocol):
    """Runs and their audit: turns, tool calls, figures, feedback, spend."""

    async def start_run(
        self,
        key: str,
        run_id: str,
        question: str,
        at: float,
        user: str = "",
        *,
        token: int | None = None,
    ) -> None: ...

    async def end_run(
        self, run_id: str, outcome: RunOutcome, at: float, *, token: int | None = None
    ) -> None:
        """Record how a run ended; a run already ended keeps its first outcome."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def runs(self, key: str) -> list[RunRecord]:
        """The session's runs that reached the model (a turn recorded), oldest first."""
        ...

    async def record_figures(
        self, run_id: str, figures: list[dict[str, Any]], *, token: int | None = None
    ) -> None:
        """Keep with the run what its answer's figures were traced to (JSON objects);
        NotFound if there is no such run. The token is checked against the run's thread."""
        ...

    async def request_stop(self, run_id: str, by: str) -> RunRecord | None:
        """Note who stopped a run still in flight (the first one counts); None if it is not
        in flight."""
        ...

    async def runs_in_flight(self) -> list[RunRecord]:
        """Runs started and never ended (their process died), the oldest first."""
        ...

    async def add_turn(
        self,
        key: str,
        run_id: str,
        usage: dict[str, int],
        cost_usd: float | None,
        at: float,
        *,
        token: int | None = None,
        window_tokens: int | None = None,
    ) -> None:
        """Record one model turn's token usage and cost (None when the price is unknown);
        its prompt size, and `window_tokens` (the model's context window), become the
        session's `prompt_tokens` and `window_tokens`."""
        ...

    async def add_tool_call(
        self, key: str, call: ToolCallRecord, *, token: int | None = None
    ) -> None: ...

    async def tool_calls(self, key: str) -> list[ToolCallRecord]:
        """The session's tool calls in the order they were recorded."""
        ...

    async def add_feedback(self, run_id: str, user: str, value: str, at: float) -> None:
        """Record what `user` thought of a run's answer."""
        ...

    async def feedback(self, key: str) -> list[FeedbackRecord]:
        """The feedback on the session's runs, oldest first."""
        ...

    async def spent(
        self, *, key: str | None = None, user: str | None = None, since: float = 0.0
    ) -> float:
        """USD spent by model turns since `since`, in a session and/or by a user's runs."""
        ...


class CoordinationStore(Protocol):
    """What replicas and racing clicks agree on: fencing tokens, a thread's queue of
    questions, and Continue allowances granted once."""

    async def fence(self, key: str) -> int:
        """A new fencing token for the thread, greater than any before it (a counter per
        thread, kept by the store); writes carrying an older one are refused from now on."""
        ...

    async def enqueue(
        self, key: str, question: str, user: str, at: float, *, token: int | None = None
    ) -> int:
        """Queue a question for the session's next run; returns its id."""
        ...

    async def take_queued(self, key: str, *, token: int | None = None) -> list[Queued]:
        """Remove and return one run's worth of the session's waiting questions: the oldest,
        with those right after it from the same asker, the oldest first."""
        ...

    async def grant(self, key: str, usd: float, *, token: int | None = None) -> None:
        """Add a Continue allowance to the session's budget."""
        ...

    async def grant_once(
        self, key: str, grant_id: str, usd: float, *, token: int | None = None
    ) -> bool:
        """`grant`, only the first time `grant_id` (one Continue button) is used: True if
        this call granted it. Atomic, so racing clicks or replicas grant it once."""
        ...


class UpkeepStore(Protocol):
    """Connecting, and what the reaper reads and retention removes."""

    async def open(self) -> None:
        """Connect, and create or upgrade the schema."""
        ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """A cheap round trip to the backing store (a health check); raises StoreError when
        it does not answer."""
        ...

    async def sessions_holding_sandboxes(
        self, quiet_since: float | None = None
    ) -> list[SessionRecord]:
        """The sessions whose record names a sandbox, last active at or before `quiet_since`
        (None: whenever), the most recently active first. Read from an index of those
        sessions alone, so its cost does not grow with the sessions done long ago."""
        ...

    async def prune(
        self,
        sessions_before: float | None,
        runs_before: float | None,
        *,
        dry_run: bool = False,
    ) -> Pruned:
        """Delete the sessions done before `sessions_before` (last active before it, no
        sandbox, no run in flight) with everything they hold, and the runs that ended before
        `runs_before` with their turns, tool calls and feedback; None keeps them. Works in
        small batches, each checked again as it is deleted, so a session that came back to
        life meanwhile stays, and two processes pruning at once are harmless. `dry_run`:
        only count."""
        ...

    async def vacuum(self) -> None:
        """Give the space pruning freed back to the file system (SQLite's VACUUM; Redis
        frees its memory itself)."""
        ...


class ScheduleStore(Protocol):
    """Schedules, and their firings, each claimed exactly once across replicas."""

    async def save_schedule(self, record: ScheduleRecord) -> None:
        """Insert or replace the schedule (its firings are kept)."""
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None: ...

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, the oldest first."""
        ...

    async def update_schedule(self, schedule_id: str, **fields: Any) -> None:
        """Change some of SCHEDULE_UPDATABLE; NotFound if there is no such schedule."""
        ...

    async def delete_schedule(self, schedule_id: str) -> None:
        """Remove the schedule with its firings (nothing when it is gone already)."""
        ...

    async def claim_firing(self, schedule_id: str, fire_at: float, by: str, at: float) -> bool:
        """Claim the firing due at `fire_at`: True for exactly one caller, however many
        replicas race (and False for a schedule that is gone). The schedule's
        `last_fire_at` becomes `fire_at` if that is newer."""
        ...

    async def end_firing(
        self,
        schedule_id: str,
        fire_at: float,
        outcome: str,
        run_id: str = "",
        cost_usd: float = 0.0,
    ) -> int:
        """Record how a firing ended, and what its run cost; returns the schedule's
        failures in a row after it (a finished firing sets it to 0, a failed one adds 1)."""
        ...

    async def firings(self, schedule_id: str, limit: int = 20) -> list[FiringRecord]:
        """The schedule's latest firings, the newest first."""
        ...


class NoteStore(Protocol):
    """Channel memory: the notes people saved for a channel."""

    async def add_note(self, note: NoteRecord) -> None: ...

    async def notes(self, place: str) -> list[NoteRecord]:
        """The place's notes, the oldest first."""
        ...

    async def delete_note(self, place: str, note_id: str) -> bool:
        """Forget a note; False when it was not there."""
        ...

    async def save_definition(self, definition: DefinitionRecord) -> None:
        """Insert or replace the place's definition of that name."""
        ...

    async def definitions(self, place: str) -> list[DefinitionRecord]:
        """The place's definitions, by name."""
        ...

    async def delete_definition(self, place: str, name: str) -> bool:
        """Forget a definition; False when it was not there."""
        ...


@dataclass(frozen=True)
class PoolRecord:
    """A booted sandbox kept ready for a new thread (WARM_SANDBOXES), and when a thread
    took it (None: still free)."""

    sandbox_id: str
    added_at: float
    claimed_at: float | None = None


class PoolStore(Protocol):
    """The warm pool: sandboxes made ahead, each taken by one thread, whichever replica."""

    async def pool_add(self, sandbox_id: str, at: float) -> None: ...

    async def pool_claim(self, at: float) -> str | None:
        """Take the oldest free member, marked taken at `at`, in one step: two callers
        never get the same one. None when none is free."""
        ...

    async def pool(self) -> list[PoolRecord]:
        """Every member, free or taken, the oldest first."""
        ...

    async def pool_forget(self, sandbox_id: str) -> None:
        """Take the member out of the pool's records (gone, or long since taken)."""
        ...


class SnapshotStore(Protocol):
    """The snapshot a suspended thread resumes from (SESSION_IDLE_ACTION=snapshot)."""

    async def set_snapshot(self, key: str, snapshot_id: str | None) -> None:
        """Record the thread's snapshot, or (None) that it has none."""
        ...

    async def snapshot_of(self, key: str) -> str | None: ...

    async def snapshots(self) -> dict[str, str]:
        """Every thread's snapshot, by the thread's key."""
        ...


@runtime_checkable
class Store(
    SessionStore,
    FileStore,
    RunStore,
    CoordinationStore,
    UpkeepStore,
    ScheduleStore,
    NoteStore,
    PoolStore,
    SnapshotStore,
    Protocol,
):
    """Durable session state. Writes naming a session or run that does not exist raise NotFound.

    Fencing: the writes a thread's owner makes for it take a `token` from `fence`. A token
    older than the thread's newest is refused (Fenced) in the same step as the write, so a
    replica that lost the thread while paused cannot overwrite its new owner's work.
    `token=None` is not checked: one process alone, and inputs any replica may record (Stop
    clicks, feedback).

    One protocol per concern above; code that needs one concern takes that one."""
