#!/usr/bin/env python3
"""Copy a presto cache, and replay its kernel modification log onto the copy.

    kml_replay.py snapshot CACHE SNAPDIR [--map F]
    kml_replay.py replay SNAPDIR CACHE [--after SEQ] [--map F] [--history H]
    kml_replay.py explain H TREECMP_OUTPUT [--max N]

snapshot copies the tree under CACHE (the lower= directory of a presto
mount that is not mounted now), less its top-level .presto, to SNAPDIR
(which must not exist or be empty) with modes, owners, times, every
extended attribute (trusted.*, security.* and ACLs included), symbolic
links, device nodes, fifos and hard links, and writes a map of the
objects it copied: each CACHE inode number, its generation (regular
files and directories) and its paths. The map is SNAPDIR/../NAME.map.json
for a SNAPDIR named NAME unless --map says otherwise; it also holds the
log's last sequence number at the time of the snapshot.

replay reads the log of CACHE with tools/bin/kmlcat --json --strict
(records after SEQ; by default after the one the map holds) and applies
every record to SNAPDIR, knowing objects by their lower inode number and
generation. A STORE says that content changed but does not carry it: the
content is taken from the final CACHE tree, if the object is still there
(same inode number and generation), and left alone otherwise, as it no
longer matters. After a faithful log, SNAPDIR equals CACHE (compare them
with tests/bin/treecmp --ignore .presto CACHE SNAPDIR). With --history,
replay also writes the records about each object it ends with, by path,
and explain prints them for each path a treecmp output names.

Consecutive records with the RECOVERED flag (what presto logs at mount
after an unclean umount: KML.md, "Recovery records") are a block, applied
as state. First its listings (a RESYNC_DIR and its DIRENTs), in order: a
name the listing does not have goes to a limbo directory,
SNAPDIR/.kml-replay-limbo; a listed handle the replay knows, in limbo or
anywhere, is moved there (a directory) or linked there; an unknown one is
made from its DIRENT (type, device, symlink target). A listing with fewer
DIRENTs than its count (the log was cut during recovery) is void. Then
limbo is removed with whatever no listing took back, and each RESYNC sets
its object's attributes and makes its xattrs exactly the listed ones,
valued by the SETXATTRs that follow it (presto's own trusted.presto.* are
left alone); a STORE takes content as above. A listed handle whose inode
number the replay knows with another generation is a new object, and the
old one is dead: its inode number was reused.

A record that cannot be applied (an unknown object or name, a name that
exists already, a generation that is not the one the replay knows, a
failing system call, a recovery record outside its place in a block)
stops the replay with an error naming its sequence number;
inconsistencies that do not stop it (a link count that is not the number
of names the replay knows, an inode number reused while the replay still
knows names of it, an object a listing made that no RESYNC restates, an
xattr a RESYNC lists without its value) are reported as they are met and
make the exit status 1 as well. Exit status: 0 when everything was
applied, 1 otherwise, 2 for a usage error. Must run as root.
"""
import argparse
import ctypes
import errno
import json
import os
import platform
import shutil
import stat
import subprocess
import sys

import kmltest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
KMLCAT = os.path.join(TOP, "tools", "bin", "kmlcat")

AT_FDCWD = -100
RENAME_EXCHANGE = 2
SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276}.get(platform.machine())
COPY_CHUNK = 1 << 20

CREATE_OPS = ("CREATE", "MKDIR", "MKNOD", "SYMLINK")

# Limbo: a recovery block's listings move the names they do not list to
# this directory in the snapshot (so on its file system), as a later
# listing of the block may name the same object (a move). LIMBO is its key
# in the model. It goes, with what is left in it, once the block's
# listings are applied, so a finished replay never leaves it behind.
LIMBO = 0
LIMBO_NAME = b".kml-replay-limbo"
# presto's own xattrs, which RESYNC leaves out of its list.
PRESTO_XATTRS = b"trusted.presto."


class ReplayError(Exception):
    pass


def prog():
    return "kml_replay"


def warn(msg):
    print("%s: %s" % (prog(), msg), file=sys.stderr, flush=True)


def b2s(b):
    """Bytes as a string with one code point per byte (as kmlcat does)."""
    return b.decode("latin-1")


def s2b(s):
    return s.encode("latin-1")


def walk(root):
    """Yield (relative path, lstat) of everything under root (bytes paths),
    parents before children, skipping the top-level .presto."""
    stack = [b""]
    while stack:
        rel = stack.pop()
        full = os.path.join(root, rel) if rel else root
        with os.scandir(full) as it:
            names = sorted(e.name for e in it)
        for name in names:
            if not rel and name == b".presto":
                continue
            r = os.path.join(rel, name) if rel else name
            st = os.lstat(os.path.join(root, r))
            yield r, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(r)


def default_map(snapdir):
    snapdir = os.path.abspath(snapdir).rstrip("/")
    return os.path.join(os.path.dirname(snapdir),
                        os.path.basename(snapdir) + ".map.json")


def last_seq(cache):
    """The sequence number of the last record in the log, 0 if none."""
    p = subprocess.run([KMLCAT, "--json", "--strict", cache],
                       stdout=subprocess.PIPE)
    if p.returncode != 0:
        raise ReplayError("kmlcat %s failed (exit %d)" % (cache,
                                                          p.returncode))
    lines = p.stdout.splitlines()
    return json.loads(lines[-1])["seq"] if lines else 0


def copy_xattrs(src, dst):
    have = set(os.listxattr(dst, follow_symlinks=False))
    want = os.listxattr(src, follow_symlinks=False)
    for name in want:
        os.setxattr(dst, name, os.getxattr(src, name, follow_symlinks=False),
                    0, follow_symlinks=False)
    for name in have - set(want):
        os.removexattr(dst, name, follow_symlinks=False)


# ---- snapshot -------------------------------------------------------------

def snapshot(args):
    cache = os.fsencode(os.path.abspath(args.cache))
    snap = os.fsencode(os.path.abspath(args.snapdir))
    mapfile = args.map or default_map(args.snapdir)
    if not os.path.isdir(cache):
        raise ReplayError("%s is not a directory" % args.cache)
    if os.path.lexists(snap):
        if not os.path.isdir(snap) or os.listdir(snap):
            raise ReplayError("%s exists and is not an empty directory" %
                              args.snapdir)
    else:
        os.mkdir(snap, 0o700)
    seq = last_seq(cache)

    tops = sorted(n for n in os.listdir(cache) if n != b".presto")
    if tops:
        # One cp for all, so that hard links between them are kept.
        cmd = [b"cp", b"-a", b"--preserve=all", b"--"]
        cmd += [os.path.join(cache, n) for n in tops] + [snap + b"/"]
        if subprocess.run(cmd).returncode != 0:
            raise ReplayError("cp -a %s failed" % args.cache)
    # The root itself.
    st = os.lstat(cache)
    os.chown(snap, st.st_uid, st.st_gid)
    copy_xattrs(cache, snap)
    os.chmod(snap, stat.S_IMODE(st.st_mode))
    os.utime(snap, ns=(st.st_atime_ns, st.st_mtime_ns))

    # Map the cache and check that the copy has the same objects.
    inodes = {}
    for rel, st in walk(cache):
        ent = inodes.get(st.st_ino)
        if ent is None:
            gen = None
            if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
                gen = kmltest.generation(os.path.join(cache, rel))
            ent = inodes[st.st_ino] = {"gen": gen, "type":
                                       stat.S_IFMT(st.st_mode), "paths": []}
        ent["paths"].append(rel)
    copy = {}
    for rel, st in walk(snap):
        copy[rel] = st
    problems = []
    seen = set()
    for ino, ent in inodes.items():
        snap_inos = set()
        for rel in ent["paths"]:
            st = copy.get(rel)
            if st is None:
                problems.append("%s: not copied" % b2s(rel))
                continue
            seen.add(rel)
            if stat.S_IFMT(st.st_mode) != ent["type"]:
                problems.append("%s: copied as another type" % b2s(rel))
            snap_inos.add(st.st_ino)
        if len(snap_inos) > 1:
            problems.append("%s: hard links not kept (%d inodes)" %
                            (b2s(ent["paths"][0]), len(snap_inos)))
        first = copy.get(ent["paths"][0])
        if first and not stat.S_ISDIR(ent["type"]) and \
                first.st_nlink != len(ent["paths"]):
            problems.append("%s: %d links in the copy, %d names in the cache"
                            % (b2s(ent["paths"][0]), first.st_nlink,
                               len(ent["paths"])))
    for rel in sorted(set(copy) - seen):
        problems.append("%s: in the copy only" % b2s(rel))
    if problems:
        for p in problems[:50]:
            warn("snapshot: " + p)
        raise ReplayError("the copy of %s is not faithful (%d problems)" %
                          (args.cache, len(problems)))

    root = os.lstat(cache)
    out = {
        "cache": b2s(cache),
        "seq": seq,
        "root": {"ino": root.st_ino, "gen": kmltest.generation(cache)},
        "inodes": {str(ino): {"gen": ent["gen"], "type": ent["type"],
                              "paths": [b2s(p) for p in ent["paths"]]}
                   for ino, ent in sorted(inodes.items())},
    }
    tmp = mapfile + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=0)
        f.write("\n")
    os.rename(tmp, mapfile)
    print("%s: snapshot of %s: %d objects, %d names, log up to record %d; "
          "map in %s" % (prog(), args.cache, len(inodes),
                         sum(len(e["paths"]) for e in inodes.values()), seq,
                         mapfile))
    return 0


# ---- replay -----------------------------------------------------------------

_libc = None


def renameat2(src, dst, flags):
    global _libc
    if SYS_RENAMEAT2 is None:
        raise OSError(errno.ENOSYS, "renameat2: unknown syscall number on "
                      "this machine")
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    r = _libc.syscall(ctypes.c_long(SYS_RENAMEAT2), ctypes.c_int(AT_FDCWD),
                      ctypes.c_char_p(src), ctypes.c_int(AT_FDCWD),
                      ctypes.c_char_p(dst), ctypes.c_uint(flags))
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), src, None, dst)


def decode_rdev(rdev):
    """new_encode_dev() undone."""
    major = (rdev & 0xfff00) >> 8
    minor = (rdev & 0xff) | ((rdev >> 12) & 0xfff00)
    return os.makedev(major, minor)


def make_object(path, mode, rdev=0, target=None):
    """A new, empty object of mode's type at path."""
    perm = stat.S_IMODE(mode)
    if stat.S_ISREG(mode):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                         os.O_NOFOLLOW | os.O_CLOEXEC, perm))
    elif stat.S_ISDIR(mode):
        os.mkdir(path, perm)
    elif stat.S_ISLNK(mode):
        os.symlink(target, path)
    else:
        os.mknod(path, mode, decode_rdev(rdev))


def copy_content(src, dst):
    """Make dst's content src's, holes kept as holes."""
    fi = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fo = os.open(dst, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW |
                     os.O_CLOEXEC)
        try:
            size = os.fstat(fi).st_size
            off = 0
            while off < size:
                try:
                    data = os.lseek(fi, off, os.SEEK_DATA)
                except OSError as e:
                    if e.errno == errno.ENXIO:      # only a hole is left
                        break
                    raise
                hole = min(os.lseek(fi, data, os.SEEK_HOLE), size)
                pos = data
                while pos < hole:
                    buf = os.pread(fi, min(COPY_CHUNK, hole - pos), pos)
                    if not buf:
                        raise OSError(errno.EIO, "short read", src)
                    n = os.pwrite(fo, buf, pos)
                    pos += n
                off = hole
            os.ftruncate(fo, size)
        finally:
            os.close(fo)
    finally:
        os.close(fi)
    return size


class Replay:
    def __init__(self, snap, cache, mapdata):
        self.snap = snap
        self.cache = cache
        self.root = mapdata["root"]["ino"]
        # parent inode -> {name: inode}; inode -> {(parent, name)}
        self.children = {self.root: {}}
        self.links = {}
        self.gen = {self.root: mapdata["root"]["gen"]}
        self.type = {self.root: stat.S_IFDIR}
        # inodes whose snapshot content is the final tree's already
        self.final_content = set()
        self.inconsistencies = 0
        self.stores = self.stores_copied = self.stores_gone = 0
        self.counts = {}
        self.seq = 0
        # inode -> the records about it (as obj or target), for --history
        self.history = {}
        # Recovery blocks: names given in limbo; the next key for an object
        # whose inode number a listing shows another object has (negative,
        # so never an inode number), and those keys; the objects listings
        # made whose RESYNC is still to come.
        self.limbo_names = 0
        self.next_dead = -1
        self.dead = set()
        self.unrestated = set()
        self.void_listings = 0

        by_path = {b"": self.root}
        for ino, ent in mapdata["inodes"].items():
            ino = int(ino)
            for p in ent["paths"]:
                by_path[s2b(p)] = ino
            self.gen[ino] = ent["gen"]
            self.type[ino] = ent["type"]
        for ino, t in self.type.items():
            if stat.S_ISDIR(t):
                self.children.setdefault(ino, {})
        for path, ino in by_path.items():
            if path == b"":
                continue
            parent = by_path.get(os.path.dirname(path))
            if parent not in self.children:
                raise ReplayError("map: the parent of %s is not in it" %
                                  b2s(path))
            self._add(parent, os.path.basename(path), ino)

        # The final tree's regular files, for STORE.
        self.final = {}
        for rel, st in walk(cache):
            if stat.S_ISREG(st.st_mode) and st.st_ino not in self.final:
                path = os.path.join(cache, rel)
                self.final[st.st_ino] = (path, kmltest.generation(path))

    # -- the model --

    def _add(self, parent, name, ino):
        self.children[parent][name] = ino
        self.links.setdefault(ino, set()).add((parent, name))

    def _remove(self, parent, name):
        ino = self.children[parent].pop(name)
        ls = self.links[ino]
        ls.discard((parent, name))
        if not ls:
            self._forget(ino)
        return ino

    def _forget(self, ino):
        """ino has no name left: it is gone."""
        self.links.pop(ino, None)
        self.final_content.discard(ino)
        if ino in self.children:
            if self.children[ino]:
                self.inconsistent("directory %d removed with %d names the "
                                  "replay knows in it" %
                                  (ino, len(self.children[ino])))
            del self.children[ino]

    def fail(self, msg):
        raise ReplayError("record %d: %s" % (self.seq, msg))

    def inconsistent(self, msg):
        self.inconsistencies += 1
        warn("record %d: inconsistent: %s" % (self.seq, msg))

    def fh(self, rec, key, required=True):
        fh = rec.get(key)
        if fh is None:
            if required:
                self.fail("the %s record has no %s" % (rec["op"], key))
            return None
        return fh["ino"], fh["gen"]

    def check_gen(self, fh, what):
        ino, gen = fh
        known = self.gen.get(ino)
        if known is not None and known != gen:
            self.fail("%s is %d:%d, but the replay knows inode %d with "
                      "generation %d" % (what, ino, gen, ino, known))
        if ino in self.gen and known is None:
            self.gen[ino] = gen

    def path_of(self, ino, what):
        parts = []
        seen = 0
        while ino != self.root and ino != LIMBO:
            ls = self.links.get(ino)
            if not ls:
                self.fail("%s: inode %d has no name the replay knows" %
                          (what, ino))
            parent, name = min(ls)
            parts.append(name)
            ino = parent
            seen += 1
            if seen > 4096:
                self.fail("%s: a loop in the directory tree" % what)
        base = os.path.join(self.snap, LIMBO_NAME) if ino == LIMBO else \
            self.snap
        return os.path.join(base, *reversed(parts)) if parts else base

    def dir_of(self, rec, key="dir"):
        fh = self.fh(rec, key)
        self.check_gen(fh, key)
        ino = fh[0]
        if ino not in self.children:
            self.fail("%s %d:%d is not a directory the replay knows" %
                      (key, fh[0], fh[1]))
        return ino

    def obj_path(self, rec):
        fh = self.fh(rec, "obj")
        self.check_gen(fh, "obj")
        return fh[0], self.path_of(fh[0], "obj")

    def check_nlink(self, rec, ino):
        nlink = rec["attr"].get("nlink")
        if nlink is None or stat.S_ISDIR(self.type.get(ino, 0)):
            return
        have = len(self.links.get(ino, ()))
        if nlink != have:
            self.inconsistent("%s: inode %d has %d links in the record, the "
                              "replay knows %d names" %
                              (rec["op"], ino, nlink, have))

    # -- attributes --

    def set_attrs(self, path, ino, attr, truncate=True):
        is_link = stat.S_ISLNK(self.type.get(ino, 0))
        if "uid" in attr or "gid" in attr:
            os.lchown(path, attr.get("uid", -1), attr.get("gid", -1))
        if truncate and "size" in attr and not is_link:
            if not stat.S_ISREG(self.type.get(ino, 0)):
                self.fail("size given for inode %d, not a regular file" %
                          ino)
            os.truncate(path, attr["size"])
            self.final_content.discard(ino)
        if "mode" in attr and not is_link:
            mode = stat.S_IMODE(attr["mode"])
            st = os.lstat(path)
            if stat.S_IFMT(attr["mode"]) != stat.S_IFMT(st.st_mode):
                self.inconsistent("inode %d: the record's mode %o is of "
                                  "another type than %o" %
                                  (ino, attr["mode"], st.st_mode))
            if stat.S_IMODE(st.st_mode) != mode:
                os.chmod(path, mode)
        if "atime_ns" in attr or "mtime_ns" in attr:
            st = os.lstat(path)
            os.utime(path, ns=(attr.get("atime_ns", st.st_atime_ns),
                               attr.get("mtime_ns", st.st_mtime_ns)),
                     follow_symlinks=False)

    # -- records --

    def note(self, rec):
        """rec is the record being applied: for errors, counts, history."""
        op = rec["op"]
        self.seq = rec["seq"]
        self.counts[op] = self.counts.get(op, 0) + 1
        if op in CREATE_OPS:            # a new object: its own history
            self.history.pop(rec["obj"]["ino"], None)
        for key in ("obj", "target"):
            if key in rec:
                self.history.setdefault(rec[key]["ino"], []).append(rec)

    def run(self, rec, fn, *args):
        """Apply rec with fn(*args); a failing system call stops the
        replay at rec."""
        self.note(rec)
        try:
            fn(*args)
        except OSError as e:
            self.fail("%s: %s" % (rec["op"], e))

    def apply(self, rec):
        handler = getattr(self, "op_" + rec["op"].lower(), None)
        if handler is None:
            self.note(rec)
            self.fail("unknown operation %s" % rec["op"])
        self.run(rec, handler, rec)

    def _create(self, rec):
        op = rec["op"]
        d = self.dir_of(rec)
        ino, gen = self.fh(rec, "obj")
        name = s2b(rec["name"])
        attr = rec["attr"]
        if name in self.children[d]:
            self.fail("%s %s: the name exists already (inode %d)" %
                      (op, rec["name"], self.children[d][name]))
        if self.links.get(ino):
            self.inconsistent("%s of inode %d:%d, which the replay still "
                              "knows as %s" % (op, ino, gen,
                                               self.path_of(ino, "stale")))
            for parent, n in list(self.links[ino]):
                self._remove(parent, n)
        self._forget(ino)
        path = os.path.join(self.path_of(d, "dir"), name)
        mode = attr["mode"]
        made_by = {stat.S_IFREG: "CREATE", stat.S_IFDIR: "MKDIR",
                   stat.S_IFLNK: "SYMLINK"}.get(stat.S_IFMT(mode), "MKNOD")
        if op != made_by:
            self.fail("%s of mode %o" % (op, mode))
        make_object(path, mode, attr.get("rdev", 0),
                    s2b(rec["data"]) if op == "SYMLINK" else None)
        if "TMPFILE" in rec["flags"]:
            # An O_TMPFILE made elsewhere and linked in inherits nothing
            # from this directory (a default ACL): the record carries no
            # extended attributes, so the object has none.
            for xname in os.listxattr(path, follow_symlinks=False):
                os.removexattr(path, xname, follow_symlinks=False)
        self.gen[ino] = gen
        self.type[ino] = stat.S_IFMT(mode)
        self._add(d, name, ino)
        if stat.S_ISDIR(mode):
            self.children[ino] = {}
        self.set_attrs(path, ino, attr, truncate=False)
        self.check_nlink(rec, ino)
        if "STORED" in rec["flags"]:     # a STORE folded in (KML.md)
            self.store_content(rec, ino, path)

    op_create = op_mkdir = op_mknod = op_symlink = _create

    def op_link(self, rec):
        d = self.dir_of(rec)
        ino, src = self.obj_path(rec)
        name = s2b(rec["name"])
        if name in self.children[d]:
            self.fail("LINK %s: the name exists already" % rec["name"])
        os.link(src, os.path.join(self.path_of(d, "dir"), name),
                follow_symlinks=False)
        self._add(d, name, ino)
        self.check_nlink(rec, ino)

    def _remove_op(self, rec):
        op = rec["op"]
        d = self.dir_of(rec)
        fh = self.fh(rec, "obj")
        self.check_gen(fh, "obj")
        name = s2b(rec["name"])
        have = self.children[d].get(name)
        if have != fh[0]:
            self.fail("%s %s: the record's object is %d:%d, the replay has "
                      "%s there" % (op, rec["name"], fh[0], fh[1],
                                    "nothing" if have is None else
                                    "inode %d" % have))
        path = os.path.join(self.path_of(d, "dir"), name)
        if op == "RMDIR":
            os.rmdir(path)
        else:
            os.unlink(path)
        self._remove(d, name)
        self.check_nlink(rec, fh[0])

    op_unlink = op_rmdir = _remove_op

    def op_rename(self, rec):
        d = self.dir_of(rec)
        nd = self.dir_of(rec, "newdir")
        fh = self.fh(rec, "obj")
        self.check_gen(fh, "obj")
        ino = fh[0]
        tfh = self.fh(rec, "target", required=False)
        if tfh:
            self.check_gen(tfh, "target")
        name, name2 = s2b(rec["name"]), s2b(rec["name2"])
        flags = rec["flags"]
        have = self.children[d].get(name)
        if have != ino:
            self.fail("RENAME %s: the record's object is %d, the replay has "
                      "%s there" % (rec["name"], ino, "nothing" if have is
                                    None else "inode %d" % have))
        have2 = self.children[nd].get(name2)
        want2 = tfh[0] if tfh else None
        if have2 != want2:
            self.fail("RENAME to %s: the record's target is %s, the replay "
                      "has %s there" % (rec["name2"], want2, have2))
        src = os.path.join(self.path_of(d, "dir"), name)
        dst = os.path.join(self.path_of(nd, "newdir"), name2)
        if "EXCHANGE" in flags:
            if not tfh:
                self.fail("RENAME EXCHANGE without a target")
            renameat2(src, dst, RENAME_EXCHANGE)
            if have2 != ino:
                self.children[d][name] = have2
                self.children[nd][name2] = ino
                self.links[ino].discard((d, name))
                self.links[ino].add((nd, name2))
                self.links[have2].discard((nd, name2))
                self.links[have2].add((d, name))
            return
        if tfh and tfh[0] == ino:
            # Two names of one inode: rename(2) does nothing.
            os.rename(src, dst)
            return
        os.rename(src, dst)
        if tfh:
            self._remove(nd, name2)
        self._add(nd, name2, ino)       # before the old name goes
        self._remove(d, name)

    def op_setattr(self, rec):
        ino, path = self.obj_path(rec)
        self.set_attrs(path, ino, rec["attr"])

    def _after_xattr(self, rec, ino, path):
        # An ACL can change the mode: the replay's setxattr changed it the
        # same way, or the record says otherwise.
        self.set_attrs(path, ino, {k: v for k, v in rec["attr"].items()
                                   if k == "mode"})

    def op_setxattr(self, rec):
        ino, path = self.obj_path(rec)
        os.setxattr(path, s2b(rec["name"]), s2b(rec["data"]), 0,
                    follow_symlinks=False)
        self._after_xattr(rec, ino, path)

    def op_removexattr(self, rec):
        ino, path = self.obj_path(rec)
        os.removexattr(path, s2b(rec["name"]), follow_symlinks=False)
        self._after_xattr(rec, ino, path)

    def op_store(self, rec):
        ino, path = self.obj_path(rec)
        if not stat.S_ISREG(self.type.get(ino, 0)):
            self.fail("STORE to inode %d, not a regular file" % ino)
        self.store_content(rec, ino, path)

    def store_content(self, rec, ino, path):
        """The content a STORE (or a CREATE with STORED) says changed:
        the final tree's, if the object is still there."""
        gen = rec["obj"]["gen"]
        self.stores += 1
        final = self.final.get(ino)
        if final is None or final[1] != gen:
            self.stores_gone += 1       # removed later: content is moot
        elif ino not in self.final_content:
            copy_content(final[0], path)
            self.final_content.add(ino)
            self.stores_copied += 1
        attr = {k: v for k, v in rec["attr"].items()
                if k in ("mode", "mtime_ns")}
        self.set_attrs(path, ino, attr)

    # -- recovery blocks (KML.md, "Recovery records") --

    def apply_block(self, block):
        """Apply a block of RECOVERED records as state: first every
        listing, in order (a name not listed goes to limbo, a listed handle
        comes from wherever the replay has it, limbo included, or is made),
        then limbo is emptied, then each object's restated attributes,
        xattrs and content. Listings before state, because an object may be
        restated before the listing that names it and because moving
        entries changes a directory's times."""
        listings, states = self.parse_block(block)
        for rdir, dirents in listings:
            self.apply_listing(rdir, dirents)
        self.purge_limbo()
        for kind, rec, setxattrs in states:
            if kind == "store":
                self.run(rec, self.op_store, rec)
                continue
            self.run(rec, self.restate, rec, setxattrs)
            for sx in setxattrs:
                self.note(sx)
        for ino in sorted(self.unrestated):
            self.inconsistent("inode %d:%d was listed, unknown to the "
                              "replay, and no RESYNC of it followed" %
                              (ino, self.gen[ino]))
        for key in sorted(self.dead):
            if self.links.get(key):
                self.inconsistent("an object whose inode number was "
                                  "reused still has names: %s" %
                                  b2s(self.path_of(key, "dead")))
        self.unrestated.clear()
        self.dead.clear()

    def parse_block(self, block):
        """The block's complete listings, (RESYNC_DIR, [DIRENT]), and its
        state records: ("resync", RESYNC, [its SETXATTRs]) and ("store",
        STORE, []). A listing cut short is void."""
        listings, states = [], []
        i = 0
        while i < len(block):
            rec = block[i]
            op = rec["op"]
            i += 1
            if op == "RESYNC_DIR":
                n = rec["entries"]
                dirents = []
                while len(dirents) < n and i < len(block) and \
                        block[i]["op"] == "DIRENT":
                    dirents.append(block[i])
                    i += 1
                for de in dirents:
                    if de["dir"] != rec["obj"]:
                        self.note(de)
                        self.fail("DIRENT of directory %d:%d in the listing "
                                  "of %d:%d" % (de["dir"]["ino"],
                                                de["dir"]["gen"],
                                                rec["obj"]["ino"],
                                                rec["obj"]["gen"]))
                if len(dirents) == n:
                    listings.append((rec, dirents))
                    continue
                # The log was cut in the middle of this listing: the next
                # mount logs the block again, whole.
                self.void_listings += 1
                warn("record %d: listing of %d entries with %d: void" %
                     (rec["seq"], n, len(dirents)))
                for r in [rec] + dirents:
                    self.note(r)
            elif op == "RESYNC":
                setxattrs = []
                while i < len(block) and block[i]["op"] == "SETXATTR" and \
                        block[i]["obj"] == rec["obj"]:
                    setxattrs.append(block[i])
                    i += 1
                states.append(("resync", rec, setxattrs))
            elif op == "STORE":
                states.append(("store", rec, []))
            else:
                self.note(rec)
                self.fail("%s in a recovery block where no RESYNC or "
                          "listing has it" % op)
        return listings, states

    def same_object(self, ino, de):
        """Whether the object the replay knows by key ino is the one a
        DIRENT names; the snapshot knows no generation of symbolic links
        and devices, so their type and target tell."""
        fh = self.fh(de, "obj")
        if ino != fh[0] or self.type.get(ino) != stat.S_IFMT(
                de["attr"]["mode"]):
            return False
        gen = self.gen.get(ino)
        if gen is not None:
            return gen == fh[1]
        if stat.S_ISLNK(de["attr"]["mode"]):
            return os.readlink(self.path_of(ino, "obj")) == s2b(de["data"])
        return True

    def apply_listing(self, rdir, dirents):
        self.note(rdir)
        d = self.dir_of(rdir, "obj")
        want = {}
        for de in dirents:
            name = s2b(de["name"])
            if name in want or d == self.root and name == LIMBO_NAME:
                self.note(de)
                self.fail("DIRENT %s: a name listed twice, or the replay's "
                          "own" % de["name"])
            want[name] = de
        try:
            for name, ino in sorted(self.children[d].items()):
                de = want.get(name)
                if de is None or not self.same_object(ino, de):
                    self.to_limbo(d, name)
        except OSError as e:
            self.fail("RESYNC_DIR: %s" % e)
        for name, de in want.items():
            if name not in self.children[d]:
                self.run(de, self.place, d, name, de)
            else:                       # kept: its generation is known now
                self.note(de)
                self.check_gen(self.fh(de, "obj"), "obj")

    def to_limbo(self, parent, name):
        limbo = os.path.join(self.snap, LIMBO_NAME)
        if LIMBO not in self.children:
            if LIMBO_NAME in self.children[self.root]:
                self.fail("the snapshot has a %s of its own" %
                          b2s(LIMBO_NAME))
            os.mkdir(limbo, 0o700)
            self.children[LIMBO] = {}
        self.limbo_names += 1
        lname = b"%d" % self.limbo_names
        os.rename(os.path.join(self.path_of(parent, "dir"), name),
                  os.path.join(limbo, lname))
        self.move(parent, name, LIMBO, lname)

    def move(self, parent, name, nparent, nname):
        """The model's rename: the new name before the old one goes, so
        that the object is not forgotten in between."""
        ino = self.children[parent][name]
        self._add(nparent, nname, ino)
        del self.children[parent][name]
        self.links[ino].discard((parent, name))

    def place(self, d, name, de):
        """Give the name a DIRENT lists to its object."""
        ino, gen = self.fh(de, "obj")
        path = os.path.join(self.path_of(d, "dir"), name)
        if self.links.get(ino) and not self.same_object(ino, de):
            self.relabel(ino)
        if self.links.get(ino):
            self.gen[ino] = gen
            src = self.path_of(ino, "obj")
            if stat.S_ISDIR(self.type[ino]):
                os.rename(src, path)
                self.move(*min(self.links[ino]), d, name)
            else:
                os.link(src, path, follow_symlinks=False)
                self._add(d, name, ino)
            return
        # A new object whose records were lost: its RESYNC (and STORE)
        # follow in the block.
        mode = de["attr"]["mode"]
        make_object(path, mode, de["attr"]["rdev"],
                    s2b(de["data"]) if stat.S_ISLNK(mode) else None)
        self._forget(ino)
        self.gen[ino] = gen
        self.type[ino] = stat.S_IFMT(mode)
        self._add(d, name, ino)
        if stat.S_ISDIR(mode):
            self.children[ino] = {}
        self.unrestated.add(ino)
        self.history[ino] = [de]

    def relabel(self, ino):
        """A listing shows ino's number taken by another object: the one
        the replay knows is gone. It keeps its names, under a key of its
        own, for the listings that remove them."""
        key = self.next_dead
        self.next_dead -= 1
        self.links[key] = self.links.pop(ino)
        for parent, name in self.links[key]:
            self.children[parent][name] = key
        if ino in self.children:
            self.children[key] = self.children.pop(ino)
            for name, child in self.children[key].items():
                self.links[child].discard((ino, name))
                self.links[child].add((key, name))
        for table in (self.gen, self.type, self.history):
            if ino in table:
                table[key] = table.pop(ino)
        self.final_content.discard(ino)
        self.unrestated.discard(ino)
        self.dead.add(key)

    def purge_limbo(self):
        """What no listing took back is gone."""
        if LIMBO not in self.children:
            return
        for name in list(self.children[LIMBO]):
            self.drop(LIMBO, name)
        del self.children[LIMBO]
        try:
            shutil.rmtree(os.path.join(self.snap, LIMBO_NAME))
        except OSError as e:
            self.fail("emptying limbo: %s" % e)

    def drop(self, parent, name):
        """Remove a name from the model, a directory with its tree."""
        ino = self.children[parent][name]
        for child in list(self.children.get(ino, ())):
            self.drop(ino, child)
        self._remove(parent, name)

    def restate(self, rec, setxattrs):
        """An object's attributes and xattrs become what a RESYNC and its
        SETXATTRs say."""
        ino, path = self.obj_path(rec)
        attr = rec["attr"]
        listed = [s2b(n) for n in rec["xattrs"]]
        values = {}
        for sx in setxattrs:
            name = s2b(sx["name"])
            if name in values:
                self.inconsistent("RESYNC of inode %d: xattr %s restated "
                                  "twice" % (ino, sx["name"]))
            values[name] = s2b(sx["data"])
        for name in listed:
            if name not in values:
                self.inconsistent("RESYNC of inode %d lists xattr %s, no "
                                  "SETXATTR gives its value" %
                                  (ino, b2s(name)))
        for name in sorted(set(values) - set(listed)):
            self.inconsistent("RESYNC of inode %d: xattr %s restated but "
                              "not listed" % (ino, b2s(name)))
        # xattrs first: setting an ACL changes the mode, which the RESYNC
        # then gives.
        for name in os.listxattr(path, follow_symlinks=False):
            name = os.fsencode(name)
            if name not in listed and not name.startswith(PRESTO_XATTRS):
                os.removexattr(path, name, follow_symlinks=False)
        for name in listed:
            if name in values:
                os.setxattr(path, name, values[name], 0,
                            follow_symlinks=False)
        keep = ("uid", "gid", "mode", "atime_ns", "mtime_ns")
        if stat.S_ISREG(self.type.get(ino, 0)):
            keep += ("size",)
        self.set_attrs(path, ino, {k: v for k, v in attr.items()
                                   if k in keep})
        self.check_nlink(rec, ino)
        st = os.lstat(path)
        if (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)) and \
                st.st_rdev != decode_rdev(attr["rdev"]):
            self.inconsistent("RESYNC of inode %d: device %d, the replay "
                              "has %d" % (ino, decode_rdev(attr["rdev"]),
                                          st.st_rdev))
        self.unrestated.discard(ino)


def atexit_history(r, path):
    """Write, whatever happens, the records about each object the replay
    knows, by its paths: what explain prints."""
    import atexit

    def write():
        out = {}
        for ino, ls in r.links.items():
            recs = r.history.get(ino)
            if not recs:
                continue
            for parent, name in ls:
                try:
                    rel = os.path.relpath(r.path_of(parent, "dir"), r.snap)
                except ReplayError:
                    continue
                rel = os.path.normpath(os.path.join(rel, name))
                out[b2s(rel)] = {"ino": ino, "records": recs}
        with open(path, "w") as f:
            json.dump(out, f)
    atexit.register(write)


def explain(args):
    """For each path that treecmp's output names, the records about it."""
    with open(args.history) as f:
        hist = json.load(f)
    shown = 0
    seen = set()
    with open(args.cmp, encoding="latin-1") as f:
        for line in f:
            if ": " not in line or shown >= args.max:
                continue
            path = line.split(": ", 1)[0]
            shown += 1
            print("%s: %s" % (prog(), line.rstrip("\n")))
            ent = hist.get(path)
            if ent is None:
                print("    (no record names an object the replay has "
                      "there)")
                continue
            if ent["ino"] in seen:
                print("    inode %d, as above" % ent["ino"])
                continue
            seen.add(ent["ino"])
            print("    inode %d, %d records:" % (ent["ino"],
                                                 len(ent["records"])))
            for rec in ent["records"]:
                rec = dict(rec)
                for k in ("data",):
                    if k in rec and len(rec[k]) > 40:
                        rec[k] = rec[k][:40] + "..."
                print("    " + json.dumps(rec))
    return 0


def replay(args):
    snap = os.fsencode(os.path.abspath(args.snapdir))
    cache = os.fsencode(os.path.abspath(args.cache))
    mapfile = args.map or default_map(args.snapdir)
    with open(mapfile) as f:
        mapdata = json.load(f)
    after = args.after if args.after is not None else mapdata.get("seq", 0)
    os.umask(0)
    r = Replay(snap, cache, mapdata)

    cmd = [KMLCAT, "--json", "--strict", "--after", str(after), cache]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    n = 0
    expect = after + 1
    first = None
    block = []                          # consecutive RECOVERED records
    try:
        if args.history:
            atexit_history(r, args.history)
        for line in proc.stdout:
            rec = json.loads(line)
            if rec["seq"] != expect:
                raise ReplayError("the log has record %d where %d was "
                                  "expected" % (rec["seq"], expect))
            if first is None:
                first = rec["seq"]
            expect += 1
            n += 1
            if "RECOVERED" in rec["flags"]:
                block.append(rec)
                continue
            if block:
                r.apply_block(block)
                block = []
            r.apply(rec)
        if block:
            r.apply_block(block)
    finally:
        if proc.poll() is None:
            proc.stdout.close()
            proc.kill()
        rc = proc.wait()
    if rc != 0:
        raise ReplayError("kmlcat --strict failed (exit %d): the log is "
                          "damaged or has a gap" % rc)
    c = r.counts
    print("%s: %d records applied (%s), %s; %d stores: %d copied from the "
          "final tree, %d of objects gone since; %d void listings" %
          (prog(), n, "none" if not n else "%d to %d" % (first, expect - 1),
           ", ".join("%s %d" % (k, c[k]) for k in sorted(c)) or "-",
           r.stores, r.stores_copied, r.stores_gone, r.void_listings))
    if r.inconsistencies:
        warn("%d inconsistencies between the log and the objects it "
             "names" % r.inconsistencies)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot", help="copy a cache and map its objects")
    s.add_argument("cache")
    s.add_argument("snapdir")
    s.add_argument("--map")
    p = sub.add_parser("replay", help="apply a cache's log to a snapshot")
    p.add_argument("snapdir")
    p.add_argument("cache")
    p.add_argument("--after", type=int)
    p.add_argument("--map")
    p.add_argument("--history", help="write the records about each final "
                   "object to this file, for explain")
    e = sub.add_parser("explain", help="show the records about the paths "
                       "in treecmp's output")
    e.add_argument("history")
    e.add_argument("cmp")
    e.add_argument("--max", type=int, default=10)
    args = ap.parse_args()
    if args.cmd == "explain":
        return explain(args)
    if not os.path.exists(KMLCAT):
        warn("%s is missing: make tools/bin/kmlcat" % KMLCAT)
        return 2
    try:
        return snapshot(args) if args.cmd == "snapshot" else replay(args)
    except ReplayError as e:
        warn("error: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
