"""Typed errors: the library raises these, the CLI turns them into exit codes."""
from __future__ import annotations


class HepowerError(Exception):
    """Base class of every error the library raises on purpose."""


class InputError(HepowerError, ValueError):
    """Bad input from the user (a value, a file, an option): CLI exit code 2."""


class BackendUnavailableError(HepowerError, RuntimeError):
    """A requested backend (R, lme4, rpy2, ...) cannot be used here: CLI exit code 2."""


class NotAttainableError(HepowerError):
    """A solver's target cannot be reached; ``reason`` says why."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C (or SIGTERM); the message says what was kept and how to resume. CLI exit 130."""
