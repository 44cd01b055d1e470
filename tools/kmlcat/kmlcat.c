/*
 * kmlcat: print presto's kernel modification log, human-readably or as
 * JSON lines.
 *
 *   kmlcat [--json] [--strict] [--after SEQ] PATH...
 *
 * PATH is a cache (the lower= directory), its .presto directory, or
 * segment files. Segments are read in order; within each, records are
 * printed up to the first one that is not valid (a torn tail after a
 * crash), which is reported on stderr. Exit status: 0, or 1 with --strict
 * if anything was not valid or a sequence number is missing between
 * segments, 2 for a usage or I/O error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include "kml.h"

struct options {
	int json, strict;
	uint64_t after;
};

struct state {
	uint64_t next_seq;	/* 0: none read yet */
	int damaged;
};

static const char *const fh_names[PRESTO_KML_NFH] = {
	"dir", "obj", "newdir", "target"
};

/*
 * Bytes as a quoted string: printable ASCII as it is, '"' and '\\'
 * escaped, every other byte as \\uNNNN for JSON (one code point per byte,
 * U+0000 to U+00FF) or \\xNN for a person.
 */
static void print_bytes(const void *buf, size_t len, int json)
{
	const unsigned char *p = buf;

	putchar('"');
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '"' || p[i] == '\\')
			printf("\\%c", p[i]);
		else if (p[i] < 0x20 || p[i] >= 0x7f)
			printf(json ? "\\u%04x" : "\\x%02x", p[i]);
		else
			putchar(p[i]);
	}
	putchar('"');
}

static void json_bytes(const void *buf, size_t len)
{
	print_bytes(buf, len, 1);
}

static void text_bytes(const void *buf, size_t len)
{
	print_bytes(buf, len, 0);
}

static void print_time(int64_t ns)
{
	time_t s = (time_t)(ns / 1000000000);
	long frac = (long)(ns % 1000000000);
	struct tm tm;
	char buf[64];

	if (frac < 0) {
		frac += 1000000000;
		s--;
	}
	if (!gmtime_r(&s, &tm) ||
	    !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm)) {
		printf("%" PRId64 "ns", ns);
		return;
	}
	printf("%s.%09ldZ", buf, frac);
}

static const struct {
	uint32_t bit;
	const char *name;
} attr_names[] = {
	{ PRESTO_KML_A_MODE, "mode" }, { PRESTO_KML_A_UID, "uid" },
	{ PRESTO_KML_A_GID, "gid" }, { PRESTO_KML_A_SIZE, "size" },
	{ PRESTO_KML_A_ATIME, "atime_ns" }, { PRESTO_KML_A_MTIME, "mtime_ns" },
	{ PRESTO_KML_A_CTIME, "ctime_ns" }, { PRESTO_KML_A_RDEV, "rdev" },
	{ PRESTO_KML_A_NLINK, "nlink" },
};

static const struct {
	uint16_t bit;
	const char *name;
} flag_names[] = {
	{ PRESTO_KML_F_NOREPLACE, "NOREPLACE" },
	{ PRESTO_KML_F_EXCHANGE, "EXCHANGE" },
	{ PRESTO_KML_F_XCREATE, "XATTR_CREATE" },
	{ PRESTO_KML_F_XREPLACE, "XATTR_REPLACE" },
	{ PRESTO_KML_F_TMPFILE, "TMPFILE" },
	{ PRESTO_KML_F_RECOVERED, "RECOVERED" },
	{ PRESTO_KML_F_GROUPS_CUT, "GROUPS_CUT" },
	{ PRESTO_KML_F_STORED, "STORED" },
};

/* The maker's supplementary group @i (little-endian in the record). */
static uint32_t group(const struct kml_record *r, unsigned int i)
{
	const uint8_t *g = r->groups + 4 * i;

	return g[0] | g[1] << 8 | g[2] << 16 | (uint32_t)g[3] << 24;
}

/*
 * The groups, comma-separated: for JSON always (an array), for a person
 * only when there are any, marked "(cut)" when the maker had more.
 */
static void print_groups(const struct kml_record *r, int json)
{
	if (!json && !r->ngroups)
		return;
	printf(json ? ",\"groups\":[" : " groups=");
	for (unsigned int i = 0; i < r->ngroups; i++)
		printf("%s%" PRIu32, i ? "," : "", group(r, i));
	if (json)
		putchar(']');
	else if (r->flags & PRESTO_KML_F_GROUPS_CUT)
		printf("(cut)");
}

static void attr_value(const struct kml_attr *a, uint32_t bit, int json)
{
	switch (bit) {
	case PRESTO_KML_A_MODE:
		printf(json ? "%" PRIu32 : "0%" PRIo32, a->mode);
		break;
	case PRESTO_KML_A_UID:
		printf("%" PRIu32, a->uid);
		break;
	case PRESTO_KML_A_GID:
		printf("%" PRIu32, a->gid);
		break;
	case PRESTO_KML_A_SIZE:
		printf("%" PRIu64, a->size);
		break;
	case PRESTO_KML_A_ATIME:
		printf("%" PRId64, a->atime_ns);
		break;
	case PRESTO_KML_A_MTIME:
		printf("%" PRId64, a->mtime_ns);
		break;
	case PRESTO_KML_A_CTIME:
		printf("%" PRId64, a->ctime_ns);
		break;
	case PRESTO_KML_A_RDEV:
		if (json)
			printf("%" PRIu32, a->rdev);
		else
			printf("%u:%u", (a->rdev >> 8) & 0xfff,
			       (a->rdev & 0xff) | ((a->rdev >> 12) & 0xfff00));
		break;
	case PRESTO_KML_A_NLINK:
		printf("%" PRIu32, a->nlink);
		break;
	}
}

/* Operations whose records never carry a name. */
static int nameless(uint16_t op)
{
	return op == PRESTO_KML_STORE || op == PRESTO_KML_RESYNC ||
	       op == PRESTO_KML_RESYNC_DIR;
}

/* A symlink's target or an xattr's value; a DIRENT has one for a symlink. */
static int has_data(const struct kml_record *r)
{
	return r->op == PRESTO_KML_SYMLINK || r->op == PRESTO_KML_SETXATTR ||
	       (r->op == PRESTO_KML_DIRENT && r->data_len);
}

/*
 * What a RESYNC's and a RESYNC_DIR's data say, decoded: the object's xattr
 * names, the number of DIRENTs that follow.
 */
static void print_recovery(const struct kml_record *r, int json)
{
	const char *name;
	size_t pos = 0, len;
	int n = 0;

	if (r->op == PRESTO_KML_RESYNC_DIR) {
		printf(json ? ",\"entries\":%" PRIu64 : " entries=%" PRIu64,
		       r->entries);
		return;
	}
	if (r->op != PRESTO_KML_RESYNC)
		return;
	printf(json ? ",\"xattrs\":[" : " xattrs=[");
	while ((name = kml_resync_xattr(r, &pos, &len))) {
		if (n++)
			putchar(',');
		print_bytes(name, len, json);
	}
	putchar(']');
}

static void print_json(const struct kml_record *r)
{
	printf("{\"seq\":%" PRIu64 ",\"op\":\"%s\",\"flags\":[", r->seq,
	       kml_op_name(r->op));
	for (size_t i = 0, n = 0; i < sizeof(flag_names) / sizeof(*flag_names); i++)
		if (r->flags & flag_names[i].bit)
			printf("%s\"%s\"", n++ ? "," : "", flag_names[i].name);
	printf("],\"uid\":%" PRIu32 ",\"gid\":%" PRIu32, r->uid, r->gid);
	print_groups(r, 1);
	printf(",\"time_ns\":%" PRId64, r->time_ns);
	for (int i = 0; i < PRESTO_KML_NFH; i++)
		if (r->fh[i].ino)
			printf(",\"%s\":{\"ino\":%" PRIu64 ",\"gen\":%" PRIu32 "}",
			       fh_names[i], r->fh[i].ino, r->fh[i].gen);
	if (r->name_len || !nameless(r->op)) {
		printf(",\"name\":");
		json_bytes(r->name, r->name_len);
	}
	if (r->op == PRESTO_KML_RENAME) {
		printf(",\"name2\":");
		json_bytes(r->name2, r->name2_len);
	}
	if (has_data(r)) {
		printf(",\"data\":");
		json_bytes(r->data, r->data_len);
	}
	print_recovery(r, 1);
	printf(",\"attr\":{");
	for (size_t i = 0, n = 0; i < sizeof(attr_names) / sizeof(*attr_names); i++) {
		if (!(r->attr.valid & attr_names[i].bit))
			continue;
		printf("%s\"%s\":", n++ ? "," : "", attr_names[i].name);
		attr_value(&r->attr, attr_names[i].bit, 1);
	}
	printf("}}\n");
}

static void print_text(const struct kml_record *r)
{
	printf("%" PRIu64 " %s", r->seq, kml_op_name(r->op));
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(*flag_names); i++)
		if (r->flags & flag_names[i].bit)
			printf(" %s", flag_names[i].name);
	for (int i = 0; i < PRESTO_KML_NFH; i++)
		if (r->fh[i].ino)
			printf(" %s=%" PRIu64 ":%" PRIu32, fh_names[i],
			       r->fh[i].ino, r->fh[i].gen);
	if (r->name_len || (!nameless(r->op) && r->op != PRESTO_KML_SETATTR)) {
		printf(" name=");
		text_bytes(r->name, r->name_len);
	}
	if (r->op == PRESTO_KML_RENAME) {
		printf(" name2=");
		text_bytes(r->name2, r->name2_len);
	}
	if (has_data(r)) {
		printf(" data=");
		text_bytes(r->data, r->data_len);
	}
	print_recovery(r, 0);
	for (size_t i = 0; i < sizeof(attr_names) / sizeof(*attr_names); i++) {
		if (!(r->attr.valid & attr_names[i].bit))
			continue;
		printf(" %s=", attr_names[i].name);
		attr_value(&r->attr, attr_names[i].bit, 0);
	}
	printf(" by=%" PRIu32 ":%" PRIu32, r->uid, r->gid);
	print_groups(r, 0);
	printf(" at=");
	print_time(r->time_ns);
	putchar('\n');
}

static int read_file(const char *path, uint8_t **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t done = 0;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		if (!errno)
			errno = EINVAL;
		close(fd);
		return -1;
	}
	*buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!*buf) {
		close(fd);
		return -1;
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, *buf + done, (size_t)st.st_size - done);

		if (n < 0) {
			free(*buf);
			close(fd);
			return -1;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	*len = done;
	return 0;
}

static int cat_segment(const char *path, const struct options *o,
		       struct state *s)
{
	struct kml_seg_header h;
	struct kml_record r;
	const char *why = NULL;
	uint8_t *buf;
	size_t len, pos;

	if (read_file(path, &buf, &len)) {
		fprintf(stderr, "kmlcat: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (kml_seg_unused(buf, len)) {	/* a spare never used */
		free(buf);
		return 0;
	}
	if (kml_decode_header(buf, len, &h, &why)) {
		fprintf(stderr, "kmlcat: %s: %s\n", path, why);
		s->damaged = 1;
		free(buf);
		return 0;
	}
	if (s->next_seq && h.first_seq != s->next_seq) {
		fprintf(stderr, "kmlcat: %s: starts at record %" PRIu64
			", expected %" PRIu64 "\n", path, h.first_seq,
			s->next_seq);
		s->damaged = 1;
	}
	s->next_seq = h.first_seq;
	for (pos = PRESTO_KML_HDR_SIZE; pos < len; pos += r.len) {
		enum kml_result res = kml_decode_record(buf + pos, len - pos,
							s->next_seq, &r, &why);

		if (res == KML_END)
			break;
		if (res == KML_BAD) {
			fprintf(stderr, "kmlcat: %s: offset %zu: %s; the rest of the segment is ignored\n",
				path, pos, why);
			s->damaged = 1;
			break;
		}
		s->next_seq = r.seq + 1;
		if (r.seq <= o->after)
			continue;
		if (o->json)
			print_json(&r);
		else
			print_text(&r);
	}
	free(buf);
	return 0;
}

static int seg_filter(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n == 12 && !strncmp(d->d_name, "kml.", 4) &&
	       strspn(d->d_name + 4, "0123456789") == 8;
}

static int cat_dir(const char *dir, const struct options *o, struct state *s)
{
	struct dirent **names;
	char path[4096], sub[4096];
	struct stat st;
	int n, err = 0;

	/* A cache: its log is in .presto. */
	if ((size_t)snprintf(sub, sizeof(sub), "%s/.presto", dir) >= sizeof(sub)) {
		fprintf(stderr, "kmlcat: %s: path too long\n", dir);
		return -1;
	}
	if (!stat(sub, &st) && S_ISDIR(st.st_mode))
		dir = sub;
	n = scandir(dir, &names, seg_filter, alphasort);
	if (n < 0) {
		fprintf(stderr, "kmlcat: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!err && (size_t)snprintf(path, sizeof(path), "%s/%s", dir,
					     names[i]->d_name) >= sizeof(path)) {
			fprintf(stderr, "kmlcat: %s: path too long\n", dir);
			err = -1;
		}
		if (!err)
			err = cat_segment(path, o, s);
		free(names[i]);
	}
	free(names);
	return err;
}

static void usage(void)
{
	fprintf(stderr, "usage: kmlcat [--json] [--strict] [--after SEQ] CACHE|SEGMENT...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct state s = { 0 };
	int i, err = 0;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--json")) {
			o.json = 1;
		} else if (!strcmp(argv[i], "--strict")) {
			o.strict = 1;
		} else if (!strcmp(argv[i], "--after") && i + 1 < argc) {
			char *end;

			errno = 0;
			o.after = strtoull(argv[++i], &end, 10);
			if (errno || *end || end == argv[i])
				usage();
		} else {
			usage();
		}
	}
	if (i == argc)
		usage();
	for (; i < argc && !err; i++) {
		struct stat st;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "kmlcat: %s: %s\n", argv[i],
				strerror(errno));
			err = -1;
		} else if (S_ISDIR(st.st_mode)) {
			err = cat_dir(argv[i], &o, &s);
		} else {
			err = cat_segment(argv[i], &o, &s);
		}
	}
	if (fflush(stdout)) {
		perror("kmlcat: stdout");
		return 2;
	}
	if (err)
		return 2;
	return o.strict && s.damaged ? 1 : 0;
}
