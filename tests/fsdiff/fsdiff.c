// SPDX-License-Identifier: GPL-2.0
/*
 * fsdiff --seed S --ops N --procs P [--only K] [--blocks] [--verbose] A B
 *
 * A randomized differential test: the same long random sequence of file
 * system calls is applied to two directories, A (say a presto mount) and
 * B (a plain directory on the same ext4), and the result of every call is
 * compared: return value and errno, and whatever the call produced (the
 * bytes read, the stat fields that must agree, the sorted directory
 * listing, xattr values, link targets).
 *
 * P processes each work in their own subdirectory pK of A and of B with
 * their own random stream (from S and K only, so pK's sequence does not
 * depend on P), and apply each of their N operations first to A, then to
 * B, then compare. Names come from a small pool and paths are at most a
 * few levels deep, so collisions and the errors they cause (EEXIST,
 * ENOENT, ENOTEMPTY, EISDIR, ENOTDIR, ELOOP, EXDEV is impossible, ...)
 * are frequent. About one operation in five runs with the file system
 * credentials of an unprivileged user (setfsuid/setfsgid, which also
 * drops the file system capabilities), so permission checks, sticky
 * directories and the clearing of suid/sgid bits are exercised too.
 *
 * On the first mismatch the process prints the seed, its number, the
 * operation's index and the operation with its arguments and both
 * results, with the operations that led up to it, and stops with failure.
 * When every process is done, the two trees are compared whole with the
 * tree library (ignoring .presto and lost+found at the roots).
 *
 * Not compared, because they legitimately differ between two ext4 files:
 * inode numbers, device numbers of A and B themselves, access and change
 * times (modification and access times are compared right after they
 * are set explicitly with utimensat), and st_blocks of regular files:
 * ext4 allocates blocks at writeback (delayed allocation), so whether two
 * logically adjacent writes land in one extent or two depends on what
 * else was allocated in between, and a fifth extent costs an extent tree
 * block that shows in st_blocks. Two files written by the same calls can
 * therefore differ by a block: ext4 against ext4 with --blocks, which
 * compares them anyway, fails within 20000 operations on every seed
 * tried (e.g. 1536 against 1528 sectors).
 *
 * Must run as root (chown, trusted.* xattrs, setfsuid).
 */
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define NSLOTS		8		/* open files per process and side */
#define PATH_LEN	1400		/* 4 long components and then some */
#define MAX_IO		(128 * 1024)	/* largest read, write, copy */
#define PAY_CAP		(MAX_IO + 64 * 1024)	/* one result's payload */
#define HISTORY		12		/* operations shown before a failure */
#define LINE		(PATH_LEN * 3 + 512)
#define PAGE		4096
/* ext4's largest file with 4 KiB blocks and extents. */
#define EXT4_MAXBYTES	(((1LL << 32) - 1) * 4096)

/* ---- random numbers: xoshiro256** seeded by splitmix64 ---------------------- */

struct rng {
	uint64_t s[4];
};

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);

	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix(&x);
}

static uint64_t rnd(struct rng *r)
{
	uint64_t *s = r->s, res = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = s[3] << 45 | s[3] >> 19;
	return res;
}

/* Uniform in [0, n), n > 0. */
static uint64_t below(struct rng *r, uint64_t n)
{
	return n ? rnd(r) % n : 0;
}

static bool pct(struct rng *r, unsigned int percent)
{
	return below(r, 100) < percent;
}

static long long range(struct rng *r, long long lo, long long hi)
{
	return lo + (long long)below(r, (uint64_t)(hi - lo + 1));
}

/* ---- operations ----------------------------------------------------------------- */

enum opkind {
	OP_OPEN, OP_CLOSE, OP_WRITE, OP_READ, OP_LSEEK, OP_TRUNCATE,
	OP_FTRUNCATE, OP_FALLOCATE, OP_MMAP, OP_MKDIR, OP_RMDIR, OP_UNLINK,
	OP_RENAME, OP_LINK, OP_LINKFD, OP_SYMLINK, OP_READLINK, OP_CHMOD,
	OP_FCHMOD, OP_CHOWN, OP_FCHOWN, OP_UTIMENS, OP_FUTIMENS, OP_SETXATTR,
	OP_GETXATTR, OP_LISTXATTR, OP_REMOVEXATTR, OP_STAT, OP_FSTAT,
	OP_READDIR, OP_FREADDIR, OP_MKNOD, OP_FSYNC, OP_ACCESS, OP_COPY,
	OP_TMPFILE, OP_GETFLAGS, OP_SETFLAGS, OP_UMASK, OP_NKINDS
};

static const struct {
	const char *name;
	unsigned int weight;
} opinfo[OP_NKINDS] = {
	[OP_OPEN] = { "open", 100 },
	[OP_CLOSE] = { "close", 10 },
	[OP_WRITE] = { "write", 90 },
	[OP_READ] = { "read", 60 },
	[OP_LSEEK] = { "lseek", 20 },
	[OP_TRUNCATE] = { "truncate", 20 },
	[OP_FTRUNCATE] = { "ftruncate", 20 },
	[OP_FALLOCATE] = { "fallocate", 35 },
	[OP_MMAP] = { "mmap", 25 },
	[OP_MKDIR] = { "mkdir", 55 },
	[OP_RMDIR] = { "rmdir", 30 },
	[OP_UNLINK] = { "unlink", 40 },
	[OP_RENAME] = { "rename", 60 },
	[OP_LINK] = { "link", 25 },
	[OP_LINKFD] = { "linkfd", 8 },
	[OP_SYMLINK] = { "symlink", 35 },
	[OP_READLINK] = { "readlink", 15 },
	[OP_CHMOD] = { "chmod", 20 },
	[OP_FCHMOD] = { "fchmod", 8 },
	[OP_CHOWN] = { "chown", 20 },
	[OP_FCHOWN] = { "fchown", 8 },
	[OP_UTIMENS] = { "utimensat", 15 },
	[OP_FUTIMENS] = { "futimens", 5 },
	[OP_SETXATTR] = { "setxattr", 40 },
	[OP_GETXATTR] = { "getxattr", 30 },
	[OP_LISTXATTR] = { "listxattr", 20 },
	[OP_REMOVEXATTR] = { "removexattr", 15 },
	[OP_STAT] = { "stat", 60 },
	[OP_FSTAT] = { "fstat", 20 },
	[OP_READDIR] = { "readdir", 30 },
	[OP_FREADDIR] = { "freaddir", 8 },
	[OP_MKNOD] = { "mknod", 15 },
	[OP_FSYNC] = { "fsync", 6 },
	[OP_ACCESS] = { "access", 10 },
	[OP_COPY] = { "copy_file_range", 10 },
	[OP_TMPFILE] = { "tmpfile", 6 },
	[OP_GETFLAGS] = { "getflags", 6 },
	[OP_SETFLAGS] = { "setflags", 4 },
	[OP_UMASK] = { "umask", 2 },
};

/* One operation with every argument, the same for both sides. */
struct op {
	enum opkind kind;
	int variant;			/* which call of a family */
	char path[PATH_LEN];
	char path2[PATH_LEN];		/* rename/link destination, target */
	int flags;
	unsigned int mode;
	long long off, off2, len;
	int slot, slot2;
	int uid, gid;			/* chown */
	int cred;			/* fsuid/fsgid, 0 for root */
	char xname[64];
	size_t bufsz;			/* getxattr, listxattr, readlink */
	uint64_t dseed;			/* data written */
	uint64_t pick;			/* a position chosen after fstat */
	struct timespec ts[2];
	bool acl;			/* setxattr: value is acl[], not data */
	unsigned char aclv[80];
	size_t acllen;
};

/* What one side's call returned. */
struct result {
	long long ret;
	int err;			/* errno when ret < 0, else 0 */
	unsigned char *pay;		/* PAY_CAP bytes */
	size_t len;
	bool binary;			/* pay is data, not text */
};

struct slot {
	int fd[2];
	char what[PATH_LEN + 64];	/* how it was opened, for the log */
};

struct proc {
	int id;
	uint64_t seed;
	struct rng rng;
	int dir[2];			/* A/pK and B/pK */
	struct slot slots[NSLOTS];
	unsigned char *data;		/* the bytes written by an op */
	unsigned char *io[2];		/* per side, aligned, for reads */
	struct result res[2];
	bool blocks;
	bool verbose;
	char history[HISTORY][LINE];
	long nhist;
};


/* ---- output ------------------------------------------------------------------ */

/* One write() per message, so that processes' lines do not interleave. */
static void say(const char *fmt, ...)
{
	char buf[16384];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	for (char *p = buf; n > 0;) {
		ssize_t w = write(STDOUT_FILENO, p, (size_t)n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		p += w;
		n -= (int)w;
	}
}

static const char *errname(int e)
{
	const char *s = e ? strerrorname_np(e) : "0";

	return s ? s : "E?";
}

/* Append to a fixed buffer, never past its end. */
static void cat(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* ---- generating arguments ----------------------------------------------------------- */

/*
 * Names: directories mostly take a..d, files mostly d..g, so that both
 * kinds are common and still collide (d, and the rest now and then).
 */
static const char *const pool[] = { "a", "b", "c", "d", "e", "f", "g" };
#define NPOOL (sizeof(pool) / sizeof(pool[0]))

enum leaf { LEAF_ANY, LEAF_DIR, LEAF_FILE };

static void long_name(char *out, size_t len, size_t n, char c)
{
	if (n >= len)
		n = len - 1;
	memset(out, c, n);
	out[n] = 0;
}

static void add_component(struct rng *r, char *out, size_t len,
			  enum leaf kind)
{
	char name[260];
	size_t i;

	if (kind != LEAF_ANY && pct(r, 75))
		i = (kind == LEAF_DIR ? 0 : 3) + below(r, 4);
	else
		i = below(r, NPOOL);
	if (pct(r, 1))
		long_name(name, sizeof(name), 255, 'L');
	else
		snprintf(name, sizeof(name), "%s", pool[i]);
	cat(out, len, "%s%s", out[0] ? "/" : "", name);
}

/* A path below the process's directory, never leaving it. */
static void gen_path(struct rng *r, char *out, size_t len, enum leaf kind)
{
	unsigned int u = (unsigned int)below(r, 1000), depth;

	out[0] = 0;
	if (u < 25) {
		static const char *const special[] = {
			".", "", "a/", "a/.", "a/../b", "b/c/", "a/b/..",
			"./c", "e//d", "a/./b",
		};

		snprintf(out, len, "%s", special[below(r, 10)]);
		return;
	}
	if (u < 30) {			/* one name too long */
		long_name(out, len, 256, 'N');
		return;
	}
	u = (unsigned int)below(r, 100);
	depth = u < 45 ? 1 : u < 75 ? 2 : u < 92 ? 3 : 4;
	for (unsigned int i = 0; i < depth; i++)
		add_component(r, out, len, i + 1 < depth ? LEAF_DIR : kind);
}

/* A symlink target: other names, dangling ones, loops; never upwards. */
static void gen_target(struct rng *r, const char *linkpath, char *out,
		       size_t len)
{
	unsigned int u = (unsigned int)below(r, 100);
	const char *last = strrchr(linkpath, '/');

	out[0] = 0;
	if (u < 45) {
		unsigned int depth = (unsigned int)range(r, 1, 3);

		for (unsigned int i = 0; i < depth; i++)
			add_component(r, out, len, LEAF_ANY);
	} else if (u < 60) {		/* itself: a loop */
		snprintf(out, len, "%s", last ? last + 1 : linkpath);
	} else if (u < 70) {
		snprintf(out, len, "%s", pct(r, 50) ? "nonexistent" :
						       "zz/dangling");
	} else if (u < 75) {
		snprintf(out, len, "/nonexistent-fsdiff/x");
	} else if (u < 78) {
		out[0] = 0;		/* ENOENT */
	} else if (u < 88) {
		snprintf(out, len, "%s", pct(r, 50) ? "." : "./a");
	} else if (u < 95) {
		snprintf(out, len, "a/b/c/d/e");
	} else {
		long_name(out, len, 1000 + below(r, 3200), 't');
	}
}

static long long gen_offset(struct rng *r)
{
	unsigned int u = (unsigned int)below(r, 100);

	if (u < 55)
		return range(r, 0, 65535);
	if (u < 80)
		return range(r, 0, (1 << 20) - 1);
	if (u < 90)
		return range(r, 1LL << 30, 1LL << 40);
	if (u < 96)
		return EXT4_MAXBYTES - range(r, -4096, 70000);
	if (u < 98)
		return -range(r, 1, 4096);
	return 0;
}

static long long gen_size(struct rng *r)
{
	unsigned int u = (unsigned int)below(r, 100);

	if (u < 5)
		return 0;
	if (u < 50)
		return range(r, 1, 512);
	if (u < 85)
		return range(r, 513, 8192);
	if (u < 98)
		return range(r, 8193, 65536);
	return range(r, 65537, MAX_IO);
}

/* Block-aligned offsets and sizes now and then, for O_DIRECT and ranges. */
static void maybe_align(struct rng *r, long long *off, long long *len)
{
	if (pct(r, 20)) {
		*off &= ~(long long)(PAGE - 1);
		*len &= ~(long long)(PAGE - 1);
		if (*len > MAX_IO)
			*len = MAX_IO;
	}
}

static unsigned int gen_mode(struct rng *r)
{
	static const unsigned int modes[] = {
		0644, 0600, 0755, 0444, 0777, 04755, 02755, 06777, 01777,
		0000, 0700, 02644, 0640, 0711,
	};

	return modes[below(r, sizeof(modes) / sizeof(modes[0]))];
}

static int gen_id(struct rng *r)
{
	static const int ids[] = { -1, 0, 1000, 1001 };

	return ids[below(r, 4)];
}

static const char *const xnames[] = {
	"user.a", "user.b", "user.c", "trusted.t", "security.s",
	"system.posix_acl_access", "system.posix_acl_default", "user.",
	"bogus.x", "user.a-rather-longer-name-to-take-more-room",
};
#define NXNAMES (sizeof(xnames) / sizeof(xnames[0]))

static void gen_xname(struct rng *r, char *out, size_t len)
{
	unsigned int u = (unsigned int)below(r, 100), i;

	if (u < 55)
		i = (unsigned int)below(r, 3);
	else if (u < 65)
		i = 3;
	else if (u < 70)
		i = 4;
	else if (u < 82)
		i = 5;
	else if (u < 90)
		i = 6;
	else
		i = 7 + (unsigned int)below(r, 3);
	snprintf(out, len, "%s", xnames[i]);
}

static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed | 1;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
	for (; i < len; i++)
		buf[i] = (unsigned char)(x >> (8 * (i % 8)));
}

/* A POSIX ACL xattr value: version 2, then (tag, perm, id) entries. */
static size_t gen_acl(struct rng *r, unsigned char *buf, size_t cap)
{
	struct ent {
		uint16_t tag, perm;
		uint32_t id;
	} e[8];
	size_t n = 0, len;
	uint32_t version = 2;
	bool ext = pct(r, 60);

	e[n++] = (struct ent){ 0x01, (uint16_t)below(r, 8), UINT32_MAX };
	if (ext)
		e[n++] = (struct ent){ 0x02, (uint16_t)below(r, 8),
				       pct(r, 50) ? 1000 : 1001 };
	e[n++] = (struct ent){ 0x04, (uint16_t)below(r, 8), UINT32_MAX };
	if (ext && pct(r, 50))
		e[n++] = (struct ent){ 0x08, (uint16_t)below(r, 8), 1000 };
	if (ext)
		e[n++] = (struct ent){ 0x10, (uint16_t)below(r, 8),
				       UINT32_MAX };
	e[n++] = (struct ent){ 0x20, (uint16_t)below(r, 8), UINT32_MAX };
	if (pct(r, 5))			/* invalid: unsorted or truncated */
		n--;
	len = 4 + n * 8;
	if (len > cap)
		return 0;
	memcpy(buf, &version, 4);
	for (size_t i = 0; i < n; i++) {
		memcpy(buf + 4 + i * 8, &e[i].tag, 2);
		memcpy(buf + 6 + i * 8, &e[i].perm, 2);
		memcpy(buf + 8 + i * 8, &e[i].id, 4);
	}
	return len;
}

static enum opkind pick_kind(struct rng *r)
{
	static unsigned int total;
	unsigned int x;

	if (!total)
		for (int k = 0; k < OP_NKINDS; k++)
			total += opinfo[k].weight;
	x = (unsigned int)below(r, total);
	for (int k = 0; k < OP_NKINDS; k++) {
		if (x < opinfo[k].weight)
			return (enum opkind)k;
		x -= opinfo[k].weight;
	}
	return OP_STAT;
}

static int gen_open_flags(struct rng *r)
{
	static const int acc[] = { O_RDONLY, O_WRONLY, O_RDWR, O_RDWR, O_RDWR };
	int f = acc[below(r, 5)];

	if (pct(r, 60))
		f |= O_CREAT;
	if ((f & O_CREAT) && pct(r, 25))
		f |= O_EXCL;
	if (pct(r, 20))
		f |= O_TRUNC;
	if (pct(r, 15))
		f |= O_APPEND;
	if (pct(r, 8))
		f |= O_DIRECTORY;
	if (pct(r, 10))
		f |= O_NOFOLLOW;
	if (pct(r, 10))
		f |= O_NONBLOCK;
	if (pct(r, 4))
		f |= O_DIRECT;
	if (pct(r, 3))
		f |= O_NOATIME;
	if (pct(r, 1))
		f |= O_DSYNC;
	if (pct(r, 3))
		f = O_PATH | (f & (O_DIRECTORY | O_NOFOLLOW));
	return f;
}

/* Mostly an open slot (the same on both sides, or we had stopped). */
static int pick_slot(const struct proc *p, struct rng *r)
{
	int open[NSLOTS], n = 0;

	for (int s = 0; s < NSLOTS; s++)
		if (p->slots[s].fd[0] >= 0)
			open[n++] = s;
	if (n && pct(r, 90))
		return open[below(r, (uint64_t)n)];
	return (int)below(r, NSLOTS);
}

static void gen_op(struct proc *p, struct op *op)
{
	struct rng *r = &p->rng;
	unsigned int u;

	memset(op, 0, sizeof(*op));
	op->kind = pick_kind(r);
	u = (unsigned int)below(r, 100);
	op->cred = u < 80 ? 0 : u < 90 ? 1000 : 1001;
	op->slot = pick_slot(p, r);
	op->slot2 = pick_slot(p, r);
	op->dseed = rnd(r);
	op->pick = rnd(r);

	switch (op->kind) {
	case OP_OPEN:
		/* Mostly into a free slot, so that the table fills up. */
		for (int s = 0; s < NSLOTS && pct(r, 80); s++) {
			if (p->slots[s].fd[0] < 0) {
				op->slot = s;
				break;
			}
		}
		gen_path(r, op->path, sizeof(op->path), LEAF_FILE);
		op->flags = gen_open_flags(r);
		op->mode = gen_mode(r);
		break;
	case OP_TMPFILE:
		gen_path(r, op->path, sizeof(op->path), LEAF_DIR);
		op->flags = O_TMPFILE | (pct(r, 80) ? O_RDWR : O_WRONLY) |
			    (pct(r, 20) ? O_EXCL : 0);
		op->mode = gen_mode(r);
		break;
	case OP_WRITE:
	case OP_READ:
		op->variant = (int)below(r, 3);	/* plain, positioned, vector */
		op->off = gen_offset(r);
		op->len = gen_size(r);
		maybe_align(r, &op->off, &op->len);
		break;
	case OP_LSEEK: {
		static const int wh[] = { SEEK_SET, SEEK_CUR, SEEK_END,
					  SEEK_DATA, SEEK_HOLE };

		op->flags = wh[below(r, 5)];
		op->off = pct(r, 30) ? range(r, -8192, 8192) : gen_offset(r);
		break;
	}
	case OP_TRUNCATE:
	case OP_FTRUNCATE:
		gen_path(r, op->path, sizeof(op->path), LEAF_FILE);
		u = (unsigned int)below(r, 100);
		op->len = u < 20 ? 0 : u < 50 ? range(r, 0, 65535) :
			  u < 80 ? range(r, 0, 1 << 20) :
			  u < 85 ? 1LL << 40 :
			  u < 90 ? EXT4_MAXBYTES - range(r, -2, 2) :
			  u < 95 ? range(r, 1, 100) * PAGE : -1;
		break;
	case OP_FALLOCATE: {
		static const int modes[] = {
			0, 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_KEEP_SIZE,
			FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE,
			FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
			FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE,
		};

		op->flags = modes[below(r, sizeof(modes) / sizeof(modes[0]))];
		op->off = pct(r, 90) ? range(r, 0, 1 << 20) : gen_offset(r);
		op->len = pct(r, 3) ? 0 : range(r, 1, 256 * 1024);
		if (pct(r, 50)) {
			op->off &= ~(long long)(PAGE - 1);
			op->len = (op->len + PAGE - 1) & ~(long long)(PAGE - 1);
		}
		break;
	}
	case OP_MMAP:
		op->flags = pct(r, 50) ? PROT_READ : PROT_READ | PROT_WRITE;
		op->variant = pct(r, 80) ? MS_ASYNC : MS_SYNC;
		op->len = range(r, 1, 65536);
		break;
	case OP_MKDIR:
		gen_path(r, op->path, sizeof(op->path), LEAF_DIR);
		op->mode = pct(r, 70) ? 0755 : gen_mode(r);
		break;
	case OP_MKNOD:
		gen_path(r, op->path, sizeof(op->path), LEAF_FILE);
		u = (unsigned int)below(r, 100);
		op->mode = (u < 75 ? S_IFIFO : u < 85 ? S_IFSOCK :
			    u < 95 ? S_IFREG : S_IFCHR) | (gen_mode(r) & 0777);
		break;
	case OP_RMDIR:
	case OP_UNLINK:
	case OP_READLINK:
		gen_path(r, op->path, sizeof(op->path),
			 op->kind == OP_RMDIR ? LEAF_DIR : LEAF_FILE);
		op->bufsz = pct(r, 20) ? (size_t)range(r, 1, 8) : 8192;
		break;
	case OP_RENAME: {
		static const int fl[] = { 0, 0, 0, RENAME_NOREPLACE,
					  RENAME_EXCHANGE };

		gen_path(r, op->path, sizeof(op->path), LEAF_ANY);
		gen_path(r, op->path2, sizeof(op->path2), LEAF_ANY);
		op->flags = fl[below(r, 5)];
		if (pct(r, 1))
			op->flags = RENAME_NOREPLACE | RENAME_EXCHANGE;
		break;
	}
	case OP_LINK:
		gen_path(r, op->path, sizeof(op->path), LEAF_ANY);
		gen_path(r, op->path2, sizeof(op->path2), LEAF_FILE);
		op->flags = pct(r, 20) ? AT_SYMLINK_FOLLOW : 0;
		break;
	case OP_LINKFD:
		gen_path(r, op->path2, sizeof(op->path2), LEAF_FILE);
		op->variant = (int)below(r, 2);	/* AT_EMPTY_PATH, /proc */
		break;
	case OP_SYMLINK:
		gen_path(r, op->path, sizeof(op->path), LEAF_FILE);
		gen_target(r, op->path, op->path2, sizeof(op->path2));
		break;
	case OP_CHMOD:
	case OP_FCHMOD:
		gen_path(r, op->path, sizeof(op->path), LEAF_ANY);
		op->mode = gen_mode(r);
		op->flags = pct(r, 10) ? AT_SYMLINK_NOFOLLOW : 0;
		break;
	case OP_CHOWN:
	case OP_FCHOWN:
		gen_path(r, op->path, sizeof(op->path), LEAF_ANY);
		op->uid = gen_id(r);
		op->gid = gen_id(r);
		op->flags = pct(r, 40) ? AT_SYMLINK_NOFOLLOW : 0;
		break;
	case OP_UTIMENS:
	case OP_FUTIMENS:
		gen_path(r, op->path, sizeof(op->path), LEAF_ANY);
		op->flags = pct(r, 40) ? AT_SYMLINK_NOFOLLOW : 0;
		for (int i = 0; i < 2; i++) {
			u = (unsigned int)below(r, 100);
			op->ts[i].tv_sec = u < 70 ? range(r, 0, 2000000000) :
					   u < 80 ? range(r, -2000000000, -1) :
					   (time_t)range(r, 1LL << 33,
							 1LL << 34);
			op->ts[i].tv_nsec = (long)below(r, 1000000000);
			if (u >= 90 && u < 95)
				op->ts[i].tv_nsec = UTIME_OMIT;
			else if (u >= 95 && u < 98)
				op->ts[i].tv_nsec = UTIME_NOW;
			else if (u >= 98)
				op->ts[i].tv_nsec = 1000000000;	/* EINVAL */
		}
		break;
	case OP_SETXATTR:
	case OP_GETXATTR:
	case OP_LISTXATTR:
	case OP_REMOVEXATTR:
		gen_path(r, op->path, sizeof(op->path), LEAF_ANY);
		op->variant = (int)below(r, 3);	/* follow, nofollow, fd */
		gen_xname(r, op->xname, sizeof(op->xname));
		op->flags = (int)below(r, 4) == 0 ? XATTR_CREATE :
			    (int)below(r, 4) == 0 ? XATTR_REPLACE : 0;
		u = (unsigned int)below(r, 100);
		op->len = u < 10 ? 0 : u < 70 ? range(r, 1, 64) :
			  u < 95 ? range(r, 65, 1024) : range(r, 1025, 4500);
		u = (unsigned int)below(r, 100);
		op->bufsz = u < 15 ? 0 : u < 25 ? (size_t)range(r, 1, 16) :
			    65536;
		if (!strncmp(op->xname, "system.posix_acl", 16) && pct(r, 85)) {
			op->acl = true;
			op->acllen = gen_acl(r, op->aclv, sizeof(op->aclv));
		}
		break;
	case OP_STAT:
		gen_path(r, op->path, sizeof(op->path), LEAF_ANY);
		op->flags = pct(r, 50) ? AT_SYMLINK_NOFOLLOW : 0;
		break;
	case OP_READDIR:
		gen_path(r, op->path, sizeof(op->path), LEAF_DIR);
		break;
	case OP_FSYNC:
		op->variant = (int)below(r, 10);	/* 0: fdatasync */
		break;
	case OP_ACCESS: {
		static const int modes[] = { F_OK, R_OK, W_OK, X_OK,
					     R_OK | W_OK };

		gen_path(r, op->path, sizeof(op->path), LEAF_ANY);
		op->mode = (unsigned int)modes[below(r, 5)];
		op->flags = pct(r, 30) ? AT_EACCESS : 0;
		if (pct(r, 20))
			op->flags |= AT_SYMLINK_NOFOLLOW;
		break;
	}
	case OP_COPY:
		op->variant = (int)below(r, 2);	/* offsets, file positions */
		op->off = range(r, 0, 1 << 20);
		op->off2 = range(r, 0, 1 << 20);
		op->len = gen_size(r);
		break;
	case OP_SETFLAGS: {
		static const int fl[] = { 0, 0, 0, FS_APPEND_FL, FS_APPEND_FL,
					  FS_IMMUTABLE_FL, FS_IMMUTABLE_FL,
					  FS_NOATIME_FL, FS_NODUMP_FL,
					  FS_APPEND_FL | FS_NODUMP_FL };

		op->flags = fl[below(r, sizeof(fl) / sizeof(fl[0]))];
		/*
		 * Mostly the flags are probed and then taken off again:
		 * an append-only or immutable directory left behind would
		 * freeze a part of the tree for the rest of the run.
		 */
		op->variant = pct(r, 20);	/* 1: keep them */
		break;
	}	case OP_UMASK: {
		static const unsigned int um[] = { 022, 022, 0, 077, 027 };

		op->mode = um[below(r, 5)];
		break;
	}
	default:
		break;
	}
}

/* The operation as one line, for the log. */
static void op_str(const struct proc *p, const struct op *op, char *buf,
		   size_t len)
{
	const char *slotw = p->slots[op->slot].fd[0] >= 0 ?
			    p->slots[op->slot].what : "closed";

	buf[0] = 0;
	cat(buf, len, "[fsuid %d] %s", op->cred, opinfo[op->kind].name);
	switch (op->kind) {
	case OP_OPEN:
	case OP_TMPFILE:
		cat(buf, len, "(\"%s\", flags 0%o, mode 0%o) -> slot %d",
		    op->path, op->flags, op->mode, op->slot);
		break;
	case OP_CLOSE:
	case OP_FSYNC:
	case OP_FSTAT:
	case OP_FREADDIR:
	case OP_GETFLAGS:
		cat(buf, len, "(slot %d: %s) variant %d", op->slot, slotw,
		    op->variant);
		break;
	case OP_WRITE:
	case OP_READ:
		cat(buf, len, "(slot %d: %s, %s %lld bytes at %lld)", op->slot,
		    slotw, op->variant == 0 ? "sequential" :
		    op->variant == 1 ? "positioned" : "vector",
		    op->len, op->off);
		break;
	case OP_LSEEK:
		cat(buf, len, "(slot %d: %s, %lld, whence %d)", op->slot, slotw,
		    op->off, op->flags);
		break;
	case OP_TRUNCATE:
		cat(buf, len, "(\"%s\", %lld)", op->path, op->len);
		break;
	case OP_FTRUNCATE:
		cat(buf, len, "(slot %d: %s, %lld)", op->slot, slotw, op->len);
		break;
	case OP_FALLOCATE:
		cat(buf, len, "(slot %d: %s, mode 0x%x, %lld, %lld)", op->slot,
		    slotw, op->flags, op->off, op->len);
		break;
	case OP_MMAP:
		cat(buf, len, "(slot %d: %s, prot %d, len %lld, pick %llu, "
		    "msync %d)", op->slot, slotw, op->flags, op->len,
		    (unsigned long long)op->pick, op->variant);
		break;
	case OP_MKDIR:
	case OP_MKNOD:
		cat(buf, len, "(\"%s\", 0%o)", op->path, op->mode);
		break;
	case OP_RMDIR:
	case OP_UNLINK:
		cat(buf, len, "(\"%s\")", op->path);
		break;
	case OP_READLINK:
		cat(buf, len, "(\"%s\", bufsz %zu)", op->path, op->bufsz);
		break;
	case OP_RENAME:
	case OP_LINK:
		cat(buf, len, "(\"%s\", \"%s\", flags 0x%x)", op->path,
		    op->path2, op->flags);
		break;
	case OP_LINKFD:
		cat(buf, len, "(slot %d: %s, \"%s\", %s)", op->slot, slotw,
		    op->path2, op->variant ? "/proc/self/fd" : "AT_EMPTY_PATH");
		break;
	case OP_SYMLINK:
		cat(buf, len, "(target \"%.80s%s\", \"%s\")", op->path2,
		    strlen(op->path2) > 80 ? "..." : "", op->path);
		break;
	case OP_CHMOD:
		cat(buf, len, "(\"%s\", 0%o, flags 0x%x)", op->path, op->mode,
		    op->flags);
		break;
	case OP_FCHMOD:
		cat(buf, len, "(slot %d: %s, 0%o)", op->slot, slotw, op->mode);
		break;
	case OP_CHOWN:
		cat(buf, len, "(\"%s\", %d, %d, flags 0x%x)", op->path,
		    op->uid, op->gid, op->flags);
		break;
	case OP_FCHOWN:
		cat(buf, len, "(slot %d: %s, %d, %d)", op->slot, slotw,
		    op->uid, op->gid);
		break;
	case OP_UTIMENS:
	case OP_FUTIMENS:
		if (op->kind == OP_UTIMENS)
			cat(buf, len, "(\"%s\", flags 0x%x", op->path,
			    op->flags);
		else
			cat(buf, len, "(slot %d: %s", op->slot, slotw);
		cat(buf, len, ", atime %lld.%09ld, mtime %lld.%09ld)",
		    (long long)op->ts[0].tv_sec, op->ts[0].tv_nsec,
		    (long long)op->ts[1].tv_sec, op->ts[1].tv_nsec);
		break;
	case OP_SETXATTR:
	case OP_GETXATTR:
	case OP_LISTXATTR:
	case OP_REMOVEXATTR:
		if (op->variant == 2)
			cat(buf, len, "(slot %d: %s", op->slot, slotw);
		else
			cat(buf, len, "(%s\"%s\"", op->variant ? "nofollow " :
			    "", op->path);
		if (op->kind != OP_LISTXATTR)
			cat(buf, len, ", %s", op->xname);
		if (op->kind == OP_SETXATTR)
			cat(buf, len, ", %lld bytes, flags %d", op->len,
			    op->flags);
		if (op->kind == OP_GETXATTR || op->kind == OP_LISTXATTR)
			cat(buf, len, ", bufsz %zu", op->bufsz);
		cat(buf, len, ")");
		break;
	case OP_STAT:
		cat(buf, len, "(\"%s\", flags 0x%x)", op->path, op->flags);
		break;
	case OP_READDIR:
		cat(buf, len, "(\"%s\")", op->path);
		break;
	case OP_ACCESS:
		cat(buf, len, "(\"%s\", mode %o, flags 0x%x)", op->path,
		    op->mode, op->flags);
		break;
	case OP_COPY:
		cat(buf, len, "(slot %d: %s -> slot %d: %s, %lld bytes, %s "
		    "%lld -> %lld)", op->slot, slotw, op->slot2,
		    p->slots[op->slot2].fd[0] >= 0 ?
		    p->slots[op->slot2].what : "closed", op->len,
		    op->variant ? "positions" : "offsets", op->off, op->off2);
		break;
	case OP_SETFLAGS:
		cat(buf, len, "(slot %d: %s, 0x%x)", op->slot, slotw,
		    op->flags);
		break;
	case OP_UMASK:
		cat(buf, len, "(0%o)", op->mode);
		break;
	default:
		break;
	}
}

/* ---- running an operation on one side --------------------------------------------- */

static void pay_text(struct result *r, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (r->len + 1 >= PAY_CAP)
		return;
	va_start(ap, fmt);
	n = vsnprintf((char *)r->pay + r->len, PAY_CAP - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += (size_t)n < PAY_CAP - r->len ? (size_t)n :
			  PAY_CAP - r->len - 1;
}

static void pay_bytes(struct result *r, const void *p, size_t n)
{
	if (n > PAY_CAP - r->len)
		n = PAY_CAP - r->len;
	memcpy(r->pay + r->len, p, n);
	r->len += n;
	r->binary = true;
}

#define SYS(r, expr) do {					\
	errno = 0;						\
	(r)->ret = (long long)(expr);				\
	(r)->err = (r)->ret < 0 ? errno : 0;			\
} while (0)

/* The fields of a statx that must agree between A and B. */
static void pay_statx(const struct proc *p, struct result *r,
		      const struct statx *st)
{
	mode_t m = st->stx_mode;

	pay_text(r, "%s mode=%04o nlink=%u uid=%u gid=%u size=%llu",
		 tree_type_name(m), m & 07777, st->stx_nlink, st->stx_uid, st->stx_gid,
		 (unsigned long long)st->stx_size);
	if (!S_ISREG(m) || p->blocks)
		pay_text(r, " blocks=%llu",
			 (unsigned long long)st->stx_blocks);
	if (S_ISCHR(m) || S_ISBLK(m))
		pay_text(r, " rdev=%u:%u", st->stx_rdev_major,
			 st->stx_rdev_minor);
	/* Which attributes the file system supports, and which are set. */
	pay_text(r, " attrs=0x%llx/0x%llx",
		 (unsigned long long)st->stx_attributes,
		 (unsigned long long)st->stx_attributes_mask);
}

static int slot_fd(const struct proc *p, int slot, int side)
{
	return p->slots[slot].fd[side];
}

static void close_slot(struct proc *p, int slot, int side)
{
	if (p->slots[slot].fd[side] >= 0)
		close(p->slots[slot].fd[side]);
	p->slots[slot].fd[side] = -1;
}

struct dent {
	char name[256];
	unsigned char type;
};

static int cmp_dent(const void *a, const void *b)
{
	return strcmp(((const struct dent *)a)->name,
		      ((const struct dent *)b)->name);
}

/* Read a whole directory from fd into r's payload, sorted. */
static void readdir_fd(struct proc *p, int side, int fd, struct result *r)
{
	struct dent *v = NULL;
	size_t n = 0, cap = 0;
	char *buf = (char *)p->io[side];
	ssize_t got;

	r->ret = 0;
	r->err = 0;
	while ((got = getdents64(fd, buf, MAX_IO)) > 0) {
		for (ssize_t off = 0; off < got;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);

			if (de->d_reclen == 0)
				break;
			off += de->d_reclen;
			if (n == cap) {
				struct dent *nv;

				cap = cap ? cap * 2 : 32;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					say("fsdiff: out of memory\n");
					exit(2);
				}
				v = nv;
			}
			snprintf(v[n].name, sizeof(v[n].name), "%s",
				 de->d_name);
			v[n].type = de->d_type;
			n++;
		}
	}
	if (got < 0) {
		r->ret = -1;
		r->err = errno;
	} else {
		r->ret = (long long)n;
		if (n > 1)
			qsort(v, n, sizeof(*v), cmp_dent);
		for (size_t i = 0; i < n; i++)
			pay_text(r, "%s:%u ", v[i].name, v[i].type);
	}
	free(v);
}

static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_armed;

static void on_sigbus(int sig)
{
	if (!bus_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	siglongjmp(bus_jmp, 1);
}

/* Paths are relative to the side's directory, which is the cwd. */
static void run(struct proc *p, const struct op *op, int side,
		struct result *r)
{
	int fd = slot_fd(p, op->slot, side);
	unsigned char *io = p->io[side];
	struct statx stx;

	r->ret = 0;
	r->err = 0;
	r->len = 0;
	r->binary = false;

	switch (op->kind) {
	case OP_OPEN:
	case OP_TMPFILE: {
		int flags = op->flags;
		struct stat sa, sb;

		/*
		 * A fifo opened without O_NONBLOCK waits for the other end:
		 * if the path is a fifo on either side, open it nonblocking
		 * on both.
		 */
		if (!(flags & O_PATH) &&
		    ((!fstatat(p->dir[0], op->path, &sa, 0) &&
		      S_ISFIFO(sa.st_mode)) ||
		     (!fstatat(p->dir[1], op->path, &sb, 0) &&
		      S_ISFIFO(sb.st_mode))))
			flags |= O_NONBLOCK;
		SYS(r, open(op->path, flags | O_CLOEXEC, op->mode));
		if (r->ret >= 0) {
			/* A new file replaces the slot's old one. */
			close_slot(p, op->slot, side);
			p->slots[op->slot].fd[side] = (int)r->ret;
			r->ret = 0;	/* descriptor numbers may differ */
			snprintf(p->slots[op->slot].what,
				 sizeof(p->slots[op->slot].what),
				 "%s \"%.200s\" 0%o",
				 op->kind == OP_TMPFILE ? "tmpfile in" :
				 "open", op->path, flags);
		}
		break;
	}
	case OP_CLOSE:
		SYS(r, close(fd));
		p->slots[op->slot].fd[side] = -1;
		break;
	case OP_WRITE: {
		size_t len = (size_t)op->len;

		io = p->data;	/* aligned, for O_DIRECT */
		if (op->variant == 0) {
			SYS(r, write(fd, io, len));
		} else if (op->variant == 1) {
			SYS(r, pwrite(fd, io, len, op->off));
		} else {
			struct iovec iov[2] = {
				{ io, len / 2 }, { io + len / 2, len - len / 2 },
			};

			SYS(r, pwritev(fd, iov, 2, op->off));
		}
		break;
	}
	case OP_READ: {
		size_t len = (size_t)op->len;

		if (op->variant == 0) {
			SYS(r, read(fd, io, len));
		} else if (op->variant == 1) {
			SYS(r, pread(fd, io, len, op->off));
		} else {
			struct iovec iov[2] = {
				{ io, len / 3 }, { io + len / 3, len - len / 3 },
			};

			SYS(r, preadv(fd, iov, 2, op->off));
		}
		if (r->ret > 0)
			pay_bytes(r, io, (size_t)r->ret);
		break;
	}
	case OP_LSEEK:
		SYS(r, lseek(fd, op->off, op->flags));
		break;
	case OP_TRUNCATE:
		SYS(r, truncate(op->path, op->len));
		break;
	case OP_FTRUNCATE:
		SYS(r, ftruncate(fd, op->len));
		break;
	case OP_FALLOCATE:
		SYS(r, fallocate(fd, op->flags, op->off, op->len));
		break;
	case OP_MMAP: {
		struct stat st;
		off_t off, pages;
		size_t len, maplen;
		void *volatile m;

		SYS(r, fstat(fd, &st));
		if (r->ret < 0)
			break;
		pay_text(r, "size=%lld ", (long long)st.st_size);
		if (!S_ISREG(st.st_mode) || st.st_size == 0)
			break;
		pages = (st.st_size + PAGE - 1) / PAGE;
		off = (off_t)(op->pick % (uint64_t)pages) * PAGE;
		len = (size_t)op->len;
		if ((off_t)len > st.st_size - off)
			len = (size_t)(st.st_size - off);
		maplen = (len + PAGE - 1) & ~(size_t)(PAGE - 1);
		m = mmap(NULL, maplen, op->flags, MAP_SHARED, fd, off);
		if (m == MAP_FAILED) {
			r->ret = -1;
			r->err = errno;
			break;
		}
		pay_text(r, "at %lld: ", (long long)off);
		/* A fault the file system refuses is a result too. */
		if (sigsetjmp(bus_jmp, 1)) {
			bus_armed = 0;
			pay_text(r, " SIGBUS");
			munmap(m, maplen);
			break;
		}
		bus_armed = 1;
		pay_bytes(r, m, len);
		if (op->flags & PROT_WRITE) {
			memcpy(m, p->data, len);
			SYS(r, msync(m, maplen, op->variant));
		}
		bus_armed = 0;
		munmap(m, maplen);
		break;
	}
	case OP_MKDIR:
		SYS(r, mkdir(op->path, op->mode));
		break;
	case OP_MKNOD: {
		dev_t dev = S_ISCHR(op->mode) ? makedev(1, 3) : 0;

		SYS(r, mknod(op->path, op->mode, dev));
		break;
	}
	case OP_RMDIR:
		SYS(r, rmdir(op->path));
		break;
	case OP_UNLINK:
		SYS(r, unlink(op->path));
		break;
	case OP_RENAME:
		SYS(r, renameat2(AT_FDCWD, op->path, AT_FDCWD, op->path2,
				 (unsigned int)op->flags));
		break;
	case OP_LINK:
		SYS(r, linkat(AT_FDCWD, op->path, AT_FDCWD, op->path2,
			      op->flags));
		break;
	case OP_LINKFD:
		if (op->variant == 0) {
			SYS(r, linkat(fd, "", AT_FDCWD, op->path2,
				      AT_EMPTY_PATH));
		} else {
			char proc[64];

			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			if (fd < 0) {
				r->ret = -1;
				r->err = EBADF;
			} else {
				SYS(r, linkat(AT_FDCWD, proc, AT_FDCWD,
					      op->path2, AT_SYMLINK_FOLLOW));
			}
		}
		break;
	case OP_SYMLINK:
		SYS(r, symlink(op->path2, op->path));
		break;
	case OP_READLINK:
		SYS(r, readlink(op->path, (char *)io, op->bufsz));
		if (r->ret > 0)
			pay_bytes(r, io, (size_t)r->ret);
		break;
	case OP_CHMOD:
		SYS(r, fchmodat(AT_FDCWD, op->path, op->mode, op->flags));
		break;
	case OP_FCHMOD:
		SYS(r, fchmod(fd, op->mode));
		break;
	case OP_CHOWN:
		SYS(r, fchownat(AT_FDCWD, op->path, (uid_t)op->uid,
				(gid_t)op->gid, op->flags));
		break;
	case OP_FCHOWN:
		SYS(r, fchown(fd, (uid_t)op->uid, (gid_t)op->gid));
		break;
	case OP_UTIMENS:
	case OP_FUTIMENS: {
		int sf = op->kind == OP_UTIMENS ? op->flags : AT_EMPTY_PATH;
		const char *path = op->kind == OP_UTIMENS ? op->path : "";
		int dfd = op->kind == OP_UTIMENS ? AT_FDCWD : fd;
		struct timespec now;

		if (op->kind == OP_UTIMENS)
			SYS(r, utimensat(AT_FDCWD, op->path, op->ts,
					 op->flags));
		else
			SYS(r, futimens(fd, op->ts));
		if (r->ret < 0 || statx(dfd, path, sf, STATX_BASIC_STATS,
					&stx))
			break;
		/*
		 * The times set explicitly must read back as set (or as
		 * ext4 clamps them). A time that reads back as the current
		 * time was changed again since (following a symlink updates
		 * its atime, and the statx above may follow one): that it
		 * changed must agree, the exact clock tick need not.
		 */
		clock_gettime(CLOCK_REALTIME, &now);
		for (int i = 0; i < 2; i++) {
			const struct statx_timestamp *t =
				i ? &stx.stx_mtime : &stx.stx_atime;
			const char *name = i ? "mtime" : "atime";

			if (op->ts[i].tv_nsec == UTIME_OMIT ||
			    op->ts[i].tv_nsec == UTIME_NOW)
				continue;
			if (t->tv_sec == op->ts[i].tv_sec &&
			    t->tv_nsec == (unsigned int)op->ts[i].tv_nsec)
				pay_text(r, "%s=as-set ", name);
			else if (llabs(t->tv_sec - (long long)now.tv_sec) < 600)
				pay_text(r, "%s=now ", name);
			else
				pay_text(r, "%s=%lld.%09u ", name,
					 (long long)t->tv_sec, t->tv_nsec);
		}
		break;
	}
	case OP_SETXATTR: {
		size_t len = op->acl ? op->acllen : (size_t)op->len;

		memcpy(io, op->acl ? op->aclv : p->data, len);
		if (op->variant == 0)
			SYS(r, setxattr(op->path, op->xname, io, len,
					op->flags));
		else if (op->variant == 1)
			SYS(r, lsetxattr(op->path, op->xname, io, len,
					 op->flags));
		else
			SYS(r, fsetxattr(fd, op->xname, io, len, op->flags));
		break;
	}
	case OP_GETXATTR:
		if (op->variant == 0)
			SYS(r, getxattr(op->path, op->xname, io, op->bufsz));
		else if (op->variant == 1)
			SYS(r, lgetxattr(op->path, op->xname, io, op->bufsz));
		else
			SYS(r, fgetxattr(fd, op->xname, io, op->bufsz));
		if (r->ret > 0 && op->bufsz)
			pay_bytes(r, io, (size_t)r->ret);
		break;
	case OP_LISTXATTR:
		if (op->variant == 0)
			SYS(r, listxattr(op->path, (char *)io, op->bufsz));
		else if (op->variant == 1)
			SYS(r, llistxattr(op->path, (char *)io, op->bufsz));
		else
			SYS(r, flistxattr(fd, (char *)io, op->bufsz));
		if (r->ret > 0 && op->bufsz)
			pay_bytes(r, io, (size_t)r->ret);
		break;
	case OP_REMOVEXATTR:
		if (op->variant == 0)
			SYS(r, removexattr(op->path, op->xname));
		else if (op->variant == 1)
			SYS(r, lremovexattr(op->path, op->xname));
		else
			SYS(r, fremovexattr(fd, op->xname));
		break;
	case OP_STAT:
		SYS(r, statx(AT_FDCWD, op->path, op->flags, STATX_BASIC_STATS,
			     &stx));
		if (r->ret == 0)
			pay_statx(p, r, &stx);
		break;
	case OP_FSTAT:
		SYS(r, statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx));
		if (r->ret == 0)
			pay_statx(p, r, &stx);
		break;
	case OP_READDIR: {
		int dfd = open(op->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd < 0) {
			r->ret = -1;
			r->err = errno;
			break;
		}
		readdir_fd(p, side, dfd, r);
		close(dfd);
		break;
	}
	case OP_FREADDIR:
		SYS(r, lseek(fd, 0, SEEK_SET));
		if (r->ret == 0)
			readdir_fd(p, side, fd, r);
		break;
	case OP_FSYNC:
		if (op->variant == 0)
			SYS(r, fdatasync(fd));
		else
			SYS(r, fsync(fd));
		break;
	case OP_ACCESS:
		SYS(r, faccessat(AT_FDCWD, op->path, (int)op->mode, op->flags));
		break;
	case OP_COPY: {
		int out = slot_fd(p, op->slot2, side);
		loff_t oi = op->off, oo = op->off2;

		if (op->variant == 0)
			SYS(r, copy_file_range(fd, &oi, out, &oo,
					       (size_t)op->len, 0));
		else
			SYS(r, copy_file_range(fd, NULL, out, NULL,
					       (size_t)op->len, 0));
		break;
	}
	case OP_GETFLAGS: {
		int fl = 0;

		SYS(r, ioctl(fd, FS_IOC_GETFLAGS, &fl));
		if (r->ret == 0)
			pay_text(r, "flags=0x%x", fl);
		break;
	}
	case OP_SETFLAGS: {
		const int mask = FS_APPEND_FL | FS_NOATIME_FL | FS_NODUMP_FL |
				 FS_IMMUTABLE_FL;
		struct result probe = { .pay = NULL };
		int fl = 0, old;
		struct stat st;

		SYS(r, ioctl(fd, FS_IOC_GETFLAGS, &fl));
		if (r->ret < 0)
			break;
		old = fl;
		fl = (fl & ~mask) | op->flags;
		SYS(r, ioctl(fd, FS_IOC_SETFLAGS, &fl));
		if (r->ret < 0 || fstat(fd, &st))
			break;
		/* What the flags now forbid, through this descriptor. */
		SYS(&probe, fchmod(fd, st.st_mode & 07777));
		pay_text(r, "fchmod=%s ", errname(probe.err));
		SYS(&probe, fsetxattr(fd, "user.probe", "p", 1, 0));
		pay_text(r, "fsetxattr=%s ", errname(probe.err));
		if (S_ISREG(st.st_mode)) {
			SYS(&probe, pwrite(fd, "P", 1, 0));
			pay_text(r, "pwrite=%lld/%s ", probe.ret,
				 errname(probe.err));
			SYS(&probe, ftruncate(fd, st.st_size));
			pay_text(r, "ftruncate=%s ", errname(probe.err));
		} else if (S_ISDIR(st.st_mode)) {
			SYS(&probe, mkdirat(fd, "probe", 0755));
			pay_text(r, "mkdirat=%s ", errname(probe.err));
			if (probe.ret == 0) {
				SYS(&probe, unlinkat(fd, "probe",
						     AT_REMOVEDIR));
				pay_text(r, "rmdir=%s ", errname(probe.err));
			}
		}
		if (!op->variant) {
			SYS(&probe, ioctl(fd, FS_IOC_SETFLAGS, &old));
			pay_text(r, "restore=%s", errname(probe.err));
		}
		break;
	}
	case OP_UMASK:
		/* Process-wide: set once, before side A, for both. */
		if (side == 0)
			umask(op->mode);
		break;
	default:
		break;
	}
}

/* ---- comparing and reporting ---------------------------------------------------------- */

static bool same(const struct result *a, const struct result *b)
{
	return a->ret == b->ret && a->err == b->err && a->len == b->len &&
	       !memcmp(a->pay, b->pay, a->len);
}

static void res_str(const struct result *r, const struct result *other,
		    char *buf, size_t len)
{
	buf[0] = 0;
	cat(buf, len, "ret=%lld", r->ret);
	if (r->ret < 0)
		cat(buf, len, " errno=%s", errname(r->err));
	if (!r->len)
		return;
	if (!r->binary) {
		cat(buf, len, " \"%.*s\"", (int)(r->len < 600 ? r->len : 600),
		    (const char *)r->pay);
		return;
	}
	/* Data: its length, and where it first differs from the other. */
	size_t i = 0, n = r->len < other->len ? r->len : other->len;

	while (i < n && r->pay[i] == other->pay[i])
		i++;
	cat(buf, len, " %zu bytes", r->len);
	if (i < r->len) {
		cat(buf, len, ", from byte %zu:", i);
		for (size_t k = i; k < r->len && k < i + 16; k++)
			cat(buf, len, " %02x", r->pay[k]);
	}
}

static void remember(struct proc *p, long idx, const char *ops,
		     const struct result *r)
{
	char *h = p->history[p->nhist % HISTORY];
	char rs[512];

	res_str(r, r, rs, sizeof(rs));
	snprintf(h, LINE, "  #%ld %s = %.400s", idx, ops, rs);
	p->nhist++;
}

static void print_history(const struct proc *p)
{
	long first = p->nhist > HISTORY ? p->nhist - HISTORY : 0;

	say("fsdiff: p%d: the last operations before it (A's results):\n",
	    p->id);
	for (long i = first; i < p->nhist; i++)
		say("%s\n", p->history[i % HISTORY]);
}

static void set_cred(int id)
{
	setfsuid((uid_t)id);
	setfsgid((gid_t)id);
}

/* Run the process's operations; 0 if every result matched. */
static int proc_main(struct proc *p, long nops, long *done)
{
	char ops[LINE], ra[LINE], rb[LINE];
	struct op *op = malloc(sizeof(*op));

	if (!op) {
		say("fsdiff: out of memory\n");
		return 2;
	}
	for (long i = 0; i < nops; i++) {
		gen_op(p, op);
		if ((op->kind == OP_WRITE || op->kind == OP_MMAP ||
		     op->kind == OP_SETXATTR) && op->len > 0)
			fill(p->data, (size_t)op->len, op->dseed);
		op_str(p, op, ops, sizeof(ops));
		if (p->verbose)	/* before, in case it never returns */
			say("p%d #%ld %s\n", p->id, i, ops);
		for (int side = 0; side < 2; side++) {
			/* As root: the directory may be closed to others. */
			if (fchdir(p->dir[side])) {
				say("fsdiff: p%d: fchdir: %s\n", p->id,
				    strerror(errno));
				free(op);
				return 2;
			}
			if (op->cred)
				set_cred(op->cred);
			run(p, op, side, &p->res[side]);
			if (op->cred)
				set_cred(0);
		}
		if (p->verbose) {
			res_str(&p->res[0], &p->res[1], ra, sizeof(ra));
			say("p%d #%ld = %s\n", p->id, i, ra);
		}
		*done = i + 1;
		if (!same(&p->res[0], &p->res[1])) {
			res_str(&p->res[0], &p->res[1], ra, sizeof(ra));
			res_str(&p->res[1], &p->res[0], rb, sizeof(rb));
			print_history(p);
			say("fsdiff: MISMATCH seed %llu process p%d op #%ld:\n"
			    "  %s\n  A: %s\n  B: %s\n",
			    (unsigned long long)p->seed, p->id, i, ops, ra,
			    rb);
			free(op);
			return 1;
		}
		remember(p, i, ops, &p->res[0]);
	}
	free(op);
	return 0;
}

/* ---- setting up, and the end ------------------------------------------------------------ */

static int print_tree_diff(const struct tree_diff *d, void *arg)
{
	char line[2048];
	int *shown = arg;

	if ((*shown)++ < 200) {
		tree_diff_format(d, line, sizeof(line));
		say("fsdiff: tree: %s\n", line);
	}
	return 0;
}

static void *xalloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, PAGE, len)) {
		say("fsdiff: out of memory\n");
		exit(2);
	}
	memset(p, 0, len);
	return p;
}

static int child(int id, uint64_t seed, long nops, const char *roots[2],
		 bool blocks, bool verbose, long *done)
{
	struct proc *p = xalloc(sizeof(*p));
	char name[32];
	int ret;

	p->id = id;
	p->seed = seed;
	p->blocks = blocks;
	p->verbose = verbose;
	rng_seed(&p->rng, seed, (uint64_t)id + 1);
	for (int s = 0; s < NSLOTS; s++)
		p->slots[s].fd[0] = p->slots[s].fd[1] = -1;
	p->data = xalloc(MAX_IO + PAGE);
	for (int side = 0; side < 2; side++) {
		snprintf(name, sizeof(name), "p%d", id);
		p->io[side] = xalloc(PAY_CAP);
		p->res[side].pay = xalloc(PAY_CAP);
		p->dir[side] = openat(AT_FDCWD, roots[side], O_RDONLY |
				      O_DIRECTORY | O_CLOEXEC);
		if (p->dir[side] >= 0) {
			int d = openat(p->dir[side], name, O_RDONLY |
				       O_DIRECTORY | O_CLOEXEC);

			close(p->dir[side]);
			p->dir[side] = d;
		}
		if (p->dir[side] < 0) {
			say("fsdiff: %s/%s: %s\n", roots[side], name,
			    strerror(errno));
			return 2;
		}
	}
	signal(SIGBUS, on_sigbus);
	ret = proc_main(p, nops, done);
	/* Everything this process had is released by its exit. */
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: fsdiff --seed S --ops N --procs P [--only K] "
		   "[--blocks] [--verbose] A B\n"
		   "  N operations per process; process K works in A/pK "
		   "and B/pK\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seed", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'n' },
		{ "procs", required_argument, NULL, 'p' },
		{ "only", required_argument, NULL, 'o' },
		{ "blocks", no_argument, NULL, 'b' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const ignore[] = { ".presto", "lost+found" };
	struct tree_opts topts = { .ignore = ignore, .n_ignore = 2 };
	unsigned long long seed = 0;
	long nops = 1000, nprocs = 1, only = -1;
	bool blocks = false, verbose = false, have_seed = false;
	const char *roots[2];
	struct tree_error terr;
	long *done;
	pid_t pids[64] = { 0 };
	int c, failed = 0, shown = 0, ndiff;
	struct timespec t0, t1;
	long total = 0;
	char *end;

	while ((c = getopt_long(argc, argv, "s:n:p:o:bvh", longopts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			errno = 0;
			seed = strtoull(optarg, &end, 0);
			if (errno || *end) {
				usage(stderr);
				return 2;
			}
			have_seed = true;
			break;
		case 'n':
			nops = strtol(optarg, &end, 0);
			if (*end || nops < 0) {
				usage(stderr);
				return 2;
			}
			break;
		case 'p':
			nprocs = strtol(optarg, &end, 0);
			if (*end || nprocs < 1 || nprocs > 64) {
				usage(stderr);
				return 2;
			}
			break;
		case 'o':
			only = strtol(optarg, &end, 0);
			if (*end || only < 0 || only > 63) {
				usage(stderr);
				return 2;
			}
			break;
		case 'b':
			blocks = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "fsdiff: must run as root\n");
		return 2;
	}
	if (!have_seed) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		seed = (unsigned long long)now.tv_nsec ^
		       ((unsigned long long)now.tv_sec << 20) ^
		       (unsigned long long)getpid();
		seed %= 1000000007ULL;
	}
	roots[0] = argv[optind];
	roots[1] = argv[optind + 1];
	if (only >= nprocs)
		nprocs = only + 1;

	say("fsdiff: seed %llu\n", seed);
	say("fsdiff: %ld operations in each of %ld process%s%s, A=%s B=%s\n",
	    nops, only >= 0 ? 1 : nprocs, nprocs == 1 || only >= 0 ? "" :
	    "es", only >= 0 ? " (only one)" : "", roots[0], roots[1]);
	signal(SIGPIPE, SIG_IGN);
	umask(022);

	for (long k = 0; k < nprocs; k++) {
		char name[32];

		if (only >= 0 && k != only)
			continue;
		snprintf(name, sizeof(name), "p%ld", k);
		for (int side = 0; side < 2; side++) {
			int d = open(roots[side], O_RDONLY | O_DIRECTORY);

			if (d < 0 || mkdirat(d, name, 0755)) {
				say("fsdiff: %s/%s: %s%s\n", roots[side], name,
				    strerror(errno), errno == EEXIST ?
				    " (give fsdiff empty directories)" : "");
				return 2;
			}
			close(d);
		}
	}

	done = mmap(NULL, sizeof(long) * 64, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (done == MAP_FAILED) {
		perror("fsdiff: mmap");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long k = 0; k < nprocs; k++) {
		pid_t pid;

		if (only >= 0 && k != only)
			continue;
		pid = fork();
		pids[k] = pid;
		if (pid < 0) {
			perror("fsdiff: fork");
			return 2;
		}
		if (pid == 0)
			_exit(child((int)k, seed, nops, roots, blocks, verbose,
				    &done[k]));
	}
	for (;;) {
		int status;
		pid_t pid = wait(&status);

		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			long k = 0;

			while (k < nprocs && pids[k] != pid)
				k++;
			failed++;
			if (WIFSIGNALED(status))
				say("fsdiff: p%ld died of signal %d in op "
				    "#%ld (seed %llu; replay it with --only "
				    "%ld --verbose)\n", k, WTERMSIG(status),
				    done[k], seed, k);
			else if (WEXITSTATUS(status) != 1)
				say("fsdiff: p%ld failed (exit %d)\n", k,
				    WEXITSTATUS(status));
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (long k = 0; k < nprocs; k++)
		total += done[k];

	ndiff = tree_compare(roots[0], roots[1], &topts, print_tree_diff,
			     &shown, &terr);
	if (ndiff < 0)
		say("fsdiff: comparing the trees failed: %s: %s: %s\n",
		    terr.path, terr.op, strerror(terr.err));
	else if (shown > 200)
		say("fsdiff: tree: ... %d more differences\n", shown - 200);

	say("fsdiff: %.1f s\n", (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (!failed && ndiff == 0) {
		say("fsdiff: %ld ops compared, trees equal\n", total);
		return 0;
	}
	say("fsdiff: FAILED (seed %llu): %ld ops compared, %d process%s "
	    "mismatched, %s\n", seed, total, failed, failed == 1 ? "" : "es",
	    ndiff < 0 ? "tree comparison failed" :
	    ndiff == 0 ? "trees equal" : "trees differ");
	if (ndiff > 0)
		say("fsdiff: %d tree difference%s\n", ndiff,
		    ndiff == 1 ? "" : "s");
	return 1;
}
