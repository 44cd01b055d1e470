/* SPDX-License-Identifier: MIT */
/*
 * The lento <-> lento wire protocol (protocol/PROTOCOL.md): one codec,
 * used by the client and the server alike.
 *
 * Frames are a 12-byte header and a body; every integer is little-endian
 * and written byte by byte, never by copying a struct.
 *
 * Encoding: lp_encode_*() append one whole frame to a growable buffer
 * (struct lp_buf). On failure nothing is appended and the call returns a
 * negative errno: -ENOMEM, -EMSGSIZE (frame beyond LP_FRAME_MAX), -EINVAL
 * (a field a decoder would refuse: b->why says which). Every frame an
 * encoder makes is run through the matching decoder before it is kept, so
 * what one peer sends the other accepts: the rules live in the decoders
 * alone.
 *
 * Decoding: lp_frame_parse() splits a byte stream into frames; then
 * lp_decode_*() checks a frame's body completely (every length and count
 * against the bytes left and lento_types.h's limits, names, enums,
 * reserved fields) and fills a struct. Variable parts either are copied
 * into fixed arrays (names of struct lento_rec and lento_dirent) or point
 * into the frame (auth, messages, symlink targets, xattrs, record data,
 * compressed chunks, lists): those stay valid as long as the bytes the
 * frame was parsed from. Lists are read with the lp_next_*() cursors once
 * the decoder accepted the frame; a cursor cannot fail then.
 *
 * Decoders return 0, or -EBADMSG with a static reason string in *why; a
 * peer sending one is closed with "<type name>: <reason>" logged. Nothing
 * here prints, allocates (but lp_buf and zstd's contexts) or keeps state.
 */
#ifndef LENTO_LPROTO_H
#define LENTO_LPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "lento_types.h"

/* Protocol versions this code speaks (HELLO negotiates one). */
#define LP_VERSION_MIN		4
#define LP_VERSION_MAX		4

#define LP_MAGIC		"LENTO-LP"	/* HELLO's first 8 bytes */
#define LP_PORT			4770		/* the server's default TCP port */

#define LP_HDR_SIZE		12
#define LP_FRAME_MAX		(16u << 20)	/* body bytes of one frame */
#define LP_HELLO_MAX		(LP_AUTH_MAX + 64)	/* before the handshake */
#define LP_AUTH_MAX		4096	/* HELLO's opaque auth slot */
#define LP_MSG_MAX		1024	/* an error's text */
#define LP_CHUNK_MAX		(1u << 20)	/* a DATA chunk, uncompressed */
#define LP_ZCHUNK_MAX		(LP_CHUNK_MAX + (LP_CHUNK_MAX >> 8) + 64)
#define LP_LIST_MAX		(1u << 18)	/* items of a validate list */
#define LP_DIR_MAX		(1u << 24)	/* entries of one directory */
#define LP_SPLIT_TARGET		(1u << 20)	/* READDIR/REINTEGRATE frames */
/*
 * Records of one REINTEGRATE: above what LP_SPLIT_TARGET lets an encoder
 * put in a frame (a record is 211 bytes at least), and low enough that
 * the reply's versions (4 fids a record at most) stay within LP_LIST_MAX
 * and LP_FRAME_MAX.
 */
#define LP_REINT_RECS_MAX	(1u << 13)
#define LP_PING_MS		5000	/* default heartbeat interval */
#define LP_GONE_MS		15000	/* silence after which a peer is gone */
#define LP_HEARTBEAT_MIN_MS	100
#define LP_HEARTBEAT_MAX_MS	600000
#define LP_ZSTD_LEVEL		1

/* Frame header flags. */
#define LP_F_MORE	0x0001	/* another frame of this message follows */

enum lp_type {
	LP_HELLO			= 1,
	LP_HELLO_REPLY			= 2,
	LP_PING				= 3,
	LP_PONG				= 4,
	LP_ERROR			= 5,
	LP_GETATTR			= 16,
	LP_GETATTR_REPLY		= 17,
	LP_READDIR			= 18,
	LP_READDIR_REPLY		= 19,
	LP_FETCH			= 20,
	LP_FETCH_REPLY			= 21,
	LP_DATA				= 22,
	LP_VOLUME_LOOKUP		= 32,
	LP_VOLUME_LOOKUP_REPLY		= 33,
	LP_VOLUME_VALIDATE		= 34,
	LP_VOLUME_VALIDATE_REPLY	= 35,
	LP_VALIDATE			= 36,
	LP_VALIDATE_REPLY		= 37,
	LP_PERMIT_ACQUIRE		= 48,
	LP_PERMIT_RENEW			= 49,
	LP_PERMIT_RELEASE		= 50,
	LP_PERMIT_REPLY			= 51,
	LP_REINTEGRATE			= 64,
	LP_REINTEGRATE_REPLY		= 65,
	LP_BREAK			= 80,
	LP_BREAK_VOLUME			= 81,
	LP_PERMIT_REVOKE		= 82,
};

enum lp_kind {
	LP_K_NONE,	/* not a type */
	LP_K_REQUEST,	/* client -> server, tag != 0 */
	LP_K_REPLY,	/* server -> client, the request's tag */
	LP_K_PUSH,	/* server -> client, tag 0 */
	LP_K_DATA,	/* a chunk of a FETCH reply or a REINTEGRATE request */
};

const char *lp_type_name(unsigned int type);	/* "?" if unknown */
enum lp_kind lp_type_kind(unsigned int type);
/* The reply a request gets (besides LP_ERROR); 0 for other types. */
unsigned int lp_reply_type(unsigned int request);

/*
 * Error codes on the wire (ERROR, REINTEGRATE_REPLY). Below 1000 they are
 * Linux's generic errno numbers; the protocol's own start at 1000.
 */
enum lp_err {
	LP_OK			= 0,
	LP_EPERM		= 1,
	LP_ENOENT		= 2,
	LP_EIO			= 5,
	LP_EAGAIN		= 11,
	LP_ENOMEM		= 12,
	LP_EACCES		= 13,
	LP_EBUSY		= 16,
	LP_EEXIST		= 17,
	LP_EXDEV		= 18,
	LP_ENOTDIR		= 20,
	LP_EISDIR		= 21,
	LP_EINVAL		= 22,
	LP_EFBIG		= 27,
	LP_ENOSPC		= 28,
	LP_EROFS		= 30,
	LP_EMLINK		= 31,
	LP_ERANGE		= 34,
	LP_EDEADLK		= 35,
	LP_ENAMETOOLONG		= 36,
	LP_ENOSYS		= 38,
	LP_ENOTEMPTY		= 39,
	LP_ENODATA		= 61,
	LP_EPROTO		= 71,
	LP_EBADMSG		= 74,
	LP_EOVERFLOW		= 75,
	LP_EPROTONOSUPPORT	= 93,
	LP_EOPNOTSUPP		= 95,
	LP_ETIMEDOUT		= 110,
	LP_ESTALE		= 116,
	LP_EUCLEAN		= 117,
	LP_EDQUOT		= 122,
	LP_ECONFLICT		= 1000,	/* REINTEGRATE: a base version is not current */
	LP_ENOPERMIT		= 1001,	/* not the volume's permit holder */
};

const char *lp_err_name(uint32_t code);	/* "?" if not a code */
/* A host errno (either sign) as a wire code: LP_EIO if it has none. */
uint32_t lp_err_from_errno(int err);
/* A wire code as a positive host errno: EIO for the protocol's own. */
int lp_err_to_errno(uint32_t code);

/* ------------------------------------------------------------ buffers */

struct lp_buf {
	uint8_t *p;
	size_t len, cap;
	const char *why;	/* the last -EINVAL's reason */
	void *zc;		/* DATA's ZSTD_CCtx: made once, used again */
};

void lp_buf_free(struct lp_buf *b);	/* its context too, and zero it */

/* --------------------------------------------------------------- frames */

struct lp_frame {
	uint16_t type, flags;
	uint32_t tag;
	uint32_t len;		/* body bytes */
	const uint8_t *body;	/* NULL until the whole frame is there */
};

/*
 * The frame at the start of @n bytes: returns its size (header and body)
 * when it is all there; 0 when more bytes are needed (once the header is
 * there, *f has it and body NULL, so a reader can size its buffer and
 * refuse a type before the body arrives); -EBADMSG if the header is bad
 * (unknown type, unknown flag or MORE on a type that never continues, tag
 * 0 on anything but a push or not 0 on a push, body over LP_FRAME_MAX).
 * Before the handshake a server also refuses a body over LP_HELLO_MAX or
 * a type other than HELLO: that is the caller's to check, on *f.
 */
ssize_t lp_frame_parse(const uint8_t *p, size_t n, struct lp_frame *f,
		       const char **why);

/* Decode @f's body by its type, for the sake of checking it. */
int lp_frame_check(const struct lp_frame *f, const char **why);

/* ------------------------------------------------------------ handshake */

struct lp_hello {
	uint16_t vmin, vmax;	/* versions the client speaks */
	uint32_t client;	/* its id; 0: a new client asks for one */
	uint8_t uuid[16];	/* its persistent identity, not all zero */
	const uint8_t *auth;	/* opaque; empty in version 1 */
	uint32_t auth_len;
};

struct lp_hello_reply {
	uint16_t version;	/* negotiated */
	uint32_t client;	/* the client's id (assigned if it sent 0) */
	uint64_t epoch;		/* changes at every server start; not 0 */
	uint32_t heartbeat_ms;	/* PING interval the server expects */
	const uint8_t *auth;
	uint32_t auth_len;
};

int lp_encode_hello(struct lp_buf *b, uint32_t tag, const struct lp_hello *m);
int lp_decode_hello(const struct lp_frame *f, struct lp_hello *m,
		    const char **why);
int lp_encode_hello_reply(struct lp_buf *b, uint32_t tag,
			  const struct lp_hello_reply *m);
int lp_decode_hello_reply(const struct lp_frame *f, struct lp_hello_reply *m,
			  const char **why);

/* The highest version both speak, or 0 if none. */
unsigned int lp_negotiate(const struct lp_hello *m);

/* PING or PONG (@type), carrying a nonce the PONG echoes. */
int lp_encode_ping(struct lp_buf *b, unsigned int type, uint32_t tag,
		   uint64_t nonce);
int lp_decode_ping(const struct lp_frame *f, uint64_t *nonce,
		   const char **why);

struct lp_error {
	uint32_t code;		/* enum lp_err, not LP_OK */
	const char *msg;	/* not NUL-terminated; may be empty */
	uint32_t msg_len;
};

int lp_encode_error(struct lp_buf *b, uint32_t tag, uint32_t code,
		    const char *msg);	/* msg NUL-terminated, may be NULL */
int lp_decode_error(const struct lp_frame *f, struct lp_error *m,
		    const char **why);

/* ---------------------------------------------- one fid, one volume */

/* GETATTR, READDIR (requests) and BREAK (push, tag 0): a fid. */
int lp_encode_fid(struct lp_buf *b, unsigned int type, uint32_t tag,
		  const struct lento_fid *fid);
int lp_decode_fid(const struct lp_frame *f, struct lento_fid *fid,
		  const char **why);

/*
 * PERMIT_ACQUIRE, PERMIT_RENEW, PERMIT_RELEASE (requests), BREAK_VOLUME
 * and PERMIT_REVOKE (pushes, tag 0): a volume id.
 */
int lp_encode_volume(struct lp_buf *b, unsigned int type, uint32_t tag,
		     uint32_t volume);
int lp_decode_volume(const struct lp_frame *f, uint32_t *volume,
		     const char **why);

/* ---------------------------------------------------------------- lists */

/*
 * A list a decoder checked; read it with the matching lp_next_*(), which
 * returns 1 and the next item, 0 after the last, or -EINVAL on a list of
 * other items.
 */
struct lp_list {
	const uint8_t *p;
	size_t n;
	uint32_t left;
	uint8_t kind;		/* its items, for lp_next_*() to check */
};

/* ----------------------------------------------------------- GETATTR */

struct lp_xattr {
	const char *name;	/* not NUL-terminated */
	uint32_t name_len;
	const void *value;
	uint32_t value_len;
};

struct lp_getattr_reply {
	struct lento_status st;
	const char *target;	/* a symlink's, not NUL-terminated */
	uint32_t target_len;	/* 0 unless st.type is LENTO_T_SYMLINK */
	uint32_t nxattr;
	struct lp_xattr xattr[LENTO_XATTRS_MAX];
};

int lp_encode_getattr_reply(struct lp_buf *b, uint32_t tag,
			    const struct lp_getattr_reply *m);
int lp_decode_getattr_reply(const struct lp_frame *f,
			    struct lp_getattr_reply *m, const char **why);

/* The next of an object's xattrs a decoder accepted (struct lp_list). */
int lp_next_xattr(struct lp_list *l, struct lp_xattr *x);

/* ----------------------------------------------------------- READDIR */

struct lp_dirent {
	struct lento_dirent de;	/* name NUL-terminated */
	const char *target;	/* a symlink's, not NUL-terminated */
	uint32_t target_len;	/* 0 unless de.st.type is LENTO_T_SYMLINK */
	/*
	 * Its object's xattrs: the encoder reads xattr[0, nxattr); the
	 * decoder sets nxattr and xattrs (lp_next_xattr), xattr NULL.
	 */
	uint32_t nxattr;
	const struct lp_xattr *xattr;
	struct lp_list xattrs;
};

/*
 * One READDIR_REPLY frame: entries [first, first + count) of a listing
 * of total entries; every frame but the last has LP_F_MORE.
 */
struct lp_readdir_reply {
	struct lento_status dir;	/* the same in every frame */
	/*
	 * The directory's xattrs, in the first frame (first 0) only: the
	 * encoder reads dir_xattr[0, dir_nxattr) then; the decoder sets
	 * dir_nxattr and dir_xattrs (lp_next_xattr).
	 */
	uint32_t dir_nxattr;
	const struct lp_xattr *dir_xattr;
	struct lp_list dir_xattrs;
	uint32_t total, first, count;
	bool more;
	struct lp_list ents;		/* lp_next_dirent() */
};

/*
 * Entries from @ents[0] on, numbered from m->first of m->total (the
 * encoder reads dir, total and first): as many as fit LP_SPLIT_TARGET
 * (one at least, if @n is not 0). Returns how many it took; MORE is set
 * when first + that < total. An empty directory is one frame, count 0.
 */
int lp_encode_readdir_reply(struct lp_buf *b, uint32_t tag,
			    const struct lp_readdir_reply *m,
			    const struct lp_dirent *ents, uint32_t n);
int lp_decode_readdir_reply(const struct lp_frame *f,
			    struct lp_readdir_reply *m, const char **why);
int lp_next_dirent(struct lp_list *l, struct lp_dirent *d);

/* ------------------------------------------------------ FETCH and DATA */

struct lp_fetch {
	struct lento_fid fid;
	struct lento_vv expect;	/* n == 0: whatever version is current */
};

struct lp_fetch_reply {
	struct lento_status st;	/* a regular file, the version sent */
	uint64_t size;		/* body bytes; st.attr.size */
};

int lp_encode_fetch(struct lp_buf *b, uint32_t tag, const struct lp_fetch *m);
int lp_decode_fetch(const struct lp_frame *f, struct lp_fetch *m,
		    const char **why);
/* Always with LP_F_MORE: DATA frames follow. */
int lp_encode_fetch_reply(struct lp_buf *b, uint32_t tag,
			  const struct lp_fetch_reply *m);
int lp_decode_fetch_reply(const struct lp_frame *f, struct lp_fetch_reply *m,
			  const char **why);

#define LP_DATA_LAST	0x1	/* the body's last chunk */

/* A chunk of a body, compressed on its own as one zstd frame. */
struct lp_data {
	uint32_t rec;		/* REINTEGRATE: the STORE's index; FETCH: 0 */
	uint32_t flags;		/* LP_DATA_LAST */
	uint64_t offset;	/* of the chunk in the body */
	uint32_t raw_len;	/* uncompressed bytes, <= LP_CHUNK_MAX */
	const uint8_t *z;	/* the zstd frame, in the frame */
	uint32_t zlen;
	bool more;		/* the frame's LP_F_MORE */
};

/*
 * Compress @raw_len (<= LP_CHUNK_MAX) bytes of @raw into a DATA frame
 * with @d's rec, flags, offset and more.
 */
int lp_encode_data(struct lp_buf *b, uint32_t tag, const struct lp_data *d,
		   const void *raw, uint32_t raw_len);
int lp_decode_data(const struct lp_frame *f, struct lp_data *d,
		   const char **why);

/*
 * Decompress a decoded chunk into @dst (@cap bytes): exactly d->raw_len
 * bytes or -EBADMSG. The zstd data must be one frame whose declared size
 * is raw_len, and never more than raw_len is written: a chunk that would
 * grow beyond what it declares (a zip bomb) is refused. @zd is where the
 * caller keeps a decompression context from one chunk to the next (made
 * at the first; NULL: one for this chunk only); lp_zd_free() frees it.
 */
int lp_chunk_decompress(const struct lp_data *d, void *dst, size_t cap,
			const char **why, void **zd);
void lp_zd_free(void **zd);	/* and sets *zd NULL */

/*
 * A receiver's check of one body's chunks: offsets follow one another,
 * LAST exactly on the chunk that completes @total bytes, a chunk is not
 * empty unless the body is, and the frame's MORE is clear only after the
 * last chunk of the message's last body (@final).
 */
struct lp_stream {
	uint32_t rec;
	bool final, done;
	uint64_t next, total;
};

void lp_stream_init(struct lp_stream *s, uint32_t rec, uint64_t total,
		    bool final);
/* 0: more chunks to come; 1: the body is complete; -EBADMSG. */
int lp_stream_data(struct lp_stream *s, const struct lp_data *d,
		   const char **why);

/* ------------------------------------------------------------ volumes */

struct lp_volume {
	uint32_t volume;
	struct lento_fid root;
	uint64_t stamp;		/* the volume's version stamp */
};

/* @name: 1..LENTO_VOLNAME_MAX printable ASCII bytes, no '/'. */
int lp_encode_volume_lookup(struct lp_buf *b, uint32_t tag, const char *name);
int lp_decode_volume_lookup(const struct lp_frame *f,
			    char name[LENTO_VOLNAME_MAX + 1], const char **why);
int lp_encode_volume_lookup_reply(struct lp_buf *b, uint32_t tag,
				  const struct lp_volume *m);
int lp_decode_volume_lookup_reply(const struct lp_frame *f,
				  struct lp_volume *m, const char **why);

/* VOLUME_VALIDATE's items (stamp: the client's) and its reply's (the
 * server's current stamp, and the result). */
enum lp_volres {
	LP_VOL_VALID	= 0,	/* the stamp is current */
	LP_VOL_CHANGED	= 1,	/* validate the objects */
	LP_VOL_UNKNOWN	= 2,	/* no such volume */
};

struct lp_volstamp {
	uint32_t volume;
	uint64_t stamp;
	uint8_t result;		/* enum lp_volres: replies only */
};

/* 1..LP_LIST_MAX items. */
int lp_encode_volume_validate(struct lp_buf *b, uint32_t tag,
			      const struct lp_volstamp *v, uint32_t n);
int lp_encode_volume_validate_reply(struct lp_buf *b, uint32_t tag,
				    const struct lp_volstamp *v, uint32_t n);
/* Either of the two; lp_next_volstamp() reads the items of both. */
int lp_decode_volume_validate(const struct lp_frame *f, struct lp_list *l,
			      const char **why);
int lp_next_volstamp(struct lp_list *l, struct lp_volstamp *v);

/* ---------------------------------------------------------- VALIDATE */

struct lp_fidvv {
	struct lento_fid fid;
	struct lento_vv vv;
};

enum lp_objres {
	LP_OBJ_VALID	= 0,	/* unchanged; the callback holds again */
	LP_OBJ_CHANGED	= 1,	/* changed or gone */
};

/* 1..LP_LIST_MAX objects and the versions the client has. */
int lp_encode_validate(struct lp_buf *b, uint32_t tag,
		       const struct lp_fidvv *v, uint32_t n);
int lp_decode_validate(const struct lp_frame *f, struct lp_list *l,
		       const char **why);
int lp_next_fidvv(struct lp_list *l, struct lp_fidvv *v);

/* One enum lp_objres byte per object, in the request's order. */
struct lp_validate_reply {
	uint32_t count;
	const uint8_t *result;	/* into the frame */
};

int lp_encode_validate_reply(struct lp_buf *b, uint32_t tag,
			     const uint8_t *result, uint32_t n);
int lp_decode_validate_reply(const struct lp_frame *f,
			     struct lp_validate_reply *m, const char **why);

/* ----------------------------------------------------------- permits */

struct lp_permit {
	uint32_t volume;
	uint32_t lease_ms;	/* 0 after PERMIT_RELEASE */
};

int lp_encode_permit_reply(struct lp_buf *b, uint32_t tag,
			   const struct lp_permit *m);
int lp_decode_permit_reply(const struct lp_frame *f, struct lp_permit *m,
			   const char **why);

/* ------------------------------------------------------- REINTEGRATE */

struct lp_reint {
	uint32_t volume;
	uint32_t client;	/* not 0 */
	uint64_t first;		/* recno of the first record */
	uint32_t count;		/* records: recnos first, first + 1, ... */
	uint32_t stores;	/* STORE records: each body follows in DATA */
	bool more;		/* set iff stores */
	struct lp_list recs;	/* lp_next_rec() */
};

/*
 * Records @recs[0..n) of client @m->client for volume @m->volume, as many
 * as fit LP_SPLIT_TARGET (one at least), which is fewer than
 * LP_REINT_RECS_MAX: returns how many it took, which
 * are the batch. Their recnos must follow one another. MORE is set when a
 * STORE is among them: the caller then sends each STORE's body, in record
 * order, as DATA frames (rec = the record's index in the batch), MORE on
 * every one but the very last.
 */
int lp_encode_reintegrate(struct lp_buf *b, uint32_t tag,
			  const struct lp_reint *m,
			  const struct lento_rec *recs, uint32_t n);
int lp_decode_reintegrate(const struct lp_frame *f, struct lp_reint *m,
			  const char **why);
/* The next record; its data points into the frame. */
int lp_next_rec(struct lp_list *l, struct lento_rec *r);

/*
 * The shape a record of its op must have (lento_types.h's table): the
 * fids it uses are not null and the others are, names and data present
 * exactly where the op has them and valid, type and flags only where
 * they mean something, STORE with a size. NULL if fine, else why not.
 */
const char *lp_rec_invalid(const struct lento_rec *r);

#define LP_NO_INDEX	0xffffffffu

struct lp_reint_reply {
	uint64_t applied;	/* the client's last applied recno, after */
	uint64_t stamp;		/* the volume's stamp, after */
	uint32_t code;		/* LP_OK, LP_ECONFLICT, or an error */
	uint32_t index;		/* the record to blame, or LP_NO_INDEX */
	struct lento_fid fid;	/* the object concerned, or null */
	struct lento_vv base;	/* LP_ECONFLICT: the record's base version */
	struct lento_vv current;	/* LP_ECONFLICT: the server's */
	const char *msg;	/* not NUL-terminated */
	uint32_t msg_len;
	uint32_t nver;
	struct lp_list versions;	/* lp_next_fidvv(): what the batch made */
};

/* m->msg NUL-terminated or NULL (msg_len is ignored); @v: new versions. */
int lp_encode_reintegrate_reply(struct lp_buf *b, uint32_t tag,
				const struct lp_reint_reply *m,
				const struct lp_fidvv *v, uint32_t n);
int lp_decode_reintegrate_reply(const struct lp_frame *f,
				struct lp_reint_reply *m, const char **why);

#endif
