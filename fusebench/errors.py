"""Errors that reach the user as one line (see ``fusebench.cli``)."""


class UsageError(Exception):
    """Bad input from the user: unknown op, backend, shape or dtype. Exit status 2."""


class SkipCase(Exception):
    """A case this machine or backend cannot run; the message is the reason."""
