/*
 * The user-space KML decoder. Little-endian fields are read byte by byte,
 * so the decoder neither assumes the host's byte order nor the buffer's
 * alignment.
 */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include "kml.h"

static uint32_t crc_table[256];

/* Before main(), so that threads never race to fill the table. */
__attribute__((constructor)) static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78U : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc_update(uint32_t c, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

uint32_t kml_crc(const void *buf, size_t len)
{
	return crc_update(~0U, buf, len);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

#define FIELD(base, type, member) \
	((const uint8_t *)(base) + offsetof(type, member))

int kml_seg_unused(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i, n = len < PRESTO_KML_HDR_SIZE ? len : PRESTO_KML_HDR_SIZE;

	for (i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

int kml_decode_header(const void *buf, size_t len, struct kml_seg_header *h,
		      const char **why)
{
	typedef struct presto_kml_seg_hdr H;
	const uint8_t *p = buf;

	if (len < sizeof(H)) {
		*why = "too short for a segment header";
		return -1;
	}
	if (memcmp(p, PRESTO_KML_MAGIC, 8)) {
		*why = "not a KML segment (bad magic)";
		return -1;
	}
	if (get32(FIELD(p, H, crc)) != kml_crc(p, offsetof(H, crc))) {
		*why = "segment header CRC mismatch";
		return -1;
	}
	h->version = get32(FIELD(p, H, version));
	h->segno = get64(FIELD(p, H, segno));
	h->first_seq = get64(FIELD(p, H, first_seq));
	h->seg_size = get64(FIELD(p, H, seg_size));
	if (h->version < PRESTO_KML_VERSION_MIN ||
	    h->version > PRESTO_KML_VERSION) {
		*why = "unknown KML format version";
		return -1;
	}
	if (get32(FIELD(p, H, hdr_size)) != PRESTO_KML_HDR_SIZE) {
		*why = "unexpected header size";
		return -1;
	}
	if (!h->first_seq) {
		*why = "first sequence number 0";
		return -1;
	}
	return 0;
}

static void decode_fh(const uint8_t *p, struct kml_fh *fh)
{
	fh->ino = get64(p + offsetof(struct presto_kml_fh, ino));
	fh->gen = get32(p + offsetof(struct presto_kml_fh, gen));
}

static void decode_attr(const uint8_t *p, struct kml_attr *a)
{
	typedef struct presto_kml_attr A;

	a->valid = get32(FIELD(p, A, valid));
	a->mode = get32(FIELD(p, A, mode));
	a->uid = get32(FIELD(p, A, uid));
	a->gid = get32(FIELD(p, A, gid));
	a->size = get64(FIELD(p, A, size));
	a->atime_ns = (int64_t)get64(FIELD(p, A, atime_ns));
	a->mtime_ns = (int64_t)get64(FIELD(p, A, mtime_ns));
	a->ctime_ns = (int64_t)get64(FIELD(p, A, ctime_ns));
	a->rdev = get32(FIELD(p, A, rdev));
	a->nlink = get32(FIELD(p, A, nlink));
}

/* The reserved fields a writer leaves zero. */
static int reserved_zero(const uint8_t *p)
{
	typedef struct presto_kml_rec R;

	if (get16(FIELD(p, R, reserved)))
		return 0;
	for (int i = 0; i < PRESTO_KML_NFH; i++)
		if (get32(p + offsetof(R, fh) + i * sizeof(struct presto_kml_fh) +
			  offsetof(struct presto_kml_fh, reserved)))
			return 0;
	return 1;
}

static enum kml_result bad(const char **why, const char *reason)
{
	*why = reason;
	return KML_BAD;
}

/* A file type Linux has and permission bits, nothing more. */
static int valid_mode(uint32_t mode)
{
	if (mode & ~(uint32_t)(S_IFMT | 07777))
		return 0;
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR:
	case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		return 1;
	}
	return 0;
}

#define SLOT(s) (1U << PRESTO_KML_FH_##s)

/* Exactly the handle slots in @used (SLOT bits) name an object. */
static int slots_are(const struct kml_record *r, unsigned int used)
{
	for (int i = 0; i < PRESTO_KML_NFH; i++)
		if (!r->fh[i].ino != !(used & 1U << i))
			return 0;
	return 1;
}

/* Names each followed by a NUL, none empty or past NAME_MAX; or none. */
static int valid_name_list(const uint8_t *p, size_t len)
{
	size_t start = 0;

	for (size_t i = 0; i < len; i++) {
		if (p[i])
			continue;
		if (i == start || i - start > PRESTO_KML_NAME_MAX)
			return 0;
		start = i + 1;
	}
	return start == len;
}

/* A directory entry's name: what a file name can be. */
static int valid_entry_name(const char *name, size_t len)
{
	if (!len || memchr(name, '/', len) || memchr(name, '\0', len))
		return 0;
	return !(len == 1 && name[0] == '.') &&
	       !(len == 2 && name[0] == '.' && name[1] == '.');
}

/*
 * The recovery records (KML.md, "Recovery records") are state a consumer
 * applies whole, so their shapes are checked here, and the RECOVERED flag
 * that marks a block of them. Returns why @r is not well formed, or NULL.
 */
static const char *check_recovery(struct kml_record *r)
{
	int recovered = r->flags & PRESTO_KML_F_RECOVERED;

	switch (r->op) {
	case PRESTO_KML_RESYNC:
	case PRESTO_KML_RESYNC_DIR:
	case PRESTO_KML_DIRENT:
		break;
	case PRESTO_KML_SETXATTR:
	case PRESTO_KML_STORE:
		return NULL;
	default:
		if (recovered)
			return "RECOVERED flag on an op recovery does not write";
		return NULL;
	}
	if (!recovered)
		return "recovery record without the RECOVERED flag";
	if ((r->flags & ~PRESTO_KML_F_GROUPS_CUT) != PRESTO_KML_F_RECOVERED)
		return "recovery record with flags other than RECOVERED";
	if (r->name2_len)
		return "recovery record with a second name";

	switch (r->op) {
	case PRESTO_KML_RESYNC:
		if (!slots_are(r, SLOT(OBJ)))
			return "RESYNC: a handle other than obj alone";
		if (r->name_len)
			return "RESYNC with a name";
		if (r->attr.valid != PRESTO_KML_A_ALL)
			return "RESYNC without every attribute";
		if (!valid_mode(r->attr.mode))
			return "RESYNC: invalid mode";
		if (!valid_name_list(r->data, r->data_len))
			return "RESYNC: malformed list of xattr names";
		return NULL;
	case PRESTO_KML_RESYNC_DIR:
		if (!slots_are(r, SLOT(OBJ)))
			return "RESYNC_DIR: a handle other than obj alone";
		if (r->name_len)
			return "RESYNC_DIR with a name";
		if (r->attr.valid)
			return "RESYNC_DIR with attributes";
		if (r->data_len != sizeof(struct presto_kml_resync_dir))
			return "RESYNC_DIR: data is not an entry count";
		r->entries = get64(r->data);
		return NULL;
	default:		/* DIRENT */
		if (!slots_are(r, SLOT(DIR) | SLOT(OBJ)))
			return "DIRENT: handles other than dir and obj";
		if (!valid_entry_name(r->name, r->name_len))
			return "DIRENT: not a valid entry name";
		if (r->attr.valid != (PRESTO_KML_A_MODE | PRESTO_KML_A_RDEV))
			return "DIRENT: attributes other than mode and rdev";
		if (!valid_mode(r->attr.mode))
			return "DIRENT: invalid mode";
		if (!S_ISLNK(r->attr.mode))
			return r->data_len ?
			       "DIRENT: data for an entry not a symlink" : NULL;
		/* What symlink(2) would take: no NUL, shorter than PATH_MAX. */
		if (!r->data_len || r->data_len >= PATH_MAX ||
		    memchr(r->data, '\0', r->data_len))
			return "DIRENT: not a valid symlink target";
		return NULL;
	}
}

enum kml_result kml_decode_record(const void *buf, size_t len,
				  uint64_t expect_seq, struct kml_record *r,
				  const char **why)
{
	typedef struct presto_kml_rec R;
	const uint8_t *p = buf;
	uint8_t hdr[sizeof(R)];
	const char *reason;
	uint32_t rlen, crc;
	size_t body;

	if (len < sizeof(R))
		return KML_END;
	rlen = get32(FIELD(p, R, len));
	if (!rlen)
		return KML_END;
	if (rlen < sizeof(R) || rlen % PRESTO_KML_ALIGN || rlen > KML_REC_MAX)
		return bad(why, "impossible record length");
	if (rlen > len)
		return bad(why, "record runs past the end of the segment");
	/* The CRC covers the record with its CRC field zero. */
	crc = get32(FIELD(p, R, crc));
	memcpy(hdr, p, sizeof(hdr));
	memset(hdr + offsetof(R, crc), 0, 4);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
	/* A fuzzer could not get past this; it checks all that follows. */
	if (crc_update(kml_crc(hdr, sizeof(hdr)), p + sizeof(R),
		       rlen - sizeof(R)) != crc)
		return bad(why, "record CRC mismatch");
#else
	(void)crc;
#endif
	r->len = rlen;
	r->seq = get64(FIELD(p, R, seq));
	if (expect_seq && r->seq != expect_seq)
		return bad(why, "sequence number out of order");
	if (!r->seq)
		return bad(why, "sequence number 0");
	r->op = get16(FIELD(p, R, op));
	if (r->op < 1 || r->op > PRESTO_KML_OP_MAX)
		return bad(why, "unknown operation");
	r->flags = get16(FIELD(p, R, flags));
	if (r->flags & ~PRESTO_KML_F_ALL)
		return bad(why, "unknown flags");
	if ((r->flags & PRESTO_KML_F_STORED) && r->op != PRESTO_KML_CREATE)
		return bad(why, "STORED flag on an op other than CREATE");
	r->name_len = get16(FIELD(p, R, name_len));
	r->name2_len = get16(FIELD(p, R, name2_len));
	r->data_len = get32(FIELD(p, R, data_len));
	r->ngroups = get16(FIELD(p, R, ngroups));
	if (r->name_len > PRESTO_KML_NAME_MAX ||
	    r->name2_len > PRESTO_KML_NAME_MAX ||
	    r->data_len > PRESTO_KML_DATA_MAX)
		return bad(why, "name or data too long");
	if (r->ngroups > PRESTO_KML_GROUPS_MAX)
		return bad(why, "too many groups");
	if ((r->flags & PRESTO_KML_F_GROUPS_CUT) &&
	    r->ngroups != PRESTO_KML_GROUPS_MAX)
		return bad(why, "groups cut short of the most a record holds");
	body = sizeof(R) + r->name_len + r->name2_len + r->data_len +
	       4 * (size_t)r->ngroups;
	if (body > rlen || rlen - body >= PRESTO_KML_ALIGN)
		return bad(why, "lengths disagree with the record length");
	for (size_t i = body; i < rlen; i++)
		if (p[i])
			return bad(why, "padding not zero");
	if (!reserved_zero(p))
		return bad(why, "reserved field not zero");
	r->uid = get32(FIELD(p, R, uid));
	r->gid = get32(FIELD(p, R, gid));
	r->time_ns = (int64_t)get64(FIELD(p, R, time_ns));
	for (int i = 0; i < PRESTO_KML_NFH; i++)
		decode_fh(p + offsetof(R, fh) + i * sizeof(struct presto_kml_fh),
			  &r->fh[i]);
	decode_attr(FIELD(p, R, attr), &r->attr);
	if (r->attr.valid & ~PRESTO_KML_A_ALL)
		return bad(why, "unknown attribute bits");
	r->name = (const char *)p + sizeof(R);
	r->name2 = r->name + r->name_len;
	r->data = (const uint8_t *)r->name2 + r->name2_len;
	r->groups = r->data + r->data_len;
	r->entries = 0;
	reason = check_recovery(r);
	if (reason)
		return bad(why, reason);
	return KML_OK;
}

const char *kml_op_name(unsigned int op)
{
	static const char *const names[] = {
		[PRESTO_KML_CREATE] = "CREATE",
		[PRESTO_KML_MKDIR] = "MKDIR",
		[PRESTO_KML_MKNOD] = "MKNOD",
		[PRESTO_KML_SYMLINK] = "SYMLINK",
		[PRESTO_KML_LINK] = "LINK",
		[PRESTO_KML_UNLINK] = "UNLINK",
		[PRESTO_KML_RMDIR] = "RMDIR",
		[PRESTO_KML_RENAME] = "RENAME",
		[PRESTO_KML_SETATTR] = "SETATTR",
		[PRESTO_KML_SETXATTR] = "SETXATTR",
		[PRESTO_KML_REMOVEXATTR] = "REMOVEXATTR",
		[PRESTO_KML_STORE] = "STORE",
		[PRESTO_KML_RESYNC] = "RESYNC",
		[PRESTO_KML_RESYNC_DIR] = "RESYNC_DIR",
		[PRESTO_KML_DIRENT] = "DIRENT",
	};

	_Static_assert(sizeof(names) / sizeof(*names) == PRESTO_KML_OP_MAX + 1,
		       "every operation has a name");

	if (op < 1 || op > PRESTO_KML_OP_MAX)
		return "?";
	return names[op];
}

const char *kml_resync_xattr(const struct kml_record *r, size_t *pos,
			     size_t *len)
{
	const char *name = (const char *)r->data + *pos;

	if (r->op != PRESTO_KML_RESYNC || *pos >= r->data_len)
		return NULL;
	*len = strlen(name);	/* the decoder saw its NUL */
	*pos += *len + 1;
	return name;
}
