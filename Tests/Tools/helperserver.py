"""What the HTTP helper servers in Tests/Tools share (stdlib only; imported, never run).

A helper server prints its ports on stdout (`PORT <n>` first: Tests/Support/PortServer.swift
reads them), and ends on SIGTERM or when stdin reaches EOF (the test process went away).
`run_until_stopped` does that part; `serve` starts one listening socket on 127.0.0.1;
`Handler` is the base of their request handlers.
"""
import json, os, signal, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STOP = threading.Event()   # set on SIGTERM: held answers and paced bodies end


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the tests read the servers' own logs instead
        pass

    def reply_json(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_paced(self, data, counted, step=65536, pause=0, rate=0):
        """Writes `data` in `step`-byte pieces, calling `counted(n)` after each; sleeps
        `pause` seconds, or the piece's length / `rate`, between them. Stops at SIGTERM."""
        for i in range(0, len(data), step):
            if STOP.is_set():
                return
            piece = data[i:i + step]
            self.wfile.write(piece)
            counted(len(piece))
            if pause or rate:
                time.sleep(pause or len(piece) / rate)

    def hang_up(self):
        """Closes the connection after what was written (a dropped transfer)."""
        self.close_connection = True
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)


def serve(handler, **attributes):
    """A threaded server on 127.0.0.1 (an ephemeral port) with `attributes` set on it (the
    handler reads them as `self.server.<name>`), serving on a thread of its own."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    for name, value in attributes.items():
        setattr(server, name, value)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_until_stopped(start):
    """Calls `start()` (which starts the servers and prints their ports), then returns only
    by ending the process: on SIGTERM, or on EOF on stdin.

    SIGTERM is blocked in every thread (threads inherit the mask, so it is blocked before
    `start`) and taken with sigwait in the main thread: a signal delivered to a busy handler
    thread would otherwise never wake the main thread. Handler threads may be blocked on
    purpose (a held answer), so the process ends with `os._exit`, without waiting for them.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    start()

    def watch_stdin():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)   # the test process went away
    threading.Thread(target=watch_stdin, daemon=True).start()
    signal.sigwait({signal.SIGTERM})
    STOP.set()
    os._exit(0)
