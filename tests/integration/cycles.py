#!/usr/bin/env python3
"""Many mount/umount or load/unload cycles, and nothing may grow.

    cycles.py mount CACHE MNT N   mount presto over CACHE on MNT, stat
                                  d/f, umount; N times
    cycles.py module KO N         load and unload KO N times (presto
                                  loaded on entry and on exit)

The cycles are system calls made from this one process: under the test
VM's emulation every program started costs a third of a second, which
would be most of the time otherwise. Exits 0 when every cycle worked
and, for mount, nothing leaked.

A leaked presto dentry pins its presto inode, so the presto_inode slab
is the exact check. The dentry slab is noisy (per-CPU slabs count as in
use: up to about 150 between idle samples) and catches gross leaks: one
dentry a cycle is N, well over the noise for N = 500.
"""
import ctypes
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_FINIT_MODULE = 313   # x86_64
SYS_DELETE_MODULE = 176
DENTRY_NOISE = 150


def fail(what):
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(cache, mnt):
    if libc.mount(b"presto", mnt.encode(), b"presto", 0,
                  f"lower={cache}".encode()) != 0:
        fail(f"mount presto over {cache} on {mnt}")


def umount(mnt):
    if libc.umount2(mnt.encode(), 0) != 0:
        fail(f"umount {mnt}")


def slab(name):
    with open("/proc/slabinfo") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] == name:
                return int(fields[1])
    raise LookupError(f"no slab {name} in /proc/slabinfo")


def settle():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def mount_cycles(cache, mnt, n):
    os.makedirs(f"{cache}/d", exist_ok=True)
    open(f"{cache}/d/f", "a").close()

    def cycle():
        mount(cache, mnt)
        try:
            os.stat(f"{mnt}/d/f")
        finally:
            umount(mnt)

    for _ in range(30):   # slabs warm before the first sample
        cycle()
    settle()
    i0, d0 = slab("presto_inode"), slab("dentry")
    for _ in range(n):
        cycle()
    settle()
    i1, d1 = slab("presto_inode"), slab("dentry")
    print(f"{n} cycles: presto_inode {i0} -> {i1}, dentry {d0} -> {d1}")
    return i1 <= i0 and d1 <= d0 + DENTRY_NOISE


def module_cycles(ko, n):
    def delete():
        if libc.syscall(SYS_DELETE_MODULE, b"presto", os.O_NONBLOCK) != 0:
            fail("delete_module presto")

    def load():
        fd = os.open(ko, os.O_RDONLY)
        try:
            if libc.syscall(SYS_FINIT_MODULE, fd, b"", 0) != 0:
                fail(f"finit_module {ko}")
        finally:
            os.close(fd)

    delete()
    for _ in range(n):
        load()
        delete()
    load()
    print(f"{n} load/unload cycles")
    return True


def main(argv):
    if len(argv) == 5 and argv[1] == "mount":
        return 0 if mount_cycles(argv[2], argv[3], int(argv[4])) else 1
    if len(argv) == 4 and argv[1] == "module":
        return 0 if module_cycles(argv[2], int(argv[3])) else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
