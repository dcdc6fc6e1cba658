"""The two exceptions every layer raises for the command line to report, and the one rule.

``UsageError`` is bad input from the user (exit status 2); ``CheckFailed`` is a check that ran
and failed (RTL != golden model, timing not met: exit status 1). They live in ``models`` (the
lowest layer) so that models, pruning, hdl and cosim can all raise them; only the dispatcher in
``hwcosim.cosim.cli`` prints them, as one line on stderr, and sets the exit status.

Every project exception that means "bad input" (a reader's own error class, a parameter that is
out of range, a missing tool) derives from :class:`UsageError`, and every one that means "a check
failed" from :class:`CheckFailed`. Anything else that reaches the dispatcher is a bug in hwcosim:
it prints the traceback and exits with :data:`BUG_EXIT` (70, ``EX_SOFTWARE``). A plain
``ValueError`` from numpy therefore no longer passes for bad input.
"""

from __future__ import annotations

__all__ = ["UsageError", "CheckFailed", "USAGE_EXIT", "CHECK_EXIT", "BUG_EXIT"]

#: Exit status of a check that ran and failed.
CHECK_EXIT = 1
#: Exit status of bad input (a refused option, file or parameter).
USAGE_EXIT = 2
#: Exit status of a bug in hwcosim (an exception that is neither of the two): ``EX_SOFTWARE``.
BUG_EXIT = 70


class UsageError(ValueError):
    """Bad input from the user: printed as one line naming the problem and the fix, exit status 2.

    A subclass of ``ValueError``, so library callers that catch ``ValueError`` keep working.
    """


class CheckFailed(RuntimeError):
    """A check that ran and failed (a mismatch, a failed timing, a design that does not fit): exit 1."""
