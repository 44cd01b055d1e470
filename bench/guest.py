"""The benchmark, inside the test VM on Debian's kernel (bench/run boots it).

Runs the seed workloads on plain ext4, presto over ext4 (a local mount:
the journal with nothing consuming it), presto as lento's fileset mount
(presto+lento: the journal consumed by a lento client, which holds the
write-back permit and reintegrates with a lento server on loopback) and
overlayfs side by side in one boot, all mounted at once on one ext4 file
system: each row is measured on every configuration in turn (in rotating
order, after a sync), RUNS times, so that drift in the emulator and
background work hit every configuration alike. Writes one JSON object per
measurement to OUT.

    python3 bench/guest.py OUT [RUNS]
"""
import json
import os
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join(TOP, "build", "tree.tar")
# What the tar row unpacks: main() copies TREE to memory, because over 9p
# (the repository) the reads cost 6% of tar's CPU and varied from one run
# to the next.
TREE_MEM = "/mnt/tree.tar"
LENTO = None            # presto+lento's client, once set up
MICRO = os.path.join(TOP, "bench", "bin", "microbench")
EXT = "/mnt/ext"


def sh(cmd, **kw):
    subprocess.run(cmd, shell=True, check=True, **kw)


def drop_caches():
    sh("sync; echo 3 > /proc/sys/vm/drop_caches")


def timed(cmd):
    t0 = time.perf_counter()
    sh(cmd, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


class Config:
    """One way of reaching an ext4 directory: directly or stacked."""

    def __init__(self, name):
        self.name = name
        self.dir = {"ext4": f"{EXT}/e", "presto": "/mnt/p",
                    "presto+lento": "/mnt/pl", "overlayfs": "/mnt/o"}[name]

    def setup(self):
        if self.name == "presto+lento":
            lento_setup(self.dir)
        elif self.name == "ext4":
            sh(f"mkdir -p {self.dir}")
        elif self.name == "presto":
            sh(f"mkdir -p {EXT}/pc/.presto /mnt/p && mount -t presto "
               f"-o lower={EXT}/pc presto /mnt/p")
        else:
            sh(f"mkdir -p {EXT}/ol {EXT}/ou {EXT}/ow /mnt/o && mount -t "
               f"overlay -o lowerdir={EXT}/ol,upperdir={EXT}/ou,"
               f"workdir={EXT}/ow overlay /mnt/o")

    def teardown(self):
        if self.name == "presto+lento":
            lento_teardown(self.dir)
        elif self.name == "presto":
            sh("umount /mnt/p && rm -rf {EXT}/pc".format(EXT=EXT))
        elif self.name == "overlayfs":
            sh(f"umount /mnt/o && rm -rf {EXT}/ol {EXT}/ou {EXT}/ow")
        else:
            sh(f"rm -rf {EXT}/e")


def micro(op, n, targets):
    """microbench interleaving its loop over all targets (ext4 first):
    [(ops/s, speed relative to ext4)] in the order given."""
    out = subprocess.run([MICRO, op, str(n)] + targets, check=True,
                         capture_output=True, text=True).stdout
    return [(float(v[0]), float(v[2])) for v in
            (line.split() for line in out.splitlines())]


def dd_rate(cmd):
    t = timed(cmd)
    return 1024 / t  # MiB per second for 1 GiB


def lento_setup(mnt):
    """A lento server, a client holding volume "bench" as the fileset
    mounted at @mnt, and the permit (taken by a first change)."""
    global LENTO
    import importlib.machinery
    import importlib.util
    path = os.path.join(TOP, "tests", "lento", "run")
    loader = importlib.machinery.SourceFileLoader("lento_run", path)
    spec = importlib.util.spec_from_loader("lento_run", loader)
    lr = importlib.util.module_from_spec(spec)
    loader.exec_module(lr)
    # LENTO_BIN: another build, to compare (bench/slowdisk.py).
    lr.LENTO = os.environ.get("LENTO_BIN") or os.path.join(TOP, "tools",
                                                           "bin", "lento")
    tmp = f"{EXT}/lento"
    os.makedirs(tmp, exist_ok=True)
    t = lr.Test("bench", tmp)
    srv = t.server(heartbeat_ms=3000)
    srv.volume("bench")
    c = lr.Client(tmp, "c", srv, age_ms=5000, volumes=("bench",),
                  extra=["--fileset", "bench:bench"])
    t.procs.append(c)
    c.start()
    lower = os.path.join(c.cache, "bench")
    lr.wait_until(lambda: os.path.isdir(lower), 30, "the cache")
    os.makedirs(os.path.join(lower, ".presto"), exist_ok=True)
    sh(f"mkdir -p {mnt} && mount -t presto -o lower={lower},"
       f"fileset=bench,timeout=120 presto {mnt}")

    def ready():
        fs = c.status()["presto"]["filesets"][0]
        return fs["registered"] and fs["mounted"] and fs["epoch_sent"]
    lr.wait_until(ready, 30, "the fileset")
    sh(f"mkdir {mnt}/.permit && rmdir {mnt}/.permit")
    LENTO = (t, c)


def lento_teardown(mnt):
    global LENTO
    t, c = LENTO
    c.sync(timeout=1800)
    sh(f"umount {mnt}")
    for p in t.finish():
        print("# " + p.splitlines()[0], flush=True)
    sh(f"rm -rf {EXT}/lento")
    LENTO = None


def lento_sync():
    """presto+lento's changes at the server: seconds it took."""
    t0 = time.perf_counter()
    LENTO[1].sync(timeout=1800)
    return time.perf_counter() - t0


def lento_applied():
    """Records the server applied of presto+lento's, so far."""
    return LENTO[1].volstat("bench")["records_applied"]


# After these rows presto+lento says what reached the server: how long
# the unpack's log took to get there, and how many records the loops of
# creates and removes shipped (the optimiser cancels them all).
AFTER = {
    "tar unpack": ("tar unpack reaches the server", "s", lento_sync),
    "create/close/unlink": ("records shipped by 4000 create/close/unlink",
                            "count", None),
    "mkdir/rmdir": ("records shipped by 4000 mkdir/rmdir", "count", None),
}


def settled():
    """Let writeback of the previous step finish before timing the next:
    the page cache's, and presto+lento's reintegration."""
    if LENTO:
        lento_sync()
    sh("sync")
    time.sleep(1)


class Interleaved:
    """A row measured on all configurations at once by one program that
    interleaves them in short rounds: measure(dirs) -> [(value, ratio)],
    ext4's first. The emulator's speed drifts by 20% within seconds: taken
    in turn, two-second loops gave ratios from 0.6 to 1.2 for one build;
    interleaved, they agree within a few percent."""

    def __init__(self, measure):
        self.measure = measure


# Each row: (name, unit, prepare(dir) or None, measure(dir) -> value, or
# an Interleaved measure). Rows run one after another; within a row every
# configuration is measured in turn, so whatever the machine does in the
# background hits all alike.
ROWS = [
    ("tar unpack", "s", None,
     lambda d: timed(f"tar -xf {TREE_MEM} -C {d} && sync")),
    ("ls -lR cold", "s", lambda d: drop_caches(),
     lambda d: timed(f"ls -lR {d}/tools")),
    ("ls -lR warm", "s", lambda d: timed(f"ls -lR {d}/tools"),
     lambda d: timed(f"ls -lR {d}/tools")),
    ("read every file", "s", None,
     lambda d: timed(f"find {d}/tools -type f -exec cat {{}} + ")),
    ("create/close/unlink", "ops/s",
     lambda d: sh(f"mkdir -p {d}/m && head -c 4096 /dev/urandom > {d}/m/f"),
     Interleaved(lambda ds: micro("create", 4000, [f"{d}/m" for d in ds]))),
    ("mkdir/rmdir", "ops/s", None,
     Interleaved(lambda ds: micro("mkdir", 4000, [f"{d}/m" for d in ds]))),
    ("open/read/close", "ops/s", None, Interleaved(
        lambda ds: micro("openread", 10000, [f"{d}/m/f" for d in ds]))),
    ("stat", "ops/s", None,
     Interleaved(lambda ds: micro("stat", 10000, [f"{d}/m/f" for d in ds]))),
    ("append 4 KiB + fsync", "ops/s", None, Interleaved(
        lambda ds: micro("fsync", 300, [f"{d}/m/fsync" for d in ds]))),
    ("rm -rf", "s", None, lambda d: timed(f"rm -rf {d}/tools && sync")),
    ("write 1 GiB", "MiB/s", None, lambda d: dd_rate(
        f"dd if=/dev/zero of={d}/big bs=1M count=1024 conv=fsync "
        "status=none")),
    ("read 1 GiB", "MiB/s", lambda d: drop_caches(), lambda d: dd_rate(
        f"dd if={d}/big of=/dev/null bs=1M status=none")),
]


def main():
    out = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    sh("mount -t tmpfs tmpfs /mnt && mkdir -p /mnt/ext /mnt/p /mnt/pl "
       "/mnt/o")
    sh(f"cp {TREE} {TREE_MEM}")
    # No lazy inode-table zeroing in the background while we measure.
    sh("mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/vda"
       " && mount /dev/vda /mnt/ext")
    sh(f"insmod {os.environ['PRESTO_KO']} && modprobe overlay")
    configs = [Config(n) for n in ("ext4", "presto", "presto+lento",
                                   "overlayfs")]
    with open(out, "w") as f:
        for run in range(runs):
            for cfg in configs:
                cfg.setup()
            for i, (row, unit, prepare, measure) in enumerate(ROWS):
                # Rotate the order so no configuration always goes first.
                k = (run + i) % len(configs)
                recs = []
                if LENTO:
                    settled()
                    applied = lento_applied()
                if isinstance(measure, Interleaved):
                    for cfg in configs:
                        if prepare:
                            prepare(cfg.dir)
                    settled()
                    got = measure.measure([c.dir for c in configs])
                    for cfg, (value, ratio) in zip(configs, got):
                        recs.append({"run": run, "config": cfg.name,
                                     "row": row, "value": value,
                                     "unit": unit, "ratio": ratio})
                else:
                    for cfg in configs[k:] + configs[:k]:
                        if prepare:
                            prepare(cfg.dir)
                        settled()
                        recs.append({"run": run, "config": cfg.name,
                                     "row": row, "value": measure(cfg.dir),
                                     "unit": unit})
                        if LENTO and cfg.name == "presto+lento" and \
                                row in AFTER and AFTER[row][2]:
                            recs.append({"run": run, "config": cfg.name,
                                         "row": AFTER[row][0],
                                         "unit": AFTER[row][1],
                                         "value": AFTER[row][2]()})
                if LENTO and row in AFTER and not AFTER[row][2]:
                    lento_sync()
                    recs.append({"run": run, "config": "presto+lento",
                                 "row": AFTER[row][0], "unit": AFTER[row][1],
                                 "value": lento_applied() - applied})
                for rec in recs:
                    print(json.dumps(rec), flush=True)
                    f.write(json.dumps(rec) + "\n")
            for cfg in configs:
                sh(f"rm -rf {cfg.dir}/big {cfg.dir}/m")
                cfg.teardown()
    sh("rmmod presto && umount /mnt/ext")


if __name__ == "__main__":
    main()
