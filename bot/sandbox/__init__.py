"""Sandboxes that run the model's code: `base` holds the protocols, data types and the
rules every backend shares; `local` (bubblewrap on this host) and `buddy` (Buddy.Works
sandboxes over REST) are the backends and never import each other. `kernel` is the Python
kernel both keep per sandbox (each adds only a transport); `output` and `limits` are shared
helpers.
"""
