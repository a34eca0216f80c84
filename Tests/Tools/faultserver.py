#!/usr/bin/env python3
"""Fault-injecting HTTP/1.1 server for the transfer reliability tests (stdlib only).

Binds 127.0.0.1 on an ephemeral port and prints `PORT <n>` as its first stdout line.
Exits on SIGTERM or when stdin reaches EOF (the test process went away).

Content. With T = "<seed>:<version>:" (ASCII decimal) and P = the 128 digests
SHA-256(T + "p:<i>") concatenated (4096 bytes), chunk j (4096 bytes) is SHA-256(T + "c:<j>")
followed by bytes 32..<4096 of P rotated left by (j * 257) % 4096; the chunks concatenated
and cut to `size` are the file. Every chunk differs, and so does every version. The Swift
tests compute the same bytes. ETag is the strong `"s<seed>-n<size>-v<version>"`; Last-Modified moves with the
version. `Range: bytes=a-[b]` is answered 206 with `Content-Range`; an `If-Range` that is
not the current ETag or Last-Modified gets the full 200.

Configuration, per path (any path except the control ones):
  * `POST /_fault` with a JSON object {"path": "/m/x.bin", "size": N, "seed": S, ...faults}
    (replaces that path's configuration and resets its fault counters), or
  * query parameters on the request itself: `/f/<name>?size=N&seed=S&drop=4095`.
Faults (all optional, combinable):
  drop=K, drop_times=M    first M content answers: send K body bytes, then close the socket
  hold=K, hold_times=M    first M content answers: send K body bytes, then never send more
  ignore_range=1          always 200 with the whole body
  bad_range=start|total   206 answers carry a Content-Range with a wrong start or total
  range_416=1             any request with a Range gets 416
  bump_after=N            after N requests the version goes up: new bytes, ETag, Last-Modified
  flip=X, flip_times=M    byte X of the body is inverted (first M answers; default: always)
  extra=N, extra_declared=0|1   body has N bytes too many (declared in Content-Length, or
                          no Content-Length and the end marked by closing the connection)
  endless=1               no Content-Length, a body that never ends
  statuses=[503,503]      the first requests get these statuses (query form: 503,503)
  retry_after=S           `Retry-After: S` on those statuses
  status=404              every request gets this status
  hang_times=M            first M requests: accepted, never answered (-1: always)
  trickle=T               one body byte every T seconds
  rate=B                  send the body at about B bytes a second (64 KiB steps)
  delay=T                 wait T seconds before answering
  redirect=URL            answer 302 with `Location: URL` (`{n}` in URL: this path's request count),
                          a short text body and an ETag of its own, as the Hugging Face Hub's
                          302 to its CDN does (neither is the file's)
  expire_after=N          requests after the first N get 403 (a signed URL that expired)
  validators=weak|none    the ETag is weak (`W/"…"`) and there is no Last-Modified, or neither
  auth=VALUE              a request whose `Authorization` is not exactly VALUE gets 401
                          (`WWW-Authenticate: Basic`, or `Bearer` when VALUE starts so)
  file=PATH               serve the bytes of this local file instead of generated content

`GET /_stats` → {path: {"requests": n, "sent": total body bytes, "log": [{"range",
"if_range", "authorization", "status", "sent", "start", "end"}]}} (start/end: monotonic
seconds; authorization: the header as received, or null).
`GET /_connections` → {"connections": n}: TCP connections accepted so far, this one included.
`POST /_reset` forgets all configuration and statistics.
"""
import hashlib, json, socket, threading, time
from email.utils import formatdate
from functools import lru_cache
from urllib.parse import urlsplit, parse_qsl

import helperserver
from helperserver import STOP

LOCK = threading.Lock()
CONFIG = {}   # path -> dict of settings (see above), plus "_n": requests so far, "version"
STATS = {}    # path -> {"requests", "sent", "log"}
CONNECTIONS = [0]   # accepted so far (Handler.setup runs once per connection)


@lru_cache(maxsize=16)
def content(seed, version, size):
    """The file's bytes (faultserver docstring: "Content"); FaultServer.swift computes the same."""
    tag = b"%d:%d:" % (seed, version)
    pattern = b"".join(hashlib.sha256(tag + b"p:%d" % i).digest() for i in range(128))
    chunks = []
    for j in range((size + 4095) // 4096):
        r = (j * 257) % 4096
        chunks.append(hashlib.sha256(tag + b"c:%d" % j).digest() + (pattern[r:] + pattern[:r])[32:])
    return b"".join(chunks)[:size]


def parse_query(query):
    out = {}
    for key, value in parse_qsl(query):
        if key == "statuses":
            out[key] = [int(v) for v in value.split(",") if v]
        elif key in ("bad_range", "validators", "redirect"):
            out[key] = value
        else:
            out[key] = float(value) if "." in value else int(value)
    return out


class Handler(helperserver.Handler):
    def setup(self):
        with LOCK:
            CONNECTIONS[0] += 1
        super().setup()

    # MARK: control endpoints

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        if self.path == "/_reset":
            with LOCK:
                CONFIG.clear(); STATS.clear()
            return self.reply_json({"ok": True})
        if self.path != "/_fault":
            return self.reply_json({"error": "unknown"}, 404)
        spec = json.loads(raw)
        with LOCK:
            CONFIG[spec.pop("path")] = dict(spec)
        self.reply_json({"ok": True})

    # MARK: files

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/_stats":
            with LOCK:
                snapshot = json.loads(json.dumps(STATS))
            return self.reply_json(snapshot)
        if url.path == "/_connections":
            with LOCK:
                count = CONNECTIONS[0]
            return self.reply_json({"connections": count})
        with LOCK:
            cfg = CONFIG.setdefault(url.path, {})
            cfg.update(parse_query(url.query))
            cfg["_n"] = n = cfg.get("_n", 0) + 1
            if cfg.get("bump_after") and n == cfg["bump_after"] + 1:
                cfg["version"] = cfg.get("version", 1) + 1
            stat = STATS.setdefault(url.path, {"requests": 0, "sent": 0, "log": []})
            stat["requests"] += 1
            entry = {"range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                     "authorization": self.headers.get("Authorization"), "status": None, "sent": 0, "start": time.monotonic(), "end": None}
            stat["log"].append(entry)
            cfg = dict(cfg)
        try:
            self.serve_file(cfg, n, entry, stat)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            self.close_connection = True
        finally:
            entry["end"] = time.monotonic()

    def answer(self, entry, status, headers):
        entry["status"] = status
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def send_body(self, data, entry, stat, trickle=0, rate=0):
        def counted(n):
            with LOCK:
                entry["sent"] += n; stat["sent"] += n
        self.send_paced(data, counted, step=1 if trickle else 65536, pause=trickle, rate=rate)

    def serve_file(self, cfg, n, entry, stat):
        if cfg.get("hang_times", 0) == -1 or n <= cfg.get("hang_times", 0):
            STOP.wait()                                   # accept, never answer
            return
        time.sleep(cfg.get("delay", 0))
        statuses = cfg.get("statuses", [])
        status = statuses[n - 1] if n <= len(statuses) else cfg.get("status")
        if cfg.get("auth") is not None and self.headers.get("Authorization") != cfg["auth"]:
            scheme = "Bearer" if str(cfg["auth"]).startswith("Bearer") else 'Basic realm="models"'
            return self.answer(entry, 401, {"WWW-Authenticate": scheme, "Content-Length": "0"})
        if cfg.get("expire_after") is not None and n > cfg["expire_after"]:
            return self.answer(entry, 403, {"Content-Length": "0"})
        if cfg.get("redirect"):
            location = cfg["redirect"].replace("{n}", str(n))
            body = b"Found. Redirecting to " + location.encode()
            self.answer(entry, 302, {"Location": location, "ETag": '"pointer-%d"' % n,
                                     "Content-Type": "text/plain; charset=utf-8", "Content-Length": str(len(body))})
            return self.send_body(body, entry, stat)
        if status:
            headers = {"Content-Length": "0"}
            if cfg.get("retry_after") is not None:
                headers["Retry-After"] = str(cfg["retry_after"])
            return self.answer(entry, status, headers)
        size, seed, version = cfg.get("size", 0), cfg.get("seed", 0), cfg.get("version", 1)
        if cfg.get("file"):
            with open(cfg["file"], "rb") as f:
                data = f.read()
            size = len(data)
        else:
            data = content(seed, version, size)
        etag = '"s%d-n%d-v%d"' % (seed, size, version)
        modified = formatdate(1_700_000_000 + seed + 86_400 * version, usegmt=True)
        flip = cfg.get("flip")
        if flip is not None and flip < size and n <= cfg.get("flip_times", 1 << 30):
            data = bytearray(data); data[flip] ^= 0xFF; data = bytes(data)
        if cfg.get("validators") == "weak":
            etag, modified = "W/" + etag, None
        elif cfg.get("validators") == "none":
            etag, modified = None, None
        headers = {"ETag": etag, "Last-Modified": modified, "Accept-Ranges": "bytes"}
        headers = {k: v for k, v in headers.items() if v is not None}
        rng, if_range = self.headers.get("Range"), self.headers.get("If-Range")
        start, end = 0, size - 1
        partial = bool(rng) and not cfg.get("ignore_range") and (if_range is None or if_range in (etag, modified))
        partial = partial and not (if_range or "").startswith("W/")      # RFC 9110: a weak tag never matches
        if rng and cfg.get("range_416"):
            headers.update({"Content-Range": "bytes */%d" % size, "Content-Length": "0"})
            return self.answer(entry, 416, headers)
        if partial:
            first, _, last = rng.split("=", 1)[1].partition("-")
            start, end = int(first), min(int(last) if last else size - 1, size - 1)
            if start >= size:
                headers.update({"Content-Range": "bytes */%d" % size, "Content-Length": "0"})
                return self.answer(entry, 416, headers)
            shown_start, shown_total = start, size
            if cfg.get("bad_range") == "start":
                shown_start = start + 1
            elif cfg.get("bad_range") == "total":
                shown_total = size + 1
            headers["Content-Range"] = "bytes %d-%d/%d" % (shown_start, end, shown_total)
        body = data[start:end + 1]
        extra = cfg.get("extra", 0)
        if cfg.get("endless") or (extra and not cfg.get("extra_declared")):
            headers["Connection"] = "close"           # length unknown: the close ends it
            self.close_connection = True
        else:
            headers["Content-Length"] = str(len(body) + extra)
        self.answer(entry, 206 if partial else 200, headers)
        for fault, times in (("drop", "drop_times"), ("hold", "hold_times")):
            if cfg.get(fault) is not None and n <= cfg.get(times, 1):
                self.send_body(body[:cfg[fault]], entry, stat)
                if fault == "hold":
                    STOP.wait()
                return self.hang_up()
        if cfg.get("endless"):
            while not STOP.is_set():
                self.send_body(data or b"\0" * 4096, entry, stat)
            return
        self.send_body(body, entry, stat, cfg.get("trickle", 0), cfg.get("rate", 0))
        if extra:
            self.send_body(content(seed + 1, version, extra), entry, stat)
        if self.close_connection:
            self.hang_up()


def main():
    def start():
        server = helperserver.serve(Handler)
        print("PORT %d" % server.server_address[1], flush=True)
    helperserver.run_until_stopped(start)


if __name__ == "__main__":
    main()
