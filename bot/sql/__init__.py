"""SQL connections: declared by an operator, checked, read-only, streamed into the sandbox."""
