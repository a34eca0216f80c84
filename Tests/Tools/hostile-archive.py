#!/usr/bin/env python3
"""Writes one hostile tar.bz2 for the archive-safety tests (P8). Test-only.

Usage: hostile-archive.py KIND OUT.tar.bz2 PAYLOAD_DIR [TARGET]

Every archive starts with the regular files of PAYLOAD_DIR under the top folder
`model/` (so a plausible tree is half-extracted before the hostile entry is met),
then one hostile entry chosen by KIND:

  dotdot      `../x`                       (TARGET unused)
  absolute    TARGET as an absolute path   (e.g. /tmp/x-<uuid>)
  nested      `a/../../x`
  symlink     `model/out` -> TARGET (a folder outside the store), then `model/out/x`
  hardlink    `model/passwd` hard-linked to TARGET (e.g. /etc/passwd)
  device      `model/null`, a character device 1:3
  unlisted    `model/extra.bin`, a regular file the catalog does not list
  entries     `model/d0` … `model/dN`: TARGET empty folders (an entry-count bomb)
  bomb        `model/weights.bin` declared and stored as TARGET MiB of zeros
              (the catalog says a few KiB; the archive stays tiny)
"""
import io
import os
import sys
import tarfile


class Zeros(io.RawIOBase):
    """A stream of `n` zero bytes that never sits in memory all at once."""

    def __init__(self, n):
        self.left = n

    def readable(self):
        return True

    def readinto(self, b):
        k = min(len(b), self.left)
        b[:k] = bytes(k)
        self.left -= k
        return k


def regular(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def main():
    kind, out, payload = sys.argv[1], sys.argv[2], sys.argv[3]
    target = sys.argv[4] if len(sys.argv) > 4 else ""
    with tarfile.open(out, "w:bz2", format=tarfile.GNU_FORMAT) as tar:
        top = tarfile.TarInfo("model")
        top.type = tarfile.DIRTYPE
        top.mode = 0o755
        tar.addfile(top)
        for name in sorted(os.listdir(payload)):
            if kind == "bomb" and name == "weights.bin":
                continue
            with open(os.path.join(payload, name), "rb") as f:
                regular(tar, "model/" + name, f.read())

        if kind == "dotdot":
            regular(tar, "../x", b"escaped\n")
        elif kind == "absolute":
            regular(tar, target, b"escaped\n")
        elif kind == "nested":
            regular(tar, "a/../../x", b"escaped\n")
        elif kind == "symlink":
            link = tarfile.TarInfo("model/out")
            link.type = tarfile.SYMTYPE
            link.linkname = target
            tar.addfile(link)
            regular(tar, "model/out/x", b"written through the link\n")
        elif kind == "hardlink":
            link = tarfile.TarInfo("model/passwd")
            link.type = tarfile.LNKTYPE
            link.linkname = target
            tar.addfile(link)
        elif kind == "device":
            dev = tarfile.TarInfo("model/null")
            dev.type = tarfile.CHRTYPE
            dev.devmajor, dev.devminor = 1, 3
            dev.mode = 0o666
            tar.addfile(dev)
        elif kind == "unlisted":
            regular(tar, "model/extra.bin", b"not in the catalog\n")
        elif kind == "entries":
            for n in range(int(target)):
                d = tarfile.TarInfo("model/d%d" % n)
                d.type = tarfile.DIRTYPE
                d.mode = 0o755
                tar.addfile(d)
        elif kind == "bomb":
            size = int(target) << 20
            info = tarfile.TarInfo("model/weights.bin")
            info.size = size
            info.mode = 0o644
            tar.addfile(info, io.BufferedReader(Zeros(size), 1 << 20))
        else:
            sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
