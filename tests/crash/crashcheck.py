#!/usr/bin/env python3
"""Check a presto cache after a crash and a recovering mount.

    crashcheck.py CACHE --records FILE [--upto N] --snap SNAPDIR --map MAP
                  --work DIR [--label L]

CACHE is the lower= directory of a presto mount that was mounted (so the
kernel ran its recovery) and unmounted again after the crash. FILE holds
the workload's fsync records (tests/crash/workload.py), one JSON line
each; the first N of them (all complete lines without --upto) were
fsync'd before the crash point. SNAPDIR and MAP are a kml_replay.py
snapshot of the cache when it was empty, before the workload, the log
then empty too. DIR is scratch space (emptied first).

Four checks, each printed as "ok - L CHECK" or "not ok - L CHECK: why":

  fsynced-in-cache  every recorded file is in CACHE, a regular file with
                    the recorded lower handle (inode number and
                    generation), size, sha256, mode and user.* xattrs;
  fsynced-in-log    the log proper (records without the RECOVERED flag)
                    holds a STORE of each recorded file's handle;
  log-strict        kmlcat --strict reads the log without a gap, a
                    duplicate or a damaged record;
  history           the log replayed (kml_replay.py replay) onto a copy of
                    SNAPDIR equals CACHE (tests/bin/treecmp --ignore
                    .presto); if not, kml_replay.py explain shows the
                    records about the first paths that differ.

DIR keeps the replayed copy, the replay's output and history, and
treecmp's output.

Ends with "N passed, N failed"; exit status 0 iff all passed.
"""
import argparse
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "integration"))
import kmltest  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
KMLCAT = os.path.join(TOP, "tools", "bin", "kmlcat")
TREECMP = os.path.join(TOP, "tests", "bin", "treecmp")
REPLAY = os.path.join(TOP, "tests", "integration", "kml_replay.py")


def read_records(path, upto=None):
    """The complete lines of a records file (a crash may tear the last).
    No file is no record: the crash came before the workload began."""
    out = []
    if upto is None and not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            try:
                rec = json.loads(line)
            except ValueError:
                break
            out.append(rec)
    if upto is not None:
        if len(out) < upto:
            raise SystemExit("crashcheck: %s has %d records, fewer than %d"
                             % (path, len(out), upto))
        out = out[:upto]
    return out


def short(lines, n=3):
    more = len(lines) - n
    return "; ".join(lines[:n]) + ("; and %d more" % more if more > 0 else "")


def check_in_cache(cache, records):
    bad = []
    for r in records:
        p = os.path.join(cache, r["path"])
        try:
            st = os.lstat(p)
        except OSError as e:
            bad.append("%s (#%d, %s): %s" % (r["path"], r["n"], r["how"],
                                             e.strerror))
            continue
        if not stat.S_ISREG(st.st_mode):
            bad.append("%s: not a regular file" % r["path"])
            continue
        why = []
        gen = kmltest.generation(p)
        if (st.st_ino, gen) != (r["ino"], r["gen"]):
            why.append("handle %d:%d, recorded %d:%d" % (
                st.st_ino, gen, r["ino"], r["gen"]))
        if st.st_size != r["size"]:
            why.append("size %d, recorded %d" % (st.st_size, r["size"]))
        else:
            with open(p, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != r["sha256"]:
                    why.append("content differs")
        if st.st_mode != r["mode"]:
            why.append("mode %o, recorded %o" % (st.st_mode, r["mode"]))
        xa = {n: os.getxattr(p, n).hex() for n in os.listxattr(p)
              if n.startswith("user.")}
        if xa != r["xattrs"]:
            why.append("xattrs %s, recorded %s" % (sorted(xa),
                                                   sorted(r["xattrs"])))
        if why:
            bad.append("%s (#%d, %s): %s" % (r["path"], r["n"], r["how"],
                                             ", ".join(why)))
    if bad:
        return False, "%d of %d recorded files wrong: %s" % (
            len(bad), len(records), short(bad))
    return True, "%d files" % len(records)


def kml_records(cache):
    p = subprocess.run([KMLCAT, "--json", cache], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode == 2:
        raise RuntimeError("kmlcat %s: %s" % (cache, p.stderr.strip()))
    return [json.loads(line) for line in p.stdout.splitlines()]


def check_in_log(cache, records):
    try:
        recs = kml_records(cache)
    except RuntimeError as e:
        return False, str(e)
    proper = set()
    recovered = set()
    for r in recs:
        if not kmltest.is_store(r) or "obj" not in r:
            continue
        h = (r["obj"]["ino"], r["obj"]["gen"])
        (recovered if "RECOVERED" in r["flags"] else proper).add(h)
    bad = ["%s (#%d, %s, %d:%d)%s" % (
        r["path"], r["n"], r["how"], r["ino"], r["gen"],
        " only a RECOVERED STORE" if (r["ino"], r["gen"]) in recovered
        else "") for r in records if (r["ino"], r["gen"]) not in proper]
    n_rec = sum(1 for r in recs if "RECOVERED" in r["flags"])
    last = recs[-1]["seq"] if recs else 0
    if bad:
        return False, "%d of %d recorded files have no STORE in the log " \
            "(%d records, %d RECOVERED): %s" % (len(bad), len(records),
                                                 len(recs), n_rec, short(bad))
    return True, "%d records to seq %d, %d RECOVERED" % (len(recs), last,
                                                         n_rec)


def check_strict(cache):
    p = subprocess.run([KMLCAT, "--json", "--strict", cache],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    seqs = [json.loads(line)["seq"] for line in p.stdout.splitlines()]
    dup = len(seqs) - len(set(seqs))
    if p.returncode != 0 or dup:
        return False, "kmlcat --strict exit %d%s: %s" % (
            p.returncode, ", %d duplicate seqs" % dup if dup else "",
            " / ".join(p.stderr.strip().splitlines()[:3]))
    return True, "%d records" % len(seqs)


def check_history(cache, snap, mapfile, work, explain):
    copy = os.path.join(work, "replayed")
    hist = os.path.join(work, "history.json")
    p = subprocess.run(["cp", "-a", "--preserve=all", snap, copy])
    if p.returncode != 0:
        return False, "cannot copy the snapshot %s" % snap
    p = subprocess.run([sys.executable, REPLAY, "replay", copy, cache,
                        "--map", mapfile, "--history", hist],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    out = p.stdout.strip().splitlines()
    with open(os.path.join(work, "replay.out"), "w") as f:
        f.write(p.stdout)
    if p.returncode != 0:
        errs = [l for l in out if "error" in l or "inconsistent" in l]
        return False, "kml_replay.py replay exit %d: %s" % (
            p.returncode, short(errs or out[-3:], 2))
    cmp = os.path.join(work, "treecmp.out")
    with open(cmp, "w") as f:
        rc = subprocess.run([TREECMP, "--ignore", ".presto", cache, copy],
                            stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        with open(cmp, errors="replace") as f:
            diff = [l.strip() for l in f if l.strip()]
        why = "the replayed log differs from the cache (treecmp exit %d, " \
            "%d lines): %s" % (rc, len(diff), short(diff))
        if explain:
            ex = subprocess.run([sys.executable, REPLAY, "explain", hist, cmp,
                                 "--max", "3"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
            why += "\n" + "\n".join("    " + l for l in
                                    ex.stdout.splitlines()[:40])
        return False, why
    return True, out[-1] if out else ""


def run_checks(cache, records, snap, mapfile, work, label, explain=True):
    """Print one line per check; return {check: passed}. With explain, a
    history that differs comes with kml_replay.py explain's account of
    the first paths that differ."""
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    results = {}
    checks = (("fsynced-in-cache", lambda: check_in_cache(cache, records)),
              ("fsynced-in-log", lambda: check_in_log(cache, records)),
              ("log-strict", lambda: check_strict(cache)),
              ("history", lambda: check_history(cache, snap, mapfile, work,
                                               explain)))
    for name, fn in checks:
        t = time.monotonic()
        try:
            ok, why = fn()
        except Exception as e:      # a check that breaks fails
            ok, why = False, "%s: %s" % (type(e).__name__, e)
        results[name] = ok
        t = time.monotonic() - t
        if ok:
            print("ok - %s %s (%s; %.1f s)" % (label, name, why, t),
                  flush=True)
        else:
            print("not ok - %s %s: %s (%.1f s)" % (label, name, why, t),
                  flush=True)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache")
    ap.add_argument("--records", required=True)
    ap.add_argument("--upto", type=int)
    ap.add_argument("--snap", required=True)
    ap.add_argument("--map", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--label", default="crash")
    args = ap.parse_args()
    records = read_records(args.records, args.upto)
    res = run_checks(args.cache, records, args.snap, args.map, args.work,
                     args.label)
    f = sum(not ok for ok in res.values())
    print("%d passed, %d failed" % (len(res) - f, f))
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main())
