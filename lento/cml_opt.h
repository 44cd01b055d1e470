/* SPDX-License-Identifier: MIT */
/*
 * The CML optimiser's working form (internal to lento/cml.c and
 * lento/cml_opt.c): one node per pending record, in record order. cml.c
 * loads the nodes, cml_opt_run() marks nodes dead or rewrites them, and
 * cml.c writes the result back.
 */
#ifndef LENTO_CML_OPT_H
#define LENTO_CML_OPT_H

#include <stdbool.h>
#include <stdint.h>

#include "cml.h"

/* The object slots of a record, in the order of struct lento_rec's. */
enum {
	CML_DIR,
	CML_OBJ,
	CML_DIR2,
	CML_TARGET,
	CML_NSLOT,
};

struct cml_onode {
	uint64_t recno;
	uint16_t op;
	uint16_t flags;
	/*
	 * The maker: uid, gid, and ngroups little-endian u32 supplementary
	 * groups (owned by the loader). The optimiser compares them and
	 * never changes them: cml.c does not write them back.
	 */
	uint32_t uid, gid;
	const uint8_t *groups;
	uint16_t ngroups;
	int64_t time_ns;
	struct lento_fid fid[CML_NSLOT];	/* null: slot unused */
	uint8_t type;
	struct lento_attr attr;
	/* NUL-terminated; owned by the loader, may point at another node's */
	const char *name, *name2;
	/*
	 * Where each slot's base version comes from: a node and slot of the
	 * log as it was loaded (initially the node itself, same slot).
	 */
	uint32_t base_node[CML_NSLOT];
	uint8_t base_slot[CML_NSLOT];
	bool dead;		/* to be deleted */
	bool dirty;		/* to be rewritten */
};

/*
 * Optimise @n nodes in place. Adds its counts to @st (not NULL), fills in
 * st->before and st->after. -ENOMEM only; the nodes are then unchanged in
 * meaning (some may be rewritten, all soundly) but should be discarded.
 */
int cml_opt_run(struct cml_onode *nodes, uint32_t n, struct cml_opt_stats *st);

#endif /* LENTO_CML_OPT_H */
