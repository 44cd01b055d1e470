#!/usr/bin/env python3
"""presto's channel to lento, tested against a fake lento speaking
generic netlink by hand (genl.py): registration (and a socket of another
network namespace that is not lento), upcalls and their answers, waits
without lento, signals, a cgroup's freeze and a suspend during a wait,
timeouts, resends to a new lento,
callback flags (persisted, epochs, breaks, purges), the refetch of a file
replaced under an open, warm trees served with no upcall (I-1), the
family's refusals of malformed messages, and random messages (fuzz).

    channel.py EXT_DIR MNT_DIR [--fuzz-seconds N]

EXT_DIR is a directory on ext4 (lower trees go there), MNT_DIR an empty
directory for the mounts. Runs as root in the test VM. Prints "ok - NAME"
or "not ok - NAME" per case and "N passed, N failed".
"""
import argparse
import errno
import mmap
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import genl  # noqa: E402
import inotify  # noqa: E402
from genl import A, CB_ALL, CB_ATTR, CB_DATA, OP  # noqa: E402

EPOCH = 41


class Fail(AssertionError):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


class Mount:
    """A fileset mount of a fresh lower tree."""
    n = 0

    def __init__(self, ext, mnt, timeout=None, name=None, fill=True):
        Mount.n += 1
        self.name = name or "fs%d" % Mount.n
        self.lower = os.path.join(ext, self.name)
        self.tmp = os.path.join(ext, self.name + ".tmp")
        self.mnt = os.path.join(mnt, self.name)
        for d in (self.lower, self.tmp):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        os.makedirs(self.mnt, exist_ok=True)
        os.makedirs(os.path.join(self.lower, ".presto"))
        if fill:
            os.makedirs(os.path.join(self.lower, "d", "e"))
            for p, text in (("f", "old"), ("d/g", "gee"), ("d/e/h", "aitch")):
                with open(os.path.join(self.lower, p), "w") as f:
                    f.write(text)
        self.opts = "lower=%s,fileset=%s" % (self.lower, self.name)
        if timeout:
            self.opts += ",timeout=%d" % timeout
        self.mounted = False

    def mount(self):
        subprocess.run(["mount", "-t", "presto", "-o", self.opts, "presto",
                        self.mnt], check=True)
        self.mounted = True

    def umount(self):
        if self.mounted:
            subprocess.run(["umount", self.mnt], check=True)
            self.mounted = False

    def lp(self, rel=""):
        return os.path.join(self.lower, rel) if rel else self.lower

    def mp(self, rel=""):
        return os.path.join(self.mnt, rel) if rel else self.mnt

    def handle(self, rel=""):
        return genl.handle_of(self.lp(rel))

    def path_of(self, handle):
        """The lower path of @handle (a walk of the lower tree)."""
        for root, dirs, files in os.walk(self.lower):
            if os.path.relpath(root, self.lower) == ".presto":
                dirs[:] = []
                continue
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                if not os.path.islink(n) and genl.handle_of(n) == handle:
                    return n
        return None

    def warm_all(self, epoch):
        """Persist ATTR|DATA in @epoch on every lower object."""
        for root, dirs, files in os.walk(self.lower):
            if root == self.lower:
                dirs[:] = [d for d in dirs if d != ".presto"]
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                genl.set_cb(n, CB_ALL, epoch)


class Op(threading.Thread):
    """A file operation run aside (it may wait for the fake lento)."""

    def __init__(self, fn, *args):
        super().__init__(daemon=True)
        self.fn, self.args = fn, args
        self.result = self.error = None
        self.t0 = time.monotonic()
        self.start()

    def run(self):
        try:
            self.result = self.fn(*self.args)
        except OSError as e:
            self.error = e.errno
        self.elapsed = time.monotonic() - self.t0

    def wait(self, timeout=10):
        self.join(timeout)
        check(not self.is_alive(), "operation still waiting after %ss" %
              timeout)
        return self


def read_file(p):
    with open(p) as f:
        return f.read()


def serve(l, m, msg, epoch=EPOCH, flags=None):
    """Answer @msg as a lento whose cache is complete would (and that
    holds the permit)."""
    op = msg.u32("OP")
    if op == OP["PERMIT"]:
        check(msg.handle() == m.handle(), "PERMIT not of the root")
        check(l.reply(m.name, msg.u64("REQ"), 0) == 0, "REPLY refused")
        return op, m.lp()
    p = m.path_of(msg.handle())
    check(p, "upcall for a handle not in the lower tree")
    if flags is None:
        flags = CB_ATTR if op == OP["FETCH_ATTR"] else CB_ALL
    old = genl.get_cb(p)
    genl.set_cb(p, flags | (old[0] if old and old[1] == epoch else 0), epoch)
    check(l.reply(m.name, msg.u64("REQ"), 0, flags, epoch) == 0,
          "REPLY refused")
    return op, p


class Responder(threading.Thread):
    """Answers every upcall like a complete cache, counting them."""

    def __init__(self, l, m, epoch=EPOCH):
        super().__init__(daemon=True)
        self.l, self.m, self.epoch = l, m, epoch
        self.seen = []
        self.stop = False
        self.start()

    def run(self):
        while not self.stop:
            msg = self.l.next_msg(0.1, "UPCALL")
            if msg:
                self.seen.append(serve(self.l, self.m, msg, self.epoch))

    def halt(self):
        """Stop (the socket is the caller's again: one reader at a time)."""
        self.stop = True
        self.join()


def lento_for(m, epoch=EPOCH):
    l = genl.Lento()
    rep, err = l.register(m.name)
    check(err == 0, "REGISTER: %s" % os.strerror(err))
    if m.mounted:
        check(l.call("SET_EPOCH", m.name, genl.a_u64(A["EPOCH"], epoch)) == 0,
              "SET_EPOCH refused")
    return l


def upcalls(l, m):
    return l.stats(m.name)["UPCALLS"]


# ------------------------------------------------------------------ cases

def case_mount_options(ext, mnt):
    m = Mount(ext, mnt, timeout=7)
    m.mount()
    try:
        line = [x for x in open("/proc/mounts") if m.mnt in x][0]
        check("fileset=%s" % m.name in line and "timeout=7" in line,
              "/proc/mounts: %s" % line.strip())
        other = os.path.join(mnt, "other")
        os.makedirs(other, exist_ok=True)
        lower2 = os.path.join(ext, "other")
        os.makedirs(os.path.join(lower2, ".presto"), exist_ok=True)
        for opts, what in (
                ("lower=%s,fileset=%s" % (lower2, m.name), "same fileset"),
                ("lower=%s,fileset=.bad" % lower2, "name with a dot first"),
                ("lower=%s,fileset=a/b" % lower2, "name with a slash"),
                ("lower=%s,fileset=%s" % (lower2, "x" * 64), "64 bytes"),
                ("lower=%s,timeout=5" % lower2, "timeout without fileset"),
                ("lower=%s,fileset=ok,timeout=0" % lower2, "timeout 0"),
                ("lower=%s,fileset=ok,timeout=3601" % lower2, "timeout 3601")):
            p = subprocess.run(["mount", "-t", "presto", "-o", opts, "presto",
                                other], capture_output=True)
            check(p.returncode != 0, "mount accepted: %s" % what)
        stats = open("/proc/self/mountstats").read()
        check("fileset: %s" % m.name in stats and "upcalls 0" in stats,
              "mountstats lacks the channel's line")
    finally:
        m.umount()


def case_no_lento_enotconn(ext, mnt):
    m = Mount(ext, mnt, timeout=1)
    m.mount()
    try:
        op = Op(os.stat, m.mp("f")).wait()
        check(op.error == errno.ENOTCONN, "stat without lento: %s" %
              (op.error and errno.errorcode[op.error]))
        check(1.0 <= op.elapsed < 4, "waited %.1f s, timeout=1" % op.elapsed)
    finally:
        m.umount()


def _interrupted(path):
    class Intr(Exception):
        pass

    def raise_intr(sig, frame):
        raise Intr()
    signal.signal(signal.SIGUSR1, raise_intr)
    try:
        os.stat(path)
    except Intr:
        os._exit(0)
    except OSError as e:
        os._exit(10 + e.errno)
    os._exit(1)


def case_signal_interrupts(ext, mnt):
    m = Mount(ext, mnt, timeout=60)
    m.mount()
    try:
        t0 = time.monotonic()
        os.stat(m.mp())
        check(time.monotonic() - t0 < 1, "a stat of the mount point waited")
        pid = os.fork()
        if pid == 0:
            _interrupted(m.mp("f"))
        time.sleep(0.5)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGUSR1)
        _, status = os.waitpid(pid, 0)
        check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
              "the signal did not end the wait (status %d)" % status)
        check(time.monotonic() - t0 < 3, "the signal took long")
    finally:
        m.umount()


def case_netns_close_keeps_lento(ext, mnt):
    """A port id names a socket only within its network namespace: a
    socket of another namespace bound to lento's port id and closed is not
    lento going away."""
    m = Mount(ext, mnt)
    m.warm_all(EPOCH)
    m.mount()
    genl.set_cb(m.lp("f"), CB_ATTR, EPOCH)
    l = lento_for(m)
    try:
        code = ("import socket\n"
                "s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)\n"
                "s.bind((%d, 0))\n"
                "s.close()\n" % l.portid)
        r = subprocess.run(["unshare", "--net", sys.executable, "-c", code],
                           capture_output=True, text=True)
        check(r.returncode == 0, "binding port id %d in a new network "
              "namespace: %s" % (l.portid, r.stderr.strip()))
        time.sleep(0.2)
        check(l.stats(m.name)["REGISTERED"] == 1, "a socket closed in "
              "another network namespace unregistered lento")
        op = Op(read_file, m.mp("f"))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_FILE"],
              "the miss did not reach lento")
        serve(l, m, msg)
        check(op.wait().result == "old", "read after the answer")
    finally:
        l.close()
        m.umount()


def cgroup2_root(mnt):
    """The cgroup v2 hierarchy: the system's, or one mounted for us."""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "/sys/fs/cgroup", None
    root = os.path.join(mnt, ".cgroup2")
    os.makedirs(root, exist_ok=True)
    subprocess.run(["mount", "-t", "cgroup2", "cgroup2", root], check=True)
    return root, root


def wait_for(cond, seconds, what):
    end = time.monotonic() + seconds
    while not cond():
        check(time.monotonic() < end, what)
        time.sleep(0.05)


def write_sysfs(path, value):
    with open(path, "w") as f:
        f.write(value)


def case_cgroup_freeze_restarts(ext, mnt):
    """A process whose cgroup is frozen while it waits for a fetch is
    thawed into the same call: its open goes on, no EINTR. cat, a C
    program, sees an EINTR that Python would retry by itself."""
    m = Mount(ext, mnt, timeout=60)
    m.warm_all(EPOCH)
    m.mount()
    genl.set_cb(m.lp("f"), CB_ATTR, EPOCH)
    l = lento_for(m)
    root, mounted = cgroup2_root(mnt)
    cg = os.path.join(root, "presto-freeze")
    os.makedirs(cg, exist_ok=True)
    p = None
    try:
        p = subprocess.Popen(
            ["sh", "-c", "echo $$ > %s/cgroup.procs && exec cat %s" %
             (cg, m.mp("f"))], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_FILE"], "FETCH_FILE")
        write_sysfs(os.path.join(cg, "cgroup.freeze"), "1")
        wait_for(lambda: "frozen 1" in read_file(os.path.join(
            cg, "cgroup.events")), 10, "the cgroup did not freeze")
        write_sysfs(os.path.join(cg, "cgroup.freeze"), "0")
        serve(l, m, msg)
        out, err = p.communicate(timeout=10)
        check(p.returncode == 0 and out == "old",
              "cat after the thaw: exit %d, %r" % (p.returncode, err.strip()))
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        os.rmdir(cg)
        if mounted:
            subprocess.run(["umount", mounted])
        l.close()
        m.umount()


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def case_suspend_while_fetch_waits(ext, mnt):
    """A suspend goes on while a lookup waits for lento, even with
    another process blocked on that directory's lock (the freezer's test
    mode stops after freezing every task and thaws them). Both calls then
    go on as if nothing happened."""
    check(os.path.exists("/sys/power/pm_test"),
          "the kernel lacks CONFIG_PM_DEBUG (/sys/power/pm_test)")
    m = Mount(ext, mnt, timeout=60)
    m.warm_all(EPOCH)
    m.mount()
    genl.set_cb(m.lp("d"), CB_ATTR, EPOCH)
    l = lento_for(m)
    procs = []
    responder = None
    timeout = read_file("/sys/power/pm_freeze_timeout").strip()
    try:
        procs.append(subprocess.Popen(["cat", m.mp("d/g")],
                                      stdout=subprocess.PIPE, text=True))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_DIR"], "FETCH_DIR of d")
        # An O_CREAT open locks the directory exclusively: it sleeps,
        # unkillable, behind the lookup's shared lock.
        procs.append(subprocess.Popen(["touch", m.mp("d/y")]))
        wait_for(lambda: proc_state(procs[1].pid) == "D", 5,
                 "touch did not block on the directory")
        write_sysfs("/sys/module/suspend/parameters/pm_test_delay", "0")
        # The kernel's default: the KASAN kernel took more than 5 s.
        write_sysfs("/sys/power/pm_freeze_timeout", "20000")
        write_sysfs("/sys/power/pm_test", "freezer")
        try:
            write_sysfs("/sys/power/state", "freeze")
            suspended = None
        except OSError as e:
            suspended = e
        finally:
            write_sysfs("/sys/power/pm_test", "none")
        check(suspended is None, "the suspend failed: %s" % suspended)
        serve(l, m, msg)
        responder = Responder(l, m)
        out, _ = procs[0].communicate(timeout=10)
        check(procs[0].returncode == 0 and out == "gee",
              "cat after the resume: exit %d" % procs[0].returncode)
        check(procs[1].wait(timeout=10) == 0, "touch after the resume")
        check(os.path.exists(m.lp("d/y")), "d/y is not in the cache")
    finally:
        write_sysfs("/sys/power/pm_freeze_timeout", timeout)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if responder:
            responder.halt()
        l.close()
        m.umount()


def case_mount_notice_not_lost(ext, mnt):
    """A MOUNTED notice that finds lento's receive buffer full is sent
    again, as upcalls are: a lento that registered before the mount
    learns of it."""
    x = Mount(ext, mnt)
    x.warm_all(EPOCH)
    names = ["n%d" % i for i in range(12)]
    for n in names:
        create(x.lp(n))
        genl.set_cb(x.lp(n), 0, EPOCH)
    x.mount()
    y = Mount(ext, mnt)
    l = genl.Lento(rcvbuf=4096)
    watch = genl.Lento()
    ops = []
    responder = None
    try:
        for m in (x, y):
            check(l.register(m.name)[1] == 0, "REGISTER %s" % m.name)
        check(l.call("SET_EPOCH", x.name, genl.a_u64(A["EPOCH"], EPOCH))
              == 0, "SET_EPOCH")
        # Misses that nobody reads fill lento's buffer: their upcalls
        # then wait in presto, sent again and again.
        ops = [Op(os.stat, x.mp(n)) for n in names]
        r0 = watch.stats(x.name)["RESENT"]
        wait_for(lambda: watch.stats(x.name)["RESENT"] > r0 + 2, 5,
                 "lento's buffer did not fill")
        y.mount()
        msg = l.next_msg(5, "MOUNTED")
        check(msg is not None, "MOUNTED never came")
        check(msg.handle("ROOT") == y.handle(), "MOUNTED of the wrong mount")
        responder = Responder(l, x)
        for op in ops:
            check(op.wait().error is None, "a stat failed")
    finally:
        if responder:
            responder.halt()
        l.close()
        watch.close()
        for op in ops:
            op.join(35)
        y.umount()
        x.umount()


def case_register_then_serve(ext, mnt):
    m = Mount(ext, mnt)
    l = genl.Lento()
    try:
        check(l.version == genl.VERSION, "family version %d" % l.version)
        rep, err = l.register(m.name)
        check(err == 0 and rep and rep.attrs[A["MOUNTED"]] == b"\0",
              "REGISTER before the mount")
        m.mount()
        msg = l.next_msg(5, "MOUNTED")
        check(msg and msg.handle("ROOT") == m.handle() and
              msg.u32("TIMEOUT_MS") == 30000, "MOUNTED notice")
        check(l.call("SET_EPOCH", m.name, genl.a_u64(A["EPOCH"], EPOCH)) == 0,
              "SET_EPOCH")
        os.stat(m.mp())         # the root's attributes never wait
        op = Op(os.listdir, m.mp())
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_DIR"], "FETCH_DIR")
        serve(l, m, msg)
        check(sorted(op.wait().result) == ["d", "f"], "listing: %s" %
              op.result)
        op = Op(os.stat, m.mp("f"))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_ATTR"] and
              msg.handle() == m.handle("f"), "FETCH_ATTR of f")
        serve(l, m, msg)
        check(op.wait().error is None, "stat after the answer")
        before = upcalls(l, m)
        check(sorted(os.listdir(m.mp())) == ["d", "f"], "listing again")
        os.stat(m.mp("f"))
        check(upcalls(l, m) == before, "a warm listing made an upcall")
        m.umount()
        check(l.next_msg(5, "UNMOUNTED"), "UNMOUNTED notice")
    finally:
        l.close()
        m.umount()


def case_xattrs_need_attr(ext, mnt):
    """getxattr and listxattr wait for the attributes, as stat does:
    lento brings the server's xattrs with them."""
    m = Mount(ext, mnt)
    os.setxattr(m.lp("f"), "user.k", b"v1")
    os.setxattr(m.lp("d"), "user.dk", b"")
    m.mount()
    l = lento_for(m)
    try:
        op = Op(os.listdir, m.mp())
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_DIR"], "FETCH_DIR")
        serve(l, m, msg)
        op.wait()
        op = Op(os.getxattr, m.mp("f"), "user.k")
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_ATTR"] and
              msg.handle() == m.handle("f"), "getxattr: FETCH_ATTR of f")
        check(op.is_alive(), "getxattr answered before lento")
        os.setxattr(m.lp("f"), "user.k", b"v2")    # what lento fetched
        serve(l, m, msg)
        check(op.wait().result == b"v2", "getxattr after the answer: %r" %
              (op.result,))
        op = Op(os.listxattr, m.mp("d"))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_ATTR"] and
              msg.handle() == m.handle("d"), "listxattr: FETCH_ATTR of d")
        serve(l, m, msg)
        check(op.wait().result == ["user.dk"], "listxattr: %r" %
              (op.result,))
        before = upcalls(l, m)
        check(os.getxattr(m.mp("f"), "user.k") == b"v2" and
              os.listxattr(m.mp("f")) == ["user.k"], "warm xattrs")
        check(upcalls(l, m) == before, "warm xattrs made an upcall")
    finally:
        l.close()
        m.umount()


def case_refusals(ext, mnt):
    m = Mount(ext, mnt)
    m.mount()
    l = lento_for(m)
    l2 = genl.Lento()
    F = genl.a_str(A["FILESET"], m.name)
    h = genl.a_handle(A["HANDLE"], *m.handle())
    try:
        cases = [
            ("REPLY", [F, genl.a_u64(A["REQ"], 999), genl.a_u32(A["ERRNO"], 0)],
             errno.ESRCH, "an unknown upcall"),
            ("REPLY", [F, genl.a_u64(A["REQ"], 1), genl.a_u32(A["ERRNO"], 512)],
             errno.EINVAL, "errno 512"),
            ("REPLY", [F, genl.a_u64(A["REQ"], 1)], errno.EINVAL,
             "no ERRNO"),
            ("REPLY", [F, genl.a_u64(A["REQ"], 1), genl.a_u32(A["ERRNO"], 0),
                       genl.a_u32(A["FLAGS"], 1)], errno.EINVAL,
             "FLAGS without EPOCH"),
            ("BREAK", [F, h, genl.a_u32(A["FLAGS"], 4)], errno.EINVAL,
             "an unknown flag"),
            ("BREAK", [F, genl.attr(A["HANDLE"], b"\0" * 12),
                       genl.a_u32(A["FLAGS"], 1)], errno.EINVAL,
             "a short handle"),
            ("BREAK", [F, genl.a_handle(A["HANDLE"], 1, 1, 7),
                       genl.a_u32(A["FLAGS"], 1)], errno.EINVAL,
             "handle padding"),
            ("BREAK", [F, genl.a_u64(A["HANDLE"], 1),
                       genl.a_u32(A["FLAGS"], 1)], errno.EINVAL,
             "an 8-byte handle"),
            ("SET_EPOCH", [F, genl.a_u64(A["EPOCH"], 0)], errno.EINVAL,
             "epoch 0"),
            ("SET_EPOCH", [F, genl.a_u64(A["EPOCH"], 2**64 - 1)],
             errno.EINVAL, "epoch 2^64-1, presto's own for local objects"),
            ("KML_SYNC", [F, genl.a_u64(A["REQ"], 0)], errno.EINVAL,
             "REQ 0, which names no request"),
            ("SET_EPOCH", [F, genl.a_u32(A["EPOCH"], 3)], errno.EINVAL,
             "a 4-byte epoch"),
            ("REGISTER", [], errno.EINVAL, "no FILESET"),
            ("REGISTER", [genl.a_str(A["FILESET"], ".x")], errno.EINVAL,
             "a name with a dot first"),
            ("REGISTER", [genl.a_str(A["FILESET"], "x" * 64)], errno.EINVAL,
             "a 64-byte name"),
            ("REGISTER", [genl.attr(A["FILESET"], b"abc")], errno.EINVAL,
             "a name without NUL"),
            ("REGISTER", [genl.attr(A["FILESET"], m.name.encode() +
                                    b"\0junk\0")], errno.EINVAL,
             "a name with bytes after its NUL"),
            ("NOTIFY", [F, h, genl.attr(A["NAME"], b"y\0z\0"),
                        genl.a_u32(A["EVENT"], 1)], errno.EINVAL,
             "NOTIFY: a NAME with bytes after its NUL"),
            ("REGISTER", [F, genl.attr(99, b"")], errno.EINVAL,
             "an unknown attribute"),
            ("REGISTER", [F, genl.a_handle(A["ROOT"], 1, 1)], errno.EINVAL,
             "ROOT from user space"),
            ("STATS", [genl.a_str(A["FILESET"], "nosuch")], errno.ENOENT,
             "STATS of no fileset"),
            ("SET_FLAGS", [F, h, genl.a_u32(A["FLAGS"], 1)], errno.EINVAL,
             "SET_FLAGS without EPOCH"),
            ("PERMIT", [F, genl.a_u8(A["PERMIT"], 2)], errno.EINVAL,
             "PERMIT 2"),
            ("PERMIT", [F, genl.a_u8(A["PERMIT"], 0)], errno.EINVAL,
             "a revoke without REQ"),
            ("PERMIT", [F], errno.EINVAL, "PERMIT without PERMIT"),
            ("KML_ACK", [F], errno.EINVAL, "KML_ACK without SEQ"),
            ("KML_ACK", [F, genl.a_u32(A["SEQ"], 1)], errno.EINVAL,
             "a 4-byte SEQ"),
            ("KML_SYNC", [F], errno.EINVAL, "KML_SYNC without REQ"),
            ("KML_SYNC", [F, genl.a_u64(A["REQ"], 1),
                          genl.a_u64(A["KML_DURABLE"], 1)], errno.EINVAL,
             "KML_DURABLE from user space"),
        ]
        for cmd, attrs, want, what in cases:
            rep, err = l.request(cmd, *attrs)
            # Out of a policy's range is ERANGE, other refusals EINVAL.
            ok = (errno.EINVAL, errno.ERANGE) if want == errno.EINVAL \
                else (want,)
            check(err in ok, "%s (%s): %s, not %s" % (
                cmd, what, errno.errorcode.get(err, err),
                errno.errorcode[want]))
        rep, err = l2.register(m.name)
        check(err == errno.EBUSY, "a second lento registered")
        check(l2.call("BREAK", m.name, h, genl.a_u32(A["FLAGS"], 1)) ==
              errno.EPERM, "BREAK from a socket that is not the lento")
        check(l2.request("STATS", F)[1] == 0, "STATS from anyone")
        l2.send_raw(77, F)
        check(l2.next_msg(0.2) is None, "a reply to an unknown command")
        # Without CAP_SYS_ADMIN.
        code = ("import sys; sys.path.insert(0, %r); import genl, os\n"
                "l = genl.Lento()\n"
                "e1 = l.register(%r)[1]\n"
                "e2 = l.request('STATS', genl.a_str(genl.A['FILESET'], %r))[1]\n"
                "print(e1, e2)\n" % (os.path.dirname(genl.__file__),
                                     "unpriv", m.name))
        p = subprocess.run(["setpriv", "--reuid", "1000", "--regid", "1000",
                            "--clear-groups", sys.executable, "-c", code],
                           capture_output=True, text=True)
        check(p.stdout.split() == [str(errno.EPERM), "0"],
              "unprivileged REGISTER/STATS: %r %r" % (p.stdout, p.stderr))
    finally:
        l.close()
        l2.close()
        m.umount()


def case_coalesced(ext, mnt):
    m = Mount(ext, mnt)
    m.warm_all(EPOCH)
    m.mount()
    genl.set_cb(m.lp("d/g"), 0, EPOCH)
    l = lento_for(m)
    try:
        s0 = l.stats(m.name)
        ops = [Op(os.stat, m.mp("d/g")) for _ in range(8)]
        msg = l.next_msg(5, "UPCALL")
        check(msg, "no upcall")
        time.sleep(0.3)
        serve(l, m, msg)
        for op in ops:
            check(op.wait().error is None, "stat failed")
        check(l.next_msg(0.3, "UPCALL") is None, "a second upcall")
        s1 = l.stats(m.name)
        check(s1["UPCALLS"] - s0["UPCALLS"] == 1 and
              s1["JOINED"] - s0["JOINED"] == 7,
              "upcalls %d joined %d" % (s1["UPCALLS"] - s0["UPCALLS"],
                                        s1["JOINED"] - s0["JOINED"]))
    finally:
        l.close()
        m.umount()


def case_new_lento_resend(ext, mnt):
    m = Mount(ext, mnt, timeout=20)
    m.warm_all(EPOCH)
    m.mount()
    genl.set_cb(m.lp("f"), CB_ATTR, EPOCH)
    l = lento_for(m)
    try:
        op = Op(read_file, m.mp("f"))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_FILE"], "FETCH_FILE")
        req = msg.u64("REQ")
        l.close()               # a crash: the socket goes
        time.sleep(0.2)
        l = genl.Lento()
        check(l.stats(m.name)["REGISTERED"] == 0, "still registered")
        check(l.register(m.name)[1] == 0, "a new lento registers")
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u64("REQ") == req, "the upcall again")
        serve(l, m, msg)
        check(op.wait().result == "old", "read after the new lento answered")
        check(l.stats(m.name)["RESENT"] >= 1, "RESENT not counted")
    finally:
        l.close()
        m.umount()


def replace(m, rel, text, flags=CB_ALL, epoch=EPOCH):
    """Fill @rel as lento does: a temporary file renamed over it."""
    tmp = os.path.join(m.tmp, "body")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    genl.set_cb(tmp, flags, epoch)
    old = m.handle(rel)
    os.rename(tmp, m.lp(rel))
    return old


def case_fetch_renames(ext, mnt):
    m = Mount(ext, mnt, timeout=5)
    m.warm_all(EPOCH)
    m.mount()
    # A placeholder: attributes, no content.
    os.truncate(m.lp("f"), 0)
    os.truncate(m.lp("f"), 5)
    genl.set_cb(m.lp("f"), CB_ATTR, EPOCH)
    l = lento_for(m)
    try:
        n0 = upcalls(l, m)
        op = Op(read_file, m.mp("f"))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_FILE"], "FETCH_FILE")
        replace(m, "f", "fresh")
        check(l.reply(m.name, msg.u64("REQ"), 0) == 0, "REPLY")
        check(op.wait().result == "fresh", "read %r" % op.result)
        check(upcalls(l, m) == n0 + 1, "the reopen made an upcall")
        # An open file keeps what it opened; a new open sees the new one.
        with open(m.mp("f")) as f:
            old = replace(m, "f", "newer")
            check(l.call("BREAK", m.name, genl.a_handle(A["HANDLE"], *old),
                         genl.a_u32(A["FLAGS"], CB_ALL)) == 0, "BREAK")
            check(f.read() == "fresh", "the open file changed")
            check(read_file(m.mp("f")) == "newer", "a new open")
        check(upcalls(l, m) == n0 + 1, "the new version made an upcall")
    finally:
        l.close()
        m.umount()


def case_dir_break(ext, mnt):
    m = Mount(ext, mnt)
    m.warm_all(EPOCH)
    m.mount()
    l = lento_for(m)
    try:
        check(not os.path.exists(m.mp("d/new")), "d/new exists")
        n0 = upcalls(l, m)
        with open(m.lp("d/new"), "w") as f:
            f.write("n")
        genl.set_cb(m.lp("d/new"), CB_ALL, EPOCH)
        genl.set_cb(m.lp("d"), CB_ATTR, EPOCH)   # lento clears it first
        check(l.call("BREAK", m.name, genl.a_handle(A["HANDLE"],
                                                     *m.handle("d")),
                     genl.a_u32(A["FLAGS"], CB_DATA)) == 0, "BREAK")
        op = Op(os.stat, m.mp("d/new"))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_DIR"] and
              msg.handle() == m.handle("d"), "FETCH_DIR of d")
        serve(l, m, msg)
        check(op.wait().error is None, "d/new after the break")
        check(sorted(os.listdir(m.mp("d"))) == ["e", "g", "new"], "listing")
        check(upcalls(l, m) == n0 + 1, "more than one upcall")
        check(l.stats(m.name)["BREAKS"] >= 1, "BREAKS not counted")
    finally:
        l.close()
        m.umount()


def case_watchers(ext, mnt):
    """Changes from the server reach inotify: a file BREAK is a MODIFY;
    a BREAK of a directory whose names are watched makes presto say
    WATCHED, and lento's NOTIFYs become CREATE and DELETE events."""
    m = Mount(ext, mnt)
    m.warm_all(EPOCH)
    m.mount()
    l = lento_for(m)
    w = inotify.Watcher()
    F = genl.a_str(A["FILESET"], m.name)
    d = genl.a_handle(A["HANDLE"], *m.handle("d"))

    def brk(rel, flags=CB_ALL):
        check(l.call("BREAK", m.name, genl.a_handle(A["HANDLE"],
                                                     *m.handle(rel)),
                     genl.a_u32(A["FLAGS"], flags)) == 0, "BREAK " + rel)

    def notify(h, name, ev):
        return l.call("NOTIFY", m.name, h, genl.attr(A["NAME"],
                                                     name + b"\0"),
                      genl.a_u32(A["EVENT"], ev))

    def seen(want, timeout=3):
        evs = w.events(timeout)
        got = [(os.path.basename(p), inotify.describe(mask), n)
               for p, mask, n in evs]
        check(got == want, "events %r, not %r" % (got, want))

    try:
        os.stat(m.mp("d/g"))         # in memory, as a watcher's would be
        dwd = w.add(m.mp("d"), inotify.IN_CREATE | inotify.IN_DELETE |
                    inotify.IN_MODIFY)
        # A file: MODIFY, to its directory's watchers with its name.
        brk("d/g")
        seen([("d", "MODIFY", "g")])
        check(l.next_msg(0.3, "WATCHED") is None, "WATCHED for a file")
        # ATTR alone is no news of the content.
        brk("d/g", CB_ATTR)
        seen([])
        # A directory whose names are watched: WATCHED, with its handle.
        genl.set_cb(m.lp("d"), CB_ATTR, EPOCH)
        brk("d", CB_DATA)
        msg = l.next_msg(3, "WATCHED")
        check(msg and msg.handle() == m.handle("d"), "WATCHED of d")
        check(notify(d, b"new", genl.EV["CREATE"]) == 0, "NOTIFY CREATE")
        check(notify(d, b"sub", genl.EV["CREATE"] | genl.EV["DIR"]) == 0,
              "NOTIFY CREATE DIR")
        check(notify(d, b"g", genl.EV["DELETE"]) == 0, "NOTIFY DELETE")
        seen([("d", "CREATE", "new"), ("d", "CREATE|ISDIR", "sub"),
              ("d", "DELETE", "g")])
        # What NOTIFY refuses.
        for name, ev, want, what in (
                (b"a/b", genl.EV["CREATE"], (errno.EINVAL,), "a slash"),
                (b"..", genl.EV["CREATE"], (errno.EINVAL,), ".."),
                (b".", genl.EV["DELETE"], (errno.EINVAL,), "."),
                (b"", genl.EV["CREATE"], (errno.EINVAL,), "no name"),
                (b"x" * 256, genl.EV["CREATE"], (errno.EINVAL, errno.ERANGE),
                 "256 bytes"),
                (b"x", genl.EV["CREATE"] | genl.EV["DELETE"],
                 (errno.EINVAL,), "CREATE and DELETE"),
                (b"x", genl.EV["DIR"], (errno.EINVAL,), "DIR alone"),
                (b"x", 8, (errno.EINVAL, errno.ERANGE), "an unknown event")):
            err = notify(d, name, ev)
            check(err in want, "NOTIFY with %s: %s" % (
                what, errno.errorcode.get(err, err)))
        rep, err = l.request("NOTIFY", F, d, genl.a_u32(A["EVENT"], 1))
        check(err == errno.EINVAL, "NOTIFY without NAME")
        os.stat(m.mp("f"))
        check(notify(genl.a_handle(A["HANDLE"], *m.handle("f")), b"x",
                     genl.EV["CREATE"]) == errno.ENOTDIR,
              "NOTIFY of a file")
        check(notify(genl.a_handle(A["HANDLE"], 1 << 40, 5), b"x",
                     genl.EV["CREATE"]) == 0,
              "NOTIFY of an object not in memory")
        seen([])
        l2 = genl.Lento()
        try:
            check(l2.call("NOTIFY", m.name, d, genl.attr(A["NAME"], b"y\0"),
                          genl.a_u32(A["EVENT"], 1)) == errno.EPERM,
                  "NOTIFY from a socket that is not the lento")
        finally:
            l2.close()
        # Nobody watching the names: no WATCHED.
        w.remove(dwd)
        w.events(0.3)
        brk("d", CB_DATA)
        check(l.next_msg(0.5, "WATCHED") is None, "WATCHED, unwatched")
    finally:
        w.close()
        l.close()
        m.umount()


def case_purge(ext, mnt):
    m = Mount(ext, mnt)
    m.warm_all(EPOCH)
    m.mount()
    l = lento_for(m)
    h = genl.a_handle(A["HANDLE"], *m.handle("d/g"))
    try:
        f = open(m.mp("d/g"))
        check(l.call("PURGE", m.name, h) == errno.EBUSY, "PURGE of an open file")
        f.close()
        genl.set_cb(m.lp("d/g"), CB_ATTR, EPOCH)   # lento clears it first
        check(l.call("PURGE", m.name, h) == 0, "PURGE of a closed file")
        op = Op(read_file, m.mp("d/g"))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["FETCH_FILE"], "FETCH_FILE after PURGE")
        serve(l, m, msg)
        check(op.wait().result == "gee", "read after refetch")
        check(l.call("PURGE", m.name, genl.a_handle(A["HANDLE"],
                                                     *m.handle("d"))) ==
              errno.EINVAL, "PURGE of a directory")
        # Changed through the mount and closed: kept until lento has
        # acknowledged the records, and so knows the file is dirty.
        r = Responder(l, m)
        try:
            create(m.mp("d/g"), "mine")
        finally:
            r.halt()
        genl.set_cb(m.lp("d/g"), CB_ATTR, EPOCH)
        check(l.call("PURGE", m.name, h) == errno.EBUSY,
              "PURGE of a change not acknowledged")
        os.sync()
        durable = int(kml_state(m)["durable_seq"])
        check(durable == int(kml_state(m)["next_seq"]) - 1, "synced")
        check(l.call("KML_ACK", m.name, genl.a_u64(A["SEQ"], durable)) == 0,
              "KML_ACK")
        check(l.call("PURGE", m.name, h) == 0, "PURGE once acknowledged")
    finally:
        l.close()
        m.umount()


def warm_reads(mp):
    """What I-1 says never leaves the kernel, over the whole tree."""
    subprocess.run(["ls", "-lR", mp], check=True, capture_output=True)
    subprocess.run(["find", mp], check=True, capture_output=True)
    for root, dirs, files in os.walk(mp):
        for n in files:
            p = os.path.join(root, n)
            os.stat(p)
            with open(p, "rb") as f:
                f.read()
                if os.fstat(f.fileno()).st_size:
                    with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
                        mm[:]
        for n in dirs:
            os.listdir(os.path.join(root, n))


def case_warm_remount(ext, mnt):
    m = Mount(ext, mnt)
    for i in range(50):
        with open(m.lp("d/e/x%d" % i), "w") as f:
            f.write("x" * i)
    m.warm_all(EPOCH)
    m.mount()
    l = genl.Lento()
    check(l.register(m.name)[1] == 0, "REGISTER")
    try:
        # No epoch confirmed: the persisted flags do not count yet.
        op = Op(os.stat, m.mp("f"))
        msg = l.next_msg(5, "UPCALL")
        check(msg, "no upcall before SET_EPOCH")
        check(l.reply(m.name, msg.u64("REQ"), errno.EIO) == 0, "REPLY")
        check(op.wait().error == errno.EIO, "lento's errno passed on")
        check(l.call("SET_EPOCH", m.name, genl.a_u64(A["EPOCH"], EPOCH)) == 0,
              "SET_EPOCH")
        n0 = upcalls(l, m)
        t0 = time.monotonic()
        warm_reads(m.mnt)
        took = time.monotonic() - t0
        check(upcalls(l, m) == n0, "warm reads made %d upcalls" %
              (upcalls(l, m) - n0))
        # Warm opens reach lento's LRU as access hints, batched.
        files = {m.handle(os.path.relpath(os.path.join(r, n), m.lower))
                 for r, _, fs in os.walk(m.lower) if ".presto" not in r
                 for n in fs}
        hinted = set()
        msgs = 0
        while not files <= hinted:
            msg = l.next_msg(3, "ACCESS")
            check(msg, "no hint of %d files" % len(files - hinted))
            msgs += 1
            data = msg.attrs[A["HANDLES"]]
            check(len(data) % 16 == 0, "HANDLES of %d bytes" % len(data))
            hinted |= {struct.unpack_from("=QI", data, i)
                       for i in range(0, len(data), 16)}
        # In two batches at most, if the reads fit the batch's delay.
        if took < 0.8:
            check(msgs <= 2, "%d hint messages for %d files" %
                  (msgs, len(files)))
        else:
            print("  # the warm reads took %.2f s: too slow here to fill a "
                  "batch within its delay; %d messages not judged" %
                  (took, msgs))
        # A new epoch turns every flag off.
        check(l.call("SET_EPOCH", m.name, genl.a_u64(A["EPOCH"], EPOCH + 1))
              == 0, "SET_EPOCH")
        r = Responder(l, m, EPOCH + 1)
        warm_reads(m.mnt)
        r.halt()
        check(r.seen, "a new epoch made no upcall")
        n0 = upcalls(l, m)
        warm_reads(m.mnt)
        check(upcalls(l, m) == n0, "warm again: %d upcalls" %
              (upcalls(l, m) - n0))
    finally:
        l.close()
        m.umount()


def case_hints_full_batch(ext, mnt):
    """A second of opens past the batch's capacity: a full batch of 256
    handles reaches lento whole in one message, the rest are dropped (hints
    are lossy), and a later open is hinted again. The 300 opens must all
    fall within the batch's delay (a second): a round whose opens took
    longer (a slow emulator) is taken again with 300 other files, three
    times at most."""
    m = Mount(ext, mnt)
    for r in range(3):
        os.makedirs(m.lp("many%d" % r))
        for i in range(300):
            with open(m.lp("many%d/%03d" % (r, i)), "w") as f:
                f.write("x")
    m.warm_all(EPOCH)
    m.mount()
    l = genl.Lento()
    check(l.register(m.name)[1] == 0, "REGISTER")
    try:
        check(l.call("SET_EPOCH", m.name, genl.a_u64(A["EPOCH"], EPOCH)) == 0,
              "SET_EPOCH")
        took = []
        for r in range(3):
            names = ["many%d/%03d" % (r, i) for i in range(300)]
            t0 = time.monotonic()
            for n in names:
                os.close(os.open(m.mp(n), os.O_RDONLY))
            took.append(time.monotonic() - t0)
            msg = l.next_msg(5, "ACCESS")
            check(msg, "no hints")
            data = msg.attrs[A["HANDLES"]]
            if took[-1] < 0.8:
                break
            while l.next_msg(2, "ACCESS"):      # the round's rest
                pass
        else:
            print("  # 300 opens took %s s: too slow here to fill a batch "
                  "within its delay; not judged" %
                  ", ".join("%.2f" % t for t in took))
            return
        check(len(data) == 256 * 16, "a batch of %d bytes" % len(data))
        hinted = {struct.unpack_from("=QI", data, i)
                  for i in range(0, len(data), 16)}
        check(len(hinted) == 256, "%d distinct handles" % len(hinted))
        files = {m.handle(n) for n in names}
        check(hinted <= files, "hints of files not opened")
        check(not l.next_msg(2, "ACCESS"), "the dropped hints came after all")
        late = sorted(files - hinted)[0]
        name = os.path.relpath(m.path_of(late), m.lower)
        with open(m.mp(name)) as f:
            f.read()
        msg = l.next_msg(5, "ACCESS")
        check(msg and msg.attrs[A["HANDLES"]] == struct.pack("=QII", *late, 0),
              "a dropped file opened again is hinted")
    finally:
        l.close()
        m.umount()


def case_local_creates(ext, mnt):
    m = Mount(ext, mnt, timeout=1)
    m.warm_all(EPOCH)
    m.mount()
    l = lento_for(m)
    n0 = upcalls(l, m)
    r = Responder(l, m)
    try:
        os.makedirs(m.mp("new/sub"))
        with open(m.mp("new/sub/f"), "w") as f:
            f.write("local")
        os.symlink("f", m.mp("new/sub/l"))
        check(sorted(os.listdir(m.mp("new/sub"))) == ["f", "l"], "listing")
        check(read_file(m.mp("new/sub/l")) == "local", "read")
        check(not os.path.exists(m.mp("new/nothing")), "negative lookup")
        r.halt()
        check([op for op, _ in r.seen] == [OP["PERMIT"]],
              "upcalls besides the one PERMIT: %s" % r.seen)
        check(upcalls(l, m) == n0 + 1, "local objects made upcalls")
    finally:
        r.halt()
        l.close()
        m.umount()


def kml_state(m):
    """The mount's kml: lines of /proc/self/mountstats, as a dict."""
    out, mine = {}, False
    for line in open("/proc/self/mountstats"):
        if line.startswith("device "):
            mine = (" mounted on %s " % m.mnt) in line
        elif mine and line.strip().startswith(("kml:", "fileset:")):
            w = line.split()[1 if line.strip().startswith("kml:") else 2:]
            out.update(zip(w[0::2], w[1::2]))
    return out


def create(path, text="x"):
    with open(path, "w") as f:
        f.write(text)


def case_permit_upcall(ext, mnt):
    """The first change asks for the permit, once for all changes waiting;
    a refusal fails them; granted, changes never ask again."""
    m = Mount(ext, mnt, timeout=5)
    m.warm_all(EPOCH)
    m.mount()
    try:
        l = lento_for(m)
        rep, err = l.register(m.name)
        check(rep.attrs[A["PERMIT"]] == b"\0", "REGISTER: PERMIT not 0")
        l.close()
        op = Op(create, m.mp("nolento"))
        check(op.wait().error == errno.ENOTCONN,
              "a change with no lento: %s" % op.error)
        check(not os.path.exists(m.lp("nolento")), "done without a permit")
        l = lento_for(m)
        # A change waits for the permit holding its directory's lock:
        # changes in other directories join its upcall (if their path
        # needs no lookup in a directory locked so).
        for p in ("d/e", "d/g", "f"):
            os.stat(m.mp(p))
        ops = [Op(create, m.mp("c0")), Op(create, m.mp("d/c1")),
               Op(create, m.mp("d/e/c2")), Op(os.chmod, m.mp("f"), 0o600),
               Op(os.setxattr, m.mp("d/g"), "user.x", b"1")]
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["PERMIT"], "no PERMIT upcall")
        time.sleep(0.5)
        check(l.reply(m.name, msg.u64("REQ"), errno.EROFS) == 0, "REPLY")
        errs = [op.wait().error for op in ops]
        check(errs == [errno.EROFS] * len(ops), "refused: %s, %s" % (
            errs, l.stats(m.name)))
        check(l.next_msg(0.3, "UPCALL") is None, "a second upcall")
        s = l.stats(m.name)
        check(s["PERMIT"] == 2 and s["JOINED"] == 4 and
              s["PERMIT_HELD"] == 0, "counters: %s" % s)
        check(not os.path.exists(m.lp("c0")) and
              os.stat(m.lp("f")).st_mode & 0o777 != 0o600, "done refused")
        # Granted: one upcall, then changes of every kind run alone.
        op = Op(os.mkdir, m.mp("g"))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["PERMIT"], "PERMIT again")
        check(l.reply(m.name, msg.u64("REQ"), 0) == 0, "grant")
        check(op.wait().error is None, "mkdir after the grant")
        create(m.mp("g/f"), "data")
        os.rename(m.mp("g/f"), m.mp("g/h"))
        os.chmod(m.mp("g/h"), 0o600)
        os.unlink(m.mp("g/h"))
        check(l.next_msg(0.3, "UPCALL") is None, "an upcall while held")
        check(l.stats(m.name)["PERMIT_HELD"] == 1, "PERMIT_HELD")
        check(kml_state(m).get("permit") == "held", "mountstats: %s" %
              kml_state(m))
        # lento goes: the permit stays, changes go on without waiting.
        l.close()
        t0 = time.monotonic()
        create(m.mp("after-lento"))
        check(time.monotonic() - t0 < 1, "a change waited without lento")
    finally:
        m.umount()


def case_revoke(ext, mnt):
    """A revoke stops new changes, waits for those running, makes the log
    durable and says so; PERMIT 1 grants unasked."""
    # The writer's PERMIT upcall waits while the test checks the log: on
    # the KASAN kernel that took more than 5 s.
    m = Mount(ext, mnt, timeout=30)
    m.warm_all(EPOCH)
    m.mount()
    l = lento_for(m)
    stop = []

    def mkdirs():
        i = 0
        while not stop:
            os.mkdir(m.mp("r%d" % i))
            i += 1
        return i
    try:
        check(l.call("PERMIT", m.name, genl.a_u8(A["PERMIT"], 1)) == 0,
              "PERMIT 1")
        writer = Op(mkdirs)
        time.sleep(0.5)
        check(l.call("PERMIT", m.name, genl.a_u8(A["PERMIT"], 0),
                     genl.a_u64(A["REQ"], 7)) == 0, "PERMIT 0")
        ans = l.next_msg(5, "KML")
        while ans and A["REQ"] not in ans.attrs:
            ans = l.next_msg(5, "KML")
        check(ans and ans.u64("REQ") == 7, "no answer to the revoke")
        # mkdir logs nothing at close: the log must have stopped.
        last = int(kml_state(m)["next_seq"]) - 1
        check(ans.attrs[A["PERMIT"]] == b"\0", "still held after a revoke")
        check(last > 10 and ans.u64("KML_DURABLE") == last,
              "durable %d, last record %d" % (ans.u64("KML_DURABLE"), last))
        msg = l.next_msg(5, "UPCALL")
        check(msg and msg.u32("OP") == OP["PERMIT"], "no PERMIT after it")
        time.sleep(0.3)
        check(int(kml_state(m)["next_seq"]) - 1 == last,
              "changes after the revoke")
        stop.append(1)
        serve(l, m, msg)
        check(writer.wait().error is None and writer.result > 10,
              "the writer: %s %s" % (writer.result, writer.error))
        check(l.stats(m.name)["REVOKES"] == 1, "REVOKES")
    finally:
        stop.append(1)
        l.close()
        m.umount()


def case_permit_revoke_mmap(ext, mnt):
    """A revoke waits for a write(2) whose source page is slow to come
    (a userfaultfd holds it) while, in the same process, a write fault on
    a presto mapping and an mmap(2) queue for mmap_lock. All of them
    finish, and the revoke with them; a change that waits for the revoke
    is killable meanwhile. With one semaphore for both, the fault waited
    for it holding mmap_lock, the mmap(2) for the fault, the write's
    fault for the mmap(2), and the revoke for the write: a deadlock of
    unkillable tasks. The waiting change was unkillable too."""
    m = Mount(ext, mnt, timeout=5)
    with open(m.lp("m"), "wb") as f:
        f.write(b"m" * 4096)
    m.warm_all(EPOCH)
    m.mount()
    l = lento_for(m)
    child = waiter = None
    try:
        check(l.call("PERMIT", m.name, genl.a_u8(A["PERMIT"], 1)) == 0,
              "PERMIT 1")
        here = os.path.dirname(os.path.abspath(__file__))
        child = subprocess.Popen(
            [sys.executable, os.path.join(here, "permit_mmap.py"),
             m.mp("f"), m.mp("m")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        line = child.stdout.readline().strip()
        check(line == "blocked", "the writer: %r" % line)
        check(l.call("PERMIT", m.name, genl.a_u8(A["PERMIT"], 0),
                     genl.a_u64(A["REQ"], 9)) == 0, "PERMIT 0")
        time.sleep(0.3)
        # A change now waits for the revoke, which waits for the write.
        waiter = os.fork()
        if waiter == 0:
            try:
                os.mkdir(m.mp("w"))
            finally:
                os._exit(0)
        wait_for(lambda: proc_state(waiter) in "SD", 10,
                 "the mkdir never waited")
        time.sleep(0.3)
        state = proc_state(waiter)
        os.kill(waiter, signal.SIGKILL)
        end = time.monotonic() + 3
        reaped = False
        while not reaped and time.monotonic() < end:
            reaped = os.waitpid(waiter, os.WNOHANG)[0] != 0
            time.sleep(0.05)
        check(reaped, "a change waiting for the revoke could not be "
              "killed (state %s)" % state)
        check(not os.path.exists(m.lp("w")), "the killed mkdir was done")
        child.stdin.write("go\n")
        child.stdin.flush()
        # The fault asks for the permit again: granted, as lento would.
        msg = l.next_msg(10, "UPCALL")
        check(msg and msg.u32("OP") == OP["PERMIT"], "no PERMIT upcall")
        serve(l, m, msg)
        line = child.stdout.readline().strip()
        check(line == "done", "the process: %r" % line)
        check(child.wait(5) == 0, "permit_mmap.py failed")
        ans = l.next_msg(5, "KML")
        while ans and A["REQ"] not in ans.attrs:
            ans = l.next_msg(5, "KML")
        check(ans and ans.u64("REQ") == 9, "no answer to the revoke")
        with open(m.lp("m"), "rb") as f:
            check(f.read(1) == b"A", "the mapping's write is not below")
    finally:
        if child and child.poll() is None:
            child.kill()
        l.close()
        # A deadlock's tasks cannot be killed: leave their mount.
        if child is None or child.poll() is not None:
            m.umount()


def case_kml_notice_ack_sync(ext, mnt):
    """lento hears where the log is durable, acknowledges it, and asks
    for it to be synced; presto retires what was acknowledged."""
    m = Mount(ext, mnt, timeout=5)
    m.warm_all(EPOCH)
    m.mount()
    l = lento_for(m)
    try:
        check(l.call("PERMIT", m.name, genl.a_u8(A["PERMIT"], 1)) == 0,
              "PERMIT 1")
        for i in range(20):
            create(m.mp("n%d" % i))
        last = int(kml_state(m)["next_seq"]) - 1
        msg = None
        end = time.monotonic() + 10
        while time.monotonic() < end:
            msg = l.next_msg(end - time.monotonic(), "KML")
            if not msg or msg.u64("KML_DURABLE") >= last:
                break
        check(msg and msg.u64("KML_DURABLE") >= last and
              "REQ" not in [k for k, v in A.items() if v in msg.attrs],
              "no notice of the durable log")
        durable = msg.u64("KML_DURABLE")
        F = genl.a_str(A["FILESET"], m.name)
        check(l.request("KML_ACK", F, genl.a_u64(A["SEQ"], durable + 5))[1]
              == errno.EINVAL, "an ack past the durable records")
        check(l.request("KML_ACK", F, genl.a_u64(A["SEQ"], durable))[1] == 0,
              "KML_ACK")
        check(int(kml_state(m)["acked_seq"]) == durable, "acked_seq: %s" %
              kml_state(m))
        check(l.request("KML_ACK", F, genl.a_u64(A["SEQ"], 1))[1] == 0,
              "an old ack")
        create(m.mp("unsynced"))
        last = int(kml_state(m)["next_seq"]) - 1
        check(l.request("KML_SYNC", F, genl.a_u64(A["REQ"], 99))[1] == 0,
              "KML_SYNC")
        ans = l.next_msg(5, "KML")
        while ans and A["REQ"] not in ans.attrs:
            ans = l.next_msg(5, "KML")
        check(ans and ans.u64("REQ") == 99 and
              ans.u64("KML_DURABLE") >= last and
              ans.u64("KML_ACKED") == durable, "the answer to KML_SYNC")
        l2 = genl.Lento()
        rep, err = l2.request("STATS", F)
        check(err == 0, "STATS")
        l2.close()
        m.umount()
        check(l.request("KML_ACK", F, genl.a_u64(A["SEQ"], 1))[1] ==
              errno.ENOENT, "an ack with nothing mounted")
        check(l.request("KML_SYNC", F, genl.a_u64(A["REQ"], 1))[1] ==
              errno.ENOENT, "a sync with nothing mounted")
    finally:
        l.close()
        m.umount()


def case_timeouts(ext, mnt):
    m = Mount(ext, mnt, timeout=1)
    m.warm_all(EPOCH)
    m.mount()
    genl.set_cb(m.lp("f"), CB_ATTR, EPOCH)
    l = lento_for(m)
    try:
        op = Op(read_file, m.mp("f"))
        msg = l.next_msg(5, "UPCALL")
        check(msg, "no upcall")
        check(op.wait().error == errno.ETIMEDOUT, "silent lento: %s" %
              op.error)
        check(l.stats(m.name)["TIMEOUTS"] >= 1, "TIMEOUTS not counted")
        # The next miss joins the upcall lento has (and waits its own
        # timeout); PROGRESS keeps it waiting past that. The first one
        # goes at once: the timeout is a second, and the debug kernel
        # under emulation may take much of one to start the miss.
        op = Op(read_file, m.mp("f"))
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            check(l.call("PROGRESS", m.name,
                         genl.a_u64(A["REQ"], msg.u64("REQ"))) == 0,
                  "PROGRESS")
            check(l.next_msg(0.3, "UPCALL") is None, "a second upcall")
        serve(l, m, msg)
        check(op.wait().result == "old" and op.elapsed > 2,
              "after PROGRESS: %r %s" % (op.result, op.error))
        check(l.call("PROGRESS", m.name, genl.a_u64(A["REQ"], 12345)) ==
              errno.ESRCH, "PROGRESS of no upcall")
    finally:
        l.close()
        m.umount()


def quietly(fn, *args):
    """@fn, whatever it raises (the fuzzer makes reads fail)."""
    try:
        fn(*args)
    except Exception:
        pass


def case_fuzz(ext, mnt, seconds):
    """Random messages, valid-looking and not, for @seconds."""
    m = Mount(ext, mnt, timeout=1)
    m.warm_all(EPOCH)
    m.mount()
    l = lento_for(m)
    other = genl.Lento()
    rng = random.Random(os.environ.get("PRESTO_SEED", "1"))
    F = genl.a_str(A["FILESET"], m.name)
    handles = [m.handle(x) for x in ("", "f", "d", "d/g")]
    n = 0
    try:
        end = time.monotonic() + seconds
        worker = Op(quietly, warm_reads, m.mnt)
        while time.monotonic() < end:
            parts = []
            if rng.random() < 0.8:
                parts.append(F)
            for _ in range(rng.randrange(5)):
                t = rng.randrange(0, len(A) + 2)
                kind = rng.randrange(5)
                if kind == 0:
                    parts.append(genl.a_u32(t, rng.choice(
                        [0, 1, 2, 3, 4, 511, 512, 0xffffffff])))
                elif kind == 1:
                    parts.append(genl.a_u64(t, rng.choice(
                        [0, 1, EPOCH, 2**64 - 1, rng.randrange(100)])))
                elif kind == 2:
                    parts.append(genl.a_handle(t, *rng.choice(handles)))
                elif kind == 3:
                    parts.append(genl.attr(t, os.urandom(rng.randrange(40))))
                else:
                    parts.append(genl.a_str(t, rng.choice(
                        [m.name, "", "x" * 70, "nosuch"])))
            payload = b"".join(parts)
            if rng.random() < 0.05:
                payload = payload[:rng.randrange(len(payload) + 1)]
            sock = l if rng.random() < 0.8 else other
            cmd = rng.randrange(0, len(genl.CMD) + 2)
            if cmd == genl.CMD["UNREGISTER"] and sock is l:
                cmd = genl.CMD["STATS"]
            sock.send_raw(cmd, payload,
                          version=rng.choice([genl.VERSION, 0, 9]))
            sock._read(0)
            n += 1
            if not worker.is_alive():
                worker = Op(quietly, warm_reads, m.mnt)
        worker.join(30)
        l.queue.clear()
        check(l.call("SET_EPOCH", m.name, genl.a_u64(A["EPOCH"], EPOCH)) == 0,
              "the channel still answers")
        print("# fuzz: %d messages" % n)
    finally:
        l.close()
        other.close()
        m.umount()


CASES = [
    ("mount-options", case_mount_options),
    ("no-lento-miss-ENOTCONN-after-timeout", case_no_lento_enotconn),
    ("signal-interrupts-wait", case_signal_interrupts),
    ("netns-socket-close-keeps-lento", case_netns_close_keeps_lento),
    ("cgroup-freeze-thaws-into-same-call", case_cgroup_freeze_restarts),
    ("suspend-while-fetch-waits-and-dir-locked",
     case_suspend_while_fetch_waits),
    ("register-mounted-notice-and-serve", case_register_then_serve),
    ("mount-notice-sent-again-after-full-buffer",
     case_mount_notice_not_lost),
    ("xattrs-wait-for-attributes", case_xattrs_need_attr),
    ("malformed-and-unauthorised-messages-refused", case_refusals),
    ("concurrent-misses-one-upcall", case_coalesced),
    ("new-lento-gets-pending-upcall", case_new_lento_resend),
    ("fetch-by-rename-reopens-open-keeps-old", case_fetch_renames),
    ("dir-break-refetches-names", case_dir_break),
    ("server-changes-reach-inotify", case_watchers),
    ("purge-busy-while-open", case_purge),
    ("warm-remount-epoch-no-upcalls", case_warm_remount),
    ("access-hints-full-batch", case_hints_full_batch),
    ("local-creates-no-upcalls", case_local_creates),
    ("silent-lento-ETIMEDOUT-progress-extends", case_timeouts),
    ("permit-upcall-joined-refused-granted-kept", case_permit_upcall),
    ("revoke-drains-changes-log-durable", case_revoke),
    ("permit-revoke-with-mmap-no-deadlock", case_permit_revoke_mmap),
    ("kml-notice-ack-sync", case_kml_notice_ack_sync),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ext")
    ap.add_argument("mnt")
    ap.add_argument("--fuzz-seconds", type=int, default=20)
    ap.add_argument("--only")
    args = ap.parse_args()
    cases = CASES + [("fuzz-%ds-random-messages" % args.fuzz_seconds,
                      lambda e, m: case_fuzz(e, m, args.fuzz_seconds))]
    passed = failed = 0
    for name, fn in cases:
        if args.only and args.only not in name:
            continue
        t0 = time.monotonic()
        try:
            fn(args.ext, args.mnt)
            passed += 1
            print("ok - %s (%.1f s)" % (name, time.monotonic() - t0))
        except Exception as e:
            failed += 1
            print("not ok - %s: %s" % (name, e))
            if not isinstance(e, Fail):
                traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
