"""A time limit for one conformance case, so a case that hangs fails with where it was instead of
holding a whole run (issue 14, item 7: on torch 2.11, the GPU machines' version, compiling cumprod's
backward along a 20,000-long dim never finished, and every GPU run waited for it until the call's limit).

The limit is a SIGALRM timer that raises `CaseTimeLimit` in the test's thread. It derives from
BaseException so that no `except Exception` on the way (torch.compile's, the runner's) swallows it; the
plugin turns it into the case's AssertionError, which the ledger can expect like any other failure.
"""

from __future__ import annotations

import signal
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager


class CaseTimeLimit(BaseException):
    """The case ran past its time limit."""


def _where(frame, lines: int = 6) -> str:
    stack = traceback.format_stack(frame)[-lines:]
    return "".join(stack).rstrip()


@contextmanager
def case_time_limit(seconds: float) -> Iterator[None]:
    """Raise CaseTimeLimit in this thread after `seconds` (0: no limit, or where no SIGALRM exists)."""
    usable = (
        seconds > 0 and hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise CaseTimeLimit(
            f"the case ran past its time limit of {seconds:g} s (--case-time-limit); it was in:\n{_where(frame)}"
        )

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
