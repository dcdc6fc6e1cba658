"""The two exceptions every layer raises for the command line to report.

``UsageError`` is bad input from the user (exit status 2); ``CheckFailed`` is a check that ran
and failed (RTL != golden model, timing not met: exit status 1). They live in ``models`` (the
lowest layer) so that models, pruning, hdl and cosim can all raise them; only the dispatcher in
``hwcosim.cosim.cli`` prints them, as one ``error: ...`` line on stderr, and sets the exit status.
"""

from __future__ import annotations

__all__ = ["UsageError", "CheckFailed"]


class UsageError(ValueError):
    """Bad input from the user: printed as one line naming the problem and the fix, exit status 2."""


class CheckFailed(RuntimeError):
    """A check that ran and failed (a mismatch, a failed timing, a design that does not fit): exit 1."""
