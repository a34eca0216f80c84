#!/usr/bin/env python3
"""The test suite's network guard: a proxy that refuses every connection and records it.

Every test process points `https_proxy`, `http_proxy` and `all_proxy` here (`no_proxy`
keeps loopback direct), so a connection a test makes past loopback by mistake (a broken
gate fetching from github.com, a test catalog naming a real host) ends here instead of on
the internet, and no DNS query for the target leaves the machine either: with a proxy set,
libcurl resolves the proxy (127.0.0.1), never the target. Started by the test runner before
its first test (Tests/NetGuard/netguard.c); the tests read the log (Tests/Support/
NetworkGuard.swift) and fail the test that made the attempt.

    netguard.py DIR

Binds 127.0.0.1 on an ephemeral port and prints `PORT <n>` as its only stdout line. Each
connection is one attempt: its request head is read (a CONNECT's `host:port`, a proxied
GET's absolute URL), one JSON line is appended to DIR/attempts.jsonl -- {"seq", "time"
(seconds since the epoch), "method", "target" (host:port), "url", "pids" (the process that
opened the connection, then its parent, and so on), "command" (that process's command
line)} -- and only then is it answered `403 Forbidden` and closed, so a client that has
seen the answer finds its attempt in the log.

When stdin reaches EOF (the test runner is exiting, or went away) it lists on stderr every
attempt no test reported (their `seq` not in DIR/claimed), naming the test that started the
process (DIR/spawns.tsv: pid, test, command; written by Subprocess) or saying it came from
the runner itself, and exits 1 when there was one (the runner then exits 1 too), else 0.
DIR is removed unless an attempt went unreported (then it is kept, and named).
"""
import json, os, shutil, socket, sys, threading, time

LOCK = threading.Lock()
ATTEMPTS = []
RUNNER = os.getppid()


def peer_pids(client_port, proxy_port):
    """The pid owning the loopback socket 127.0.0.1:client_port -> :proxy_port, then its
    ancestors; [] when it cannot be found (another user's process, gone already)."""
    want_local = "0100007F:%04X" % client_port
    want_remote = "0100007F:%04X" % proxy_port
    inode = None
    try:
        with open("/proc/net/tcp") as table:
            next(table)
            for line in table:
                fields = line.split()
                if fields[1] == want_local and fields[2] == want_remote:
                    inode = fields[9]
                    break
    except OSError:
        return []
    if inode is None:
        return []
    link = "socket:[%s]" % inode
    owner = None
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == link:
                    owner = int(pid)
                    break
        except OSError:
            continue
        if owner is not None:
            break
    chain = []
    pid = owner
    while pid and pid > 1 and len(chain) < 32:
        chain.append(pid)
        try:
            with open("/proc/%d/stat" % pid) as stat:
                # pid (comm) state ppid ...: comm may hold spaces and parentheses
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return chain


def command_line(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return " ".join(part.decode("utf-8", "replace") for part in f.read().split(b"\0") if part)
    except OSError:
        return ""


def target_of(method, where):
    """host:port of a CONNECT authority or a proxied absolute URL."""
    if method == "CONNECT":
        return where
    rest = where.split("://", 1)
    scheme = rest[0].lower() if len(rest) == 2 else "http"
    authority = (rest[1] if len(rest) == 2 else where).split("/", 1)[0].rsplit("@", 1)[-1]
    has_port = "]:" in authority if authority.startswith("[") else ":" in authority
    if has_port:
        return authority
    return "%s:%d" % (authority, 443 if scheme == "https" else 80)


def handle(connection, address, proxy_port, log_path):
    with connection:
        connection.settimeout(10)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 65536:
                piece = connection.recv(4096)
                if not piece:
                    break
                head += piece
        except OSError:
            pass
        words = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        method = words[0] if words else "?"
        where = words[1] if len(words) > 1 else "?"
        pids = peer_pids(address[1], proxy_port)
        with LOCK:
            attempt = {"seq": len(ATTEMPTS) + 1, "time": time.time(), "method": method,
                       "target": target_of(method, where) if len(words) > 1 else "?",
                       "url": where if method != "CONNECT" else None, "pids": pids,
                       "command": command_line(pids[0]) if pids else ""}
            ATTEMPTS.append(attempt)
            with open(log_path, "a") as log:
                log.write(json.dumps(attempt) + "\n")
        body = ("refused by the test suite's network guard: no test may reach past loopback (%s)\n"
                % attempt["target"]).encode()
        try:
            connection.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                               b"Connection: close\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass


def report(directory):
    """Every attempt no test reported, on stderr; True when there was one."""
    claimed = set()
    spawns = {}
    try:
        with open(os.path.join(directory, "claimed")) as f:
            claimed = {int(line) for line in f if line.strip().isdigit()}
    except OSError:
        pass
    try:
        with open(os.path.join(directory, "spawns.tsv")) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t", 2)
                if len(parts) == 3 and parts[0].isdigit():
                    spawns[int(parts[0])] = (parts[1], parts[2])
    except OSError:
        pass
    with LOCK:
        attempts = list(ATTEMPTS)
    loose = [a for a in attempts if a["seq"] not in claimed]
    lines = {}   # one line per culprit and target, with a count: a download retries
    for a in loose:
        started = next((spawns[p] for p in a["pids"] if p in spawns), None)
        if started:
            who = "by `%s`, which %s started" % (started[1], "the test " + started[0] if started[0] else "no test (spawned outside one)")
        elif a["pids"][:1] == [RUNNER]:
            who = "by the test runner itself (an in-process transfer) outside every guarded test (a suite without .networkGuard, or a transfer that outlived its test)"
        else:
            who = "by pid %s (`%s`), which no test started" % (a["pids"][0] if a["pids"] else "?", a["command"])
        key = (a["method"], a["target"], who)
        if key not in lines:
            lines[key] = [0, a["time"]]
        lines[key][0] += 1
    for (method, target, who), (count, first) in lines.items():
        when = time.strftime("%H:%M:%S", time.localtime(first)) + ".%03d" % (first % 1 * 1000)
        times = "" if count == 1 else " (%d times)" % count
        sys.stderr.write("network guard: %s %s refused%s, first at %s, %s\n" % (method, target, times, when, who))
    if loose:
        sys.stderr.write("network guard: FAILED: %d connection attempt(s) off loopback no test reported "
                         "(every test must stay on 127.0.0.1); the log: %s\n" % (len(loose), directory))
    else:
        shutil.rmtree(directory, ignore_errors=True)   # every attempt failed its test already
    return bool(loose)


def main():
    directory = sys.argv[1]
    log_path = os.path.join(directory, "attempts.jsonl")
    open(log_path, "a").close()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]

    def accept():
        while True:
            connection, address = listener.accept()
            threading.Thread(target=handle, args=(connection, address, port, log_path), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    sys.stdout.write("PORT %d\n" % port)
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)   # nobody reads stdout after the port
    os.close(null)
    while sys.stdin.buffer.read(4096):
        pass
    sys.stderr.flush()
    os._exit(1 if report(directory) else 0)


if __name__ == "__main__":
    main()
