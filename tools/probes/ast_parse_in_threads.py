"""Is `ast.parse` safe in threads on this Python? Triton parses each kernel's source as it compiles it, so
the fuser's compile threads (`fuser.runtime.compile_pool`) parse side by side with each other and with
whatever else the process parses.

    python tools/probes/ast_parse_in_threads.py

Three threads parse one source again and again while a fourth makes garbage whose collection runs Python
code (a finalizer), so that a collection inside one thread's parse lets another thread run. On CPython 3.11
before 3.11.8 the parses share one depth counter, and some raise `SystemError: AST constructor recursion
depth mismatch` (CPython gh-106905): 2 of 3 threads within a second on 3.11.7 and 3.11.2 here. 3.12.1 and
3.13.0 raised none (3.12 collects between bytecodes, not inside a parse). Exits 1 where a parse failed.
"""

from __future__ import annotations

import ast
import sys
import threading
import time

SOURCE = "\n".join(
    f"def f{i}(a, b):\n    x = (a + b) * {i} - (a if b else b)\n    return [x, {{'k': x}}]\n"
    for i in range(300)
)


class _Finalized:
    def __init__(self):
        self.me = self  # a cycle: only a collection frees it

    def __del__(self):
        sum(range(50))  # Python code, run inside whatever collection frees it


def main() -> int:
    failures: list[str] = []
    stop = threading.Event()

    def parse() -> None:
        for _ in range(30):
            try:
                ast.parse(SOURCE)
            except SystemError as error:
                failures.append(str(error))
                return

    def make_garbage() -> None:
        while not stop.is_set():
            for _ in range(200):
                _Finalized()
            time.sleep(0)  # let the parsers run

    garbage = threading.Thread(target=make_garbage)
    garbage.start()
    parsers = [threading.Thread(target=parse) for _ in range(3)]
    for thread in parsers:
        thread.start()
    for thread in parsers:
        thread.join()
    stop.set()
    garbage.join()
    version = sys.version.split()[0]
    print(
        f"Python {version}: {len(failures)} of 3 threads' parses failed"
        + (f" ({failures[0]})" if failures else "")
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
