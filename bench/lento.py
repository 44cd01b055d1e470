#!/usr/bin/env python3
"""lento on this host: reintegration and fetch throughput, and the
server's CPU per client as 1, 2, 4, 8 clients run the same workload (the
Andrew paper's scaling question). Not a test: it prints a table.

    bench/lento.py [--files N] [--size BYTES] [--clients 1,2,4,8]

Each client has a volume of its own (no permit passes between them). Per
client: N files of SIZE bytes written through lentoctl (not timed), then
all clients `lentoctl sync` at once (timed: reintegration), then a fresh
client per volume reads every file (timed: fetch, cold cache). The
server's CPU is its utime + stime from /proc over each phase. Uses
tools/bin/lento (the optimised build), not the ASan one.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LENTO = os.path.join(TOP, "tools", "bin", "lento")
LENTOCTL = os.path.join(TOP, "tools", "bin", "lentoctl")
HZ = os.sysconf("SC_CLK_TCK")


def ctl(sock, *args, timeout=600):
    out = subprocess.run([LENTOCTL, "-s", sock, "--json", "--timeout",
                          str(timeout)] + list(args), check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out) if out.strip() else None


def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def wait_for(path):
    for _ in range(400):
        if os.path.exists(path):
            return
        time.sleep(0.05)
    raise SystemExit("bench/lento: %s did not appear" % path)


def start_client(tmp, name, addr, volume):
    sock = os.path.join(tmp, name + ".sock")
    p = subprocess.Popen([LENTO, "client", "--cache",
                          os.path.join(tmp, name), "--server", addr,
                          "--control", sock, "--age-ms", "600000",
                          "--volume", volume, "--log",
                          os.path.join(tmp, name + ".log")])
    wait_for(sock)
    for _ in range(400):
        if ctl(sock, "status")["state"] == "connected":
            return p, sock
        time.sleep(0.05)
    raise SystemExit("bench/lento: %s did not connect" % name)


def parallel(fns):
    ts = [threading.Thread(target=f) for f in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def one_round(n, files, size):
    tmp = tempfile.mkdtemp(prefix="lento-bench.")
    sock = os.path.join(tmp, "server.sock")
    srv = subprocess.Popen([LENTO, "server", "--store",
                            os.path.join(tmp, "store"), "--listen",
                            "127.0.0.1:0", "--control", sock, "--log",
                            os.path.join(tmp, "server.log")])
    procs = [srv]
    try:
        wait_for(sock)
        addr = ctl(sock, "status")["listening"][0]
        payload = os.path.join(tmp, "payload")
        with open(payload, "wb") as f:	# text: lentoctl cat prints it
            f.write(bytes(97 + b % 26 for b in os.urandom(size)))
        writers = []
        for i in range(n):
            ctl(sock, "volume", "create", "v%d" % i)
            p, csock = start_client(tmp, "w%d" % i, addr, "v%d" % i)
            procs.append(p)
            writers.append(csock)

        def write(i):
            def run():
                for k in range(files):
                    ctl(writers[i], "write", "v%d/f%04d" % (i, k),
                        "@" + payload)
            return run
        parallel([write(i) for i in range(n)])
        recs = sum(v["pending_records"] for w in writers
                   for v in ctl(w, "status")["volumes"])
        c0, t0 = cpu(srv.pid), time.monotonic()
        parallel([lambda w=w: ctl(w, "sync") for w in writers])
        t_sync, c_sync = time.monotonic() - t0, cpu(srv.pid) - c0
        readers = []
        for i in range(n):
            p, csock = start_client(tmp, "r%d" % i, addr, "v%d" % i)
            procs.append(p)
            readers.append(csock)

        def read(i):
            def run():
                for k in range(files):
                    ctl(readers[i], "cat", "v%d/f%04d" % (i, k))
            return run
        c0, t0 = cpu(srv.pid), time.monotonic()
        parallel([read(i) for i in range(n)])
        t_fetch, c_fetch = time.monotonic() - t0, cpu(srv.pid) - c0
        return {"clients": n, "records": recs, "sync_s": t_sync,
                "sync_cpu": c_sync, "fetch_s": t_fetch, "fetch_cpu": c_fetch,
                "bytes": n * files * size, "files": n * files}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size", type=int, default=16384)
    ap.add_argument("--clients", default="1,2,4,8")
    a = ap.parse_args()
    print("| clients | records | reintegration records/s | MB/s | "
          "server CPU s per client | fetch files/s | MB/s | "
          "server CPU s per client |")
    print("|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in a.clients.split(",")]:
        r = one_round(n, a.files, a.size)
        mb = r["bytes"] / 1e6
        print("| %d | %d | %.0f | %.1f | %.3f | %.0f | %.1f | %.3f |" % (
            n, r["records"], r["records"] / r["sync_s"],
            mb / r["sync_s"], r["sync_cpu"] / n, r["files"] / r["fetch_s"],
            mb / r["fetch_s"], r["fetch_cpu"] / n), flush=True)


sys.exit(main())
