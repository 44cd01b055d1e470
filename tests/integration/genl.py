"""A small generic-netlink client of presto's channel, for the tests: a
fake lento that speaks protocol/KERNEL.md by hand. Numbers come from
protocol/presto_genl.h itself, so the tests follow the header."""
import errno
import fcntl
import os
import re
import select
import socket
import struct
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
HEADER = os.path.join(TOP, "protocol", "presto_genl.h")

NETLINK_GENERIC = 16
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 1
NLM_F_ACK = 4
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
CTRL_ATTR_VERSION = 3
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5
NETLINK_EXT_ACK = 11
FS_IOC_GETVERSION = 0x80087601


def _enum(text, name):
    body = re.search(r"enum %s \{(.*?)\};" % name, text, re.S).group(1)
    out, n = {}, 0
    for m in re.finditer(r"^\s*([A-Z0-9_]+)\s*(?:=\s*(\d+))?\s*,", body, re.M):
        if m.group(2):
            n = int(m.group(2))
        out[m.group(1)] = n
        n += 1
    return out


_text = open(HEADER).read()
CMD = {k[len("PRESTO_CMD_"):]: v for k, v in _enum(_text, "presto_cmd").items()}
A = {k[len("PRESTO_A_"):]: v for k, v in _enum(_text, "presto_attr").items()}
S = {k[len("PRESTO_S_"):]: v for k, v in _enum(_text, "presto_stat").items()}
OP = {k[len("PRESTO_OP_"):]: v
      for k, v in _enum(_text, "presto_upcall_op").items()}
EV = {m.group(1): int(m.group(2), 16) for m in re.finditer(
    r"#define PRESTO_EV_([A-Z]+)\s+0x([0-9a-f]+)", _text)}
VERSION = int(re.search(r"#define PRESTO_GENL_VERSION\s+(\d+)", _text).group(1))
CB_ATTR, CB_DATA = 1, 2
CB_ALL = 3
XATTR = "trusted.presto.cb"


def attr(t, data):
    n = 4 + len(data)
    return struct.pack("=HH", n, t) + data + b"\0" * ((4 - n % 4) % 4)


def a_str(t, s):
    return attr(t, s.encode() + b"\0")


def a_u32(t, v):
    return attr(t, struct.pack("=I", v))


def a_u8(t, v):
    return attr(t, struct.pack("=B", v))


def a_u64(t, v):
    return attr(t, struct.pack("=Q", v))


def a_handle(t, ino, gen, pad=0):
    return attr(t, struct.pack("=QII", ino, gen, pad))


def parse_attrs(data):
    out = {}
    off = 0
    while off + 4 <= len(data):
        n, t = struct.unpack_from("=HH", data, off)
        if n < 4 or off + n > len(data):
            raise ValueError("bad attribute length")
        out[t & 0x3fff] = data[off + 4:off + n]
        off += (n + 3) & ~3
    return out


def handle_of(path):
    """(ino, generation) of a lower file or directory."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        # ext4 writes an int, whatever the ioctl's declared size.
        gen = struct.unpack_from("=I", fcntl.ioctl(fd, FS_IOC_GETVERSION,
                                                   b"\0" * 8))[0]
        return os.fstat(fd).st_ino, gen
    finally:
        os.close(fd)


def set_cb(path, flags, epoch):
    os.setxattr(path, XATTR, struct.pack("<BB6xQ", 1, flags, epoch),
                follow_symlinks=False)


def get_cb(path):
    try:
        v = os.getxattr(path, XATTR, follow_symlinks=False)
    except OSError:
        return None
    ver, flags, epoch = struct.unpack("<BB6xQ", v)
    return flags, epoch


class Msg:
    def __init__(self, cmd, attrs, seq):
        self.cmd, self.attrs, self.seq = cmd, attrs, seq

    def u32(self, a):
        return struct.unpack("=I", self.attrs[A[a]])[0]

    def u64(self, a):
        return struct.unpack("=Q", self.attrs[A[a]])[0]

    def handle(self, a="HANDLE"):
        ino, gen, _ = struct.unpack("=QII", self.attrs[A[a]])
        return ino, gen

    def stats(self):
        return {k: struct.unpack("=Q", v)[0]
                for k, v in parse_attrs(self.attrs[A["STAT"]]).items()}


class Lento:
    """One netlink socket of the presto family: a (fake) lento."""

    def __init__(self, rcvbuf=None):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                                  NETLINK_GENERIC)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
        self.sock.bind((0, 0))
        self.portid = self.sock.getsockname()[0]
        self.seq = 0
        self.queue = []         # messages that came while waiting for acks
        self.family = GENL_ID_CTRL
        rep = self._request(CTRL_CMD_GETFAMILY,
                            a_str(CTRL_ATTR_FAMILY_NAME, "presto"),
                            family=GENL_ID_CTRL, version=1)
        self.family = struct.unpack("=H", rep.attrs[CTRL_ATTR_FAMILY_ID])[0]
        self.version = struct.unpack("=I", rep.attrs[CTRL_ATTR_VERSION])[0]

    def close(self):
        self.sock.close()

    def send_raw(self, cmd, payload, family=None, version=None, flags=None,
                 seq=None):
        if seq is None:
            self.seq += 1
            seq = self.seq
        body = struct.pack("=BBH", cmd, VERSION if version is None else
                           version, 0) + payload
        hdr = struct.pack("=IHHII", 16 + len(body),
                          self.family if family is None else family,
                          NLM_F_REQUEST | NLM_F_ACK if flags is None
                          else flags, seq, 0)
        self.sock.send(hdr + body)
        return seq

    def _read(self, timeout):
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return []
        data = self.sock.recv(1 << 20)
        out = []
        off = 0
        while off + 16 <= len(data):
            n, typ, flags, seq, pid = struct.unpack_from("=IHHII", data, off)
            payload = data[off + 16:off + n]
            if typ == NLMSG_ERROR:
                out.append(("ack", seq, -struct.unpack_from("=i", payload)[0]))
            elif typ >= 0x10:
                cmd = payload[0]
                out.append(("msg", seq, Msg(cmd, parse_attrs(payload[4:]),
                                            seq)))
            off += (n + 3) & ~3
        return out

    def _request(self, cmd, payload, family=None, version=None):
        """Send; (the reply message or None, the ack's errno)."""
        seq = self.send_raw(cmd, payload, family, version)
        reply = None
        end = time.monotonic() + 5
        while time.monotonic() < end:
            for kind, s, v in self._read(0.2):
                if s != seq:
                    if kind == "msg":
                        self.queue.append(v)
                    continue
                if kind == "msg":
                    reply = v
                else:
                    if v and family == GENL_ID_CTRL:
                        raise OSError(v, "family presto: %s" % os.strerror(v))
                    self.last_err = v
                    return reply if family == GENL_ID_CTRL else (reply, v)
        raise TimeoutError("no ack for command %d" % cmd)

    def request(self, cmd, *attrs, raw=None):
        """(reply message or None, errno) of command @cmd."""
        return self._request(CMD[cmd], raw if raw is not None
                             else b"".join(attrs))

    def call(self, cmd, fileset, *attrs):
        """errno of @cmd for @fileset, with attributes @attrs."""
        return self.request(cmd, a_str(A["FILESET"], fileset), *attrs)[1]

    def register(self, fileset):
        return self.request("REGISTER", a_str(A["FILESET"], fileset))

    def stats(self, fileset):
        rep, err = self.request("STATS", a_str(A["FILESET"], fileset))
        if err:
            raise OSError(err, os.strerror(err))
        return {k: rep.stats().get(S[k], 0) for k in S
                if k not in ("UNSPEC", "PAD", "_MAX")}

    def next_msg(self, timeout=5.0, cmd=None):
        """The next message of presto (of command @cmd), or None."""
        end = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.queue):
                if cmd is None or m.cmd == CMD[cmd]:
                    return self.queue.pop(i)
            left = end - time.monotonic()
            if left <= 0:
                return None
            for kind, s, v in self._read(left):
                if kind == "msg":
                    self.queue.append(v)

    def reply(self, fileset, req, err=0, flags=None, epoch=None):
        attrs = [a_str(A["FILESET"], fileset), a_u64(A["REQ"], req),
                 a_u32(A["ERRNO"], err)]
        if flags is not None:
            attrs += [a_u32(A["FLAGS"], flags), a_u64(A["EPOCH"], epoch)]
        return self.request("REPLY", *attrs)[1]
