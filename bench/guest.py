"""The benchmark, inside the test VM on Debian's kernel (bench/run boots it).

Runs the seed workloads on plain ext4, presto over ext4 and overlayfs
side by side in one boot, RUNS times each, interleaved so that drift in
the emulator hits every configuration alike, and writes one JSON object
per measurement to OUT.

    python3 bench/guest.py OUT [RUNS]
"""
import json
import os
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join(TOP, "build", "tree.tar")
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
                    "overlayfs": "/mnt/o"}[name]

    def setup(self):
        self.teardown()
        if self.name == "ext4":
            sh(f"mkdir -p {self.dir}")
        elif self.name == "presto":
            sh(f"mkdir -p {EXT}/pc/.presto /mnt/p && mount -t presto "
               f"-o lower={EXT}/pc presto /mnt/p")
        else:
            sh(f"mkdir -p {EXT}/ol {EXT}/ou {EXT}/ow /mnt/o && mount -t "
               f"overlay -o lowerdir={EXT}/ol,upperdir={EXT}/ou,"
               f"workdir={EXT}/ow overlay /mnt/o")

    def teardown(self):
        for m in ("/mnt/p", "/mnt/o"):
            subprocess.run(["umount", m], stderr=subprocess.DEVNULL)
        sh(f"rm -rf {EXT}/e {EXT}/pc {EXT}/ol {EXT}/ou {EXT}/ow")


def micro(op, n, target):
    out = subprocess.run([MICRO, op, str(n), target], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0])


def dd_rate(cmd):
    t = timed(cmd)
    return 1024 / t  # MiB per second for 1 GiB


def measure(cfg):
    """Every row once on @cfg; yields (row, value, unit)."""
    d = cfg.dir
    yield "tar unpack", timed(f"tar -xf {TREE} -C {d} && sync"), "s"
    drop_caches()
    yield "ls -lR cold", timed(f"ls -lR {d}/tools"), "s"
    yield "ls -lR warm", timed(f"ls -lR {d}/tools"), "s"
    yield "read every file", timed(
        f"find {d}/tools -type f -exec cat {{}} + "), "s"
    sh(f"mkdir -p {d}/m && head -c 4096 /dev/urandom > {d}/m/f")
    yield "create/close/unlink", micro("create", 1000, f"{d}/m"), "ops/s"
    yield "mkdir/rmdir", micro("mkdir", 1000, f"{d}/m"), "ops/s"
    yield "open/read/close", micro("openread", 10000, f"{d}/m/f"), "ops/s"
    yield "stat", micro("stat", 10000, f"{d}/m/f"), "ops/s"
    yield "rm -rf", timed(f"rm -rf {d}/tools && sync"), "s"
    yield "write 1 GiB", dd_rate(
        f"dd if=/dev/zero of={d}/big bs=1M count=1024 conv=fsync "
        "status=none"), "MiB/s"
    drop_caches()
    yield "read 1 GiB", dd_rate(
        f"dd if={d}/big of=/dev/null bs=1M status=none"), "MiB/s"
    sh(f"rm -f {d}/big && rm -rf {d}/m && sync")


def main():
    out = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    sh("mount -t tmpfs tmpfs /mnt && mkdir -p /mnt/ext /mnt/p /mnt/o")
    # No lazy inode-table zeroing in the background while we measure.
    sh("mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/vda"
       " && mount /dev/vda /mnt/ext")
    sh(f"insmod {os.environ['PRESTO_KO']} && modprobe overlay")
    configs = [Config(n) for n in ("ext4", "presto", "overlayfs")]
    with open(out, "w") as f:
        for run in range(runs):
            # Rotate the order so no configuration always goes first.
            for cfg in configs[run % 3:] + configs[:run % 3]:
                cfg.setup()
                for row, value, unit in measure(cfg):
                    rec = {"run": run, "config": cfg.name, "row": row,
                           "value": value, "unit": unit}
                    print(json.dumps(rec), flush=True)
                    f.write(json.dumps(rec) + "\n")
                cfg.teardown()
    sh("rmmod presto")


main()
