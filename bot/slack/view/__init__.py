"""What a thread shows of a run: the run view, its two styles, and what comes around an
answer (files, tables, charts, the canvas, Slack's agent sessions)."""
