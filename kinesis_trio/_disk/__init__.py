"""Blocking disk I/O (the spool's SQLite store), run off the event loop by the shell."""
