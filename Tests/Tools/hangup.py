#!/usr/bin/env python3
"""Runs a command on a terminal that then hangs up (test-only, stdlib only).

Usage: hangup.py [--nohup] WATCH_FILE MIN_BYTES TIMEOUT_S -- COMMAND [ARG...]

The command gets a fresh pseudo-terminal as its controlling terminal (stdin, stdout and
stderr; it leads its own session), as in a terminal window or an ssh session, with every
signal unblocked and at its default action as a shell starts it (default-signals.py says
why); with --nohup, SIGHUP is ignored, as `nohup` does. Once
WATCH_FILE holds at least MIN_BYTES, the terminal's master side is closed: the kernel
hangs the terminal up, sends the command SIGHUP, and every later write to the terminal
fails with EIO — what closing the window or losing the ssh connection does.

Prints one JSON object on stdout:
  {"hungUp": bool, "exitCode": int|null, "signal": int|null, "output": "..."}
"output" is what the command wrote to the terminal before the hang-up. If the command
has not ended TIMEOUT_S seconds after the hang-up (or never reached MIN_BYTES in
TIMEOUT_S), it is killed with SIGKILL and reported as such.
"""
import json
import os
import pty
import select
import signal
import sys
import time

DEFAULT_SIGNALS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default-signals.py")


def main():
    args = sys.argv[1:]
    nohup = args[:1] == ["--nohup"]
    if nohup:
        args = args[1:]
    if len(args) < 5 or args[3] != "--":
        sys.exit("usage: hangup.py [--nohup] WATCH_FILE MIN_BYTES TIMEOUT_S -- COMMAND [ARG...]")
    watch, min_bytes, timeout = args[0], int(args[1]), float(args[2])
    command = args[4:]
    pid, master = pty.fork()
    if pid == 0:
        try:
            # Through default-signals.py, which execs the command in this same process.
            os.execv(sys.executable, [sys.executable, DEFAULT_SIGNALS] + (["--nohup"] if nohup else []) + command)
        finally:
            os._exit(127)

    output = bytearray()
    hung_up = False
    deadline = time.monotonic() + timeout
    status = None
    # Drain the terminal (a full one would block the command's writes) until the file is
    # big enough, the command ends, or time runs out.
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.005)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                chunk = b""
            output += chunk
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
        try:
            if os.path.getsize(watch) >= min_bytes:
                os.close(master)
                hung_up = True
                break
        except OSError:
            pass

    if status is None:
        if not hung_up:
            os.close(master)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                break
            time.sleep(0.005)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)

    result = {
        "hungUp": hung_up,
        "exitCode": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "output": output.decode("utf-8", "replace"),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
