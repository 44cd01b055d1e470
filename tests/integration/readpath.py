#!/usr/bin/env python3
"""presto and lento, the read path (issue 6), end to end. Runs in the test
VM as root with presto loaded, SCRATCH on ext4:

    tests/integration/readpath.py SCRATCH [CASE...]

One lento server and three lento clients: C publishes (lentoctl), A and B
each have their cache on ext4 under SCRATCH and serve the volume "vol"
through a presto mount (lower=CACHE/vol), as the filesets "vol-a" and
"vol-b" (fileset names are one namespace per machine). The cases run in order on that
one setup; each prints "ok - NAME" or "not ok - NAME", and the last line
is "N passed, N failed".

Alone in the VM (tests/integration/readpath-guest sets up the ext4):

    tools/vm --disk build/vm/rp.img:2G --fresh-disks \
        tests/integration/readpath-guest [PRESTO_KO] [CASE...]
"""
import errno
import hashlib
import importlib.machinery
import importlib.util
import mmap
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_path = os.path.join(TOP, "tests", "lento", "run")
_loader = importlib.machinery.SourceFileLoader("lento_run", _path)
_spec = importlib.util.spec_from_loader("lento_run", _loader)
lr = importlib.util.module_from_spec(_spec)
_loader.exec_module(lr)
Fail, check, wait_until = lr.Fail, lr.check, lr.wait_until
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inotify  # noqa: E402

TIMEOUT_S = 3           # the mounts' timeout=
VOL = "vol"


CHANGED = {}     # name -> content, once a case changed it


def content(name, size):
    """A file's expected content, from its name."""
    if name in CHANGED:
        return CHANGED[name]
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


# The tree C publishes: name -> size (directories end in /), symlinks.
TREE = {
    "d1/": None, "d1/f1": 100, "d1/f2": 5000, "d1/sub/": None,
    "d1/sub/deep": 70000, "d2/": None, "d2/big": 300000, "d2/empty": 0,
    "top": 42, "d2/x.cold": 1234,
}
LINKS = {"d2/link": "../d1/f1", "top-link": "d2"}


class Kclient(lr.Client):
    """A lento client serving the fileset vol over a presto mount."""

    def __init__(self, tmp, name, server, mnt, extra=()):
        self.fsname = VOL + "-" + name
        lr.Client.__init__(self, tmp, name, server, volumes=(VOL,),
                           extra=["--fileset", VOL + ":" + self.fsname,
                                  "--debug"] + list(extra))
        self.mnt = mnt

    def fileset(self):
        st = self.status()
        check(st.get("presto"), "%s has no presto status" % self.name)
        for fs in st["presto"]["filesets"]:
            if fs["name"] == self.fsname:
                return fs
        raise Fail("%s: no fileset %s in status" % (self.name, self.fsname))

    def kstat(self):
        k = self.fileset()["kernel"]
        check(k is not None, "%s: no kernel counters" % self.name)
        return k

    def mount(self, lower=None, timeout=TIMEOUT_S):
        lower = lower or os.path.join(self.cache, VOL)
        wait_until(lambda: os.path.isdir(lower), 20, lower)
        os.makedirs(os.path.join(lower, ".presto"), exist_ok=True)
        os.makedirs(self.mnt, exist_ok=True)
        subprocess.run(["mount", "-t", "presto", "-o",
                        "lower=%s,fileset=%s,timeout=%d" % (
                            lower, self.fsname, timeout), "presto",
                        self.mnt],
                       check=True)

    def umount(self):
        subprocess.run(["umount", self.mnt], check=False)

    def ready(self, timeout=30):
        def ok():
            fs = self.fileset()
            return (fs["registered"] and fs["mounted"] and fs["root_ok"]
                    and fs["epoch_sent"])
        return wait_until(ok, timeout, self.name + "'s fileset ready")


def read_all(mnt, skip_cold=True):
    """Every file read (open/read/close), checked against TREE."""
    for name, size in TREE.items():
        if size is None or (skip_cold and name.endswith(".cold")):
            continue
        with open(os.path.join(mnt, name), "rb") as f:
            data = f.read()
        check(data == content(name, size),
              "%s: %d bytes, not the %d published" % (name, len(data), size))
    for name, target in LINKS.items():
        check(os.readlink(os.path.join(mnt, name)) == target,
              "symlink %s" % name)


def warm_pass(mnt):
    """ls -lR, find, stat, open/read/close, mmap, getdents."""
    subprocess.run(["ls", "-lR", mnt], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["find", mnt, "-printf", "%p %s %m\n"], check=True,
                   stdout=subprocess.DEVNULL)
    for root, dirs, files in os.walk(mnt):
        for n in dirs + files:
            os.lstat(os.path.join(root, n))
        for e in os.scandir(root):
            e.stat(follow_symlinks=False)
    read_all(mnt)
    with open(os.path.join(mnt, "d2/big"), "rb") as f:
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            check(m[:] == content("d2/big", TREE["d2/big"]), "mmap of big")
    # Negative lookups in a complete directory are the kernel's too.
    check(not os.path.exists(os.path.join(mnt, "d1/nosuch")), "nosuch")


class Setup:
    def __init__(self, scratch):
        self.t = lr.Test("readpath", scratch)
        # TCG is slow: a heartbeat the guest keeps up with.
        self.srv = self.t.server(heartbeat_ms=3000)
        self.srv.volume(VOL)
        self.c = self.t.client("c", self.srv)
        self.a = self.b = None
        self.more = []          # every presto client, to unmount

    def kclient(self, name, via=None, extra=()):
        k = Kclient(self.t.tmp, name, via or self.srv,
                    os.path.join(self.t.tmp, "mnt-" + name), extra)
        self.t.procs.append(k)
        self.more.append(k)
        return k.start()

    def publish(self):
        c = self.c
        for name, size in TREE.items():
            if size is None:
                c.ctl("mkdir", VOL + "/" + name.rstrip("/"))
        for name, size in TREE.items():
            if size is not None:
                path = os.path.join(self.t.tmp, "body")
                with open(path, "wb") as f:
                    f.write(content(name, size))
                c.ctl("write", VOL + "/" + name, "@" + path)
        for name, target in LINKS.items():
            c.ctl("symlink", VOL + "/" + name, target)
        c.sync()

    def finish(self):
        for k in self.more:
            k.umount()
        return self.t.finish()


# ---------------------------------------------------------------- cases

def case_mount(s):
    """Both clients register (before the mount), see the mount, check the
    root and confirm an epoch."""
    s.a = s.kclient("a")
    s.b = s.kclient("b")
    for k in (s.a, s.b):
        wait_until(lambda: k.fileset()["registered"], 20,
                   k.name + " registered before the mount")
        k.mount()
        k.ready()
        check(int(k.fileset()["epoch"], 16) != 0, "epoch 0")


def case_cold_read(s):
    """The tree published through C reads right through both mounts."""
    s.publish()
    for k in (s.a, s.b):
        before = k.kstat()
        warm_pass(k.mnt)
        after = k.kstat()
        check(after["upcalls"] > before["upcalls"],
              "%s: a cold read made no upcall: %s" % (k.name, after))
        check(after["fetch_dir"] > 0 and after["fetch_file"] > 0,
              "%s: %s" % (k.name, after))
        # presto's ACCESS hints of the files opened reach the LRU.
        wait_until(lambda: k.fileset()["lento"]["access_hints"] > 0, 10,
                   k.name + " getting access hints")


def case_warm_no_upcalls(s):
    """I-1: ls -lR, find, stat, open/read/close, mmap, getdents of a warm
    tree do not move the upcall counter."""
    for k in (s.a, s.b):
        before = k.kstat()
        warm_pass(k.mnt)
        warm_pass(k.mnt)
        after = k.kstat()
        check(after["upcalls"] == before["upcalls"],
              "%s: warm reads made upcalls: %s -> %s" % (
                  k.name, before, after))
        check(after["pending"] == 0, "%s: pending %s" % (k.name, after))


def case_change_seen(s):
    """A change published through C is seen by each client's next open
    after the break; a file open before keeps its old content."""
    old = content("d1/f1", TREE["d1/f1"])
    new = b"the second version, longer than the first one\n" * 3
    fa = open(os.path.join(s.a.mnt, "d1/f1"), "rb")
    try:
        path = os.path.join(s.t.tmp, "body")
        with open(path, "wb") as f:
            f.write(new)
        s.c.ctl("write", VOL + "/d1/f1", "@" + path)
        s.c.sync()
        for k in (s.a, s.b):
            def fresh():
                with open(os.path.join(k.mnt, "d1/f1"), "rb") as f:
                    return f.read() == new
            wait_until(fresh, 10, k.name + " reading the new version")
            check(os.stat(os.path.join(k.mnt, "d1/f1")).st_size ==
                  len(new), k.name + ": stat after the change")
        check(fa.read() == old, "the file open before the change changed")
    finally:
        fa.close()
    CHANGED["d1/f1"] = new
    for k in (s.a, s.b):
        read_all(k.mnt)
        # After the volume break, one warm pass asks again (directories,
        # and children presto held with the old epoch that no SET_FLAGS
        # reached); the next one asks nothing.
        before = k.kstat()
        warm_pass(k.mnt)
        mid = k.kstat()
        warm_pass(k.mnt)
        after = k.kstat()
        print("  # %s: the first warm pass after the break: %d FETCH_DIR, "
              "%d FETCH_ATTR, %d FETCH_FILE" % (
                  k.name, mid["fetch_dir"] - before["fetch_dir"],
                  mid["fetch_attr"] - before["fetch_attr"],
                  mid["fetch_file"] - before["fetch_file"]))
        check(after["upcalls"] == mid["upcalls"], "%s: warm again: %s -> "
              "%s" % (k.name, mid, after))


def case_watchers(s):
    """Changes published through C reach inotify watchers on B's mount
    with nobody else using it there: a new name (CREATE), a file
    changed (MODIFY), a name removed (DELETE)."""
    new = b"a changed second file\n" * 10
    w = inotify.Watcher()
    try:
        w.add(os.path.join(s.b.mnt, "d1"), inotify.IN_CREATE |
              inotify.IN_DELETE | inotify.IN_MODIFY)
        path = os.path.join(s.t.tmp, "body")
        with open(path, "wb") as f:
            f.write(new)
        s.c.ctl("write", VOL + "/d1/f2", "@" + path)
        s.c.ctl("write", VOL + "/d1/born", "hello")
        s.c.sync()
        CHANGED["d1/f2"] = new

        def named(mask, name):
            return lambda e: e[1] & mask and e[2] == name
        evs = w.wait_for(named(inotify.IN_CREATE, "born"), 30)
        check(evs, "no CREATE of d1/born on B")
        if not any(named(inotify.IN_MODIFY, "f2")(e) for e in evs):
            evs += w.wait_for(named(inotify.IN_MODIFY, "f2"), 10) or []
        check(any(named(inotify.IN_MODIFY, "f2")(e) for e in evs),
              "no MODIFY of d1/f2 on B: %r" % evs)
        print("  # B's watcher heard: %s" % ", ".join(
            "%s %s" % (inotify.describe(m), n) for _, m, n in evs))
        with open(os.path.join(s.b.mnt, "d1/born"), "rb") as f:
            check(f.read() == b"hello", "d1/born's content on B")
        with open(os.path.join(s.b.mnt, "d1/f2"), "rb") as f:
            check(f.read() == new, "d1/f2's new content on B")
        s.c.ctl("unlink", VOL + "/d1/born")
        s.c.sync()
        check(w.wait_for(named(inotify.IN_DELETE, "born"), 30),
              "no DELETE of d1/born on B")
        fs = s.b.fileset()
        check(fs["lento"]["names_notified"] >= 2 and
              fs["lento"]["watched_listed"] >= 1, "B's counters: %s" %
              fs["lento"])
        check(fs["kernel"]["watched"] >= 1, "presto's watched gauge: %s" %
              fs["kernel"])
    finally:
        w.close()


def case_restart_warm(s):
    """A's lento killed (-9) and restarted serves its warm cache again
    after revalidation: no body fetched, and (the epoch confirmed the
    same) not one upcall."""
    a = s.a
    warm_pass(a.mnt)        # all warm, whatever the last case left
    before = a.kstat()
    a.kill()
    a.stop()
    a.start()
    a.ready()
    wait_until(lambda: a.volstat(VOL)["validated"], 20, "A validated")
    warm_pass(a.mnt)
    after = a.kstat()
    cache = a.ctl("cache")
    check(cache["fetches"] == 0,
          "A fetched %d bodies after its restart" % cache["fetches"])
    check(after["upcalls"] == before["upcalls"],
          "the restart cost %d upcalls (%d listings fetched)" % (
              after["upcalls"] - before["upcalls"], cache["listings"]))


def case_no_lento(s):
    """With no lento, a hit still works and a miss fails with ENOTCONN
    after timeout=; a new lento then serves the miss."""
    a = s.a
    a.kill()
    a.stop()
    with open(os.path.join(a.mnt, "d1/f2"), "rb") as f:
        check(f.read() == content("d1/f2", TREE["d1/f2"]), "a hit")
    t0 = time.monotonic()
    try:
        open(os.path.join(a.mnt, "d2/x.cold"), "rb").close()
        raise Fail("a miss with no lento succeeded")
    except OSError as e:
        check(e.errno == errno.ENOTCONN, "a miss failed with %s, not "
              "ENOTCONN" % errno.errorcode.get(e.errno, e.errno))
    dt = time.monotonic() - t0
    check(TIMEOUT_S - 0.5 <= dt <= TIMEOUT_S + 10,
          "the miss failed after %.1f s (timeout=%d)" % (dt, TIMEOUT_S))
    a.start()
    a.ready()
    with open(os.path.join(a.mnt, "d2/x.cold"), "rb") as f:
        check(f.read() == content("d2/x.cold", TREE["d2/x.cold"]),
              "the miss once lento is back")


def case_evict(s):
    """Over its cache size, a client evicts through presto: PURGE first,
    a file open through the mount is left alone (EBUSY) and keeps
    reading, an evicted file is fetched again at its next open."""
    e = s.kclient("e", extra=["--cache-size", "100K"])
    e.mount()
    e.ready()
    big = open(os.path.join(e.mnt, "d2/big"), "rb")
    try:
        read_all(e.mnt)
        def purged():
            fs = e.fileset()["lento"]
            return fs["purged"] >= 1 and fs["purge_busy"] >= 1 and fs
        wait_until(purged, 20, "E purging, and finding big open")
        check(big.read() == content("d2/big", TREE["d2/big"]),
              "the file open through the mount changed under its reader")
    finally:
        big.close()
    before = e.ctl("cache")
    check(before["evictions"] >= 1, "no eviction: %s" % before)
    read_all(e.mnt)
    after = e.ctl("cache")
    check(after["fetches"] > before["fetches"],
          "nothing fetched again after the evictions: %s -> %s" % (
              before, after))


def case_progress_and_disconnected(s):
    """A fetch that outlasts timeout= survives by PROGRESS; with its
    server gone, a client answers a miss ENOTCONN at once and a hit still
    works."""
    proxy = s.t.proxy(s.srv)
    p = s.kclient("p", via=proxy)
    p.mount()
    p.ready()
    subprocess.run(["ls", "-lR", p.mnt], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(p.mnt, "d1/f2"), "rb") as f:
        f.read()
    before = p.kstat()
    proxy.freeze()
    result = {}

    def reader():
        t0 = time.monotonic()
        try:
            with open(os.path.join(p.mnt, "d2/big"), "rb") as f:
                result["data"] = f.read()
        except OSError as e:
            result["err"] = e
        result["dt"] = time.monotonic() - t0
    th = threading.Thread(target=reader)
    th.start()
    time.sleep(TIMEOUT_S * 1.5)
    proxy.restore()
    th.join(30)
    check("err" not in result, "the slow fetch failed: %s" %
          result.get("err"))
    check(result.get("data") == content("d2/big", TREE["d2/big"]),
          "the slow fetch's content")
    check(result["dt"] > TIMEOUT_S, "the fetch was not slow (%.1f s)" %
          result["dt"])
    after = p.kstat()
    check(after["timeouts"] == before["timeouts"], "timeouts: %s -> %s" %
          (before, after))
    # The server gone: lento itself answers.
    proxy.cut()
    wait_until(lambda: p.status()["state"] != "connected", 20,
               "P disconnected")
    t0 = time.monotonic()
    try:
        open(os.path.join(p.mnt, "d2/x.cold"), "rb").close()
        raise Fail("a miss while disconnected succeeded")
    except OSError as e:
        check(e.errno == errno.ENOTCONN, "a disconnected miss failed with "
              "%s" % errno.errorcode.get(e.errno, e.errno))
    check(time.monotonic() - t0 < TIMEOUT_S, "lento did not answer the "
          "disconnected miss at once")
    with open(os.path.join(p.mnt, "d1/f2"), "rb") as f:
        check(f.read() == content("d1/f2", TREE["d1/f2"]),
              "a hit while disconnected")
    proxy.restore()


def case_wrong_lower(s):
    """A fileset mounted over another directory than CACHE/VOLUME is
    refused, with a log line; its misses fail (EIO), nothing is filled."""
    r = s.kclient("r")
    wait_until(lambda: os.path.isdir(os.path.join(r.cache, VOL)), 20,
               "R's volume directory")
    other = os.path.join(s.t.tmp, "elsewhere")
    os.makedirs(other)
    r.mount(lower=other)
    wait_until(lambda: r.fileset()["mounted"], 20, "R mounted")
    check(not r.fileset()["root_ok"], "R serves a wrong lower")
    wait_until(lambda: lr.grep(r, "refusing to serve it"), 10,
               "R saying why it refuses")
    try:
        os.listdir(r.mnt)
        raise Fail("a listing of a refused fileset worked")
    except OSError as e:
        check(e.errno == errno.EIO, "a refused fileset's miss: %s" %
              errno.errorcode.get(e.errno, e.errno))
    check(os.listdir(other) == [".presto"] or os.listdir(other) == [],
          "R filled the wrong directory: %s" % os.listdir(other))


def case_parallel_cold(s):
    """Eight readers at once over a cold cache: every content right, the
    upcalls they share answered once each; then warm: no upcall."""
    q = s.kclient("q")
    # What is tested is sharing, not timeout=: eight cold readers keep
    # lento's loop busy for seconds under emulation and ASan.
    q.mount(timeout=30)
    q.ready()
    errors = []

    def reader(i):
        try:
            names = list(TREE.items())
            for name, size in names[i % len(names):] + names[:i % len(names)]:
                path = os.path.join(q.mnt, name)
                if size is None:
                    os.listdir(path)
                elif not name.endswith(".cold"):
                    with open(path, "rb") as f:
                        if f.read() != content(name, size):
                            errors.append("%d: %s" % (i, name))
                os.lstat(path)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append("%d: %r" % (i, e))
    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    check(not errors, "parallel readers: %s" % errors[:5])
    cold = q.kstat()
    warm_pass(q.mnt)
    warm_pass(q.mnt)
    before = q.kstat()
    warm_pass(q.mnt)
    after = q.kstat()
    check(after["upcalls"] == before["upcalls"], "warm after parallel: "
          "%s -> %s" % (before, after))
    print("  # cold: %d upcalls, %d joined" % (cold["upcalls"],
                                             cold["joined"]))


def case_bigdir(s):
    """A directory of 1000 files: one FETCH_DIR lists it all (with every
    child's flags), and a warm ls -l of it makes no upcall."""
    names = ["f%05d" % i for i in range(1000)]
    s.c.ctl("mkdir", VOL + "/big")
    for i in range(0, len(names), 60):
        s.c.ctl("create", *[VOL + "/big/" + n for n in names[i:i + 60]])
    s.c.sync(timeout=300)
    a = s.a
    before = a.kstat()
    t0 = time.monotonic()
    listed = os.listdir(os.path.join(a.mnt, "big"))
    dt = time.monotonic() - t0
    check(sorted(listed) == names, "the listing: %d names" % len(listed))
    subprocess.run(["ls", "-l", os.path.join(a.mnt, "big")], check=True,
                   stdout=subprocess.DEVNULL)
    mid = a.kstat()
    subprocess.run(["ls", "-l", os.path.join(a.mnt, "big")], check=True,
                   stdout=subprocess.DEVNULL)
    after = a.kstat()
    check(after["upcalls"] == mid["upcalls"], "a warm ls -l of big: %s -> "
          "%s" % (mid, after))
    print("  # cold listing %.2f s, %d upcalls for the cold ls -l" % (
        dt, mid["upcalls"] - before["upcalls"]))


# The caches sit under a 0700 scratch directory, as they should: the
# worker runs as root to reach B's mount there.
NGINX_CONF = """
user root;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx.err;
events {{ worker_connections 64; }}
http {{
    access_log off;
    sendfile on;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        default_type application/octet-stream;
    }}
}}
"""


def sh(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if r.returncode:
        raise Fail("%s: exit %d: %s" % (cmd, r.returncode,
                                         r.stderr.strip()[-300:]))
    return r.stdout.strip()


def case_slow_disk_fetch(s):
    """A body fetched to a cache whose disk is slower than the line: the
    client keeps at most its bound of chunks in memory (--fetch-memory 4M,
    and one chunk), leaving the server's frames unread meanwhile, stays
    connected, and the file arrives whole. The disk: ext4 on dm-delay
    (writes 300 ms late) with the dirty page cache held to 2 MiB, so that
    writes wait."""
    size = 16 << 20
    bound = 4 << 20
    srv = s.t.server(name="slow-server", heartbeat_ms=3000)
    srv.volume(VOL)
    pub = s.t.client("slow-pub", srv)
    body = os.urandom(size)
    path = os.path.join(s.t.tmp, "huge.body")
    with open(path, "wb") as f:
        f.write(body)
    pub.ctl("write", VOL + "/huge", "@" + path)
    pub.sync(timeout=600)
    os.unlink(path)
    want = hashlib.sha256(body).hexdigest()
    del body
    img = os.path.join(s.t.tmp, "slow.img")
    slow = os.path.join(s.t.tmp, "slow")
    vm = {k: open("/proc/sys/vm/" + k).read() for k in
          ("dirty_bytes", "dirty_background_bytes", "dirty_ratio",
           "dirty_background_ratio")}
    loop = f = None
    try:
        sh("truncate -s 256M %s" % img)
        # Modules of Debian's kernel, built into the debug kernel.
        subprocess.run("modprobe -q loop; modprobe -q dm-delay", shell=True)
        check("delay" in sh("dmsetup targets"),
              "this kernel has no dm-delay target")
        loop = sh("losetup -f --show %s" % img)
        # Made before the delay goes under it: mkfs is not what is tested.
        sh("mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 %s"
           % loop)
        sh('dmsetup create rp-slow --table "0 $(blockdev --getsz %s) '
           'delay %s 0 0 %s 0 300"' % (loop, loop, loop))
        os.makedirs(slow)
        sh("mount /dev/mapper/rp-slow %s" % slow)
        with open("/proc/sys/vm/dirty_bytes", "w") as v:
            v.write(str(2 << 20))
        with open("/proc/sys/vm/dirty_background_bytes", "w") as v:
            v.write(str(1 << 20))
        f = Kclient(slow, "f", srv, os.path.join(s.t.tmp, "mnt-f"),
                    extra=["--fetch-memory", str(bound)])
        f.start()
        # What is tested is the bound and the connection, not timeout=:
        # on this disk an SQLite commit of F's may wait seconds for the
        # dirty pages ahead of it (see the holds printed below).
        f.mount(timeout=30)
        f.ready()
        t0 = time.monotonic()
        h = hashlib.sha256()
        with open(os.path.join(f.mnt, "huge"), "rb") as r:
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
        took = time.monotonic() - t0
        check(h.hexdigest() == want, "the body read through F differs")
        st = f.ctl("cache")
        holds = re.findall(r"event loop was held (\d+) ms", f.logtext())
        print("  # %d MiB in %.1f s; chunks in memory at most %.1f MiB, "
              "input held %d times; reconnections: %s; F's loop held "
              "%d times, at most %s ms" % (
                  size >> 20, took, st["fetch_mem_peak"] / 2 ** 20,
                  st["fetch_holds"], f.logtext().count("connected to"),
                  len(holds), max(map(int, holds), default=0)))
        check(st["fetch_holds"] >= 1,
              "the disk kept up: nothing was held (%s)" % st)
        check(st["fetch_mem_peak"] <= bound + (1 << 20),
              "%d bytes of chunks in memory" % st["fetch_mem_peak"])
        check(f.logtext().count("connected to") == 1,
              "F lost its connection while it held its input")
    except Exception as e:
        if not f:
            raise
        print(f.tail(60))
        # F's warnings in the failure's reason, which a summary keeps.
        warns = [line for line in f.logtext().splitlines()
                 if " warning: " in line or " error: " in line]
        raise Fail("\n".join([str(e)] + ["F: " + w for w in warns[-8:]])) \
            from e
    finally:
        for k, v in vm.items():
            if k.endswith("bytes") and v.strip() == "0":
                continue        # set through the ratio below
            with open("/proc/sys/vm/" + k, "w") as out:
                out.write(v)
        problems = []
        if f:
            f.umount()
            problems = f.stop()
            if problems:
                print(f.tail(60))
        subprocess.run(["umount", slow], check=False)
        subprocess.run(["dmsetup", "remove", "rp-slow"], check=False)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        if problems:    # every one: a sanitizer's report comes second
            raise Fail("\n".join(problems))


def http_get(port, path):
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%d/%s" % (port, path),
                                timeout=20) as r:
        return r.read()


def case_nginx(s):
    """nginx on B serves the site from B's mount; a change published
    elsewhere is served after the break, nginx still the same process."""
    if not shutil.which("nginx"):
        raise Fail("nginx is missing: run tools/setup")
    d = os.path.join(s.t.tmp, "nginx")
    os.makedirs(d, exist_ok=True)
    port = 8097
    with open(os.path.join(d, "conf"), "w") as f:
        f.write(NGINX_CONF.format(dir=d, port=port, root=s.b.mnt))
    subprocess.run(["nginx", "-c", os.path.join(d, "conf"), "-p", d],
                   check=True)
    try:
        pid = open(os.path.join(d, "nginx.pid")).read().strip()
        for name, size in TREE.items():
            if size is not None and not name.endswith(".cold"):
                check(http_get(port, name) == content(name, size),
                      "nginx served %s wrong" % name)
        before = s.b.kstat()
        for _ in range(3):
            check(http_get(port, "d2/big") == content("d2/big",
                                                      TREE["d2/big"]),
                  "d2/big")
        check(s.b.kstat()["upcalls"] == before["upcalls"],
              "warm requests made upcalls")
        new = b"published while nginx serves it\n" * 40
        path = os.path.join(s.t.tmp, "body")
        with open(path, "wb") as f:
            f.write(new)
        s.c.ctl("write", VOL + "/d1/sub/deep", "@" + path)
        s.c.sync()
        wait_until(lambda: http_get(port, "d1/sub/deep") == new, 15,
                   "nginx serving the new version")
        CHANGED["d1/sub/deep"] = new
        check(open(os.path.join(d, "nginx.pid")).read().strip() == pid,
              "nginx was restarted")
    finally:
        subprocess.run(["nginx", "-c", os.path.join(d, "conf"), "-p", d,
                        "-s", "quit"], check=False)


def case_status(s):
    """lentoctl status shows the fileset and presto's counters."""
    fs = s.b.fileset()
    for key in ("upcalls", "fetch_dir", "fetch_file", "fetch_attr",
                "pending", "timeouts", "registered"):
        check(key in fs["kernel"], "no %s in %s" % (key, fs["kernel"]))
    check(fs["kernel"]["registered"] == 1, "registered gauge")
    text = s.b.ctl("status", json_out=False)
    check("fileset vol-b (volume vol): registered, mounted" in text, text)
    check("kernel: upcalls" in text, text)


CASES = [
    ("mount", case_mount),
    ("cold_read", case_cold_read),
    ("warm_no_upcalls", case_warm_no_upcalls),
    ("change_seen", case_change_seen),
    ("watchers", case_watchers),
    ("restart_warm", case_restart_warm),
    ("no_lento", case_no_lento),
    ("evict", case_evict),
    ("progress_and_disconnected", case_progress_and_disconnected),
    ("wrong_lower", case_wrong_lower),
    ("parallel_cold", case_parallel_cold),
    ("bigdir", case_bigdir),
    ("slow_disk_fetch", case_slow_disk_fetch),
    ("nginx", case_nginx),
    ("status", case_status),
]


def main():
    if len(sys.argv) < 2:
        print("usage: readpath.py SCRATCH [CASE...]")
        return 2
    scratch = os.path.abspath(sys.argv[1])
    only = sys.argv[2:]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch, mode=0o700)
    passed = failed = 0
    s = None
    try:
        s = Setup(scratch)
    except Exception as e:
        print("not ok - setup: %s" % e)
        print("0 passed, 1 failed")
        return 1
    for name, fn in CASES:
        # The others stand on these two (the mounts, the tree).
        if only and name not in only and name not in ("mount",
                                                      "cold_read"):
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
                print(p.tail(15))
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
