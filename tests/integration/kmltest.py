"""What the KML tests share: the state and acknowledgement ioctls of a
presto mount (protocol/presto_kml.h) and the records kmlcat reads."""
import fcntl
import json
import os
import struct
import subprocess

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
KMLCAT = os.path.join(TOP, "tools", "bin", "kmlcat")

# struct presto_kml_state: 10 u64/s64, one s32, one u32.
STATE_FMT = "<QQQQQQqQQQiI"
STATE_KEYS = ("next_seq durable_seq acked_seq pending_records pending_bytes "
              "limit_bytes oldest_ns first_segno cur_segno segments error "
              "reserved").split()
PRESTO_IOC_KML_STATE = (2 << 30) | (struct.calcsize(STATE_FMT) << 16) | \
    (0xb5 << 8) | 1
PRESTO_IOC_KML_ACK = (1 << 30) | (8 << 16) | (0xb5 << 8) | 2


FS_IOC_GETVERSION = 0x80087601          # _IOR('v', 1, long)


def generation(path):
    """The ext4 inode generation of a regular file or directory."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                 os.O_CLOEXEC | os.O_NOATIME)
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETVERSION, bytes(8))
    finally:
        os.close(fd)
    # ext4 stores an int there, the rest of the buffer stays zero.
    return struct.unpack("<I", buf[:4])[0]


def _ioctl(mnt, request, arg):
    fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return fcntl.ioctl(fd, request, arg)
    finally:
        os.close(fd)


def state(mnt):
    """The log's state, as a dict of struct presto_kml_state's fields."""
    buf = _ioctl(mnt, PRESTO_IOC_KML_STATE, bytes(struct.calcsize(STATE_FMT)))
    return dict(zip(STATE_KEYS, struct.unpack(STATE_FMT, buf)))


def ack(mnt, seq):
    """Acknowledge every record up to @seq (OSError EINVAL past durable)."""
    _ioctl(mnt, PRESTO_IOC_KML_ACK, struct.pack("<Q", seq))


def is_store(rec):
    """Does @rec say its file's content changed: a STORE, or a CREATE a
    STORE folded into (KML.md, flag STORED)?"""
    return rec["op"] == "STORE" or (rec["op"] == "CREATE" and
                                    "STORED" in rec["flags"])


def records(cache, after=0):
    """The records of @cache's log after @after, decoded by kmlcat."""
    out = subprocess.run([KMLCAT, "--json", "--strict", "--after", str(after),
                          cache], check=True, capture_output=True,
                         text=True).stdout
    return [json.loads(line) for line in out.splitlines()]
