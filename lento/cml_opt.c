// SPDX-License-Identifier: MIT
/*
 * The CML optimiser: Coda's log optimisations, done soundly.
 *
 * The input is a volume's pending records after the last shipped one (the
 * "window"), in record order. The server may already have applied the
 * shipped ones, so they are never touched, and an object is "created in
 * the log" only when its create is in the window. The output is the same
 * records with some deleted and some rewritten in place; no record moves
 * (a rewritten record keeps its record number, so the order the server
 * applies them in is the order they had), and a rewritten record keeps
 * its maker (uid, gid, supplementary groups). Soundness is the rule:
 * applied to any server state the window could have been made against, the
 * output gives the state the window gives (names, objects, attributes,
 * contents, xattrs), every record of the output still applies (its names
 * exist or not as it needs), and no surviving record is checked against a
 * permission state it would not have met. When a condition cannot be
 * shown, nothing is done.
 *
 * An object is a fid; a record "names" an object when one of its slots
 * (dir, obj, dir2, target) holds it. A "state" record is SETATTR,
 * SETXATTR, REMOVEXATTR, PRUNEXATTRS or STORE: it names only obj and
 * changes nothing but obj. Objects of which the log says odd things (an
 * object created after it was named, or twice; a file used as a
 * directory; a rename onto itself or of a name onto itself; one object in
 * two slots of a record other than dir and dir2) are left alone by every
 * rule. An object is known to be a directory from MKDIR, RMDIR, or holding
 * entries (dir, dir2); not to be one from CREATE, MKNOD, SYMLINK, LINK,
 * UNLINK or STORE; and a plain RENAME's object and target are of one
 * kind. An EXCHANGE may swap a directory and a file: it says nothing of
 * kinds.
 *
 * 1. Cancellation (Coda's identity cancellation). A candidate is an object
 *    created in the window (CREATE, MKDIR, MKNOD, SYMLINK) that also loses
 *    its last name in the window (its names counted from the create:
 *    LINK +1, UNLINK -1, RMDIR and being a directory's rename target: 0, a
 *    file's rename target: -1) and is named by nothing after. The set C to
 *    cancel is the largest set of candidates closed under these rules:
 *    - a record whose obj is not in C may not name a member of C as dir
 *      or dir2 (a directory in C never holds anything that survives);
 *    - a RENAME whose obj is in C and whose target is not may not have
 *      its dir2 in C (implied by the first rule: the target got into
 *      dir2 by a record that the first rule holds to; checked anyway);
 *    - an EXCHANGE keeps every object it names out of C.
 *    Then every record naming a member of C goes, except a RENAME that
 *    also moves or replaces an object outside C:
 *    - X in C renamed over T not in C becomes the removal of T (UNLINK of
 *      dir2/name2, or RMDIR when X, and so T, is a directory): that is
 *      all the rename did to objects that survive;
 *    - X not in C renamed over T in C becomes a rename without target.
 *    Invariant that makes it sound: at every point of the log, the server
 *    state the output gives is the state the input gives minus the members
 *    of C and the names pointing at them. A kept record names no member of
 *    C, so what it needs (a name free, a name holding an object, a
 *    directory empty) holds in both. A create/write/unlink of 1000 files,
 *    or a tree unpacked and removed, ships nothing; a link keeps its
 *    object (its count stays above 0), and so does a name an object
 *    outside C was moved under.
 *
 * 2. Moot changes. When an object Y loses its last name in the window —
 *    RMDIR; UNLINK with LENTO_R_LASTLINK, or the count of rule 1 for an
 *    object created in the window; a RENAME replacing Y with
 *    LENTO_R_LASTLINK, or Y a directory, or the count — and nothing names
 *    it after, the state records of Y just before that removal go (walking
 *    back from the removal, up to the first record naming Y that is not a
 *    state record). The removal stays. A SETATTR that changes the owner
 *    stays and stops the walk: the sticky bit makes the removal's
 *    permission depend on the owner. Without LASTLINK an UNLINK of a
 *    server object may leave it another name, and nothing is dropped.
 *
 * 3. Rename chains. A RENAME R of X whose source name is where the
 *    previous namespace record P of X put it (state records of X, and
 *    records naming X only as a directory, may lie between) merges into
 *    P, at P's place:
 *    - P = RENAME a→b (not EXCHANGE, no target) and R = RENAME b→c: P
 *      becomes a→c, with R's target and flags (a→b→a is left alone);
 *    - P = CREATE (MKDIR, MKNOD, SYMLINK) of a and R = RENAME a→c without
 *      target: P creates under c.
 *    R is not an EXCHANGE. Conditions, all about the records strictly
 *    between P and R, because from P on X stands at c rather than at b
 *    (or a): P and R have the same maker -- uid, gid and supplementary
 *    groups (the merged record is checked once, as P's); nothing between
 *    names c's directory as obj or target (it exists at P and is where it
 *    was) or creates, links, removes or renames from or onto the name c;
 *    R's target is named by nothing between nor by P (it is at c and
 *    unchanged at P); and unless X is known not to be a directory, no
 *    RENAME lies between (moving X earlier changes which directory
 *    renames would make a loop), and, for a chain, nothing between
 *    changes X's mode, owner, group or ACL (moving a directory to
 *    another parent needs write permission on it, which the merged
 *    record would be checked for as it was at P). A record between
 *    that needs the intermediate name b names X, and ends the walk
 *    back, so it prevents the merge.
 *
 * 4. Stores and attributes. Walking through the records naming X:
 *    - a STORE replaces an earlier STORE of X whose attributes it all
 *      sets again (valid mask a subset): the body shipped is the last one
 *      in any case, and nothing observes a body in between;
 *    - a SETATTR setting only SIZE, MTIME, CTIME (SIZE among them),
 *      immediately followed among X's records by a STORE that sets them
 *      all, goes (truncate then write);
 *    - two SETATTRs of X with no record naming X between, by the same
 *      maker (uid, gid and groups), merge into the later: the masks are
 *      or-ed, the later values win. Not when both set SIZE and the later
 *      grows the file (a truncation then an extension zero-fills; the
 *      extension alone would not).
 *    Records between that name X prevent SETATTR merges: their permission
 *    checks could depend on the attributes in between.
 *
 * Base versions. cml.h: a record's base for an object is the server's
 *    version before the first record of the log that touched the object,
 *    so all records of the log name the same base for one object. When
 *    records go or merge, a surviving record takes, for each object it
 *    names, the base of the earliest record it replaces (or its own) that
 *    names that object: rule 1's UNLINK of T takes the rename's bases of
 *    dir2 and target; a merged STORE or SETATTR the base of the first one;
 *    a merged rename or create, for c's directory, the base P had for it
 *    if P named it, else R's, and for the target R's. Bases are carried as
 *    (node, slot) of the log as loaded, so merging twice still points at
 *    the original record.
 *
 * The rules run in rounds (1, 2, 3, 4) until a round removes nothing,
 * at most MAX_ROUNDS; scans of rule 3 have a budget, past which it does
 * nothing more.
 */
#include "cml_opt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE		UINT32_MAX
#define MAX_ROUNDS	8
#define SCAN_BUDGET	(1u << 24)	/* steps per round for rule 3 */

enum kind {
	K_UNKNOWN,
	K_DIR,
	K_NONDIR,
};

struct oobj {
	struct lento_fid fid;
	/*
	 * Nodes that name it, in order. A superset: a node may have died or
	 * been rewritten since; always check.
	 */
	uint32_t *occ;
	uint32_t nocc, cap;
	uint8_t kind;
	bool weird;
	bool in_c;
	bool queued;
	uint32_t created;	/* node of its create, or NONE */
};

struct opt {
	struct cml_onode *n;
	uint32_t count;
	struct oobj *obj;
	uint32_t nobj, capobj;
	uint32_t *hash;		/* object index + 1; 0: empty */
	uint32_t hsize;		/* a power of two */
	uint32_t *renames;	/* [i]: live RENAMEs among nodes < i */
	uint32_t *queue;
	uint32_t qn;
	uint64_t budget;
	struct cml_opt_stats *st;
};

static const char empty_name[] = "";

/* Records and objects -------------------------------------------------- */

static bool fid_eq(const struct lento_fid *a, const struct lento_fid *b)
{
	return lento_fid_eq(a, b);
}

static bool fid_null(const struct lento_fid *f)
{
	return lento_fid_is_null(f);
}

static bool is_create(uint16_t op)
{
	return op == LENTO_OP_CREATE || op == LENTO_OP_MKDIR ||
	       op == LENTO_OP_MKNOD || op == LENTO_OP_SYMLINK;
}

static bool is_state(uint16_t op)
{
	return op == LENTO_OP_SETATTR || op == LENTO_OP_SETXATTR ||
	       op == LENTO_OP_REMOVEXATTR || op == LENTO_OP_PRUNEXATTRS ||
	       op == LENTO_OP_STORE;
}

static bool is_exchange(const struct cml_onode *n)
{
	return n->op == LENTO_OP_RENAME && (n->flags & LENTO_R_EXCHANGE);
}

/*
 * Would the server's permission checks see the same caller in both: uid,
 * gid and supplementary groups (the same ones, as the same bytes)?
 */
static bool same_maker(const struct cml_onode *a, const struct cml_onode *b)
{
	return a->uid == b->uid && a->gid == b->gid &&
	       a->ngroups == b->ngroups &&
	       (!a->ngroups || !memcmp(a->groups, b->groups,
				       4 * (size_t)a->ngroups));
}

static bool names(const struct cml_onode *n, const struct lento_fid *f)
{
	for (int s = 0; s < CML_NSLOT; s++)
		if (fid_eq(&n->fid[s], f))
			return true;
	return false;
}

/* Does node @i exist and name @f? */
static bool live_names(struct opt *o, uint32_t i, const struct lento_fid *f)
{
	return !o->n[i].dead && names(&o->n[i], f);
}

static uint32_t fid_hash(const struct lento_fid *f)
{
	uint64_t h = f->seq * 0x9e3779b97f4a7c15ULL ^
		     ((uint64_t)f->client << 32 | f->volume);

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 29;
	return (uint32_t)h;
}

static uint32_t lookup(struct opt *o, const struct lento_fid *f)
{
	uint32_t m = o->hsize - 1, h;

	if (fid_null(f))
		return NONE;
	for (h = fid_hash(f) & m; o->hash[h]; h = (h + 1) & m)
		if (fid_eq(&o->obj[o->hash[h] - 1].fid, f))
			return o->hash[h] - 1;
	return NONE;
}

static int intern(struct opt *o, const struct lento_fid *f, uint32_t *k)
{
	uint32_t m = o->hsize - 1, h;
	struct oobj *b;

	for (h = fid_hash(f) & m; o->hash[h]; h = (h + 1) & m) {
		if (fid_eq(&o->obj[o->hash[h] - 1].fid, f)) {
			*k = o->hash[h] - 1;
			return 0;
		}
	}
	if (o->nobj == o->capobj) {
		uint32_t cap = o->capobj ? o->capobj * 2 : 64;
		void *p = realloc(o->obj, cap * sizeof(*o->obj));

		if (!p)
			return -ENOMEM;
		o->obj = p;
		o->capobj = cap;
	}
	b = &o->obj[o->nobj];
	memset(b, 0, sizeof(*b));
	b->fid = *f;
	b->created = NONE;
	o->hash[h] = ++o->nobj;
	*k = o->nobj - 1;
	return 0;
}

/* First index in @b's occurrences holding a node >= @node. */
static uint32_t occ_find(const struct oobj *b, uint32_t node)
{
	uint32_t lo = 0, hi = b->nocc;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (b->occ[mid] < node)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Note that @node names object @k, keeping the list in order. */
static int add_occ(struct opt *o, uint32_t k, uint32_t node)
{
	struct oobj *b = &o->obj[k];
	uint32_t at;

	if (b->nocc && b->occ[b->nocc - 1] == node)
		return 0;
	at = b->nocc && b->occ[b->nocc - 1] > node ? occ_find(b, node) :
						       b->nocc;
	if (at < b->nocc && b->occ[at] == node)
		return 0;
	if (b->nocc == b->cap) {
		uint32_t cap = b->cap ? b->cap * 2 : 4;
		void *p = realloc(b->occ, cap * sizeof(*b->occ));

		if (!p)
			return -ENOMEM;
		b->occ = p;
		b->cap = cap;
	}
	memmove(b->occ + at + 1, b->occ + at, (b->nocc - at) * sizeof(*b->occ));
	b->occ[at] = node;
	b->nocc++;
	return 0;
}

static void set_kind(struct oobj *b, uint8_t kind)
{
	if (b->kind == K_UNKNOWN)
		b->kind = kind;
	else if (b->kind != kind)
		b->weird = true;
}

static uint8_t kind_of(struct opt *o, const struct lento_fid *f)
{
	uint32_t k = lookup(o, f);

	return k == NONE ? K_UNKNOWN : o->obj[k].kind;
}

static bool weird(struct opt *o, const struct lento_fid *f)
{
	uint32_t k = lookup(o, f);

	return k == NONE || o->obj[k].weird;
}

/* One step of a rule 3 scan; false once the round's budget is spent. */
static bool spend(struct opt *o)
{
	if (!o->budget)
		return false;
	o->budget--;
	return true;
}

static void kill(struct opt *o, uint32_t i)
{
	o->n[i].dead = true;
}

/* Slot @s of node @i takes its base from where slot @sj of node @j has it. */
static void set_base(struct opt *o, uint32_t i, int s, uint32_t j, int sj)
{
	o->n[i].base_node[s] = o->n[j].base_node[sj];
	o->n[i].base_slot[s] = o->n[j].base_slot[sj];
	o->n[i].dirty = true;
}

static void reset_base(struct opt *o, uint32_t i, int s)
{
	o->n[i].base_node[s] = i;
	o->n[i].base_slot[s] = (uint8_t)s;
}

/* The same object's base, from @j if @j's record is the earlier. */
static void take_base(struct opt *o, uint32_t i, int s, uint32_t j, int sj)
{
	if (o->n[j].base_node[sj] < o->n[i].base_node[s])
		set_base(o, i, s, j, sj);
}

/* The slot of node @i that names @f, or -1. */
static int slot_of(struct opt *o, uint32_t i, const struct lento_fid *f)
{
	for (int s = 0; s < CML_NSLOT; s++)
		if (fid_eq(&o->n[i].fid[s], f))
			return s;
	return -1;
}

/* Index ---------------------------------------------------------------- */

static void clear_index(struct opt *o)
{
	for (uint32_t k = 0; k < o->nobj; k++)
		free(o->obj[k].occ);
	o->nobj = 0;
	free(o->hash);
	o->hash = NULL;
	free(o->renames);
	o->renames = NULL;
	free(o->queue);
	o->queue = NULL;
}

/* What node @i says of the kinds of the objects it names. */
static void note_kinds(struct opt *o, uint32_t i)
{
	struct cml_onode *n = &o->n[i];
	uint32_t obj = lookup(o, &n->fid[CML_OBJ]);
	uint32_t k;

	for (int s = CML_DIR; s <= CML_DIR2; s += 2) {
		k = lookup(o, &n->fid[s]);
		if (k != NONE)
			set_kind(&o->obj[k], K_DIR);
	}
	/* One object in two slots, other than a rename within a directory. */
	for (int s = 0; s < CML_NSLOT; s++) {
		for (int t = s + 1; t < CML_NSLOT; t++) {
			if (fid_null(&n->fid[s]) ||
			    !fid_eq(&n->fid[s], &n->fid[t]) ||
			    (s == CML_DIR && t == CML_DIR2))
				continue;
			o->obj[lookup(o, &n->fid[s])].weird = true;
		}
	}
	if (obj == NONE)
		return;
	if (is_create(n->op)) {
		struct oobj *b = &o->obj[obj];

		if (b->created == NONE && b->nocc == 1 && b->occ[0] == i)
			b->created = i;
		else
			b->weird = true;
		set_kind(b, n->op == LENTO_OP_MKDIR ? K_DIR : K_NONDIR);
	} else if (n->op == LENTO_OP_LINK || n->op == LENTO_OP_UNLINK ||
		   n->op == LENTO_OP_STORE) {
		set_kind(&o->obj[obj], K_NONDIR);
	} else if (n->op == LENTO_OP_RMDIR) {
		set_kind(&o->obj[obj], K_DIR);
	} else if (n->op == LENTO_OP_RENAME && !strcmp(n->name, n->name2) &&
		   fid_eq(&n->fid[CML_DIR], &n->fid[CML_DIR2])) {
		o->obj[obj].weird = true;
	}
}

static int build(struct opt *o)
{
	uint32_t live = 0, size = 64;
	int err;

	clear_index(o);
	for (uint32_t i = 0; i < o->count; i++)
		live += !o->n[i].dead;
	while (size < 8ULL * live + 64 && size < (1u << 31))
		size *= 2;
	if ((uint64_t)live * CML_NSLOT >= size)
		return -ENOMEM;
	o->hsize = size;
	o->hash = calloc(size, sizeof(*o->hash));
	o->renames = calloc((size_t)o->count + 1, sizeof(*o->renames));
	if (!o->hash || !o->renames)
		return -ENOMEM;
	for (uint32_t i = 0; i < o->count; i++) {
		struct cml_onode *n = &o->n[i];

		o->renames[i + 1] = o->renames[i] +
				    (!n->dead && n->op == LENTO_OP_RENAME);
		if (n->dead)
			continue;
		for (int s = 0; s < CML_NSLOT; s++) {
			uint32_t k;

			if (fid_null(&n->fid[s]))
				continue;
			err = intern(o, &n->fid[s], &k);
			if (!err)
				err = add_occ(o, k, i);
			if (err)
				return err;
		}
		note_kinds(o, i);
	}
	/*
	 * A rename replaces an object of its own kind; an exchange may swap
	 * a directory and a file.
	 */
	for (uint32_t i = 0; i < o->count; i++) {
		struct cml_onode *n = &o->n[i];
		uint32_t a, b;

		if (n->dead || n->op != LENTO_OP_RENAME || is_exchange(n) ||
		    fid_null(&n->fid[CML_TARGET]))
			continue;
		a = lookup(o, &n->fid[CML_OBJ]);
		b = lookup(o, &n->fid[CML_TARGET]);
		if (o->obj[a].kind == K_UNKNOWN)
			o->obj[a].kind = o->obj[b].kind;
		else if (o->obj[b].kind == K_UNKNOWN)
			o->obj[b].kind = o->obj[a].kind;
		else if (o->obj[a].kind != o->obj[b].kind)
			o->obj[a].weird = o->obj[b].weird = true;
	}
	o->queue = malloc(((size_t)o->nobj + 1) * sizeof(*o->queue));
	if (!o->queue)
		return -ENOMEM;
	o->budget = SCAN_BUDGET;
	return 0;
}

/*
 * The node where @k, created in the window, lost its last name, with
 * nothing naming it after; NONE if there is none.
 */
static uint32_t last_name_gone(struct opt *o, uint32_t k)
{
	struct oobj *b = &o->obj[k];
	uint32_t gone = NONE;
	int64_t count = 0;

	if (b->created == NONE || b->weird || o->n[b->created].dead)
		return NONE;
	for (uint32_t x = 0; x < b->nocc; x++) {
		uint32_t j = b->occ[x];
		struct cml_onode *n = &o->n[j];

		if (!live_names(o, j, &b->fid))
			continue;
		if (gone != NONE || j < b->created)
			return NONE;
		if (j == b->created) {
			count = 1;
			continue;
		}
		if (is_create(n->op) && fid_eq(&n->fid[CML_OBJ], &b->fid))
			return NONE;
		if (n->op == LENTO_OP_LINK && fid_eq(&n->fid[CML_OBJ], &b->fid))
			count++;
		else if (n->op == LENTO_OP_UNLINK &&
			 fid_eq(&n->fid[CML_OBJ], &b->fid))
			count--;
		else if (n->op == LENTO_OP_RMDIR &&
			 fid_eq(&n->fid[CML_OBJ], &b->fid))
			count = 0;
		else if (n->op == LENTO_OP_RENAME && !is_exchange(n) &&
			 fid_eq(&n->fid[CML_TARGET], &b->fid))
			count = b->kind == K_DIR ? 0 : count - 1;
		if (count < 0)
			return NONE;
		if (!count)
			gone = j;
	}
	return gone;
}

/* Rule 1: cancellation ------------------------------------------------- */

static bool in_c(struct opt *o, const struct lento_fid *f)
{
	uint32_t k = lookup(o, f);

	return k != NONE && o->obj[k].in_c;
}

static void push(struct opt *o, uint32_t k)
{
	if (!o->obj[k].queued) {
		o->obj[k].queued = true;
		o->queue[o->qn++] = k;
	}
}

static void unset(struct opt *o, const struct lento_fid *f)
{
	uint32_t k = lookup(o, f);

	if (k != NONE && o->obj[k].in_c) {
		o->obj[k].in_c = false;
		push(o, k);
	}
}

/* Take out of C what node @i's record does not allow in it. */
static void constrain(struct opt *o, uint32_t i)
{
	struct cml_onode *n = &o->n[i];

	if (is_exchange(n)) {
		for (int s = 0; s < CML_NSLOT; s++)
			unset(o, &n->fid[s]);
	} else if (!in_c(o, &n->fid[CML_OBJ])) {
		unset(o, &n->fid[CML_DIR]);
		unset(o, &n->fid[CML_DIR2]);
	} else if (n->op == LENTO_OP_RENAME && !fid_null(&n->fid[CML_TARGET]) &&
		   !in_c(o, &n->fid[CML_TARGET])) {
		unset(o, &n->fid[CML_DIR2]);
	}
}

/* X in C renamed over T outside C: what is left is T's removal. */
static void rename_to_removal(struct opt *o, uint32_t i)
{
	struct cml_onode *n = &o->n[i];

	n->op = kind_of(o, &n->fid[CML_OBJ]) == K_DIR ? LENTO_OP_RMDIR :
							 LENTO_OP_UNLINK;
	n->flags = n->op == LENTO_OP_UNLINK ? n->flags & LENTO_R_LASTLINK : 0;
	n->fid[CML_DIR] = n->fid[CML_DIR2];
	set_base(o, i, CML_DIR, i, CML_DIR2);
	n->fid[CML_OBJ] = n->fid[CML_TARGET];
	set_base(o, i, CML_OBJ, i, CML_TARGET);
	memset(&n->fid[CML_DIR2], 0, sizeof(n->fid[CML_DIR2]));
	memset(&n->fid[CML_TARGET], 0, sizeof(n->fid[CML_TARGET]));
	reset_base(o, i, CML_DIR2);
	reset_base(o, i, CML_TARGET);
	n->name = n->name2;
	n->name2 = empty_name;
	n->dirty = true;
	o->st->converted++;
}

static void pass_cancel(struct opt *o)
{
	o->qn = 0;
	for (uint32_t k = 0; k < o->nobj; k++) {
		struct oobj *b = &o->obj[k];

		b->in_c = !b->weird && b->kind != K_UNKNOWN &&
			  last_name_gone(o, k) != NONE;
		b->queued = false;
		if (b->in_c)
			push(o, k);
	}
	if (!o->qn)
		return;
	while (o->qn) {
		uint32_t k = o->queue[--o->qn];
		struct oobj *b = &o->obj[k];

		b->queued = false;
		for (uint32_t x = 0; x < b->nocc; x++)
			if (live_names(o, b->occ[x], &b->fid))
				constrain(o, b->occ[x]);
	}
	for (uint32_t i = 0; i < o->count; i++) {
		struct cml_onode *n = &o->n[i];
		bool x, t;

		if (n->dead)
			continue;
		x = in_c(o, &n->fid[CML_OBJ]);
		if (n->op != LENTO_OP_RENAME) {
			if (x) {
				kill(o, i);
				o->st->cancelled++;
			}
			continue;
		}
		if (is_exchange(n))
			continue;
		t = in_c(o, &n->fid[CML_TARGET]);
		if (x && (t || fid_null(&n->fid[CML_TARGET]))) {
			kill(o, i);
			o->st->cancelled++;
		} else if (x) {
			rename_to_removal(o, i);
		} else if (t) {
			memset(&n->fid[CML_TARGET], 0,
			       sizeof(n->fid[CML_TARGET]));
			reset_base(o, i, CML_TARGET);
			n->flags &= (uint16_t)~LENTO_R_LASTLINK;
			n->dirty = true;
			o->st->converted++;
		}
	}
}

/* Rule 2: moot changes of removed objects ------------------------------ */

static void pass_moot(struct opt *o)
{
	for (uint32_t k = 0; k < o->nobj; k++) {
		struct oobj *b = &o->obj[k];
		uint32_t last = NONE, earliest = NONE, x;
		struct cml_onode *n;
		int slot = -1;

		if (b->weird)
			continue;
		for (x = b->nocc; x-- > 0;) {
			if (live_names(o, b->occ[x], &b->fid)) {
				last = b->occ[x];
				break;
			}
		}
		if (last == NONE)
			continue;
		n = &o->n[last];
		if (n->op == LENTO_OP_RMDIR && fid_eq(&n->fid[CML_OBJ], &b->fid))
			slot = CML_OBJ;
		else if (n->op == LENTO_OP_UNLINK &&
			 fid_eq(&n->fid[CML_OBJ], &b->fid) &&
			 ((n->flags & LENTO_R_LASTLINK) ||
			  last_name_gone(o, k) == last))
			slot = CML_OBJ;
		else if (n->op == LENTO_OP_RENAME && !is_exchange(n) &&
			 fid_eq(&n->fid[CML_TARGET], &b->fid) &&
			 !fid_eq(&n->fid[CML_OBJ], &b->fid) &&
			 ((n->flags & LENTO_R_LASTLINK) || b->kind == K_DIR ||
			  last_name_gone(o, k) == last))
			slot = CML_TARGET;
		if (slot < 0)
			continue;
		while (x-- > 0) {
			uint32_t j = b->occ[x];
			struct cml_onode *m = &o->n[j];

			if (!live_names(o, j, &b->fid))
				continue;
			if (!is_state(m->op) ||
			    !fid_eq(&m->fid[CML_OBJ], &b->fid) ||
			    (m->op == LENTO_OP_SETATTR &&
			     (m->attr.valid & LENTO_A_UID)))
				break;
			kill(o, j);
			o->st->moot++;
			earliest = j;
		}
		if (earliest != NONE)
			take_base(o, last, slot, earliest, CML_OBJ);
	}
}

/* Rule 3: rename chains ------------------------------------------------ */

/* Is the name @c of directory @d left alone by the nodes between @p and @r? */
static bool name_untouched(struct opt *o, uint32_t p, uint32_t r,
			   const struct lento_fid *d, const char *c)
{
	struct oobj *b = &o->obj[lookup(o, d)];

	for (uint32_t x = occ_find(b, p + 1); x < b->nocc && b->occ[x] < r;
	     x++) {
		uint32_t j = b->occ[x];
		struct cml_onode *n = &o->n[j];

		if (!spend(o))
			return false;
		if (!live_names(o, j, d))
			continue;
		if (fid_eq(&n->fid[CML_OBJ], d) || fid_eq(&n->fid[CML_TARGET], d))
			return false;
		if (fid_eq(&n->fid[CML_DIR], d) && !strcmp(n->name, c))
			return false;
		if (fid_eq(&n->fid[CML_DIR2], d) && !strcmp(n->name2, c))
			return false;
	}
	return true;
}

/* Is @f named by no node between @p and @r? */
static bool unnamed_between(struct opt *o, uint32_t p, uint32_t r,
			    const struct lento_fid *f)
{
	struct oobj *b = &o->obj[lookup(o, f)];

	for (uint32_t x = occ_find(b, p + 1); x < b->nocc && b->occ[x] < r;
	     x++) {
		if (!spend(o))
			return false;
		if (live_names(o, b->occ[x], f))
			return false;
	}
	return true;
}

/*
 * Does a node between @p and @r change who may write directory @x: its
 * mode, owner, group or ACL? Moving a directory to another parent needs
 * write permission on it, so a chain merged to P's place across such a
 * change is judged with the permissions of before it (a chmod u+w
 * between a rename within the parent and one out of it: EACCES).
 */
static bool access_changed_between(struct opt *o, uint32_t p, uint32_t r,
				   const struct lento_fid *x)
{
	struct oobj *b = &o->obj[lookup(o, x)];

	for (uint32_t at = occ_find(b, p + 1); at < b->nocc && b->occ[at] < r;
	     at++) {
		struct cml_onode *n = &o->n[b->occ[at]];

		if (!spend(o))
			return true;
		if (!live_names(o, b->occ[at], x) ||
		    !fid_eq(&n->fid[CML_OBJ], x))
			continue;
		if (n->op == LENTO_OP_SETATTR &&
		    (n->attr.valid & (LENTO_A_MODE | LENTO_A_UID |
				      LENTO_A_GID)))
			return true;
		if ((n->op == LENTO_OP_SETXATTR ||
		     n->op == LENTO_OP_REMOVEXATTR) &&
		    !strncmp(n->name, "system.posix_acl_", 17))
			return true;
		if (n->op == LENTO_OP_PRUNEXATTRS)
			return true;
	}
	return false;
}

/* The previous namespace record of node @r's object, or NONE. */
static uint32_t previous_place(struct opt *o, uint32_t r)
{
	const struct lento_fid *x = &o->n[r].fid[CML_OBJ];
	struct oobj *b = &o->obj[lookup(o, x)];

	for (uint32_t at = occ_find(b, r); at-- > 0;) {
		uint32_t j = b->occ[at];
		struct cml_onode *n = &o->n[j];

		if (!spend(o))
			return NONE;
		if (!live_names(o, j, x))
			continue;
		if (is_state(n->op) ||
		    (!fid_eq(&n->fid[CML_OBJ], x) &&
		     !fid_eq(&n->fid[CML_TARGET], x)))
			continue;
		return j;
	}
	return NONE;
}

static int merge_rename(struct opt *o, uint32_t r)
{
	struct cml_onode *n = &o->n[r], *p;
	const struct lento_fid *d3 = &n->fid[CML_DIR2];
	const struct lento_fid *t2 = &n->fid[CML_TARGET];
	bool chain;
	uint32_t pi;
	int s, err;

	if (n->op != LENTO_OP_RENAME || is_exchange(n) ||
	    weird(o, &n->fid[CML_OBJ]))
		return 0;
	pi = previous_place(o, r);
	if (pi == NONE)
		return 0;
	p = &o->n[pi];
	if (!same_maker(p, n) || !fid_eq(&p->fid[CML_OBJ], &n->fid[CML_OBJ]))
		return 0;
	if (is_create(p->op) && fid_eq(&p->fid[CML_DIR], &n->fid[CML_DIR]) &&
	    !strcmp(p->name, n->name) && fid_null(t2))
		chain = false;
	else if (p->op == LENTO_OP_RENAME && !is_exchange(p) &&
		 fid_null(&p->fid[CML_TARGET]) &&
		 fid_eq(&p->fid[CML_DIR2], &n->fid[CML_DIR]) &&
		 !strcmp(p->name2, n->name) &&
		 !(fid_eq(d3, &p->fid[CML_DIR]) && !strcmp(n->name2, p->name)) &&
		 (fid_null(t2) || !names(p, t2)))
		chain = true;
	else
		return 0;
	if (kind_of(o, &n->fid[CML_OBJ]) != K_NONDIR &&
	    (o->renames[r] != o->renames[pi + 1] ||
	     (chain && access_changed_between(o, pi, r, &n->fid[CML_OBJ]))))
		return 0;
	if (!name_untouched(o, pi, r, d3, n->name2))
		return 0;
	if (!fid_null(t2) && !unnamed_between(o, pi, r, t2))
		return 0;

	/* c's directory: P's base if P named it, else R's. */
	s = slot_of(o, pi, d3);
	if (chain) {
		if (s >= 0)
			set_base(o, pi, CML_DIR2, pi, s);
		else
			set_base(o, pi, CML_DIR2, r, CML_DIR2);
		p->fid[CML_DIR2] = *d3;
		p->name2 = n->name2;
		p->fid[CML_TARGET] = *t2;
		if (fid_null(t2))
			reset_base(o, pi, CML_TARGET);
		else
			set_base(o, pi, CML_TARGET, r, CML_TARGET);
		p->flags = n->flags;
		p->time_ns = n->time_ns;
		p->attr = n->attr;
		o->st->renames++;
	} else {
		if (s >= 0)
			set_base(o, pi, CML_DIR, pi, s);
		else
			set_base(o, pi, CML_DIR, r, CML_DIR2);
		p->fid[CML_DIR] = *d3;
		p->name = n->name2;
		o->st->creates++;
	}
	p->dirty = true;
	kill(o, r);
	err = add_occ(o, lookup(o, d3), pi);
	if (!err && !fid_null(&p->fid[CML_TARGET]))
		err = add_occ(o, lookup(o, &p->fid[CML_TARGET]), pi);
	return err;
}

static int pass_renames(struct opt *o)
{
	for (uint32_t i = 0; i < o->count && o->budget; i++) {
		int err;

		if (o->n[i].dead)
			continue;
		err = merge_rename(o, i);
		if (err)
			return err;
	}
	return 0;
}

/* Rule 4: stores and attributes ---------------------------------------- */

#define FOLDABLE (LENTO_A_SIZE | LENTO_A_MTIME | LENTO_A_CTIME)

static bool subset(uint32_t a, uint32_t b)
{
	return !(a & ~b);
}

static void merge_attr(struct lento_attr *to, const struct lento_attr *from)
{
	uint32_t add = from->valid & ~to->valid;

	if (add & LENTO_A_MODE)
		to->mode = from->mode;
	if (add & LENTO_A_UID)
		to->uid = from->uid;
	if (add & LENTO_A_GID)
		to->gid = from->gid;
	if (add & LENTO_A_SIZE)
		to->size = from->size;
	if (add & LENTO_A_ATIME)
		to->atime_ns = from->atime_ns;
	if (add & LENTO_A_MTIME)
		to->mtime_ns = from->mtime_ns;
	if (add & LENTO_A_CTIME)
		to->ctime_ns = from->ctime_ns;
	if (add & LENTO_A_RDEV)
		to->rdev = from->rdev;
	to->valid |= from->valid;
}

static void pass_coalesce(struct opt *o)
{
	for (uint32_t k = 0; k < o->nobj; k++) {
		struct oobj *b = &o->obj[k];
		uint32_t prev = NONE, store = NONE;

		if (b->weird)
			continue;
		for (uint32_t x = 0; x < b->nocc; x++) {
			uint32_t j = b->occ[x];
			struct cml_onode *n = &o->n[j], *p;

			if (!live_names(o, j, &b->fid))
				continue;
			p = prev == NONE || o->n[prev].dead ? NULL : &o->n[prev];
			if (n->op == LENTO_OP_STORE) {
				if (p && p->op == LENTO_OP_SETATTR &&
				    (p->attr.valid & LENTO_A_SIZE) &&
				    subset(p->attr.valid, FOLDABLE) &&
				    subset(p->attr.valid, n->attr.valid)) {
					kill(o, prev);
					take_base(o, j, CML_OBJ, prev, CML_OBJ);
					o->st->folded++;
				}
				if (store != NONE && !o->n[store].dead &&
				    subset(o->n[store].attr.valid,
					   n->attr.valid)) {
					kill(o, store);
					take_base(o, j, CML_OBJ, store, CML_OBJ);
					o->st->stores++;
				}
				store = j;
			} else if (n->op == LENTO_OP_SETATTR && p &&
				   p->op == LENTO_OP_SETATTR &&
				   same_maker(p, n) &&
				   !((p->attr.valid & n->attr.valid &
				      LENTO_A_SIZE) &&
				     n->attr.size > p->attr.size)) {
				merge_attr(&n->attr, &p->attr);
				n->dirty = true;
				kill(o, prev);
				take_base(o, j, CML_OBJ, prev, CML_OBJ);
				o->st->setattrs++;
			}
			prev = j;
		}
	}
}

/* The rounds ----------------------------------------------------------- */

static uint32_t count_live(struct opt *o)
{
	uint32_t live = 0;

	for (uint32_t i = 0; i < o->count; i++)
		live += !o->n[i].dead;
	return live;
}

int cml_opt_run(struct cml_onode *nodes, uint32_t count,
		struct cml_opt_stats *st)
{
	struct opt o = { .n = nodes, .count = count, .st = st };
	uint32_t live = count_live(&o);
	int err = 0;

	st->before = live;
	for (int round = 0; round < MAX_ROUNDS && live; round++) {
		uint32_t now;

		err = build(&o);
		if (err)
			break;
		pass_cancel(&o);
		pass_moot(&o);
		err = pass_renames(&o);
		if (err)
			break;
		pass_coalesce(&o);
		now = count_live(&o);
		if (now == live)
			break;
		live = now;
	}
	st->after = count_live(&o);
	clear_index(&o);
	free(o.obj);
	return err;
}
