"""The model side: a hand-written Claude tool-use loop over a `Sandbox`."""
