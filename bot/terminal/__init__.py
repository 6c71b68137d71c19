"""The terminal front end: `python -m bot ask`."""
