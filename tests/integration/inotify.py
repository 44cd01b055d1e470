"""inotify(7) for the tests, through ctypes: a watcher of paths whose
events come back as (path watched, mask, name)."""
import ctypes
import ctypes.util
import os
import select
import struct
import time

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

NAMES = {IN_MODIFY: "MODIFY", IN_ATTRIB: "ATTRIB",
         IN_CLOSE_WRITE: "CLOSE_WRITE", IN_MOVED_FROM: "MOVED_FROM",
         IN_MOVED_TO: "MOVED_TO", IN_CREATE: "CREATE", IN_DELETE: "DELETE",
         IN_ISDIR: "ISDIR"}

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_EVENT = struct.Struct("=iIII")


def describe(mask):
    return "|".join(n for b, n in NAMES.items() if mask & b) or hex(mask)


class Watcher:
    def __init__(self):
        self.fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        self.paths = {}

    def add(self, path, mask):
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            e = ctypes.get_errno()
            raise OSError(e, "inotify_add_watch %s: %s" % (path,
                                                           os.strerror(e)))
        self.paths[wd] = path
        return wd

    def remove(self, wd):
        _libc.inotify_rm_watch(self.fd, wd)

    def events(self, timeout):
        """Every event that comes within @timeout seconds (after the
        first, until the queue stays empty for a moment)."""
        out = []
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if out:
                left = min(left, 0.2)
            if left <= 0:
                return out
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                if out:
                    return out
                continue
            data = os.read(self.fd, 1 << 16)
            off = 0
            while off + _EVENT.size <= len(data):
                wd, mask, _, n = _EVENT.unpack_from(data, off)
                name = data[off + _EVENT.size:off + _EVENT.size + n]
                out.append((self.paths.get(wd), mask,
                            name.rstrip(b"\0").decode()))
                off += _EVENT.size + n

    def wait_for(self, pred, timeout):
        """Events until one satisfies @pred (all of them), or None."""
        seen = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            evs = self.events(end - time.monotonic())
            seen += evs
            if any(pred(e) for e in evs):
                return seen
        return None if not any(pred(e) for e in seen) else seen

    def close(self):
        os.close(self.fd)
