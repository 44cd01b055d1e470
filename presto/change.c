// SPDX-License-Identifier: GPL-2.0
/*
 * The one place every namespace and metadata change goes through.
 *
 * Each modifying inode operation brackets its lower operation with
 * presto_change_begin() and presto_change_end(). Today that takes write
 * access to the lower mount for the duration (so a read-only or frozen
 * lower refuses or waits cleanly); the kernel modification log hooks in
 * here, so that no change can reach the lower tree without passing the
 * journal.
 */
#include "presto.h"

int presto_change_begin(struct presto_change *chg, enum presto_op op,
			struct super_block *sb)
{
	chg->op = op;
	chg->sb = sb;
	return mnt_want_write(presto_lower_mnt(sb));
}

void presto_change_end(struct presto_change *chg, int err)
{
	mnt_drop_write(presto_lower_mnt(chg->sb));
}
