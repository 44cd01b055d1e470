#!/usr/bin/env python3
"""Crash tests end to end (I-2 and I-3 with lento): a lento server and a
lento client A serving its volume through a presto mount, in one guest
that is panicked while a workload writes through the mount; the next
boot checks that nothing fsync'd was lost on the way to the server.

    e2e.py start DIR RECORDS SEED
    e2e.py check DIR RECORDS LABEL

DIR (on the data disk, which the crash hits) holds the server's store, A's
cache, their logs and sockets; RECORDS (on the records disk) the
workload's fsync records (tests/crash/workload.py).

start: a fresh server, volume "vol", client A (its fileset "vol-a") and
its presto mount at /mnt/p; then the workload through the mount, until the
guest is panicked. DIR/started appears when the workload begins.

check, after the crash and a reboot: presto is mounted over A's cache
without lento first (recovery runs; what the log then holds is checked
by kmlcat --strict) and unmounted; then the server and A start again on
what the crash left, A's fileset is mounted, and "lentoctl sync" must
bring every change to the server. Then a client C with an empty cache
mounts the volume through presto of its own, so what it reads comes from
the server. Checks, each "ok - LABEL NAME" or "not ok - LABEL NAME: why":

  recovery-mount     presto mounts the cache after the crash
  log-strict         the log reads strictly (no gap, no damaged record)
  fsynced-in-cache   every recorded file is in A's cache as recorded
  lento-resumes      A's lento restarts on its cache and registers
  sync-reaches-server  lentoctl sync returns, nothing left pending, no
                     conflict
  fsynced-at-server  every recorded file, read through C, is as recorded
                     (size, sha256, mode)
  trees-agree        A's tree and C's tree are equal (tests/bin/treecmp:
                     names, types, modes, owners, sizes, contents, hard
                     links and link counts, xattrs: one removed in the
                     part of A's journal the crash lost is removed at the
                     server too, by recovery's PRUNEXATTRS)

Ends with "N passed, N failed"; exit status 0 iff all passed.
"""
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_path = os.path.join(TOP, "tests", "lento", "run")
_loader = importlib.machinery.SourceFileLoader("lento_run", _path)
_spec = importlib.util.spec_from_loader("lento_run", _loader)
lr = importlib.util.module_from_spec(_spec)
_loader.exec_module(lr)
# The plain build: the crash rounds run on the debug kernel already.
# E2E_LENTO names another (tools/bin/lento-asan to look into a failure).
lr.LENTO = os.environ.get("E2E_LENTO",
                          os.path.join(TOP, "tools", "bin", "lento"))
KMLCAT = os.path.join(TOP, "tools", "bin", "kmlcat")
TREECMP = os.path.join(TOP, "tests", "bin", "treecmp")
VOL = "vol"
TIMEOUT_S = 60          # the mounts' timeout=: the guest is slow


def sh(*argv):
    subprocess.run(argv, check=True)


class Fileset(lr.Client):
    """A lento client whose volume is served through a presto mount."""

    def __init__(self, tmp, name, server, mnt):
        self.fsname = VOL + "-" + name
        lr.Client.__init__(self, tmp, name, server, volumes=(VOL,),
                           age_ms=3000,
                           extra=["--fileset", VOL + ":" + self.fsname])
        self.mnt = mnt
        self.lower = os.path.join(self.cache, VOL)

    def mount(self):
        lr.wait_until(lambda: os.path.isdir(self.lower), 60, "the cache")
        os.makedirs(os.path.join(self.lower, ".presto"), exist_ok=True)
        os.makedirs(self.mnt, exist_ok=True)
        sh("mount", "-t", "presto", "-o", "lower=%s,fileset=%s,timeout=%d"
           % (self.lower, self.fsname, TIMEOUT_S), "presto", self.mnt)

        def ready():
            for fs in self.status()["presto"]["filesets"]:
                if fs["name"] == self.fsname:
                    return fs["registered"] and fs["mounted"] and \
                        fs["epoch_sent"]
            return False
        lr.wait_until(ready, 60, self.name + "'s fileset")
        return self


def start(d, records, seed):
    os.makedirs(d)
    t = lr.Test("e2e", d)
    srv = t.server(heartbeat_ms=3000)
    srv.volume(VOL)
    a = Fileset(d, "a", srv, "/mnt/p")
    t.procs.append(a)
    a.start().mount()
    open(records, "w").close()
    os.sync()
    open(os.path.join(d, "started"), "w").close()
    tar = os.path.join(TOP, "build", "tree.tar")
    argv = [sys.executable, os.path.join(TOP, "tests", "crash",
                                         "workload.py"),
            a.mnt, "--lower", a.lower, "--records", records,
            "--fsync-records", "--seed", str(seed)]
    if os.path.exists(tar):
        argv += ["--tar", tar, "--tar-members",
                 os.environ.get("CRASH_TAR_MEMBERS", "400")]
    # Until the panic.
    os.execv(sys.executable, argv)


def read_records(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            try:
                out.append(json.loads(line))
            except ValueError:
                break
    return out


def file_ok(root, r):
    """Why the recorded file @r under @root is not as recorded, or None."""
    p = os.path.join(root, r["path"])
    try:
        st = os.lstat(p)
        with open(p, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        return "%s: %s" % (r["path"], e.strerror)
    why = []
    if st.st_size != r["size"] or digest != r["sha256"]:
        why.append("size %d (recorded %d) or content differs" %
                   (st.st_size, r["size"]))
    if st.st_mode != r["mode"]:
        why.append("mode %o, recorded %o" % (st.st_mode, r["mode"]))
    return "%s: %s" % (r["path"], ", ".join(why)) if why else None


def files_ok(root, recs):
    bad = [w for w in (file_ok(root, r) for r in recs) if w]
    if bad:
        more = len(bad) - 3
        return False, "%d of %d wrong: %s%s" % (
            len(bad), len(recs), "; ".join(bad[:3]),
            " and %d more" % more if more > 0 else "")
    return True, "%d files" % len(recs)


def explain(lines, cache, lentos):
    """What the lentos, their logs and the recovery block say of the paths
    in treecmp's first @lines."""
    paths = set()
    for line in lines:
        if ": " not in line:
            continue
        name, rest = line.split(": ", 1)
        paths.add(name)
        if rest.startswith("hardlink: "):
            other = rest[len("hardlink: "):].split(" != ")[0]
            if other != "-":
                paths.add(other)
    for k in lentos:
        for n in sorted(paths):
            st, out = k.ctl("stat", VOL + "/" + n, ok=False)
            print("#   %s %s: %s" % (k.name, n, " ".join(out.split())[:300]),
                  flush=True)
    names = {os.path.basename(n) for n in paths}
    p = subprocess.run([KMLCAT, "--json", cache], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout.splitlines():
        if any('"%s"' % n in line for n in names):
            print("#   kml: " + line[:300], flush=True)
    for k in lentos[:1]:
        with open(k.log, errors="replace") as f:
            for line in f:
                if any(n in line for n in names):
                    print("#   %s log: %s" % (k.name, line.rstrip()[:300]),
                          flush=True)


class Checks:
    def __init__(self, label):
        self.label = label
        self.passed = self.failed = 0

    def __call__(self, name, fn):
        """Run check @name: fn() -> (ok, detail). False if it failed."""
        t0 = time.monotonic()
        try:
            ok, detail = fn()
        except Exception as e:
            ok, detail = False, "%s: %s" % (type(e).__name__, e)
            traceback.print_exc(file=sys.stdout)
        dt = time.monotonic() - t0
        if ok:
            self.passed += 1
            print("ok - %s %s (%s; %.0f s)" % (self.label, name, detail, dt),
                  flush=True)
        else:
            self.failed += 1
            print("not ok - %s %s: %s (%.0f s)" % (self.label, name, detail,
                                                   dt), flush=True)
        return ok


def check(d, records, label):
    c = Checks(label)
    recs = read_records(records)
    cache = os.path.join(d, "a", VOL)

    def recovery():
        sh("mount", "-t", "presto", "-o", "lower=" + cache, "presto",
           "/mnt/p")
        sh("umount", "/mnt/p")
        return True, "mounted and unmounted"
    if not c("recovery-mount", recovery):
        return c

    def strict():
        p = subprocess.run([KMLCAT, "--strict", cache],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        return p.returncode == 0, p.stderr.strip() or "clean"
    c("log-strict", strict)
    c("fsynced-in-cache", lambda: files_ok(cache, recs))

    t = lr.Test("e2e-check", d)
    srv = lr.Server(d, heartbeat_ms=3000)
    a = Fileset(d, "a", srv, "/mnt/p")
    cl = Fileset(d, "c" + str(time.time_ns()), srv, "/mnt/c")
    try:
        def resume():
            t.procs.append(srv)
            srv.start()
            t.procs.append(a)
            if os.path.exists(a.sock):     # left by the crash
                os.unlink(a.sock)
            a.start().mount()
            return True, "server epoch %s" % srv.epoch

        if not c("lento-resumes", resume):
            return c

        def synced():
            try:
                a.sync(timeout=300)
            except lr.Fail as e:
                # Where the client stands: the permit, what is pending,
                # the last round's result.
                st = a.status()
                return False, "%s; status: %s" % (
                    str(e).strip()[:200],
                    json.dumps({k: st.get(k) for k in (
                        "state", "last_error", "volumes")})[:1500])
            v = a.volstat(VOL)
            if v["pending_records"] or v["stuck"] or v["conflict"]:
                return False, "pending %d, stuck %s, conflict %s" % (
                    v["pending_records"], v["stuck"], v["conflict"])
            return True, "%d records applied in %d rounds" % (
                v["records_applied"], v["rounds"])
        c("sync-reaches-server", synced)
        t.procs.append(cl)
        cl.start().mount()
        c("fsynced-at-server", lambda: files_ok(cl.mnt, recs))

        def agree():
            p = subprocess.run([TREECMP, a.mnt, cl.mnt],
                               stdout=subprocess.PIPE, text=True)
            lines = p.stdout.splitlines()
            for line in lines[:6]:
                print("#   " + line, flush=True)
            if p.returncode != 0:
                explain(lines[:3], cache, (a, cl))
            return p.returncode == 0, "; ".join(lines[-4:])
        c("trees-agree", agree)
    finally:
        for k in (cl, a):
            subprocess.run(["umount", k.mnt], stderr=subprocess.DEVNULL)
        for p in t.finish():
            print("# " + p.splitlines()[0], flush=True)
    return c


def main():
    cmd = sys.argv[1]
    if cmd == "start":
        start(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "check":
        c = check(sys.argv[2], sys.argv[3], sys.argv[4])
        print("%d passed, %d failed" % (c.passed, c.failed))
        sys.exit(1 if c.failed else 0)
    else:
        sys.exit("usage: e2e.py start DIR RECORDS SEED | "
                 "check DIR RECORDS LABEL")


if __name__ == "__main__":
    main()
