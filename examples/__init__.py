"""Runnable examples (see README.md here); a package only so the tests can import the apps."""
