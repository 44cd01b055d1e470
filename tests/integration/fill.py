"""Write to PATH until the file system refuses; the refusal must be ERRNO.

The lower file system's own errors (ENOSPC when full, EDQUOT over quota)
must reach the writer unchanged through presto. Exits 0 when they do.
"""
import errno
import os
import sys


def main():
    path, want = sys.argv[1], getattr(errno, sys.argv[2])
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    block = b"x" * (1 << 20)
    written = 0
    try:
        while written < (1 << 34):
            written += os.write(fd, block)
            os.fsync(fd)
        print(f"wrote {written} bytes and never got {sys.argv[2]}")
        return 1
    except OSError as e:
        print(f"after {written} bytes: {errno.errorcode.get(e.errno)}")
        return 0 if e.errno == want else 1
    finally:
        os.close(fd)


sys.exit(main())
