#!/usr/bin/env python3
"""A Hugging-Face-Hub-shaped origin and its CDN, for the resume tests (stdlib only).

One process, two HTTP/1.1 servers on 127.0.0.1 (ephemeral ports), as the real Hub is two
hosts: stdout's first line is `PORT <origin>`, the second `CDN <cdn>`. Exits on SIGTERM or
when stdin reaches EOF (the test process went away).

    hubserver.py [--repo ORG/NAME --revision <40 hex> --folder DIR [--lfs-min N]]

The ORIGIN (huggingface.co) serves repositories, each from a local folder:
  `GET|HEAD /ORG/NAME/resolve/REV/PATH` (REV: the commit, or a branch name mapped to it)
  * an LFS file (size >= lfs_min, or listed in "lfs") answers `302` with a short text body
    (as the Hub does), `Location:` a signed URL on the CDN, `X-Linked-Etag: "<sha256>"`,
    `X-Linked-Size`, `X-Repo-Commit`, and an `ETag` that is the git object id of the LFS
    pointer: strong, and not the file's (a client that keeps the 302's ETag as its If-Range
    validator gets a whole file from the CDN instead of a range). Range is ignored there.
  * any other file is answered by the origin itself: `ETag: "<git blob id>"`, Range
    (206 + Content-Range) and If-Range (a mismatch gets the whole 200).
  * a renamed repository (`renames`) answers `307` with a relative
    `Location: /NEW-ORG/NEW-NAME/resolve/...` (and a short body).
  * `too_many=N`: the first N origin requests get `429` with `Retry-After: <retry_after>`.
  * `token=T`: an origin request whose `Authorization` is not `Bearer T` gets `401`
    (`X-Error-Code: GatedRepo` when none was sent); with `public=1` a request without any
    `Authorization` is served, and only a wrong token gets the `401` (as the real Hub
    answers an expired login on a public model). The CDN never asks for a token.
  * a gated repository (its own "token" in `/_repo`) answers a request without that
    token `401` (`X-Error-Code: GatedRepo`), one with another token `403` (GatedRepo: an
    account that has not accepted the terms), both for files and for the API.
  Unknown repository, revision or file: `404` with `X-Error-Code` (RepoNotFound,
  RevisionNotFound, EntryNotFound).
  `GET /api/models/ORG/NAME/revision/REV[?blobs=true]` is the model-information API:
  `{"id", "modelId", "sha": <commit>, "private", "gated", "siblings": [{"rfilename"}, ...]}`,
  each sibling with `"blobId"` and `"size"`, and an LFS file with `"lfs": {"sha256", "size",
  "pointerSize"}`, when `blobs=true` (as the Hub answers); the same 429, token and 404 rules.
  `api_body` (in `/_config`) replaces its body by that text (a hostile answer);
  `ignore_range=1` makes every answer ignore `Range` (the whole file, `200`).

The CDN (cdn-lfs.hf.co, CloudFront) serves `/repos/<repo-hash>/<sha256>?Expires=<unix>&
Signature=<hmac>&Key-Pair-Id=...`: a bad signature or a URL past its expiry gets `403` with
CloudFront's XML body. The CDN's clock is the process's plus an offset; `POST /_expire`
moves it past every URL issued so far (new ones are valid), which is deterministic where
waiting for `lifetime` seconds is not. Bytes come with the strong `ETag: "<sha256>"`,
`Last-Modified`, `Accept-Ranges: bytes`; `Range: bytes=a-[b]` gets 206 + Content-Range, an
`If-Range` that is not the ETag or Last-Modified gets the whole 200.
CDN faults (GET answers with a body, counted from the last `POST /_config`):
  drop=K, drop_times=M     first M answers: send K body bytes, then close the connection
  expire_after_drop=1      a drop also expires every URL issued so far (as `/_expire`)
  hold=K, hold_times=M     first M answers: send K body bytes, then nothing more until the
                           client closes the connection (or the server ends)
  rate=B                   send bodies at about B bytes a second (16 KiB steps)

Control endpoints (on either port; JSON bodies):
  `POST /_repo` {"repo": "org/name", "revision": "<40 hex>", "folder": "/abs/dir",
                 "lfs_min": N (default 10 MiB, the Hub's), "lfs": [paths],
                 "branches": {"main": "<40 hex>"} (default: main -> revision),
                 "token": T (a gated repository)}  (adds or replaces that repository)
  `POST /_config` {"token", "public", "too_many", "retry_after", "renames": {"old/name": "org/name"},
                   "lifetime" (seconds, default 3600), "drop", "drop_times",
                   "expire_after_drop", "hold", "hold_times", "rate", "api_body", "ignore_range"}
                   (merged into the settings; fault counters start again)
  `POST /_expire`  every signed URL issued so far is expired
  `POST /_clear`   forgets the log
  `GET /_log`      {"entries": [{"server": "origin"|"cdn", "method", "path" (no query),
                   "query", "status", "range", "if_range", "authorization" (as received,
                   or null), "location", "sent" (body bytes), "start", "end" (monotonic
                   seconds)}]}, in the order the requests arrived
"""
import argparse, hashlib, hmac, json, os, select, socket, threading, time
from email.utils import formatdate
from urllib.parse import urlsplit, parse_qsl, quote, unquote, urlencode

import helperserver
from helperserver import STOP

LOCK = threading.Lock()
SECRET = os.urandom(32)       # the CDN's signing key, this process's only
REPOS = {}                    # "org/name" -> {"repo", "revision", "folder", "branches", "token", "files": {path: info}}
BY_SHA = {}                   # sha256 -> (absolute path, info), for the CDN
SETTINGS = {"lifetime": 3600, "retry_after": 1, "renames": {}}
COUNTS = {"origin": 0, "cdn_bodies": 0}
CLOCK = {"offset": 0.0}       # the CDN's clock: time.time() + offset
LOG = []
PORTS = {}


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def load_repo(spec):
    """Reads the folder: every regular file's size, SHA-256 and (small files) git blob id."""
    folder = spec["folder"]
    lfs_min = int(spec.get("lfs_min", 10 << 20))
    listed = set(spec.get("lfs", []))
    files, by_sha = {}, {}
    for root, _, names in os.walk(folder):
        for name in names:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, folder)
            with open(full, "rb") as f:
                data = f.read()
            sha = hashlib.sha256(data).hexdigest()
            lfs = len(data) >= lfs_min or rel in listed
            pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha.encode(), len(data))
            files[rel] = {"full": full, "size": len(data), "sha256": sha, "lfs": lfs,
                          "oid": git_blob_id(pointer if lfs else data), "pointer_size": len(pointer),
                          "modified": formatdate(int(os.stat(full).st_mtime), usegmt=True)}
            by_sha[sha] = (full, files[rel])
    revision = spec["revision"]
    with LOCK:
        REPOS[spec["repo"]] = {"repo": spec["repo"], "revision": revision, "folder": folder, "files": files,
                               "branches": dict(spec.get("branches") or {"main": revision}), "token": spec.get("token")}
        BY_SHA.update(by_sha)


def sign(path, expires):
    return hmac.new(SECRET, ("%s?Expires=%d" % (path, expires)).encode(), hashlib.sha256).hexdigest()


def cdn_now():
    return time.time() + CLOCK["offset"]


def expire_all():
    """Moves the CDN's clock past every URL issued so far."""
    with LOCK:
        CLOCK["offset"] += SETTINGS["lifetime"] + 1


class Handler(helperserver.Handler):
    @property
    def role(self):
        return self.server.role

    # MARK: control endpoints

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        spec = json.loads(self.rfile.read(length) if length else b"{}")
        if self.path == "/_repo":
            load_repo(spec)
        elif self.path == "/_config":
            with LOCK:
                SETTINGS.update(spec)
                COUNTS["origin"] = COUNTS["cdn_bodies"] = 0
        elif self.path == "/_expire":
            expire_all()
        elif self.path == "/_clear":
            with LOCK:
                LOG.clear()
        else:
            return self.reply_json({"error": "unknown"}, 404)
        self.reply_json({"ok": True})

    # MARK: requests

    def do_HEAD(self):
        self.handle_request(head=True)

    def do_GET(self):
        if self.path == "/_log":
            with LOCK:
                snapshot = json.loads(json.dumps(LOG))
            return self.reply_json({"entries": snapshot})
        self.handle_request(head=False)

    def handle_request(self, head):
        url = urlsplit(self.path)
        entry = {"server": self.role, "method": self.command, "path": unquote(url.path), "query": url.query,
                 "status": None, "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                 "authorization": self.headers.get("Authorization"), "location": None, "sent": 0,
                 "start": time.monotonic(), "end": None}
        with LOCK:
            LOG.append(entry)
            settings = json.loads(json.dumps(SETTINGS))
        try:
            if self.role == "origin":
                self.origin(entry, settings, unquote(url.path), head)
            else:
                self.cdn(entry, settings, unquote(url.path), dict(parse_qsl(url.query)), head)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            self.close_connection = True
        finally:
            entry["end"] = time.monotonic()

    def answer(self, entry, status, headers, body=b"", head=False):
        """A complete answer with a small body (an error, a redirect's text)."""
        entry["status"] = status
        entry["location"] = headers.get("Location")
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)
            entry["sent"] += len(body)

    def text(self, entry, status, message, head, headers=None):
        self.answer(entry, status, dict(headers or {}, **{"Content-Type": "text/plain; charset=utf-8"}),
                    message.encode(), head)

    # MARK: the origin

    def origin(self, entry, settings, path, head):
        with LOCK:
            COUNTS["origin"] += 1
            n = COUNTS["origin"]
        if n <= settings.get("too_many", 0):
            return self.answer(entry, 429, {"Retry-After": str(settings["retry_after"]), "Content-Type": "application/json"},
                               b'{"error":"You have exceeded our rate limit."}', head)
        parts = path.lstrip("/").split("/")
        if len(parts) >= 6 and parts[0] == "api" and parts[1] == "models" and parts[4] == "revision":
            return self.model_info(entry, settings, parts[2] + "/" + parts[3], "/".join(parts[5:]), head)
        if len(parts) < 5 or parts[2] != "resolve":
            return self.text(entry, 404, "Not Found", head, {"X-Error-Code": "EntryNotFound"})
        name, rev, rel = parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:])
        with LOCK:
            repo = dict(REPOS.get(name) or {})
        if name in settings["renames"]:
            target = "/%s/resolve/%s/%s" % (settings["renames"][name], quote(rev), quote(rel))
            return self.text(entry, 307, "Temporary Redirect. Redirecting to " + target, head, {"Location": target})
        if self.refuse_token(entry, settings, repo, head):
            return
        if not repo:
            return self.text(entry, 404, "Repository not found", head, {"X-Error-Code": "RepoNotFound"})
        commit = rev if rev == repo["revision"] else repo["branches"].get(rev)
        if commit != repo["revision"]:
            return self.text(entry, 404, "Invalid rev id: " + rev, head, {"X-Error-Code": "RevisionNotFound"})
        info = repo["files"].get(rel)
        if info is None:
            return self.text(entry, 404, "Entry not found", head, {"X-Error-Code": "EntryNotFound"})
        common = {"X-Repo-Commit": commit, "ETag": '"%s"' % info["oid"], "Vary": "Origin, Accept"}
        if info["lfs"]:
            cdn_path = "/repos/%s/%s" % (hashlib.sha256(name.encode()).hexdigest()[:16], info["sha256"])
            with LOCK:
                expires = int(cdn_now()) + int(settings["lifetime"])
            query = urlencode({"Expires": expires, "Signature": sign(cdn_path, expires), "Key-Pair-Id": "KTESTHUBSERVER"})
            location = "http://127.0.0.1:%d%s?%s" % (PORTS["cdn"], cdn_path, query)
            common.update({"Location": location, "X-Linked-Etag": '"%s"' % info["sha256"],
                           "X-Linked-Size": str(info["size"])})
            return self.text(entry, 302, "Found. Redirecting to " + location, head, common)
        self.serve_bytes(entry, settings, info, common, head, faults=False)

    def refuse_token(self, entry, settings, repo, head):
        """Answers 401/403 (and returns True) when the request lacks the token it needs: the
        server's (`token`, `public`) or the gated repository's own."""
        token, sent = settings.get("token"), self.headers.get("Authorization")
        headers = {"WWW-Authenticate": 'Bearer realm="huggingface"', "Content-Type": "application/json"}
        if token and sent != "Bearer " + token and (sent is not None or not settings.get("public")):
            if sent:
                message = b"Invalid credentials in Authorization header"
            else:
                message, headers["X-Error-Code"] = b"Access to this repository is restricted.", "GatedRepo"
            self.answer(entry, 401, headers, b'{"error":"%s"}' % message, head)
            return True
        gated = repo.get("token") if repo else None
        if gated and sent != "Bearer " + gated:
            headers["X-Error-Code"] = "GatedRepo"
            if sent:
                self.answer(entry, 403, headers, b'{"error":"Access to model %s is restricted and you are not in the authorized list."}'
                            % repo["repo"].encode(), head)
            else:
                self.answer(entry, 401, headers, b'{"error":"Access to model %s is restricted. You must have access to it and be authenticated to access it."}'
                            % repo["repo"].encode(), head)
            return True
        return False

    def model_info(self, entry, settings, name, rev, head):
        """`GET /api/models/ORG/NAME/revision/REV[?blobs=true]`, as the Hub answers it."""
        with LOCK:
            repo = dict(REPOS.get(name) or {})
        if self.refuse_token(entry, settings, repo, head):
            return
        if not repo:
            return self.answer(entry, 404, {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"},
                               b'{"error":"Repository not found"}', head)
        commit = rev if rev == repo["revision"] else repo["branches"].get(rev)
        if commit != repo["revision"]:
            return self.answer(entry, 404, {"Content-Type": "application/json", "X-Error-Code": "RevisionNotFound"},
                               b'{"error":"Invalid rev id: %s"}' % rev.encode(), head)
        if settings.get("api_body") is not None:
            return self.answer(entry, 200, {"Content-Type": "application/json"}, settings["api_body"].encode(), head)
        blobs = "blobs=true" in (entry["query"] or "").split("&")
        siblings = []
        for rel, info in sorted(repo["files"].items()):
            sibling = {"rfilename": rel}
            if blobs:
                sibling.update({"blobId": info["oid"], "size": info["size"]})
                if info["lfs"]:
                    sibling["lfs"] = {"sha256": info["sha256"], "size": info["size"], "pointerSize": info["pointer_size"]}
            siblings.append(sibling)
        body = {"_id": hashlib.sha1(name.encode()).hexdigest()[:24], "id": name, "modelId": name, "author": name.split("/")[0],
                "sha": commit, "private": False, "gated": "manual" if repo.get("token") else False, "disabled": False,
                "tags": ["safetensors"], "siblings": siblings, "lastModified": "2026-11-30T00:00:00.000Z"}
        self.answer(entry, 200, {"Content-Type": "application/json; charset=utf-8", "X-Repo-Commit": commit},
                    json.dumps(body).encode(), head)

    # MARK: the CDN

    def cdn(self, entry, settings, path, query, head):
        sha = path.rsplit("/", 1)[-1]
        try:
            expires = int(query.get("Expires", ""))
        except ValueError:
            expires = None
        if expires is None or not hmac.compare_digest(query.get("Signature", ""), sign(path, expires)):
            return self.denied(entry, "Access denied", head)
        if cdn_now() > expires:
            return self.denied(entry, "Request has expired", head)
        with LOCK:
            full, info = BY_SHA.get(sha) or (None, None)
        if full is None or info is None:
            return self.text(entry, 404, "Not Found", head)
        headers = {"Content-Type": "application/octet-stream", "X-Cache": "Miss from cloudfront"}
        self.serve_bytes(entry, settings, info, headers, head, faults=True, etag='"%s"' % sha)

    def denied(self, entry, message, head):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                '<Message>%s</Message></Error>' % message).encode()
        self.answer(entry, 403, {"Content-Type": "text/xml", "X-Cache": "Error from cloudfront"}, body, head)

    # MARK: bytes, with Range and If-Range

    def serve_bytes(self, entry, settings, info, headers, head, faults, etag=None):
        etag = etag or headers["ETag"]
        size, modified = info["size"], info["modified"]
        headers = dict(headers, **{"ETag": etag, "Last-Modified": modified, "Accept-Ranges": "bytes"})
        rng, if_range = self.headers.get("Range"), self.headers.get("If-Range")
        start, end = 0, size - 1
        partial = (bool(rng) and rng.startswith("bytes=") and (if_range is None or if_range in (etag, modified))
                   and not settings.get("ignore_range"))
        if partial:
            first, _, last = rng.split("=", 1)[1].partition("-")
            start, end = int(first), min(int(last) if last else size - 1, size - 1)
            if start >= size:
                headers["Content-Range"] = "bytes */%d" % size
                return self.answer(entry, 416, headers, b"", head)
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        entry["status"] = status = 206 if partial else 200
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(end + 1 - start))
        self.end_headers()
        if head:
            return
        with open(info["full"], "rb") as f:
            f.seek(start)
            body = f.read(end + 1 - start)
        if faults:
            with LOCK:
                COUNTS["cdn_bodies"] += 1
                n = COUNTS["cdn_bodies"]
            for fault, times in (("drop", "drop_times"), ("hold", "hold_times")):
                if settings.get(fault) is not None and n <= settings.get(times, 1):
                    self.send_body(body[:settings[fault]], entry, settings.get("rate", 0))
                    if fault == "hold":
                        self.wait_for_close()
                    elif settings.get("expire_after_drop"):
                        expire_all()
                    return self.hang_up()
        self.send_body(body, entry, settings.get("rate", 0) if faults else 0)

    def send_body(self, data, entry, rate=0):
        def counted(n):
            with LOCK:
                entry["sent"] += n
        self.send_paced(data, counted, step=16384, rate=rate)

    def wait_for_close(self):
        """Sends nothing until the client closes the connection or the server ends."""
        while not STOP.is_set():
            ready, _, _ = select.select([self.connection], [], [], 0.2)
            if ready and not self.connection.recv(1, socket.MSG_PEEK):
                return



def main():
    parser = argparse.ArgumentParser(description="A Hugging-Face-Hub-shaped origin and CDN on 127.0.0.1")
    parser.add_argument("--repo")
    parser.add_argument("--revision")
    parser.add_argument("--folder")
    parser.add_argument("--lfs-min", type=int, default=10 << 20)
    args = parser.parse_args()
    if args.repo:
        load_repo({"repo": args.repo, "revision": args.revision, "folder": os.path.abspath(args.folder),
                   "lfs_min": args.lfs_min})

    def start():
        for role in ("origin", "cdn"):
            PORTS[role] = helperserver.serve(Handler, role=role).server_address[1]
        print("PORT %d\nCDN %d" % (PORTS["origin"], PORTS["cdn"]), flush=True)
    helperserver.run_until_stopped(start)


if __name__ == "__main__":
    main()
