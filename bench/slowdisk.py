"""lento's client on a slow disk, inside the test VM (issue 7).

    python3 bench/slowdisk.py [DELAY_MS] [FILES]

Everything -- the server's store, the client's cache and presto's lower --
on ext4 over dm-delay, every write delayed DELAY_MS (150). A presto+lento
fileset (bench/guest.py's setup), FILES (400) small files made in it, then
"lentoctl sync". Meanwhile "lentoctl status" every 0.2 s: how long the
client's event loop keeps a user waiting while its disk is slow. Prints
the status latencies, the time the changes took to reach the server, and
the client's own reports of a loop held 1 s or more. LENTO_BIN runs
another lento build, to compare.
"""
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guest  # noqa: E402

DEV = "/dev/vda"

sh = guest.sh


def main():
    delay = int(sys.argv[1]) if len(sys.argv) > 1 else 150
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    sh("modprobe dm-delay")
    sh(f'dmsetup create slow --table "0 $(blockdev --getsz {DEV}) delay '
       f'{DEV} 0 0 {DEV} 0 {delay}"')
    # /mnt is the host's, read-only: a tmpfs for the mount points.
    sh("mount -t tmpfs tmpfs /mnt && mkfs.ext4 -q -F /dev/mapper/slow && "
       "mkdir -p /mnt/ext && mount /dev/mapper/slow /mnt/ext")
    subprocess.run("lsmod | grep -q '^presto ' || insmod " +
                   os.environ["PRESTO_KO"], shell=True, check=True)
    guest.lento_setup("/mnt/pl")
    _, c = guest.LENTO
    lat, stop = [], threading.Event()

    def probe():
        while not stop.is_set():
            t = time.perf_counter()
            c.status()
            lat.append(time.perf_counter() - t)
            time.sleep(0.2)

    th = threading.Thread(target=probe)
    th.start()
    t0 = time.perf_counter()
    sh(f"mkdir /mnt/pl/d && for i in $(seq {files}); do "
       f"echo $i > /mnt/pl/d/f$i; done")
    made = time.perf_counter() - t0
    synced = guest.lento_sync()
    stop.set()
    th.join()
    lat.sort()
    held = [int(l.split(" held ")[1].split()[0])
            for l in c.logtext().splitlines() if " held " in l]
    print("writes delayed %d ms; %d files made in %.1f s, at the server "
          "%.1f s later" % (delay, files, made, synced))
    print("lentoctl status: %d probes, median %.0f ms, p95 %.0f ms, max "
          "%.0f ms" % (len(lat), 1000 * lat[len(lat) // 2],
                       1000 * lat[int(len(lat) * 0.95)], 1000 * lat[-1]))
    print("the client's loop held >= 1 s: %d times, longest %d ms" %
          (len(held), max(held or [0])))
    # The batches as both sides saw them (the time, to the second).
    t, _ = guest.LENTO
    srv = [p for p in t.procs if p is not c][0]
    for who, text in (("client", c.logtext()), ("server", srv.logtext())):
        for line in text.splitlines():
            if "records" in line or " held " in line:
                print("# %s| %s" % (who, line))
    guest.lento_teardown("/mnt/pl")
    sh("umount /mnt/ext && dmsetup remove slow")


if __name__ == "__main__":
    main()
