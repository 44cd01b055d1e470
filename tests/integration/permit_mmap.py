#!/usr/bin/env python3
"""One process's side of channel.py's case permit_revoke_mmap: threads of
one address space in the order that deadlocked a revoke when a page fault
and a write(2) waited for the same permit semaphore.

    permit_mmap.py WRITE_FILE MAPPED_FILE

Both files are on a presto fileset mount whose permit is held. Speaks
with channel.py over stdin/stdout, a line at a time:

  -> "blocked"   a write(2) to WRITE_FILE holds the permit, its source
                 buffer's page fault held by a userfaultfd
  <- "go"        (the permit is being revoked now)
  -> "done" or "stuck: WHAT"
                 after a write fault on MAPPED_FILE (page_mkwrite), an
                 mmap(2) queued behind it, and the source page supplied

Run in a process of its own: threads stuck in a deadlock cannot be
killed, and must not take the test suite with them.
"""
import ctypes
import os
import struct
import sys
import threading

PAGE = 4096
SYS_USERFAULTFD = 323                   # x86_64
PROT_READ, PROT_WRITE = 1, 2
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS = 1, 2, 0x20
UFFD_API = 0xAA
UFFDIO_REGISTER_MODE_MISSING = 1


def _iowr(nr, size):
    return (3 << 30) | (size << 16) | (0xAA << 8) | nr


UFFDIO_API = _iowr(0x3F, 24)            # struct uffdio_api
UFFDIO_REGISTER = _iowr(0x00, 32)       # struct uffdio_register
UFFDIO_COPY = _iowr(0x03, 40)           # struct uffdio_copy

libc = ctypes.CDLL(None, use_errno=True)    # calls release the GIL
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.syscall.restype = ctypes.c_long
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]


def fail(what):
    err = ctypes.get_errno()
    raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def ioctl(fd, req, payload):
    buf = ctypes.create_string_buffer(payload, len(payload))
    if libc.ioctl(fd, ctypes.c_ulong(req), buf) < 0:
        fail("ioctl %#x" % req)
    return buf.raw


def mmap(length, prot, flags, fd=-1):
    addr = libc.mmap(None, length, prot, flags, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        fail("mmap")
    return addr


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    write_path, mapped_path = sys.argv[1:3]
    uffd = libc.syscall(SYS_USERFAULTFD, os.O_CLOEXEC)
    if uffd < 0:
        fail("userfaultfd")
    ioctl(uffd, UFFDIO_API, struct.pack("QQQ", UFFD_API, 0, 0))
    src = mmap(PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS)
    ioctl(uffd, UFFDIO_REGISTER, struct.pack(
        "QQQQ", src, PAGE, UFFDIO_REGISTER_MODE_MISSING, 0))
    wfd = os.open(write_path, os.O_WRONLY)
    mfd = os.open(mapped_path, os.O_RDWR)
    mapped = mmap(PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd)
    ctypes.string_at(mapped, 1)          # mapped in; writable at a fault
    done = {}

    def run(name, fn):
        def body():
            try:
                fn()
                done[name] = "ok"
            except OSError as e:
                done[name] = str(e)
        t = threading.Thread(target=body, daemon=True)
        t.start()
        return t

    buf = (ctypes.c_char * PAGE).from_address(src)
    writer = run("write", lambda: os.write(wfd, buf))
    os.read(uffd, 32)                    # its fault arrived: it waits
    say("blocked")
    if sys.stdin.readline().strip() != "go":
        return 1
    # A write fault on the mapping (page_mkwrite) takes mmap_lock, then
    # the permit; an mmap(2) then queues for mmap_lock as a writer.
    faulter = run("fault", lambda: libc.memset(mapped, 0x41, 1))
    threading.Event().wait(0.3)
    mapper = run("mmap", lambda: mmap(PAGE, PROT_READ,
                                      MAP_PRIVATE | MAP_ANONYMOUS))
    threading.Event().wait(0.3)
    # The write's page: it takes mmap_lock again to finish its fault.
    page = ctypes.create_string_buffer(b"w" * PAGE, PAGE)
    ioctl(uffd, UFFDIO_COPY, struct.pack(
        "QQQQq", src, ctypes.addressof(page), PAGE, 0, 0))
    for t in (writer, faulter, mapper):
        t.join(15)
    stuck = [n for n in ("write", "fault", "mmap") if n not in done]
    bad = ["%s: %s" % (n, v) for n, v in done.items() if v != "ok"]
    say("stuck: " + ", ".join(stuck) if stuck else
        "failed: " + "; ".join(bad) if bad else "done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
