#!/usr/bin/env python3
"""presto and lento, the write path (issue 7), end to end. Runs in the test
VM as root with presto loaded, SCRATCH on ext4:

    tests/integration/writepath.py SCRATCH [CASE...]

One lento server and two lento clients, A and B, each serving the volume
"vol" through a presto mount of its ext4 cache (the filesets "vol-a" and
"vol-b", as in readpath.py). Changes are made through the mounts: presto
journals them, lento consumes the journal into its CML and reintegrates.
Each case prints "ok - NAME" or "not ok - NAME"; the last line is
"N passed, N failed".

Alone in the VM (tests/integration/writepath-guest sets up the ext4):

    tools/vm --disk build/vm/wp.img:2G --fresh-disks \\
        tests/integration/writepath-guest [PRESTO_KO] [CASE...]
"""
import errno
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import signal
import sqlite3
import stat
import struct
import subprocess
import sys
import time
import traceback

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _load(name, path):
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


lr = _load("lento_run", os.path.join(TOP, "tests", "lento", "run"))
rp = _load("readpath", os.path.join(TOP, "tests", "integration",
                                    "readpath.py"))
Fail, check, wait_until = lr.Fail, lr.check, lr.wait_until
VOL = rp.VOL


def body(name, size):
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def xattrs(p):
    """@p's xattrs (ACLs too), presto's own left out (a lower's)."""
    return tuple(sorted((n, os.getxattr(p, n, follow_symlinks=False))
                        for n in os.listxattr(p, follow_symlinks=False)
                        if not n.startswith("trusted.presto.")))


def snapshot(root):
    """The tree under @root: path -> (kind, mode, content or target,
    xattrs), presto's .presto left out."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not (d == root and x == ".presto")]
        for n in dirs + files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if os.path.islink(p):
                what = ("l", None, os.readlink(p))
            elif os.path.isdir(p):
                what = ("d", st.st_mode & 0o7777, None)
            else:
                with open(p, "rb") as f:
                    what = ("f", st.st_mode & 0o7777, f.read())
            out[rel] = what + (xattrs(p),)
    return out


def acl(*entries):
    """A POSIX ACL as its xattr value: (tag, perm, id) entries."""
    return struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, i) for tag, perm, i in entries)


ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = \
    0x01, 0x02, 0x04, 0x10, 0x20
NOBODY = 0xffffffff


def reads_as(uid, path):
    """Can @uid read @path (its permission checked by the kernel)? The
    reason why not, or "" if it can."""
    r = subprocess.run(["setpriv", "--reuid", str(uid), "--regid",
                        str(uid), "--clear-groups", "cat", path],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       universal_newlines=True)
    return "" if r.returncode == 0 else r.stderr.strip() or "cannot"


def server_xattr(s, name):
    """The values of the xattr @name at the server, any object."""
    db = sqlite3.connect(os.path.join(s.srv.store, "meta.db"))
    try:
        return [r[0] for r in db.execute(
            "SELECT value FROM xattrs WHERE name = ?", (name.encode(),))]
    finally:
        db.close()


class Setup:
    def __init__(self, scratch):
        self.t = lr.Test("writepath", scratch)
        # TCG and ASan are slow: leases and heartbeats the guest keeps.
        self.srv = self.t.server(heartbeat_ms=3000, lease_ms=10000)
        self.srv.volume(VOL)
        self.more = []

    def kclient(self, name, extra=()):
        k = rp.Kclient(self.t.tmp, name, self.srv,
                       os.path.join(self.t.tmp, "mnt-" + name), extra)
        self.t.procs.append(k)
        self.more.append(k)
        return k.start()

    def finish(self):
        for k in self.more:
            k.umount()
        problems = self.t.finish()
        subprocess.run(["umount", "/mnt/wp-c"], check=False,
                       stderr=subprocess.DEVNULL)
        return problems


def journal(k):
    return k.fileset()["journal"]


def consumed(k, timeout=30, changed=True):
    """Every change made so far is durable in presto's journal (sync(2))
    and consumed into K's CML. @changed: there are changes since the
    last call, so the durable point must move."""
    before = journal(k)["durable"]
    os.sync()
    def ok():
        j = journal(k)
        return ((j["durable"] > before or not changed) and
                j["consumed"] >= j["durable"] and not j["error"] and j)
    return wait_until(ok, timeout, k.name + " consuming its journal")


def applied(k):
    return k.volstat(VOL)["applied"]


# ---------------------------------------------------------------- cases

def case_mount(s):
    """A and B register, mount, and confirm an epoch."""
    s.a = s.kclient("a")
    s.b = s.kclient("b")
    for k in (s.a, s.b):
        k.mount()
        k.ready()


def case_write_tree(s):
    """A tree written through A's mount (mkdir, create+write, rename,
    unlink, symlink, chmod, utime, xattr) reaches the server with
    lentoctl sync, and B reads it identical through its own mount."""
    m = s.a.mnt
    os.makedirs(os.path.join(m, "w/sub"))
    for i, size in enumerate((0, 100, 5000, 300000)):
        with open(os.path.join(m, "w/f%d" % i), "wb") as f:
            f.write(body("f%d" % i, size))
    os.rename(os.path.join(m, "w/f1"), os.path.join(m, "w/sub/moved"))
    os.unlink(os.path.join(m, "w/f0"))
    os.symlink("sub/moved", os.path.join(m, "w/link"))
    os.chmod(os.path.join(m, "w/f2"), 0o600)
    os.utime(os.path.join(m, "w/f3"), (1600000000, 1600000000))
    os.setxattr(os.path.join(m, "w/f2"), "user.color", b"blue")
    with open(os.path.join(m, "w/f2"), "ab") as f:
        f.write(b"appended")
    s.a.sync(timeout=120)
    j = journal(s.a)
    check(j["consumed"] >= j["durable"], "A synced with %s" % j)
    check(s.a.volstat(VOL)["pending_records"] == 0, "A: records pending")
    check(server_xattr(s, "user.color") == [b"blue"], "the xattr at the "
          "server: %s" % server_xattr(s, "user.color"))
    want = snapshot(os.path.join(m, "w"))
    got = {}
    def same():
        got.clear()
        got.update(snapshot(os.path.join(s.b.mnt, "w")))
        return got == want
    try:
        wait_until(same, 30, "B reading A's tree")
    except Fail:
        diff = sorted(k for k in set(want) | set(got)
                      if want.get(k) != got.get(k))
        raise Fail("B's tree differs from A's at %s" % ", ".join(
            "%s (A %r, B %r)" % (k, str(want.get(k))[:60],
                                str(got.get(k))[:60]) for k in diff))


def case_hard_links(s):
    """Hard links made through A, also across directories, are one file
    on B, and keep their inode number when B first reads them (tar,
    rsync -H and git go by it)."""
    m = s.a.mnt
    data = body("hard", 20000)
    os.makedirs(os.path.join(m, "w/h1"))
    os.makedirs(os.path.join(m, "w/h2"))
    # One name made while the file is open for writing (its STORE comes
    # after the LINK), one after it is closed.
    with open(os.path.join(m, "w/h1/orig"), "wb") as f:
        f.write(data)
        os.link(os.path.join(m, "w/h1/orig"), os.path.join(m, "w/h2/other"))
        os.fsync(f.fileno())
    os.link(os.path.join(m, "w/h1/orig"), os.path.join(m, "w/h1/same"))
    s.a.sync(timeout=120)
    paths = [os.path.join(s.b.mnt, n)
             for n in ("w/h1/orig", "w/h2/other", "w/h1/same")]
    wait_until(lambda: all(os.path.exists(p) for p in paths), 30,
               "B seeing the three names")
    before = [os.lstat(p) for p in paths]
    check(len({st.st_ino for st in before}) == 1,
          "three inodes on B: %s" % [st.st_ino for st in before])
    check(all(st.st_nlink == 3 for st in before),
          "links on B: %s" % [st.st_nlink for st in before])
    with open(paths[1], "rb") as f:
        check(f.read() == data, "B read the file wrong")
    after = [os.lstat(p) for p in paths]
    check([st.st_ino for st in after] == [st.st_ino for st in before],
          "the inode changed when B read it: %s -> %s" % (
              [st.st_ino for st in before], [st.st_ino for st in after]))
    for p in paths:
        with open(p, "rb") as f:
            check(f.read() == data, "B read %s wrong" % p)


def case_special_files(s):
    """A fifo, a socket node and a character device made through A's
    mount are the same objects on B (type, mode, owner, device number),
    and work there: B's fifo passes bytes, B's null device swallows
    them."""
    m = s.a.mnt
    d = os.path.join(m, "w/sp")
    os.makedirs(d)
    os.mkfifo(os.path.join(d, "fifo"), 0o640)
    os.chown(os.path.join(d, "fifo"), 1000, 1000)
    os.mknod(os.path.join(d, "null"), 0o666 | stat.S_IFCHR,
             os.makedev(1, 3))
    os.mknod(os.path.join(d, "sock"), 0o600 | stat.S_IFSOCK)
    names = ("fifo", "null", "sock")
    s.a.sync(timeout=120)
    bd = os.path.join(s.b.mnt, "w/sp")
    wait_until(lambda: all(os.path.lexists(os.path.join(bd, n))
                           for n in names), 30, "B seeing w/sp's nodes")

    def what(st):
        return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                st.st_uid, st.st_gid, st.st_rdev)
    for n in names:
        a = what(os.lstat(os.path.join(d, n)))
        b = what(os.lstat(os.path.join(bd, n)))
        check(a == b, "%s: A %r, B %r" % (n, a, b))
    fd = os.open(os.path.join(bd, "fifo"), os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(fd, b"through")
        check(os.read(fd, 64) == b"through", "B's fifo")
    finally:
        os.close(fd)
    with open(os.path.join(bd, "null"), "r+b", buffering=0) as f:
        check(f.write(b"gone") == 4 and f.read() == b"", "B's null")


def case_acls_and_xattrs(s):
    """POSIX ACLs and xattrs set through A are B's once B lists them:
    B's kernel enforces the ACL (uid 1000 may read, 1001 may not), a
    default ACL on a directory is inherited by what B creates there;
    A's later changes (an ACL narrowed, an xattr removed) reach B."""
    m = s.a.mnt
    d = os.path.join(m, "w/acl")
    os.chmod(s.t.tmp, 0o755)    # the mounts are under it
    os.makedirs(d)
    f = os.path.join(d, "secret")
    with open(f, "wb") as fh:
        fh.write(b"for 1000's eyes")
    os.chmod(f, 0o600)
    access = acl((ACL_USER_OBJ, 6, NOBODY), (ACL_USER, 4, 1000),
                 (ACL_GROUP_OBJ, 0, NOBODY), (ACL_MASK, 4, NOBODY),
                 (ACL_OTHER, 0, NOBODY))
    default = acl((ACL_USER_OBJ, 7, NOBODY), (ACL_USER, 5, 1000),
                  (ACL_GROUP_OBJ, 5, NOBODY), (ACL_MASK, 5, NOBODY),
                  (ACL_OTHER, 0, NOBODY))
    os.setxattr(f, "system.posix_acl_access", access)
    os.setxattr(d, "system.posix_acl_default", default)
    os.setxattr(d, "user.project", b"presto")
    os.setxattr(f, "user.gone", b"soon")
    os.chmod(d, 0o755)
    s.a.sync(timeout=120)
    bd = os.path.join(s.b.mnt, "w/acl")
    bf = os.path.join(bd, "secret")
    wait_until(lambda: os.path.exists(bf), 30, "B seeing w/acl/secret")
    check(xattrs(bf) == xattrs(f), "B's file's xattrs %r, A's %r" %
          (xattrs(bf), xattrs(f)))
    check(xattrs(bd) == xattrs(d), "B's directory's xattrs %r, A's %r" %
          (xattrs(bd), xattrs(d)))
    why = reads_as(1000, f)
    check(not why, "uid 1000 on A: %s" % why)
    ino = os.stat(bf).st_ino    # before its content is fetched
    why = reads_as(1000, bf)
    if why:     # the ACL as B's kernel has it
        why += "\n" + subprocess.run(["getfacl", "-n", bf],
                                     stdout=subprocess.PIPE,
                                     universal_newlines=True).stdout
    check(not why, "uid 1000 on B: %s" % why)
    check(reads_as(1001, bf), "uid 1001 reads on B")
    check(os.stat(bf).st_ino == ino, "the file with xattrs changed inode "
          "number when B first read it: %d -> %d" % (ino, os.stat(bf).st_ino))
    check(os.stat(bf).st_mode & 0o777 == os.stat(f).st_mode & 0o777,
          "modes differ")
    # Made on B: the directory's default ACL, as on A.
    with open(os.path.join(bd, "made-on-b"), "w") as fh:
        fh.write("b")
    check(os.getxattr(os.path.join(bd, "made-on-b"),
                      "system.posix_acl_access") is not None,
          "no inherited ACL on B")
    why = reads_as(1000, os.path.join(bd, "made-on-b"))
    check(not why, "uid 1000 on what B made under the default ACL: %s" %
          why)
    # A narrows the ACL and drops an xattr: B follows.
    os.setxattr(f, "system.posix_acl_access",
                acl((ACL_USER_OBJ, 6, NOBODY), (ACL_GROUP_OBJ, 0, NOBODY),
                    (ACL_OTHER, 0, NOBODY)))
    os.removexattr(f, "user.gone")
    s.a.sync(timeout=120)
    wait_until(lambda: reads_as(1000, bf), 30,
               "B taking back uid 1000's right to read")
    check(xattrs(bf) == xattrs(f), "B's xattrs after A's change %r, A's "
          "%r" % (xattrs(bf), xattrs(f)))


def as_user(uid, groups, *argv):
    """Run @argv as @uid (gid @uid) with supplementary @groups; raises
    Fail with its error if it fails."""
    r = subprocess.run(["setpriv", "--reuid", str(uid), "--regid", str(uid),
                        "--groups" if groups else "--clear-groups"] +
                       ([",".join(map(str, groups))] if groups else []) +
                       list(argv), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode:
        raise Fail("%s as uid %d groups %s: %s" % (
            " ".join(argv), uid, groups, r.stderr.strip()))


def case_group_and_acl_writers(s):
    """A shared tree as users write it: uid 1000 writes through A into a
    root:2000 set-gid directory by its supplementary group 2000, and
    into a root:root 0750 directory that an ACL opens to it; the changes
    reach the server (which checks them as A's kernel did: by the
    groups and the ACL) and B reads them, owned as on A. uid 1001 is
    still kept out by both, on A and on B."""
    m = s.a.mnt
    os.chmod(s.t.tmp, 0o755)    # the mounts are under it
    grp = os.path.join(m, "w/team")
    opened = os.path.join(m, "w/opened")
    os.makedirs(grp)
    os.chown(grp, 0, 2000)
    os.chmod(grp, 0o2770)
    os.makedirs(opened)
    os.chmod(opened, 0o750)
    os.setxattr(opened, "system.posix_acl_access",
                acl((ACL_USER_OBJ, 7, NOBODY), (ACL_USER, 7, 1000),
                    (ACL_GROUP_OBJ, 5, NOBODY), (ACL_MASK, 7, NOBODY),
                    (ACL_OTHER, 0, NOBODY)))
    s.a.sync(timeout=120)
    as_user(1000, [2000], "sh", "-c",
            "echo by-group >%s/notes && mkdir %s/sub && "
            "echo deeper >%s/sub/f && chmod 0660 %s/notes" %
            (grp, grp, grp, grp))
    as_user(1000, [], "sh", "-c", "echo by-acl >%s/mine && mv %s/mine "
            "%s/kept" % (opened, opened, opened))
    for d in (grp, opened):
        try:
            as_user(1001, [], "sh", "-c", "echo no >%s/intruder" % d)
            raise Fail("uid 1001 wrote into %s on A" % d)
        except Fail as e:
            check("Permission denied" in str(e), str(e))
    s.a.sync(timeout=120)
    check(s.a.volstat(VOL)["pending_records"] == 0, "A: records pending")
    for rel, want, owner in (("w/team/notes", b"by-group\n", (1000, 2000)),
                             ("w/team/sub/f", b"deeper\n", (1000, 2000)),
                             ("w/opened/kept", b"by-acl\n", (1000, 1000))):
        p = os.path.join(s.b.mnt, rel)
        wait_until(lambda: os.path.exists(p), 30, "B seeing " + rel)
        with open(p, "rb") as f:
            got = f.read()
        check(got == want, "%s on B: %r" % (rel, got))
        st = os.stat(p)
        check((st.st_uid, st.st_gid) == owner, "%s on B owned %d:%d, "
              "not %d:%d" % ((rel, st.st_uid, st.st_gid) + owner))
    check(os.stat(os.path.join(s.b.mnt, "w/team/sub")).st_mode & 0o2000,
          "w/team/sub lost its set-gid bit on B")
    try:
        as_user(1001, [], "cat", os.path.join(s.b.mnt, "w/team/notes"))
        raise Fail("uid 1001 read w/team/notes on B")
    except Fail as e:
        check("Permission denied" in str(e), str(e))
    as_user(1000, [2000], "cat", os.path.join(s.b.mnt, "w/team/notes"))


def case_removed_elsewhere(s):
    """Files B has read, removed and renamed through A: B's listing
    loses the removed name and shows the renamed one under its new name
    alone, with its content; neither old name is left behind."""
    am, bm = os.path.join(s.a.mnt, "w/gone"), os.path.join(s.b.mnt, "w/gone")
    os.makedirs(am)
    for n in ("x", "y"):
        with open(os.path.join(am, n), "w") as f:
            f.write("content of " + n)
    s.a.sync(timeout=120)
    wait_until(lambda: os.path.exists(os.path.join(bm, "y")), 30,
               "B seeing w/gone")
    for n in ("x", "y"):
        with open(os.path.join(bm, n)) as f:
            check(f.read() == "content of " + n, "B's first read of " + n)
    os.unlink(os.path.join(am, "x"))
    os.rename(os.path.join(am, "y"), os.path.join(am, "z"))
    s.a.sync(timeout=120)
    seen = {}

    def there():
        seen.clear()
        for n in os.listdir(bm):
            try:
                with open(os.path.join(bm, n)) as f:
                    seen[n] = f.read()
            except OSError as e:
                seen[n] = e.strerror
        return seen == {"z": "content of y"}
    try:
        wait_until(there, 30, "B's w/gone")
    except Fail:
        raise Fail("B's w/gone: %r, want z alone" % seen)


def case_dir_nlink(s):
    """A directory B has not listed yet shows the server's link count
    (2 + its subdirectories), before B lists it and after."""
    m = s.a.mnt
    for d in ("w/nl/a/x", "w/nl/b", "w/nl/c"):
        os.makedirs(os.path.join(m, d))
    s.a.sync(timeout=120)
    want = os.lstat(os.path.join(m, "w/nl")).st_nlink
    check(want == 5, "A's w/nl has %d links" % want)
    nl = os.path.join(s.b.mnt, "w/nl")
    wait_until(lambda: os.path.exists(nl), 30, "B seeing w/nl")
    check(os.lstat(nl).st_nlink == want, "B's w/nl before its listing: %d "
          "links, not %d" % (os.lstat(nl).st_nlink, want))
    check(os.lstat(os.path.join(nl, "a")).st_nlink == 3,
          "B's w/nl/a: %d links" % os.lstat(os.path.join(nl, "a")).st_nlink)
    check(sorted(os.listdir(nl)) == ["a", "b", "c"], "B lists %s" %
          os.listdir(nl))
    check(os.lstat(nl).st_nlink == want, "B's w/nl after its listing: %d "
          "links" % os.lstat(nl).st_nlink)


def case_restart_resumes(s):
    """A's lento killed (-9) after consuming and restarted goes on after
    its position: nothing is logged or shipped twice."""
    m = s.a.mnt
    for i in range(20):
        with open(os.path.join(m, "w/r%d" % i), "wb") as f:
            f.write(body("r%d" % i, 1000 + i))
    consumed(s.a)
    pos = journal(s.a)["consumed"]
    pending = s.a.volstat(VOL)["pending_records"]
    check(pending > 0, "A consumed nothing")
    s.a.kill()
    s.a.stop()
    s.a.start()
    s.a.ready()
    consumed(s.a, changed=False)
    j = journal(s.a)
    check(j["records_consumed"] == 0 or j["consumed"] >= pos,
          "A went back: %s (was %d)" % (j, pos))
    check(s.a.volstat(VOL)["pending_records"] == pending,
          "pending records %d after the restart, %d before" % (
              s.a.volstat(VOL)["pending_records"], pending))
    before = applied(s.a)
    s.a.sync(timeout=120)
    check(applied(s.a) - before == pending,
          "the server applied %d records, %d were pending" % (
              applied(s.a) - before, pending))
    check(not s.a.volstat(VOL)["stuck"], "A stuck: %s" %
          s.a.volstat(VOL)["last_reintegration"])
    for i in range(20):
        def fresh(i=i):
            with open(os.path.join(s.b.mnt, "w/r%d" % i), "rb") as f:
                return f.read() == body("r%d" % i, 1000 + i)
        wait_until(fresh, 30, "B reading r%d" % i)


def case_churn_ships_nothing(s):
    """A create/close/unlink loop of 1000 files ships zero records."""
    m = s.a.mnt
    before = applied(s.a)
    for i in range(1000):
        p = os.path.join(m, "w/tmp%d" % i)
        open(p, "wb").close()
        os.unlink(p)
    s.a.sync(timeout=120)
    check(applied(s.a) == before, "the loop shipped %d records" % (
        applied(s.a) - before))
    check(s.a.volstat(VOL)["pending_records"] == 0, "pending after sync")


def case_revoke(s):
    """A change on B revokes A's permit (A's presto gives it back, A
    consumes and reintegrates first), and A's next open sees B's change."""
    # A change first: A holds the permit then, however long the case
    # before took (an idle permit is given back after 30 s).
    with open(os.path.join(s.a.mnt, "w/last"), "wb") as f:
        f.write(b"A's last word\n")
    check(s.a.fileset()["permit"]["presto"], "A's presto holds no permit")
    with open(os.path.join(s.a.mnt, "w/f3"), "rb") as f:
        old = f.read()
    new = b"B was here\n" * 10
    with open(os.path.join(s.b.mnt, "w/f3"), "wb") as f:
        f.write(new)
    wait_until(lambda: not s.a.fileset()["permit"]["presto"], 30,
               "A's presto giving the permit back")
    s.b.sync(timeout=120)
    def fresh():
        with open(os.path.join(s.a.mnt, "w/f3"), "rb") as f:
            return f.read() == new
    wait_until(fresh, 30, "A reading B's change")
    check(old != new, "the test changed nothing")
    # A's own last change made it to the server before it let go.
    with open(os.path.join(s.b.mnt, "w/last"), "rb") as f:
        check(f.read() == b"A's last word\n", "A's last change lost")


def case_unmount_behind(s):
    """A's mount unmounted while its lento is behind the journal (stopped:
    nothing of these changes read, nor synced before the unmount): lento
    reads the rest of the log without the mount, ships it before it gives
    the permit back, and `lentoctl sync` says so only then. The lento of
    before stopped reading at the unmount, gave the idle permit back and
    said the sync was done: the changes waited for the next mount."""
    with open(os.path.join(s.a.mnt, "w/um-first"), "wb") as f:
        f.write(b"first\n")
    check(s.a.fileset()["permit"]["presto"], "A's presto holds no permit")
    s.a.p.send_signal(signal.SIGSTOP)
    try:
        for i in range(20):
            with open(os.path.join(s.a.mnt, "w/um%d" % i), "wb") as f:
                f.write(body("um%d" % i, 500 + i))
        s.a.umount()
    finally:
        s.a.p.send_signal(signal.SIGCONT)
    s.a.sync(timeout=120)
    check(s.a.volstat(VOL)["pending_records"] == 0, "pending after sync")
    for i in range(20):
        with open(os.path.join(s.b.mnt, "w/um%d" % i), "rb") as f:
            check(f.read() == body("um%d" % i, 500 + i),
                  "B reads um%d wrong" % i)
    # Mounted again: lento goes on after what it read meanwhile.
    before = applied(s.a)
    s.a.mount()
    s.a.ready()
    with open(os.path.join(s.a.mnt, "w/um-after"), "wb") as f:
        f.write(b"after\n")
    consumed(s.a)
    s.a.sync(timeout=120)
    check(applied(s.a) - before <= 2, "the remount shipped %d records "
          "again" % (applied(s.a) - before))
    with open(os.path.join(s.b.mnt, "w/um-after"), "rb") as f:
        check(f.read() == b"after\n", "B reads um-after wrong")


def case_disconnected(s):
    """With the server gone, a change through A's mount gets a local
    permit and is journaled; once the server is back it is reintegrated
    and B reads it."""
    s.srv.kill()
    s.srv.stop()
    wait_until(lambda: s.a.status()["state"] != "connected", 30,
               "A noticing the server gone")
    new = b"written while disconnected\n"
    with open(os.path.join(s.a.mnt, "w/offline"), "wb") as f:
        f.write(new)
    consumed(s.a)
    check(s.a.volstat(VOL)["pending_records"] > 0, "nothing pending")
    s.srv.start()
    s.a.wait_connected(60)
    s.b.wait_connected(60)
    s.a.sync(timeout=120)
    def there():
        try:
            with open(os.path.join(s.b.mnt, "w/offline"), "rb") as f:
                return f.read() == new
        except FileNotFoundError:
            return False
    wait_until(there, 30, "B reading what A wrote disconnected")


def case_apart(s):
    """A third client, C, through a proxy the test cuts: while apart, C
    and A add different names to one directory through their mounts and
    both change one file. C's batch merges the names and stops at the
    file; lentoctl resolve both keeps A's version under its name and C's
    beside it. Both mounts then show the same four names and contents."""
    proxy = s.t.proxy(s.srv)
    c = rp.Kclient(s.t.tmp, "far", proxy, os.path.join(s.t.tmp, "mnt-far"))
    s.t.procs.append(c)
    s.more.append(c)
    c.start()
    c.mount()
    c.ready()
    am, cm = os.path.join(s.a.mnt, "w/apart"), os.path.join(c.mnt, "w/apart")
    os.makedirs(am)
    with open(os.path.join(am, "shared"), "w") as f:
        f.write("base")
    s.a.sync(timeout=120)
    wait_until(lambda: os.path.exists(os.path.join(cm, "shared")), 30,
               "C seeing w/apart/shared")
    with open(os.path.join(cm, "shared")) as f:
        check(f.read() == "base", "C's first read")
    proxy.cut()
    wait_until(lambda: c.status()["state"] != "connected", 30,
               "C noticing it is apart")
    with open(os.path.join(cm, "from-c"), "w") as f:
        f.write("c")
    with open(os.path.join(cm, "shared"), "w") as f:
        f.write("C's version")
    consumed(c)
    with open(os.path.join(am, "from-a"), "w") as f:
        f.write("a")
    with open(os.path.join(am, "shared"), "w") as f:
        f.write("A's version")
    s.a.sync(timeout=120)
    proxy.restore()
    c.wait_connected(60)
    rc, out = c.ctl("sync", ok=False, timeout=120)
    check(rc == 1 and "conflict" in out, "C's sync: %d %s" % (rc, out))
    res = c.ctl("resolve", VOL, "both")
    check(res["copy"], "resolve both: %s" % res)
    copy = res["copy"].split("/")[-1]
    c.sync(timeout=120)
    want = {"from-a": "a", "from-c": "c", "shared": "A's version",
            copy: "C's version"}

    def tree(d):
        out = {}
        for n in os.listdir(d):
            with open(os.path.join(d, n)) as f:
                out[n] = f.read()
        return out
    for k, d in (("A", am), ("C", cm)):
        got = {}

        def same():
            got.clear()
            got.update(tree(d))
            return got == want
        try:
            wait_until(same, 30, "%s's w/apart" % k)
        except Fail:
            raise Fail("%s's w/apart: %r, want %r" % (k, got, want))


def case_unread_moved_and_changed(s):
    """A file a client renamed before it ever read it, while the server
    took a newer version of it from another client: the client reads
    the server's newer content (not an error), its sync reports the
    conflict, and lentoctl resolve local ships the rename: both see the
    new name with the newer content."""
    proxy = s.t.proxy(s.srv)
    c = rp.Kclient(s.t.tmp, "far2", proxy, os.path.join(s.t.tmp,
                                                        "mnt-far2"))
    s.t.procs.append(c)
    s.more.append(c)
    c.start()
    c.mount()
    c.ready()
    am = os.path.join(s.a.mnt, "w/unread")
    cm = os.path.join(c.mnt, "w/unread")
    os.makedirs(am)
    with open(os.path.join(am, "f"), "w") as f:
        f.write("base")
    s.a.sync(timeout=120)
    wait_until(lambda: "f" in os.listdir(cm), 30, "C listing w/unread")
    proxy.cut()
    wait_until(lambda: c.status()["state"] != "connected", 30,
               "C noticing it is apart")
    os.rename(os.path.join(cm, "f"), os.path.join(cm, "g"))
    consumed(c)
    with open(os.path.join(am, "f"), "w") as f:
        f.write("newer at the server")
    s.a.sync(timeout=120)
    proxy.restore()
    c.wait_connected(60)
    with open(os.path.join(cm, "g")) as f:
        got = f.read()
    check(got == "newer at the server", "C read %r" % got)
    rc, out = c.ctl("sync", ok=False, timeout=120)
    check(rc == 1 and "conflict" in out, "C's sync: %d %s" % (rc, out))
    c.ctl("resolve", VOL, "local")
    c.sync(timeout=120)
    for k, d in (("A", am), ("C", cm)):
        seen = {}

        def there():
            seen.clear()
            for n in os.listdir(d):
                with open(os.path.join(d, n)) as f:
                    seen[n] = f.read()
            return seen == {"g": "newer at the server"}
        try:
            wait_until(there, 30, "%s's w/unread" % k)
        except Fail:
            raise Fail("%s's w/unread: %r, want g alone with the newer "
                       "content" % (k, seen))


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def case_crash_recovery(s):
    """A third client, C, its cache on an ext4 image of its own, crashes
    (the image copied while frozen, as a crash would leave it) with
    changes journaled but not all consumed nor durable; with the copy
    mounted again, presto's recovery restates what the marks name, C's
    lento consumes it all, and what the crash kept reaches the server:
    B reads it identical, xattrs included (one removed last, its record
    likely lost, is gone at the server too)."""
    img = os.path.join(s.t.tmp, "c.img")
    lower = "/mnt/wp-c"
    sh("truncate -s 256M %s && mkfs.ext4 -q -F %s" % (img, img))
    os.makedirs(lower, exist_ok=True)
    subprocess.run(["modprobe", "loop"], check=False)
    sh("mount -o loop %s %s" % (img, lower))
    c = rp.Kclient(s.t.tmp, "c", s.srv, os.path.join(s.t.tmp, "mnt-c"))
    c.cache = os.path.join(lower, "cache")
    s.t.procs.append(c)
    s.more.append(c)
    c.start()
    c.mount()
    c.ready()
    m = os.path.join(c.mnt, "crash")
    os.makedirs(os.path.join(m, "sub"))
    for i in range(5):
        with open(os.path.join(m, "old%d" % i), "wb") as f:
            f.write(body("old%d" % i, 2000 + i))
    old4 = os.path.join(m, "old4")
    os.setxattr(old4, "user.gone", b"x")
    os.setxattr(old4, "user.stay", b"y")
    consumed(c)
    # More, not waited for: the crash keeps some of it, maybe unlogged.
    for i in range(5):
        with open(os.path.join(m, "sub/new%d" % i), "wb") as f:
            f.write(body("new%d" % i, 3000 + i))
    os.rename(os.path.join(m, "old0"), os.path.join(m, "sub/moved"))
    os.unlink(os.path.join(m, "old1"))
    os.chmod(os.path.join(m, "old2"), 0o640)
    with open(os.path.join(m, "old3"), "ab") as f:
        f.write(b"more")
    # Last, so that its record is likely still in presto's queue: the
    # copy keeps the removal and loses its record, and recovery's RESYNC
    # of old4 has to say it (PRUNEXATTRS at the server).
    os.removexattr(old4, "user.gone")
    sh("fsfreeze -f %s && cp --sparse=always %s %s.crash; "
       "fsfreeze -u %s" % (lower, img, img, lower))
    c.kill()
    c.stop()
    c.umount()
    sh("umount %s && mount -o loop %s.crash %s" % (lower, img, lower))
    want = snapshot(os.path.join(c.cache, VOL, "crash"))
    check(len(want) > 5, "the copy kept %s" % sorted(want))
    check(want["old4"][3] == (("user.stay", b"y"),),
          "the copy's old4 xattrs: %s" % (want["old4"][3],))
    c.mount()
    c.start()
    c.ready()
    consumed(c, changed=False)
    c.sync(timeout=120)
    check(not c.volstat(VOL)["stuck"], "C stuck: %s" %
          c.volstat(VOL)["last_reintegration"])
    got = {}
    def same():
        got.clear()
        got.update(snapshot(os.path.join(s.b.mnt, "crash")))
        return got == want
    try:
        wait_until(same, 60, "B reading what C's crash kept")
    except Fail:
        diff = sorted(k for k in set(want) | set(got)
                      if want.get(k) != got.get(k))
        raise Fail("B's tree differs from the crash copy at %s" % ", ".join(
            "%s (C %r, B %r)" % (k, str(want.get(k))[:60],
                                str(got.get(k))[:60]) for k in diff))


def case_status(s):
    """lentoctl status shows the permit, the journal and pending work."""
    fs = s.a.fileset()
    for key in ("consumed", "durable", "acked", "error"):
        check(key in fs["journal"], "no %s in %s" % (key, fs["journal"]))
    for key in ("pending_records", "pending_bytes", "oldest_age_ms"):
        check(key in fs, "no %s in the fileset's status" % key)
    text = s.a.ctl("status", json_out=False)
    check("journal consumed" in text and "permit: presto" in text, text)


def case_made_flags_identity(s):
    """A file made through the mount gets presto's flags (ATTR|DATA) in
    the lower once lento consumed its record, on that file only: if its
    name holds another object by then -- here a placeholder renamed over
    it through the mount while lento writes the flags (held there for
    the test: LENTO_TEST_FAULTS made-flags) -- that one's flags are not
    touched (lento's of before wrote DATA on whatever the name held: a
    placeholder with no content, served as complete from then on)."""
    faults = os.path.join(s.t.tmp, "m.faults")
    k = rp.Kclient(s.t.tmp, "m", s.srv, os.path.join(s.t.tmp, "mnt-m"))
    s.t.procs.append(k)
    s.more.append(k)
    k.start(env={"LENTO_TEST_FAULTS": faults})
    k.mount()
    k.ready()
    # g: published by A, a placeholder in M's cache (listed, not read).
    os.makedirs(os.path.join(s.a.mnt, "mf"))
    with open(os.path.join(s.a.mnt, "mf", "g"), "wb") as f:
        f.write(b"A's g")
    s.a.sync(timeout=120)
    wait_until(lambda: "g" in os.listdir(os.path.join(k.mnt, "mf")), 30,
               "M listing mf")
    lower = os.path.join(k.cache, VOL, "mf")
    check(os.lstat(os.path.join(lower, "g")).st_blocks == 0,
          "M has g's content already")
    with open(faults, "w") as f:
        f.write("made-flags\n")
    with open(os.path.join(k.mnt, "mf", "n"), "wb") as f:
        f.write(b"M's n")
    os.sync()
    wait_until(lambda: not os.path.exists(faults), 30,
               "M writing the flags of n", step=0.005)
    os.rename(os.path.join(k.mnt, "mf", "g"), os.path.join(k.mnt, "mf", "n"))
    consumed(k)
    cb = None
    try:
        cb = os.getxattr(os.path.join(lower, "n"), "trusted.presto.cb",
                         follow_symlinks=False)
    except OSError:
        pass
    check(cb is None or len(cb) < 2 or not cb[1] & 2,
          "g's placeholder, now n, flagged DATA: %r" % cb)
    with open(os.path.join(k.mnt, "mf", "n"), "rb") as f:
        got = f.read()
    check(got == b"A's g", "M's n (g renamed over it): %r" % got)
    k.umount()


CASES = [
    ("mount", case_mount),
    ("write_tree", case_write_tree),
    ("hard_links", case_hard_links),
    ("special_files", case_special_files),
    ("acls_and_xattrs", case_acls_and_xattrs),
    ("group_and_acl_writers", case_group_and_acl_writers),
    ("removed_elsewhere", case_removed_elsewhere),
    ("dir_nlink", case_dir_nlink),
    ("restart_resumes", case_restart_resumes),
    ("churn_ships_nothing", case_churn_ships_nothing),
    ("revoke", case_revoke),
    ("unmount_behind", case_unmount_behind),
    ("disconnected", case_disconnected),
    ("apart", case_apart),
    ("unread_moved_and_changed", case_unread_moved_and_changed),
    ("crash_recovery", case_crash_recovery),
    ("status", case_status),
    ("made_flags_identity", case_made_flags_identity),
]


def main():
    if len(sys.argv) < 2:
        print("usage: writepath.py SCRATCH [CASE...]")
        return 2
    scratch = os.path.abspath(sys.argv[1])
    only = sys.argv[2:]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch, mode=0o700)
    passed = failed = 0
    try:
        s = Setup(scratch)
    except Exception as e:
        print("not ok - setup: %s" % e)
        print("0 passed, 1 failed")
        return 1
    for name, fn in CASES:
        if only and name not in only and name not in ("mount",
                                                      "write_tree"):
            continue
        t0 = time.monotonic()
        try:
            fn(s)
            print("ok - %s (%.1f s)" % (name, time.monotonic() - t0))
            passed += 1
        except Exception as e:
            failed += 1
            # The reason on the line itself: a summary (CI's) keeps it.
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            print("not ok - %s: %s (%.1f s)" % (name, why[:200],
                                                time.monotonic() - t0))
            msg = "".join(traceback.format_exception_only(type(e), e))
            if not isinstance(e, Fail):
                msg += traceback.format_exc()
            for line in msg.strip().splitlines():
                print("  # " + line)
            for p in s.t.procs:
                print(p.tail(30))
        sys.stdout.flush()
    problems = s.finish()
    for p in problems:
        failed += 1
        print("not ok - %s" % p.splitlines()[0])
        for line in p.splitlines()[1:]:
            print("  # " + line)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
