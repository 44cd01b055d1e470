#!/usr/bin/env python3
"""kml_replay.py's recovery blocks, tested without presto.

    tests/integration/kml_replay_selftest.py [--keep] [CASE...]

Each case makes a small cache tree, snapshots it with kml_replay.py,
changes the cache as a crash would leave it, and writes the log presto
would then hold: the records that were durable, and a recovery block
(KML.md, "Recovery records") made from the cache's real state by the KML
writer here. Replayed onto the snapshot, the log must give the cache
(tests/bin/treecmp), or, when the log is not faithful, the replay must say
so. Runs on the host as root, in a directory on a file system that has
inode generations (ext4): build/ of the repository, else $TMPDIR; without
one it skips. --keep keeps the cases' trees. Ends with "N passed, N
failed".
"""
import fcntl
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
REPLAY = os.path.join(TOP, "tests", "integration", "kml_replay.py")
KMLCAT = os.path.join(TOP, "tools", "bin", "kmlcat")
TREECMP = os.path.join(TOP, "tests", "bin", "treecmp")

FS_IOC_GETVERSION = 0x80087601

# protocol/presto_kml.h
OPS = dict((name, i) for i, name in enumerate(
    "CREATE MKDIR MKNOD SYMLINK LINK UNLINK RMDIR RENAME SETATTR SETXATTR "
    "REMOVEXATTR STORE RESYNC RESYNC_DIR DIRENT".split(), 1))
RECOVERED = 0x20
ATTRS = ("mode", "uid", "gid", "size", "atime_ns", "mtime_ns", "ctime_ns",
         "rdev", "nlink")              # in the order of their valid bits
SEG_HDR = struct.Struct("<8sIIQQQI")    # the header up to its crc
REC_HDR = struct.Struct("<IIQHHHHIIIIq")
FH = struct.Struct("<QII")
ATTR = struct.Struct("<IIIIQqqqII")


def crc32c(data):
    """CRC-32C from ~0, not inverted at the end (KML.md)."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xff] ^ (crc >> 8)
    return crc


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def generation(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return struct.unpack("<I", fcntl.ioctl(fd, FS_IOC_GETVERSION,
                                               bytes(8))[:4])[0]
    finally:
        os.close(fd)


def handle(path):
    """An object's lower handle. Only files and directories can be opened
    for their generation; the others get 0, which the replay accepts, as
    its snapshot map knows no generation of them either."""
    st = os.lstat(path)
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return st.st_ino, generation(path)
    return st.st_ino, 0


def encode_dev(dev):
    """Linux's new_encode_dev()."""
    major, minor = os.major(dev), os.minor(dev)
    return (minor & 0xff) | (major << 8) | ((minor & ~0xff) << 12)


def acl(*entries):
    """A POSIX ACL as its system.posix_acl_* value: (tag, perm, id)."""
    return struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, 0xffffffff if uid is None else uid)
        for tag, perm, uid in entries)


# user::rw- user:1000:rwx group::r-- mask::rwx other::r--
ACL = acl((0x01, 6, None), (0x02, 7, 1000), (0x04, 4, None),
          (0x10, 7, None), (0x20, 4, None))


def attrs(path, keys=ATTRS):
    st = os.lstat(path)
    all_ = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid,
            "size": st.st_size, "atime_ns": st.st_atime_ns,
            "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "rdev": encode_dev(st.st_rdev), "nlink": st.st_nlink}
    return {k: all_[k] for k in keys}


class Log:
    """A cache's log, written as presto writes it: segments of records."""

    def __init__(self, cache):
        self.dir = os.path.join(cache, b".presto")
        os.makedirs(self.dir, exist_ok=True)
        self.seq = 0
        self.segno = 0
        self.pending = []

    def rec(self, op, flags=0, dir=None, obj=None, newdir=None, target=None,
            name=b"", name2=b"", data=b"", attr=None):
        attr = attr or {}
        self.seq += 1
        body = name + name2 + data
        length = (REC_HDR.size + 4 * FH.size + ATTR.size + len(body) + 7) \
            & ~7
        valid = sum(1 << i for i, k in enumerate(ATTRS) if k in attr)
        rec = REC_HDR.pack(length, 0, self.seq, OPS[op], flags, len(name),
                           len(name2), len(data), 0, 0, 0, time.time_ns())
        for fh in (dir, obj, newdir, target):
            rec += FH.pack(*(fh or (0, 0)), 0)
        rec += ATTR.pack(valid, *(attr.get(k, 0) for k in ATTRS))
        rec = bytearray((rec + body).ljust(length, b"\0"))
        rec[4:8] = struct.pack("<I", crc32c(rec))
        self.pending.append(bytes(rec))

    def segment(self):
        """The records so far, as one segment: what one mount wrote."""
        self.segno += 1
        first = self.seq - len(self.pending) + 1
        hdr = SEG_HDR.pack(b"PRESTKML", 1, 4096, self.segno, first, 4 << 20,
                           0)
        hdr += struct.pack("<I", crc32c(hdr))
        with open(os.path.join(self.dir, b"kml.%08d" % self.segno),
                  "wb") as f:
            f.write(hdr.ljust(4096, b"\0") + b"".join(self.pending))
        self.pending = []

    # What presto logs for a change, read from the cache after it.

    def change(self, op, path, dirpath=None, **kw):
        if dirpath:
            kw["name"] = os.path.basename(path)
        self.rec(op, dir=dirpath and handle(dirpath), obj=handle(path), **kw)

    # What recovery logs at mount, all with RECOVERED.

    def restate(self, path):
        """An object: RESYNC, a SETXATTR per xattr, a STORE for a file."""
        names = [n for n in (os.fsencode(x) for x in
                             os.listxattr(path, follow_symlinks=False))
                 if not n.startswith(b"trusted.presto.")]
        h = handle(path)
        self.rec("RESYNC", RECOVERED, obj=h, attr=attrs(path),
                 data=b"".join(n + b"\0" for n in names))
        for n in names:
            self.rec("SETXATTR", RECOVERED, obj=h, name=n,
                     data=os.getxattr(path, n, follow_symlinks=False),
                     attr=attrs(path, ("mode", "ctime_ns")))
        if stat.S_ISREG(os.lstat(path).st_mode):
            self.rec("STORE", RECOVERED, obj=h, attr=attrs(
                path, ("size", "mtime_ns", "ctime_ns", "mode")))

    def listing(self, path, cut=None):
        """A directory's RESYNC_DIR and DIRENTs; only cut of them when the
        log is cut in the middle."""
        names = sorted(n for n in os.listdir(path)
                       if os.path.join(path, n) != self.dir)
        self.rec("RESYNC_DIR", RECOVERED, obj=handle(path),
                 data=struct.pack("<Q", len(names)))
        for n in names[:cut]:
            p = os.path.join(path, n)
            self.rec("DIRENT", RECOVERED, dir=handle(path), obj=handle(p),
                     name=n, attr=attrs(p, ("mode", "rdev")),
                     data=os.readlink(p) if os.path.islink(p) else b"")
        return names

    def recover(self, path, entries=True):
        """A marked directory: itself, its listing, its entries."""
        self.restate(path)
        names = self.listing(path)
        if entries:
            for n in names:
                self.restate(os.path.join(path, n))


class Case:
    def __init__(self, ws, name):
        self.dir = os.path.join(os.fsencode(ws), name.encode())
        self.cache = os.path.join(self.dir, b"cache")
        self.snap = os.path.join(self.dir, b"snap")
        os.makedirs(self.cache)
        self.log = Log(self.cache)
        self.output = ""
        self.note = None                # for the "ok" line

    def p(self, rel):
        return os.path.join(self.cache, rel.encode()) if rel else self.cache

    def run(self, *args):
        proc = subprocess.run(args, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              errors="replace")
        self.output += "$ %s\n%s" % (" ".join(os.fsdecode(a) for a in args),
                                     proc.stdout)
        return proc.returncode

    def populate(self):
        """The tree every case starts from."""
        p = self.p
        for d in ("a", "a/sub", "a/sub/deep", "b", "c"):
            os.mkdir(p(d))
        for f, content in (("a/f", "f\n"), ("a/sub/h", "h\n" * 1000),
                           ("a/sub/deep/g", "g\n"), ("b/k", "k\n"),
                           ("top", "top\n")):
            with open(p(f), "w") as fh:
                fh.write(content)
        os.link(p("a/sub/deep/g"), p("b/glink"))
        os.setxattr(p("a/f"), b"user.x", b"1")
        os.setxattr(p("a/f"), b"user.gone", b"z")
        os.setxattr(p("a/sub"), b"trusted.t", b"dir")
        os.symlink(b"../a/f", p("c/l"))
        os.mkfifo(p("c/fifo"), 0o640)
        os.mknod(p("c/null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chown(p("b/k"), 1000, 1000)
        os.setxattr(p("top"), b"system.posix_acl_access", ACL)

    def snapshot(self):
        if self.run(sys.executable, REPLAY, "snapshot", self.cache,
                    self.snap):
            raise AssertionError("snapshot failed")

    def replay(self):
        self.log.segment()
        return self.run(sys.executable, REPLAY, "replay", self.snap,
                        self.cache)

    def compare(self):
        return self.run(TREECMP, "--ignore", ".presto", self.cache,
                        self.snap)

    def expect_equal(self):
        if self.replay():
            raise AssertionError("the replay failed")
        if self.compare():
            raise AssertionError("the replayed snapshot differs from the "
                                 "cache")

    def expect_refused(self, words):
        if not self.replay():
            raise AssertionError("the replay did not fail")
        if words not in self.output:
            raise AssertionError("the replay did not say %r" % words)


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def write(path, data):
    with open(path, "w") as f:
        f.write(data)


@case
def create_lost(c):
    """A new file, its CREATE and STORE lost: the listing makes it."""
    write(c.p("a/new"), "new content\n")
    os.chmod(c.p("a/new"), 0o4750)
    os.chown(c.p("a/new"), 1000, 1001)
    os.setxattr(c.p("a/new"), b"user.n", b"v")
    os.utime(c.p("a/new"), ns=(1, 2_000_000_000))
    c.log.recover(c.p("a"))
    c.expect_equal()


@case
def every_type_lost(c):
    """A directory with a file in it, a symlink, a fifo, a device, a
    socket: all made from their DIRENTs."""
    os.mkdir(c.p("a/d2"), 0o3755)
    write(c.p("a/d2/inner"), "inner\n")
    os.symlink(b"d2/inner", c.p("a/sym"))
    os.lchown(c.p("a/sym"), 1000, 1000)
    os.mkfifo(c.p("a/fifo2"), 0o600)
    os.mknod(c.p("a/zero"), 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    os.mknod(c.p("a/blk"), 0o600 | stat.S_IFBLK, os.makedev(259, 300))
    os.mknod(c.p("a/sock"), 0o755 | stat.S_IFSOCK)
    c.log.recover(c.p("a"))
    c.log.recover(c.p("a/d2"))
    c.expect_equal()


def rename_across(c, order):
    os.rename(c.p("a/f"), c.p("b/f2"))
    os.rename(c.p("a/sub"), c.p("b/sub2"))
    os.rename(c.p("b/k"), c.p("a/k"))
    for d in order:
        c.log.recover(c.p(d))
    c.expect_equal()


@case
def rename_across_a_then_b(c):
    """Files and a directory renamed between two marked directories, the
    source listed first."""
    rename_across(c, ("a", "b"))


@case
def rename_across_b_then_a(c):
    """The same, the destination listed first."""
    rename_across(c, ("b", "a"))


@case
def rename_within(c):
    """Two names swapped in one directory, one renamed over another."""
    os.rename(c.p("a/f"), c.p("a/tmp"))
    os.rename(c.p("a/sub"), c.p("a/f"))
    os.rename(c.p("a/tmp"), c.p("a/sub"))
    os.rename(c.p("c/fifo"), c.p("c/null"))
    c.log.recover(c.p("a"))
    c.log.recover(c.p("c"))
    c.expect_equal()


@case
def subtree_removed(c):
    """A directory tree removed (one of its files has a name elsewhere
    too, whose link count drops): limbo takes it and empties."""
    shutil.rmtree(c.p("a/sub"))
    c.log.recover(c.p("a"))
    c.log.restate(c.p("b/glink"))
    c.expect_equal()


@case
def dir_moved_into_new_dir(c):
    """mkdir n; mv a/sub n/: the root's listing makes n, a's takes sub
    away, n's brings it back from limbo."""
    os.mkdir(c.p("n"))
    os.rename(c.p("a/sub"), c.p("n/sub"))
    for d in ("", "a", "n"):
        c.log.recover(c.p(d))
    c.expect_equal()


@case
def hard_link_added(c):
    """A hard link made in another directory; its RESYNC says nlink 2."""
    os.link(c.p("a/f"), c.p("b/f-link"))
    os.link(c.p("c/fifo"), c.p("b/fifo-link"))
    c.log.recover(c.p("b"))
    c.expect_equal()


@case
def xattrs_and_attrs_changed(c):
    """xattrs changed, removed, added; owner, mode and times changed."""
    f = c.p("a/f")
    os.setxattr(f, b"user.x", b"2")
    os.removexattr(f, b"user.gone")
    os.setxattr(f, b"trusted.new", b"\0binary\xff")
    os.chown(f, 1002, 1003)
    os.chmod(f, 0o600)
    os.utime(f, ns=(5, 6))
    os.removexattr(c.p("a/sub"), b"trusted.t")
    os.setxattr(c.p("a/sub"), b"user.d", b"")
    os.setxattr(c.p("c/l"), b"trusted.l", b"link", follow_symlinks=False)
    with open(c.p("b/k"), "a") as fh:
        fh.write("more\n")
    os.truncate(c.p("a/sub/h"), 10)
    os.removexattr(c.p("top"), b"system.posix_acl_access")
    os.chmod(c.p("top"), 0o640)
    os.setxattr(c.p("a/sub/h"), b"system.posix_acl_access", ACL)
    for rel in ("a/f", "a/sub", "c/l", "b/k", "a/sub/h", "top"):
        c.log.restate(c.p(rel))
    c.expect_equal()


@case
def default_acl_inherited(c):
    """A directory given a default ACL, then a file and a hard link to it
    made in it, all records lost: the file's RESYNC lists what it
    inherited, though the replay made it before the ACL was restated."""
    os.setxattr(c.p("b"), b"system.posix_acl_default", ACL)
    write(c.p("b/inherits"), "acl\n")
    os.link(c.p("b/inherits"), c.p("b/inherits2"))
    c.log.recover(c.p("b"))
    c.expect_equal()


@case
def file_restated_before_its_listing(c):
    """A file marked for a chmod is restated before the listing of its
    directory, which makes it."""
    write(c.p("a/late"), "late\n")
    os.chmod(c.p("a/late"), 0o751)
    c.log.restate(c.p("a/late"))
    c.log.recover(c.p("a"), entries=False)
    c.expect_equal()


@case
def void_listing_at_the_end(c):
    """A listing cut after one of its entries is ignored: applied, it would
    take away a/sub."""
    c.log.restate(c.p("a"))
    c.log.listing(c.p("a"), cut=1)
    c.expect_equal()
    if "1 void listings" not in c.output:
        raise AssertionError("the void listing was not counted")


@case
def void_listing_then_next_mount(c):
    """The log cut in the middle of a listing, and the next mount's whole
    block after it."""
    write(c.p("a/new"), "new\n")
    os.unlink(c.p("a/f"))
    c.log.restate(c.p("a"))
    c.log.listing(c.p("a"), cut=1)
    c.log.segment()
    c.log.recover(c.p("a"))
    c.expect_equal()


@case
def inode_reused_in_place(c):
    """A file removed and another made in its directory, most likely on
    the freed inode number with a new generation."""
    ino = os.lstat(c.p("a/sub/h")).st_ino
    os.unlink(c.p("a/sub/h"))
    write(c.p("a/sub/h2"), "reused?\n")
    c.note = "inode number %sreused" % (
        "" if os.lstat(c.p("a/sub/h2")).st_ino == ino else "not ")
    c.log.recover(c.p("a/sub"))
    c.expect_equal()


@case
def inode_reused_elsewhere(c):
    """a/sub removed with its tree, and its inode number taken by a new,
    empty directory b/nd, listed first: the replay must not take nd for
    sub (and bring sub's tree along), yet keep sub until a's listing
    removes it. ext4 does not reuse a number on demand, so the log says it
    did; nothing needs nd's real handle."""
    old = handle(c.p("a/sub"))
    shutil.rmtree(c.p("a/sub"))
    os.mkdir(c.p("b/nd"), 0o710)
    new = (old[0], old[1] ^ 1)
    b = handle(c.p("b"))
    names = sorted(os.listdir(c.p("b")))
    c.log.rec("RESYNC_DIR", RECOVERED, obj=b,
              data=struct.pack("<Q", len(names)))
    for n in names:
        p = os.path.join(c.p("b"), n)
        c.log.rec("DIRENT", RECOVERED, dir=b, name=n,
                  obj=new if n == b"nd" else handle(p),
                  attr=attrs(p, ("mode", "rdev")))
    c.log.rec("RESYNC", RECOVERED, obj=new, attr=attrs(c.p("b/nd")))
    c.log.recover(c.p("a"))
    c.expect_equal()


@case
def changes_around_a_block(c):
    """Records logged before the crash, a block, and changes after the
    mount that use what the block made."""
    write(c.p("a/pre"), "pre\n")
    c.log.change("CREATE", c.p("a/pre"), c.p("a"), attr=attrs(c.p("a/pre")))
    c.log.change("STORE", c.p("a/pre"), attr=attrs(
        c.p("a/pre"), ("size", "mtime_ns", "ctime_ns", "mode")))
    c.log.segment()
    os.mkdir(c.p("a/lostdir"))
    write(c.p("a/lostdir/lost"), "lost\n")
    c.log.recover(c.p("a"))
    c.log.recover(c.p("a/lostdir"))
    c.log.segment()
    os.rename(c.p("a/lostdir/lost"), c.p("b/renamed"))
    c.log.rec("RENAME", dir=handle(c.p("a/lostdir")),
              obj=handle(c.p("b/renamed")), newdir=handle(c.p("b")),
              name=b"lost", name2=b"renamed",
              attr=attrs(c.p("b/renamed"), ("ctime_ns",)))
    os.mkdir(c.p("a/lostdir/after"))
    c.log.change("MKDIR", c.p("a/lostdir/after"), c.p("a/lostdir"),
                 attr=attrs(c.p("a/lostdir/after")))
    c.expect_equal()


@case
def every_change(c):
    """No recovery: one record of each change, as the replay always
    applied them."""
    p, log = c.p, c.log
    os.mkdir(p("d"))
    log.change("MKDIR", p("d"), p(""), attr=attrs(p("d")))
    write(p("d/f"), "data\n")
    log.change("CREATE", p("d/f"), p("d"), attr=attrs(p("d/f")))
    log.change("STORE", p("d/f"), attr=attrs(
        p("d/f"), ("size", "mtime_ns", "ctime_ns", "mode")))
    os.mkfifo(p("d/fifo"), 0o600)
    log.change("MKNOD", p("d/fifo"), p("d"), attr=attrs(p("d/fifo")))
    os.symlink(b"f", p("d/s"))
    log.change("SYMLINK", p("d/s"), p("d"), attr=attrs(p("d/s")),
               data=b"f")
    os.link(p("d/f"), p("d/f2"))
    log.change("LINK", p("d/f2"), p("d"),
               attr=attrs(p("d/f2"), ("nlink", "ctime_ns")))
    os.chmod(p("d/f"), 0o600)
    log.change("SETATTR", p("d/f"), attr=attrs(p("d/f"),
                                                ("mode", "ctime_ns")))
    os.setxattr(p("d/f"), b"user.a", b"1")
    log.change("SETXATTR", p("d/f"), name=b"user.a", data=b"1",
               attr=attrs(p("d/f"), ("mode", "ctime_ns")))
    os.removexattr(p("a/f"), b"user.gone")
    log.change("REMOVEXATTR", p("a/f"), name=b"user.gone",
               attr=attrs(p("a/f"), ("mode", "ctime_ns")))
    f2 = handle(p("d/f2"))
    os.rename(p("d/f2"), p("b/f3"))
    log.rec("RENAME", dir=handle(p("d")), obj=f2, newdir=handle(p("b")),
            name=b"f2", name2=b"f3", attr=attrs(p("b/f3"), ("ctime_ns",)))
    for rel, op in (("c/fifo", "UNLINK"), ("a/sub/deep/g", "UNLINK"),
                    ("a/sub/deep", "RMDIR")):
        h, parent = handle(p(rel)), os.path.dirname(p(rel))
        (os.rmdir if op == "RMDIR" else os.unlink)(p(rel))
        log.rec(op, dir=handle(parent), obj=h,
                name=os.path.basename(p(rel)),
                attr={"nlink": 1 if rel == "a/sub/deep/g" else 0,
                      "ctime_ns": time.time_ns()})
    c.expect_equal()


@case
def listed_but_never_restated(c):
    """A listing makes an object no RESYNC follows: inconsistent."""
    write(c.p("a/new"), "")
    c.log.listing(c.p("a"))
    c.expect_refused("no RESYNC of it followed")


@case
def xattr_listed_without_value(c):
    """A RESYNC lists an xattr no SETXATTR gives: inconsistent."""
    f = c.p("a/f")
    c.log.rec("RESYNC", RECOVERED, obj=handle(f), attr=attrs(f),
              data=b"user.x\0user.gone\0")
    c.log.rec("SETXATTR", RECOVERED, obj=handle(f), name=b"user.x",
              data=b"1", attr=attrs(f, ("mode", "ctime_ns")))
    c.expect_refused("no SETXATTR gives its value")


@case
def link_count_disagrees(c):
    """A hard link made in a directory recovery did not list: the RESYNC's
    nlink says there is a name the replay does not know."""
    os.link(c.p("a/f"), c.p("b/hidden"))
    c.log.restate(c.p("a/f"))
    c.expect_refused("the replay knows 1 names")


@case
def dirent_outside_a_listing(c):
    """More DIRENTs than the listing's count: the replay stops."""
    names = c.log.listing(c.p("c"))
    p = os.path.join(c.p("c"), names[0])
    c.log.rec("DIRENT", RECOVERED, dir=handle(c.p("c")), obj=handle(p),
              name=b"again", attr=attrs(p, ("mode", "rdev")))
    c.expect_refused("DIRENT in a recovery block where no RESYNC or "
                     "listing has it")


@case
def dirent_without_recovered(c):
    """A DIRENT without RECOVERED: kmlcat --strict refuses the log."""
    c.log.rec("DIRENT", dir=handle(c.p("a")), obj=handle(c.p("a/f")),
              name=b"f", attr=attrs(c.p("a/f"), ("mode", "rdev")))
    c.expect_refused("recovery record without the RECOVERED flag")


def usable(ws):
    """Why ws cannot hold the cases, or None."""
    probe = os.path.join(ws, "probe")
    os.mkdir(probe)
    try:
        generation(probe)
        os.setxattr(probe, b"trusted.probe", b"1")
        os.mknod(os.path.join(probe, "n"), 0o600 | stat.S_IFCHR,
                 os.makedev(1, 3))
    except OSError as e:
        return "%s cannot hold the cases: %s" % (ws, e)
    finally:
        shutil.rmtree(probe)
    return None


def workspace():
    """A directory for the cases, or the reason there is none."""
    reasons = []
    for parent in (os.path.join(TOP, "build"), tempfile.gettempdir()):
        try:
            os.makedirs(parent, exist_ok=True)
            ws = tempfile.mkdtemp(prefix="kml-replay-selftest.", dir=parent)
        except OSError as e:
            reasons.append("%s: %s" % (parent, e))
            continue
        why = usable(ws)
        if why is None:
            return ws, None
        os.rmdir(ws)
        reasons.append(why)
    return None, "; ".join(reasons)


def main():
    args = sys.argv[1:]
    keep = "--keep" in args
    only = [a for a in args if a != "--keep"]
    if os.geteuid() != 0:
        print("skip - kml_replay_selftest needs root (chown, mknod, "
              "trusted.* xattrs)")
        print("0 passed, 0 failed")
        return 0
    for prog in (KMLCAT, TREECMP):
        if not os.access(prog, os.X_OK):
            print("not ok - %s is missing: make tools/bin/kmlcat "
                  "tests/bin/treecmp" % prog)
            print("0 passed, 1 failed")
            return 1
    ws, why = workspace()
    if ws is None:
        print("skip - kml_replay_selftest: " + why)
        print("0 passed, 0 failed")
        return 0
    passed = failed = 0
    os.umask(0)
    for fn in CASES:
        name = fn.__name__
        if only and name not in only:
            continue
        c = None
        try:
            c = Case(ws, name)
            c.populate()
            c.snapshot()
            fn(c)
            passed += 1
            print("ok - %s%s" % (name, " (%s)" % c.note if c.note else ""))
        except Exception:
            failed += 1
            print("not ok - %s" % name)
            out = traceback.format_exc() + (c.output if c else "")
            for line in out.splitlines():
                print("    " + line)
            keep = True
    if keep:
        print("the cases' trees are in %s" % ws)
    else:
        shutil.rmtree(ws)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
