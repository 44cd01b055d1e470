"""Where a workload's instructions go, system call by system call, on
ext4, presto and overlayfs: for finding presto's costs, not a benchmark.

Inside the test VM booted with instruction counting, as root:

    tools/vm --icount --disk build/vm/sc.img:2G --fresh-disks \\
        python3 bench/syscost.py tar|tarsync|rm [ROUNDS]

Under `--icount` the guest's clock advances one nanosecond per emulated
instruction, so ftrace's function_graph durations are instruction
counts. The tracer is limited to the system calls' entry points (and the
final fput of a file, which runs on the way back to user space, after
close has returned), so it adds little inside them (traced deeper, the
tracer's own few hundred instructions per function entered swamp what
they measure). Each round runs the
workload once per configuration, in rotating order: `tar` unpacks
build/tree.tar (bench/make-tree) from memory (`tarsync`: and syncs, as
the benchmark's row does), `rm` removes such an
unpacked tree (unpacked and synced beforehand, untraced). Prints, per
system call, the calls and the median instructions per round of each
configuration, then the workload's own time (all of the guest's
instructions while it ran, the journal's thread included).
"""
import os
import re
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join(TOP, "build", "tree.tar")
TREE_MEM = "/mnt/tree.tar"
EXT = "/mnt/ext"
T = "/sys/kernel/tracing"
CONFIGS = ("ext4", "presto", "overlayfs")
DIRS = {"ext4": EXT + "/e", "presto": "/mnt/p", "overlayfs": "/mnt/o"}
CALLS = ("openat", "write", "close", "utimensat", "fchown", "fchmod",
         "fchownat", "chmod", "mkdirat", "newfstatat", "unlinkat",
         "getdents64", "fcntl", "lseek", "read", "symlinkat", "linkat")
LINE = re.compile(r"\)\s+[+!#*@$ ]*([\d.]+) us\s+\|\s+(\S+)\(\);")


def sh(cmd, **kw):
    subprocess.run(cmd, shell=True, check=True, **kw)


def put(name, value):
    with open(os.path.join(T, name), "w") as f:
        f.write(value)


def setup():
    sh("mount -t tmpfs tmpfs /mnt && mkdir -p /mnt/ext /mnt/p /mnt/o")
    sh("mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "
       "/dev/vda && mount /dev/vda /mnt/ext")
    sh(f"insmod {os.environ['PRESTO_KO']}")
    sh(f"mkdir -p {EXT}/e {EXT}/pc/.presto {EXT}/ol {EXT}/ou {EXT}/ow")
    sh(f"mount -t presto -o lower={EXT}/pc presto /mnt/p")
    sh(f"mount -t overlay -o lowerdir={EXT}/ol,upperdir={EXT}/ou,"
       f"workdir={EXT}/ow overlay /mnt/o")
    sh(f"cp {TREE} {TREE_MEM}")
    avail = open(os.path.join(T, "available_filter_functions")).read()
    want = ["__x64_sys_" + c for c in CALLS] + ["____fput"]
    have = [f for f in want if re.search(r"^%s( |$)" % re.escape(f), avail,
                                         re.M)]
    put("current_tracer", "nop")
    put("buffer_size_kb", "65536")
    put("set_ftrace_filter", " ".join(have))
    put("current_tracer", "function_graph")
    put("tracing_on", "0")


def traced(cmd):
    """Run @cmd traced: its time and the instructions per function."""
    put("trace", "")
    put("tracing_on", "1")
    t0 = time.perf_counter()
    sh(cmd, stdout=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    put("tracing_on", "0")
    per = {}
    with open(os.path.join(T, "trace")) as f:
        for line in f:
            m = LINE.search(line)
            if not m:
                continue
            name = m.group(2).replace("__x64_sys_", "")
            n, ins = per.get(name, (0, 0.0))
            per[name] = (n + 1, ins + float(m.group(1)) * 1000)
    return dt, per


def workload(what, d):
    if what in ("tar", "tarsync"):
        sh(f"rm -rf {d}/* && sync")
        return f"tar -xf {TREE_MEM} -C {d}" + \
            (" && sync" if what == "tarsync" else "")
    sh(f"rm -rf {d}/* && tar -xf {TREE_MEM} -C {d} && sync")
    return f"rm -rf {d}/*"


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "tar"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if what not in ("tar", "tarsync", "rm"):
        print("usage: syscost.py tar|tarsync|rm [ROUNDS]", file=sys.stderr)
        return 2
    setup()
    got = {c: [] for c in CONFIGS}
    for r in range(rounds):
        for i in range(len(CONFIGS)):
            c = CONFIGS[(r + i) % len(CONFIGS)]
            got[c].append(traced(workload(what, DIRS[c])))
    names = sorted({n for c in CONFIGS for _, per in got[c] for n in per})
    print(f"{what}: median instructions per round ({rounds} rounds)")
    print("%-12s %7s" % ("call", "calls") +
          "".join(" %12s" % c for c in CONFIGS) +
          "".join(" %8s" % (c[:5] + "/e") for c in CONFIGS[1:]))

    def med(c, n):
        return statistics.median(per.get(n, (0, 0))[1] for _, per in got[c])
    total = {c: 0.0 for c in CONFIGS}
    for n in names:
        calls = max(per.get(n, (0, 0))[0] for _, per in got["ext4"])
        m = {c: med(c, n) for c in CONFIGS}
        for c in CONFIGS:
            total[c] += m[c]
        print("%-12s %7d" % (n, calls) +
              "".join(" %12.0f" % m[c] for c in CONFIGS) +
              "".join(" %8.2f" % (m[c] / m["ext4"] if m["ext4"] else 0)
                      for c in CONFIGS[1:]))
    print("%-12s %7s" % ("traced", "") +
          "".join(" %12.0f" % total[c] for c in CONFIGS))
    walls = {c: statistics.median(dt for dt, _ in got[c]) * 1e9
             for c in CONFIGS}
    print("%-12s %7s" % ("whole run", "") +
          "".join(" %12.0f" % walls[c] for c in CONFIGS) +
          "".join(" %8.2f" % (walls["ext4"] / walls[c])
                  for c in CONFIGS[1:]) + "  (speed ratio)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
