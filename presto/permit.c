// SPDX-License-Identifier: GPL-2.0
/*
 * The write-back permit of a fileset mount (protocol/KERNEL.md): no
 * change without it. lento holds it from the server (or grants it itself
 * while disconnected); presto asks for it with a PERMIT upcall the first
 * time a change finds it missing, and from then on changes run at the
 * lower's speed, never waiting for lento, until lento revokes it.
 *
 * A revoke must know when the changes made under the permit have all
 * reached the log: each change holds a per-CPU rwsem for reading while it
 * runs (so that the common case costs no shared cache line), and the
 * revoke, having cleared the flag, takes it for writing once, which waits
 * for the changes still in progress. Two of them, as the VFS's freeze
 * levels: system calls hold permit_calls, page faults (page_mkwrite)
 * permit_faults, drained in that order. With one, a write(2) holding it
 * while its copy from user memory waits for mmap_lock (queued behind an
 * mmap(2) that waits for a fault's mmap_lock) would deadlock with that
 * fault, which holds mmap_lock and waits for the semaphore behind the
 * revoke, which waits for the write(2).
 *
 * A change waits for a revoke interruptibly (and so a suspend goes on):
 * a read trylock in a wait the drain wakes, as the rwsem's own waits are
 * uninterruptible.
 *
 * A local mount (no fileset=) needs no permit. Changes that log nothing
 * (an O_TMPFILE before it has a name) and records owed for changes
 * already made (a STORE at close, recovery at mount) need none either.
 */
#include "presto.h"

int presto_permit_init(struct super_block *sb)
{
	struct presto_sb_info *sbi = presto_sb(sb);
	int err;

	init_waitqueue_head(&sbi->permit_wq);
	/* Two calls: two lock classes, as they nest in the drain. */
	err = percpu_init_rwsem(&sbi->permit_calls);
	if (err)
		return err;
	err = percpu_init_rwsem(&sbi->permit_faults);
	if (err)
		percpu_free_rwsem(&sbi->permit_calls);
	return err;
}

/* Safe on a zeroed superblock (a mount that failed before init). */
void presto_permit_destroy(struct super_block *sb)
{
	struct presto_sb_info *sbi = presto_sb(sb);

	percpu_free_rwsem(&sbi->permit_faults);
	percpu_free_rwsem(&sbi->permit_calls);
}

static struct percpu_rw_semaphore *presto_permit_sem(struct super_block *sb,
						     bool fault)
{
	struct presto_sb_info *sbi = presto_sb(sb);

	return fault ? &sbi->permit_faults : &sbi->permit_calls;
}

/*
 * Before a change (@fault: a page fault's): hold the permit until
 * presto_permit_put(), asking lento for it as often as it is found
 * missing. 0, or the upcall's error (lento refused; ENOTCONN, ETIMEDOUT,
 * ERESTARTSYS), or ERESTARTSYS if a signal ended the wait for a revoke.
 */
int presto_permit_get(struct super_block *sb, bool fault)
{
	struct presto_sb_info *sbi = presto_sb(sb);
	struct percpu_rw_semaphore *sem = presto_permit_sem(sb, fault);
	int err;

	if (!sbi->fileset)
		return 0;
	for (;;) {
		/* The trylock comes first: with no revoke there is no wait. */
		err = wait_event_interruptible(sbi->permit_wq,
					       percpu_down_read_trylock(sem));
		if (err)
			return err;
		if (READ_ONCE(sbi->permit))
			return 0;
		percpu_up_read(sem);
		/* Never wait for lento while holding the semaphore. */
		err = presto_upcall(d_inode(sb->s_root), PRESTO_OP_PERMIT);
		if (err)
			return err;
		/* Granted, but revoked again before we looked: ask again. */
		if (fatal_signal_pending(current))
			return -EINTR;
	}
}

void presto_permit_put(struct super_block *sb, bool fault)
{
	if (presto_sb(sb)->fileset)
		percpu_up_read(presto_permit_sem(sb, fault));
}

/*
 * lento granted (@held) or revoked the permit. A revoke stops new
 * changes at once; presto_permit_drain() then waits for the rest.
 */
void presto_permit_set(struct super_block *sb, bool held)
{
	WRITE_ONCE(presto_sb(sb)->permit, held);
}

/* Wait until no change that began under the permit is still running. */
void presto_permit_drain(struct super_block *sb)
{
	struct presto_sb_info *sbi = presto_sb(sb);

	percpu_down_write(&sbi->permit_calls);
	percpu_down_write(&sbi->permit_faults);
	percpu_up_write(&sbi->permit_faults);
	percpu_up_write(&sbi->permit_calls);
	wake_up_all(&sbi->permit_wq);
}
