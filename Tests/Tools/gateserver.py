#!/usr/bin/env python3
"""A gate for nginx's auth_request (stdlib only): proves requests were in flight together.

Usage: gateserver.py <K> <grace_seconds>
Binds 127.0.0.1 on an ephemeral port and prints `PORT <n>`; ends on SIGTERM or EOF on stdin.

`GET /gate` (nginx asks it once per request it gates, through `auth_request`) is held, not
answered, until K of them wait at once; then the gate opens: every held request and every
later one is answered 204 at once (nginx then serves the file). A client that never has K
requests in flight never opens it by count: `grace_seconds` after the first request, the gate
opens anyway so that the download ends and the test can fail on the statistics instead of
hanging. No decision depends on how fast anything runs, only on how many requests wait.

`GET /_stats` → {"opened_by": "count" | "grace" | null, "most_waiting": n, "requests": n}.
"""
import sys, threading
from http.server import ThreadingHTTPServer

import helperserver

K = int(sys.argv[1])
GRACE = float(sys.argv[2])
STATE = threading.Condition()
WAITING = 0
MOST = 0
REQUESTS = 0
OPENED_BY = None


def open_after_grace():
    global OPENED_BY
    with STATE:
        if OPENED_BY is None:
            OPENED_BY = "grace"
        STATE.notify_all()


class Gate(helperserver.Handler):
    def do_GET(self):
        global WAITING, MOST, REQUESTS, OPENED_BY
        if self.path == "/_stats":
            with STATE:
                stats = {"opened_by": OPENED_BY, "most_waiting": MOST, "requests": REQUESTS}
            return self.reply_json(stats)
        with STATE:
            REQUESTS += 1
            if REQUESTS == 1:
                timer = threading.Timer(GRACE, open_after_grace)
                timer.daemon = True
                timer.start()
            WAITING += 1
            MOST = max(MOST, WAITING)
            if OPENED_BY is None and WAITING >= K:
                OPENED_BY = "count"
            STATE.notify_all()
            STATE.wait_for(lambda: OPENED_BY is not None)
            WAITING -= 1
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512   # nginx opens one connection per held request, all at once


def main():
    def start():
        server = Server(("127.0.0.1", 0), Gate)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        print("PORT %d" % server.server_address[1], flush=True)
    helperserver.run_until_stopped(start)


if __name__ == "__main__":
    main()
