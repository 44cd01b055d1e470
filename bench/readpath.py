"""The read path's benchmark, inside the test VM (bench/run boots it):
a warm cache served by presto as a fileset mount, against ext4 itself and
overlayfs, side by side in one boot; and nginx serving the tree from each
(wrk, 1 and 10 connections), as in the seed paper's WebStone table.

The tree is build/tree.tar, materialised in each lower as lento leaves a
cache it filled: every object with its trusted.presto.cb (ATTR|DATA, the
epoch), and the epoch confirmed by a registered lento (tests/integration/
genl.py plays it, and answers nothing: a warm read must make no upcall,
and the upcall counter is recorded with the results). Cold rows, which
need the real lento and its server, are not here yet.

    python3 bench/readpath.py OUT [RUNS]

Writes one JSON object per measurement to OUT (bench/report.py reads them).
"""
import json
import os
import re
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import genl  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402

TREE = os.path.join(TOP, "build", "tree.tar")
MICRO = os.path.join(TOP, "bench", "bin", "microbench")
EXT = "/mnt/ext"
EPOCH = 7
FILESET = "bench"
DIRS = {"ext4": f"{EXT}/e", "presto": "/mnt/p", "overlayfs": "/mnt/o"}
PORTS = {"ext4": 8081, "presto": 8082, "overlayfs": 8083}
NGINX_CONF = """
worker_processes 2;
pid /mnt/ngx/{name}.pid;
error_log /mnt/ngx/{name}.err;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    client_body_temp_path /mnt/ngx/{name}.body;
    proxy_temp_path /mnt/ngx/{name}.proxy;
    fastcgi_temp_path /mnt/ngx/{name}.fcgi;
    uwsgi_temp_path /mnt/ngx/{name}.uwsgi;
    scgi_temp_path /mnt/ngx/{name}.scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        default_type application/octet-stream;
    }}
}}
"""
WRK_LUA = """
local paths = {}
for line in io.lines("/mnt/ngx/paths") do paths[#paths + 1] = line end
local i = 0
request = function()
    i = i % #paths + 1
    return wrk.format("GET", paths[i])
end
"""


def sh(cmd, **kw):
    subprocess.run(cmd, shell=True, check=True, **kw)


def micro(op, n, targets):
    out = subprocess.run([MICRO, op, str(n)] + targets, check=True,
                         capture_output=True, text=True).stdout
    # One target prints no ratio.
    return [(float(v[0]), float(v[2]) if len(v) > 2 else 1.0) for v in
            (line.split() for line in out.splitlines())]


def warm_lower(lower):
    """Every object as lento leaves what it fetched."""
    for root, dirs, files in os.walk(lower):
        if root == lower:
            dirs[:] = [d for d in dirs if d != ".presto"]
        for n in [root] + [os.path.join(root, x) for x in dirs + files]:
            if not os.path.islink(n):
                genl.set_cb(n, genl.CB_ALL, EPOCH)


def setup():
    sh("mount -t tmpfs tmpfs /mnt && mkdir -p /mnt/ext /mnt/p /mnt/o "
       "/mnt/ngx")
    sh("mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 /dev/vda"
       " && mount /dev/vda /mnt/ext")
    sh(f"insmod {os.environ['PRESTO_KO']} && modprobe overlay")
    sh(f"mkdir -p {EXT}/e {EXT}/fs/.presto {EXT}/ol {EXT}/ou {EXT}/ow")
    for d in (f"{EXT}/e", f"{EXT}/fs", f"{EXT}/ol"):
        sh(f"tar -xf {TREE} -C {d}")
        sh(f"mkdir -p {d}/m && head -c 4096 /dev/urandom > {d}/m/f")
    warm_lower(f"{EXT}/fs")
    sh(f"mount -t presto -o lower={EXT}/fs,fileset={FILESET} presto /mnt/p")
    sh(f"mount -t overlay -o lowerdir={EXT}/ol,upperdir={EXT}/ou,"
       f"workdir={EXT}/ow overlay /mnt/o")
    lento = genl.Lento()
    rep, err = lento.register(FILESET)
    assert not err, os.strerror(err)
    err = lento.call("SET_EPOCH", FILESET, genl.a_u64(genl.A["EPOCH"], EPOCH))
    assert not err, os.strerror(err)
    sh("sync && echo 3 > /proc/sys/vm/drop_caches")
    return lento


def nginx_start():
    with open("/mnt/ngx/paths", "w") as f:
        for root, dirs, files in os.walk(f"{EXT}/e/tools"):
            for n in sorted(files):
                f.write("/" + os.path.relpath(os.path.join(root, n),
                                              f"{EXT}/e") + "\n")
    with open("/mnt/ngx/paths.lua", "w") as f:
        f.write(WRK_LUA)
    for name, root in DIRS.items():
        with open(f"/mnt/ngx/{name}.conf", "w") as f:
            f.write(NGINX_CONF.format(name=name, port=PORTS[name], root=root))
        sh(f"nginx -c /mnt/ngx/{name}.conf -p /mnt/ngx")


def wrk(port, conns, seconds=5):
    """(requests/s, MB/s) of wrk against @port."""
    out = subprocess.run(
        ["wrk", "-t", str(min(conns, 2)), "-c", str(conns), "-d",
         f"{seconds}s", "-s", "/mnt/ngx/paths.lua",
         f"http://127.0.0.1:{port}"],
        check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    m = re.search(r"Transfer/sec:\s*([\d.]+)([KMG]?)B", out)
    mb = float(m.group(1)) * {"": 1e-6, "K": 1e-3, "M": 1, "G": 1e3}[
        m.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert not errors, f"wrk on port {port}: {errors.group(0)}"
    return rps, mb


def seconds(op, target):
    """Elapsed seconds of one microbench pass over @target."""
    out = subprocess.run([MICRO, op, "1", target], check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[1])


def lento_harness():
    """tests/lento/run as a module, driving the non-sanitised lento."""
    path = os.path.join(TOP, "tests", "lento", "run")
    loader = importlib.machinery.SourceFileLoader("lento_run", path)
    spec = importlib.util.spec_from_loader("lento_run", loader)
    lr = importlib.util.module_from_spec(spec)
    loader.exec_module(lr)
    lr.LENTO = os.path.join(TOP, "tools", "bin", "lento")
    return lr


def publish(lr, c, src, vol):
    """Every directory and file under @src into @vol, through client @c."""
    base = os.path.dirname(src)
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, base)
        c.ctl("mkdir", f"{vol}/{rel}")
        for n in sorted(files):
            p = os.path.join(root, n)
            if not os.path.islink(p):
                c.ctl("write", f"{vol}/{rel}/{n}", "@" + p)
    c.sync(timeout=600)


def cold_rows(emit, runs):
    lr = lento_harness()
    tmp = f"{EXT}/lento"
    os.makedirs(tmp, mode=0o700)
    t = lr.Test("bench", tmp)
    try:
        srv = t.server(heartbeat_ms=3000)
        srv.volume("tree")
        pub = t.client("pub", srv, volumes=("tree",))
        t0 = time.perf_counter()
        publish(lr, pub, f"{EXT}/e/tools", "tree")
        print(f"# published the tree in {time.perf_counter() - t0:.0f} s",
              flush=True)
        for run in range(runs):
            sh("sync && echo 3 > /proc/sys/vm/drop_caches")
            ext = {"cold ls -lR": seconds("lstree", f"{EXT}/e/tools")}
            sh("sync && echo 3 > /proc/sys/vm/drop_caches")
            ext["cold read every file"] = seconds("readtree",
                                                  f"{EXT}/e/tools")
            name = f"k{run}"
            k = lr.Client(tmp, name, srv, volumes=("tree",),
                          extra=["--fileset", f"tree:cold{run}"])
            t.procs.append(k)
            k.start()
            lower = os.path.join(k.cache, "tree")
            lr.wait_until(lambda: os.path.isdir(lower), 30, "the cache")
            os.makedirs(os.path.join(lower, ".presto"), exist_ok=True)
            mnt = f"/mnt/cold{run}"
            os.makedirs(mnt)
            sh(f"mount -t presto -o lower={lower},fileset=cold{run},"
               f"timeout=120 presto {mnt}")

            def ready():
                fs = k.status()["presto"]["filesets"][0]
                return fs["registered"] and fs["mounted"] and \
                    fs["epoch_sent"]
            lr.wait_until(ready, 30, "the fileset")
            got = {"cold ls -lR": seconds("lstree", f"{mnt}/tools"),
                   "cold read every file": seconds("readtree",
                                                   f"{mnt}/tools")}
            for row in ("cold ls -lR", "cold read every file"):
                for cfg, r in (("ext4", ext[row]), ("presto", got[row])):
                    emit({"run": run, "config": cfg, "row": row,
                          "unit": "s", "value": r})
            fs = k.status()["presto"]["filesets"][0]["kernel"]
            emit({"run": run, "config": "presto",
                  "row": "upcalls of a cold tree", "unit": "count",
                  "value": fs["upcalls"]})
            sh(f"umount {mnt}")
            k.stop()
    finally:
        for p in t.finish():
            print("# " + p.splitlines()[0], flush=True)


def rotate(names, k):
    k %= len(names)
    return names[k:] + names[:k]


def main():
    out = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    lento = setup()
    nginx_start()
    names = list(DIRS)
    upcalls0 = lento.stats(FILESET)["UPCALLS"]
    with open(out, "a") as f:
        def emit(rec):
            rec["bench"] = "readpath"
            print(json.dumps(rec), flush=True)
            f.write(json.dumps(rec) + "\n")

        for run in range(runs):
            # Warm: a pass first, then passes interleaved over the three.
            for name in names:
                micro("readtree", 1, [f"{DIRS[name]}/tools"])
            for row, op, n in (("warm ls -lR (tree walks)", "lstree", 10),
                               ("warm read every file (tree walks)",
                                "readtree", 10)):
                got = micro(op, n, [f"{DIRS[x]}/tools" for x in names])
                for name, (value, ratio) in zip(names, got):
                    emit({"run": run, "config": name, "row": row,
                          "unit": "walks/s", "value": value, "ratio": ratio})
            for row, op in (("warm open/read/close", "openread"),
                            ("warm stat", "stat")):
                got = micro(op, 10000, [f"{DIRS[n]}/m/f" for n in names])
                for name, (value, ratio) in zip(names, got):
                    emit({"run": run, "config": name, "row": row,
                          "unit": "ops/s", "value": value, "ratio": ratio})
            for conns in (1, 4, 10):
                for name in rotate(names, run):
                    rps, mb = wrk(PORTS[name], conns)
                    emit({"run": run, "config": name,
                          "row": f"nginx {conns} conn", "unit": "req/s",
                          "value": rps, "mb_s": mb})
        emit({"run": runs, "config": "presto", "row": "upcalls during warm rows",
              "unit": "count",
              "value": lento.stats(FILESET)["UPCALLS"] - upcalls0})
        cold_rows(emit, runs)
    for name in names:
        sh(f"nginx -c /mnt/ngx/{name}.conf -p /mnt/ngx -s quit")
    lento.close()
    time.sleep(1)
    sh("umount /mnt/p /mnt/o && rmmod presto")


main()
