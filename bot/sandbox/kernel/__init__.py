"""The Python kernel each sandbox keeps, so that variables, imports and loaded data stay
between calls, as in a notebook.

`inside/` holds the program that runs inside the sandbox (standard library only, never
imported here; its modules keep the `sci_kernel` prefix because inside they are top-level
modules a cell could import by name, and a model's `import charts` must not find ours);
`frames` is the bot's side of its protocol; `runner` is the control both
backends share (start on first use, time limits, interrupt, kill, what the model is told).
Each backend adds only a transport: `local.kernel` (a long-lived container's pipes) and
`buddy.kernel` (tracked commands that reach the kernel through a FIFO in the sandbox).
"""
