"""What the model is told about the Python kernel after a cell: that its variables are gone
(and why), or that an interrupt or a memory error left them in place."""

from __future__ import annotations

from bot.sandbox.base import WORK_DIR, ExecResult

KEPT = f"files in {WORK_DIR} kept"
RESTARTED_AS_ASKED = "The Python kernel was restarted as asked: variables from earlier calls gone."
FRESH = f"Note: this ran in a fresh Python kernel: variables from earlier calls gone, {KEPT}."
MEMORY_HINT = (
    "The cell ran out of memory (MemoryError) and the kernel kept its state: free what you no "
    "longer need (del, gc.collect()) or load less (usecols, dtype, chunksize), or restart it."
)


def kernel_note(result: ExecResult, timeout_s: float | None) -> str:
    """The note for this cell's result ("" when there is nothing to say)."""
    limit = f"its {timeout_s:g} s limit" if timeout_s is not None else "its time limit"
    match result.kernel:
        case "fresh":
            return FRESH
        case "interrupted":
            return (
                f"The cell ran past {limit} and was interrupted (KeyboardInterrupt): interrupted, "
                "state kept. What it set before the interrupt is still there."
            )
        case "restarted":
            return (
                f"The cell ran past {limit} and did not stop when interrupted: kernel restarted, "
                f"variables gone, {KEPT}."
            )
        case "died":
            return (
                f"The Python kernel died ({result.kernel_note}): variables gone, {KEPT}. The next "
                "Python call starts a fresh kernel."
            )
        case "kept" | "started" if "MemoryError" in result.stderr.text[-2000:]:
            return MEMORY_HINT
    return ""
