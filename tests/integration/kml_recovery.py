#!/usr/bin/env python3
"""Intent marks and recovery at mount.

    kml_recovery.py EXT

EXT is a mounted ext4 file system with room for a few small images. Runs
as root in the test VM; ends with "N passed, N failed".

A crash is imitated by copying the cache's file system while it is frozen
(fsfreeze syncs it): the copy holds the changes made so far and the marks
set for them, but not the records still queued in presto's memory. The
real crashes (kernel panics, dm-log-writes states) are tests/integration/
kml-crash's; these cases pin down what marks are and when they go.

- a change leaves a mark on the directory it changes (or on the object,
  for a directory's own state or a file with two names), and the mark goes
  some seconds after the change's records are durable;
- a clean umount leaves no marks, and the mount after it logs nothing;
- after an imitated crash, recovery logs the marked objects' state in one
  block of RECOVERED records, removes the marks, reports itself in one
  kernel log line, and the log replayed onto a copy of the cache taken
  before the changes equals the cache;
- a mount after a crash of a cache with no marks logs nothing;
- a record that reaches the disk before its change (an fdatasync that
  only flushes) finds the change's mark there before it, so that recovery
  restates what the crash lost (a copy taken with the device suspended:
  ext4 mounted with commit=300 commits only when asked).
"""
import mmap
import os
import re
import subprocess
import sys
import time

import kmltest
from cases import Cases, check

EXT = sys.argv[1]
MNT = "/mnt/kr"
IMG = f"{EXT}/kr.img"
COPY = f"{EXT}/kr-copy.img"
LOWER = "/mnt/kr-lower"
CLOWER = "/mnt/kr-copy"
REPLAY = os.path.join(kmltest.TOP, "tests", "integration", "kml_replay.py")
TREECMP = os.path.join(kmltest.TOP, "tests", "bin", "treecmp")


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def clean_up():
    subprocess.run(f"fsfreeze -u {LOWER}; umount {MNT}; umount {LOWER};"
                   f" umount {CLOWER}", shell=True,
                   stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


case = Cases(after=clean_up)


def fresh_image():
    """A new ext4 image mounted on LOWER with an empty cache in it."""
    sh(f"rm -f {IMG} {COPY}; truncate -s 256M {IMG}")
    # 4 KiB blocks as on the disk the replay copies to: directory sizes match.
    sh(f"mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 {IMG}")
    os.makedirs(LOWER, exist_ok=True)
    os.makedirs(MNT, exist_ok=True)
    sh(f"mount -o loop {IMG} {LOWER}")
    os.makedirs(f"{LOWER}/cache/.presto")
    return f"{LOWER}/cache"


def mount(cache):
    sh(f"mount -t presto -o lower={cache} presto {MNT}")


# A bucket of the intent directory: INO % 64 in two hex digits.
BUCKET = r"[0-3][0-9a-f]"


def marks(cache):
    """The intent marks in @cache: {(ino, gen)}. A mark is in bucket
    INO % 64 (two hex digits) of the intent directory."""
    found = set()
    top = f"{cache}/.presto/intent"
    for name in os.listdir(top):
        if re.fullmatch(BUCKET, name):
            for mark in os.listdir(f"{top}/{name}"):
                m = re.fullmatch(r"m\.(\d+)\.(\d+)\.(-?\d+)", mark)
                check(m and int(m.group(1)) % 64 == int(name, 16),
                      f"stray {name}/{mark}")
                if m:
                    found.add((int(m.group(1)), int(m.group(2))))
        else:
            check(re.fullmatch(r"anchor\.\d+", name), f"stray {name}")
    return found


def handle(path):
    return (os.lstat(path).st_ino, kmltest.generation(path))


def wait_unmarked(cache, timeout=30):
    deadline = time.time() + timeout
    while marks(cache) and time.time() < deadline:
        time.sleep(0.5)
    return marks(cache)


def crash_copy():
    """Copy the cache's file system as a crash would leave it; mount it."""
    sh(f"fsfreeze -f {LOWER}; cp --sparse=always {IMG} {COPY};"
       f" fsfreeze -u {LOWER}")
    os.makedirs(CLOWER, exist_ok=True)
    sh(f"mount -o loop {COPY} {CLOWER}")
    return f"{CLOWER}/cache"


def dmesg_mark():
    sh("echo kml_recovery: mark > /dev/kmsg")


def dmesg_since_mark():
    out = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    return out[out.rfind("kml_recovery: mark"):]


@case
def a_change_marks_its_directory_and_the_mark_goes_when_durable():
    cache = fresh_image()
    mount(cache)
    os.mkdir(f"{MNT}/d")
    root = handle(cache)
    check(root in marks(cache), ("mkdir marks the parent", marks(cache)))
    with open(f"{MNT}/d/f", "w") as f:
        f.write("x")
    d = handle(f"{cache}/d")
    check(d in marks(cache), "a create marks its directory")
    os.chmod(f"{MNT}/d/f", 0o600)
    check(handle(f"{cache}/d/f") not in marks(cache),
          "a file with one name is covered by its directory's mark")
    os.link(f"{MNT}/d/f", f"{MNT}/f2")
    os.chmod(f"{MNT}/d/f", 0o644)
    check(handle(f"{cache}/d/f") in marks(cache),
          "a file with two names is marked itself")
    os.chmod(f"{MNT}/d", 0o700)
    check(d in marks(cache), "a directory's own state marks it")
    # Idle and durable: the marks go (five seconds after the last use).
    left = wait_unmarked(cache)
    check(not left, ("marks stay", left))
    check(kmltest.state(MNT)["durable_seq"] >= 5, kmltest.state(MNT))


@case
def a_clean_umount_leaves_no_marks_and_the_next_mount_logs_nothing():
    cache = fresh_image()
    mount(cache)
    for i in range(20):
        os.mkdir(f"{MNT}/d{i}")
        with open(f"{MNT}/d{i}/f", "w") as f:
            f.write("data" * i)
    check(marks(cache), "marks while changes are fresh")
    sh(f"umount {MNT}")
    check(not marks(cache), ("umount clears", marks(cache)))
    before = len(kmltest.records(cache))
    dmesg_mark()
    mount(cache)
    sh(f"umount {MNT}")
    recs = kmltest.records(cache)
    check(len(recs) == before, "a mount after a clean umount logs nothing")
    check("intent marks" not in dmesg_since_mark(), dmesg_since_mark())


@case
def a_full_anchor_gives_way_to_the_next():
    """ext4 allows 65000 links to a file: when the anchor has them all,
    presto makes anchor.1 and the mark is set all the same. (The anchor's
    count is set to 65000 with debugfs, the file system unmounted: ext4
    refuses a link by the count, and 65000 real links took a minute.)"""
    cache = fresh_image()
    mount(cache)
    sh(f"umount {MNT}")
    sh(f"umount {LOWER}")
    sh(f"debugfs -w -R 'sif /cache/.presto/intent/anchor.0 links_count"
       f" 65000' {IMG} 2>/dev/null")
    sh(f"mount -o loop {IMG} {LOWER}")
    anchor0 = f"{cache}/.presto/intent/anchor.0"
    check(os.stat(anchor0).st_nlink == 65000, os.stat(anchor0).st_nlink)
    mount(cache)
    os.mkdir(f"{MNT}/d")
    check(handle(cache) in marks(cache), "the mkdir's mark is set")
    intent = f"{cache}/.presto/intent"
    check(os.path.exists(f"{intent}/anchor.1"), sorted(os.listdir(intent)))
    check(os.stat(f"{intent}/anchor.1").st_nlink == 2, "linked to anchor.1")
    # An fsync commits the marks through the new anchor.
    with open(f"{MNT}/d/f", "w") as f:
        f.write("after the switch")
        os.fsync(f.fileno())
    sh(f"umount {MNT}")
    check(not marks(cache), ("umount clears", marks(cache)))
    # The next mount removes the anchors it finds but anchor.0, by the
    # names listed: one planted with the highest number costs no more
    # than another (it once had the mount try four billion names), and a
    # name presto does not write is left alone.
    for name in ("anchor.4294967294", "anchor.007"):
        open(f"{intent}/{name}", "w").close()
    t0 = time.monotonic()
    mount(cache)
    took = time.monotonic() - t0
    sh(f"umount {MNT}")
    left = sorted(n for n in os.listdir(intent) if n.startswith("anchor"))
    check(left == ["anchor.0", "anchor.007"], left)
    check(took < 60, "the mount took %.1f s" % took)


@case
def damaged_marks_log_each_object_once_and_name_no_other():
    """Marks a damaged cache holds: three of one directory log it (and its
    entry changed since) once; a mark with the wrong generation, or with
    generation 0 (which ext4 takes for any), names nothing. All go."""
    cache = fresh_image()
    mount(cache)
    os.mkdir(f"{MNT}/d")
    with open(f"{MNT}/d/f", "w") as f:
        f.write("x")
    sh(f"umount {MNT}")
    check(not marks(cache), ("umount clears", marks(cache)))
    intent = f"{cache}/.presto/intent"
    d_ino, d_gen = handle(f"{cache}/d")
    f_ino, f_gen = handle(f"{cache}/d/f")
    check(f_gen != 0, "d/f's generation is 0: rerun")
    planted = [(d_ino, d_gen, 0), (d_ino, d_gen, 5), (d_ino, d_gen, 9),
               (f_ino, 0, 0), (f_ino, (f_gen + 1) % (1 << 32), 0)]
    for ino, gen, secs in planted:
        os.makedirs(f"{intent}/{ino % 64:02x}", exist_ok=True)
        open(f"{intent}/{ino % 64:02x}/m.{ino}.{gen}.{secs}", "w").close()
    check(len(marks(cache)) == 3, marks(cache))
    dmesg_mark()
    mount(cache)
    sh(f"umount {MNT}")
    line = dmesg_since_mark()
    check("recovery: 5 intent marks; logged the state of 2 objects" in line,
          line)
    check(not marks(cache), ("the marks stay", marks(cache)))


def workload():
    """Changes of every kind, made quickly: some records are still queued
    when the copy is taken."""
    os.makedirs(f"{MNT}/a/b")
    os.mkdir(f"{MNT}/c")
    for i in range(30):
        with open(f"{MNT}/a/f{i}", "w") as f:
            f.write(f"file {i}\n" * (i + 1))
    with open(f"{MNT}/c/big", "wb") as f:
        f.write(os.urandom(256 << 10))
    os.sync()
    # After the sync: an in-place overwrite, a mapping, renames, attributes.
    with open(f"{MNT}/c/big", "r+b") as f:
        f.seek(4096)
        f.write(b"overwritten" * 100)
    fd = os.open(f"{MNT}/a/mapped", os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 8192)
    with mmap.mmap(fd, 8192) as m:
        m[100:105] = b"hello"
    os.close(fd)
    os.rename(f"{MNT}/a/f1", f"{MNT}/c/f1-moved")
    os.rename(f"{MNT}/a/b", f"{MNT}/c/b-moved")
    os.link(f"{MNT}/a/f2", f"{MNT}/c/f2-link")
    os.unlink(f"{MNT}/a/f3")
    os.chmod(f"{MNT}/a/f4", 0o600)
    os.setxattr(f"{MNT}/a/f5", "user.color", b"blue")
    os.symlink("f6", f"{MNT}/a/s6")
    os.mkfifo(f"{MNT}/c/fifo")
    with open(f"{MNT}/c/b-moved/new", "w") as f:
        f.write("in a moved directory")


def snapshot(cache):
    """A copy of @cache before the changes, and its handle map, for
    replay_equals()."""
    snap, mapfile = f"{EXT}/kr-snap", f"{EXT}/kr-snap.map.json"
    sh(f"rm -rf {snap} {mapfile}")
    sh(f"python3 {REPLAY} snapshot {cache} {snap} --map {mapfile}")
    return snap, mapfile


def replay_equals(snap, mapfile, cache):
    work = f"{EXT}/kr-replay"
    sh(f"rm -rf {work}; cp -a {snap} {work}")
    r = subprocess.run(["python3", REPLAY, "replay", work, cache,
                        "--map", mapfile], capture_output=True, text=True)
    check(r.returncode == 0, ("replay", r.stdout[-2000:], r.stderr[-2000:]))
    r = subprocess.run([TREECMP, "--ignore", ".presto", cache, work],
                       capture_output=True, text=True)
    check(r.returncode == 0, ("replay differs", r.stdout[-2000:]))


@case
def recovery_after_a_crash_logs_what_the_marks_name():
    cache = fresh_image()
    snap, mapfile = snapshot(cache)
    mount(cache)
    workload()
    copy = crash_copy()
    check(marks(copy), "the copy holds marks")
    sh(f"umount {MNT}")
    sh(f"umount {LOWER}")
    dmesg_mark()
    mount(copy)
    sh(f"umount {MNT}")
    log = dmesg_since_mark()
    check(re.search(r"recovery: \d+ intent marks; logged the state of \d+ "
                    r"objects in \d+ records", log), log)
    check(not marks(copy), ("recovery removes the marks", marks(copy)))
    recs = kmltest.records(copy)
    rec = [r for r in recs if "RECOVERED" in r.get("flags", [])]
    check(rec, "a block of RECOVERED records")
    first = recs.index(rec[0])
    check(all("RECOVERED" in r.get("flags", []) for r in recs[first:]),
          "the block is the log's end, before any new change")
    check({"RESYNC", "RESYNC_DIR", "DIRENT"} <= {r["op"] for r in rec},
          {r["op"] for r in rec})
    replay_equals(snap, mapfile, copy)
    # Mounting again logs nothing more: the marks are gone.
    n = len(recs)
    mount(copy)
    sh(f"umount {MNT}")
    check(len(kmltest.records(copy)) == n, "recovery ran once")


@case
def recovery_finds_the_marks_of_a_cache_made_before_buckets():
    """Caches made before the marks moved into buckets keep them in the
    intent directory itself: recovery still logs what they name."""
    cache = fresh_image()
    snap, mapfile = snapshot(cache)
    mount(cache)
    workload()
    copy = crash_copy()
    sh(f"umount {MNT}; umount {LOWER}")
    top = f"{copy}/.presto/intent"
    moved = 0
    for bucket in os.listdir(top):
        if re.fullmatch(BUCKET, bucket):
            for mark in os.listdir(f"{top}/{bucket}"):
                os.rename(f"{top}/{bucket}/{mark}", f"{top}/{mark}")
                moved += 1
            os.rmdir(f"{top}/{bucket}")
    check(moved, "the copy held marks")
    dmesg_mark()
    mount(copy)
    sh(f"umount {MNT}")
    log = dmesg_since_mark()
    check(re.search(rf"recovery: {moved} intent marks", log), log)
    check(not marks(copy), ("recovery removes the marks", marks(copy)))
    check(not [n for n in os.listdir(top) if n.startswith("m.")],
          "none left in the intent directory itself")
    replay_equals(snap, mapfile, copy)


@case
def recovery_is_refused_cleanly_when_the_log_has_no_room():
    cache = fresh_image()
    mount(cache)
    workload()
    copy = crash_copy()
    sh(f"umount {MNT}; umount {LOWER}")
    # Fill the copy's file system, root's reserve included.
    fill = f"{CLOWER}/fill"
    subprocess.run(f"dd if=/dev/zero of={fill} bs=1M 2>/dev/null",
                   shell=True)
    subprocess.run(f"dd if=/dev/zero of={fill}2 bs=4k 2>/dev/null",
                   shell=True)
    before = marks(copy)
    check(before, "the copy holds marks")
    dmesg_mark()
    r = subprocess.run(f"mount -t presto -o lower={copy} presto {MNT}",
                       shell=True, capture_output=True, text=True)
    check(r.returncode != 0, "no room for the log: the mount is refused")
    check(marks(copy) == before, "the marks stay for the next attempt")
    check("error -28" in dmesg_since_mark(), dmesg_since_mark()[-800:])
    os.unlink(fill)
    os.unlink(f"{fill}2")
    mount(copy)
    sh(f"umount {MNT}")
    check(not marks(copy), "recovered once there is room")


@case
def writes_hold_the_mark_until_their_store():
    cache = fresh_image()
    mount(cache)
    with open(f"{MNT}/f", "w") as f:
        f.write("x")
    os.sync()
    check(not wait_unmarked(cache), "idle")
    fd = os.open(f"{MNT}/f", os.O_WRONLY)
    try:
        os.pwrite(fd, b"y", 0)
        time.sleep(7)
        check(handle(cache) in marks(cache),
              "an open file that wrote keeps its directory marked")
    finally:
        os.close(fd)
    check(not wait_unmarked(cache), "the STORE at close lets it go")


DM = "presto-kr"


def dm_image():
    """Like fresh_image(), but through a device-mapper device (so that a
    copy can be taken while it is suspended, without a freeze and its
    sync) and with ext4 committing only when asked (commit=300)."""
    sh(f"rm -f {IMG} {COPY}; truncate -s 256M {IMG}")
    loop = subprocess.run(["losetup", "-f", "--show", IMG], check=True,
                          capture_output=True, text=True).stdout.strip()
    sectors = (256 << 20) // 512
    sh(f"dmsetup create {DM} --table '0 {sectors} linear {loop} 0'")
    sh(f"mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0"
       f" /dev/mapper/{DM}")
    os.makedirs(LOWER, exist_ok=True)
    os.makedirs(MNT, exist_ok=True)
    sh(f"mount -o commit=300 /dev/mapper/{DM} {LOWER}")
    os.makedirs(f"{LOWER}/cache/.presto")
    return f"{LOWER}/cache", loop


def dm_crash_copy(loop):
    """The disk as a crash now would leave it: the device suspended (what
    was written is in the image, nothing more goes), the image copied."""
    sh(f"dmsetup suspend --nolockfs {DM}; cp --sparse=always {IMG} {COPY};"
       f" dmsetup resume {DM}")
    os.makedirs(CLOWER, exist_ok=True)
    sh(f"mount -o loop {COPY} {CLOWER}")
    return f"{CLOWER}/cache"


def dm_teardown(loop):
    subprocess.run(f"umount {MNT}; umount {LOWER}; dmsetup remove {DM};"
                   f" losetup -d {loop}", shell=True,
                   stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


@case
def a_record_reaches_the_disk_only_after_the_mark_of_its_change():
    """An fdatasync of a file overwritten in place commits nothing (its
    own metadata is on disk already), so presto makes its records durable
    by writing them back and flushing the disk's cache -- and with them
    every record before, here the unlink of d/x, whose change and whose
    fresh mark are still in ext4's running transaction. A crash then must
    not leave a log that says x is gone beside a cache that has it."""
    cache, loop = dm_image()
    try:
        snap, mapfile = snapshot(cache)
        mount(cache)
        with open(f"{MNT}/f", "wb") as f:
            f.write(b"a" * 65536)
        os.mkdir(f"{MNT}/d")
        with open(f"{MNT}/d/x", "w") as f:
            f.write("x")
        os.sync()
        check(not wait_unmarked(cache), "idle")
        fd = os.open(f"{MNT}/f", os.O_WRONLY)
        try:
            # Marks the root (committed before an in-place overwrite); the
            # fsync's sync of the log, the first in a while, commits all.
            os.pwrite(fd, b"b", 0)
            os.fsync(fd)
            # The root's mark is on disk and stays: no commit for this one.
            os.pwrite(fd, b"c", 1)
            os.unlink(f"{MNT}/d/x")     # a new mark, on d
            os.fdatasync(fd)            # the cheap way: a flush, no commit
        finally:
            os.close(fd)
        copy = dm_crash_copy(loop)
        sh(f"umount {MNT}")
        dm_teardown(loop)
        mount(copy)
        sh(f"umount {MNT}")
        # The fdatasync made the unlink's record durable: the case stands.
        check([r for r in kmltest.records(copy)
               if r["op"] == "UNLINK" and r.get("name") == "x"],
              "the unlink of x is not in the log")
        replay_equals(snap, mapfile, copy)
    finally:
        dm_teardown(loop)


def newest_segment(cache):
    segs = sorted(n for n in os.listdir(f"{cache}/.presto")
                  if re.fullmatch(r"kml\.\d{8}", n))
    return f"{cache}/.presto/{segs[-1]}"


@case
def mount_scans_a_long_segment_and_cuts_a_torn_tail():
    cache = fresh_image()
    mount(cache)
    for i in range(3000):           # ~600 KiB of records: several chunks
        os.mkdir(f"{MNT}/directory-with-a-longish-name-{i:05}")
    sh(f"umount {MNT}")
    recs = kmltest.records(cache)
    last = recs[-1]["seq"]
    check(last >= 3000, last)
    # A whole long segment scans to its end: numbering goes on after it.
    mount(cache)
    os.mkdir(f"{MNT}/after")
    sh(f"umount {MNT}")
    recs = kmltest.records(cache)
    check(recs[-1]["seq"] == last + 1 and recs[-1]["name"] == "after",
          recs[-1])
    # Damage the last record, as a crash in the middle of its write would.
    seg = newest_segment(cache)
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:
        f.seek(size - 16)
        f.write(b"\xff" * 8)
    dmesg_mark()
    mount(cache)
    log = dmesg_since_mark()
    check("cut after its last good record" in log, log)
    os.mkdir(f"{MNT}/again")
    sh(f"umount {MNT}")
    recs = kmltest.records(cache)
    names = [r.get("name") for r in recs[-2:]]
    check(names == ["directory-with-a-longish-name-02999", "again"] and
          recs[-1]["seq"] == last + 1, (names, recs[-1]["seq"], last))


sys.exit(case.finish())
