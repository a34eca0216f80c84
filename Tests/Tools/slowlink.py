#!/usr/bin/env python3
"""A slow link in front of a server (stdlib only): a TCP relay whose downstream is capped.

Usage: slowlink.py <target_port> <bytes_per_second>
Binds 127.0.0.1 on an ephemeral port and prints `PORT <n>`; ends on SIGTERM or EOF on stdin.

Every connection is relayed to 127.0.0.1:<target_port> byte for byte (TLS passes through
untouched, so HTTP/2 streams stay multiplexed on the client's connection). What the server
sends back shares one budget of <bytes_per_second> across all connections, as a slow
network link would: a client that spreads many transfers over it gets a small share each.
Upstream (the client's requests) is not slowed.

`GET /_stats` is not served here (this is not HTTP); the server behind keeps the logs.
"""
import socket, sys, threading, time

import helperserver

TARGET = int(sys.argv[1])
RATE = float(sys.argv[2])
PIECE = 1024          # bytes per grant: connections take turns in small pieces
BURST = 4 * PIECE     # what an idle link can send at once
BUFFER = 8192         # socket buffers on both sides of the relay


class Bucket:
    """Tokens for the whole link, refilled at RATE bytes per second."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tokens = float(BURST)
        self.last = time.monotonic()

    def take(self, wanted):
        while not helperserver.STOP.is_set():
            with self.lock:
                now = time.monotonic()
                self.tokens = min(BURST, self.tokens + (now - self.last) * RATE)
                self.last = now
                if self.tokens >= 1:
                    granted = int(min(wanted, self.tokens))
                    self.tokens -= granted
                    return granted
                wait = (1 - self.tokens) / RATE
            time.sleep(max(wait, 0.001))
        return 0


BUCKET = Bucket()


def pump(source, sink, capped):
    try:
        while not helperserver.STOP.is_set():
            allowed = BUCKET.take(PIECE) if capped else 65536
            if allowed <= 0:
                break
            data = source.recv(allowed)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay(client):
    # Little in flight, as on a real link: a small receive buffer towards the server (whose
    # own send buffer should be small too: nginx's `listen … sndbuf=`), so what a client
    # resets stops costing the link soon after, instead of megabytes of socket buffers
    # draining at the link's rate.
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
    try:
        server.connect(("127.0.0.1", TARGET))
    except OSError:
        server.close()
        client.close()
        return
    client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(client, server, False), daemon=True).start()
    threading.Thread(target=pump, args=(server, client, True), daemon=True).start()


def start():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print("PORT %d" % listener.getsockname()[1], flush=True)

    def accept():
        while True:
            client, _ = listener.accept()
            relay(client)
    threading.Thread(target=accept, daemon=True).start()


helperserver.run_until_stopped(start)
