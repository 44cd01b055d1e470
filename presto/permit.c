// SPDX-License-Identifier: GPL-2.0
/*
 * The write-back permit of a fileset mount (protocol/KERNEL.md): no
 * change without it. lento holds it from the server (or grants it itself
 * while disconnected); presto asks for it with a PERMIT upcall the first
 * time a change finds it missing, and from then on changes run at the
 * lower's speed, never waiting for lento, until lento revokes it.
 *
 * A revoke must know when the changes made under the permit have all
 * reached the log: each change holds permit_sem for reading while it
 * runs (a per-CPU rwsem, so that the common case costs no shared cache
 * line), and the revoke, having cleared the flag, takes it for writing
 * once, which waits for the changes still in progress.
 *
 * A local mount (no fileset=) needs no permit. Changes that log nothing
 * (an O_TMPFILE before it has a name) and records owed for changes
 * already made (a STORE at close, recovery at mount) need none either.
 */
#include "presto.h"

int presto_permit_init(struct super_block *sb)
{
	return percpu_init_rwsem(&presto_sb(sb)->permit_sem);
}

void presto_permit_destroy(struct super_block *sb)
{
	percpu_free_rwsem(&presto_sb(sb)->permit_sem);
}

/*
 * Before a change: hold the permit until presto_permit_put(), asking
 * lento for it as often as it is found missing. 0, or the upcall's
 * error (lento refused; ENOTCONN, ETIMEDOUT, ERESTARTSYS).
 */
int presto_permit_get(struct super_block *sb)
{
	struct presto_sb_info *sbi = presto_sb(sb);
	int err;

	if (!sbi->fileset)
		return 0;
	for (;;) {
		percpu_down_read(&sbi->permit_sem);
		if (READ_ONCE(sbi->permit))
			return 0;
		percpu_up_read(&sbi->permit_sem);
		/* Never wait for lento while holding the semaphore. */
		err = presto_upcall(d_inode(sb->s_root), PRESTO_OP_PERMIT);
		if (err)
			return err;
		/* Granted, but revoked again before we looked: ask again. */
		if (fatal_signal_pending(current))
			return -EINTR;
	}
}

void presto_permit_put(struct super_block *sb)
{
	struct presto_sb_info *sbi = presto_sb(sb);

	if (sbi->fileset)
		percpu_up_read(&sbi->permit_sem);
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

	percpu_down_write(&sbi->permit_sem);
	percpu_up_write(&sbi->permit_sem);
}
