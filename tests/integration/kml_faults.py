#!/usr/bin/env python3
"""The log under faults: each gives the documented error and loses nothing.

    kml_faults.py EXT SMALLDEV

EXT is a mounted ext4 file system to make caches in; SMALLDEV a small
scratch block device this test may mkfs. Runs as root in the test VM; ends
with "N passed, N failed".

- the log at its limit (kml_limit=): changes are refused with ENOSPC and
  not done; once the consumer acknowledges, changes go on;
- the cache's file system full: ENOSPC, nothing done unlogged;
- a user under RLIMIT_FSIZE: the user's writes stop at the limit, the log
  (written by presto's thread) does not;
- a frozen lower file system, and a frozen presto: changes wait for the
  thaw and are logged;
- the log's room all held by files open for writing: changes are refused
  with ENOSPC, not left waiting for a close.
"""
import errno
import json
import os
import resource
import signal
import subprocess
import sys
import time
import traceback

import kmltest
from cases import Cases, check

EXT, SMALLDEV = sys.argv[1], sys.argv[2]
MNT = "/mnt/kf"


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def mount(cache, opts=""):
    os.makedirs(cache, exist_ok=True)
    os.makedirs(MNT, exist_ok=True)
    sh(f"mount -t presto -o lower={cache}{opts} presto {MNT}")


def umount():
    sh(f"umount {MNT}")


def state():
    return kmltest.state(MNT)


def ack(seq):
    kmltest.ack(MNT, seq)


def records(cache):
    return kmltest.records(cache)


def names_logged(recs, op):
    return {r["name"] for r in recs if r["op"] == op}


def clean_up():
    subprocess.run(f"fsfreeze -u {EXT}; fsfreeze -u {MNT}; umount {MNT}",
                   shell=True, stderr=subprocess.DEVNULL)


case = Cases(after=clean_up)


def dmesg_has(text):
    out = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    return text in out


@case
def log_at_its_limit_refuses_changes_and_loses_nothing():
    cache = f"{EXT}/kf-limit"
    sh(f"rm -rf {cache}")
    mount(cache, ",kml_limit=16")
    check(state()["limit_bytes"] == 16 << 20, state())
    target = "t" * 4000            # ~4 KiB records: the limit in ~4000
    made, err = [], None
    for i in range(20000):
        try:
            os.symlink(target, f"{MNT}/s{i}")
            made.append(f"s{i}")
        except OSError as e:
            err = e
            break
    check(err is not None and err.errno == errno.ENOSPC, f"refused: {err}")
    check(not os.path.lexists(f"{MNT}/s{len(made)}"), "refused and not done")
    check(3000 < len(made) < 4100, len(made))
    check(dmesg_has("at its limit of 16 MiB"), "the kernel log says why")
    # Smaller changes fit in what is left, then they are refused too.
    small = 0
    for i in range(100):
        try:
            os.mkdir(f"{MNT}/m{i}")
            small += 1
        except OSError as e:
            check(e.errno == errno.ENOSPC, e)
            break
    check(small < 30 and not os.path.exists(f"{MNT}/m{small}"), small)
    # Reading still works.
    check(os.readlink(f"{MNT}/s0") == target, "reads work at the limit")
    # The consumer catches up: segments are retired, changes go on.
    os.sync()
    st = state()
    segments = st["segments"]
    ack(st["durable_seq"])
    deadline = time.time() + 20
    while state()["segments"] >= segments and time.time() < deadline:
        time.sleep(0.2)
    check(state()["segments"] < segments, (segments, state()))
    os.mkdir(f"{MNT}/d")
    umount()
    # Every symlink made is in the log (in retired segments for the
    # oldest: count what is left plus what was acknowledged).
    recs = records(cache)
    left = names_logged(recs, "SYMLINK")
    check(left <= set(made), "no record of a refused change")
    check(names_logged(recs, "MKDIR") >= {"d"}, "mkdir after the ack")
    check(names_logged(recs, "MKDIR") <= {"d"} | {f"m{i}" for i in
                                                   range(small)}, "mkdirs")
    sh(f"rm -rf {cache}")


@case
def full_file_system_refuses_changes_and_loses_nothing():
    small = "/mnt/kf-small"
    sh(f"mkfs.ext4 -q -F {SMALLDEV} && mkdir -p {small} && "
       f"mount {SMALLDEV} {small}")
    try:
        cache = f"{small}/cache"
        mount(cache)
        # Fill the disk with data, then create files until refused.
        with open(f"{MNT}/fill", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
            except OSError as e:
                check(e.errno == errno.ENOSPC, e)
        made, err = [], None
        for i in range(200000):
            try:
                os.mkdir(f"{MNT}/d{i}")
                made.append(f"d{i}")
            except OSError as e:
                err = e
                break
        check(err is not None and err.errno == errno.ENOSPC, err)
        check(not os.path.exists(f"{MNT}/d{len(made)}"), "refused, not done")
        # Space comes back: changes go on.
        os.unlink(f"{MNT}/fill")
        os.sync()
        os.mkdir(f"{MNT}/after")
        umount()
        recs = records(cache)
        check(names_logged(recs, "MKDIR") == set(made) | {"after"},
              "every directory made is logged, and only those")
        check(names_logged(recs, "UNLINK") == {"fill"}, "unlink logged")
    finally:
        subprocess.run(f"umount {MNT}; umount {small}", shell=True,
                       stderr=subprocess.DEVNULL)


@case
def user_file_size_limit_binds_the_user_not_the_log():
    cache = f"{EXT}/kf-fsize"
    sh(f"rm -rf {cache}")
    mount(cache)
    os.chmod(MNT, 0o777)
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
            os.setresuid(1000, 1000, 1000)
            fd = os.open(f"{MNT}/f", os.O_CREAT | os.O_WRONLY, 0o644)
            check(os.write(fd, b"x" * 4096) == 1024, "short write")
            try:
                os.write(fd, b"x")
                os._exit(3)
            except OSError as e:
                if e.errno != errno.EFBIG:
                    os._exit(4)
            os.fsync(fd)
            os.close(fd)
            # Many small changes: the log grows far past 1 KiB.
            for i in range(50):
                os.mkdir(f"{MNT}/d{i}")
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            os._exit(2)
    check(os.waitpid(pid, 0)[1] == 0, "the user's side")
    umount()
    recs = records(cache)[1:]      # after the chmod
    ops = [r["op"] for r in recs]
    # The STORE at close folds into the file's CREATE (KML.md).
    check(ops[:1] == ["CREATE"] and "STORED" in recs[0]["flags"] and
          ops.count("MKDIR") == 50, ops)
    check(recs[0]["attr"]["size"] == 1024, recs[0])
    sh(f"rm -rf {cache}")


def stores(recs):
    """STOREs logged: records of their own, or folded into a CREATE."""
    return sum(1 for r in recs if kmltest.is_store(r))


def wait_blocked(proc, seconds=3):
    """True if @proc is still running after @seconds (blocked)."""
    try:
        proc.wait(seconds)
        return False
    except subprocess.TimeoutExpired:
        return True


@case
def frozen_lower_makes_changes_wait_for_the_thaw():
    cache = f"{EXT}/kf-freeze"
    sh(f"rm -rf {cache}")
    mount(cache)
    with open(f"{MNT}/f", "w") as f:
        f.write("before")
    os.sync()
    sh(f"fsfreeze -f {EXT}")
    mk = subprocess.Popen(["mkdir", f"{MNT}/during"])
    wr = subprocess.Popen(["python3", "-c", f"""
import os
fd = os.open("{MNT}/f", os.O_WRONLY | os.O_APPEND)
os.write(fd, b" during")
os.fsync(fd)
os.close(fd)
"""])
    check(wait_blocked(mk) and wait_blocked(wr, 1), "changes wait")
    check(open(f"{MNT}/f").read() == "before", "reads go on while frozen")
    sh(f"fsfreeze -u {EXT}")
    check(mk.wait(60) == 0 and wr.wait(60) == 0, "changes done after thaw")
    umount()
    recs = records(cache)
    check(names_logged(recs, "MKDIR") == {"during"}, "mkdir logged")
    check(stores(recs) == 2, "both stores logged")
    sh(f"rm -rf {cache}")


@case
def frozen_presto_makes_changes_wait_for_the_thaw():
    cache = f"{EXT}/kf-pfreeze"
    sh(f"rm -rf {cache}")
    mount(cache)
    os.mkdir(f"{MNT}/a")
    sh(f"fsfreeze -f {MNT}")
    # Freezing synced the log.
    st = state()
    check(st["durable_seq"] == st["next_seq"] - 1, st)
    mk = subprocess.Popen(["mkdir", f"{MNT}/b"])
    check(wait_blocked(mk), "mkdir waits")
    sh(f"fsfreeze -u {MNT}")
    check(mk.wait(60) == 0, "mkdir done after thaw")
    umount()
    check(names_logged(records(cache), "MKDIR") == {"a", "b"}, "logged")
    sh(f"rm -rf {cache}")


@case
def remount_read_only_makes_the_log_durable():
    # Read-only, the mount is skipped by sync(2), syncfs(2) and its own
    # umount: its log is made durable at the remount (presto's thread
    # would have taken up to five seconds).
    cache = f"{EXT}/kf-ro"
    sh(f"rm -rf {cache}")
    mount(cache)
    os.mkdir(f"{MNT}/a")
    with open(f"{MNT}/a/f", "w") as f:
        f.write("f")
    sh(f"mount -o remount,ro {MNT}")
    st = state()
    check(st["durable_seq"] == st["next_seq"] - 1, st)
    check(open(f"{MNT}/a/f").read() == "f", "read-only still reads")
    umount()
    sh(f"rm -rf {cache}")


# A user with the most groups a record carries: a STORE of 1 KiB and more.
HOLDER = r"""
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
fds, err, at = [], None, None
for i in range(n):
    try:
        fd = os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as e:
        err, at = e.errno, "create"
        break
    fds.append(fd)
    try:
        os.write(fd, b"x")
    except OSError as e:
        err, at = e.errno, "write"
        break
held = len(fds)
for fd in fds:
    os.close(fd)
after = None
try:
    with open(f"{d}/after", "w") as f:
        f.write("after")
except OSError as e:
    after = e.errno
print(json.dumps({"held": held, "err": err, "at": at, "after": after}))
"""


@case
def log_room_all_reserved_refuses_rather_than_waits():
    # Every file open for writing that wrote holds room for its STORE
    # until it closes. When the room of the current segment and the spare
    # is all held so, a change is refused with ENOSPC: it used to wait for
    # a close that the holder, waiting itself, would never make.
    cache = f"{EXT}/kf-room"
    sh(f"rm -rf {cache}")
    mount(cache)
    os.mkdir(f"{MNT}/u")
    os.chown(f"{MNT}/u", 1000, 1000)
    groups = ",".join(str(g) for g in range(2000, 2256))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, max(hard, 20000)))
    try:
        out = subprocess.run(
            ["setpriv", "--reuid", "1000", "--regid", "1000",
             "--groups", groups, sys.executable, "-c", HOLDER,
             f"{MNT}/u", "15000"],
            capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        check(False, "the holder waited for room (killed after 600 s)")
        return
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    check(out.returncode == 0, out.stderr[-2000:])
    res = json.loads(out.stdout)
    check(res["err"] == errno.ENOSPC, res)
    # Room for about 8 MiB of 1.2 KiB STOREs (the current segment and the
    # spare, the records written moved past), less the margin kept.
    check(5500 < res["held"] < 7000, res)
    n = res["held"]
    if res["at"] == "create":
        check(not os.path.exists(f"{MNT}/u/f{n}"), "refused, not done")
    else:
        check(os.path.getsize(f"{MNT}/u/f{n - 1}") == 0, "refused, not done")
    check(res["after"] is None, "room back once the files closed: %s" % res)
    check(dmesg_has("is all reserved"), "the kernel log says why")
    umount()
    recs = records(cache)
    stored = stores(recs)
    wrote = n if res["at"] == "create" else n - 1
    check(stored == wrote + 1, "a STORE for each file written: %d, %d" %
          (stored, wrote))
    sh(f"rm -rf {cache}")


sys.exit(case.finish())
