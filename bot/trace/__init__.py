"""Tracing an answer's figures to the step outputs that printed them."""

from bot.trace.figures import Figure, Source, Trace, figures, summary, trace

__all__ = ["Figure", "Source", "Trace", "figures", "summary", "trace"]
