#!/usr/bin/env python3
"""Crash states of presto replayed from a dm-log-writes log.

    dmlog.py --data DEV --log DEV --scratch DIR [--mnt DIR] [--seed S]
             [--seconds S] [--procs N] [--points P] [--tar-members N]
             [--early N] [--e2e]

Runs inside the test VM as root, presto loaded (or PRESTO_KO set). DEV
(data) must be zeroed -- a fresh disk --, as the replays start from zeros;
the log disk must hold every write made to it (about 4 MB a second of
the workload, and the mkfs: 2 GB is plenty). Everything on both is lost.

1. A dm-log-writes target over the two disks; mkfs.ext4 on it; an empty
   cache made, mounted through presto once, and its kml_replay.py
   snapshot (with map) taken into the scratch directory; then the
   workload (tests/crash/workload.py) through presto for --seconds
   (default 30) with --procs workers (default 4) and unpacks of the first
   --tar-members (default 400) of build/tree.tar, each fsync'd file
   recorded in the scratch directory and followed by a mark "fsyncN" in
   the log; then umount and teardown. The data disk's write cache is
   off below the target (write_through()), so that the log keeps the
   disk's order. The log's end state, replayed, must equal the data disk
   in every block of a file: a difference is said with the log entries
   that wrote the block, and the round is recorded again on the zeroed
   disk, RECORDINGS times in all; a block of free space or metadata that
   differs is only said.
2. Crash points: the state at the end of the log; the mark "mounted",
   put just after presto's mount for the workload and an ext4 journal
   commit forced by an fsync outside the cache, before the log was ever
   synced, and the first --early (2) flush points after it; the fsync
   marks (all, or an even sample of half of --points); a random sample
   of the flush points after the cache was made (replay-log
   --flush-points); --points in all (default 30). For each,
   the log is replayed (tools/bin/replay-log) onto a sparse file of the
   data disk's size in the scratch directory, which is then mounted as
   ext4 (its journal recovered) on a loop device; presto is mounted over
   the cache (the kernel runs its recovery) and unmounted; then
   tests/crash/crashcheck.py's four checks, with the records that
   preceded the point: fsynced-in-cache, fsynced-in-log, log-strict,
   history.

With --e2e, the same end to end (I-2 and I-3 with lento): a lento server
and a client A on the logged disk (tests/crash/e2e.py), the workload
through A's presto mount; each crash point is replayed, mounted where the
disk was, and checked as e2e.py checks a panicked round: presto's
recovery, the server and A restarted on what the crash left, "lentoctl
sync", and a client with an empty cache reading every fsync'd file and
the whole tree back from the server. Fewer points, as each takes a
minute or two under emulation.

Prints "ok - ..." / "not ok - ..." per check of each point ("mount" for
the mounts themselves), a table per check, and "N passed, N failed".
The seed (printed; --seed or PRESTO_SEED) chooses the workload's random
choices and the sample of points; replaying a seed gives the same
choices, not the same timings.
"""
import argparse
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import crashcheck  # noqa: E402
import e2e  # noqa: E402

REPLAY_LOG = os.path.join(TOP, "tools", "bin", "replay-log")
KML_REPLAY = os.path.join(TOP, "tests", "integration", "kml_replay.py")
TARBALL = os.path.join(TOP, "build", "tree.tar")
DM = "presto-crash-lw"
# Recordings made at most while the log's end state differs from the
# data disk in a block of a file (unfaithful()): a second one tells an
# accident from a rule.
RECORDINGS = 2
CHECKS = ("mount", "fsynced-in-cache", "fsynced-in-log", "log-strict",
          "history")

t0 = time.monotonic()


def say(msg):
    print("dmlog: %s (%.0f s)" % (msg, time.monotonic() - t0), flush=True)


def run(*cmd, check=True, quiet=False):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode,
                                                p.stdout.strip()[-500:]))
    if not quiet and p.stdout.strip() and p.returncode != 0:
        print(p.stdout.strip())
    return p


def umount(path):
    subprocess.run(["umount", path], stderr=subprocess.DEVNULL)


def presto_loaded():
    with open("/proc/modules") as f:
        return any(line.startswith("presto ") for line in f)


def mark(name):
    run("dmsetup", "message", DM, "0", "mark", name)


def write_through(disk):
    """Turns the volatile write cache of @disk off below the log-writes
    target, which keeps the cache it found when it was made: the file
    system above still sends its flushes and FUA writes, and they are
    logged. Returns the sysfs file that turns it back on.

    dm-log-writes logs the writes that completed before a flush when that
    flush completes, so two flushes in flight must complete in the order
    they were sent. On a disk with a volatile cache they need not; most
    likely, a jbd2 commit block (PREFLUSH|FUA) on a disk without FUA, as
    virtio-blk is, takes one flush before it and one after, and a flush
    sent meanwhile (an fsync's) completes between them. The writes
    before the later flush were then logged before those before the
    earlier one; where both held a block (the segment page records are
    appended to, written twice), the log ended on the older version of
    it, and every state replayed from there was wrong about it. Without
    the cache the disk completes an empty flush inside its submission, in
    the order sent.
    The data disk only has to hold what the guest wrote: no power loss
    is tested through it, only replays of the log."""
    wc = "/sys/block/%s/queue/write_cache" % os.path.basename(
        os.path.realpath(disk))
    with open(wc, "w") as f:
        f.write("write through")
    return wc


def record(args, mnt, scratch):
    """Step 1: the logged workload. Returns the data disk's size."""
    lw, p = os.path.join(mnt, "lw"), os.path.join(mnt, "p")
    cache = os.path.join(lw, "cache")
    for d in (lw, p):
        os.makedirs(d, exist_ok=True)
    size = int(run("blockdev", "--getsize64", args.data).stdout)
    run("dmsetup", "remove", "--noudevsync", DM, check=False, quiet=True)
    # A stale super at the start of the log would not be overwritten
    # before the first FUA or mark.
    run("dd", "if=/dev/zero", "of=" + args.log, "bs=1M", "count=1",
        "oflag=direct", "status=none")
    run("dmsetup", "create", "--noudevsync", DM, "--table",
        "0 %d log-writes %s %s" % (size // 512, args.data, args.log))
    # Without udev's help the node may come late: make it now.
    run("dmsetup", "mknodes", DM)
    dev = "/dev/mapper/" + DM
    wc = write_through(args.data)
    try:
        run("mkfs.ext4", "-q", "-F", "-E",
            "nodiscard,lazy_itable_init=0,lazy_journal_init=0", dev)
        run("mount", dev, lw)
        if args.e2e:
            try:
                workload_e2e(args, lw, scratch)
            finally:
                umount(lw)
            return size
        try:
            os.mkdir(cache)
            run("mount", "-t", "presto", "-o", "lower=" + cache, "presto", p)
            run("umount", p)
            snap = os.path.join(scratch, "snap")
            run(sys.executable, KML_REPLAY, "snapshot", cache, snap,
                "--map", os.path.join(scratch, "snap.map.json"))
            # Crash points start here: the cache is made and durable.
            run("sync", "-f", lw)
            mark("cache-ready")
            run("mount", "-t", "presto", "-o", "lower=" + cache, "presto", p)
            try:
                # One fixed point: the mount's new segment, with an ext4
                # journal commit (an fsync outside the cache) but no sync
                # of the log yet -- as a periodic commit may do.
                fd = os.open(os.path.join(lw, "commit"),
                             os.O_WRONLY | os.O_CREAT, 0o600)
                os.write(fd, b"x")
                os.fsync(fd)
                os.close(fd)
                mark("mounted")
                say("workload for %d s" % args.seconds)
                wl = subprocess.run(workload_cmd(args, p, cache, scratch))
                if wl.returncode != 0:
                    raise RuntimeError("the workload failed (exit %d)" %
                                       wl.returncode)
            finally:
                umount(p)
            live = log_summary(cache)
        finally:
            umount(lw)
    finally:
        run("dmsetup", "remove", "--noudevsync", DM, check=False)
        with open(wc, "w") as f:
            f.write("write back")
    # What the data disk itself holds, past every cache: the end point's
    # replay must find the same log.
    run("mount", "-o", "ro", args.data, lw)
    try:
        say("the log after the workload: %s; on the data disk: %s" % (
            live, log_summary(cache)))
    finally:
        umount(lw)
    return size


def unfaithful(args, size, scratch):
    """[(block, owner)]: the 4 KiB blocks in which the log's end state,
    replayed, differs from the data disk itself, and whose they are; []
    if the log is faithful. Every crash state replayed from a log that
    is not is wrong about such a block, so the round says so instead of
    blaming presto for records the disk had. While the data disk kept
    its write cache on (before write_through()), about a third of the
    recordings here ended on an older version of presto's segment page
    than the disk had. What is left is a block of free space now and
    then: most likely a file's page changed while it was being written
    (ext4 does not keep pages stable here, and dm-log-writes copies a
    write when it is sent) and freed before it was written again."""
    img = replay_image(args, size, scratch,
                       ["--end-mark", "dm-log-writes-end"])
    try:
        bad = []
        with open(img, "rb") as a, open(args.data, "rb") as b:
            blk = 0
            while True:
                x, y = a.read(1 << 20), b.read(1 << 20)
                if not x and not y:
                    break
                if x != y:
                    bad += [blk + i // 4096 for i in range(0, len(x), 4096)
                            if x[i:i + 4096] != y[i:i + 4096]]
                blk += len(x) // 4096
        return [(b, owner(args.data, b)) for b in bad]
    finally:
        os.unlink(img)


def block_history(args, blocks):
    """{block: text} for each of @blocks (4 KiB): which log entries wrote
    it and which flush or FUA entry came next after each, as "E (then
    F)" -- the order the log gives the block's writes, for a log whose
    end state differs from the disk. The log is listed once for all."""
    p = run(REPLAY_LOG, "--log", args.log, "--list", check=False,
            quiet=True)
    m = re.search(r"sector size (\d+)", p.stdout)
    if p.returncode != 0 or not m:
        return {b: "replay-log --list failed" for b in blocks}
    per = 4096 // int(m.group(1))
    out = {b: [] for b in blocks}
    open_ = {b: [] for b in blocks}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) < 7 or f[1] != "sector":
            continue
        idx, sec, n, flags = int(f[0]), int(f[2]), int(f[4]), f[6]
        flush = "FLUSH" in flags or "FUA" in flags
        for b in blocks:
            if flush and open_[b]:
                out[b] += ["%d (then %d)" % (e, idx) for e in open_[b]]
                open_[b] = []
            if (sec < (b + 1) * per and sec + n > b * per and
                    "DISCARD" not in flags):
                open_[b].append(idx)
    return {b: ", ".join(out[b] + ["%d (no flush after)" % e
                                   for e in open_[b]]) or "no entry"
            for b in blocks}


def owner(dev, block):
    """The path of the file @block of the ext4 on @dev belongs to, or what
    it is ("metadata or free")."""
    p = run("debugfs", "-R", "icheck %d" % block, dev, check=False,
            quiet=True)
    m = re.search(r"^%d\s+(\d+)" % block, p.stdout, re.M)
    if not m:
        return "metadata or free"
    p = run("debugfs", "-R", "ncheck %s" % m.group(1), dev, check=False,
            quiet=True)
    m2 = re.search(r"^%s\s+(\S+)" % m.group(1), p.stdout, re.M)
    return m2.group(1) if m2 else "inode " + m.group(1)


def log_summary(cache):
    """"N records to seq S" of the log in @cache, or kmlcat's error."""
    try:
        recs = crashcheck.kml_records(cache)
    except RuntimeError as e:
        return str(e)
    return "%d records to seq %d" % (len(recs), recs[-1]["seq"] if recs
                                     else 0)


def kernel_log():
    """The kernel log's lines."""
    return run("dmesg", check=False, quiet=True).stdout.splitlines()


def workload_cmd(args, mnt, lower, scratch):
    cmd = [sys.executable, os.path.join(HERE, "workload.py"), mnt,
           "--lower", lower, "--records",
           os.path.join(scratch, "records.jsonl"),
           "--seconds", str(args.seconds), "--procs", str(args.procs),
           "--seed", str(args.seed), "--mark", DM]
    if os.path.exists(TARBALL):
        cmd += ["--tar", TARBALL, "--tar-members", str(args.tar_members)]
    return cmd


def workload_e2e(args, lw, scratch):
    """--e2e's step 1: a server and client A in LW/e2e, A's presto mount
    at /mnt/p, the workload through it; then everything stopped."""
    d = os.path.join(lw, "e2e")
    os.makedirs(d)
    t = e2e.lr.Test("dmlog-e2e", d)
    try:
        srv = t.server(heartbeat_ms=3000)
        srv.volume(e2e.VOL)
        a = e2e.Fileset(d, "a", srv, "/mnt/p")
        t.procs.append(a)
        a.start().mount()
        # Crash points start here: server, cache and mount are ready.
        run("sync", "-f", lw)
        mark("cache-ready")
        say("workload for %d s, through lento" % args.seconds)
        wl = subprocess.run(workload_cmd(args, a.mnt, a.lower, scratch))
        if wl.returncode != 0:
            raise RuntimeError("the workload failed (exit %d)" %
                               wl.returncode)
    finally:
        umount("/mnt/p")
        for p in t.finish():
            print("# " + p.splitlines()[0], flush=True)


def replay_image(args, size, scratch, how):
    """The log replayed (tools/bin/replay-log @how) onto a fresh sparse
    image of the data disk's @size in @scratch: its path."""
    img = os.path.join(scratch, "replay.img")
    if os.path.exists(img):
        os.unlink(img)
    with open(img, "wb") as f:
        f.truncate(size)
    run(REPLAY_LOG, "--log", args.log, "--replay", img, *how)
    return img


@contextlib.contextmanager
def replayed(args, size, scratch, how, where):
    """The disk at one crash point: the log replayed (tools/bin/replay-log
    @how) onto a fresh sparse image of the data disk's @size, which is
    mounted as ext4 on @where (its journal recovered) for the block.
    Yields when the replay started and how long it took. RuntimeError if
    the mount fails."""
    loop = None
    try:
        t = time.monotonic()
        img = replay_image(args, size, scratch, how)
        t_replay = time.monotonic() - t
        loop = run("losetup", "-f", "--show", img).stdout.strip()
        p = run("mount", "-t", "ext4", loop, where, check=False)
        if p.returncode != 0:
            raise RuntimeError("mount ext4: " + p.stdout.strip())
        try:
            yield t, t_replay
        finally:
            umount(where)
    finally:
        if loop:
            run("losetup", "-d", loop, check=False)


def check_point_e2e(args, size, mnt, scratch, records, point):
    """--e2e: replay one crash point onto the disk's place and check it
    as e2e.py checks a round: {check: passed}."""
    entry, label, how, upto = point
    label = "%s@%d" % (label, entry)
    lw = os.path.join(mnt, "lw")
    recs = os.path.join(scratch, "records-upto.jsonl")
    with open(recs, "w") as f:
        for r in records[:upto]:
            f.write(json.dumps(r) + "\n")
    try:
        with replayed(args, size, scratch, how, lw):
            say("%s: records 1..%d fsync'd before it" % (label, upto))
            c = e2e.check(os.path.join(lw, "e2e"), recs, label)
            return {"e2e": (c.passed, c.failed)}
    except RuntimeError as e:
        print("not ok - %s mount: %s" % (label, e), flush=True)
        return {"e2e": (0, 1)}


def points(args, rng):
    """[(entry, label, replay-log arguments, records that precede it)]"""
    out = run(REPLAY_LOG, "--log", args.log, "--flush-points").stdout
    flushes, marks = [], []
    for line in out.splitlines():
        w = line.split()
        if w[0] == "mark":
            marks.append((int(w[1]), w[2]))
        else:
            flushes.append(int(w[0]))
    fsync_marks = [(e, name, int(name[5:])) for e, name in marks
                   if name.startswith("fsync")]
    say("the log: %d flush points, %d fsync marks" % (len(flushes),
                                                      len(fsync_marks)))

    def covered(entry):
        n = 0
        for e, _, k in fsync_marks:
            if e < entry:
                n = max(n, k)
        return n

    # No crash point before the cache was made.
    start = [e for e, name in marks if name == "cache-ready"]
    flushes = [e for e in flushes if start and e > start[0]]
    chosen = []
    for e, name in marks:
        if name == "dm-log-writes-end":
            chosen.append((e, "end", ["--end-mark", name],
                           fsync_marks[-1][2] if fsync_marks else 0))
        elif name == "mounted":
            chosen.append((e, "mark-mounted", ["--end-mark", name], 0))
            # The first flush points after it: the new segment's header
            # on its way to the disk.
            for f in [f for f in flushes if f > e][:args.early]:
                chosen.append((f, "early-%d" % f, ["--limit", str(f)],
                               covered(f)))
    budget = max(args.points - len(chosen), 0)
    m = fsync_marks
    if len(m) > budget // 2:
        # An even spread, the last mark included.
        want = budget // 2
        m = [m[len(m) - 1 - (i * len(m)) // want] for i in range(want)][::-1] \
            if want else []
    for e, name, k in m:
        chosen.append((e, "mark-" + name, ["--end-mark", name], k))
    fl = [e for e in flushes if e not in {c[0] for c in chosen}]
    for e in rng.sample(fl, min(len(fl), max(args.points - len(chosen), 0))):
        chosen.append((e, "flush-%d" % e, ["--limit", str(e)], covered(e)))
    chosen.sort()
    return chosen


def check_point(args, size, mnt, scratch, records, point, explain):
    """Replay, mount, check one crash point: {check: passed}."""
    entry, label, how, upto = point
    label = "%s@%d" % (label, entry)
    r, rp = os.path.join(mnt, "r"), os.path.join(mnt, "rp")
    for d in (r, rp):
        os.makedirs(d, exist_ok=True)
    klog = len(kernel_log())
    try:
        with replayed(args, size, scratch, how, r) as (t, t_replay):
            try:
                cache = os.path.join(r, "cache")
                p = run("mount", "-t", "presto", "-o", "lower=" + cache,
                        "presto", rp, check=False)
                if p.returncode != 0:
                    klog = run("dmesg", check=False).stdout.splitlines()
                    klog = [l for l in klog if "presto" in l][-2:]
                    raise RuntimeError("mount presto: %s; kernel log: %s" % (
                        p.stdout.strip().splitlines()[0], " / ".join(klog)))
                p = run("umount", rp, check=False)
                if p.returncode != 0:
                    raise RuntimeError("umount presto: " + p.stdout.strip())
                print("ok - %s mount (records 1..%d fsync'd before it; "
                      "replay %.1f s, mounts %.1f s)" % (
                          label, upto, t_replay,
                          time.monotonic() - t - t_replay), flush=True)
                res = {"mount": True}
                res.update(crashcheck.run_checks(
                    cache, records[:upto], os.path.join(scratch, "snap"),
                    os.path.join(scratch, "snap.map.json"),
                    os.path.join(scratch, "work"), label, explain))
                if not all(res.values()):
                    for line in kernel_log()[klog:]:
                        if "presto" in line:
                            print("#   kernel: " + line.strip(), flush=True)
                return res
            finally:
                umount(rp)
    except RuntimeError as e:
        print("not ok - %s mount: %s" % (label, e), flush=True)
        return {"mount": False}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--mnt", default="/mnt/crash")
    ap.add_argument("--seed", type=int,
                    default=int(os.environ.get("PRESTO_SEED") or
                                random.randrange(1 << 32)))
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--points", type=int, default=30)
    ap.add_argument("--tar-members", type=int, default=400)
    ap.add_argument("--early", type=int, default=2,
                    help="flush points taken right after the mount")
    ap.add_argument("--e2e", action="store_true",
                    help="end to end, with a lento server and client")
    args = ap.parse_args()
    say("seed %d (replay with PRESTO_SEED=%d), data %s, log %s" % (
        args.seed, args.seed, args.data, args.log))
    if not presto_loaded():
        run("insmod", os.environ["PRESTO_KO"])
    scratch = os.path.abspath(args.scratch)
    if os.path.exists(scratch):
        shutil.rmtree(scratch)
    os.makedirs(scratch)
    for attempt in range(1, RECORDINGS + 1):
        try:
            size = record(args, args.mnt, scratch)
            bad = unfaithful(args, size, scratch)
        except RuntimeError as e:
            print("not ok - dmlog-record: %s" % e)
            print("0 passed, 1 failed")
            return 1
        files = [b for b in bad if b[1].startswith("/")]
        if bad:
            print("# the log is not faithful: its end state differs from "
                  "the data disk in %d block(s) (%s)%s" % (
                      len(bad), ", ".join("%d %s" % b for b in bad[:8]),
                      "" if not files else "; recording again"
                      if attempt < RECORDINGS else ""), flush=True)
        history = block_history(args, [b for b, _ in files[:4]])
        for blk, path in files[:4]:
            print("# block %d of %s, written by log entries %s" % (
                blk, path, history[blk]), flush=True)
        if not files:
            break
        if attempt == RECORDINGS:
            print("not ok - dmlog-faithful: %d times the log's end state "
                  "differs from the data disk in a file's block" %
                  RECORDINGS)
            print("0 passed, 1 failed")
            return 1
        run("blkdiscard", "-z", "-f", args.data)
        shutil.rmtree(scratch)
        os.makedirs(scratch)
    records = crashcheck.read_records(os.path.join(scratch, "records.jsonl"))
    rng = random.Random(args.seed)
    pts = points(args, rng)
    say("%d records; checking %d points" % (len(records), len(pts)))
    table = {c: [0, 0] for c in (("e2e",) if args.e2e else CHECKS)}
    for pt in pts:
        if args.e2e:
            p, f = check_point_e2e(args, size, args.mnt, scratch, records,
                                   pt)["e2e"]
            table["e2e"][0] += p
            table["e2e"][1] += f
            continue
        # kml_replay.py explain for the first history that differs only.
        explain = table["history"][1] == 0
        for c, ok in check_point(args, size, args.mnt, scratch, records,
                                 pt, explain).items():
            table[c][0 if ok else 1] += 1
    # The replayed image and copy are big; the records and snapshot stay.
    for f in ("replay.img", "work", "records-upto.jsonl"):
        f = os.path.join(scratch, f)
        if os.path.isdir(f):
            shutil.rmtree(f)
        elif os.path.exists(f):
            os.unlink(f)
    say("%d points checked (seed %d):" % (len(pts), args.seed))
    for c in table:
        print("dmlog:   %-17s %3d passed, %3d failed" % (c, *table[c]))
    passed = sum(v[0] for v in table.values())
    failed = sum(v[1] for v in table.values())
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
