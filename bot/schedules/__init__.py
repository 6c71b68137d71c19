"""Scheduled analyses: a thread's question rerun on a cron schedule, fired exactly once."""
