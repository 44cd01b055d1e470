#!/usr/bin/env python3
"""The lento server on the wire, from a raw socket (protocol/PROTOCOL.md),
without lento's own client: the handshake and client identities, PING,
volume lookup, GETATTR and READDIR of a root, the permit (grant, renew,
a second client's ACQUIRE waiting while the holder is asked to give it
back, release), a REINTEGRATE refused without the permit, and malformed
frames closing only their own connection with a logged reason.

    tests/lento/server_wire.py [--lento tools/bin/lento-asan]

Prints "ok - NAME" / "not ok - NAME" and a closing "N passed, N failed".
"""
import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
LENTOCTL = os.path.join(TOP, "tools", "bin", "lentoctl")

HELLO, HELLO_REPLY, PING, PONG, ERROR = 1, 2, 3, 4, 5
GETATTR, GETATTR_REPLY, READDIR, READDIR_REPLY = 16, 17, 18, 19
VOLUME_LOOKUP, VOLUME_LOOKUP_REPLY = 32, 33
PERMIT_ACQUIRE, PERMIT_RENEW, PERMIT_RELEASE, PERMIT_REPLY = 48, 49, 50, 51
REINTEGRATE = 64
BREAK_VOLUME, PERMIT_REVOKE = 81, 82
ENOPERMIT, EEXIST = 1001, 17
MORE = 1


class Conn:
    """A raw protocol connection: frames out, frames in (with a timeout)."""

    def __init__(self, port, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout)
        self.buf = b""
        self.tag = 0

    def send(self, type_, body, tag=None, flags=0):
        if tag is None:
            self.tag += 1
            tag = self.tag
        self.s.sendall(struct.pack("<IHHI", len(body), type_, flags, tag) +
                       body)
        return tag

    def frame(self):
        """(type, flags, tag, body); None if the server closed."""
        while True:
            if len(self.buf) >= 12:
                n, t, f, tag = struct.unpack_from("<IHHI", self.buf)
                if len(self.buf) >= 12 + n:
                    body = self.buf[12:12 + n]
                    self.buf = self.buf[12 + n:]
                    return t, f, tag, body
            data = self.s.recv(1 << 16)
            if not data:
                return None
            self.buf += data

    def reply(self, tag):
        """The next frame with @tag, skipping pushes (kept in .pushes)."""
        while True:
            fr = self.frame()
            if fr is None:
                raise AssertionError("server closed the connection")
            if fr[2] == tag:
                return fr
            self.pushes.append(fr)

    pushes = []

    def close(self):
        self.s.close()


def hello(c, client=0, uuid=None, version=3):
    uuid = uuid or os.urandom(16)
    body = b"LENTO-LP" + \
        struct.pack("<HHII", version, version, 0, client) + uuid + \
        struct.pack("<I", 0)
    tag = c.send(HELLO, body)
    t, _, _, b = c.reply(tag)
    if t == ERROR:
        code, = struct.unpack_from("<I", b)
        return None, code, uuid
    assert t == HELLO_REPLY, t
    version, _, cid, epoch, hb = struct.unpack_from("<HIIQI", b)
    assert version == 3 and cid and epoch and hb
    return cid, epoch, uuid


def error_code(fr):
    assert fr[0] == ERROR, "expected ERROR, got type %d" % fr[0]
    return struct.unpack_from("<I", fr[3])[0]


class Server:
    def __init__(self, lento, tmp, lease_ms=3000):
        self.store = os.path.join(tmp, "store")
        self.log = os.path.join(tmp, "server.log")
        self.sock = os.path.join(tmp, "control.sock")
        self.p = subprocess.Popen(
            [lento, "server", "--store", self.store, "--listen",
             "127.0.0.1:0", "--control", self.sock, "--lease-ms",
             str(lease_ms), "--log", self.log])
        for _ in range(100):
            if os.path.exists(self.sock):
                break
            time.sleep(0.05)
        st = json.loads(self.ctl("--json", "status"))
        self.port = int(st["listening"][0].rsplit(":", 1)[1])

    def ctl(self, *args):
        return subprocess.run([LENTOCTL, "-s", self.sock] + list(args),
                              check=True, capture_output=True,
                              text=True).stdout

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(20)
        if rc != 0:
            raise AssertionError("server exited %d (an ASan report?): %s"
                                 % (rc, open(self.log).read()[-2000:]))


def volume(c, name):
    body = struct.pack("<H", len(name)) + name.encode()
    t, _, _, b = c.reply(c.send(VOLUME_LOOKUP, body))
    assert t == VOLUME_LOOKUP_REPLY, t
    vol, rv, rc, rs, stamp = struct.unpack_from("<IIIQQ", b)
    assert (rv, rc, rs) == (vol, 0, 1), (rv, rc, rs)
    return vol, stamp


def fid(vol, client=0, seq=1):
    return struct.pack("<IIQ", vol, client, seq)


# ---------------------------------------------------------------- cases

def case_handshake(srv):
    c = Conn(srv.port)
    cid, epoch, uuid = hello(c)
    c.close()
    # The same identity gets the same id back.
    c = Conn(srv.port)
    cid2, epoch2, _ = hello(c, cid, uuid)
    assert (cid2, epoch2) == (cid, epoch)
    c.close()
    # Someone else's id is refused.
    c = Conn(srv.port)
    none, code, _ = hello(c, cid, os.urandom(16))
    assert none is None and code == EEXIST, code
    c.close()
    # Clients of version 1 (listings without xattrs) and 2 (no
    # PRUNEXATTRS) are refused.
    for old in (1, 2):
        c = Conn(srv.port)
        none, code, _ = hello(c, version=old)
        assert none is None and code == 93, code   # EPROTONOSUPPORT
        c.close()


def case_ping(srv):
    c = Conn(srv.port)
    hello(c)
    tag = c.send(PING, struct.pack("<Q", 0xfedcba9876543210))
    t, _, _, b = c.reply(tag)
    assert t == PONG and struct.unpack("<Q", b)[0] == 0xfedcba9876543210
    c.close()


def case_root(srv):
    c = Conn(srv.port)
    hello(c)
    vol, stamp = volume(c, "v1")
    assert stamp == 1
    t, _, _, b = c.reply(c.send(GETATTR, fid(vol)))
    assert t == GETATTR_REPLY, t
    assert b[:16] == fid(vol) and b[16] == 2, "root is a directory"
    t, f, _, b = c.reply(c.send(READDIR, fid(vol)))
    assert t == READDIR_REPLY and not f & MORE, (t, f)
    # An unknown fid and an unknown volume are errors, not closes.
    assert error_code(c.reply(c.send(GETATTR, fid(vol, 7, 7)))) == 2
    body = struct.pack("<H", 4) + b"nope"
    assert error_code(c.reply(c.send(VOLUME_LOOKUP, body))) == 2
    c.close()


def case_permits(srv):
    a, b = Conn(srv.port), Conn(srv.port)
    hello(a)
    hello(b)
    vol, _ = volume(a, "v1")
    v = struct.pack("<I", vol)
    # b holds a callback on the root; a's grant must break it.
    b.reply(b.send(GETATTR, fid(vol)))
    t, _, _, body = a.reply(a.send(PERMIT_ACQUIRE, v))
    assert t == PERMIT_REPLY and struct.unpack("<II", body)[1] > 0
    fr = b.frame()
    assert fr[0] == BREAK_VOLUME and fr[2] == 0, fr
    t, _, _, body = a.reply(a.send(PERMIT_RENEW, v))
    assert t == PERMIT_REPLY
    # b asks: a is told to give it back; b waits until a releases.
    btag = b.send(PERMIT_ACQUIRE, v)
    fr = a.frame()
    assert fr[0] == PERMIT_REVOKE and fr[3] == v, fr
    b.s.settimeout(0.5)
    try:
        got = b.frame()
        raise AssertionError("b got an answer while a held it: %r"
                             % (got,))
    except socket.timeout:
        pass
    b.s.settimeout(10)
    t, _, _, body = a.reply(a.send(PERMIT_RELEASE, v))
    assert t == PERMIT_REPLY and struct.unpack("<II", body)[1] == 0
    t, _, _, body = b.reply(btag)
    assert t == PERMIT_REPLY and struct.unpack("<II", body)[1] > 0
    # a's renewal now fails: not the holder.
    assert error_code(a.reply(a.send(PERMIT_RENEW, v))) == 1
    a.close()
    b.close()


def case_lease_expires(srv):
    """A holder that does not answer loses the permit with its lease."""
    a, b = Conn(srv.port), Conn(srv.port)
    hello(a)
    hello(b)
    vol, _ = volume(a, "v2")
    v = struct.pack("<I", vol)
    a.reply(a.send(PERMIT_ACQUIRE, v))
    t0 = time.time()
    t, _, _, body = b.reply(b.send(PERMIT_ACQUIRE, v))
    waited = time.time() - t0
    assert t == PERMIT_REPLY, t
    assert 1.5 < waited < 8, "granted after %.1f s (lease 3 s)" % waited
    a.close()
    b.close()


def case_reintegrate_needs_permit(srv):
    c = Conn(srv.port)
    cid, _, _ = hello(c)
    vol, _ = volume(c, "v1")
    # One MKDIR of "d" in the root (record layout: PROTOCOL.md).
    vv0 = struct.pack("<B", 0) + struct.pack("<IQ", 0, 0)
    attr = struct.pack("<IIIIQqqqQ", 0x1, 0o755, 0, 0, 0, 0, 0, 0, 0)
    rec = struct.pack("<QHHIIq", 1, 2, 0, 0, 0, 0) + fid(vol) + \
        fid(vol, cid, 1) + bytes(32) + vv0 * 4 + struct.pack("<B", 2) + \
        attr + struct.pack("<H", 1) + b"d" + struct.pack("<H", 0) + \
        struct.pack("<I", 0)
    body = struct.pack("<IIQI", vol, cid, 1, 1) + rec
    tag = c.send(REINTEGRATE, body)
    fr = c.reply(tag)
    if fr[0] == ERROR and error_code(fr) == 74:
        raise AssertionError("the test's record is malformed: fix the test")
    assert error_code(fr) == ENOPERMIT, error_code(fr)
    c.close()


def case_malformed(srv):
    """A bad frame closes its own connection only, with a reason logged."""
    good = Conn(srv.port)
    hello(good)
    bad = Conn(srv.port)
    bad.send(PING, struct.pack("<Q", 1))  # before the handshake
    assert bad.frame() is None
    bad = Conn(srv.port)
    hello(bad)
    bad.send(GETATTR, b"\x01\x02\x03")  # a fid is 16 bytes
    assert bad.frame() is None
    bad = Conn(srv.port)
    hello(bad)
    bad.s.sendall(struct.pack("<IHHI", 1 << 30, PING, 0, 9))  # too long
    assert bad.frame() is None
    tag = good.send(PING, struct.pack("<Q", 5))
    assert good.reply(tag)[0] == PONG
    good.close()
    time.sleep(0.2)
    log = open(srv.log).read()
    assert "closing connection from 127.0.0.1:" in log and \
        "GETATTR" in log, log[-1500:]


CASES = [case_handshake, case_ping, case_root, case_permits,
         case_lease_expires, case_reintegrate_needs_permit, case_malformed]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lento", default=os.path.join(TOP, "tools", "bin",
                                                    "lento-asan"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lento-wire.")
    passed = failed = 0
    srv = Server(args.lento, tmp)
    try:
        srv.ctl("volume", "create", "v1")
        srv.ctl("volume", "create", "v2")
        for case in CASES:
            name = case.__name__[5:]
            try:
                case(srv)
                print("ok - %s" % name)
                passed += 1
            except Exception:
                print("not ok - %s" % name)
                traceback.print_exc(file=sys.stdout)
                failed += 1
            sys.stdout.flush()
        try:
            srv.stop()
            print("ok - server-exits-clean")
            passed += 1
        except Exception as e:
            print("not ok - server-exits-clean: %s" % e)
            failed += 1
    finally:
        if srv.p.poll() is None:
            srv.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


sys.exit(main())
