#!/usr/bin/env python3
"""The lento server on the wire, from a raw socket (protocol/PROTOCOL.md),
without lento's own client: the handshake and client identities, PING,
volume lookup, GETATTR and READDIR of a root, the permit (grant, renew,
a second client's ACQUIRE waiting while the holder is asked to give it
back, release; a holder so asked that only renews it losing it a lease
later), a bound on the clients served at once, a REINTEGRATE refused without the permit, a batch sent
again leaving none of its bodies behind, FETCHes nobody reads holding no
descriptor each, a client flooding the queue behind another's permit
closed, and malformed frames closing
only their own connection with a logged reason.

    tests/lento/server_wire.py [--lento tools/bin/lento-asan] [CASE...]

Prints "ok - NAME" / "not ok - NAME" and a closing "N passed, N failed".
"""
import argparse
import ctypes
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
VOLUME_VALIDATE, VOLUME_VALIDATE_REPLY = 34, 35
VOL_VALID, VOL_CHANGED, VOL_UNKNOWN = 0, 1, 2
PERMIT_ACQUIRE, PERMIT_RENEW, PERMIT_RELEASE, PERMIT_REPLY = 48, 49, 50, 51
REINTEGRATE, REINTEGRATE_REPLY = 64, 65
FETCH, FETCH_REPLY, DATA = 20, 21, 22
VALIDATE = 36
OP_CREATE, OP_MKDIR, OP_UNLINK, OP_SETATTR, OP_STORE = 1, 2, 6, 9, 12
BREAK_VOLUME, PERMIT_REVOKE = 81, 82
ENOPERMIT, EEXIST = 1001, 17
MORE = 1
VERSION = 4         # LP_VERSION_MIN = LP_VERSION_MAX


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


def hello(c, client=0, uuid=None, version=VERSION):
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
    assert version == VERSION and cid and epoch and hb
    return cid, epoch, uuid


def error_code(fr):
    assert fr[0] == ERROR, "expected ERROR, got type %d" % fr[0]
    return struct.unpack_from("<I", fr[3])[0]


class Server:
    def __init__(self, lento, tmp, lease_ms=3000, extra=(), env=None,
                 nofile=None):
        """nofile: the server's RLIMIT_NOFILE, soft and hard."""
        def limit():
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        self.lento = lento
        self.store = os.path.join(tmp, "store")
        self.log = os.path.join(tmp, "server.log")
        self.sock = os.path.join(tmp, "control.sock")
        # A failure armed by writing its point's name here (lento(8)).
        self.faults = os.path.join(tmp, "faults")
        self.p = subprocess.Popen(
            [lento, "server", "--store", self.store, "--listen",
             "127.0.0.1:0", "--control", self.sock, "--lease-ms",
             str(lease_ms), "--log", self.log] + list(extra),
            env=dict(os.environ, LENTO_TEST_FAULTS=self.faults,
                     **(env or {})),
            preexec_fn=limit if nofile else None)
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
    # Clients of version 1 (listings without xattrs), 2 (no
    # PRUNEXATTRS) and 3 (records without groups) are refused.
    for old in (1, 2, 3):
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
    # A space is in the wire's rule for a volume name, not in the names
    # the server makes: no such volume (the server of before: EINVAL).
    body = struct.pack("<H", 5) + b"my v1"
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
    assert error_code(a.reply(a.send(PERMIT_RENEW, v))) == ENOPERMIT
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


def case_revoked_holder_cannot_keep_renewing(srv):
    """A holder asked to give the permit back that only renews it keeps
    it at most a lease longer: its renewals get shorter leases, then
    ENOPERMIT, and the client waiting is granted the permit well before
    its request would time out (two leases)."""
    srv.ctl("volume", "create", "v6")
    a, b = Conn(srv.port), Conn(srv.port)
    hello(a)
    hello(b)
    vol, _ = volume(a, "v6")
    v = struct.pack("<I", vol)
    t, _, _, body = a.reply(a.send(PERMIT_ACQUIRE, v))
    assert t == PERMIT_REPLY, t
    btag = b.send(PERMIT_ACQUIRE, v)
    fr = a.frame()
    assert fr[0] == PERMIT_REVOKE, fr
    t0 = time.time()
    # An ACQUIRE of what it holds is a renewal, and it is told again.
    fr = a.reply(a.send(PERMIT_ACQUIRE, v))
    assert fr[0] == PERMIT_REPLY and \
        struct.unpack("<II", fr[3])[1] <= 3000, fr
    fr = a.frame()
    assert fr[0] == PERMIT_REVOKE, fr
    leases, refused = [], None
    while time.time() - t0 < 8:
        fr = a.reply(a.send(PERMIT_RENEW, v))
        if fr[0] == ERROR:
            refused = time.time() - t0
            break
        leases.append(struct.unpack("<II", fr[3])[1])
        time.sleep(0.3)
    assert refused is not None, "renewed for 8 s after a revoke: %r" % leases
    assert error_code(fr) == ENOPERMIT, error_code(fr)
    assert leases == sorted(leases, reverse=True) and \
        leases[-1] < 3000, leases
    b.s.settimeout(3)
    t, _, _, body = b.reply(btag)
    waited = time.time() - t0
    assert t == PERMIT_REPLY and struct.unpack("<II", body)[1] > 0, t
    assert 2 < refused < 4.5 and waited < 5, (refused, waited)
    # An ACQUIRE of a's own is no way around it: it waits behind b.
    a.send(PERMIT_ACQUIRE, v)
    fr = b.frame()
    assert fr[0] == PERMIT_REVOKE, fr
    b.reply(b.send(PERMIT_RELEASE, v))
    a.close()
    b.close()


def case_stalled_batch_keeps_no_permit(srv):
    """A holder whose batch stops coming (a STORE's body that never
    comes) and that only PINGs keeps the permit at most a lease after it
    was asked to give it back: its PINGs keep its session, not the volume.
    The client waiting is granted the permit before its request would
    time out (two leases)."""
    c, vol, cid, f, vers = writer_with_file(srv, "stalled")
    store = record(2, OP_STORE, bytes(16), f, 0, 0x8, 0, 4096, b"",
                   base_obj=vers[f])
    c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, 2, 1) + store,
           flags=MORE)
    b = Conn(srv.port)
    hello(b)
    btag = b.send(PERMIT_ACQUIRE, struct.pack("<I", vol))
    fr = c.frame()
    assert fr[0] == PERMIT_REVOKE, fr
    t0 = time.time()
    b.s.settimeout(0.5)
    got = None
    while time.time() - t0 < 8 and got is None:
        c.send(PING, struct.pack("<Q", 1))
        try:
            got = b.reply(btag)
        except socket.timeout:
            pass
    waited = time.time() - t0
    assert got is not None and got[0] == PERMIT_REPLY, (got, waited)
    assert waited < 5, "granted after %.1f s (lease 3 s)" % waited
    b.reply(b.send(PERMIT_RELEASE, struct.pack("<I", vol)))
    c.close()
    b.close()


def case_clients_bounded(srv):
    """A server started with --max-clients 2 answers a third client's
    HELLO with EAGAIN and takes it once one of the two has gone."""
    tmp = tempfile.mkdtemp(prefix="lento-wire-max.")
    small = Server(srv.lento, tmp, extra=["--max-clients", "2"])
    try:
        a, b, c = Conn(small.port), Conn(small.port), Conn(small.port)
        assert hello(a)[0] and hello(b)[0]
        cid, code, _ = hello(c)
        assert cid is None and code == 11, (cid, code)  # EAGAIN
        assert c.frame() is None
        st = json.loads(small.ctl("--json", "status"))
        assert st["clients_max"] == 2 and len(st["clients"]) == 2, st
        a.close()
        deadline = time.time() + 5
        while len(json.loads(small.ctl("--json", "status"))["clients"]) > 1:
            assert time.time() < deadline, "a's session stayed"
            time.sleep(0.05)
        c = Conn(small.port)
        assert hello(c)[0]
        b.close()
        c.close()
        log = open(small.log).read()
        assert "refused a client from 127.0.0.1" in log, log[-1500:]
        small.stop()
    finally:
        if small.p.poll() is None:
            small.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def case_handshake_bounded(srv):
    """Connections that never finish their HELLO hold no client's place
    but a descriptor each: a server taking 2 clients keeps at most 64 of
    them waiting (SERVER_GREETING_MIN; the next is closed at once), and
    closes each that has not said HELLO within three heartbeats, however
    it trickles bytes."""
    tmp = tempfile.mkdtemp(prefix="lento-wire-greet.")
    small = Server(srv.lento, tmp, extra=["--max-clients", "2",
                                          "--heartbeat-ms", "500"])
    try:
        a, b = Conn(small.port), Conn(small.port)
        more = [Conn(small.port) for _ in range(62)]
        time.sleep(0.5)
        c = Conn(small.port)
        assert c.frame() is None, "a 65th connection stayed open"
        # One byte of a HELLO's header every 0.3 s: more than 1.5 s on.
        t0 = time.time()
        for _ in range(20):
            try:
                a.s.sendall(b"\0")
            except OSError:
                break
            time.sleep(0.3)
        a.s.settimeout(5)
        try:
            got = a.s.recv(1)
        except OSError:
            got = b""
        took = time.time() - t0
        assert got == b"" and took < 5, (got, took)
        assert b.frame() is None, "b stayed without a HELLO"
        for m in more:
            m.close()
        # The places are free again: a real client is served.
        d = Conn(small.port)
        assert hello(d)[0]
        d.close()
        log = open(small.log).read()
        assert "await their handshake" in log, log[-1500:]
        small.stop()
    finally:
        if small.p.poll() is None:
            small.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def case_identities_bounded(srv):
    """A server started with --max-identities 2 registers two new
    clients and answers a third new uuid EDQUOT, closing the connection;
    a known client still gets its id back, and a second HELLO on a
    connection closes it without registering anything. The server of
    before registered an identity for good for every new uuid sent."""
    tmp = tempfile.mkdtemp(prefix="lento-wire-ids.")
    small = Server(srv.lento, tmp, extra=["--max-identities", "2"])
    try:
        a, b = Conn(small.port), Conn(small.port)
        aid, _, auuid = hello(a)
        assert aid and hello(b)[0]
        c = Conn(small.port)
        cid, code, _ = hello(c)
        assert cid is None and code == 122, (cid, code)   # EDQUOT
        assert c.frame() is None
        a.close()
        a = Conn(small.port)
        assert hello(a, aid, auuid)[0] == aid
        # One identity per connection: a second HELLO closes it.
        body = b"LENTO-LP" + struct.pack("<HHII", VERSION, VERSION, 0,
                                         0) + \
            os.urandom(16) + struct.pack("<I", 0)
        a.send(HELLO, body)
        assert a.frame() is None, "a second HELLO was answered"
        st = json.loads(small.ctl("--json", "status"))
        assert (st["identities"], st["identities_max"]) == (2, 2), st
        b.close()
        log = open(small.log).read()
        assert "refused a new client from 127.0.0.1" in log, log[-1500:]
        small.stop()
    finally:
        if small.p.poll() is None:
            small.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def case_revoke_skips_closing_session(srv):
    """PERMIT_REVOKE goes to a session of the holder that can still
    hear it. Client X holds a permit on session A1 and has connected
    again (A2, newer); A2 closes (a malformed frame) and, in the same
    turn of the server's loop, B asks for the permit: the revoke must go
    to A1. The server of before sent it to the closing A2, where it was
    lost, and X kept the volume until its lease ran out. The server is
    held still (LENTO_TEST_DELAY_COMMIT_MS, a third client's batch) so
    that A2's frame and B's come in together."""
    tmp = tempfile.mkdtemp(prefix="lento-wire-revoke.")
    held = Server(srv.lento, tmp, lease_ms=10000,
                  env={"LENTO_TEST_DELAY_COMMIT_MS": "1500"})
    try:
        held.ctl("volume", "create", "v")
        held.ctl("volume", "create", "w")
        a1 = Conn(held.port)
        x, _, uuid = hello(a1)
        vol, _ = volume(a1, "v")
        v = struct.pack("<I", vol)
        assert a1.reply(a1.send(PERMIT_ACQUIRE, v))[0] == PERMIT_REPLY
        a2 = Conn(held.port)
        assert hello(a2, client=x, uuid=uuid)[0] == x
        b = Conn(held.port)
        hello(b)
        c = Conn(held.port)
        cid, _, _ = hello(c)
        wvol, _ = volume(c, "w")
        t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE,
                                    struct.pack("<I", wvol)))
        assert t == PERMIT_REPLY, t
        ctag = send_batch(c, wvol, cid, 1, record(
            1, OP_CREATE, fid(wvol), fid(wvol, cid, 1), 1, 0x1, 0o644, 0,
            b"f"), 1)
        time.sleep(0.5)                     # the server waits in c's COMMIT
        a2.send(GETATTR, b"\x01\x02\x03")   # malformed: A2 closes
        time.sleep(0.1)
        btag = b.send(PERMIT_ACQUIRE, v)
        assert c.reply(ctag)[0] == REINTEGRATE_REPLY
        assert a2.frame() is None
        a1.s.settimeout(3)
        try:
            fr = a1.frame()
        except socket.timeout:
            fr = None
        assert fr and fr[0] == PERMIT_REVOKE and fr[3] == v, \
            "A1 was not asked to give the permit back: %r" % (fr,)
        assert a1.reply(a1.send(PERMIT_RELEASE, v))[0] == PERMIT_REPLY
        t, _, _, body = b.reply(btag)
        assert t == PERMIT_REPLY and struct.unpack("<II", body)[1] > 0, t
        for conn in (a1, b, c):
            conn.close()
        held.stop()
    finally:
        if held.p.poll() is None:
            held.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def vm_kb(pid, what):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(what + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (what, pid))


def case_listing_over_limit_stops_early(srv):
    """A listing of more entries than one may have (LP_DIR_MAX; here
    LENTO_TEST_DIR_MAX=16 on a server of its own) is refused EFBIG, and
    the server stops reading the directory there: refusing a directory of
    60,000 entries takes no memory for them. The server of before
    collected every entry (472 bytes each, 2^24 of them are 8 GB) and
    only then refused. A listing of exactly the limit is served."""
    tmp = tempfile.mkdtemp(prefix="lento-wire-dirmax.")
    small = Server(srv.lento, tmp, env={"LENTO_TEST_DIR_MAX": "16"})
    try:
        small.ctl("volume", "create", "d")
        c = Conn(small.port)
        cid, _, _ = hello(c)
        vol, _ = volume(c, "d")
        t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
        assert t == PERMIT_REPLY, t
        applied, code, _ = reintegrate(c, vol, cid, 1, creates(vol, cid, 1,
                                                               16), 16)
        assert (applied, code) == (16, 0), (applied, code)
        t, f, _, b = c.reply(c.send(READDIR, fid(vol)))
        assert t == READDIR_REPLY and not f & MORE, (t, f)
        total, = struct.unpack_from("<I", b, 90 + 8 * b[77])  # vv's n
        assert total == 16, total
        n, first = 16, 17
        while n < 60000:
            k = min(8192, 60000 - n)
            applied, code, _ = reintegrate(
                c, vol, cid, first, creates(vol, cid, first, k), k)
            assert (applied, code) == (first + k - 1, 0), (applied, code)
            n += k
            first += k
        rss = vm_kb(small.p.pid, "VmRSS")
        assert error_code(c.reply(c.send(READDIR, fid(vol)))) == 27  # EFBIG
        grew = vm_kb(small.p.pid, "VmRSS") - rss
        assert grew < 8 << 10, "refusing the listing took %d KiB" % grew
        c.close()
        small.stop()
    finally:
        if small.p.poll() is None:
            small.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def parse_listing(frames_):
    """[(name, fid)] of a listing's READDIR_REPLY frames, checking that
    they follow one another (first, total, MORE) as PROTOCOL.md says."""
    out, total = [], None
    for k, (t, f, _, b) in enumerate(frames_):
        assert t == READDIR_REPLY, "frame %d: type %d" % (k, t)
        off = 90 + 8 * b[77]                       # the directory's status
        tot, first = struct.unpack_from("<II", b, off)
        off += 8
        nx, = struct.unpack_from("<H", b, off)
        off += 2
        for _ in range(nx):
            n, = struct.unpack_from("<H", b, off)
            off += 2 + n
            n, = struct.unpack_from("<I", b, off)
            off += 4 + n
        count, = struct.unpack_from("<I", b, off)
        off += 4
        assert total is None or tot == total, (tot, total)
        total = tot
        assert first == len(out), (first, len(out))
        for _ in range(count):
            n, = struct.unpack_from("<H", b, off)
            name = b[off + 2:off + 2 + n]
            off += 2 + n
            efid = b[off:off + 16]
            off += 90 + 8 * b[off + 77]
            n, = struct.unpack_from("<H", b, off)  # target
            off += 2 + n
            nx, = struct.unpack_from("<H", b, off)
            off += 2
            for _ in range(nx):
                n, = struct.unpack_from("<H", b, off)
                off += 2 + n
                n, = struct.unpack_from("<I", b, off)
                off += 4 + n
            out.append((name, efid))
        assert off == len(b), "frame %d: %d bytes after its entries" % (
            k, len(b) - off)
        assert bool(f & MORE) == (len(out) < total), (k, f, len(out), total)
    assert len(out) == total, (len(out), total)
    return out


BIG_DIR = 90000         # entries of 230-byte names: a 32 MB listing
BIG_OUT_MAX = 16 << 20  # the output bound of the server made for it


def big_dir_server(srv):
    """A server of its own whose sessions may queue BIG_OUT_MAX bytes
    (LENTO_TEST_OUT_MAX) and a volume "big" whose root has BIG_DIR
    entries: (server, tmp, conn, volume, {name: fid}). Kept for the
    cases that use it."""
    if getattr(big_dir_server, "made", None):
        return big_dir_server.made
    tmp = tempfile.mkdtemp(prefix="lento-wire-bigdir.")
    # ASan keeps what is freed for a while: little, to see the growth.
    asan = os.environ.get("ASAN_OPTIONS", "")
    big = Server(srv.lento, tmp, lease_ms=600000,
                 env={"LENTO_TEST_OUT_MAX": str(BIG_OUT_MAX),
                      "ASAN_OPTIONS": asan + (":" if asan else "") +
                      "quarantine_size_mb=4"})
    big.ctl("volume", "create", "big")
    c = Conn(big.port, timeout=60)
    cid, _, _ = hello(c)
    vol, _ = volume(c, "big")
    t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
    assert t == PERMIT_REPLY, t
    names, first = {}, 1
    while first <= BIG_DIR:
        k = min(8192, BIG_DIR - first + 1)
        recs = b""
        for r in range(first, first + k):
            name = (b"%07d-" % r) + b"n" * 222
            names[name] = fid(vol, cid, r)
            recs += record(r, OP_CREATE, fid(vol), names[name], 1, 0x1,
                           0o644, 0, name)
        applied, code, _ = reintegrate(c, vol, cid, first, recs, k)
        assert (applied, code) == (first + k - 1, 0), (applied, code)
        first += k
    big_dir_server.made = (big, tmp, c, vol, names)
    return big_dir_server.made


def big_dir_done():
    made = getattr(big_dir_server, "made", None)
    if not made:
        return
    big, tmp, c, _, _ = made
    big_dir_server.made = None
    try:
        c.close()
        big.stop()
    finally:
        if big.p.poll() is None:
            big.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def read_listing(c, tag):
    """The frames of the reply to READDIR @tag, and the other frames
    that came meanwhile with the listing's bytes before each."""
    listing, others, nbytes = [], [], 0
    while True:
        fr = c.frame()
        assert fr is not None, "the server closed the connection"
        if fr[2] != tag:
            others.append((fr, nbytes))
            continue
        assert fr[0] == READDIR_REPLY, "ERROR %d" % error_code(fr)
        listing.append(fr)
        nbytes += 12 + len(fr[3])
        if not fr[1] & MORE:
            return listing, others, nbytes


def case_listing_larger_than_output_bound(srv):
    """A listing larger than what a session may have queued (here 32 MB
    against a bound of 16 MiB, LENTO_TEST_OUT_MAX; 256 MiB, about 750,000
    entries of long names, without it) is sent as the client reads it,
    complete and in order: every name once, with its object, in frames
    that follow one another. The server of before queued it whole, went
    past the bound and closed the connection."""
    big, tmp, c, vol, names = big_dir_server(srv)
    rss = vm_kb(big.p.pid, "VmRSS")
    tag = c.send(READDIR, fid(vol))
    time.sleep(1)       # read late: the server waits for us, not queues
    grew = vm_kb(big.p.pid, "VmRSS") - rss
    listing, _, nbytes = read_listing(c, tag)
    assert nbytes > BIG_OUT_MAX, nbytes
    got = parse_listing(listing)
    assert [n for n, _ in got] == sorted(names), "names differ"
    assert all(names[n] == f for n, f in got), "fids differ"
    print("# listing of %d bytes; the server grew %d KiB" % (nbytes, grew))
    assert grew < 24 << 10, "the listing took %d KiB of the server" % grew


def case_pong_ahead_of_listing(srv):
    """A PING sent right behind a READDIR of a large directory, by a
    client that reads late, is answered before the listing's end: the
    PONG goes ahead of what is queued, behind only the frames on their
    way. The server of before answered it after the whole listing (32 MB
    here; a slow line takes minutes), and a client may take the server
    for dead."""
    big, tmp, c, vol, names = big_dir_server(srv)
    rtag = c.tag + 1
    c.s.sendall(frames(READDIR, fid(vol), rtag) +
                frames(PING, struct.pack("<Q", 77), rtag + 1))
    c.tag = rtag + 1
    time.sleep(1)
    listing, others, nbytes = read_listing(c, rtag)
    pongs = [(fr, at) for fr, at in others if fr[2] == rtag + 1]
    assert pongs, "no PONG during the listing"
    (t, _, _, b), at = pongs[0]
    assert t == PONG and struct.unpack("<Q", b)[0] == 77, t
    assert at < nbytes - (8 << 20), \
        "the PONG came after %d bytes of a %d-byte listing" % (at, nbytes)
    assert len(parse_listing(listing)) == BIG_DIR
    big_dir_done()


def case_answers_wait_for_listing(srv):
    """A GETATTR sent right behind a READDIR of a large directory is
    answered after the listing's last frame, not in the middle of it: an
    answer (or a BREAK) made after the listing's snapshot tells a status
    newer than the listing's frames still to go, and a client that took
    those after it would cache the older status as current. The server of
    before sent the answer at once, between the listing's frames."""
    big, tmp, c, vol, names = big_dir_server(srv)
    rtag = c.tag + 1
    c.s.sendall(frames(READDIR, fid(vol), rtag) +
                frames(GETATTR, fid(vol), rtag + 1))
    c.tag = rtag + 1
    time.sleep(1)
    listing, others, nbytes = read_listing(c, rtag)
    early = [at for fr, at in others if fr[2] == rtag + 1]
    assert not early, "the GETATTR's answer came after %d bytes of a " \
        "%d-byte listing" % (early[0], nbytes)
    fr = c.reply(rtag + 1)
    assert fr[0] == GETATTR_REPLY, fr[0]
    assert len(parse_listing(listing)) == BIG_DIR
    big_dir_done()


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
        struct.pack("<I", 0) + struct.pack("<H", 0)
    body = struct.pack("<IIQI", vol, cid, 1, 1) + rec
    tag = c.send(REINTEGRATE, body)
    fr = c.reply(tag)
    if fr[0] == ERROR and error_code(fr) == 74:
        raise AssertionError("the test's record is malformed: fix the test")
    assert error_code(fr) == ENOPERMIT, error_code(fr)
    c.close()


def zstd(raw):
    """@raw as one zstd frame (level 1), as lento's codec sends a chunk."""
    z = ctypes.CDLL("libzstd.so.1")
    z.ZSTD_compressBound.restype = ctypes.c_size_t
    z.ZSTD_compress.restype = ctypes.c_size_t
    z.ZSTD_compress.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                ctypes.c_char_p, ctypes.c_size_t,
                                ctypes.c_int]
    z.ZSTD_isError.argtypes = [ctypes.c_size_t]
    cap = z.ZSTD_compressBound(len(raw))
    out = ctypes.create_string_buffer(cap)
    n = z.ZSTD_compress(out, cap, raw, len(raw), 1)
    assert not z.ZSTD_isError(n)
    return out.raw[:n]


VV0 = struct.pack("<B", 0) + struct.pack("<IQ", 0, 0)


def record(recno, op, dir_fid, obj_fid, type_, valid, mode, size, name,
           base_obj=VV0, uid=0, gid=0, groups=(), attr_ids=(0, 0)):
    """One CML record (PROTOCOL.md, "Reintegration"): made by @uid, @gid
    with supplementary @groups; @attr_ids the attr's uid and gid."""
    attr = struct.pack("<IIIIQqqqQ", valid, mode, attr_ids[0], attr_ids[1],
                       size, 0, 0, 0, 0)
    return struct.pack("<QHHIIq", recno, op, 0, uid, gid, 0) + dir_fid + \
        obj_fid + bytes(32) + VV0 + base_obj + VV0 * 2 + \
        struct.pack("<B", type_) + attr + struct.pack("<H", len(name)) + \
        name + struct.pack("<H", 0) + struct.pack("<I", 0) + \
        struct.pack("<H%dI" % len(groups), len(groups), *groups)


def send_batch(c, vol, cid, first, recs, n, bodies=()):
    """Send a batch and the bodies of its STOREs, @bodies [(index in the
    batch, bytes)] in record order, each in chunks of at most 1 MiB: the
    batch's tag."""
    tag = c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, first, n) +
                 recs, flags=MORE if bodies else 0)
    send_bodies(c, tag, bodies)
    return tag


def send_bodies(c, tag, bodies):
    """The DATA frames of @bodies (as send_batch's) for batch @tag."""
    for k, (rec, body) in enumerate(bodies):
        last_body = k == len(bodies) - 1
        off = 0
        while True:
            raw = body[off:off + (1 << 20)]
            end = off + len(raw) == len(body)
            z = zstd(raw)
            c.send(DATA, struct.pack("<IIQII", rec, 1 if end else 0, off,
                                     len(raw), len(z)) + z, tag=tag,
                   flags=0 if end and last_body else MORE)
            off += len(raw)
            if end:
                break


def reintegrate(c, vol, cid, first, recs, n, body=None):
    """Send a batch (and the body of its one STORE, record @n - 1):
    (applied, code, {fid: vv bytes}) of its REINTEGRATE_REPLY."""
    tag = send_batch(c, vol, cid, first, recs, n,
                     [(n - 1, body)] if body else ())
    t, _, _, b = c.reply(tag)
    assert t == REINTEGRATE_REPLY, "type %d" % t
    applied, _, code = struct.unpack_from("<QQI", b)
    versions = {}
    if code == 0:
        off = 40 + 2 + struct.unpack_from("<H", b, 40)[0]
        nver, = struct.unpack_from("<I", b, off)
        off += 4
        for _ in range(nver):
            f = b[off:off + 16]
            n_ctr = b[off + 16]
            size = 13 + 8 * n_ctr
            versions[f] = b[off + 16:off + 16 + size]
            off += 16 + size
    return applied, code, versions


def writer_with_file(srv, name):
    """A new volume @name, a connection holding its permit, and an empty
    file "f" made in its root: (conn, volume, client, f's fid, versions
    of the batch's objects)."""
    srv.ctl("volume", "create", name)
    c = Conn(srv.port)
    cid, _, _ = hello(c)
    vol, _ = volume(c, name)
    t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
    assert t == PERMIT_REPLY, t
    f = fid(vol, cid, 1)
    applied, code, vers = reintegrate(
        c, vol, cid, 1, record(1, OP_CREATE, fid(vol), f, 1, 0x1, 0o644, 0,
                               b"f"), 1)
    assert (applied, code) == (1, 0) and f in vers, (applied, code)
    return c, vol, cid, f, vers


def case_groups_count(srv):
    """A record's supplementary groups reach the server and count as its
    gid: uid 1000 gid 1000 creates in root's 0770 directory of group 2000
    only with 2000 among its groups."""
    srv.ctl("volume", "create", "groups")
    c = Conn(srv.port)
    cid, _, _ = hello(c)
    vol, _ = volume(c, "groups")
    t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
    assert t == PERMIT_REPLY, t
    d, f = fid(vol, cid, 1), fid(vol, cid, 2)
    applied, code, _ = reintegrate(
        c, vol, cid, 1, record(1, OP_MKDIR, fid(vol), d, 2, 0x1 | 0x4,
                               0o770, 0, b"shared", attr_ids=(0, 2000)), 1)
    assert (applied, code) == (1, 0), (applied, code)
    for groups, want in (((), 13), ((3000, 2000), 0)):     # EACCES
        applied, code, vers = reintegrate(
            c, vol, cid, 2, record(2, OP_CREATE, d, f, 1, 0x1, 0o644, 0,
                                   b"f", uid=1000, gid=1000,
                                   groups=groups), 1)
        assert code == want, "groups %s: code %d" % (groups, code)
    assert applied == 2 and f in vers, (applied, vers)
    # A STORE by a member of the file's group, with a body that comes
    # after the batch (so the batch is applied after its frame is gone).
    g = fid(vol, cid, 3)
    applied, code, vers = reintegrate(
        c, vol, cid, 3, record(3, OP_CREATE, d, g, 1, 0x1 | 0x4, 0o660, 0,
                               b"g", attr_ids=(0, 2000)), 1)
    assert (applied, code) == (3, 0), (applied, code)
    body = os.urandom(256 << 10)
    for groups, want in (((1, 2, 2000), 0), ((3000,), 13)):
        applied, code, vers2 = reintegrate(
            c, vol, cid, applied + 1,
            record(applied + 1, OP_STORE, bytes(16), g, 0, 0x8, 0,
                   len(body), b"", base_obj=vers[g], uid=1000, gid=1000,
                   groups=groups), 1, body)
        assert code == want, "STORE with groups %s: code %d" % (groups,
                                                                code)
        vers.update(vers2)
    c.close()


def case_resent_batch_leaves_no_body(srv):
    """A STORE's body goes into the store, and a batch sent again (its
    reply lost) is skipped whole without leaving its body in the store's
    tmp/: else every resend would take disk space no quota counts."""
    tmp = os.path.join(srv.store, "tmp")
    # Other cases' bodies may be in the store: this case's are the new.
    before = set(os.listdir(os.path.join(srv.store, "bodies")))
    c, vol, cid, f, vers = writer_with_file(srv, "v3")
    body = os.urandom(256 << 10)
    store = record(2, OP_STORE, bytes(16), f, 0, 0x8, 0, len(body), b"",
                   base_obj=vers[f])
    for sent in (1, 2, 3):
        applied, code, _ = reintegrate(c, vol, cid, 2, store, 1, body)
        assert (applied, code) == (2, 0), (sent, applied, code)
        left = os.listdir(tmp)
        assert not left, "sent %d times, tmp/ holds %s" % (sent, left)
    bodies = set(os.listdir(os.path.join(srv.store, "bodies"))) - before
    assert len(bodies) == 1, "bodies/ took %s" % sorted(bodies)
    c.close()


def creates(vol, cid, first, n):
    """@n CREATE records from recno @first, of files "f<recno>" in the
    root, each a new object of client @cid."""
    return b"".join(record(r, OP_CREATE, fid(vol), fid(vol, cid, r), 1,
                           0x1, 0o644, 0, b"f%d" % r)
                    for r in range(first, first + n))


def frames(type_, body, tag, flags=0):
    """One frame's bytes."""
    return struct.pack("<IHHI", len(body), type_, flags, tag) + body


def data_frames(tag, rec, body, last_body=True):
    """The DATA frames of @body, record @rec of batch @tag."""
    out, off = b"", 0
    while True:
        raw = body[off:off + (1 << 20)]
        end = off + len(raw) == len(body)
        z = zstd(raw)
        out += frames(DATA, struct.pack("<IIQII", rec, 1 if end else 0, off,
                                        len(raw), len(z)) + z, tag,
                      0 if end and last_body else MORE)
        off += len(raw)
        if end:
            return out


def fetch_body(c, f):
    """The body of file @f, FETCHed."""
    tag = c.send(FETCH, f + VV0)
    t, _, _, _ = c.reply(tag)
    assert t == FETCH_REPLY, t
    got = b""
    z = ctypes.CDLL("libzstd.so.1")
    z.ZSTD_decompress.restype = ctypes.c_size_t
    z.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.c_char_p, ctypes.c_size_t]
    while True:
        t, _, _, b = c.reply(tag)
        assert t == DATA, t
        _, flags, off, raw, zlen = struct.unpack_from("<IIQII", b)
        assert off == len(got), (off, len(got))
        out = ctypes.create_string_buffer(max(raw, 1))
        n = z.ZSTD_decompress(out, raw, b[24:24 + zlen], zlen)
        assert n == raw, (n, raw)
        got += out.raw[:raw]
        if flags & 1:
            return got


def case_pipelined_batches(srv):
    """A REINTEGRATE sent once the one before it came whole, before its
    answer (the server still writing its bodies out), is taken after
    that one is answered, and one with bodies after it too: three
    batches in one write get three answers in order, each applied, and
    the connection goes on. The server of before closed the connection
    ("another batch is being sent")."""
    c, vol, cid, f, vers = writer_with_file(srv, "pipe")
    one, three = os.urandom(4 << 20), os.urandom(300 << 10)
    g = fid(vol, cid, 3)
    f_after_one = struct.pack("<BQIQ", 1, 2, cid, 2)
    t1, t2, t3 = 901, 902, 903
    out = frames(REINTEGRATE, struct.pack("<IIQI", vol, cid, 2, 1) +
                 record(2, OP_STORE, bytes(16), f, 0, 0x8, 0, len(one), b"",
                        base_obj=vers[f]), t1, MORE)
    out += data_frames(t1, 0, one)
    out += frames(REINTEGRATE, struct.pack("<IIQI", vol, cid, 3, 1) +
                  record(3, OP_CREATE, fid(vol), g, 1, 0x1, 0o644, 0, b"g"),
                  t2)
    out += frames(REINTEGRATE, struct.pack("<IIQI", vol, cid, 4, 1) +
                  record(4, OP_STORE, bytes(16), f, 0, 0x8, 0, len(three),
                         b"", base_obj=f_after_one), t3, MORE)
    out += data_frames(t3, 0, three)
    c.s.sendall(out)
    for tag, applied in ((t1, 2), (t2, 3), (t3, 4)):
        fr = c.frame()
        while fr is not None and fr[2] == 0:    # a push (BREAK)
            fr = c.frame()
        assert fr is not None, "the server closed the connection"
        assert fr[2] == tag, "answered %d before %d" % (fr[2], tag)
        assert refusal(fr)[:2] == (applied, 0), refusal(fr)
    assert c.reply(c.send(PING, struct.pack("<Q", 9)))[0] == PONG
    assert fetch_body(c, f) == three
    c.close()


def case_resize_copy_off_the_loop(srv):
    """A SETATTR that changes a file's size makes the file's new content
    from the old one: copying a big file takes seconds (here 3 s, held
    so by LENTO_TEST_DELAY_RESIZE_MS), and another client's PING is
    answered meanwhile, within a second; then the batch is answered,
    applied whole: the file cut to its first bytes, and a second size
    change in the same batch growing it with zeros. The server of before
    copied on its loop, and every client waited."""
    tmp = tempfile.mkdtemp(prefix="lento-wire-resize.")
    slow = Server(srv.lento, tmp, lease_ms=20000,
                  env={"LENTO_TEST_DELAY_RESIZE_MS": "3000"})
    try:
        slow.ctl("volume", "create", "r")
        c = Conn(slow.port)
        cid, _, _ = hello(c)
        vol, _ = volume(c, "r")
        t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
        assert t == PERMIT_REPLY, t
        f = fid(vol, cid, 1)
        body = os.urandom(3 << 20)
        recs = record(1, OP_CREATE, fid(vol), f, 1, 0x1, 0o644, 0, b"f") + \
            record(2, OP_STORE, bytes(16), f, 0, 0x8, 0, len(body), b"",
                   base_obj=struct.pack("<BQIQ", 1, 1, cid, 1))
        applied, code, _ = reintegrate(c, vol, cid, 1, recs, 2, body)
        assert (applied, code) == (2, 0), (applied, code)
        # Cut to 1 MiB + 5, then grown to 2 MiB (base: [2]@cid:2, ...).
        recs = record(3, OP_SETATTR, bytes(16), f, 0, 0x8, 0,
                      (1 << 20) + 5, b"",
                      base_obj=struct.pack("<BQIQ", 1, 2, cid, 2)) + \
            record(4, OP_SETATTR, bytes(16), f, 0, 0x8, 0, 2 << 20, b"",
                   base_obj=struct.pack("<BQIQ", 1, 3, cid, 3))
        tag = c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, 3, 2) +
                     recs)
        time.sleep(0.3)
        other = Conn(slow.port)
        t0 = time.time()
        hello(other)
        assert other.reply(other.send(PING, struct.pack("<Q", 1)))[0] == \
            PONG
        waited = time.time() - t0
        assert waited < 1, "another client waited %.1f s" % waited
        c.s.settimeout(30)
        fr = c.reply(tag)
        assert refusal(fr)[:2] == (4, 0), refusal(fr)
        got = fetch_body(c, f)
        assert got == body[:(1 << 20) + 5] + bytes((2 << 20) -
                                                   (1 << 20) - 5), \
            "the file's content is not what the size changes make"
        assert not os.listdir(os.path.join(slow.store, "tmp"))
        c.close()
        other.close()
        slow.stop()
    finally:
        if slow.p.poll() is None:
            slow.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def case_resize_copies_counted(srv):
    """The copies a batch's size changes make on the worker hold two
    descriptors each until the apply, and count with the bodies' against
    the server's bound (half its descriptors): a server of 64 keeps at
    most 32 for 20 waiting size changes (the apply makes the rest), where
    the server of before held 40. The batch is applied whole."""
    tmp = tempfile.mkdtemp(prefix="lento-wire-rzfds.")
    slow = Server(srv.lento, tmp, lease_ms=20000, nofile=64,
                  env={"LENTO_TEST_DELAY_RESIZE_MS": "200"})
    n = 20
    try:
        slow.ctl("volume", "create", "z")
        c = Conn(slow.port)
        cid, _, _ = hello(c)
        vol, _ = volume(c, "z")
        t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
        assert t == PERMIT_REPLY, t
        fids = [fid(vol, cid, i + 1) for i in range(n)]
        body = os.urandom(4096)
        recs = b"".join(record(i + 1, OP_CREATE, fid(vol), fids[i], 1, 0x1,
                               0o644, 0, b"f%d" % i) for i in range(n))
        recs += b"".join(record(n + i + 1, OP_STORE, bytes(16), fids[i], 0,
                                0x8, 0, len(body), b"",
                                base_obj=struct.pack("<BQIQ", 1, 1, cid,
                                                     i + 1))
                         for i in range(n))
        tag = send_batch(c, vol, cid, 1, recs, 2 * n,
                         [(n + i, body) for i in range(n)])
        fr = c.reply(tag)
        assert refusal(fr)[:2] == (2 * n, 0), refusal(fr)
        recs = b"".join(record(2 * n + i + 1, OP_SETATTR, bytes(16),
                               fids[i], 0, 0x8, 0, 100, b"",
                               base_obj=struct.pack("<BQIQ", 1, 2, cid,
                                                    n + i + 1))
                        for i in range(n))
        tag = c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, 2 * n + 1,
                                              n) + recs)
        time.sleep(1)     # the copies wait 200 ms each, one after another
        held = 0
        fddir = "/proc/%d/fd" % slow.p.pid
        for e in os.listdir(fddir):
            try:
                target = os.readlink(os.path.join(fddir, e))
            except OSError:
                continue
            held += "/tmp/t." in target or "/bodies/" in target
        assert 0 < held <= 32, "%d descriptors held for copies" % held
        c.s.settimeout(60)
        fr = c.reply(tag)
        assert refusal(fr)[:2] == (3 * n, 0), refusal(fr)
        for i in (0, n // 2, n - 1):
            assert fetch_body(c, fids[i]) == body[:100], i
        assert not os.listdir(os.path.join(slow.store, "tmp"))
        c.close()
        slow.stop()
    finally:
        if slow.p.poll() is None:
            slow.p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def case_batch_sizes_bounded(srv):
    """A batch of LP_REINT_RECS_MAX records is applied and answered with a
    version of each object, in one reply; one record more is a malformed
    frame, refused before anything of it is applied (else the answer could
    outgrow its frame and the client send the batch again forever)."""
    c, vol, cid, _, _ = writer_with_file(srv, "v7")
    limit = 1 << 13
    c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, 2, limit + 1) +
           creates(vol, cid, 2, limit + 1))
    assert c.frame() is None, "a batch over the limit was answered"
    time.sleep(0.2)
    log = open(srv.log).read()
    assert "REINTEGRATE: count beyond the protocol's limit" in log, \
        log[-1500:]
    c = Conn(srv.port)
    cid2, _, _ = hello(c)
    t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
    assert t == PERMIT_REPLY, t
    # Had any of it been applied, its names would be taken: EEXIST.
    applied, code, vers = reintegrate(c, vol, cid2, 1,
                                      creates(vol, cid2, 1, limit), limit)
    assert (applied, code) == (limit, 0), (applied, code)
    assert all(fid(vol, cid2, r) in vers for r in range(1, limit + 1)), \
        len(vers)
    c.close()


def case_promise_lost_closes_session(srv):
    """A callback promise the server cannot record (injected) is never
    made: the session that would have had it is closed before the
    answer; its batch, sent again on a new connection, is found applied
    and answered then."""
    srv.ctl("volume", "create", "v8")
    c = Conn(srv.port)
    cid, _, uuid = hello(c)
    vol, _ = volume(c, "v8")
    t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
    assert t == PERMIT_REPLY, t
    f = fid(vol, cid, 1)
    rec = record(1, OP_CREATE, fid(vol), f, 1, 0x1, 0o644, 0, b"f")
    with open(srv.faults, "w") as out:
        out.write("server-promise\n")
    c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, 1, 1) + rec)
    assert c.frame() is None, "answered though a promise was lost"
    assert not os.path.exists(srv.faults), "the fault was not met"
    c = Conn(srv.port)
    again, _, _ = hello(c, client=cid, uuid=uuid)
    assert again == cid, (again, cid)
    volume(c, "v8")
    t, _, _, _ = c.reply(c.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
    assert t == PERMIT_REPLY, t
    applied, code, vers = reintegrate(c, vol, cid, 1, rec, 1)
    assert (applied, code) == (1, 0) and f in vers, (applied, code)
    c.close()
    log = open(srv.log).read()
    assert "out of memory for its callbacks" in log, log[-1500:]


def case_batch_without_memory_answered(srv):
    """A batch the server has no memory to take (injected at the
    allocation of its arrays: server-reint-alloc) is answered ENOMEM, its
    body read and dropped, and the connection serves on; sent again it is
    applied. The server of before freed the half-made batch by walking
    arrays that were not there, and crashed."""
    c, vol, cid, f, vers = writer_with_file(srv, "alloc")
    body = os.urandom(3 << 19)     # two chunks
    store = record(2, OP_STORE, bytes(16), f, 0, 0x8, 0, len(body), b"",
                   base_obj=vers[f])
    with open(srv.faults, "w") as out:
        out.write("server-reint-alloc\n")
    tag = send_batch(c, vol, cid, 2, store, 1, [(0, body)])
    fr = c.reply(tag)
    assert error_code(fr) == 12, error_code(fr)     # ENOMEM
    assert not os.path.exists(srv.faults), "the fault was not met"
    tag = c.send(PING, struct.pack("<Q", 3))
    assert c.reply(tag)[0] == PONG
    applied, code, _ = reintegrate(c, vol, cid, 2, store, 1, body)
    assert (applied, code) == (2, 0), (applied, code)
    assert not os.listdir(os.path.join(srv.store, "tmp"))
    c.close()


def volume_validate(c, items):
    """VOLUME_VALIDATE of @items [(volume, stamp)]: the reply's frame."""
    body = struct.pack("<I", len(items)) + \
        b"".join(struct.pack("<IQ", v, st) for v, st in items)
    return c.reply(c.send(VOLUME_VALIDATE, body))


def volstamps(fr):
    """[(volume, result, stamp)] of a VOLUME_VALIDATE_REPLY."""
    assert fr[0] == VOLUME_VALIDATE_REPLY, "type %d" % fr[0]
    n, = struct.unpack_from("<I", fr[3])
    return [struct.unpack_from("<IBQ", fr[3], 4 + 13 * i)
            for i in range(n)]


def case_volume_validate_store_error(srv):
    """VOLUME_VALIDATE answers UNKNOWN only for a volume that is not
    there; a volume the store cannot read (injected: server-volume-get,
    EIO) gets an ERROR, which leaves the client's volume to be validated
    again -- UNKNOWN would make it give the volume up for good."""
    c = Conn(srv.port)
    hello(c)
    vol, stamp = volume(c, "v1")
    assert volstamps(volume_validate(c, [(vol, stamp), (9999, 1)])) == \
        [(vol, VOL_VALID, stamp), (9999, VOL_UNKNOWN, 0)]
    with open(srv.faults, "w") as out:
        out.write("server-volume-get\n")
    fr = volume_validate(c, [(vol, stamp)])
    assert not os.path.exists(srv.faults), "the fault was not met"
    assert error_code(fr) == 5, fr[:3]     # EIO
    assert volstamps(volume_validate(c, [(vol, stamp)])) == \
        [(vol, VOL_VALID, stamp)]
    c.close()


def case_volume_promise_lost_closes_session(srv):
    """A VALID answer to VOLUME_VALIDATE promises every callback of the
    volume: one the server cannot record (injected:
    server-volume-promise) closes the session before the answer, as
    PROTOCOL.md (Pushes) says; the server of before answered VALID with
    no promise kept, and the client would never hear of a change."""
    c = Conn(srv.port)
    hello(c)
    vol, stamp = volume(c, "v1")
    with open(srv.faults, "w") as out:
        out.write("server-volume-promise\n")
    c.send(VOLUME_VALIDATE, struct.pack("<IIQ", 1, vol, stamp))
    fr = c.frame()
    assert fr is None, "answered though the promise was lost: %r" % \
        (fr[:3],)
    assert not os.path.exists(srv.faults), "the fault was not met"
    c = Conn(srv.port)
    hello(c)
    assert volstamps(volume_validate(c, [(vol, stamp)])) == \
        [(vol, VOL_VALID, stamp)]
    c.close()
    time.sleep(0.2)
    log = open(srv.log).read()
    assert "out of memory for its volume callbacks" in log, log[-1500:]


def refusal(fr):
    """(applied, code, index, fid) of a REINTEGRATE_REPLY."""
    assert fr[0] == REINTEGRATE_REPLY, "type %d" % fr[0]
    applied, _, code, index = struct.unpack_from("<QQII", fr[3])
    return applied, code, index, fr[3][24:40]


def answered_before_body(c, tag):
    """The reply to batch @tag, which must come with none of its body
    sent: a server that waits for the body times out here."""
    c.s.settimeout(5)
    try:
        return c.reply(tag)
    except socket.timeout:
        raise AssertionError("no answer before the body: the server "
                             "waits for a body it will refuse")
    finally:
        c.s.settimeout(10)


def case_oversized_store_refused_before_body(srv):
    """A STORE larger than a file may be (2^44 bytes: STORE_FILE_MAX) is
    refused EFBIG, naming the record and its object, as soon as the
    batch arrives: nothing of its body is written (the server of before
    wrote whatever the client sent, up to the size it claimed -- 2^63 - 1
    -- into its tmp/ before the apply refused it). What of the body comes
    anyway is read and dropped, other requests are answered meanwhile."""
    tmp = os.path.join(srv.store, "tmp")
    c, vol, cid, f, vers = writer_with_file(srv, "big")
    store = record(2, OP_STORE, bytes(16), f, 0, 0x8, 0, (1 << 44) + 1,
                   b"", base_obj=vers[f])
    tag = c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, 2, 1) + store,
                 flags=MORE)
    assert refusal(answered_before_body(c, tag)) == (1, 27, 0, f)  # EFBIG
    chunk = os.urandom(1 << 20)
    z = zstd(chunk)
    for k in range(4):
        c.send(DATA, struct.pack("<IIQII", 0, 0, k << 20, len(chunk),
                                 len(z)) + z, tag=tag, flags=MORE)
        assert c.reply(c.send(PING, struct.pack("<Q", k)))[0] == PONG
        assert not os.listdir(tmp), os.listdir(tmp)
    # A client that cannot send the rest closes the connection.
    c.close()


def case_over_quota_refused_before_body(srv):
    """A batch whose bodies grow the volume past its quota, even counted
    at the least (content replaced or removed by the batch credited), is
    refused EDQUOT as soon as it arrives, as the apply would refuse it;
    its bodies, sent all the same, are read and dropped without touching
    the disk, and the connection goes on. Batches the apply takes are not
    refused early: a file's content replaced near the quota, and a file
    removed to make room for a new one."""
    tmp = os.path.join(srv.store, "tmp")
    c, vol, cid, f, vers = writer_with_file(srv, "dq")
    srv.ctl("volume", "quota", "dq", "1M")

    def store(recno, obj, body, base):
        return record(recno, OP_STORE, bytes(16), obj, 0, 0x8, 0,
                      len(body), b"", base_obj=base)

    g = fid(vol, cid, 2)
    applied, code, vg = reintegrate(
        c, vol, cid, 2, record(2, OP_CREATE, fid(vol), g, 1, 0x1, 0o644, 0,
                               b"g"), 1)
    assert (applied, code) == (2, 0) and g in vg, (applied, code)
    body = os.urandom(600 << 10)
    applied, code, v3 = reintegrate(c, vol, cid, 3, store(3, f, body,
                                                          vers[f]), 1, body)
    assert (applied, code) == (3, 0), (applied, code)
    # About 400 KiB left: 600 KiB replacing 600 KiB still fit.
    body = os.urandom(600 << 10)
    applied, code, v4 = reintegrate(c, vol, cid, 4, store(4, f, body,
                                                          v3[f]), 1, body)
    assert (applied, code) == (4, 0), (applied, code)
    big = os.urandom(3 << 20)
    tag = c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, 5, 1) +
                 store(5, f, big, v4[f]), flags=MORE)
    fr = answered_before_body(c, tag)
    assert refusal(fr)[:3] == (4, 122, 0xffffffff), refusal(fr)  # EDQUOT
    send_bodies(c, tag, [(0, big)])
    assert c.reply(c.send(PING, struct.pack("<Q", 1)))[0] == PONG
    assert not os.listdir(tmp), os.listdir(tmp)
    # f removed to make room for 700 KiB in g, in one batch: it fits.
    body = os.urandom(700 << 10)
    recs = record(5, OP_UNLINK, fid(vol), f, 0, 0, 0, 0, b"f",
                  base_obj=v4[f]) + store(6, g, body, vg[g])
    fr = c.reply(send_batch(c, vol, cid, 5, recs, 2, [(1, body)]))
    assert refusal(fr)[:2] == (6, 0), refusal(fr)
    c.close()


def case_unjudged_batch_not_refused(srv):
    """A batch the early check cannot judge (injected: server-reint-check,
    as if out of memory) is not refused for it: its body is taken and the
    apply judges it -- here, applies it. The server of before answered the
    check's own failure as a REINTEGRATE_REPLY refusal, after which the
    client holds the volume's changes until a person steps in."""
    c, vol, cid, f, vers = writer_with_file(srv, "unjudged")
    body = os.urandom(64 << 10)
    store = record(2, OP_STORE, bytes(16), f, 0, 0x8, 0, len(body), b"",
                   base_obj=vers[f])
    with open(srv.faults, "w") as out:
        out.write("server-reint-check\n")
    applied, code, _ = reintegrate(c, vol, cid, 2, store, 1, body)
    assert not os.path.exists(srv.faults), "the fault was not met"
    assert (applied, code) == (2, 0), (applied, code)
    assert "not judged before its bodies" in open(srv.log).read()
    assert not os.listdir(os.path.join(srv.store, "tmp"))
    c.close()


def case_gap_refused_as_apply_would(srv):
    """A batch whose first records are missing (EPROTO at the apply) and
    whose STORE is too large (EFBIG) is refused before its body for what
    the apply refuses it for, its record numbers, as the apply checks
    those first: the server of before said EFBIG."""
    c, vol, cid, f, vers = writer_with_file(srv, "gap")
    store = record(3, OP_STORE, bytes(16), f, 0, 0x8, 0, (1 << 44) + 1,
                   b"", base_obj=vers[f])
    tag = c.send(REINTEGRATE, struct.pack("<IIQI", vol, cid, 3, 1) + store,
                 flags=MORE)
    applied, code, index, _ = refusal(answered_before_body(c, tag))
    assert (applied, code, index) == (1, 71, 0xffffffff), \
        (applied, code, index)      # EPROTO, no record blamed
    c.close()


def server_fds(srv):
    return len(os.listdir("/proc/%d/fd" % srv.p.pid))


def case_unread_fetches_hold_no_descriptors(srv):
    """A client that sends many FETCHes and reads none costs the server
    one open body, not one each; once it reads, every FETCH is answered
    in order, and a FETCH of no object gets its error in its turn."""
    c, vol, cid, f, vers = writer_with_file(srv, "v4")
    size = 1 << 20
    applied, code, _ = reintegrate(
        c, vol, cid, 2, record(2, OP_STORE, bytes(16), f, 0, 0x8, 0, size,
                               b"", base_obj=vers[f]), 1, os.urandom(size))
    assert (applied, code) == (2, 0), (applied, code)
    before = server_fds(srv)
    n = 200
    tags = [c.send(FETCH, f + VV0) for _ in range(n)]
    gone = c.send(FETCH, fid(vol, cid, 99) + VV0)
    time.sleep(0.5)
    held = server_fds(srv) - before
    assert held <= 2, "%d FETCHes unread hold %d descriptors" % (n, held)
    for tag in tags:
        t, _, rtag, _ = c.frame()
        assert (t, rtag) == (FETCH_REPLY, tag), (t, rtag, tag)
        got = 0
        while True:
            t, _, rtag, b = c.frame()
            assert (t, rtag) == (DATA, tag), (t, rtag, tag)
            _, flags, off, raw = struct.unpack_from("<IIQI", b)
            assert off == got, (off, got)
            got += raw
            if flags & 1:
                break
        assert got == size, (got, size)
    fr = c.frame()
    assert fr[2] == gone and error_code(fr) == 2, fr[:3]  # ENOENT
    c.close()


def case_flood_behind_permit_closed(srv):
    """Requests that wait behind another client's permit are kept, up to
    a bound: a client that sends more (here 9 VALIDATEs of 2^18 items,
    68 MB) is closed with a reason logged, and the holder is not
    disturbed."""
    srv.ctl("volume", "create", "v5")
    a, b = Conn(srv.port), Conn(srv.port)
    hello(a)
    hello(b)
    vol, _ = volume(a, "v5")
    t, _, _, _ = a.reply(a.send(PERMIT_ACQUIRE, struct.pack("<I", vol)))
    assert t == PERMIT_REPLY, t
    n = 1 << 18
    body = struct.pack("<I", n) + (fid(vol) + VV0) * n
    try:
        for _ in range(9):
            b.send(VALIDATE, body)
        closed = b.frame() is None
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    assert closed, "the flooding client was not closed"
    tag = a.send(PING, struct.pack("<Q", 7))
    assert a.reply(tag)[0] == PONG
    a.close()
    b.close()
    time.sleep(0.2)
    log = open(srv.log).read()
    assert "wait for permits already" in log, log[-1500:]


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
         case_lease_expires, case_revoked_holder_cannot_keep_renewing,
         case_stalled_batch_keeps_no_permit,
         case_clients_bounded, case_handshake_bounded,
         case_identities_bounded,
         case_revoke_skips_closing_session,
         case_listing_over_limit_stops_early,
         case_listing_larger_than_output_bound, case_pong_ahead_of_listing,
         case_answers_wait_for_listing,
         case_reintegrate_needs_permit, case_groups_count,
         case_resent_batch_leaves_no_body, case_pipelined_batches,
         case_resize_copy_off_the_loop,
         case_resize_copies_counted,
         case_batch_sizes_bounded,
         case_promise_lost_closes_session,
         case_batch_without_memory_answered,
         case_volume_validate_store_error,
         case_volume_promise_lost_closes_session,
         case_oversized_store_refused_before_body,
         case_over_quota_refused_before_body,
         case_unjudged_batch_not_refused, case_gap_refused_as_apply_would,
         case_unread_fetches_hold_no_descriptors,
         case_flood_behind_permit_closed, case_malformed]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lento", default=os.path.join(TOP, "tools", "bin",
                                                    "lento-asan"))
    ap.add_argument("cases", nargs="*", metavar="CASE",
                    help="run only these (names as printed); default all")
    args = ap.parse_args()
    names = [c.__name__[5:] for c in CASES]
    unknown = [n for n in args.cases if n not in names]
    if unknown:
        ap.error("no case %s; cases: %s" % (", ".join(unknown),
                                            " ".join(names)))
    tmp = tempfile.mkdtemp(prefix="lento-wire.")
    passed = failed = 0
    srv = Server(args.lento, tmp)
    try:
        srv.ctl("volume", "create", "v1")
        srv.ctl("volume", "create", "v2")
        for case in CASES:
            name = case.__name__[5:]
            if args.cases and name not in args.cases:
                continue
            try:
                case(srv)
                print("ok - %s" % name)
                passed += 1
            except Exception:
                print("not ok - %s" % name)
                traceback.print_exc(file=sys.stdout)
                failed += 1
            sys.stdout.flush()
        big_dir_done()
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
