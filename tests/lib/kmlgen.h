/* SPDX-License-Identifier: MIT */
/*
 * A test helper that writes KML segment files as presto does
 * (protocol/KML.md): a header of 4096 bytes, then records, each with its
 * CRC-32C (from ~0, not inverted) and consecutive sequence numbers.
 */
#ifndef TESTS_KMLGEN_H
#define TESTS_KMLGEN_H

#include <stddef.h>
#include <stdint.h>

#include "kml.h"

struct kmlgen {
	int dirfd;
	int fd;			/* the segment being written, -1 none */
	uint64_t segno;
	uint64_t next_seq;
	uint64_t off;		/* where the next record goes */
};

/* A record to write: what kml_record says, as plain values. */
struct kmlgen_rec {
	uint16_t op, flags;
	uint32_t uid, gid;
	int64_t time_ns;
	struct kml_fh fh[PRESTO_KML_NFH];
	struct kml_attr attr;
	const char *name, *name2;	/* NULL: none */
	const void *data;
	size_t data_len;
	const uint32_t *groups;		/* ngroups supplementary groups */
	uint16_t ngroups;
};

/* Segments in the directory @dir (made if missing). 0 or -errno. */
int kmlgen_open(struct kmlgen *g, const char *dir);
/* A new segment @segno whose first record is the next one. */
int kmlgen_segment(struct kmlgen *g, uint64_t segno);
/* Append @r: its sequence number (> 0), or -errno. */
int64_t kmlgen_append(struct kmlgen *g, const struct kmlgen_rec *r);
void kmlgen_close(struct kmlgen *g);

#endif
