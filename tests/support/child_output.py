"""Reading a child process's output while the test waits on it."""

from __future__ import annotations

import queue
import subprocess
import threading


def line_queue(proc: subprocess.Popen) -> queue.Queue[str]:
    """The process's stdout lines as they come, read by a daemon thread that closes the pipe at its end (an
    open pipe left to the garbage collector warns in whichever later test the collection happens)."""
    lines: queue.Queue[str] = queue.Queue()
    out = proc.stdout
    assert out is not None, "start the process with stdout=subprocess.PIPE, text=True"

    def pump() -> None:
        with out:
            for line in out:
                lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines
