#!/usr/bin/env python3
"""lento's client under faults of its own, with presto (the channel and
the journal). Runs in the test VM as root with presto loaded, SCRATCH on
ext4:

    tests/integration/clientfaults.py SCRATCH [CASE...]

One lento server, a publisher C, and two lento clients A and B serving
the volume "vol" through presto mounts (as in readpath.py and
writepath.py). A and B run with LENTO_TEST_FAULTS (lento/fault.c): a case
arms a fault point by writing its name to the client's fault file.

- reply_send_fails: the REPLY to an upcall cannot be sent at first; the
  open still succeeds, promptly (not ETIMEDOUT after timeout=).
- upcall_alloc_fails: no memory for an upcall's state; the open fails
  at once with ENOMEM (not after timeout=), and works again after.
- lost_notice_resync: a message from presto (the KML notice that says a
  change is durable) is dropped as the kernel drops one when lento's
  buffer is full; lento notices, asks presto again where the fileset
  stands and consumes the change at once (not only when the next change,
  or the idle permit's release 30 s later, tells it).
- set_aside_keeps_content: a journal record that never translates is
  set aside after 3 tries, and the content of the file it names is kept
  under CACHE/.lento/quarantine.
- broken_journal_holds_permit: A's mount is unmounted while its lento is
  behind the journal, and the journal then cannot be read; B changing the
  volume revokes A's permit, and A does not give it back while its
  changes are unread (B waits until the server's lease on A's permit runs
  out, or fails with the mount's timeout); once the journal reads again
  A ships its changes, and both changes are at the server.
- listing_waits_journal: a client apart from the server removes a file
  that the server renames meanwhile; back in touch, its lento is behind
  the journal (injected): the directory's listing waits until the
  removal is read, and the file does not come back under its new name.

Each case prints "ok - NAME" or "not ok - NAME"; the last line is
"N passed, N failed". Alone in the VM:

    tools/vm --disk build/vm/cf.img:2G --fresh-disks \\
        tests/integration/clientfaults-guest [PRESTO_KO] [CASE...]
"""
import errno
import importlib.machinery
import importlib.util
import os
import shutil
import signal
import sys
import threading
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
TIMEOUT_S = rp.TIMEOUT_S


LEASE_S = 10

class Setup:
    def __init__(self, scratch):
        self.t = lr.Test("clientfaults", scratch)
        self.srv = self.t.server(heartbeat_ms=3000, lease_ms=LEASE_S * 1000)
        self.srv.volume(VOL)
        self.c = self.t.client("c", self.srv)
        self.more = []

    def kclient(self, name):
        k = rp.Kclient(self.t.tmp, name, self.srv,
                       os.path.join(self.t.tmp, "mnt-" + name))
        k.faults = os.path.join(self.t.tmp, name + ".faults")
        self.t.procs.append(k)
        self.more.append(k)
        return k.start(env={"LENTO_TEST_FAULTS": k.faults})

    def finish(self):
        for k in self.more:
            k.umount()
        return self.t.finish()


def arm(k, point):
    with open(k.faults, "w") as f:
        f.write(point)


def met(k, timeout=10):
    wait_until(lambda: not os.path.exists(k.faults), timeout,
               "%s meeting its fault" % k.name)


def lento_counts(k):
    return k.fileset()["lento"]


def journal(k):
    return k.fileset()["journal"]


def publish(s, name, data):
    path = os.path.join(s.t.tmp, "body")
    with open(path, "wb") as f:
        f.write(data)
    s.c.ctl("write", VOL + "/" + name, "@" + path)


# ---------------------------------------------------------------- cases

def case_mount(s):
    """A and B register, mount, confirm an epoch; C publishes files."""
    s.c.ctl("mkdir", VOL + "/d")
    for i in range(4):
        publish(s, "d/f%d" % i, b"file %d\n" % i * 100)
    s.c.sync()
    s.a = s.kclient("a")
    s.b = s.kclient("b")
    for k in (s.a, s.b):
        k.mount()
        k.ready()
    os.listdir(os.path.join(s.a.mnt, "d"))
    os.listdir(os.path.join(s.b.mnt, "d"))


def case_reply_send_fails(s):
    """The REPLY to a FETCH_FILE cannot be sent (injected ENOBUFS): lento
    sends it again, and the open succeeds well before timeout=. Before,
    the answer was dropped and the open failed with ETIMEDOUT."""
    a = s.a
    owed = lento_counts(a)["replies_owed"]
    arm(a, "upcall-reply")
    t0 = time.monotonic()
    with open(os.path.join(a.mnt, "d/f0"), "rb") as f:
        data = f.read()
    dt = time.monotonic() - t0
    check(data == b"file 0\n" * 100, "d/f0 read wrong")
    check(not os.path.exists(a.faults), "the fault was not met")
    check(dt < TIMEOUT_S - 1, "the open took %.1f s (timeout=%d)" %
          (dt, TIMEOUT_S))
    check(lento_counts(a)["replies_owed"] > owed, "no answer owed")


def case_upcall_alloc_fails(s):
    """lento has no memory for an upcall (injected): it answers ENOMEM at
    once, and the next open works. Before, the upcall went unanswered and
    the open failed with ETIMEDOUT after timeout=."""
    a = s.a
    arm(a, "upcall-alloc")
    t0 = time.monotonic()
    try:
        open(os.path.join(a.mnt, "d/f1"), "rb").close()
        raise Fail("the open succeeded though lento had no memory for it")
    except OSError as e:
        check(e.errno == errno.ENOMEM, "the open failed with %s, not "
              "ENOMEM" % errno.errorcode.get(e.errno, e.errno))
    dt = time.monotonic() - t0
    check(dt < TIMEOUT_S - 1, "the ENOMEM took %.1f s (timeout=%d)" %
          (dt, TIMEOUT_S))
    with open(os.path.join(a.mnt, "d/f1"), "rb") as f:
        check(f.read() == b"file 1\n" * 100, "d/f1 read wrong")


def case_lost_notice_resync(s):
    """The KML notice saying a change is durable is dropped (as the
    kernel drops one at a full buffer; injected): lento notices the loss,
    registers again, learns where the log stands and consumes the change
    within seconds. Before, the loss went unseen (NETLINK_NO_ENOBUFS) and
    the change waited for the next notice."""
    a = s.a
    os.mkdir(os.path.join(a.mnt, "d/first"))
    os.sync()
    wait_until(lambda: journal(a)["consumed"] >= journal(a)["durable"] > 0
               and journal(a), 20, "A consuming its first change")
    check(a.fileset()["permit"]["presto"], "A's presto holds no permit")
    time.sleep(1.5)         # access hints sent: the next message is KML
    losses = a.status()["presto"]["losses"]
    resyncs = lento_counts(a)["resyncs"]
    records = journal(a)["records_consumed"]
    arm(a, "kchan-drop")
    os.mkdir(os.path.join(a.mnt, "d/second"))
    os.sync()
    met(a)
    wait_until(lambda: journal(a)["records_consumed"] > records, 8,
               "A consuming the change whose notice was lost")
    check(a.status()["presto"]["losses"] > losses, "no loss counted")
    check(lento_counts(a)["resyncs"] > resyncs, "no resynchronisation")


def case_set_aside_keeps_content(s):
    """A record that never translates is set aside after 3 tries; the
    content of the file it names is kept under .lento/quarantine, not lost
    to the fetch that replaces the file."""
    a = s.a
    n0 = journal(a)["quarantined"]
    stop = threading.Event()

    def rearm():
        while not stop.is_set() and journal(a)["quarantined"] == n0:
            if not os.path.exists(a.faults):
                arm(a, "kapply-record-bad")
            time.sleep(0.05)
        if os.path.exists(a.faults):
            os.unlink(a.faults)
    t = threading.Thread(target=rearm)
    t.start()
    try:
        with open(os.path.join(a.mnt, "d/q-file"), "wb") as f:
            f.write(b"keep me\n")
            f.flush()
            os.fsync(f.fileno())
        wait_until(lambda: journal(a)["quarantined"] > n0, 30,
                   "the record set aside")
    finally:
        stop.set()
        t.join()
    qdir = os.path.join(a.cache, ".lento", "quarantine")
    kept = [n for n in os.listdir(qdir)
            if open(os.path.join(qdir, n), "rb").read() == b"keep me\n"]
    check(kept, "no copy of the file's content in %s: %s" %
          (qdir, os.listdir(qdir)))
    check("set aside" in journal(a)["quarantine_last"],
          "status: %r" % journal(a)["quarantine_last"])
    # lentoctl lists it with its kept file, and drops both on request.
    listed = a.ctl("quarantine")
    mine = [e for e in listed
            if any(f["name"] in kept for f in e["files"])]
    check(mine, "lentoctl quarantine does not show %s: %r" % (kept, listed))
    e = mine[0]
    a.ctl("quarantine-drop", e["volume"], e["seq"])
    left = [f["name"] for f in e["files"]
            if os.path.exists(os.path.join(qdir, f["name"]))]
    check(not left, "quarantine-drop left %s" % left)
    check(all(x["seq"] != e["seq"] for x in a.ctl("quarantine", e["volume"])),
          "record %d still listed after its drop" % e["seq"])


def case_broken_journal_holds_permit(s):
    """A's mount goes while A's lento is stopped behind the journal; the
    journal then cannot be read (injected, again and again). B's change
    revokes A's permit: A holds it (status, log) and B's change fails
    with the mount's timeout; A's changes are not lost. Once the journal
    reads again, A ships its changes, gives the permit back, and B's
    change goes through. Before, A took the unreadable journal for
    consumed and gave the permit back: B's change went in first and A's
    changes waited, unseen, for A's next mount."""
    a, b = s.a, s.b
    with open(os.path.join(a.mnt, "d/a-first"), "wb") as f:
        f.write(b"first\n")
    check(a.fileset()["permit"]["presto"], "A's presto holds no permit")
    stop = threading.Event()

    def rearm():
        while not stop.is_set():
            if not os.path.exists(a.faults):
                arm(a, "kread-bad")
            time.sleep(0.05)

    a.p.send_signal(signal.SIGSTOP)
    try:
        with open(os.path.join(a.mnt, "d/a-held"), "wb") as f:
            f.write(b"A's change\n")
        a.umount()
        arm(a, "kread-bad")
    finally:
        a.p.send_signal(signal.SIGCONT)
    t = threading.Thread(target=rearm)
    t.start()
    try:
        wait_until(lambda: journal(a)["error"], 20,
                   "A's journal error in status")
        # B wants the volume: the server revokes A's permit.
        res = {}

        def b_first():
            t0 = time.monotonic()
            try:
                with open(os.path.join(b.mnt, "d/b-after"), "wb") as f:
                    f.write(b"B's change\n")
                res["err"] = 0
            except OSError as e:
                res["err"] = e.errno
            res["dt"] = time.monotonic() - t0
        bt = threading.Thread(target=b_first)
        bt.start()
        wait_until(lambda: a.fileset()["permit"]["held_journal_broken"],
                   20, "A saying its permit is held")
        check(lr.grep(a, "the permit is NOT given back"),
              "A's log does not say the permit is held")
        bt.join(120)
        check(not bt.is_alive(), "B's change still waits after 120 s")
        check(res["err"] in (0, errno.ETIMEDOUT, errno.EIO),
              "B's change failed with %s" %
              errno.errorcode.get(res["err"], res["err"]))
        # A holds on until the server's lease on the permit runs out (a
        # client stuck for good must not hold the volume for ever); before,
        # A gave the permit back at once, as if its journal were consumed.
        check(res["err"] or res["dt"] >= LEASE_S - 1,
              "B changed the volume %.1f s after asking, before A's lease "
              "(%d s) ran out: A gave its permit back" % (res["dt"], LEASE_S))
    finally:
        stop.set()
        t.join()
        if os.path.exists(a.faults):
            os.unlink(a.faults)
    # The journal reads again: A ships, and B's change goes through.
    wait_until(lambda: not journal(a)["error"], 20,
               "A reading its journal again")
    a.sync(timeout=120)

    def b_writes():
        try:
            with open(os.path.join(b.mnt, "d/b-after"), "wb") as f:
                f.write(b"B's change\n")
            return True
        except OSError:
            return False
    wait_until(b_writes, 60, "B's change once A let go")
    b.sync(timeout=120)
    with open(os.path.join(b.mnt, "d/a-held"), "rb") as f:
        check(f.read() == b"A's change\n", "A's held change lost")
    a.mount()
    a.ready()


def case_listing_waits_journal(s):
    """D, apart from the server, removes a file through its mount while
    its lento does not read the journal (injected: a reader behind);
    meanwhile the file is renamed at the server. Back in touch, the
    listing of the directory waits until lento has read the removal, and
    shows neither name; the removal then conflicts with the rename, and
    resolved for the server D has the file under its new name. Before,
    the listing was applied at once: the file the user removed came back
    under its new name."""
    proxy = s.t.proxy(s.srv)
    d = rp.Kclient(s.t.tmp, "d", proxy, os.path.join(s.t.tmp, "mnt-d"))
    d.faults = os.path.join(s.t.tmp, "d.faults")
    s.t.procs.append(d)
    s.more.append(d)
    d.start(env={"LENTO_TEST_FAULTS": d.faults})
    d.mount()
    d.ready()
    s.c.ctl("mkdir", VOL + "/lw")
    publish(s, "lw/f", b"f's content\n")
    s.c.sync()
    lw = os.path.join(d.mnt, "lw")
    check(os.listdir(lw) == ["f"], "D lists %s" % os.listdir(lw))
    with open(os.path.join(lw, "f"), "rb") as f:
        check(f.read() == b"f's content\n", "D reads f wrong")
    proxy.cut()
    wait_until(lambda: d.status()["state"] != "connected", 30,
               "D noticing it is apart")
    s.c.ctl("rename", VOL + "/lw/f", VOL + "/lw/g")
    s.c.sync()
    arm(d, "kml-stall")
    os.unlink(os.path.join(lw, "f"))
    os.sync()               # durable: only lento's reading is behind
    listings = d.ctl("cache")["listings"]
    proxy.restore()
    d.wait_connected(60)
    wait_until(lambda: d.volstat(VOL)["validated"], 30, "D validated")
    got = {}

    def lister():
        try:
            got["names"] = sorted(os.listdir(lw))
        except OSError as e:
            got["err"] = e.errno
    t = threading.Thread(target=lister)
    t.start()
    try:
        time.sleep(3)
        check(t.is_alive(), "the listing did not wait for the journal: "
              "D listed %r" % got)
        check(d.ctl("cache")["listings"] == listings,
              "a listing was applied while the journal was unread")
    finally:
        os.unlink(d.faults)
        t.join(60)
    check(not t.is_alive(), "D's listing still waits after the journal "
          "was read again")
    check(got == {"names": []}, "D lists %r, want [] (f removed by the "
          "user, g its new name at the server)" % got)
    on_disk = sorted(os.listdir(os.path.join(d.cache, VOL, "lw")))
    check(on_disk == [], "D's cache holds %s" % on_disk)
    # The removal meets the rename at the server: a conflict, said.
    rc, out = d.ctl("sync", ok=False, timeout=120)
    check(rc == 1 and "conflict" in out, "D's sync: %d %s" % (rc, out))
    d.ctl("resolve", VOL, "server")
    d.sync(timeout=120)
    wait_until(lambda: os.listdir(lw) == ["g"], 30,
               "D listing g once its removal is dropped")
    with open(os.path.join(lw, "g"), "rb") as f:
        check(f.read() == b"f's content\n", "D reads g wrong")


CASES = [(n[5:], f) for n, f in list(globals().items())
         if n.startswith("case_")]


def main():
    if len(sys.argv) < 2:
        print("usage: clientfaults.py SCRATCH [CASE...]")
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
        if only and name not in only and name != "mount":
            continue
        t0 = time.monotonic()
        try:
            fn(s)
            print("ok - %s (%.1f s)" % (name, time.monotonic() - t0))
            passed += 1
        except Exception as e:
            failed += 1
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
    for p in s.finish():
        failed += 1
        print("not ok - %s" % p.splitlines()[0])
        for line in p.splitlines()[1:]:
            print("  # " + line)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
