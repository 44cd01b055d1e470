// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel modification log (KML) of a fileset, as protocol/KML.md
 * specifies it: segment files CACHE/.presto/kml.NNNNNNNN of records with
 * a sequence number and a CRC each.
 *
 * A change never does file I/O under the VFS locks (a write there would
 * take the lower's freeze protection inside presto's locks, apply the
 * caller's RLIMIT_FSIZE and nest inode locks of one class). Instead:
 *
 *  - before the change, presto_kml_alloc() reserves room for its record:
 *    in memory (the entry itself) and on disk (bytes of preallocated
 *    segment space, and bytes under the log's limit). A change whose
 *    record has no room is refused before it is done;
 *  - under the locks that order the change, presto_kml_commit() gives the
 *    record its sequence number and queues it: only a spinlock;
 *  - the journal thread writes queued records to the current segment with
 *    its own credentials and limits, freeze protection outermost, keeps a
 *    spare segment preallocated, syncs when someone waits (fsync, syncfs)
 *    or every few seconds, and retires segments the consumer has
 *    acknowledged.
 *
 * Every segment but the current one is complete and synced, so the log is
 * durable up to durable_seq once the current segment is synced.
 *
 * A record on disk is not yet a record a consumer may act on: the change
 * it describes is in the lower's running jbd2 transaction, or a later
 * one, until that commits, and a crash before then keeps the record and
 * loses the change. lento would have shipped a change the cache no longer
 * has. So a sync of the segment commits the lower's running transaction
 * too (presto_journal_sync_cur()), and only such a sync moves stable_seq,
 * the point lento may read to. fsync's cheaper way (below) moves
 * durable_seq alone.
 *
 * fsync of a file must make its records durable too, and a sync of the
 * segment costs a jbd2 commit and two cache flushes on top of the file's
 * own. So a segment is initialised whole before it is used: zeros written
 * over its preallocated room when it is made, committed by the sync of its
 * header. Records written there change no metadata, and once written back
 * they are durable at the next cache flush -- which the fsync of the lower
 * file that follows always issues (presto_journal_wait_written()). Zeroing
 * as the records advance would cost a commit of its own every few hundred
 * KiB of log, in the middle of the changes being logged.
 */
#include <crypto/hash.h>
#include <linux/crc32.h>
#include <linux/cred.h>
#include <linux/falloc.h>
#include <linux/freezer.h>
#include <linux/kthread.h>
#include <linux/namei.h>
#include <linux/pagemap.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <asm/unaligned.h>
#include "presto.h"

#define PRESTO_KML_SEG_SIZE	(4ULL << 20)
#define PRESTO_KML_REC_MAX	ALIGN(sizeof(struct presto_kml_rec) +	\
				      2 * PRESTO_KML_NAME_MAX +		\
				      PRESTO_KML_DATA_MAX +		\
				      4 * PRESTO_KML_GROUPS_MAX,	\
				      PRESTO_KML_ALIGN)
#define PRESTO_KML_BUF_SIZE	(256U << 10)
/* What the mount scan reads at a time: at least two whole records. */
#define PRESTO_KML_SCAN_BUF	(256U << 10)
/* What a segment's room is zeroed with at a time. */
#define PRESTO_KML_ZERO_CHUNK	(64U << 10)
/* Queued bytes that wake the thread before its next round. */
#define PRESTO_KML_WAKE_BYTES	(1U << 20)
/*
 * Room only records owed for changes already made (STOREs at close) may
 * use, so that they never find the log full.
 */
#define PRESTO_KML_FORCE_ROOM	(256U << 10)
/*
 * Records reach the disk within five seconds, as ext4's own changes do.
 * They are written to the segment no sooner than they are synced unless
 * many are queued: each round that writes records after new intent marks
 * were set costs a jbd2 commit first (presto_intent_commit()).
 */
#define PRESTO_KML_SYNC		(5 * HZ)

struct presto_kml_seg {
	struct list_head list;
	u64 segno;
	u64 first_seq;		/* of its first record */
	u64 size;		/* bytes preallocated, header included */
	u64 used;		/* bytes written, header included */
	u64 zero_end;		/* zeros written up to here (0: not yet) */
	u64 zeroed;		/* initialised and committed up to here */
	struct file *file;	/* open while current or spare */
};

struct presto_journal {
	struct super_block *sb;
	struct path dir;		/* CACHE/.presto on the private mount */
	struct task_struct *thread;
	wait_queue_head_t wait;		/* the thread waits for work here */
	wait_queue_head_t done;		/* callers wait for the thread here */

	spinlock_t lock;		/* everything below */
	struct list_head queue;		/* committed records, in seq order */
	u64 queued_bytes;
	u64 next_seq;
	u64 written_seq;		/* handed to the current segment */
	u64 durable_seq;		/* synced */
	u64 stable_seq;			/* and the changes committed: lento's */
	u64 acked_seq;			/* consumed; may be retired */
	u64 sync_want;			/* someone waits for this to be durable */
	u64 wb_want;			/* ... for this to be written back */
	u64 wb_seq;			/* written back where no metadata moves */
	u64 reserved;			/* bytes of records not yet written */
	u64 avail;			/* bytes that may be reserved */
	u64 disk_bytes;			/* bytes in segments not retired */
	u64 limit;
	bool want_spare;
	bool retire_want;		/* an ack moved: retire what it can */
	unsigned int room_gen;		/* bumped whenever room may appear */
	unsigned int spare_gen;		/* bumped when a spare is made or not */
	int spare_err;			/* the last attempt's error, or 0 */
	int error;			/* the log is broken: refuse changes */
	u64 nsegs;
	u64 first_segno;
	u64 oldest_seq;			/* oldest pending record, or 0 */
	u64 oldest_ns;			/* its time (an upper bound) */

	/* The thread's own. */
	struct list_head segs;		/* by segno; the last is current */
	struct presto_kml_seg *cur;
	struct presto_kml_seg *spare;
	unsigned long last_sync;
	void *buf;
	struct crypto_shash *crc;	/* "crc32c": the CPU's, if it has one */
};

/*
 * CRC-32C from ~0, not inverted at the end (KML.md): the crypto API's
 * "crc32c" updated from that seed, as ext4 and jbd2 do, which is the
 * CPU's instruction where there is one; else lib/crc32.c's table.
 */
static u32 presto_kml_crc(struct presto_journal *j, const void *p,
			  size_t len)
{
	if (j->crc) {
		SHASH_DESC_ON_STACK(desc, j->crc);

		desc->tfm = j->crc;
		*(u32 *)shash_desc_ctx(desc) = ~0U;
		if (!crypto_shash_update(desc, p, len))
			return *(u32 *)shash_desc_ctx(desc);
	}
	return __crc32c_le(~0U, p, len);
}

/* A record's len (KML.md): the header, its bytes, padded. */
static size_t presto_kml_rec_size(size_t name_len, size_t name2_len,
				  size_t data_len, unsigned int ngroups)
{
	return ALIGN(sizeof(struct presto_kml_rec) + name_len + name2_len +
		     data_len + 4 * (size_t)ngroups, PRESTO_KML_ALIGN);
}

static u64 presto_seg_room(const struct presto_kml_seg *s)
{
	u64 free = s->size - s->used;

	return free > PRESTO_KML_REC_MAX ? free - PRESTO_KML_REC_MAX : 0;
}

/* Under j->lock: what may still be reserved. */
static void presto_journal_update_avail(struct presto_journal *j)
{
	j->avail = (j->cur ? presto_seg_room(j->cur) : 0) +
		   (j->spare ? presto_seg_room(j->spare) : 0);
}

static bool presto_journal_urgent(struct presto_journal *j)
{
	bool urgent;

	spin_lock(&j->lock);
	/* A broken log has nothing left to do but wait for the umount. */
	urgent = !j->error &&
		 (j->want_spare || j->retire_want ||
		  j->queued_bytes >= PRESTO_KML_WAKE_BYTES ||
		  ((j->sync_want > j->stable_seq ||
		    j->wb_want > max(j->durable_seq, j->wb_seq)) &&
		   (j->written_seq > j->stable_seq || !list_empty(&j->queue))));
	spin_unlock(&j->lock);
	return urgent;
}

static void presto_seg_name(char *name, size_t size, u64 segno)
{
	snprintf(name, size, "kml.%08llu", segno);
}

/*
 * From the journal thread (its limits, not a user's): write zeros over
 * @s's room past its records, and start writing them back. The next sync
 * of the segment commits them -- of a spare, the sync of its header --
 * after which records written there move no metadata. What could not be
 * zeroed (an I/O error) is left out: an fsync with records there syncs
 * the segment instead (presto_journal_write_back()).
 */
static void presto_seg_zero(struct presto_kml_seg *s)
{
	loff_t pos = max(s->used, PRESTO_KML_HDR_SIZE);
	void *zeros;
	ssize_t ret;

	s->zero_end = pos;
	zeros = kvzalloc(PRESTO_KML_ZERO_CHUNK, GFP_KERNEL);
	if (!zeros)
		return;
	while (pos < s->size) {
		ret = kernel_write(s->file, zeros,
				   min_t(u64, PRESTO_KML_ZERO_CHUNK,
					 s->size - pos), &pos);
		if (ret <= 0)
			break;
	}
	kvfree(zeros);
	s->zero_end = pos;
	filemap_fdatawrite(s->file->f_mapping);
}

/* Create and preallocate segment @segno; no header yet. */
static struct presto_kml_seg *presto_seg_create(struct presto_journal *j,
						u64 segno)
{
	struct presto_kml_seg *s;
	char name[32];
	int err;

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return ERR_PTR(-ENOMEM);
	presto_seg_name(name, sizeof(name), segno);
	s->file = file_open_root(&j->dir, name, O_RDWR | O_CREAT | O_EXCL |
				 O_NOATIME | O_LARGEFILE | FMODE_NONOTIFY,
				 0600);
	if (IS_ERR(s->file)) {
		err = PTR_ERR(s->file);
		kfree(s);
		return ERR_PTR(err);
	}
	/* Writes to the log need not move its times: no metadata to commit. */
	s->file->f_mode |= FMODE_NOCMTIME;
	s->segno = segno;
	s->used = PRESTO_KML_HDR_SIZE;
	s->size = PRESTO_KML_HDR_SIZE;
	/* KEEP_SIZE: the file's size says how much of it holds records. */
	err = vfs_fallocate(s->file, FALLOC_FL_KEEP_SIZE, 0,
			    PRESTO_KML_SEG_SIZE);
	if (!err)
		s->size = PRESTO_KML_SEG_SIZE;
	else if (err != -ENOSPC && err != -EDQUOT)
		pr_warn_ratelimited("presto: cannot preallocate %s (error %d)\n",
				    name, err);
	return s;
}

/*
 * Give back a segment's preallocated room past its last record. ext4
 * frees blocks past the end of the file on a truncate to the same size;
 * to a smaller one, it cuts a torn tail.
 */
static int presto_seg_trim(const struct path *path, u64 used)
{
	int err = vfs_truncate(path, used);

	if (err)
		pr_warn("presto: cannot trim log segment %pd to %llu bytes (error %d)\n",
			path->dentry, used, err);
	return err;
}

static int presto_seg_unlink(struct presto_journal *j, u64 segno)
{
	char name[32];

	presto_seg_name(name, sizeof(name), segno);
	return presto_private_unlink(&j->dir, name);
}

static void presto_seg_drop(struct presto_journal *j, struct presto_kml_seg *s)
{
	int err;

	if (s->file)
		fput(s->file);
	err = presto_seg_unlink(j, s->segno);
	if (err)
		pr_warn("presto: cannot remove log segment %llu (error %d)\n",
			s->segno, err);
	kfree(s);
}

/* Make a spare segment if there is none; answer whoever asked. */
static void presto_journal_make_spare(struct presto_journal *j)
{
	struct presto_kml_seg *s = NULL;
	int err = 0;

	if (!j->spare) {
		s = presto_seg_create(j, j->cur->segno + 1);
		if (IS_ERR(s)) {
			err = PTR_ERR(s);
			s = NULL;
		} else if (s->size == PRESTO_KML_HDR_SIZE) {
			/* No room on disk: a spare without room is no spare. */
			err = -ENOSPC;
			presto_seg_drop(j, s);
			s = NULL;
		} else {
			presto_seg_zero(s);
		}
	}
	spin_lock(&j->lock);
	if (s) {
		j->spare = s;
		j->nsegs++;
	}
	presto_journal_update_avail(j);
	j->want_spare = false;
	j->spare_err = err;
	/*
	 * An answer either way. A spare already there is no news for room,
	 * which then comes from writing (a roll) or from reservations given
	 * back (presto_journal_reserve() tells which it can wait for).
	 */
	j->spare_gen++;
	if (s || err)
		j->room_gen++;
	spin_unlock(&j->lock);
	wake_up_all(&j->done);
}

/*
 * Dirty a segment's lower inode, so that its full fsync commits the
 * lower's running transaction, whatever else it holds: of the current
 * segment, every change whose record is written (presto_kml_log() follows
 * the lower operation, so its metadata is in that transaction or an
 * earlier one); of a new segment, the trim of the one before.
 */
static void presto_seg_touch(struct presto_kml_seg *s)
{
	struct inode *inode = file_inode(s->file);

	sb_start_write(inode->i_sb);
	mark_inode_dirty(inode);
	sb_end_write(inode->i_sb);
}

static int presto_seg_write_header(struct presto_journal *j,
				   struct presto_kml_seg *s, u64 first_seq)
{
	struct presto_kml_seg_hdr *h;
	loff_t pos = 0;
	ssize_t ret;

	h = kzalloc(PRESTO_KML_HDR_SIZE, GFP_KERNEL);
	if (!h)
		return -ENOMEM;
	memcpy(h->magic, PRESTO_KML_MAGIC, sizeof(h->magic));
	h->version = cpu_to_le32(PRESTO_KML_VERSION);
	h->hdr_size = cpu_to_le32(PRESTO_KML_HDR_SIZE);
	h->segno = cpu_to_le64(s->segno);
	h->first_seq = cpu_to_le64(first_seq);
	h->seg_size = cpu_to_le64(s->size);
	h->crc = cpu_to_le32(presto_kml_crc(j, h, offsetof(typeof(*h), crc)));
	ret = kernel_write(s->file, h, PRESTO_KML_HDR_SIZE, &pos);
	kfree(h);
	if (ret < 0)
		return ret;
	if (ret != PRESTO_KML_HDR_SIZE)
		return -EIO;
	/*
	 * On disk before the segment is used: it carries the numbering on
	 * once older segments are retired, and a crash must not leave a
	 * segment whose size is there and whose header is not. The full
	 * fsync commits the zeros after it and the size they gave the file,
	 * and with the inode dirty, the running transaction: a zeroed
	 * header block moves no metadata of its own.
	 */
	presto_seg_touch(s);
	ret = vfs_fsync(s->file, 0);
	if (ret)
		return ret;
	s->first_seq = first_seq;
	s->zeroed = max_t(u64, s->zero_end, PRESTO_KML_HDR_SIZE);
	return 0;
}

static int presto_journal_sync_cur(struct presto_journal *j)
{
	u64 seq;
	bool news;
	int err;

	spin_lock(&j->lock);
	seq = j->written_seq;
	spin_unlock(&j->lock);
	presto_seg_touch(j->cur);
	err = vfs_fsync(j->cur->file, 0);
	if (err)
		return err;
	j->last_sync = jiffies;
	spin_lock(&j->lock);
	news = seq > j->stable_seq;
	j->durable_seq = max(j->durable_seq, seq);
	j->stable_seq = max(j->stable_seq, seq);
	spin_unlock(&j->lock);
	wake_up_all(&j->done);
	presto_intent_durable(j->sb, seq);
	if (news)
		presto_fileset_kml_durable(j->sb);
	return 0;
}

/* Finish the current segment and start the spare with @first_seq. */
static int presto_journal_roll(struct presto_journal *j, u64 first_seq)
{
	struct presto_kml_seg *old = j->cur;
	int err;

	err = presto_journal_sync_cur(j);
	if (err)
		return err;
	if (!j->spare) {
		presto_journal_make_spare(j);
		if (!j->spare)
			return j->spare_err ? j->spare_err : -ENOSPC;
	}
	/* Before the new header's sync, which commits the trim too. */
	presto_seg_trim(&old->file->f_path, old->used);
	err = presto_seg_write_header(j, j->spare, first_seq);
	if (err)
		return err;
	fput(old->file);
	old->file = NULL;
	list_add_tail(&j->spare->list, &j->segs);
	spin_lock(&j->lock);
	j->cur = j->spare;
	j->spare = NULL;
	j->disk_bytes += j->cur->used;
	presto_journal_update_avail(j);
	j->room_gen++;
	spin_unlock(&j->lock);
	return 0;
}

static int presto_journal_flush_buf(struct presto_journal *j, size_t len,
				    u64 last_seq)
{
	loff_t pos = j->cur->used;
	ssize_t ret;

	if (!len)
		return 0;
	ret = kernel_write(j->cur->file, j->buf, len, &pos);
	if (ret >= 0 && ret != len)
		ret = -EIO;
	if (ret < 0)
		return ret;
	j->cur->used += len;
	spin_lock(&j->lock);
	j->written_seq = last_seq;
	j->reserved -= len;
	j->queued_bytes -= len;
	j->disk_bytes += len;
	presto_journal_update_avail(j);
	j->room_gen++;
	spin_unlock(&j->lock);
	wake_up_all(&j->done);
	return 0;
}

/* Write every queued record to the log. */
static int presto_journal_write(struct presto_journal *j)
{
	struct presto_kml_entry *e, *next;
	LIST_HEAD(batch);
	size_t len = 0;
	u64 last = 0;
	int err;

	spin_lock(&j->lock);
	list_splice_init(&j->queue, &batch);
	spin_unlock(&j->lock);
	/* The marks of their changes reach the disk first. */
	err = presto_intent_commit(j->sb);

	list_for_each_entry_safe(e, next, &batch, list) {
		u64 seq = le64_to_cpu(e->rec.seq);

		if (!err && (len + e->size > PRESTO_KML_BUF_SIZE ||
			     j->cur->used + len + e->size > j->cur->size)) {
			err = presto_journal_flush_buf(j, len, last);
			len = 0;
			if (!err && j->cur->used + e->size > j->cur->size)
				err = presto_journal_roll(j, seq);
		}
		if (!err) {
			e->rec.crc = cpu_to_le32(presto_kml_crc(j, &e->rec,
								e->size));
			memcpy(j->buf + len, &e->rec, e->size);
			len += e->size;
			last = seq;
		}
		list_del(&e->list);
		kvfree(e);
	}
	if (!err)
		err = presto_journal_flush_buf(j, len, last);
	return err;
}

/*
 * Write back the current segment's records for someone who waits for
 * them: where they lie in its initialised part, writing back is all they
 * need before a cache flush; elsewhere, the segment is synced.
 */
static int presto_journal_write_back(struct presto_journal *j)
{
	struct presto_kml_seg *s = j->cur;
	u64 seq;
	int err;

	spin_lock(&j->lock);
	seq = j->written_seq;
	spin_unlock(&j->lock);
	if (s->used > s->zeroed)
		return presto_journal_sync_cur(j);
	err = filemap_write_and_wait_range(s->file->f_mapping,
					   PRESTO_KML_HDR_SIZE, s->used - 1);
	if (err)
		return err;
	spin_lock(&j->lock);
	j->wb_seq = max(j->wb_seq, seq);
	spin_unlock(&j->lock);
	wake_up_all(&j->done);
	return 0;
}

/* Remove the segments whose records are all acknowledged. */
static void presto_journal_retire(struct presto_journal *j)
{
	struct presto_kml_seg *s, *next;
	u64 acked;

	spin_lock(&j->lock);
	acked = j->acked_seq;
	j->retire_want = false;
	spin_unlock(&j->lock);
	list_for_each_entry_safe(s, next, &j->segs, list) {
		/* The current segment stays: it carries the numbering on. */
		if (s == j->cur || next->first_seq - 1 > acked)
			break;
		list_del(&s->list);
		spin_lock(&j->lock);
		j->disk_bytes -= s->used;
		j->nsegs--;
		j->first_segno = next->segno;
		j->room_gen++;
		spin_unlock(&j->lock);
		wake_up_all(&j->done);
		presto_seg_drop(j, s);
	}
}

/*
 * A spare is due, or someone waits for room. With the spare there and
 * nothing queued, what the current segment holds comes back only by
 * moving on to the spare: do that now if it holds records, rather than
 * let a change be refused with half of the log's reach spent on them.
 */
static int presto_journal_make_room(struct presto_journal *j)
{
	bool roll;
	u64 first;
	int err;

	spin_lock(&j->lock);
	roll = j->want_spare && j->spare && !j->queued_bytes &&
	       j->cur->used > PRESTO_KML_HDR_SIZE;
	first = j->written_seq + 1;
	spin_unlock(&j->lock);
	if (roll) {
		err = presto_journal_roll(j, first);
		if (err)
			return err;
	}
	presto_journal_make_spare(j);
	return 0;
}

static void presto_journal_fail(struct presto_journal *j, int err)
{
	struct presto_kml_entry *e, *next;
	LIST_HEAD(lost);

	pr_err("presto: %s: the log cannot be written (error %d); changes are refused until it is remounted\n",
	       presto_sb(j->sb)->lower_name, err);
	spin_lock(&j->lock);
	j->error = err;
	list_splice_init(&j->queue, &lost);
	spin_unlock(&j->lock);
	list_for_each_entry_safe(e, next, &lost, list)
		kvfree(e);
	wake_up_all(&j->done);
}

static void presto_journal_work(struct presto_journal *j, bool stop,
				bool timed_out)
{
	bool spare, write, sync, wb;
	int err = 0;

	spin_lock(&j->lock);
	if (j->error) {
		spin_unlock(&j->lock);
		return;
	}
	/* Keep a spare ready once the current segment is half full. */
	spare = !stop && (j->want_spare ||
			  (!j->spare && j->cur->used > j->cur->size / 2));
	write = !list_empty(&j->queue);
	spin_unlock(&j->lock);

	if (spare)
		err = presto_journal_make_room(j);
	if (!err && write)
		err = presto_journal_write(j);
	/* The segment a mount began is zeroed once the thread runs. */
	if (!err && !stop && !j->cur->zero_end) {
		presto_seg_zero(j->cur);
		err = presto_journal_sync_cur(j);
		if (!err)
			j->cur->zeroed = j->cur->zero_end;
	}
	spin_lock(&j->lock);
	sync = j->written_seq > j->stable_seq &&
	       (j->sync_want > j->stable_seq || stop || timed_out ||
		time_after(jiffies, j->last_sync + PRESTO_KML_SYNC));
	wb = !sync && j->wb_want > max(j->durable_seq, j->wb_seq);
	spin_unlock(&j->lock);
	if (!err && sync)
		err = presto_journal_sync_cur(j);
	if (!err && wb)
		err = presto_journal_write_back(j);
	if (err) {
		presto_journal_fail(j, err);
		return;
	}
	presto_journal_retire(j);
}

/*
 * How long the thread may sleep: until the periodic sync is due, if
 * anything waits for one (records are synced within PRESTO_KML_SYNC of
 * the last sync, even when a round in between wrote them).
 */
static long presto_journal_timeout(struct presto_journal *j)
{
	long left = PRESTO_KML_SYNC;

	spin_lock(&j->lock);
	/* A broken log has nothing to sync. */
	if (!j->error &&
	    (j->written_seq > j->stable_seq || !list_empty(&j->queue)))
		left = clamp_t(long, (long)(j->last_sync + PRESTO_KML_SYNC -
					     jiffies), 1, PRESTO_KML_SYNC);
	spin_unlock(&j->lock);
	return left;
}

static int presto_journal_thread(void *data)
{
	struct presto_journal *j = data;
	bool stop;
	long left;

	set_freezable();
	do {
		left = wait_event_freezable_timeout(j->wait,
						    presto_journal_urgent(j) ||
						    kthread_should_stop(),
						    presto_journal_timeout(j));
		stop = kthread_should_stop();
		presto_journal_work(j, stop, !left);
	} while (!stop);
	return 0;
}

/*
 * Reserve room for a record of @size bytes, waiting for room if need be:
 * for the thread to write what is queued or to preallocate a spare.
 * @force is for a record owed for a change already made: it neither waits
 * nor minds the log's limit.
 */
static int presto_journal_reserve(struct presto_journal *j, u32 size,
				  bool force)
{
	unsigned int room_gen, spare_gen = 0;
	bool asked = false;
	int err;

	if (force) {
		/* Never waits: the thread makes room when it writes. */
		spin_lock(&j->lock);
		err = j->error;
		if (!err)
			j->reserved += size;
		spin_unlock(&j->lock);
		return err;
	}
	for (;;) {
		spin_lock(&j->lock);
		err = j->error;
		if (err)
			break;
		if (j->disk_bytes + j->reserved + size > j->limit) {
			spin_unlock(&j->lock);
			pr_warn_ratelimited("presto: %s: the log is at its limit of %llu MiB; nothing consumes it\n",
					    presto_sb(j->sb)->lower_name,
					    j->limit >> 20);
			return -ENOSPC;
		}
		if (j->reserved + size + PRESTO_KML_FORCE_ROOM <= j->avail) {
			j->reserved += size;
			break;
		}
		/* The thread answered since we asked, and made no room. */
		if (asked && j->spare_gen != spare_gen) {
			/* It could not make a spare. */
			err = j->spare_err;
			if (err)
				break;
			/*
			 * A spare is there, nothing is left to write (nor
			 * being written, which may roll) and the thread moved
			 * on to the spare if that made room
			 * (presto_journal_make_room()): the room is all
			 * promised to changes under way and to the STOREs of
			 * files open for writing, and comes back only as they
			 * close. Refused, not left to wait on whoever holds
			 * them.
			 */
			if (!j->queued_bytes) {
				spin_unlock(&j->lock);
				pr_warn_ratelimited("presto: %s: the log's room (%llu KiB) is all reserved, by files open for writing and changes under way\n",
						    presto_sb(j->sb)->lower_name,
						    j->avail >> 10);
				return -ENOSPC;
			}
		}
		room_gen = j->room_gen;
		spare_gen = j->spare_gen;
		asked = true;
		j->want_spare = true;
		spin_unlock(&j->lock);
		wake_up(&j->wait);
		/* A log that breaks meanwhile makes no room: its error. */
		err = wait_event_killable(j->done,
					  READ_ONCE(j->room_gen) != room_gen ||
					  READ_ONCE(j->spare_gen) != spare_gen ||
					  READ_ONCE(j->error));
		if (err)
			return err;
	}
	spin_unlock(&j->lock);
	return err;
}

static void presto_journal_unreserve(struct presto_journal *j, u32 size)
{
	spin_lock(&j->lock);
	j->reserved -= size;
	j->room_gen++;
	spin_unlock(&j->lock);
	wake_up_all(&j->done);
}

/*
 * The supplementary groups a record made with @cred carries: none for
 * fsuid 0, which the server lets do anything; else the first
 * PRESTO_KML_GROUPS_MAX.
 */
static unsigned int presto_kml_ngroups(const struct cred *cred)
{
	if (uid_eq(cred->fsuid, GLOBAL_ROOT_UID))
		return 0;
	return min_t(unsigned int, cred->group_info->ngroups,
		     PRESTO_KML_GROUPS_MAX);
}

/* @e's maker, @cred: its fsuid, fsgid and @ngroups groups after @off. */
static void presto_kml_set_cred(struct presto_kml_entry *e,
				const struct cred *cred, size_t off,
				unsigned int ngroups)
{
	const struct group_info *gi = cred->group_info;
	u8 *p = (u8 *)&e->rec + off;
	unsigned int i;

	e->rec.uid = cpu_to_le32(from_kuid(&init_user_ns, cred->fsuid));
	e->rec.gid = cpu_to_le32(from_kgid(&init_user_ns, cred->fsgid));
	e->rec.ngroups = cpu_to_le16(ngroups);
	if (ngroups && gi->ngroups > ngroups)
		e->rec.flags = cpu_to_le16(PRESTO_KML_F_GROUPS_CUT);
	for (i = 0; i < ngroups; i++)
		put_unaligned_le32(from_kgid(&init_user_ns, gi->gid[i]),
				   p + 4 * i);
}

/*
 * Reserve a record of operation @op with room for names and data of the
 * lengths given, made by @cred: its ids and groups are set here, the
 * rest when it is logged. @force: owed for a change already made.
 */
struct presto_kml_entry *presto_kml_alloc(struct super_block *sb,
					  enum presto_kml_op op,
					  size_t name_len, size_t name2_len,
					  size_t data_len, bool force,
					  const struct cred *cred)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	unsigned int ngroups = presto_kml_ngroups(cred);
	size_t body = sizeof(struct presto_kml_rec) + name_len + name2_len +
		      data_len;
	struct presto_kml_entry *e;
	size_t size;
	int err;

	if (WARN_ON_ONCE(name_len > PRESTO_KML_NAME_MAX ||
			 name2_len > PRESTO_KML_NAME_MAX ||
			 data_len > PRESTO_KML_DATA_MAX))
		return ERR_PTR(-EINVAL);
	size = presto_kml_rec_size(name_len, name2_len, data_len, ngroups);
	/* A STORE at close: small (the groups' 1 KiB at most), and owed. */
	if (force && !data_len)
		e = kzalloc(offsetof(struct presto_kml_entry, rec) + size,
			    GFP_KERNEL | __GFP_NOFAIL);
	else
		e = kvzalloc(offsetof(struct presto_kml_entry, rec) + size,
			     GFP_KERNEL);
	if (!e)
		return ERR_PTR(-ENOMEM);
	err = presto_journal_reserve(j, size, force);
	if (err) {
		kvfree(e);
		return ERR_PTR(err);
	}
	e->size = size;
	e->rec.len = cpu_to_le32(size);
	e->rec.op = cpu_to_le16(op);
	e->rec.name_len = cpu_to_le16(name_len);
	e->rec.name2_len = cpu_to_le16(name2_len);
	e->rec.data_len = cpu_to_le32(data_len);
	presto_kml_set_cred(e, cred, body, ngroups);
	return e;
}

void presto_kml_free(struct super_block *sb, struct presto_kml_entry *e)
{
	if (!e)
		return;
	presto_journal_unreserve(presto_sb(sb)->journal, e->size);
	kvfree(e);
}

u64 presto_kml_commit(struct super_block *sb, struct presto_kml_entry *e)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	bool wake;
	u64 seq;

	/* Coarse: a clock read per record is costly where the clock is slow. */
	e->rec.time_ns = cpu_to_le64(ktime_get_coarse_real_ns());
	spin_lock(&j->lock);
	seq = j->next_seq++;
	e->rec.seq = cpu_to_le64(seq);
	list_add_tail(&e->list, &j->queue);
	j->queued_bytes += e->size;
	if (!j->oldest_seq) {
		j->oldest_seq = seq;
		j->oldest_ns = le64_to_cpu(e->rec.time_ns);
	}
	wake = j->queued_bytes >= PRESTO_KML_WAKE_BYTES;
	spin_unlock(&j->lock);
	if (wake)
		wake_up(&j->wait);
	return seq;
}

/* Where @r's groups are: after its names and data (KML.md). */
static const u8 *presto_kml_groups(const struct presto_kml_rec *r)
{
	return (const u8 *)(r + 1) + le16_to_cpu(r->name_len) +
	       le16_to_cpu(r->name2_len) + le32_to_cpu(r->data_len);
}

/*
 * Under j->lock: the last record committed, if the thread has not taken
 * it yet, it is about the lower object @ino, @gen, and it is a change's
 * (not recovery's); else NULL. Only it may take a later change in
 * (the folds below): nothing was logged between the two.
 */
static struct presto_kml_entry *presto_kml_tail_of(struct presto_journal *j,
						   u64 ino, u32 gen)
{
	struct presto_kml_entry *t;

	if (list_empty(&j->queue))
		return NULL;
	t = list_last_entry(&j->queue, struct presto_kml_entry, list);
	if (le64_to_cpu(t->rec.fh[PRESTO_KML_FH_OBJ].ino) != ino ||
	    le32_to_cpu(t->rec.fh[PRESTO_KML_FH_OBJ].gen) != gen ||
	    (t->rec.flags & cpu_to_le16(PRESTO_KML_F_RECOVERED)))
		return NULL;
	return t;
}

/* Did @cred make @t (the ids and groups presto_kml_set_cred() put)? */
static bool presto_kml_made_by(const struct presto_kml_entry *t,
			       const struct cred *cred)
{
	const struct presto_kml_rec *r = &t->rec;
	unsigned int i, n = presto_kml_ngroups(cred);
	const u8 *p = presto_kml_groups(r);
	bool cut = n && cred->group_info->ngroups > n;

	if (le32_to_cpu(r->uid) != from_kuid(&init_user_ns, cred->fsuid) ||
	    le32_to_cpu(r->gid) != from_kgid(&init_user_ns, cred->fsgid) ||
	    le16_to_cpu(r->ngroups) != n ||
	    !!(r->flags & cpu_to_le16(PRESTO_KML_F_GROUPS_CUT)) != cut)
		return false;
	for (i = 0; i < n; i++)
		if (get_unaligned_le32(p + 4 * i) !=
		    from_kgid(&init_user_ns, cred->group_info->gid[i]))
			return false;
	return true;
}

/*
 * Under j->lock: the CREATE that STORE @e may fold into, or NULL: the
 * object's last record (presto_kml_tail_of()), if it is a regular file's
 * CREATE (not an O_TMPFILE's, whose STORE is in its own change) by the
 * same caller (the same ids and groups).
 */
static struct presto_kml_entry *presto_kml_store_into(struct presto_journal *j,
						      struct presto_kml_entry *e)
{
	const struct presto_kml_rec *q = &e->rec;
	const struct presto_kml_rec *r;
	struct presto_kml_entry *t;

	t = presto_kml_tail_of(j, le64_to_cpu(q->fh[PRESTO_KML_FH_OBJ].ino),
			       le32_to_cpu(q->fh[PRESTO_KML_FH_OBJ].gen));
	if (!t)
		return NULL;
	r = &t->rec;
	if (le16_to_cpu(r->op) != PRESTO_KML_CREATE ||
	    (r->flags & cpu_to_le16(PRESTO_KML_F_TMPFILE)) ||
	    r->uid != q->uid || r->gid != q->gid || r->ngroups != q->ngroups ||
	    (r->flags ^ q->flags) & cpu_to_le16(PRESTO_KML_F_GROUPS_CUT) ||
	    memcmp(presto_kml_groups(r), presto_kml_groups(q),
		   4 * (size_t)le16_to_cpu(q->ngroups)))
		return NULL;
	return t;
}

/*
 * Commit STORE @e, or fold it into the CREATE of its file if that is the
 * last record and still queued (presto_kml_store_into()): the CREATE then
 * carries the flag STORED and the file's attributes as they are now, and
 * its sequence number, returned, is the STORE's. A file made, written and
 * closed, as a tar unpack or a compiler makes them, costs one record.
 */
u64 presto_kml_commit_store(struct super_block *sb, struct presto_kml_entry *e)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	struct presto_kml_entry *t;
	u64 seq = 0;

	spin_lock(&j->lock);
	t = presto_kml_store_into(j, e);
	if (t) {
		u32 valid = t->rec.attr.valid;

		t->rec.flags |= cpu_to_le16(PRESTO_KML_F_STORED);
		t->rec.attr = e->rec.attr;
		t->rec.attr.valid = valid;
		seq = le64_to_cpu(t->rec.seq);
		j->reserved -= e->size;
		j->room_gen++;
	}
	spin_unlock(&j->lock);
	if (!seq)
		return presto_kml_commit(sb, e);
	wake_up_all(&j->done);
	kvfree(e);
	return seq;
}

/*
 * Under j->lock: the record a SETATTR of @lower changing @valid, made by
 * @cred, may fold into (KML.md, "Operations"), or NULL. That is the
 * object's last record (presto_kml_tail_of()), if @cred made it and it
 * says what a SETATTR says: a SETATTR (then the union of both), or a new
 * object's record, which carries every attribute and is applied with
 * them -- less the size: a new object is made empty, and its content
 * comes with a STORE.
 */
static struct presto_kml_entry *presto_kml_fold_into(struct presto_journal *j,
						     struct inode *lower,
						     u32 valid,
						     const struct cred *cred)
{
	struct presto_kml_entry *t;
	u16 op;

	t = presto_kml_tail_of(j, lower->i_ino, lower->i_generation);
	if (!t)
		return NULL;
	op = le16_to_cpu(t->rec.op);
	if (op != PRESTO_KML_SETATTR &&
	    (!(op == PRESTO_KML_CREATE || op == PRESTO_KML_MKDIR ||
	       op == PRESTO_KML_MKNOD || op == PRESTO_KML_SYMLINK) ||
	     (valid & PRESTO_KML_A_SIZE)))
		return NULL;
	return presto_kml_made_by(t, cred) ? t : NULL;
}

/*
 * Would a SETATTR of @lower changing @valid, made by @cred, fold into
 * the last record if it were made now? Then it reserves no record of its
 * own (presto_change_begin()).
 */
bool presto_kml_foldable(struct super_block *sb, struct inode *lower,
			 u32 valid, const struct cred *cred)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	bool fold;

	spin_lock(&j->lock);
	/* A broken log refuses changes: presto_kml_alloc() says why. */
	fold = !j->error && presto_kml_fold_into(j, lower, valid, cred);
	spin_unlock(&j->lock);
	return fold;
}

/*
 * Fold a SETATTR of @lower made by @cred, @a its attributes as the
 * record would carry them, into the last record, if that may still be
 * (presto_kml_fold_into()). The record takes the object's attributes as
 * they are now; its sequence number, returned, is the change's. 0: it
 * may not any more (the thread took the record, or another came after
 * it), and the SETATTR needs a record of its own.
 */
u64 presto_kml_fold(struct super_block *sb, const struct presto_kml_attr *a,
		    struct inode *lower, const struct cred *cred)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	u32 valid = le32_to_cpu(a->valid);
	struct presto_kml_entry *t;
	u64 seq = 0;

	spin_lock(&j->lock);
	t = presto_kml_fold_into(j, lower, valid, cred);
	if (t) {
		if (le16_to_cpu(t->rec.op) == PRESTO_KML_SETATTR)
			valid |= le32_to_cpu(t->rec.attr.valid);
		else
			valid = le32_to_cpu(t->rec.attr.valid);
		t->rec.attr = *a;
		t->rec.attr.valid = cpu_to_le32(valid);
		seq = le64_to_cpu(t->rec.seq);
	}
	spin_unlock(&j->lock);
	return seq;
}

/* Wait until every record up to @seq, and its change, is on disk. */
int presto_journal_wait(struct super_block *sb, u64 seq)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	int err;

	spin_lock(&j->lock);
	/* No record past the last one committed can be waited for. */
	if (WARN_ON_ONCE(seq >= j->next_seq))
		seq = j->next_seq - 1;
	if (j->stable_seq >= seq || j->error) {
		err = j->error;
		spin_unlock(&j->lock);
		return err;
	}
	j->sync_want = max(j->sync_want, seq);
	spin_unlock(&j->lock);
	wake_up(&j->wait);
	err = wait_event_killable(j->done, READ_ONCE(j->stable_seq) >= seq ||
				  READ_ONCE(j->error));
	return err ?: READ_ONCE(j->error);
}

/*
 * Ask the thread to write back every record up to @seq, without waiting:
 * fsync asks before the file's own data goes out, so that the two writes
 * are in flight together rather than one after the other.
 */
void presto_journal_start_written(struct super_block *sb, u64 seq)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	bool wake;

	spin_lock(&j->lock);
	wake = !j->error && seq < j->next_seq && j->durable_seq < seq &&
	       j->wb_seq < seq && j->wb_want < seq;
	if (wake)
		j->wb_want = seq;
	spin_unlock(&j->lock);
	if (wake)
		wake_up(&j->wait);
}

/*
 * fsync's half of the log: wait until every record up to @seq is durable
 * (returns 0) or written back where a write changes no metadata (returns
 * 1: it is durable after the next cache flush of the disk, which the
 * caller's fsync of a lower file then issues, before it calls
 * presto_journal_flushed()). Or -errno.
 */
int presto_journal_wait_written(struct super_block *sb, u64 seq)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	int err;

	spin_lock(&j->lock);
	if (WARN_ON_ONCE(seq >= j->next_seq))
		seq = j->next_seq - 1;
	if (j->durable_seq >= seq || j->wb_seq >= seq || j->error) {
		err = j->error ?: j->durable_seq < seq;
		spin_unlock(&j->lock);
		return err;
	}
	j->wb_want = max(j->wb_want, seq);
	spin_unlock(&j->lock);
	wake_up(&j->wait);
	err = wait_event_killable(j->done, READ_ONCE(j->durable_seq) >= seq ||
				  READ_ONCE(j->wb_seq) >= seq ||
				  READ_ONCE(j->error));
	if (err)
		return err;
	spin_lock(&j->lock);
	err = j->error ?: j->durable_seq < seq;
	spin_unlock(&j->lock);
	return err;
}

/*
 * The disk's cache was flushed after records up to @seq were written back:
 * they are durable, for fsync and for the intent marks (a mark's removal
 * is ordered after the changes it covers by the lower's own journal). Not
 * stable: lento hears of them after the next sync of the segment.
 */
void presto_journal_flushed(struct super_block *sb, u64 seq)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	bool news;

	spin_lock(&j->lock);
	news = seq > j->durable_seq;
	if (news)
		j->durable_seq = seq;
	spin_unlock(&j->lock);
	if (news) {
		wake_up_all(&j->done);
		presto_intent_durable(sb, seq);
	}
}

/* Wait until every record committed so far, and its change, is on disk. */
int presto_journal_sync(struct super_block *sb)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	u64 seq;

	if (!j)		/* a mount that failed */
		return 0;
	spin_lock(&j->lock);
	seq = j->next_seq - 1;
	spin_unlock(&j->lock);
	return presto_journal_wait(sb, seq);
}

void presto_journal_state(struct super_block *sb, struct presto_kml_state *st)
{
	struct presto_journal *j = presto_sb(sb)->journal;

	memset(st, 0, sizeof(*st));
	spin_lock(&j->lock);
	st->next_seq = j->next_seq;
	st->durable_seq = j->durable_seq;
	st->acked_seq = j->acked_seq;
	st->pending_records = j->next_seq - 1 - j->acked_seq;
	st->pending_bytes = j->disk_bytes + j->reserved;
	st->limit_bytes = j->limit;
	if (st->pending_records && j->oldest_seq)
		st->oldest_ns = j->oldest_ns;
	st->first_segno = j->first_segno;
	st->cur_segno = j->cur->segno;
	st->segments = j->nsegs;
	st->error = j->error;
	spin_unlock(&j->lock);
}

int presto_journal_ack(struct super_block *sb, u64 seq)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	int err = 0;

	spin_lock(&j->lock);
	if (seq > j->durable_seq) {
		err = -EINVAL;
	} else if (seq > j->acked_seq) {
		j->acked_seq = seq;
		j->retire_want = true;
		/*
		 * The oldest pending record is now seq + 1, committed no
		 * earlier than the one tracked so far: keep that time, an
		 * upper bound of the age.
		 */
		if (seq >= j->next_seq - 1)
			j->oldest_seq = 0;
		else if (j->oldest_seq <= seq)
			j->oldest_seq = seq + 1;
	}
	spin_unlock(&j->lock);
	if (!err)
		wake_up(&j->wait);
	return err;
}

/* How far lento may read: the records, and their changes, on disk. */
u64 presto_journal_stable(struct super_block *sb)
{
	struct presto_journal *j = presto_sb(sb)->journal;
	u64 seq;

	spin_lock(&j->lock);
	seq = j->stable_seq;
	spin_unlock(&j->lock);
	return seq;
}

void presto_journal_show(struct seq_file *m, struct super_block *sb)
{
	struct presto_kml_state st;

	presto_journal_state(sb, &st);
	seq_printf(m, "\n\tkml: next_seq %llu durable_seq %llu acked_seq %llu",
		   st.next_seq, st.durable_seq, st.acked_seq);
	seq_printf(m, "\n\tkml: pending_records %llu pending_bytes %llu limit_bytes %llu oldest_ns %lld",
		   st.pending_records, st.pending_bytes, st.limit_bytes,
		   st.oldest_ns);
	seq_printf(m, "\n\tkml: segments %llu first_segno %llu cur_segno %llu error %d\n",
		   st.segments, st.first_segno, st.cur_segno, st.error);
}

/* --- opening the log at mount --- */

struct presto_seg_list {
	struct dir_context ctx;
	u64 *segnos;
	unsigned int count, size;
	int err;
};

static bool presto_seg_filldir(struct dir_context *ctx, const char *name,
			       int len, loff_t pos, u64 ino, unsigned int type)
{
	struct presto_seg_list *l = container_of(ctx, struct presto_seg_list,
						 ctx);
	char buf[16];
	u64 segno;
	u64 *more;

	if (len != 12 || memcmp(name, "kml.", 4))
		return true;
	memcpy(buf, name + 4, 8);
	buf[8] = '\0';
	if (kstrtou64(buf, 10, &segno))
		return true;
	if (l->count == l->size) {
		l->size = l->size ? 2 * l->size : 16;
		more = krealloc_array(l->segnos, l->size, sizeof(u64),
				      GFP_KERNEL);
		if (!more) {
			l->err = -ENOMEM;
			return false;
		}
		l->segnos = more;
	}
	l->segnos[l->count++] = segno;
	return true;
}

static int presto_u64_cmp(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static int presto_seg_list(struct presto_journal *j, struct presto_seg_list *l)
{
	struct file *dir;
	int err;

	dir = dentry_open(&j->dir, O_RDONLY | O_DIRECTORY, current_cred());
	if (IS_ERR(dir))
		return PTR_ERR(dir);
	l->ctx.actor = presto_seg_filldir;
	err = iterate_dir(dir, &l->ctx);
	fput(dir);
	if (!err)
		err = l->err;
	if (!err)
		sort(l->segnos, l->count, sizeof(u64), presto_u64_cmp, NULL);
	return err;
}

/* What the scan of one existing segment found. */
struct presto_seg_scan {
	u64 first_seq;
	u64 next_seq;		/* after its last good record */
	u64 used;		/* bytes up to there */
	bool torn;		/* something after the last good record */
	bool empty;		/* no header: a spare never used, or torn */
};

/* Do @r's lengths and groups agree with its @len (KML.md)? */
static bool presto_kml_rec_sane(const struct presto_kml_rec *r, u32 len)
{
	u32 name_len = le16_to_cpu(r->name_len);
	u32 name2_len = le16_to_cpu(r->name2_len);
	u32 data_len = le32_to_cpu(r->data_len);
	u32 ngroups = le16_to_cpu(r->ngroups);

	if (name_len > PRESTO_KML_NAME_MAX || name2_len > PRESTO_KML_NAME_MAX ||
	    data_len > PRESTO_KML_DATA_MAX || ngroups > PRESTO_KML_GROUPS_MAX)
		return false;
	if ((le16_to_cpu(r->flags) & PRESTO_KML_F_GROUPS_CUT) &&
	    ngroups != PRESTO_KML_GROUPS_MAX)
		return false;
	return len == presto_kml_rec_size(name_len, name2_len, data_len,
					  ngroups);
}

/*
 * Read records from the segment's first until the last good one. The file
 * is read once, in chunks of PRESTO_KML_SCAN_BUF: a record is checked when
 * it is whole in the buffer, and what is left of a chunk moves to the
 * front before the next.
 */
static int presto_seg_scan_records(struct presto_journal *j, struct file *f,
				   struct presto_seg_scan *sc, void *buf)
{
	loff_t size = i_size_read(file_inode(f));
	loff_t base = PRESTO_KML_HDR_SIZE;	/* file offset of buf[0] */
	size_t have = 0, off = 0;

	for (;;) {
		struct presto_kml_rec *r;
		u32 len, crc;

		if (have - off < PRESTO_KML_REC_MAX && base + have < size) {
			loff_t p;
			ssize_t n;

			memmove(buf, buf + off, have - off);
			base += off;
			have -= off;
			off = 0;
			/* A short read must not look like a torn tail. */
			do {
				p = base + have;
				n = kernel_read(f, buf + have,
						min_t(loff_t,
						      PRESTO_KML_SCAN_BUF - have,
						      size - p), &p);
				if (n < 0)
					return n;
				have += n;
			} while (n && have < PRESTO_KML_SCAN_BUF &&
				 base + have < size);
		}
		if (have - off < sizeof(*r))
			break;
		r = buf + off;
		len = le32_to_cpu(r->len);
		if (!len)
			return 0;
		if (len < sizeof(*r) || len > PRESTO_KML_REC_MAX ||
		    len % PRESTO_KML_ALIGN || len > have - off ||
		    le64_to_cpu(r->seq) != sc->next_seq ||
		    !presto_kml_rec_sane(r, len))
			break;
		crc = le32_to_cpu(r->crc);
		r->crc = 0;
		if (presto_kml_crc(j, r, len) != crc)
			break;
		off += len;
		sc->next_seq++;
		sc->used = base + off;
	}
	sc->torn = base + off < size;
	return 0;
}

/*
 * Read segment @segno's header; with @records, also find its last good
 * record. Without, the segment is taken as complete up to its size.
 */
static int presto_seg_scan(struct presto_journal *j, u64 segno,
			   struct presto_seg_scan *sc, void *buf, bool records)
{
	struct presto_kml_seg_hdr *h = buf;
	char name[32];
	struct file *f;
	loff_t pos = 0;
	ssize_t n;
	int err = 0;

	memset(sc, 0, sizeof(*sc));
	presto_seg_name(name, sizeof(name), segno);
	f = file_open_root(&j->dir, name, O_RDONLY | O_NOATIME | O_LARGEFILE,
			   0);
	if (IS_ERR(f))
		return PTR_ERR(f);
	n = kernel_read(f, h, sizeof(*h), &pos);
	if (n < 0) {
		err = n;
	} else if (n == 0 || (records && !memchr_inv(h, 0, n))) {
		/*
		 * A spare never used; or the newest segment, whose header a
		 * crash lost (its size reached the disk, its block did not):
		 * then nothing in it was ever synced, as a sync of the
		 * segment would have taken the header along.
		 */
		sc->empty = true;
	} else if (n != sizeof(*h) ||
		   memcmp(h->magic, PRESTO_KML_MAGIC, sizeof(h->magic)) ||
		   le32_to_cpu(h->crc) !=
		   presto_kml_crc(j, h, offsetof(typeof(*h), crc)) ||
		   le64_to_cpu(h->segno) != segno) {
		pr_err("presto: %s: log segment %s has no valid header\n",
		       presto_sb(j->sb)->lower_name, name);
		err = -EUCLEAN;
	} else if (le32_to_cpu(h->version) < PRESTO_KML_VERSION_MIN ||
		   le32_to_cpu(h->version) > PRESTO_KML_VERSION ||
		   le32_to_cpu(h->hdr_size) != PRESTO_KML_HDR_SIZE) {
		pr_err("presto: %s: log segment %s has format version %u; this presto writes %u\n",
		       presto_sb(j->sb)->lower_name, name,
		       le32_to_cpu(h->version), PRESTO_KML_VERSION);
		err = -EPROTO;
	} else {
		sc->first_seq = le64_to_cpu(h->first_seq);
		sc->next_seq = sc->first_seq;
		sc->used = PRESTO_KML_HDR_SIZE;
		if (records)
			err = presto_seg_scan_records(j, f, sc, buf);
		else
			sc->used = max_t(u64, sc->used,
					 i_size_read(file_inode(f)));
	}
	fput(f);
	return err;
}

/*
 * The records kept from before this mount are pending until lento
 * acknowledges them again: the oldest is the first of the oldest segment
 * (@segno), whose time bounds their age from above. Left unknown (0) if
 * it cannot be read.
 */
static void presto_journal_oldest_kept(struct presto_journal *j, u64 segno)
{
	struct presto_kml_rec r;
	loff_t pos = PRESTO_KML_HDR_SIZE;
	char name[32];
	struct file *f;

	presto_seg_name(name, sizeof(name), segno);
	f = file_open_root(&j->dir, name, O_RDONLY | O_NOATIME | O_LARGEFILE,
			   0);
	if (IS_ERR(f))
		return;
	if (kernel_read(f, &r, sizeof(r), &pos) == sizeof(r) &&
	    le64_to_cpu(r.seq) == j->acked_seq + 1) {
		j->oldest_seq = j->acked_seq + 1;
		j->oldest_ns = le64_to_cpu(r.time_ns);
	}
	fput(f);
}

static struct presto_kml_seg *presto_seg_old(u64 segno, u64 first_seq,
					     u64 used)
{
	struct presto_kml_seg *s = kzalloc(sizeof(*s), GFP_KERNEL);

	if (s) {
		s->segno = segno;
		s->first_seq = first_seq;
		s->used = used;
		s->size = used;
	}
	return s;
}

/*
 * Find what the log holds: every segment but the newest was complete when
 * the next began, so only the newest is read record by record; its tail
 * after the last good CRC is cut (the next mount writes a new segment,
 * never after a cut). Spares never used are removed.
 */
static int presto_journal_scan(struct presto_journal *j)
{
	struct presto_seg_list l = {};
	struct presto_seg_scan sc = {};
	struct presto_kml_seg *s;
	u64 next_seq = 1, segno = 0, torn_at = 0;
	void *buf;
	int i, err;

	buf = kvmalloc(PRESTO_KML_SCAN_BUF, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	err = presto_seg_list(j, &l);
	if (err)
		goto out;
	/* Unused spares at the end. */
	for (i = l.count - 1; i >= 0; i--) {
		err = presto_seg_scan(j, l.segnos[i], &sc, buf, true);
		if (err)
			goto out;
		if (!sc.empty)
			break;
		err = presto_seg_unlink(j, l.segnos[i]);
		if (err)
			goto out;
	}
	l.count = i + 1;
	if (l.count) {
		next_seq = sc.next_seq;
		segno = l.segnos[l.count - 1];
		if (sc.torn)
			torn_at = sc.used;
	}
	for (i = 0; i < l.count; i++) {
		u64 used = sc.used;

		if (i < l.count - 1) {
			struct presto_seg_scan older;

			err = presto_seg_scan(j, l.segnos[i], &older, buf,
					      false);
			if (err)
				goto out;
			used = older.used;
			s = presto_seg_old(l.segnos[i], older.first_seq, used);
		} else {
			s = presto_seg_old(l.segnos[i], sc.first_seq, used);
		}
		err = -ENOMEM;
		if (!s)
			goto out;
		list_add_tail(&s->list, &j->segs);
		j->disk_bytes += used;
		j->nsegs++;
	}
	j->first_segno = l.count ? l.segnos[0] : segno + 1;
	j->next_seq = next_seq;
	j->written_seq = next_seq - 1;
	j->durable_seq = next_seq - 1;
	/* Recovery restates after them what a crash kept of their changes. */
	j->stable_seq = next_seq - 1;
	j->acked_seq = l.count ? list_first_entry(&j->segs,
						  struct presto_kml_seg,
						  list)->first_seq - 1 : 0;
	if (j->acked_seq + 1 < next_seq)
		presto_journal_oldest_kept(j, l.segnos[0]);
	if (l.count) {
		struct file *f;
		char name[32];

		presto_seg_name(name, sizeof(name), segno);
		f = file_open_root(&j->dir, name, O_WRONLY | O_LARGEFILE |
				   O_NOATIME, 0);
		err = PTR_ERR(f);
		if (IS_ERR(f))
			goto out;
		err = presto_seg_trim(&f->f_path, sc.used);
		fput(f);
		if (err)
			goto out;
	}
	if (torn_at)
		pr_notice("presto: %s: log segment %llu cut after its last good record at offset %llu\n",
			  presto_sb(j->sb)->lower_name, segno, torn_at);
	pr_info("presto: %s: log has %u segments, records up to %llu\n",
		presto_sb(j->sb)->lower_name, l.count, next_seq - 1);
	/* This mount writes a new segment. */
	s = presto_seg_create(j, segno + 1);
	err = PTR_ERR(s);
	if (IS_ERR(s))
		goto out;
	err = presto_seg_write_header(j, s, next_seq);
	list_add_tail(&s->list, &j->segs);
	j->cur = s;
	j->nsegs++;
	j->disk_bytes += s->used;
	presto_journal_update_avail(j);
out:
	kfree(l.segnos);
	kvfree(buf);
	return err;
}

/* Remove @dir/@name, a file of presto's own, if it is there. */
int presto_private_unlink(const struct path *dir, const char *name)
{
	struct inode *inode = d_inode(dir->dentry);
	struct dentry *d;
	int err;

	err = mnt_want_write(dir->mnt);
	if (err)
		return err;
	inode_lock_nested(inode, I_MUTEX_PARENT);
	d = lookup_one_len(name, dir->dentry, strlen(name));
	err = PTR_ERR(d);
	if (!IS_ERR(d)) {
		err = d_is_positive(d) ?
		      vfs_unlink(&init_user_ns, inode, d, NULL) : 0;
		dput(d);
	}
	inode_unlock(inode);
	mnt_drop_write(dir->mnt);
	return err;
}

/* @parent/@name, a directory made (0700, the mounter's) if it is not there. */
int presto_private_dir(const struct path *parent, const char *name,
		       struct path *out)
{
	struct inode *dir = d_inode(parent->dentry);
	struct dentry *d;
	int err;

	err = mnt_want_write(parent->mnt);
	if (err)
		return err;
	inode_lock_nested(dir, I_MUTEX_PARENT);
	d = lookup_one_len(name, parent->dentry, strlen(name));
	if (!IS_ERR(d) && d_is_negative(d)) {
		err = vfs_mkdir(&init_user_ns, dir, d, 0700);
		if (err) {
			dput(d);
			d = ERR_PTR(err);
		}
	}
	inode_unlock(dir);
	mnt_drop_write(parent->mnt);
	if (IS_ERR(d))
		return PTR_ERR(d);
	if (!d_is_dir(d)) {
		dput(d);
		return -ENOTDIR;
	}
	out->mnt = mntget(parent->mnt);
	out->dentry = d;
	return 0;
}

static void presto_journal_free(struct presto_journal *j)
{
	struct presto_kml_seg *s, *next;

	if (j->spare)
		presto_seg_drop(j, j->spare);
	list_for_each_entry_safe(s, next, &j->segs, list) {
		if (s->file)
			fput(s->file);
		kfree(s);
	}
	path_put(&j->dir);
	kvfree(j->buf);
	if (j->crc)
		crypto_free_shash(j->crc);
	kfree(j);
}

int presto_journal_open(struct super_block *sb, u64 limit)
{
	struct presto_journal *j;
	struct task_struct *t;
	int err;

	j = kzalloc(sizeof(*j), GFP_KERNEL);
	if (!j)
		return -ENOMEM;
	j->sb = sb;
	init_waitqueue_head(&j->wait);
	init_waitqueue_head(&j->done);
	spin_lock_init(&j->lock);
	INIT_LIST_HEAD(&j->queue);
	INIT_LIST_HEAD(&j->segs);
	j->limit = limit;
	j->last_sync = jiffies;

	err = -ENOMEM;
	j->buf = kvmalloc(PRESTO_KML_BUF_SIZE, GFP_KERNEL);
	if (!j->buf)
		goto fail;
	j->crc = crypto_alloc_shash("crc32c", 0, 0);
	if (IS_ERR(j->crc))
		j->crc = NULL;	/* lib/crc32.c's, the same sums */
	err = presto_private_dir(&presto_sb(sb)->lower, PRESTO_RESERVED_NAME,
				 &j->dir);
	if (err)
		goto fail;
	err = presto_journal_scan(j);
	if (err)
		goto fail;
	t = kthread_run(presto_journal_thread, j, "presto_kml");
	err = PTR_ERR(t);
	if (IS_ERR(t))
		goto fail;
	j->thread = t;
	presto_sb(sb)->journal = j;
	return 0;
fail:
	presto_journal_free(j);
	return err;
}

/* After the last change: write and sync what is queued, let go of all. */
void presto_journal_close(struct super_block *sb)
{
	struct presto_journal *j = presto_sb(sb)->journal;

	if (!j)
		return;
	kthread_stop(j->thread);
	/* Every file is closed: nothing may be queued or reserved. */
	WARN_ON_ONCE(!list_empty(&j->queue) || (!j->error && j->reserved));
	if (!j->error)
		presto_seg_trim(&j->cur->file->f_path, j->cur->used);
	presto_journal_free(j);
	presto_sb(sb)->journal = NULL;
}

/* The consumer's interface, on any directory of the mount (KML.md). */
long presto_journal_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg)
{
	struct super_block *sb = file_inode(file)->i_sb;
	struct presto_kml_state st;
	u64 seq;

	switch (cmd) {
	case PRESTO_IOC_KML_STATE:
		if (!capable(CAP_SYS_ADMIN))
			return -EPERM;
		presto_journal_state(sb, &st);
		if (copy_to_user((void __user *)arg, &st, sizeof(st)))
			return -EFAULT;
		return 0;
	case PRESTO_IOC_KML_ACK:
		if (!capable(CAP_SYS_ADMIN))
			return -EPERM;
		if (copy_from_user(&seq, (void __user *)arg, sizeof(seq)))
			return -EFAULT;
		return presto_journal_ack(sb, seq);
	default:
		return -ENOTTY;
	}
}
