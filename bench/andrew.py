"""The Andrew benchmark, inside the test VM (bench/run boots it): 1, 2, 4
and 8 clients at once, each copying a small C source tree into a
directory of its own and working on it in five phases, each timed on its
own:

    MakeDir   make the tree's directories
    Copy      copy every file into them
    ScanDir   stat every object (ls -lR without the printing)
    ReadAll   read every byte of every file
    Make      compile and link it (make, one job)

The copies start each phase together (a barrier at every phase's start),
so that one copy's I/O phases are timed against the others' same phase
and not against their compiles, which would make a phase of 20 ms
measure the scheduler. This is done on plain ext4, on NFS (v4.2 over loopback, exported from the same ext4),
and on presto: each client a lento client with its own cache and its own
volume on one lento server, reached through its presto fileset mount. All
clients share the VM's two CPUs, so a load is compared with the same
number of copies on ext4 and NFS in the same boot. The server's CPU
seconds over a load are taken from /proc (the lento server process; the
nfsd threads), per client.

    python3 bench/andrew.py OUT [LOADS] [CONFIGS]
    (LOADS default 1,2,4,8; CONFIGS default ext4,nfs,presto; also
    journal: presto mounts with no lento, the kernel journal alone, and
    overlayfs: the in-kernel stacking peer, each client a mount of its own)

Writes one JSON object per measurement to OUT (bench/report.py reads them).
"""
import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXT = "/mnt/ext"
SRC = "/mnt/andrew-src"
PHASES = ("MakeDir", "Copy", "ScanDir", "ReadAll", "Make")
# The I/O phases take 5 to 100 ms here, and lento's background work
# (consuming the journal every five seconds, reintegrating) falls in one
# round and not the next: one round says little, and the median of five
# moved by up to 0.15 from one boot to the next. Each load runs them this
# many times (each round a run in the report); the first round of a load
# on presto also takes the write-back permit.
ROUNDS = 9
CLK_TCK = os.sysconf("SC_CLK_TCK")


def sh(cmd, **kw):
    subprocess.run(cmd, shell=True, check=True, **kw)


# ------------------------------------------------------------ the source

def make_source(root, libs=4, files=5, docs=12, seed=1):
    """A small C program: LIBS directories of FILES sources each, a header
    per directory, DOCS text files of 2 to 16 KiB per directory (Andrew's
    tree is about 70 files, 200 KB: the I/O phases need bytes, the compile
    under emulation needs few sources), a main, a Makefile. Deterministic."""
    rng = random.Random(seed)
    os.makedirs(os.path.join(root, "include"))
    calls = []
    for i in range(libs):
        d = os.path.join(root, "lib%d" % i)
        os.makedirs(os.path.join(d, "doc"))
        protos = []
        for j in range(files):
            body = ["#include \"lib%d.h\"" % i, ""]
            for k in range(6):
                name = "l%d_f%d_%d" % (i, j, k)
                protos.append("int %s(int x);" % name)
                a, b = rng.randrange(1, 97), rng.randrange(1, 89)
                body += ["int %s(int x)" % name, "{",
                         "\tint i, s = %d;" % a, "",
                         "\tfor (i = 0; i < x %% %d + 3; i++)" % b,
                         "\t\ts = (s * 31 + i) ^ (x >> (i & 7));",
                         "\treturn s;", "}", ""]
            calls.append("l%d_f%d_0" % (i, j))
            with open(os.path.join(d, "f%d.c" % j), "w") as f:
                f.write("\n".join(body))
        with open(os.path.join(root, "include", "lib%d.h" % i), "w") as f:
            f.write("\n".join(protos) + "\n")
        for n in range(docs):
            line = "lib%d, note %d: functions of no use.\n" % (i, n)
            with open(os.path.join(d, "doc", "n%d.txt" % n), "w") as f:
                f.write(line * (rng.randrange(2048, 16384) // len(line)))
    with open(os.path.join(root, "main.c"), "w") as f:
        f.write("#include <stdio.h>\n")
        f.write("".join("#include \"lib%d.h\"\n" % i for i in range(libs)))
        f.write("int main(void)\n{\n\tint s = 0;\n\n")
        f.write("".join("\ts += %s(%d);\n" % (c, n)
                        for n, c in enumerate(calls)))
        f.write("\tprintf(\"%d\\n\", s);\n\treturn 0;\n}\n")
    with open(os.path.join(root, "Makefile"), "w") as f:
        f.write("CFLAGS = -O1 -Iinclude\n"
                "OBJS = $(patsubst %.c,%.o,$(wildcard lib*/*.c)) main.o\n"
                "andrew: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n")


# ------------------------------------------------------------ one copy

def io_phases(src, dst, dirs, files, together, t):
    """MakeDir, Copy, ScanDir and ReadAll of one round, in @dst: each
    phase's seconds appended to t[phase]."""
    together()
    t0 = time.perf_counter()
    os.mkdir(dst)
    for d in dirs:
        os.mkdir(os.path.join(dst, d))
    t["MakeDir"].append(time.perf_counter() - t0)
    together()
    t0 = time.perf_counter()
    for f in files:
        with open(os.path.join(src, f), "rb") as a, \
                open(os.path.join(dst, f), "wb") as b:
            b.write(a.read())
    t["Copy"].append(time.perf_counter() - t0)
    together()
    t0 = time.perf_counter()
    for root, ds, fs in os.walk(dst):
        for n in ds + fs:
            os.lstat(os.path.join(root, n))
    t["ScanDir"].append(time.perf_counter() - t0)
    together()
    t0 = time.perf_counter()
    for root, ds, fs in os.walk(dst):
        for n in fs:
            with open(os.path.join(root, n), "rb") as f:
                while f.read(1 << 16):
                    pass
    t["ReadAll"].append(time.perf_counter() - t0)


def copy_phases(src, dst, together=lambda: None, rounds=ROUNDS):
    """The five phases of one client: {phase: [seconds per round]}. The
    I/O phases run @rounds times, each round in a directory of its own
    (@dst-0, @dst-1, ...); Make once, in the last. Each phase starts once
    together() returned."""
    t = {ph: [] for ph in PHASES}
    dirs, files = [], []
    for root, ds, fs in os.walk(src):
        rel = os.path.relpath(root, src)
        dirs += [os.path.normpath(os.path.join(rel, d)) for d in ds]
        files += [os.path.normpath(os.path.join(rel, f)) for f in fs]
    for r in range(rounds):
        io_phases(src, f"{dst}-{r}", dirs, files, together, t)
    together()
    t0 = time.perf_counter()
    subprocess.run(["make", "-s", "-C", f"{dst}-{rounds - 1}"], check=True,
                   stdout=subprocess.DEVNULL)
    t["Make"].append(time.perf_counter() - t0)
    return t


# ------------------------------------------------------------ configs

def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def pids_named(comm):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/comm" % p) as f:
                    if f.read().strip() == comm:
                        out.append(int(p))
            except OSError:
                pass
    return out


class Ext4:
    name = "ext4"

    def setup(self):
        sh(f"mkdir -p {EXT}/a-ext4")

    def dirs(self, load, tag):
        return [f"{EXT}/a-ext4/{tag}-c{k}" for k in range(load)]

    def server_cpu(self):
        return None

    def client_cpu(self, load):
        return None

    def settle(self, load):
        pass

    def teardown(self):
        pass


class Nfs:
    """NFS v4.2 over loopback, exporting a directory of the same ext4."""
    name = "nfs"

    def setup(self):
        sh(f"mkdir -p {EXT}/a-nfs /mnt/nfs && modprobe nfsd && "
           "(mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd)")
        with open("/etc/exports", "w") as f:
            f.write(f"{EXT}/a-nfs 127.0.0.1(rw,no_root_squash,insecure,"
                    "no_subtree_check,fsid=0)\n")
        sh("(pgrep -x rpcbind || rpcbind -w) && exportfs -ra && "
           "rpc.mountd && rpc.nfsd 8 && sleep 1 && "
           "mount -t nfs -o vers=4.2 127.0.0.1:/ /mnt/nfs")

    def dirs(self, load, tag):
        return [f"/mnt/nfs/{tag}-c{k}" for k in range(load)]

    def server_cpu(self):
        return cpu_seconds(pids_named("nfsd"))

    def client_cpu(self, load):
        return None

    def settle(self, load):
        pass

    def teardown(self):
        sh("umount /mnt/nfs && rpc.nfsd 0 && exportfs -ua")


class Presto:
    """Each client a lento client with its own cache and volume, served
    through its presto fileset mount; one lento server."""
    name = "presto"
    MAX = 8

    def setup(self):
        sys.path.insert(0, os.path.join(TOP, "tests", "lento"))
        import importlib.machinery
        import importlib.util
        path = os.path.join(TOP, "tests", "lento", "run")
        loader = importlib.machinery.SourceFileLoader("lento_run", path)
        spec = importlib.util.spec_from_loader("lento_run", loader)
        self.lr = lr = importlib.util.module_from_spec(spec)
        loader.exec_module(lr)
        # LENTO_BIN: another build, to compare (as bench/guest.py).
        lr.LENTO = os.environ.get("LENTO_BIN") or os.path.join(
            TOP, "tools", "bin", "lento")
        tmp = f"{EXT}/a-presto"
        os.makedirs(tmp)
        self.t = lr.Test("andrew", tmp)
        self.srv = self.t.server(heartbeat_ms=3000)
        self.clients = []
        for k in range(self.MAX):
            vol = f"andrew{k}"
            self.srv.volume(vol)
            c = lr.Client(tmp, f"c{k}", self.srv, age_ms=5000,
                          volumes=(vol,),
                          extra=["--fileset", f"{vol}:and{k}"])
            self.t.procs.append(c)
            c.start()
            lower = os.path.join(c.cache, vol)
            lr.wait_until(lambda: os.path.isdir(lower), 30, "the cache")
            os.makedirs(os.path.join(lower, ".presto"), exist_ok=True)
            c.mnt = f"/mnt/and{k}"
            os.makedirs(c.mnt)
            sh(f"mount -t presto -o lower={lower},fileset=and{k},"
               f"timeout=120 presto {c.mnt}")

            def ready(c=c):
                fs = c.status()["presto"]["filesets"][0]
                return fs["registered"] and fs["mounted"] and \
                    fs["epoch_sent"]
            lr.wait_until(ready, 30, "the fileset")
            self.clients.append(c)

    def dirs(self, load, tag):
        return [f"{self.clients[k].mnt}/{tag}" for k in range(load)]

    def server_cpu(self):
        return cpu_seconds([self.srv.p.pid])

    def client_cpu(self, load):
        """The lento clients' CPU seconds: the journal's consumption and
        the reintegration, which share the vCPUs with the copies."""
        return cpu_seconds([c.p.pid for c in self.clients[:load]])

    def settle(self, load):
        """Everything the load wrote reaches the server: its time."""
        t0 = time.perf_counter()
        for c in self.clients[:load]:
            c.sync(timeout=600)
        return time.perf_counter() - t0

    def teardown(self):
        for c in self.clients:
            sh(f"umount {c.mnt}")
        for p in self.t.finish():
            print("# " + p.splitlines()[0], flush=True)


class Mounts(Ext4):
    """Each client a mount of its own, /mnt/NAMEk, made by mount(k)."""

    def setup(self):
        for k in range(Presto.MAX):
            self.mount(k, f"/mnt/{self.name}{k}")

    def dirs(self, load, tag):
        return [f"/mnt/{self.name}{k}/{tag}" for k in range(load)]

    def teardown(self):
        for k in range(Presto.MAX):
            sh(f"umount /mnt/{self.name}{k}")


class Journal(Mounts):
    """presto with no lento: each client a plain presto mount (the kernel
    journal alone), to tell presto's cost from lento's."""
    name = "journal"

    def mount(self, k, mnt):
        lower = f"{EXT}/a-journal/k{k}"
        sh(f"mkdir -p {lower}/.presto {mnt} && "
           f"mount -t presto -o lower={lower} presto {mnt}")


class Overlay(Mounts):
    """overlayfs, each client an overlay whose upper layer is on the
    ext4 (every change goes there), as bench/guest.py's."""
    name = "overlayfs"

    def setup(self):
        sh("modprobe overlay")
        super().setup()

    def mount(self, k, mnt):
        b = f"{EXT}/a-overlayfs/k{k}"
        sh(f"mkdir -p {b}/l {b}/u {b}/w {mnt} && "
           f"mount -t overlay -o lowerdir={b}/l,upperdir={b}/u,"
           f"workdir={b}/w overlay {mnt}")


CONFIGS = {"ext4": Ext4, "nfs": Nfs, "presto": Presto, "journal": Journal,
           "overlayfs": Overlay}


# ------------------------------------------------------------ running

def one_copy(src, dst, barrier, results):
    """A client's copy, in a process of its own."""
    try:
        results.put((dst, copy_phases(src, dst,
                                      lambda: barrier.wait(timeout=1800))))
    except BaseException as e:  # noqa: B902 -- reported by the parent
        barrier.abort()
        results.put((dst, "%s: %s" % (type(e).__name__, e)))


def run_load(cfg, load, tag):
    """@load copies at once; {phase: [[seconds per round] per copy]},
    server CPU s, the time the clients then take to sync, lento clients'
    CPU s."""
    cpu0, ccpu0 = cfg.server_cpu(), cfg.client_cpu(load)
    barrier, results = mp.Barrier(load), mp.Queue()
    procs = [mp.Process(target=one_copy, args=(SRC, d, barrier, results))
             for d in cfg.dirs(load, tag)]
    for p in procs:
        p.start()
    got = [results.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join()
    out = {p: [] for p in PHASES}
    for dst, phases in got:
        if isinstance(phases, str):
            raise RuntimeError("the copy in %s failed on %s: %s" %
                               (dst, cfg.name, phases))
        for ph in PHASES:
            out[ph].append(phases[ph])
    settle = cfg.settle(load)
    cpu1, ccpu1 = cfg.server_cpu(), cfg.client_cpu(load)
    return (out, None if cpu0 is None else cpu1 - cpu0, settle,
            None if ccpu0 is None else ccpu1 - ccpu0)


def prepare():
    """The scratch ext4 at EXT and presto loaded: bench/run's earlier
    steps leave the first and unload the second; alone, make both."""
    if not os.path.ismount(EXT):
        sh("mountpoint -q /mnt || mount -t tmpfs tmpfs /mnt")
        os.makedirs(EXT, exist_ok=True)
        sh("mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "
           f"/dev/vda && mount /dev/vda {EXT}")
    with open("/proc/modules") as f:
        loaded = any(line.split()[0] == "presto" for line in f)
    if not loaded:
        sh(f"insmod {os.environ['PRESTO_KO']}")


def main():
    out = sys.argv[1]
    loads = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2
                              else "1,2,4,8").split(",")]
    names = (sys.argv[3] if len(sys.argv) > 3
             else "ext4,nfs,presto").split(",")
    prepare()
    if not os.path.isdir(SRC):
        make_source(SRC)
    configs = [CONFIGS[n]() for n in names]
    for cfg in configs:
        cfg.setup()
    try:
        with open(out, "a") as f:
            def emit(rec):
                rec["bench"] = "andrew"
                rec.setdefault("run", 0)    # ratios within a round
                print(json.dumps(rec), flush=True)
                f.write(json.dumps(rec) + "\n")
            for i, load in enumerate(loads):
                k = i % len(configs)
                for cfg in configs[k:] + configs[:k]:
                    sh("sync")
                    time.sleep(1)
                    got, cpu, settle, ccpu = run_load(cfg, load,
                                                      f"l{load}")
                    for ph in PHASES:
                        for r in range(len(got[ph][0])):
                            emit({"config": cfg.name, "load": load,
                                  "row": f"{ph} (load {load})", "unit": "s",
                                  "value": sum(c[r] for c in got[ph]) / load,
                                  "run": r})
                    emit({"config": cfg.name, "load": load,
                          "row": f"first MakeDir (load {load})", "unit": "s",
                          "value": sum(c[0] for c in got["MakeDir"]) / load})
                    if cpu is not None:
                        emit({"config": cfg.name, "load": load,
                              "row": f"server CPU per client (load {load})",
                              "unit": "s", "value": cpu / load})
                    if ccpu is not None:
                        emit({"config": cfg.name, "load": load,
                              "row": f"lento client CPU per client "
                                     f"(load {load})",
                              "unit": "s", "value": ccpu / load})
                    if settle is not None:
                        emit({"config": cfg.name, "load": load,
                              "row": f"sync to server (load {load})",
                              "unit": "s", "value": settle})
    finally:
        for cfg in configs:
            cfg.teardown()


if __name__ == "__main__":
    main()
