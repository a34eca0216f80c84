#!/usr/bin/env python3
"""A small static file server over HTTPS (or plain HTTP) for the TLS tests (stdlib only).

Binds 127.0.0.1 on an ephemeral port and prints `PORT <n>` as its first stdout line.
Exits on SIGTERM or when stdin reaches EOF (the test process went away).

  tlsserver.py --root DIR --log FILE [--cert CERT --key KEY] [--redirect PREFIX=TARGET ...]

  --root DIR        files are served from DIR (`GET /a/b` → DIR/a/b); HEAD works too.
  --cert/--key      PEM certificate and key: speak TLS (without them: plain HTTP).
  --redirect P=T    a request whose path starts with P is answered `302` with
                    `Location: T + <the rest of the path>`; `{port}` in T is this server's
                    port (so `--redirect /loop/=https://127.0.0.1:{port}/loop/` is a loop).
  --log FILE        one JSON object per line, flushed at once:
                    {"event": "connection"}                      a TCP connection accepted
                    {"event": "handshake_failed", "error": "…"}  the TLS handshake failed (the end)
                    {"event": "closed"}                          a connection's end otherwise
                    {"event": "request", "method", "path", "status", "headers": [[k, v], …]}
"""
import argparse, json, os, signal, ssl, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

LOG_LOCK = threading.Lock()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--redirect", action="append", default=[])
    args = parser.parse_args()

    root = os.path.realpath(args.root)
    log_file = open(args.log, "a", encoding="utf-8")
    redirects = []
    for rule in args.redirect:
        prefix, _, target = rule.partition("=")
        redirects.append((prefix, target))

    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)

    def log(obj):
        with LOG_LOCK:
            log_file.write(json.dumps(obj) + "\n")
            log_file.flush()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):   # quiet: the tests read --log
            pass

        def setup(self):
            log({"event": "connection"})
            self.request.settimeout(10)
            if context is not None:
                try:
                    self.request = context.wrap_socket(self.request, server_side=True)
                except (ssl.SSLError, OSError) as error:
                    log({"event": "handshake_failed", "error": str(error)})
                    raise
            super().setup()

        def finish(self):
            try:
                super().finish()
            finally:
                log({"event": "closed"})

        def record(self, status):
            log({"event": "request", "method": self.command, "path": self.path, "status": status,
                 "headers": [[k, v] for k, v in self.headers.items()]})

        def do_HEAD(self):
            self.serve(body=False)

        def do_GET(self):
            self.serve(body=True)

        def serve(self, body):
            path = urlsplit(self.path).path
            for prefix, target in redirects:
                if path.startswith(prefix):
                    location = target.replace("{port}", str(port)) + path[len(prefix):]
                    self.record(302)
                    self.send_response(302)
                    self.send_header("Location", location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            full = os.path.realpath(os.path.join(root, unquote(path).lstrip("/")))
            if not full.startswith(root + os.sep) or not os.path.isfile(full):
                self.record(404)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with open(full, "rb") as f:
                data = f.read()
            self.record(200)
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            if body:
                self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):   # handshake failures are logged above
            pass

    # SIGTERM is taken with sigwait in the main thread (blocked everywhere, threads inherit
    # the mask), as in faultserver.py.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    server = Server(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    print("PORT %d" % port, flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def watch_stdin():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)
    threading.Thread(target=watch_stdin, daemon=True).start()
    signal.sigwait({signal.SIGTERM})
    os._exit(0)


if __name__ == "__main__":
    main()
