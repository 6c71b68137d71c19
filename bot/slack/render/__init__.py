"""Pure functions from results to Slack payloads (blocks, stream chunks, canvas text, the
Show work modal) and the words the bot says: no I/O, no state."""
