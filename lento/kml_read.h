/* SPDX-License-Identifier: MIT */
/*
 * Reading a fileset's journal (protocol/KML.md, "Reading the log") from
 * its segment files CACHE/VOLUME/.presto/kml.NNNNNNNN, on lento's
 * io_uring loop: the records' bytes come in by lo_file_read(), a chunk
 * at a time, and are decoded by protocol/kml.c. A segment's header is
 * read with pread() when the reader moves to it (once per 4 MiB).
 *
 * The reader starts at a sequence number (the one after what lento
 * consumed) and hands out records in order, never one past the limit it
 * is given (presto's KML_DURABLE): what lies beyond may still be lost in
 * a crash and its number given to another record.
 *
 * One owner, one thread. Every function returns 0 (or 1) or -errno and
 * prints nothing.
 */
#ifndef LENTO_KML_READ_H
#define LENTO_KML_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "kml.h"
#include "loop.h"

#define KREAD_CHUNK	(256u << 10)	/* > KML_REC_MAX: a record fits */

struct kread;

/*
 * A reader of the segments in the directory @dir (an absolute path, or
 * relative to the current directory) from record @next_seq on.
 */
int kread_new(struct lo_loop *loop, const char *dir, uint64_t next_seq,
	      struct kread **out);
/* Frees it now, or when the read in flight ends. */
void kread_free(struct kread *kr);

/*
 * The next record, if it is at most @limit: 1 with @r (its names and
 * data valid until the next call), 0 when it is past @limit or its bytes
 * are not read yet (kread_busy() says which: a read is in flight and
 * @more will run when it is done), -errno when the log cannot be read
 * (-ENODATA: a record at most @limit is not in any segment; -EBADMSG with
 * @why: a damaged record).
 */
int kread_next(struct kread *kr, uint64_t limit, struct kml_record *r,
	       const char **why, lo_file_fn more, void *arg);
bool kread_busy(const struct kread *kr);
/* The sequence number of the next record it will hand out. */
uint64_t kread_pos(const struct kread *kr);
/*
 * The bytes of the record kread_next() last handed out (its len of
 * them), valid as long as its names and data are.
 */
const void *kread_raw(const struct kread *kr);
/* Which segment it reads (0: none yet). */
uint64_t kread_segno(const struct kread *kr);

#endif /* LENTO_KML_READ_H */
