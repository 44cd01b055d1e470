#!/usr/bin/env python3
"""Every change made through presto logs exactly the records it should.

    kml_ops.py MNT CACHE

MNT is a presto mount of CACHE (its lower= directory), fresh or not. Each
case does one thing through the mount and checks the records the log got
for it (operation, flags, handles, names, attributes) against what the
lower objects are, and that nothing else was logged. Runs as root in the
test VM; ends with "N passed, N failed".
"""
import ctypes
import fcntl
import mmap
import os
import socket
import struct
import subprocess
import sys
import threading
import traceback

import kmltest
from cases import Cases, check

MNT, CACHE = sys.argv[1], sys.argv[2]
W = os.path.join(MNT, "kml-ops")      # the cases' working directory
LW = os.path.join(CACHE, "kml-ops")   # the same, seen in the cache

FS_IOC_GETVERSION = 0x80087601
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2

libc = ctypes.CDLL(None, use_errno=True)


def state():
    return kmltest.state(MNT)


def records_after(seq):
    """The records after @seq, once the log holds everything so far."""
    os.sync()
    return kmltest.records(CACHE, seq)


def last_seq():
    return state()["next_seq"] - 1


def handle(lower_path):
    """(ino, gen) of a lower object, as records name it."""
    st = os.lstat(lower_path)
    gen = None
    try:
        fd = os.open(lower_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        fd = None     # a symlink, a socket: no generation to compare
    if fd is not None:
        try:
            buf = fcntl.ioctl(fd, FS_IOC_GETVERSION, bytes(8))
            gen = struct.unpack("<I", buf[:4])[0]
        except OSError:
            pass
        finally:
            os.close(fd)
    return st.st_ino, gen


def is_fh(rec_fh, lower_path):
    ino, gen = handle(lower_path)
    return rec_fh["ino"] == ino and (gen is None or rec_fh["gen"] == gen)


def renameat2(old, new, flags):
    r = libc.renameat2(-100, old.encode(), -100, new.encode(), flags)
    if r:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


def ops(recs):
    return [r["op"] for r in recs]


def fresh_dir():
    """A fresh working directory for each case; the last sequence number
    logged before it."""
    subprocess.run(["rm", "-rf", W], check=True)
    os.mkdir(W)
    return last_seq()


case = Cases(before=fresh_dir)


@case
def create_logs_create_and_no_store(s0):
    os.close(os.open(f"{W}/f", os.O_CREAT | os.O_WRONLY, 0o640))
    recs = records_after(s0)
    check(ops(recs) == ["CREATE"], ops(recs))
    r = recs[0]
    check(r["name"] == "f", r)
    check(is_fh(r["dir"], LW) and is_fh(r["obj"], f"{LW}/f"), r)
    st = os.stat(f"{LW}/f")
    a = r["attr"]
    check(a["mode"] == st.st_mode and a["uid"] == 0 and a["gid"] == 0, a)
    check(a["size"] == 0 and a["nlink"] == 1, a)
    check(r["uid"] == 0 and r["gid"] == 0 and r["groups"] == [], r)


@case
def write_then_close_logs_one_store(s0):
    fd = os.open(f"{W}/f", os.O_CREAT | os.O_WRONLY, 0o644)
    for _ in range(10):
        os.write(fd, b"x" * 1000)
    os.close(fd)
    recs = records_after(s0)
    # The STORE folds into the file's CREATE, still queued (KML.md).
    check(ops(recs) == ["CREATE"] and recs[0]["flags"] == ["STORED"],
          recs)
    st = recs[0]
    check(is_fh(st["obj"], f"{LW}/f"), st)
    check(st["attr"]["size"] == 10000, st)
    check(st["attr"]["mtime_ns"] == os.stat(f"{LW}/f").st_mtime_ns, st)


@case
def read_only_open_logs_nothing(s0):
    with open(f"{W}/f", "w") as f:
        f.write("data")
    s1 = last_seq()
    with open(f"{W}/f") as f:
        f.read()
    fd = os.open(f"{W}/f", os.O_RDWR)   # opened for writing, not written
    os.close(fd)
    os.stat(f"{W}/f")
    os.listdir(W)
    check(records_after(s1) == [], records_after(s1))


@case
def fsync_logs_store_and_makes_it_durable(s0):
    fd = os.open(f"{W}/f", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"abc")
    os.fsync(fd)
    st = state()
    recs = records_after(s0)
    # The fsync's STORE folded into the CREATE, which it made durable.
    check(ops(recs) == ["CREATE"] and recs[0]["flags"] == ["STORED"],
          recs)
    check(st["durable_seq"] >= recs[-1]["seq"], (st, recs[-1]["seq"]))
    os.close(fd)        # nothing written since the fsync: no STORE
    check(len(records_after(s0)) == 1, "store at close")
    # A second fsync with nothing new logs nothing either; one after a
    # write, the CREATE written out, is a STORE of its own.
    fd = os.open(f"{W}/f", os.O_WRONLY)
    os.fsync(fd)
    check(len(records_after(s0)) == 1, "fsync of a clean file")
    os.write(fd, b"d")
    os.fsync(fd)
    os.close(fd)
    check(ops(records_after(s0)) == ["CREATE", "STORE"], "a later fsync")


@case
def fdatasync_and_dir_fsync(s0):
    os.mkdir(f"{W}/d")
    dfd = os.open(f"{W}/d", os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(f"{W}/d/f", os.O_CREAT | os.O_WRONLY, 0o644)
    os.fsync(dfd)
    check(state()["durable_seq"] >= records_after(s0)[-1]["seq"], "dir")
    os.write(fd, b"1")
    os.fdatasync(fd)
    recs = records_after(s0)
    check(ops(recs) == ["MKDIR", "CREATE", "STORE"], ops(recs))
    check(state()["durable_seq"] >= recs[-1]["seq"], "fdatasync")
    os.close(fd)
    os.close(dfd)


@case
def mkdir_mknod_symlink(s0):
    os.mkdir(f"{W}/d", 0o750)
    os.mkfifo(f"{W}/fifo", 0o600)
    os.mknod(f"{W}/null", 0o20666, os.makedev(1, 3))
    os.symlink("some/where", f"{W}/s")
    recs = records_after(s0)
    check(ops(recs) == ["MKDIR", "MKNOD", "MKNOD", "SYMLINK"], ops(recs))
    check(recs[0]["attr"]["mode"] == 0o40750 and recs[0]["attr"]["nlink"] == 2,
          recs[0])
    umask = os.umask(0)
    os.umask(umask)
    check(recs[1]["attr"]["mode"] == 0o10600 & ~umask, recs[1])
    check(recs[2]["attr"]["mode"] == 0o20666 & ~umask, recs[2])
    dev = recs[2]["attr"]["rdev"]
    check(((dev & 0xfff00) >> 8, (dev & 0xff) | ((dev >> 12) & 0xfff00))
          == (1, 3), dev)
    check(recs[3]["data"] == "some/where" and recs[3]["name"] == "s", recs[3])
    check(recs[3]["attr"]["size"] == 10, recs[3])
    for r, n in zip(recs, ["d", "fifo", "null", "s"]):
        check(r["name"] == n and is_fh(r["obj"], f"{LW}/{n}"), r)
        check(is_fh(r["dir"], LW), r)


@case
def link_and_unlink(s0):
    with open(f"{W}/f", "w"):
        pass
    os.mkdir(f"{W}/d")
    os.link(f"{W}/f", f"{W}/d/g")
    h = handle(f"{LW}/f")
    os.unlink(f"{W}/f")
    os.unlink(f"{W}/d/g")
    recs = records_after(s0)
    check(ops(recs) == ["CREATE", "MKDIR", "LINK", "UNLINK", "UNLINK"],
          ops(recs))
    link, u1, u2 = recs[2], recs[3], recs[4]
    check(link["name"] == "g" and link["attr"]["nlink"] == 2, link)
    check(is_fh(link["dir"], f"{LW}/d"), link)
    check((link["obj"]["ino"], link["obj"]["gen"]) == h, link)
    check(u1["name"] == "f" and u1["attr"]["nlink"] == 1, u1)
    check(u2["name"] == "g" and u2["attr"]["nlink"] == 0, u2)
    check(u1["obj"] == u2["obj"] == link["obj"], (u1, u2))


@case
def rmdir(s0):
    os.mkdir(f"{W}/d")
    h = handle(f"{LW}/d")
    os.rmdir(f"{W}/d")
    recs = records_after(s0)
    check(ops(recs) == ["MKDIR", "RMDIR"], ops(recs))
    check((recs[1]["obj"]["ino"], recs[1]["obj"]["gen"]) == h, recs[1])
    check(recs[1]["attr"]["nlink"] == 0, recs[1])


@case
def renames(s0):
    os.mkdir(f"{W}/a")
    os.mkdir(f"{W}/b")
    for n in ("f", "g", "x", "y"):
        with open(f"{W}/a/{n}", "w"):
            pass
    s1 = last_seq()
    g = handle(f"{LW}/a/g")
    os.rename(f"{W}/a/f", f"{W}/b/f2")            # across directories
    os.rename(f"{W}/b/f2", f"{W}/a/g")            # over an existing file
    renameat2(f"{W}/a/x", f"{W}/a/z", RENAME_NOREPLACE)
    renameat2(f"{W}/a/z", f"{W}/a/y", RENAME_EXCHANGE)
    recs = records_after(s1)
    check(ops(recs) == ["RENAME"] * 4, ops(recs))
    r1, r2, r3, r4 = recs
    check(r1["name"] == "f" and r1["name2"] == "f2", r1)
    check(is_fh(r1["dir"], f"{LW}/a") and is_fh(r1["newdir"], f"{LW}/b"), r1)
    check("target" not in r1 and r1["flags"] == [], r1)
    check(is_fh(r2["dir"], f"{LW}/b") and is_fh(r2["newdir"], f"{LW}/a"), r2)
    check((r2["target"]["ino"], r2["target"]["gen"]) == g, r2)
    check(is_fh(r2["obj"], f"{LW}/a/g"), r2)
    check(r3["flags"] == ["NOREPLACE"] and "target" not in r3, r3)
    check(r4["flags"] == ["EXCHANGE"], r4)
    check(is_fh(r4["obj"], f"{LW}/a/y") and is_fh(r4["target"], f"{LW}/a/z"),
          r4)


@case
def setattr_records(s0):
    with open(f"{W}/f", "w") as f:
        f.write("0123456789")
    # Each on its own: a sync writes the last record out (setattrs_fold).
    os.sync()
    s1 = last_seq()
    os.chmod(f"{W}/f", 0o4755)
    os.sync()
    os.chown(f"{W}/f", 1000, 1000)
    os.sync()
    os.truncate(f"{W}/f", 3)
    os.sync()
    os.utime(f"{W}/f", ns=(1_000_000_000, 2_000_000_000))
    recs = records_after(s1)
    check(ops(recs) == ["SETATTR"] * 4, ops(recs))
    chmod, chown, trunc, utime = (r["attr"] for r in recs)
    check(chmod["mode"] == 0o104755, chmod)
    # chown by root drops the set-uid bit: the mode comes along.
    check(chown["uid"] == 1000 and chown["gid"] == 1000, chown)
    check(chown["mode"] == os.stat(f"{LW}/f").st_mode == 0o100755, chown)
    check(trunc["size"] == 3 and "uid" not in trunc, trunc)
    check(utime["atime_ns"] == 1_000_000_000, utime)
    check(utime["mtime_ns"] == 2_000_000_000, utime)
    check("size" not in utime and "mode" not in utime, utime)


@case
def xattr_records(s0):
    with open(f"{W}/f", "w"):
        pass
    s1 = last_seq()
    os.setxattr(f"{W}/f", "user.a", b"\x00\xffvalue", os.XATTR_CREATE)
    os.setxattr(f"{W}/f", "user.a", b"2", os.XATTR_REPLACE)
    os.setxattr(f"{W}/f", "trusted.t", b"")
    os.removexattr(f"{W}/f", "user.a")
    recs = records_after(s1)
    check(ops(recs) == ["SETXATTR", "SETXATTR", "SETXATTR", "REMOVEXATTR"],
          ops(recs))
    check(recs[0]["name"] == "user.a" and recs[0]["flags"] == ["XATTR_CREATE"],
          recs[0])
    check(recs[0]["data"].encode("latin-1") == b"\x00\xffvalue", recs[0])
    check(recs[1]["flags"] == ["XATTR_REPLACE"] and recs[1]["data"] == "2",
          recs[1])
    check(recs[2]["data"] == "" and recs[2]["flags"] == [], recs[2])
    check(recs[3]["name"] == "user.a" and recs[3]["flags"] == [], recs[3])


@case
def tmpfile_linked_in_is_a_create_and_store(s0):
    fd = os.open(W, os.O_TMPFILE | os.O_RDWR, 0o600)
    os.write(fd, b"hello")
    s1 = last_seq()
    check(records_after(s0) == [], "an O_TMPFILE is not logged")
    root = os.open("/", os.O_RDONLY)
    os.link(f"/proc/self/fd/{fd}", f"{W}/t", src_dir_fd=root)
    os.close(root)
    os.close(fd)
    recs = records_after(s1)
    check(ops(recs) == ["CREATE", "STORE"], ops(recs))
    check(recs[0]["flags"] == ["TMPFILE"] and recs[0]["name"] == "t", recs[0])
    check(recs[0]["attr"]["size"] == 5 and recs[1]["attr"]["size"] == 5, recs)
    check(is_fh(recs[0]["obj"], f"{LW}/t"), recs[0])


@case
def shared_mmap_write_logs_store_at_unmap(s0):
    with open(f"{W}/f", "wb") as f:
        f.write(b"\0" * 8192)
    s1 = last_seq()
    fd = os.open(f"{W}/f", os.O_RDWR)
    m = mmap.mmap(fd, 8192)
    os.close(fd)
    m[100:105] = b"hello"
    check(records_after(s1) == [], "no record before the unmap")
    m.close()
    recs = records_after(s1)
    check(ops(recs) == ["STORE"], ops(recs))
    # A mapping that only reads logs nothing.
    s2 = last_seq()
    fd = os.open(f"{W}/f", os.O_RDWR)
    m = mmap.mmap(fd, 8192)
    check(m[100:105] == b"hello", "mapped data")
    m.close()
    os.close(fd)
    check(records_after(s2) == [], "read-only use of a shared mapping")


def libc_mmap(fd, size):
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_SHARED, fd, 0)
    check(addr not in (None, ctypes.c_void_p(-1).value), "mmap failed")
    return addr


def file_of_x(name):
    """A file of 8 KiB; its CREATE written out (a STORE right after would
    fold into it: setattrs_fold), the last sequence number."""
    with open(f"{W}/{name}", "wb") as f:
        f.write(b"x" * 8192)
    os.sync()
    return last_seq()


# What the kernel does to a shared mapping's file without a write fault
# that presto sees, each logged as the same call on presto's file is.

@case
def madv_remove_logs_store(s0):
    s1 = file_of_x("f")
    fd = os.open(f"{W}/f", os.O_RDWR)
    m = mmap.mmap(fd, 8192)
    m.madvise(mmap.MADV_REMOVE, 0, 4096)
    m.close()
    os.close(fd)
    recs = records_after(s1)
    check(ops(recs) == ["STORE"], ops(recs))
    with open(f"{LW}/f", "rb") as f:
        check(f.read() == b"\0" * 4096 + b"x" * 4096, "the hole")


@case
def remapped_pages_written_log_store(s0):
    s1 = file_of_x("f")
    fd = os.open(f"{W}/f", os.O_RDWR)
    addr = libc_mmap(fd, 8192)
    # remap_file_pages(addr, 8192, 0, 0, 0): the whole vma mapped anew.
    r = libc.syscall(216, ctypes.c_void_p(addr), ctypes.c_size_t(8192),
                     0, ctypes.c_size_t(0), 0)
    check(r == 0, "remap_file_pages: errno %d" % ctypes.get_errno())
    ctypes.memmove(addr, b"remap", 5)
    libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(8192))
    os.close(fd)
    recs = records_after(s1)
    check(ops(recs) == ["STORE"], ops(recs))
    with open(f"{LW}/f", "rb") as f:
        check(f.read(5) == b"remap", "written through the remapped pages")


@case
def msync_logs_store_at_once(s0):
    s1 = file_of_x("f")
    fd = os.open(f"{W}/f", os.O_RDWR)
    m = mmap.mmap(fd, 8192)
    m[0:5] = b"msync"
    m.flush()
    recs = records_after(s1)
    m.close()
    os.close(fd)
    check(ops(recs) == ["STORE"], ops(recs))


@case
def unlinked_open_file_logs_no_store(s0):
    fd = os.open(f"{W}/f", os.O_CREAT | os.O_WRONLY, 0o644)
    os.unlink(f"{W}/f")
    os.write(fd, b"gone")
    os.fsync(fd)
    os.close(fd)
    check(ops(records_after(s0)) == ["CREATE", "UNLINK"],
          ops(records_after(s0)))


@case
def failed_changes_log_nothing(s0):
    os.mkdir(f"{W}/d")
    with open(f"{W}/d/f", "w"):
        pass
    os.chmod(W, 0o777)
    s1 = last_seq()
    for fn, args in ((os.mkdir, (f"{W}/d",)), (os.unlink, (f"{W}/nope",)),
                     (os.rmdir, (f"{W}/d",)),
                     (os.rename, (f"{W}/nope", f"{W}/x")),
                     (os.removexattr, (f"{W}/d/f", "user.none"))):
        try:
            fn(*args)
        except OSError:
            continue
        raise AssertionError(f"{fn.__name__}{args} succeeded")
    pid = os.fork()
    if pid == 0:   # a user who may not change root's file
        try:
            os.setresgid(1000, 1000, 1000)
            os.setresuid(1000, 1000, 1000)
            for fn, args in ((os.chmod, (f"{W}/d/f", 0o777)),
                             (os.unlink, (f"{W}/d/f",))):
                try:
                    fn(*args)
                    os._exit(1)
                except PermissionError:
                    pass
            os._exit(0)
        except BaseException:
            os._exit(2)
    check(os.waitpid(pid, 0)[1] == 0, "the user was refused")
    check(records_after(s1) == [], records_after(s1))


@case
def records_carry_the_callers_ids(s0):
    os.chmod(W, 0o777)
    s1 = last_seq()         # the chmod folds into W's MKDIR (setattrs_fold)
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(1234, 1234, 1234)
            os.setresuid(1000, 1000, 1000)
            with open(f"{W}/mine", "w") as f:
                f.write("x")
            os._exit(0)
        except BaseException:
            os._exit(1)
    check(os.waitpid(pid, 0)[1] == 0, "child")
    recs = records_after(s1)
    check(ops(recs) == ["CREATE"] and recs[0]["flags"] == ["STORED"], recs)
    for r in recs:
        check(r["uid"] == 1000 and r["gid"] == 1234, r)
    check(recs[0]["attr"]["uid"] == 1000, recs[0])


def as_user(fn, uid=1000, gid=1000, groups=(2001, 2002)):
    """Run fn() in a child with fsuid @uid, fsgid @gid and supplementary
    @groups; check that it succeeded."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups(list(groups))
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            fn()
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    check(os.waitpid(pid, 0)[1] == 0, f"{fn.__name__} as {uid}")


def shared_dir():
    """W/shared: root's, group 2001's to write (mode 0775)."""
    os.mkdir(f"{W}/shared")
    os.chown(f"{W}/shared", 0, 2001)
    os.chmod(f"{W}/shared", 0o775)
    return f"{W}/shared"


def by(r, uid, gid, groups, flags=None):
    """Does record @r carry these ids and groups (and flags)?"""
    return (r["uid"], r["gid"], r["groups"]) == (uid, gid, list(groups)) \
        and (flags is None or r["flags"] == flags)


@case
def records_carry_the_callers_groups(s0):
    d = shared_dir()
    s1 = last_seq()

    def user():
        fd = os.open(f"{d}/f", os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"through group 2001")
        os.close(fd)
        os.mkdir(f"{d}/sub")
        os.rename(f"{d}/f", f"{d}/g")
        os.chmod(f"{d}/g", 0o664)
        os.setxattr(f"{d}/g", "user.a", b"1")
    as_user(user)
    recs = records_after(s1)
    check(ops(recs) == ["CREATE", "MKDIR", "RENAME", "SETATTR",
                        "SETXATTR"], ops(recs))
    check(by(recs[0], 1000, 1000, [2001, 2002], ["STORED"]), recs[0])
    for r in recs[1:]:
        check(by(r, 1000, 1000, [2001, 2002], []), r)
    # Root's records carry none, even with supplementary groups (its
    # chown and chmod of the new directory are in the MKDIR).
    roots = [r for r in records_after(s0) if r["seq"] <= s1]
    check(ops(roots) == ["MKDIR"], ops(roots))
    check((roots[0]["attr"]["gid"], roots[0]["attr"]["mode"]) ==
          (2001, 0o40775), roots[0])
    s2 = last_seq()
    as_user(lambda: os.mkdir(f"{d}/root"), uid=0, gid=0)
    recs = records_after(s2)
    check(ops(recs) == ["MKDIR"], ops(recs))
    for r in roots + recs:
        check(by(r, 0, 0, []), r)


def written_by_user(path, data):
    """@path made and written with @data by the user (as_user's), its
    file still open for writing and handed to root: the descriptor."""
    a, b = socket.socketpair()

    def user_opens_and_writes():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, data)
        socket.send_fds(a, [b"f"], [fd])
        os.close(fd)
    as_user(user_opens_and_writes)
    _, (fd,), _, _ = socket.recv_fds(b, 1, 1)
    a.close()
    b.close()
    return fd


@case
def setattrs_fold(s0):
    """Attribute changes right after a change of the same object by the
    same caller, its record not yet written, go into that record: a new
    file's times, owner and mode (as tar sets them) into its CREATE, as
    the STORE at its close does, and a run of SETATTRs into one carrying
    all they changed. Not a new size
    into a CREATE (a new object is made empty), nor another caller's
    change, nor one after a record about something else."""
    fd = os.open(f"{W}/f", os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"content")
    os.utime(fd, ns=(1_000_000_000, 2_000_000_000))
    os.fchown(fd, 1000, 1000)
    os.fchmod(fd, 0o664)
    os.close(fd)
    recs = records_after(s0)
    check(ops(recs) == ["CREATE"] and recs[0]["flags"] == ["STORED"], recs)
    a = recs[0]["attr"]
    check(a["size"] == 7, a)
    check((a["uid"], a["gid"], a["mode"]) == (1000, 1000, 0o100664), a)
    check((a["atime_ns"], a["mtime_ns"]) == (1_000_000_000, 2_000_000_000),
          a)
    s1 = last_seq()
    os.chmod(f"{W}/f", 0o644)
    os.chown(f"{W}/f", 1000, 2001)
    recs = records_after(s1)
    check(ops(recs) == ["SETATTR"], ops(recs))
    a = recs[0]["attr"]
    check((a["mode"], a["uid"], a["gid"]) == (0o100644, 1000, 2001), a)
    check("size" not in a and "mtime_ns" not in a, a)
    s2 = last_seq()
    fd = os.open(f"{W}/g", os.O_CREAT | os.O_WRONLY, 0o600)
    os.ftruncate(fd, 5)
    os.close(fd)
    os.chmod(f"{W}/g", 0o640)
    os.chmod(f"{W}/f", 0o600)

    def user():
        os.chmod(f"{W}/f", 0o640)
    as_user(user)
    recs = records_after(s2)
    check(ops(recs) == ["CREATE", "SETATTR", "SETATTR", "SETATTR"],
          ops(recs))
    a = recs[1]["attr"]
    check(is_fh(recs[1]["obj"], f"{LW}/g") and a["size"] == 5 and
          a["mode"] == 0o100640, recs[1])
    check(all(is_fh(r["obj"], f"{LW}/f") for r in recs[2:]), recs[2:])
    check(recs[2]["uid"] == 0 and recs[2]["attr"]["mode"] == 0o100600,
          recs[2])
    check(recs[3]["uid"] == 1000 and recs[3]["attr"]["mode"] == 0o100640,
          recs[3])


@case
def store_carries_the_openers_creds(s0):
    """A STORE is the opener's, whoever writes and whoever closes."""
    d = shared_dir()
    s1 = last_seq()
    fd = written_by_user(f"{d}/f", b"x")
    os.write(fd, b"y")
    check(ops(records_after(s1)) == ["CREATE"], "no STORE before the close")
    os.close(fd)        # root closes the last copy: the STORE is logged
    recs = records_after(s1)
    check(ops(recs) == ["CREATE", "STORE"], ops(recs))
    for r in recs:
        check(by(r, 1000, 1000, [2001, 2002], []), r)
    check(recs[1]["attr"]["size"] == 2, recs[1])
    # The other way round: root opens, the user writes through the file
    # it inherited and closes it after root closed its copy.
    s2 = last_seq()
    fd = os.open(f"{d}/f", os.O_WRONLY)
    r_end, w_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w_end)
            os.setgroups([2001, 2002])
            os.setresgid(1000, 1000, 1000)
            os.setresuid(1000, 1000, 1000)
            os.read(r_end, 1)           # root has closed its copy
            os.write(fd, b"zzz")
            os.close(fd)
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    os.close(fd)
    os.close(r_end)
    os.write(w_end, b"!")
    os.close(w_end)
    check(os.waitpid(pid, 0)[1] == 0, "the user wrote and closed")
    recs = records_after(s2)
    check(ops(recs) == ["STORE"], ops(recs))
    check(by(recs[0], 0, 0, [], []), recs[0])


@case
def readers_fsync_logs_the_writers_store(s0):
    """fsync through a file open only for reading (coreutils' sync FILE)
    logs the STORE a writer owes as the writer's: the reader, who may
    not write the file, made none of it."""
    d = shared_dir()
    s1 = last_seq()
    fd = written_by_user(f"{d}/f", b"written")      # root keeps it open

    def reader_syncs():
        r = os.open(f"{d}/f", os.O_RDONLY)
        os.fsync(r)
        os.close(r)
    as_user(reader_syncs, uid=1001, gid=1001, groups=())
    recs = records_after(s1)
    # The writer's CREATE, still queued, takes the STORE (KML.md).
    check(ops(recs) == ["CREATE"], ops(recs))
    check(by(recs[0], 1000, 1000, [2001, 2002], ["STORED"]), recs[0])
    check(recs[0]["attr"]["size"] == 7, recs[0])
    os.close(fd)        # nothing written since: no second STORE
    check(ops(records_after(s1)) == ["CREATE"], ops(records_after(s1)))


@case
def tmpfile_xattrs_carry_the_callers_creds(s0):
    """An O_TMPFILE's xattrs are read under presto's own creds when it is
    linked in; their records are still the caller's."""
    d = shared_dir()
    s1 = last_seq()

    def user():
        fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)
        os.write(fd, b"hello")
        os.setxattr(fd, "user.t", b"v")
        root = os.open("/", os.O_RDONLY)      # linkat(), which follows
        os.link(f"/proc/self/fd/{fd}", f"{d}/t", src_dir_fd=root)
        os.close(root)
        os.close(fd)
    as_user(user)
    recs = records_after(s1)
    check(ops(recs)[0] == "CREATE" and ops(recs)[-1] == "STORE", ops(recs))
    check(any(r["op"] == "SETXATTR" and r["name"] == "user.t"
              for r in recs), ops(recs))
    for r in recs:
        check(by(r, 1000, 1000, [2001, 2002]), r)


@case
def more_than_256_groups_are_cut(s0):
    d = shared_dir()
    many = [2001] + list(range(3000, 3299))      # 300, sorted
    s1 = last_seq()
    as_user(lambda: os.mkdir(f"{d}/cut"), groups=many)
    as_user(lambda: os.mkdir(f"{d}/all"), groups=many[:256])
    recs = records_after(s1)
    check(ops(recs) == ["MKDIR", "MKDIR"], ops(recs))
    check(by(recs[0], 1000, 1000, many[:256], ["GROUPS_CUT"]), recs[0])
    check(by(recs[1], 1000, 1000, many[:256], []), recs[1])
    # A record of 256 groups is 1 KiB longer: the log reads on past it.
    s2 = last_seq()
    os.mkdir(f"{W}/after")
    check(ops(records_after(s2)) == ["MKDIR"], "the record after")


@case
def concurrent_changes_log_in_the_order_they_took_effect(s0):
    """Threads create, rename and unlink in one directory; replaying the
    records in order must give exactly the directory's final contents."""
    def worker(k):
        for i in range(150):
            a, b = f"{W}/t{k}-{i}", f"{W}/shared{i % 7}"
            with open(a, "w"):
                pass
            os.rename(a, b)              # racing renames over shared names
            if i % 3 == 0:
                try:
                    os.unlink(f"{W}/shared{(i + k) % 7}")
                except FileNotFoundError:
                    pass
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = {}
    for r in records_after(s0):
        if r["op"] == "CREATE":
            check(r["name"] not in names, f"CREATE over a name: {r}")
            names[r["name"]] = r["obj"]["ino"]
        elif r["op"] == "RENAME":
            check(names.get(r["name"]) == r["obj"]["ino"], f"rename of {r}")
            target = names.get(r["name2"])
            check(target == r.get("target", {}).get("ino"), f"target {r}")
            names[r["name2"]] = names.pop(r["name"])
        elif r["op"] == "UNLINK":
            check(names.pop(r["name"], None) == r["obj"]["ino"], f"{r}")
    actual = {n: os.lstat(f"{LW}/{n}").st_ino for n in os.listdir(LW)}
    check(names == actual, (names, actual))


def newest_segment():
    d = os.path.join(CACHE, ".presto")
    names = sorted(n for n in os.listdir(d) if n.startswith("kml."))
    return os.path.join(d, names[-1])


@case
def readers_skip_the_zeroed_spare(s0):
    """Past half a segment presto keeps a spare, zeroed whole ahead of use
    (its header block too): kmlcat --strict reads the log past it."""
    made = 0
    for _ in range(60):
        for i in range(500):
            os.close(os.open(f"{W}/s{i}", os.O_CREAT | os.O_WRONLY, 0o644))
            os.unlink(f"{W}/s{i}")
        made += 500
        os.sync()
        with open(newest_segment(), "rb") as f:
            head = f.read(4096)
        if len(head) == 4096 and not any(head):
            break
    check(len(head) == 4096 and not any(head),
          f"no zeroed spare after {made} files")
    recs = records_after(s0)
    check(ops(recs) == ["CREATE", "UNLINK"] * made, (len(recs), made))


@case
def state_and_acknowledgement(s0):
    with open(f"{W}/f", "w") as f:
        f.write("x")
    os.sync()
    st = state()
    check(st["error"] == 0 and st["limit_bytes"] > 0, st)
    check(st["durable_seq"] == st["next_seq"] - 1, st)
    check(st["pending_records"] == st["next_seq"] - 1 - st["acked_seq"], st)
    try:   # beyond what is durable: refused
        kmltest.ack(MNT, st["durable_seq"] + 10)
        raise AssertionError("ack past durable_seq accepted")
    except OSError as e:
        check(e.errno == 22, e)
    kmltest.ack(MNT, st["durable_seq"])
    st2 = state()
    check(st2["acked_seq"] == st["durable_seq"] and
          st2["pending_records"] == 0 and st2["oldest_ns"] == 0, st2)
    with open("/proc/self/mountstats") as f:
        text = f.read()
    check(f"acked_seq {st['durable_seq']}" in text, "mountstats")


sys.exit(case.finish())
