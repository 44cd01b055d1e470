#!/usr/bin/env python3
"""presto under a path-based security module: AppArmor.

    lsm.py MNT CACHE

MNT is a presto mount over CACHE. Runs as root in the test VM, whose
kernels (Debian's and the debug build) have AppArmor; ends with
"N passed, N failed".

A program confined by a profile that allows it everything but the cache
(a profile names the paths a program uses: presto's, never the cache's)
must be able to do through presto all it may do, and no more. AppArmor
judges an open by the file's path: presto's lower files show presto's
path, so the profile is asked about the path the program named, not about
the cache's (which, on presto's private mount, AppArmor cannot even name
and refuses as "disconnected").
"""
import os
import subprocess
import sys

from cases import Cases, check

MNT, CACHE = sys.argv[1], sys.argv[2]
PROFILE = "presto-lsm-test"
SECFS = "/sys/kernel/security"

case = Cases()


def load_profile():
    if not os.path.isdir(f"{SECFS}/apparmor"):
        subprocess.run(["mount", "-t", "securityfs", "securityfs", SECFS],
                       stderr=subprocess.DEVNULL)
    if not os.path.isdir(f"{SECFS}/apparmor"):
        raise RuntimeError("AppArmor is not enabled in this kernel")
    text = f"""profile {PROFILE} {{
  capability,
  /** rwlkmix,
  deny {CACHE}/** rwlkm,
  deny {MNT}/secret rwlkm,
  deny {MNT}/secretdir/ rwlkm,
  deny {MNT}/secretdir/** rwlkm,
}}
"""
    subprocess.run(["apparmor_parser", "--replace"], input=text, text=True,
                   check=True)


def confined(code):
    """Run the Python @code confined; its exit status and stderr."""
    r = subprocess.run(["aa-exec", "-p", PROFILE, "--", sys.executable,
                        "-c", "import ctypes, errno, mmap, os, sys\n" + code],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stderr.strip().splitlines()[-1:] or [""]


def allowed(code):
    rc, err = confined(code)
    check(rc == 0, f"refused to a confined program: {err[0]}")


def refused(code):
    rc, err = confined(code)
    check(rc != 0 and "Permission denied" in err[0],
          f"a confined program did what its profile denies: rc {rc} {err}")


def lower(name):
    with open(f"{CACHE}/{name}", "rb") as f:
        return f.read()


def setup():
    load_profile()
    with open(f"{MNT}/f", "wb") as f:
        f.write(b"data\n")
    os.makedirs(f"{MNT}/d", exist_ok=True)
    with open(f"{MNT}/d/inside", "wb") as f:
        f.write(b"x")
    with open(f"{MNT}/secret", "wb") as f:
        f.write(b"secret\n")
    os.makedirs(f"{MNT}/secretdir", exist_ok=True)


@case
def the_profile_is_enforced():
    setup()
    refused(f"open('{CACHE}/f').read()")
    refused(f"open('{MNT}/secret').read()")


@case
def a_confined_program_appends_and_overwrites():
    allowed(f"open('{MNT}/f', 'ab').write(b'more\\n')")
    allowed(f"fd = os.open('{MNT}/f', os.O_RDWR); os.pwrite(fd, b'D', 0)")
    check(lower("f") == b"Data\nmore\n", f"cache holds {lower('f')!r}")


@case
def a_confined_program_lists_directories():
    allowed(f"assert os.listdir('{MNT}/d') == ['inside']")
    allowed(f"assert 'f' in os.listdir('{MNT}')")


@case
def a_confined_program_creates_renames_and_removes():
    allowed(f"""
open('{MNT}/new', 'wb').write(b'new')
os.rename('{MNT}/new', '{MNT}/d/moved')
assert open('{MNT}/d/moved', 'rb').read() == b'new'
os.mkdir('{MNT}/sub'); os.rmdir('{MNT}/sub')
""")
    check(lower("d/moved") == b"new", "the renamed file is not in the cache")
    allowed(f"os.unlink('{MNT}/d/moved')")
    check(not os.path.exists(f"{CACHE}/d/moved"), "the removal did not reach "
          "the cache")


@case
def a_confined_program_reads_without_atime():
    allowed(f"""
fd = os.open('{MNT}/f', os.O_RDONLY | os.O_NOATIME)
assert os.read(fd, 4) == b'Data'
""")


@case
def a_shared_mapping_writes_and_shows_the_path_opened():
    allowed(f"""
fd = os.open('{MNT}/f', os.O_RDWR)
m = mmap.mmap(fd, 4)
m[0:1] = b'M'
maps = open('/proc/self/maps').read()
assert '{MNT}/f' in maps and '{CACHE}' not in maps, maps
m.close()
""")
    check(lower("f").startswith(b"Mata"), f"cache holds {lower('f')!r}")


@case
def a_confined_program_links_in_a_tmpfile():
    allowed(f"""
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open('{MNT}/d', os.O_TMPFILE | os.O_WRONLY, 0o644)
os.write(fd, b'tmp')
if libc.linkat(-100, b'/proc/self/fd/%d' % fd, -100, b'{MNT}/d/tmp',
               0x400):
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
""")
    check(lower("d/tmp") == b"tmp", "the linked tmpfile is not in the cache")


@case
def a_confined_program_runs_a_program_from_presto():
    with open(f"{MNT}/hello", "w") as f:
        f.write("#!/bin/sh\necho hello\n")
    os.chmod(f"{MNT}/hello", 0o755)
    allowed(f"""
import subprocess
out = subprocess.run(['{MNT}/hello'], capture_output=True, text=True).stdout
assert out == 'hello\\n', out
""")


@case
def what_the_profile_denies_on_presto_stays_denied():
    refused(f"open('{MNT}/secret', 'ab').write(b'x')")
    refused(f"os.open('{MNT}/secret', os.O_RDONLY | os.O_NOATIME)")
    refused(f"os.listdir('{MNT}/secretdir')")
    refused(f"open('{MNT}/secretdir/new', 'wb')")
    check(lower("secret") == b"secret\n", "a denied write reached the cache")
    check(os.listdir(f"{CACHE}/secretdir") == [], "a denied create reached "
          "the cache")


sys.exit(case.finish())
