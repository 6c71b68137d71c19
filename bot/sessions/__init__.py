"""Sessions: one per conversation (a Slack thread, a terminal run), owning a sandbox."""
