#!/usr/bin/env python3
"""A crash-test workload: many small changes through a presto mount, some
files fsync'd and recorded.

    workload.py MNT --lower CACHE --records FILE [--seconds S] [--procs N]
                [--seed S] [--tar TARBALL [--tar-members N]]
                [--fsync-records] [--mark DMNAME]

MNT is a presto mount of CACHE (its lower= directory), both empty but for
CACHE/.presto. N worker processes (default 4) make files with content,
rename them (within and across directories), append to them, truncate,
chmod, set and remove xattrs, make hard and symbolic links, mkdir, rmdir,
rename and remove directories, each in its own scratch tree MNT/work/wK;
one more process unpacks TARBALL (if given; only its first N members
with --tar-members) into MNT/work/tar again and again, and removes the
older unpacks.

Now and then a worker makes a file that it will never touch again in
MNT/keep/pK -- written directly, or in pieces closed in between, or
written in its scratch tree and renamed or hard-linked there, or an
O_TMPFILE linked in -- fsyncs it and then MNT/keep/pK, and hands it to
the main process, which appends one JSON line to FILE:

    {"n": 1, "path": "keep/p0/f0-3", "sha256": "...", "size": 123,
     "mode": 33188, "ino": 12, "gen": 3456, "xattrs": {"user.k": "hex"}}

n counts the records from 1; path is relative to MNT (and to CACHE);
ino and gen are the lower handle (CACHE's inode number and generation,
FS_IOC_GETVERSION), as the log names the file. Only files whose fsync
(and their directory's) returned are recorded, so a crash at any point
after a record must keep the file exactly so. Nothing under MNT/keep is
renamed or removed, and a recorded file is never changed again.

--fsync-records fsyncs FILE after each line (it must be on another file
system than CACHE, one that survives the crash). --mark DMNAME sends
"dmsetup message DMNAME 0 mark fsyncN" after writing records up to N,
so that a dm-log-writes replay to that mark must hold records 1..N.
The workload stops after --seconds (default: runs until killed). Exit
status 0, or 1 if a change failed unexpectedly.
"""
import argparse
import ctypes
import hashlib
import json
import multiprocessing as mp
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "integration"))
import kmltest  # noqa: E402

AT_FDCWD = -100
AT_SYMLINK_FOLLOW = 0x400

libc = ctypes.CDLL(None, use_errno=True)


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def content(rng, size):
    # Cheap random-looking bytes: a random block repeated with a counter.
    block = rng.randbytes(min(size, 512))
    out = bytearray()
    i = 0
    while len(out) < size:
        out += block + i.to_bytes(4, "little")
        i += 1
    return bytes(out[:size])


class Worker:
    def __init__(self, args, k, q, stop):
        self.args = args
        self.k = k
        self.q = q
        self.stop = stop
        self.rng = random.Random("%s-%d" % (args.seed, k))
        self.mnt = args.mnt
        self.root = os.path.join(self.mnt, "work", "w%d" % k)
        self.keep = os.path.join("keep", "p%d" % k)   # relative to mnt
        self.dirs = [self.root]     # scratch directories, root first
        self.files = []             # scratch files (not symlinks)
        self.serial = 0
        self.recorded = 0
        self.ops = {}

    def name(self, prefix):
        self.serial += 1
        return "%s%d-%d" % (prefix, self.k, self.serial)

    def pick_dir(self):
        return self.rng.choice(self.dirs)

    def pick_file(self):
        return self.rng.choice(self.files) if self.files else None

    def forget_under(self, d):
        pre = d + "/"
        self.dirs = [x for x in self.dirs if x != d and not x.startswith(pre)]
        self.files = [x for x in self.files if not x.startswith(pre)]

    def rename_under(self, old, new):
        pre = old + "/"

        def mv(p):
            if p == old:
                return new
            if p.startswith(pre):
                return new + p[len(old):]
            return p
        self.dirs = [mv(x) for x in self.dirs]
        self.files = [mv(x) for x in self.files]

    # -- the scratch churn: nothing here is recorded --

    def op_create(self):
        p = os.path.join(self.pick_dir(), self.name("c"))
        with open(p, "wb") as f:
            f.write(content(self.rng, self.rng.randrange(0, 9000)))
        self.files.append(p)

    def op_append(self):
        p = self.pick_file()
        if p:
            with open(p, "ab") as f:
                f.write(content(self.rng, self.rng.randrange(1, 3000)))

    def op_truncate(self):
        p = self.pick_file()
        if p:
            os.truncate(p, self.rng.randrange(0, 5000))

    def op_rename(self):
        p = self.pick_file()
        if p:
            new = os.path.join(self.pick_dir(), self.name("r"))
            os.rename(p, new)
            self.files[self.files.index(p)] = new

    def op_rename_over(self):
        if len(self.files) >= 2:
            a, b = self.rng.sample(self.files, 2)
            os.rename(a, b)
            self.files.remove(a)

    def op_unlink(self):
        p = self.pick_file()
        if p:
            os.unlink(p)
            self.files.remove(p)

    def op_link(self):
        p = self.pick_file()
        if p:
            new = os.path.join(self.pick_dir(), self.name("l"))
            os.link(p, new)
            self.files.append(new)

    def op_symlink(self):
        d = self.pick_dir()
        os.symlink("../" + self.name("target"), os.path.join(d, self.name("s")))

    def op_chmod(self):
        p = self.pick_file()
        if p:
            os.chmod(p, self.rng.choice((0o600, 0o644, 0o755, 0o640, 0o444)))

    def op_xattr(self):
        p = self.pick_file() if self.rng.random() < 0.7 else self.pick_dir()
        if p:
            name = "user.x%d" % self.rng.randrange(4)
            if self.rng.random() < 0.3:
                try:
                    os.removexattr(p, name)
                except OSError as e:
                    if e.errno != 61:       # ENODATA
                        raise
            else:
                os.setxattr(p, name, self.rng.randbytes(self.rng.randrange(1, 200)))

    def op_mkdir(self):
        if len(self.dirs) < 40:
            d = os.path.join(self.pick_dir(), self.name("d"))
            os.mkdir(d)
            self.dirs.append(d)

    def op_rmdir(self):
        d = self.pick_dir()
        if d == self.root:
            return
        if self.rng.random() < 0.3:
            shutil.rmtree(d)
            self.forget_under(d)
        else:
            try:
                os.rmdir(d)
            except OSError as e:
                if e.errno != 39:           # ENOTEMPTY
                    raise
                return
            self.forget_under(d)

    def op_rename_dir(self):
        d = self.pick_dir()
        if d == self.root:
            return
        # Into the root or a directory not under d.
        to = self.rng.choice([x for x in self.dirs
                              if x != d and not x.startswith(d + "/")])
        new = os.path.join(to, self.name("m"))
        os.rename(d, new)
        self.rename_under(d, new)

    # -- files fsync'd and recorded --

    def record(self, rel, how):
        full = os.path.join(self.mnt, rel)
        with open(full, "rb") as f:
            data = f.read()
        st = os.lstat(full)
        lower = os.path.join(self.args.lower, rel)
        lst = os.lstat(lower)
        xattrs = {n: os.getxattr(full, n).hex()
                  for n in os.listxattr(full) if n.startswith("user.")}
        self.q.put({"path": rel, "how": how,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "size": len(data), "mode": st.st_mode,
                    "ino": lst.st_ino, "gen": kmltest.generation(lower),
                    "xattrs": xattrs})
        self.recorded += 1

    def keep_name(self):
        return os.path.join(self.keep, self.name("f"))

    def finish_file(self, fd, rel, how):
        """Attributes, fsync the file and its directory, record it."""
        if self.rng.random() < 0.3:
            os.fchmod(fd, self.rng.choice((0o600, 0o640, 0o755)))
        if self.rng.random() < 0.3:
            os.setxattr(fd, "user.rec", self.rng.randbytes(16))
        os.fsync(fd)
        os.close(fd)
        fsync_path(os.path.join(self.mnt, self.keep))
        self.record(rel, how)

    def op_fsync(self):
        how = self.rng.choice(("direct", "pieces", "rename", "link",
                               "tmpfile"))
        rel = self.keep_name()
        full = os.path.join(self.mnt, rel)
        size = self.rng.randrange(1, 20000)
        data = content(self.rng, size)
        if how == "direct":
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
        elif how == "pieces":
            # Closed between appends: each close logs a STORE.
            cut = sorted(self.rng.sample(range(size + 1), 2))
            for a, b in ((0, cut[0]), (cut[0], cut[1])):
                with open(full, "ab") as f:
                    f.write(data[a:b])
            fd = os.open(full, os.O_WRONLY | os.O_APPEND)
            os.write(fd, data[cut[1]:])
        elif how in ("rename", "link"):
            tmp = os.path.join(self.pick_dir(), self.name("t"))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
            if how == "rename":
                os.rename(tmp, full)
            else:
                # The scratch name stays, but is never written through
                # again: it is not in self.files.
                os.link(tmp, full)
        else:
            fd = os.open(os.path.join(self.mnt, self.keep),
                         os.O_TMPFILE | os.O_WRONLY, 0o644)
            os.write(fd, data)
            if libc.linkat(AT_FDCWD, b"/proc/self/fd/%d" % fd, AT_FDCWD,
                           os.fsencode(full), AT_SYMLINK_FOLLOW):
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e), full)
        self.finish_file(fd, rel, how)

    OPS = (("create", 14), ("append", 10), ("truncate", 3), ("rename", 8),
           ("rename_over", 3), ("unlink", 6), ("link", 4), ("symlink", 2),
           ("chmod", 4), ("xattr", 5), ("mkdir", 5), ("rmdir", 3),
           ("rename_dir", 3), ("fsync", 8))

    def run(self):
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        errors = 0
        while not self.stop.is_set():
            op = self.rng.choices(names, weights)[0]
            try:
                getattr(self, "op_" + op)()
                self.ops[op] = self.ops.get(op, 0) + 1
            except OSError as e:
                errors += 1
                print("workload: worker %d: %s: %s" % (self.k, op, e),
                      file=sys.stderr, flush=True)
                if errors > 20:
                    return 1
        print("workload: worker %d: %d recorded; %s" % (
            self.k, self.recorded,
            " ".join("%s %d" % kv for kv in sorted(self.ops.items()))),
            file=sys.stderr, flush=True)
        return 1 if errors else 0


def worker_main(args, k, q, stop):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os._exit(Worker(args, k, q, stop).run())


def tar_main(args, stop):
    """Unpack the tarball again and again; keep the last two unpacks."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    base = os.path.join(args.mnt, "work", "tar")
    os.mkdir(base)
    members = []
    if args.tar_members:
        # The first members only (parents come before their children).
        with tarfile.open(args.tar) as t:
            members = t.getnames()[:args.tar_members]
    n = 0
    rc = 0
    while not stop.is_set():
        n += 1
        d = os.path.join(base, "u%d" % n)
        os.mkdir(d)
        # A directory named would bring its whole subtree.
        sel = ["--no-recursion", "--"] + members if members else []
        p = subprocess.Popen(["tar", "-xf", args.tar, "-C", d] + sel)
        while p.poll() is None:
            if stop.wait(0.5):
                p.kill()
        if stop.is_set():
            break
        if p.returncode != 0:
            print("workload: tar -x failed (exit %d)" % p.returncode,
                  file=sys.stderr, flush=True)
            rc = 1
            break
        os.rename(d, d + "-done")
        old = os.path.join(base, "u%d-done" % (n - 2))
        if os.path.exists(old):
            shutil.rmtree(old)
    print("workload: tar: %d unpacks started" % n, file=sys.stderr, flush=True)
    os._exit(rc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mnt")
    ap.add_argument("--lower", required=True)
    ap.add_argument("--records", required=True)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--seed", default=str(random.randrange(1 << 32)))
    ap.add_argument("--tar")
    ap.add_argument("--tar-members", type=int, default=0,
                    help="unpack only the first N members (default: all)")
    ap.add_argument("--fsync-records", action="store_true")
    ap.add_argument("--mark")
    args = ap.parse_args()
    print("workload: seed %s, %d processes%s" % (
        args.seed, args.procs, ", tar" if args.tar else ""),
        file=sys.stderr, flush=True)

    # The directories that hold recorded files: made and fsync'd first.
    os.mkdir(os.path.join(args.mnt, "keep"))
    for k in range(args.procs):
        os.mkdir(os.path.join(args.mnt, "keep", "p%d" % k))
    fsync_path(os.path.join(args.mnt, "keep"))
    fsync_path(args.mnt)
    os.makedirs(os.path.join(args.mnt, "work"))
    for k in range(args.procs):
        os.mkdir(os.path.join(args.mnt, "work", "w%d" % k))

    recf = open(args.records, "a")
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    stop = ctx.Event()
    procs = [ctx.Process(target=worker_main, args=(args, k, q, stop))
             for k in range(args.procs)]
    if args.tar:
        procs.append(ctx.Process(target=tar_main, args=(args, stop)))
    for p in procs:
        p.start()

    n = 0
    marks = 0
    end = time.monotonic() + args.seconds if args.seconds else None

    def take(rec):
        nonlocal n
        n += 1
        recf.write(json.dumps(dict(n=n, **rec)) + "\n")
        recf.flush()
        if args.fsync_records:
            os.fsync(recf.fileno())

    def drain(block):
        """Write the records waiting; mark after them. False on timeout."""
        nonlocal marks
        try:
            take(q.get(timeout=0.5) if block else q.get_nowait())
        except queue.Empty:
            return False
        while True:
            try:
                take(q.get_nowait())
            except queue.Empty:
                break
        if args.mark:
            subprocess.run(["dmsetup", "message", args.mark, "0", "mark",
                            "fsync%d" % n], check=True)
            marks += 1
        return True

    try:
        while end is None or time.monotonic() < end:
            drain(True)
            if all(not p.is_alive() for p in procs):
                break
    finally:
        stop.set()
    rc = 0
    for p in procs:
        while p.is_alive():
            drain(True)
            p.join(0.1)
        rc |= p.exitcode != 0
    while drain(False):
        pass
    recf.close()
    print("workload: %d files fsync'd and recorded, %d marks" % (n, marks),
          file=sys.stderr, flush=True)
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
