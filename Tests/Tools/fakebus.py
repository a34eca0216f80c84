#!/usr/bin/env python3
"""A stand-in system bus with a stand-in NetworkManager on it, for the metered tests
(stdlib only; test-only).

Usage: fakebus.py SOCKET METERED
  SOCKET   a unix socket path to listen on (point DBUS_SYSTEM_BUS_ADDRESS at unix:path=SOCKET)
  METERED  the NMMetered value NetworkManager answers (0 unknown, 1 yes, 2 no, 3 guess-yes,
           4 guess-no), or "absent": the name org.freedesktop.NetworkManager has no owner
           (the bus answers org.freedesktop.DBus.Error.ServiceUnknown to a call that forbids
           auto-start, and "yes" to one that would have started NetworkManager), or
           "silent": the bus accepts the connection and never answers (its handshake
           included); each connection appends a line to SOCKET.accepted.

Speaks just enough of the D-Bus protocol for one client: the SASL handshake (EXTERNAL),
then `Hello` and `org.freedesktop.DBus.Properties.Get("org.freedesktop.NetworkManager",
"Metered")` to /org/freedesktop/NetworkManager; every other call gets an error. It plays
the bus and NetworkManager at once (no dbus-daemon needed). Prints `PORT 0` (a unix socket
has no port) once it listens, then `GET <destination> <interface> <property>` and the
method call's flags (`flags=N`, bit 2 = no auto-start) on stderr-free stdout for each Get.
Ends when stdin reaches EOF (the test went away) or on SIGTERM.
"""
import os, socket, struct, sys, threading

SOCKET, METERED = sys.argv[1], sys.argv[2]


def pad(buf, n):
    buf += b"\0" * (-len(buf) % n)


def marshal_string(buf, s, sig=False):
    data = s.encode()
    if sig:
        buf += bytes([len(data)]) + data + b"\0"
    else:
        pad(buf, 4)
        buf += struct.pack("<I", len(data)) + data + b"\0"


def message(kind, serial, fields, signature, body):
    """A little-endian message: fields is [(code, type, value)]."""
    header = bytearray()
    for code, t, value in fields:
        pad(header, 8)
        header += bytes([code])
        marshal_string(header, t, sig=True)
        if t in ("s", "o"):
            marshal_string(header, value)
        elif t == "g":
            marshal_string(header, value, sig=True)
        elif t == "u":
            pad(header, 4)
            header += struct.pack("<I", value)
    if signature:
        pad(header, 8)
        header += bytes([8])
        marshal_string(header, "g", sig=True)
        marshal_string(header, signature, sig=True)
    fixed = b"l" + bytes([kind, 0, 1]) + struct.pack("<III", len(body), serial, len(header))
    out = bytearray(fixed) + header
    pad(out, 8)
    return bytes(out) + body


def parse(data):
    """(message length, serial, flags, fields {code: value}, body) or None when incomplete."""
    if len(data) < 16:
        return None
    if data[0:1] != b"l":
        raise ValueError("only little-endian clients")
    flags = data[2]
    body_len, serial, fields_len = struct.unpack_from("<III", data, 4)
    header_end = 16 + fields_len
    total = header_end + (-header_end % 8) + body_len
    if len(data) < total:
        return None
    fields, i = {}, 16
    while i < header_end:
        i += -i % 8
        code = data[i]; i += 1
        sig_len = data[i]; sig = data[i + 1:i + 1 + sig_len].decode(); i += 2 + sig_len
        if sig in ("s", "o"):
            i += -i % 4
            n = struct.unpack_from("<I", data, i)[0]; fields[code] = data[i + 4:i + 4 + n].decode(); i += 5 + n
        elif sig == "g":
            n = data[i]; fields[code] = data[i + 1:i + 1 + n].decode(); i += 2 + n
        elif sig == "u":
            i += -i % 4
            fields[code] = struct.unpack_from("<I", data, i)[0]; i += 4
        else:
            raise ValueError("header field type " + sig)
    body = data[header_end + (-header_end % 8):total]
    return total, serial, flags, fields, body


def strings(body):
    out, i = [], 0
    while i + 4 <= len(body):
        i += -i % 4
        n = struct.unpack_from("<I", body, i)[0]
        out.append(body[i + 4:i + 4 + n].decode()); i += 5 + n
    return out


def serve(conn):
    if METERED == "silent":
        with open(SOCKET + ".accepted", "a") as log:
            log.write("accepted\n")
        while conn.recv(4096):          # read whatever comes, answer nothing
            pass
        return
    serial = [0]

    def send(kind, reply_to, sender, signature, body, error=None):
        serial[0] += 1
        fields = [(5, "u", reply_to), (6, "s", ":1.1"), (7, "s", sender)]
        if error:
            fields.append((4, "s", error))
        conn.sendall(message(kind, serial[0], fields, signature, body))

    buf = b""
    # SASL: lines until BEGIN.
    while True:
        while b"\r\n" not in buf:
            chunk = conn.recv(4096)
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\r\n", 1)
        line = line.lstrip(b"\0")
        if line.startswith(b"AUTH EXTERNAL"):
            conn.sendall(b"OK 0123456789abcdef0123456789abcdef\r\n" if line.strip() != b"AUTH EXTERNAL" else b"DATA\r\n")
        elif line.startswith(b"DATA"):
            conn.sendall(b"OK 0123456789abcdef0123456789abcdef\r\n")
        elif line.startswith(b"NEGOTIATE_UNIX_FD"):
            conn.sendall(b"AGREE_UNIX_FD\r\n")
        elif line.startswith(b"BEGIN"):
            break
        else:
            conn.sendall(b"ERROR\r\n")
    while True:
        parsed = parse(buf)
        while parsed is None:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
            parsed = parse(buf)
        total, serial_in, flags, fields, body = parsed
        buf = buf[total:]
        member, interface, destination = fields.get(3), fields.get(2), fields.get(6)
        if member == "Hello":
            out = bytearray(); marshal_string(out, ":1.1")
            send(2, serial_in, "org.freedesktop.DBus", "s", bytes(out))
        elif member == "Get" and destination == "org.freedesktop.NetworkManager":
            args = strings(body)
            print("GET %s %s %s flags=%d" % (destination, args[0] if args else "", args[1] if len(args) > 1 else "", flags), flush=True)
            # A call that allows auto-start would have started NetworkManager: answered "yes",
            # so a client that forgets to forbid it reads the wrong state.
            if METERED == "absent" and flags & 0x2:
                out = bytearray(); marshal_string(out, "The name org.freedesktop.NetworkManager was not provided by any .service files")
                send(3, serial_in, "org.freedesktop.DBus", "s", bytes(out), error="org.freedesktop.DBus.Error.ServiceUnknown")
            else:
                value = 1 if METERED == "absent" else int(METERED)
                out = bytearray(); marshal_string(out, "u", sig=True); pad(out, 4); out += struct.pack("<I", value)
                send(2, serial_in, "org.freedesktop.NetworkManager", "v", bytes(out))
        else:
            out = bytearray(); marshal_string(out, "not implemented by fakebus.py")
            send(3, serial_in, "org.freedesktop.DBus", "s", bytes(out), error="org.freedesktop.DBus.Error.UnknownMethod")


def main():
    if os.path.exists(SOCKET):
        os.unlink(SOCKET)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(SOCKET)
    server.listen(8)
    print("PORT 0", flush=True)

    def accept():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=lambda: (serve(conn), conn.close()), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
