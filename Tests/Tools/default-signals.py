#!/usr/bin/env python3
"""Runs a command with every signal unblocked and at its default action (test-only).

Usage: default-signals.py [--nohup] COMMAND [ARG...]

A shell starts a command that way. A test runner does not: its threads block many
signals (SIGHUP among them), a spawned child inherits that mask, and a blocked SIGHUP
would never reach the command, so a test could not see what SIGHUP does to it. Python
itself ignores SIGPIPE and SIGXFSZ; those go back to their defaults too. The command
replaces this process (same pid), so signals sent to the pid reach it. With --nohup,
SIGHUP is ignored instead, as `nohup` does.
"""
import os
import signal
import sys


def reset_signals(ignore_hangup=False):
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    if ignore_hangup:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


if __name__ == "__main__":
    args = sys.argv[1:]
    nohup = args[:1] == ["--nohup"]
    if nohup:
        args = args[1:]
    reset_signals(ignore_hangup=nohup)
    os.execv(args[0], args)
