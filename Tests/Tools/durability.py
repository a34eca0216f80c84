#!/usr/bin/env python3
"""Power cuts simulated from recorded syscalls: the durability rule of issue 25 (P15),
checked on an strace log of a glasses-local run.

Record a run with

    strace -f -tt -y -yy -e trace=openat,open,creat,write,pwrite64,writev,pwritev,pwritev2,\
ftruncate,truncate,fallocate,rename,renameat,renameat2,link,linkat,unlink,unlinkat,mkdir,\
mkdirat,rmdir,fsync,fdatasync,syncfs,sync,sync_file_range,close,dup,dup2,dup3,fcntl \
        -o TRACE glasses-local --store STORE ...

then check it with

    python3 Tests/Tools/durability.py --store STORE TRACE

The checker replays the trace against a model of what a power cut could keep, for every
file and folder below STORE (the lock files in .locks/ are ignored, and so is everything
outside the store):

- a file's writes (write, pwrite, ftruncate, fallocate, an O_TRUNC open) stay pending until
  an fsync or fdatasync of that file, or a syncfs of the store's filesystem;
- a folder's entry changes (a file created, a link, mkdir, rmdir, unlink, a rename in or
  out) stay pending until that folder is fsynced (or syncfs). A rename is one journalled
  operation on Linux's filesystems, so an fsync of either folder it touched makes it
  durable; an entry created and removed again before any fsync cancels out.

and checks three rules:

R1  A regular file is fsynced after its last write and before it is renamed (or linked)
    into place: any rename whose source is that file or a folder holding it, to a path
    outside the scratch areas .partial/ and .staging/.
R2  A folder is fsynced after entries change in it and before the next commit point.
R3  The records commit only what is already durable. A commit point is the sync of
    records.sqlite3-wal after writes to it (WAL mode), or of records.sqlite3 after writes
    a rollback journal guarded; the main file's writes in WAL mode are checkpoints, not
    commits. Every store change made before a commit's first write must be durable by
    then: entries by R2, file data (a file written in place) by R3 itself.

Changes inside the scratch areas (.partial/, .staging/) are work in flight: whatever the
records say about them is re-verified (hashed) before use, so their pending state at a
commit is not a violation unless --strict is given. A change that moves something out of a
real place (a rename of <id>/ into .staging/) concerns that place and is always checked.
SQLite's own files (records.sqlite3, -wal, -shm, -journal) are SQLite's business.

Options: --explain prints the model of durable state step by step; --crash-states lists,
at every flush and commit, what a power cut there could lose; --records-first PATH checks
that a records commit comes before the first change to PATH (delete: the intent is
recorded before the files go); --max-redundant-flushes N fails when more flushes than N
had nothing to flush (an object fsynced twice with no write between, or per-file fsyncs
that a syncfs repeats before anything needed them; a folder whose entries changed is never
counted); --json prints the result as one JSON document. Exit status: 0 no violation,
1 violations, 2 the trace or the options are unusable.

Python 3 standard library only.
"""

import argparse
import json
import os
import re
import sys

RECORDS_NAMES = ("records.sqlite3", "records.sqlite3-wal", "records.sqlite3-shm", "records.sqlite3-journal")
SCRATCH = (".partial", ".staging")
IGNORED = (".locks",)


# MARK: Reading strace's output

def decode_escapes(text):
    """strace's C-style escapes (\\n, \\", \\\\, \\xNN, \\NNN octal) to a str (bytes that are
    not UTF-8 kept with surrogateescape)."""
    out = bytearray()
    i = 0
    n = len(text)
    simple = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, "e": 27, '"': 34, "\\": 92, "'": 39}
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        d = text[i + 1]
        if d in simple:
            out.append(simple[d])
            i += 2
        elif d == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2:i + 4]):
            out.append(int(text[i + 2:i + 4], 16))
            i += 4
        elif d in "01234567":
            j = i + 1
            while j < n and j < i + 4 and text[j] in "01234567":
                j += 1
            out.append(int(text[i + 1:j], 8) & 0xFF)
            i = j
        else:
            out += d.encode("utf-8", "surrogateescape")
            i += 2
    return out.decode("utf-8", "surrogateescape")


def scan_call(text):
    """Splits `name(args) = ret` into (name, [args], ret), quotes, fd annotations (`3</p>`,
    `AT_FDCWD</p>`, `5<UNIX:[1->2]>`) and nesting respected. None when it is not a call."""
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\(", text)
    if not m:
        return None
    name = m.group(1)
    i = m.end()
    n = len(text)
    args = []
    current = []
    depth = 0
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            current.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "<" and current and (current[-1][-1:].isdigit() or "".join(current).rstrip().endswith("AT_FDCWD")):
            # An fd's annotation: a path (escapes `>` as \76) or a socket/pipe/anon inode,
            # which may hold `->` inside brackets.
            j = i + 1
            if j < n and text[j] == "/":
                while j < n and text[j] != ">":
                    j += 2 if text[j] == "\\" else 1
            else:
                brackets = 0
                while j < n and not (text[j] == ">" and brackets == 0):
                    if text[j] == "[":
                        brackets += 1
                    elif text[j] == "]":
                        brackets -= 1
                    j += 1
            current.append(text[i:j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0 and c == ")":
                args.append("".join(current).strip())
                rest = text[i + 1:]
                rm = re.match(r"\s*=\s*(.*)$", rest)
                if not rm:
                    return None
                return name, [a for a in args if a != ""], rm.group(1).strip()
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    return None


LINE = re.compile(r"^(?:(?:\[pid\s+)?(\d+)\]?\s+)?(?:(\d\d:\d\d:\d\d(?:\.\d+)?)\s+)?(.*)$")


class Call:
    """One finished syscall: where it started and ended in the trace, its arguments, its
    result (value, errno, the fd annotation of a returned descriptor)."""

    def __init__(self, line, end_line, pid, name, args, ret):
        self.line = line
        self.end_line = end_line
        self.pid = pid
        self.name = name
        self.args = args
        self.ret = ret
        self.value = None
        self.errno = None
        self.ret_path = None
        m = re.match(r"(-?\d+|0x[0-9a-fA-F]+)(<(.*)>)?(?:\s+(E[A-Z0-9]+))?", ret)
        if m:
            self.value = int(m.group(1), 0)
            if m.group(3) is not None and m.group(3).startswith("/"):
                self.ret_path = decode_escapes(m.group(3))
            self.errno = m.group(4)

    @property
    def ok(self):
        return self.value is not None and self.value >= 0

    @property
    def unknown(self):
        return self.value is None

    def __repr__(self):
        return "%s(%s) = %s @%d" % (self.name, ", ".join(self.args), self.ret, self.line)


def read_calls(lines):
    """The calls of an strace log, in the order they finished; `<unfinished ...>` and
    `<... resumed>` halves joined per thread. Yields Call; records what it skipped."""
    pending = {}
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        m = LINE.match(line)
        if not m:
            continue
        pid = m.group(1) or "0"
        body = m.group(3)
        if body.startswith("+++") or body.startswith("---"):
            continue
        resumed = re.match(r"<\.\.\. ([A-Za-z0-9_]+) resumed>\s?(.*)$", body)
        if resumed:
            name = resumed.group(1)
            start = pending.pop((pid, name), None)
            if start is None:
                continue
            start_line, head = start
            # strace starts the resumed half with the rest of the arguments (often just ")").
            text = head + resumed.group(2)
            parsed = scan_call(text)
            if parsed:
                yield Call(start_line, number, pid, parsed[0], parsed[1], parsed[2])
            continue
        unfinished = body.find(" <unfinished ...>")
        if unfinished >= 0:
            head = body[:unfinished]
            m2 = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\(", head)
            if m2:
                # A comma may be missing between the printed args and the rest: strace prints
                # "write(3<...>, "x", 1 <unfinished ...>" then "<... write resumed>) = 1".
                pending[(pid, m2.group(1))] = (number, head)
            continue
        parsed = scan_call(body)
        if parsed:
            yield Call(number, number, pid, parsed[0], parsed[1], parsed[2])


def fd_arg(arg):
    """(fd text, path or None) of an argument like `3</p>`, `AT_FDCWD</p>`, `3`; a socket's or
    pipe's annotation (`5<UNIX:[1->2]>`) gives the path "" (no file, but strace -y was on)."""
    m = re.match(r"^(-?\d+|AT_FDCWD)(?:<(.*)>)?$", arg.strip(), re.S)
    if not m:
        return None, None
    path = m.group(2)
    if path is not None and path.startswith("/"):
        return m.group(1), decode_escapes(path)
    return m.group(1), ("" if path is not None else None)


def string_arg(arg):
    m = re.match(r'^"(.*)"(\.\.\.)?$', arg.strip(), re.S)
    if not m:
        return None
    return decode_escapes(m.group(1))


def flag_set(arg):
    return set(p.strip() for p in arg.split("|")) if arg else set()


# MARK: The model of durable state

class Obj:
    """A file or folder (an inode), under whatever names it has now."""
    counter = 0

    def __init__(self, kind, line=None, complete=False):
        Obj.counter += 1
        self.id = Obj.counter
        self.kind = kind              # "file", "dir", or "?" (pre-existing, not yet known)
        self.names = set()
        self.dirty = []               # lines of writes not yet flushed
        self.reported = None          # the violation that already names the pending writes
        self.pending = []             # entry operations in this folder not yet durable
        self.touched = False          # entries changed since this folder's own last flush
        self.created = line           # line of its creation in the trace (None: it existed)
        self.create_op = None
        self.complete = complete      # a folder made in the trace: every child is known
        self.dead = False

    def name(self):
        return sorted(self.names)[0] if self.names else "(removed)"


class Op:
    """One change of folder entries: create, link, mkdir, unlink, rmdir, rename. Its
    entries are (folder, name) pairs, so its paths follow the folders when they move."""

    def __init__(self, kind, line, entries, obj=None):
        self.kind = kind
        self.line = line
        self.entries = entries        # [(folder Obj, name)]; a rename: source, then destination
        self.dirs = []                # folders whose fsync makes it durable (any of them)
        for d, _ in entries:
            if all(d is not e for e in self.dirs):
                self.dirs.append(d)
        self.obj = obj
        self.first_paths = [Op.entry_path(e) for e in entries]
        self.durable = False
        self.moot = False
        self.reported = False

    @staticmethod
    def entry_path(entry):
        folder, name = entry
        if folder.dead:
            return None
        return folder.name().rstrip("/") + "/" + name

    @property
    def path(self):
        """The entry's path now (a rename: the source); where it was when its folder is gone."""
        return Op.entry_path(self.entries[0]) or self.first_paths[0]

    @property
    def other(self):
        if len(self.entries) < 2:
            return None
        return Op.entry_path(self.entries[1]) or self.first_paths[1]

    @property
    def open(self):
        return not (self.durable or self.moot)


class Violation:
    def __init__(self, rule, line, path, text, lines):
        self.rule = rule
        self.line = line
        self.path = path
        self.text = text
        self.lines = sorted(set(lines))
        self.notes = []

    def render(self):
        refs = ", ".join(str(n) for n in self.lines)
        out = "%s line %d (lines %s): %s: %s" % (self.rule, self.line, refs, self.path, self.text)
        for note in self.notes:
            out += "; " + note
        return out

    def json(self):
        return {"rule": self.rule, "line": self.line, "lines": self.lines, "path": self.path,
                "text": self.text + "".join("; " + n for n in self.notes)}


class Model:
    def __init__(self, store, strict=False, records_first=None, cwd=None, explain=False, crash_states=False):
        self.store = store.rstrip("/") or "/"
        self.strict = strict
        self.records_first = records_first
        self.cwd_default = cwd
        self.explain_on = explain
        self.crash_on = crash_states
        self.paths = {}
        self.absent = set()
        self.cwd = {}
        self.violations = []
        self.commits = []
        self.commit_start = {}        # records file → line of its first write since its last sync
        self.journal_written = False  # a rollback journal written since the main file's last sync
        self.last_kind = {}           # thread → "records" after SQLite's calls, "store" after others
        self.flushes = []             # dicts: line, path, what, redundant (reason or None)
        self.since_demand = []
        self.renames_into_place = 0
        self.first_change = None
        self.explain_lines = []
        self.crash_lines = []
        self.notes = []
        self.calls = 0
        self.missing_paths = 0
        self.annotated = 0
        self.store_seen = False

    # MARK: Paths

    def rel(self, path):
        if path == self.store:
            return "."
        if path.startswith(self.store + "/"):
            return path[len(self.store) + 1:]
        return path

    def area(self, path):
        """'outside', 'ignored', 'records', 'scratch' or 'place'."""
        if path is None:
            return "outside"
        if path == self.store:
            return "place"
        if not path.startswith(self.store + "/"):
            return "outside"
        rel = path[len(self.store) + 1:]
        first = rel.split("/", 1)[0]
        if first in IGNORED:
            return "ignored"
        if first in SCRATCH:
            return "scratch"
        if rel in RECORDS_NAMES:
            return "records"
        return "place"

    def tracked(self, path):
        return self.area(path) in ("place", "scratch")

    def norm(self, path):
        return os.path.normpath(path) if path else path

    def resolve(self, call, dir_arg, name_arg):
        """The absolute path named by (dirfd, name) or a plain path argument."""
        name = string_arg(name_arg) if name_arg is not None else None
        if name is None:
            return None
        if name.startswith("/"):
            return self.norm(self.fix(name))
        base = None
        if dir_arg is not None:
            fd, path = fd_arg(dir_arg)
            if fd == "AT_FDCWD":
                if path:
                    self.cwd[call.pid] = path
                    self.cwd["*"] = path
                base = path or self.cwd.get(call.pid) or self.cwd.get("*") or self.cwd_default
            else:
                base = path or None
                if path is None and fd is not None:
                    self.missing_paths += 1
        else:
            base = self.cwd.get(call.pid) or self.cwd.get("*") or self.cwd_default
        if base is None:
            return None
        return self.norm(self.fix(base.rstrip("/") + "/" + name if name else base))

    def fix(self, path):
        """A path spelled through the store's unresolved name, as the store's real path."""
        if self.alias and (path == self.alias or path.startswith(self.alias + "/")):
            return self.store + path[len(self.alias):]
        return path

    alias = None
    crash_limit = 12

    def fd_path(self, arg):
        fd, path = fd_arg(arg)
        if path is None:
            if fd is not None and fd != "AT_FDCWD" and not fd.startswith("-"):
                self.missing_paths += 1
            return None
        self.annotated += 1
        if path == "":
            return None
        if path.endswith(" (deleted)"):
            return path   # an unlinked file (or O_TMPFILE): tracked by this exact text
        return self.norm(self.fix(path))

    def note_cwd(self, call):
        for arg in call.args:
            fd, path = fd_arg(arg)
            if fd == "AT_FDCWD" and path:
                self.cwd[call.pid] = path
                self.cwd["*"] = path

    # MARK: Objects

    def parent(self, path):
        return os.path.dirname(path)

    def obj(self, path, kind="?"):
        """The object at `path`, made (as already existing) when the model has not met it."""
        o = self.paths.get(path)
        if o is None:
            o = Obj(kind)
            o.names.add(path)
            self.paths[path] = o
            self.absent.discard(path)
        elif kind != "?" and o.kind == "?":
            o.kind = kind
        return o

    def dir_obj(self, path):
        return self.obj(path, "dir")

    def entry(self, path):
        """(the folder object holding `path`, its name there)."""
        return self.dir_obj(self.parent(path)), os.path.basename(path)

    def subtree(self, path):
        prefix = path + "/"
        return [(p, o) for p, o in self.paths.items() if p == path or p.startswith(prefix)]

    def drop_name(self, path):
        """Forgets `path` (and what is below it); objects left with no name are gone, and
        whatever was pending on them is moot."""
        for p, o in self.subtree(path):
            del self.paths[p]
            o.names.discard(p)
            if not o.names:
                o.dead = True
                o.dirty = []
                # The entries of a removed folder no longer matter; a rename that also
                # touched a living folder still does, through that folder.
                for op in o.pending:
                    op.dirs = [d for d in op.dirs if d is not o]
                    if not op.dirs:
                        op.moot = True
                o.pending = []
        self.absent.add(path)

    def add_op(self, op):
        if not all(self.tracked(d.name()) for d in op.dirs):
            # The store's own entry in the folder above it is outside the store.
            op.dirs = [d for d in op.dirs if self.tracked(d.name())]
            if not op.dirs:
                return
        for d in op.dirs:
            d.pending.append(op)
            d.touched = True
        self.explain("  %s line %d: %s pending in %s" % (op.kind, op.line, self.describe_op(op),
                                                           " or ".join(self.rel(d.name()) for d in op.dirs)))

    def change(self, line, path, what):
        """The first change to --records-first's path."""
        if self.records_first is None or self.first_change is not None or path is None:
            return
        target = self.records_first
        if path == target or path.startswith(target + "/"):
            self.first_change = (line, what)

    # MARK: Output helpers

    def explain(self, text):
        if self.explain_on:
            self.explain_lines.append(text)

    def describe_op(self, op):
        if op.kind == "rename":
            return "rename %s -> %s" % (self.rel(op.path), self.rel(op.other))
        return "%s %s" % (op.kind, self.rel(op.path))

    # MARK: Replaying calls

    def replay(self, calls):
        for call in calls:
            self.calls += 1
            self.note_cwd(call)
            handler = getattr(self, "on_" + call.name, None)
            if handler is not None:
                handler(call)
        self.finish()

    # Opens

    def on_open(self, call):
        self.opened(call, None, call.args[0] if call.args else None, call.args[1] if len(call.args) > 1 else "")

    def on_openat(self, call):
        if len(call.args) >= 3:
            self.opened(call, call.args[0], call.args[1], call.args[2])

    def on_openat2(self, call):
        if len(call.args) >= 3:
            flags = re.search(r"flags=([A-Z0-9_|]+)", call.args[2])
            self.opened(call, call.args[0], call.args[1], flags.group(1) if flags else "")

    def on_creat(self, call):
        self.opened(call, None, call.args[0] if call.args else None, "O_WRONLY|O_CREAT|O_TRUNC")

    def opened(self, call, dir_arg, name_arg, flags_arg):
        path = self.resolve(call, dir_arg, name_arg)
        flags = flag_set(flags_arg)
        if call.ret_path:
            if call.ret_path.endswith(" (deleted)"):
                return
            path = self.norm(self.fix(call.ret_path))
        if path is None or not self.tracked(path):
            return
        self.store_seen = True
        if not call.ok:
            if call.errno == "ENOENT":
                self.absent.add(path)
            return
        if "O_TMPFILE" in flags or "O_TMPFILE|O_DIRECTORY" in flags_arg:
            return
        existed = path in self.paths
        parent = self.paths.get(self.parent(path))
        if "O_CREAT" in flags and not existed:
            known_new = "O_EXCL" in flags or (parent is not None and parent.complete) or path in self.absent
            if known_new:
                self.created(call, path, Obj("file", call.line), "create")
                return
            self.notes.append("line %d: %s opened with O_CREAT but not O_EXCL in a folder the trace did not make: "
                              "taken as already there" % (call.line, self.rel(path)))
        kind = "dir" if "O_DIRECTORY" in flags else "?"
        o = self.obj(path, kind)
        if "O_TRUNC" in flags and ("O_WRONLY" in flags or "O_RDWR" in flags) and existed and o.created is None:
            self.wrote(o, call.line, path, "truncated by open")

    # Writes

    def wrote(self, o, line, path, what):
        o.dirty.append(line)
        if o.kind == "?":
            o.kind = "file"
        self.explain("line %d: %s %s: data pending" % (line, what, self.rel(path)))
        self.change(line, path, what)

    def data_call(self, call, what):
        if not call.args:
            return
        path = self.fd_path(call.args[0])
        if path is None:
            return
        area = self.area(path) if not path.endswith(" (deleted)") else "scratch"
        if area == "records":
            self.records_write(call, path)
            return
        if area not in ("place", "scratch"):
            return
        self.last_kind[call.pid] = "store"
        if not call.ok and not call.unknown:
            return
        if path.endswith(" (deleted)"):
            return
        self.wrote(self.obj(path, "file"), call.line, path, what)

    def on_write(self, call):
        self.data_call(call, "write to")

    on_pwrite64 = on_pwrite = on_writev = on_pwritev = on_pwritev2 = on_write

    def on_ftruncate(self, call):
        self.data_call(call, "ftruncate of")

    on_ftruncate64 = on_ftruncate

    def on_fallocate(self, call):
        self.data_call(call, "fallocate of")

    def on_truncate(self, call):
        path = self.resolve(call, None, call.args[0] if call.args else None)
        if path is None or not self.tracked(path) or not call.ok:
            return
        self.wrote(self.obj(path, "file"), call.line, path, "truncate of")

    on_truncate64 = on_truncate

    # Flushes

    def on_fsync(self, call):
        if not call.args or not (call.ok or call.unknown):
            return
        path = self.fd_path(call.args[0])
        if path is None:
            return
        area = self.area(path)
        if area == "records":
            self.records_sync(call, path)
            return
        if area not in ("place", "scratch") or path.endswith(" (deleted)"):
            return
        o = self.obj(path)
        self.crash_point(call, "%s %s" % (call.name, self.rel(path)))
        open_ops = [op for op in o.pending if op.open]
        # SQLite syncs the store folder after creating its journal or WAL: its business,
        # never counted as the tool's redundant flush.
        sqlites = path == self.store and self.last_kind.get(call.pid) == "records"
        self.last_kind[call.pid] = "store"
        # A folder whose entries changed is not flushed for nothing, even when a rename's
        # other folder was flushed first (one journalled rename: durable either way).
        if not o.dirty and not open_ops and not o.touched:
            if not sqlites:
                self.flushed(call, path, "nothing to flush: no write or entry change since the last flush of %s"
                             % self.rel(path))
            self.explain("line %d: %s %s: nothing pending (redundant)" % (call.line, call.name, self.rel(path)))
            return
        for op in open_ops:
            self.made_durable(op)
        o.pending = []
        o.touched = False
        if o.dirty:
            self.explain("line %d: %s %s: data durable (writes at %s)" % (call.line, call.name, self.rel(path),
                                                                          ", ".join(map(str, o.dirty[-3:]))))
        for op in open_ops:
            self.explain("line %d: %s %s: %s durable" % (call.line, call.name, self.rel(path), self.describe_op(op)))
        o.dirty = []
        o.reported = None
        self.flushed(call, path, None)

    on_fdatasync = on_fsync

    def made_durable(self, op):
        op.durable = True
        if op.kind == "rename" and op.obj is not None:
            # The entry the object was created under is gone for good: its creation no
            # longer matters on its own.
            cop = op.obj.create_op
            if cop is not None and cop.open and cop.entries[0][0] is op.entries[0][0] \
                    and cop.entries[0][1] == op.entries[0][1]:
                cop.moot = True

    def flushed(self, call, path, redundant, what=None):
        """One flush; `what` is "file", "folder" or "filesystem"."""
        if what is None:
            o = self.paths.get(path)
            what = "folder" if (o is not None and o.kind == "dir") or path == self.store else "file"
        entry = {"line": call.line, "call": call.name, "path": self.rel(path), "what": what, "redundant": redundant}
        self.flushes.append(entry)
        if redundant is None:
            self.since_demand.append(entry)

    def flush_all(self, call, what):
        self.crash_point(call, what)
        pending = False
        for p, o in list(self.paths.items()):
            if o.dirty or any(op.open for op in o.pending):
                pending = True
            for op in o.pending:
                if op.open:
                    self.made_durable(op)
            o.pending = []
            o.touched = False
            o.dirty = []
            o.reported = None
        self.explain("line %d: %s: everything in the store durable" % (call.line, what))
        if not pending:
            self.flushed(call, self.store, "nothing to flush: nothing in the store was pending", "filesystem")
            return
        for entry in self.since_demand:
            if entry["redundant"] is None:
                entry["redundant"] = "the %s at line %d flushed it again before anything needed it" % (call.name, call.line)
        self.since_demand = []
        self.flushed(call, self.store, None, "filesystem")

    def on_syncfs(self, call):
        if not call.args or not (call.ok or call.unknown):
            return
        path = self.fd_path(call.args[0])
        if path is None or self.area(path) == "outside":
            return
        self.flush_all(call, "syncfs(%s)" % self.rel(path))

    def on_sync(self, call):
        self.flush_all(call, "sync()")

    # Entry changes

    def on_mkdir(self, call):
        self.made_dir(call, self.resolve(call, None, call.args[0] if call.args else None))

    def on_mkdirat(self, call):
        if len(call.args) >= 2:
            self.made_dir(call, self.resolve(call, call.args[0], call.args[1]))

    def made_dir(self, call, path):
        if path is None or not self.tracked(path):
            return
        self.store_seen = True
        if not call.ok:
            if call.errno == "EEXIST":
                self.dir_obj(path)
            return
        if path in self.paths:
            self.drop_name(path)
        self.created(call, path, Obj("dir", call.line, complete=True), "mkdir")

    def created(self, call, path, o, kind):
        """A new file or folder `o` at `path`: its entry pending in the folder above."""
        o.names.add(path)
        self.paths[path] = o
        self.absent.discard(path)
        op = Op(kind, call.line, [self.entry(path)], obj=o)
        o.create_op = op
        self.explain("line %d: %s %s" % (call.line, kind, self.rel(path)))
        self.add_op(op)
        self.change(call.line, path, "created" if kind == "create" else kind)

    def on_unlink(self, call):
        self.removed(call, self.resolve(call, None, call.args[0] if call.args else None), False)

    def on_rmdir(self, call):
        self.removed(call, self.resolve(call, None, call.args[0] if call.args else None), True)

    def on_unlinkat(self, call):
        if len(call.args) >= 2:
            flags = flag_set(call.args[2]) if len(call.args) > 2 else set()
            self.removed(call, self.resolve(call, call.args[0], call.args[1]), "AT_REMOVEDIR" in flags)

    def removed(self, call, path, is_dir):
        if path is None or not self.tracked(path) or not call.ok:
            if path is not None and call.errno == "ENOENT":
                self.absent.add(path)
            return
        self.store_seen = True
        o = self.paths.get(path)
        kind = "rmdir" if is_dir else "unlink"
        self.change(call.line, path, kind)
        parent, name = self.entry(path)
        cop = o.create_op if o is not None else None
        if (cop is not None and cop.open and len(o.names) == 1 and cop.entries[0][0] is parent
                and cop.entries[0][1] == name):
            # Made and removed again before any fsync of its folder: nothing durable changed.
            cop.moot = True
            parent.pending = [op for op in parent.pending if op is not cop]
            self.explain("line %d: %s %s: cancels its creation at line %d (never durable)" % (call.line, kind,
                                                                                             self.rel(path), cop.line))
            self.drop_name(path)
            return
        self.explain("line %d: %s %s" % (call.line, kind, self.rel(path)))
        self.drop_name(path)
        self.add_op(Op(kind, call.line, [(parent, name)], obj=o))

    def on_rename(self, call):
        if len(call.args) >= 2:
            self.renamed(call, self.resolve(call, None, call.args[0]), self.resolve(call, None, call.args[1]), set())

    def on_renameat(self, call):
        if len(call.args) >= 4:
            self.renamed(call, self.resolve(call, call.args[0], call.args[1]),
                         self.resolve(call, call.args[2], call.args[3]), set())

    def on_renameat2(self, call):
        if len(call.args) >= 4:
            flags = flag_set(call.args[4]) if len(call.args) > 4 else set()
            self.renamed(call, self.resolve(call, call.args[0], call.args[1]),
                         self.resolve(call, call.args[2], call.args[3]), flags)

    def renamed(self, call, src, dst, flags):
        if src is None or dst is None or not call.ok:
            return
        src_in, dst_in = self.tracked(src), self.tracked(dst)
        if not src_in and not dst_in:
            return
        self.store_seen = True
        if "RENAME_EXCHANGE" in flags:
            a = self.subtree(src)
            b = self.subtree(dst)
            self.check_into_place(call, src, dst)
            self.check_into_place(call, dst, src)
            for p, _ in a + b:
                del self.paths[p]
            for p, o in a:
                o.names.discard(p)
                q = dst + p[len(src):]
                o.names.add(q)
                self.paths[q] = o
            for p, o in b:
                o.names.discard(p)
                q = src + p[len(dst):]
                o.names.add(q)
                self.paths[q] = o
            self.change(call.line, src, "exchanged")
            self.change(call.line, dst, "exchanged")
            self.add_op(Op("rename", call.line, [self.entry(src), self.entry(dst)]))
            return
        if not dst_in:
            # Out of the store: as good as removed.
            self.removed(call, src, (self.paths.get(src) or Obj("?")).kind == "dir")
            return
        if not src_in:
            # Into the store from outside: a new entry whose content the model has not seen.
            o = self.obj(dst)
            op = Op("create", call.line, [self.entry(dst)], obj=o)
            self.add_op(op)
            return
        self.check_into_place(call, src, dst)
        self.change(call.line, src, "renamed to %s" % self.rel(dst))
        self.change(call.line, dst, "renamed from %s" % self.rel(src))
        moved = self.subtree(src)
        if not moved:
            o = self.obj(src)
            moved = [(src, o)]
        if dst in self.paths and self.paths[dst] is not moved[0][1]:
            self.drop_name(dst)
        for p, o in moved:
            del self.paths[p]
            o.names.discard(p)
        for p, o in moved:
            q = dst + p[len(src):]
            o.names.add(q)
            self.paths[q] = o
        self.absent.add(src)
        self.absent.discard(dst)
        self.explain("line %d: rename %s -> %s" % (call.line, self.rel(src), self.rel(dst)))
        self.add_op(Op("rename", call.line, [self.entry(src), self.entry(dst)], obj=moved[0][1]))

    def check_into_place(self, call, src, dst):
        """R1: what goes into place must already be on the disk."""
        if self.area(dst) != "place":
            return
        self.renames_into_place += 1
        self.demand()
        for p, o in sorted(self.subtree(src), key=lambda x: x[0]):
            if o.dirty and o.reported is None:
                final = dst + p[len(src):]
                v = Violation(
                    "R1", call.line, self.rel(final),
                    "%s into place at line %d (%s -> %s) while its writes (last at line %d) were not fsynced: "
                    "a power cut after the rename can leave %s empty, short or with a hole under its final name"
                    % ("renamed" if call.name.startswith("rename") else "linked", call.line, self.rel(src),
                       self.rel(dst), o.dirty[-1], self.rel(final)),
                    [call.line, o.dirty[-1]])
                self.violations.append(v)
                o.reported = v

    def on_link(self, call):
        if len(call.args) >= 2:
            self.linked(call, self.resolve(call, None, call.args[0]), self.resolve(call, None, call.args[1]))

    def on_linkat(self, call):
        if len(call.args) >= 4:
            flags = flag_set(call.args[4]) if len(call.args) > 4 else set()
            src_name = string_arg(call.args[1])
            if src_name == "" and "AT_EMPTY_PATH" in flags:
                src = self.fd_path(call.args[0])
            else:
                src = self.resolve(call, call.args[0], call.args[1])
            self.linked(call, src, self.resolve(call, call.args[2], call.args[3]))

    def linked(self, call, src, dst):
        if dst is None or not self.tracked(dst) or not call.ok:
            return
        self.store_seen = True
        o = self.paths.get(src) if src is not None else None
        if o is None:
            o = Obj("file")
            if src is not None and self.tracked(src) and not src.endswith(" (deleted)"):
                o.names.add(src)
                self.paths[src] = o
        if src is not None:
            self.check_into_place(call, src, dst)
        o.names.add(dst)
        self.paths[dst] = o
        self.absent.discard(dst)
        self.change(call.line, dst, "linked")
        self.explain("line %d: link %s -> %s" % (call.line, self.rel(src) if src else "?", self.rel(dst)))
        self.add_op(Op("link", call.line, [self.entry(dst)], obj=o))

    # The records

    def records_write(self, call, path):
        """SQLite's writes. WAL mode commits by appending frames to -wal and syncing it; the
        main file's writes are checkpoints of what is already committed. A rollback journal
        commits by writing the main file (after the journal is synced) and syncing it."""
        self.last_kind[call.pid] = "records"
        name = os.path.basename(path)
        if name == "records.sqlite3-journal":
            self.journal_written = True
        if name in ("records.sqlite3-wal", "records.sqlite3") and path not in self.commit_start:
            self.commit_start[path] = call.line

    def records_sync(self, call, path):
        """A commit point: the sync of -wal after writes to it, or of the main file after
        writes to it that a rollback journal guarded. It must find durable every change made
        before its first write."""
        self.last_kind[call.pid] = "records"
        name = os.path.basename(path)
        first = self.commit_start.pop(path, None)
        if name == "records.sqlite3":
            guarded = self.journal_written
            self.journal_written = False
            if not guarded:
                return   # a WAL checkpoint: nothing new is committed
        if name not in ("records.sqlite3-wal", "records.sqlite3") or first is None:
            return
        items = [(kind, thing, dirty) for kind, thing, dirty in self.open_items()
                 if (dirty[0] if kind == "data" else thing.line) < first]
        self.commit(call, first, items)

    def open_items(self):
        """Everything pending now: (kind, object or op)."""
        items = []
        seen = set()
        for p, o in sorted(self.paths.items()):
            if o.dirty and id(o) not in seen:
                seen.add(id(o))
                items.append(("data", o, list(o.dirty)))
            for op in o.pending:
                if op.open and id(op) not in seen:
                    seen.add(id(op))
                    items.append(("op", op, None))
        return items

    def op_concerns(self, op):
        """'place' when the operation changes a real place in the store, else 'scratch'."""
        paths = [op.path] + ([op.other] if op.other else [])
        areas = set(self.area(p) for p in paths)
        if "place" in areas:
            return "place"
        return "scratch" if "scratch" in areas else "outside"

    def commit(self, call, first, items):
        number = len(self.commits) + 1
        self.commits.append({"line": first, "syncLine": call.line})
        self.demand()
        span = "lines %d-%d" % (first, call.line) if first != call.line else "line %d" % first
        self.crash_point(call, "records commit %d (%s)" % (number, span), items=items)
        self.explain("line %d: records commit %d (first write at line %d)" % (call.line, number, first))
        for kind, thing, dirty in items:
            if kind == "data":
                o = thing
                if o.dead or not o.dirty:
                    continue
                path = o.name()
                if self.area(path) != "place" and not self.strict:
                    continue
                if o.reported is not None:
                    if not any(n.startswith("still not fsynced") for n in o.reported.notes):
                        o.reported.notes.append("still not fsynced at the records commit at %s" % span)
                    continue
                v = Violation(
                    "R3", first, self.rel(path),
                    "the records commit at %s came while its writes (last at line %d) were not fsynced: "
                    "after a power cut the records can describe %s while it is empty or short"
                    % (span, dirty[-1], self.rel(path)),
                    [first, call.line, dirty[-1]])
                self.violations.append(v)
                o.reported = v
            else:
                op = thing
                if not op.open or op.reported:
                    continue
                concern = self.op_concerns(op)
                if concern == "outside" or (concern == "scratch" and not self.strict):
                    continue
                op.reported = True
                if op.kind == "rename":
                    lost = ("the rename can be undone: %s back and %s missing, while the records may describe the result"
                            % (self.rel(op.path), self.rel(op.other)))
                    what = "renamed to %s at line %d" % (self.rel(op.other), op.line)
                elif op.kind in ("unlink", "rmdir"):
                    lost = "%s can be back while the records may say it is gone" % self.rel(op.path)
                    what = ("removed" if op.kind == "unlink" else "folder removed") + " at line %d" % op.line
                else:
                    lost = "the records can describe %s while it is missing" % self.rel(op.path)
                    what = {"create": "created", "mkdir": "folder made", "link": "linked"}.get(op.kind, op.kind) \
                        + " at line %d" % op.line
                if len(op.dirs) > 1:
                    unsynced = "neither %s was fsynced" % " nor ".join(self.rel(d.name()) for d in op.dirs)
                else:
                    unsynced = "%s was not fsynced" % self.rel(op.dirs[0].name())
                named = op.path
                if op.kind == "rename" and self.area(op.other) == "place":
                    named = op.other
                v = Violation(
                    "R2", first, self.rel(named),
                    "%s, and %s before the records commit at %s: after a power cut %s" % (what, unsynced, span, lost),
                    [op.line, first, call.line])
                self.violations.append(v)

    def demand(self):
        """Something needs the flushes so far (a rename into place, a commit)."""
        self.since_demand = []

    # Crash states

    def crash_point(self, call, what, items=None):
        if not self.crash_on:
            return
        items = items if items is not None else self.open_items()
        lines = []
        for kind, thing, dirty in items:
            if kind == "data":
                path = thing.name()
                lines.append("    data of %s (writes at lines %s) [%s]: may be empty, short or hold zeros"
                             % (self.rel(path), ", ".join(map(str, dirty[-3:])), self.area(path)))
            else:
                op = thing
                lines.append("    %s (line %d) [%s]: may be undone" % (self.describe_op(op), op.line,
                                                                        self.op_concerns(op)))
        self.crash_lines.append("power cut before line %d, %s: %d operation(s) not yet durable%s"
                                % (call.line, what, len(lines), ":" if lines else ""))
        self.crash_lines.extend(lines[:self.crash_limit])
        if len(lines) > self.crash_limit:
            self.crash_lines.append("    ... and %d more" % (len(lines) - self.crash_limit))

    def finish(self):
        if self.records_first is not None and self.first_change is not None:
            line, what = self.first_change
            before = [c for c in self.commits if c["syncLine"] < line]
            if not before:
                rel = self.rel(self.records_first)
                self.violations.append(Violation(
                    "ORDER", line, rel,
                    "changed at line %d (%s) before any records commit: from there until the records say so, "
                    "and after a power cut in between, the records still call %s installed while its files are "
                    "going or gone (record the intent first)" % (line, what, rel),
                    [line] + [c["line"] for c in self.commits[:1]]))

    # MARK: Reports

    def summary(self):
        redundant = [f for f in self.flushes if f["redundant"]]
        return {
            "calls": self.calls,
            "commits": len(self.commits),
            "renamesIntoPlace": self.renames_into_place,
            "flushes": len(self.flushes),
            "redundantFlushes": len(redundant),
            "violations": len(self.violations),
        }


def main(argv):
    parser = argparse.ArgumentParser(description="Check an strace log of a glasses-local run against the durability rule "
                                                 "(R1 fsync before rename into place, R2 folder fsync after entry changes, "
                                                 "R3 the records commit only what is durable).")
    parser.add_argument("trace", help="the strace -f -tt -y -yy ... -o TRACE log")
    parser.add_argument("--store", required=True, help="the store folder the run used")
    parser.add_argument("--explain", action="store_true", help="print the model of durable state as it was built")
    parser.add_argument("--crash-states", action="store_true",
                        help="at each flush and commit, list what a power cut there could lose")
    parser.add_argument("--strict", action="store_true",
                        help="also require the scratch areas (.partial/, .staging/) to be durable at each commit")
    parser.add_argument("--records-first", metavar="PATH",
                        help="require a records commit before the first change to PATH (relative to the store)")
    parser.add_argument("--max-redundant-flushes", type=int, metavar="N",
                        help="fail when more than N flushes had nothing to flush")
    parser.add_argument("--cwd", help="the working folder, for relative paths seen before any AT_FDCWD<...>")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON document")
    args = parser.parse_args(argv)

    given = os.path.abspath(args.store)
    store = os.path.realpath(given)
    records_first = None
    if args.records_first is not None:
        records_first = os.path.normpath(os.path.join(store, args.records_first))
    model = Model(store, strict=args.strict, records_first=records_first, cwd=args.cwd,
                  explain=args.explain, crash_states=args.crash_states)
    if given != store:
        model.alias = given
    try:
        with open(args.trace, encoding="utf-8", errors="surrogateescape") as f:
            model.replay(read_calls(f))
    except OSError as e:
        print("durability: cannot read %s: %s" % (args.trace, e), file=sys.stderr)
        return 2
    if model.calls == 0:
        print("durability: no system calls found in %s" % args.trace, file=sys.stderr)
        return 2
    if model.missing_paths and not model.annotated:
        print("durability: descriptors in %s carry no paths: record with strace -y" % args.trace, file=sys.stderr)
        return 2

    over = args.max_redundant_flushes is not None and model.summary()["redundantFlushes"] > args.max_redundant_flushes
    if args.json:
        doc = {
            "store": store,
            "summary": model.summary(),
            "violations": [v.json() for v in model.violations],
            "commits": model.commits,
            "redundantFlushes": [f for f in model.flushes if f["redundant"]],
            "notes": model.notes,
        }
        if args.explain:
            doc["explain"] = model.explain_lines
        if args.crash_states:
            doc["crashStates"] = model.crash_lines
        print(json.dumps(doc, indent=1))
    else:
        if args.explain:
            print("model of durable state (store %s):" % store)
            for line in model.explain_lines:
                print("  " + line)
            for note in model.notes:
                print("  note: " + note)
            print()
        if args.crash_states:
            print("crash states:")
            for line in model.crash_lines:
                print("  " + line)
            print()
        for v in model.violations:
            print(v.render())
        redundant = [f for f in model.flushes if f["redundant"]]
        s = model.summary()
        print("durability: %d calls, %d records commits, %d renames into place, %d flushes (%d redundant), %d violation(s)"
              % (s["calls"], s["commits"], s["renamesIntoPlace"], s["flushes"], s["redundantFlushes"], s["violations"]))
        for f in redundant[:20]:
            print("  redundant flush of a %s: line %d %s(%s): %s" % (f["what"], f["line"], f["call"], f["path"], f["redundant"]))
        if len(redundant) > 20:
            print("  ... and %d more redundant flushes" % (len(redundant) - 20))
        if over:
            print("durability: %d redundant flushes, more than the %d allowed" % (len(redundant), args.max_redundant_flushes))
    return 1 if model.violations or over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
