// SPDX-License-Identifier: GPL-2.0
/*
 * The files' tables: per file identity (its cookie), an array of words the unwinder lays
 * out and fills (src/logic/ftable.rs), allocated in the deferred callback the first time
 * one of the file's rows misses the row cache, and shared by every task that maps it.
 *
 * Readers (callbacks, task context) find a table under RCU and take a reference for the
 * rest of their stack: its words may be read while the callback faults or sleeps. Writers
 * (adding an FDE's rows, growing a table by copying it into a larger one that replaces
 * it) hold uu_tables_write, a mutex held only for memory work, never across a read of
 * user memory or of a file. The hash and the list of tables are under uu_tables_lock.
 *
 * Memory is bounded by the table_kib parameter, and shared between users: a table is
 * charged to the real uid of the task whose stack made it (or grew it: the larger copy),
 * the uid a setuid program does not change and the kernel's own per-user limits
 * (RLIMIT_NPROC, the ucounts) count; each user holding tables has a fair share, table_kib
 * divided by their number (the user asking counted). A table that does not fit makes room
 * by dropping whole tables, least recently used first:
 * - for a user within its share with the new table: tables of users over their share,
 *   even in use (evicted), else tables no stack used for UU_TABLE_IDLE, anyone's;
 * - for a user over its share: only idle tables of its own or of users over their share.
 * When none may go, the table is not made: that file's misses parse each time, paid in
 * the callbacks of its own stacks. So a user who keeps missing into large tables of its own
 * can hold all of the memory only while nobody else wants it, and never keeps a user within
 * its share from its tables; a process that makes file identities at will (a chmod loop)
 * takes only idle memory or its own. Users are counted in UU_TABLE_USERS slots; beyond
 * them, the others share one slot and one share, never unaccounted. Tables idle for
 * UU_TABLE_SHRINK_IDLE are also given back to the kernel under memory pressure (a
 * shrinker).
 *
 * Context: uu_table_get() and uu_table_put() in task context or any context that may take
 * a spinlock; the others in task context, may sleep.
 */
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/jiffies.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/rculist.h>
#include <linux/refcount.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <user_unwind.h>

/* The memory all tables take at most, in KiB. */
static unsigned int table_kib = 16384;

/* How long a table must go unused before another file's table may take its memory. */
#define UU_TABLE_IDLE HZ
/* Users counted apart; more share the last slot, uu_table_users[UU_TABLE_USERS]. */
#define UU_TABLE_USERS 16
/* How long before the shrinker gives it back: a table dropped is read again at next use. */
#define UU_TABLE_SHRINK_IDLE (10 * HZ)
/* After a scan found no table to drop for a user, how long its allocations fail without one. */
#define UU_TABLE_RESCAN (HZ / 10)

struct uu_table {
	struct hlist_node node;		/* in uu_tables, under uu_tables_lock */
	struct rcu_head rcu;
	refcount_t ref;			/* the hash's (while in it), and each holder's */
	u64 key;
	unsigned long used;		/* jiffies of its last get */
	u8 user;			/* the uu_table_users slot it is charged to */
	bool charged;			/* its bytes count in its user's: until unhashed or freed */
	size_t bytes;
	size_t nwords;
	u64 words[] __counted_by(nwords);
};

/*
 * A user the tables are charged to. A slot whose bytes are 0 holds no table and may be
 * given to another uid; a table's charge is taken under uu_tables_lock and given back when
 * it leaves the hash (under it) or, never published, when it is freed.
 */
struct uu_table_user {
	kuid_t uid;			/* under uu_tables_lock */
	atomic_long_t bytes;		/* its tables in the hash or being made */
	unsigned long full_until;	/* under uu_tables_lock: no scan for it before then */
};

static DEFINE_HASHTABLE(uu_tables, 8);
static struct uu_table_user uu_table_users[UU_TABLE_USERS + 1];
static DEFINE_SPINLOCK(uu_tables_lock);
static DEFINE_MUTEX(uu_tables_write);
static atomic_long_t uu_table_bytes = ATOMIC_LONG_INIT(0);
static atomic_long_t uu_table_count = ATOMIC_LONG_INIT(0);
/* Of uu_table_bytes, the tables out of the hash that RCU has yet to free. */
static atomic_long_t uu_table_dropped = ATOMIC_LONG_INIT(0);
static struct shrinker *uu_tables_shrinker;

/* Gives the charge of @t, out of the hash now, back to its user. Context: uu_tables_lock held. */
static void uu_table_uncharge(struct uu_table *t)
{
	atomic_long_sub(t->bytes, &uu_table_users[t->user].bytes);
	atomic_long_add(t->bytes, &uu_table_dropped);
	t->charged = false;
}

static void uu_table_free_rcu(struct rcu_head *rcu)
{
	struct uu_table *t = container_of(rcu, struct uu_table, rcu);

	/* Charged still only if it was never published; nobody else sees it then. */
	if (t->charged)
		atomic_long_sub(t->bytes, &uu_table_users[t->user].bytes);
	else
		atomic_long_sub(t->bytes, &uu_table_dropped);
	atomic_long_sub(t->bytes, &uu_table_bytes);
	atomic_long_dec(&uu_table_count);
	kvfree(t);
}

/**
 * uu_table_put - let go of a table
 * @t: a table held (uu_table_get(), uu_table_alloc()), or NULL
 *
 * Freed after a grace period once nobody holds it: a reader may have found it under RCU
 * and be about to take its reference.
 */
void uu_table_put(struct uu_table *t)
{
	if (t && refcount_dec_and_test(&t->ref))
		call_rcu(&t->rcu, uu_table_free_rcu);
}

/**
 * uu_table_get - the table of the file @key, held
 * @key: the file's cookie
 * @words: set to its words
 * @nwords: set to their number
 *
 * Return: the table (let go of with uu_table_put()), or NULL if the file has none.
 */
struct uu_table *uu_table_get(u64 key, u64 **words, size_t *nwords)
{
	struct uu_table *t, *found = NULL;

	rcu_read_lock();
	hash_for_each_possible_rcu(uu_tables, t, node, key) {
		if (t->key == key && refcount_inc_not_zero(&t->ref)) {
			found = t;
			break;
		}
	}
	rcu_read_unlock();
	if (!found)
		return NULL;
	/* A write at most once a tick: the line is shared by every CPU that reads it. */
	if (time_after(jiffies, READ_ONCE(found->used)))
		WRITE_ONCE(found->used, jiffies);
	*words = found->words;
	*nwords = found->nwords;
	return found;
}

/* Drops @t from the hash. Context: uu_tables_lock held. */
static void uu_table_unhash(struct uu_table *t)
{
	hash_del_rcu(&t->node);
	uu_table_uncharge(t);
	uu_table_put(t);
}

/*
 * Drops the least recently used table, if one was unused for @idle jiffies, and returns
 * its bytes (0: none). Under uu_tables_lock: a table found is dropped before anyone can
 * get it again.
 */
static size_t uu_tables_drop(unsigned long idle)
{
	struct uu_table *t, *lru = NULL;
	size_t bytes = 0;
	int bkt;

	spin_lock(&uu_tables_lock);
	hash_for_each(uu_tables, bkt, t, node) {
		if (time_before(jiffies, READ_ONCE(t->used) + idle))
			continue;
		if (!lru || time_before(READ_ONCE(t->used), READ_ONCE(lru->used)))
			lru = t;
	}
	if (lru) {
		bytes = lru->bytes;
		uu_table_unhash(lru);
		uu_stat_add(UU_STAT_UNWIND_TABLES_DROPPED, 1);
	}
	spin_unlock(&uu_tables_lock);
	return bytes;
}

/* A write of table_kib also drops the tables over the new limit, least recently used first. */
static int uu_table_kib_set(const char *val, const struct kernel_param *kp)
{
	long over;
	int ret;

	ret = param_set_uint(val, kp);
	if (ret)
		return ret;
	over = atomic_long_read(&uu_table_bytes) - ((long)READ_ONCE(table_kib) << 10);
	while (over > 0) {
		size_t bytes = uu_tables_drop(0);

		if (!bytes)
			break;
		over -= bytes;
	}
	return 0;
}

static const struct kernel_param_ops uu_table_kib_ops = {
	.set = uu_table_kib_set,
	.get = param_get_uint,
};
module_param_cb(table_kib, &uu_table_kib_ops, &table_kib, 0644);
MODULE_PARM_DESC(table_kib,
		 "memory the files' unwind tables take at most, in KiB (default 16384; 0: none kept)");

/*
 * The slot of the user @uid: its own, else a free one (bytes 0: no table charged to it),
 * else the shared last one. Context: uu_tables_lock held.
 */
static struct uu_table_user *uu_table_user(kuid_t uid)
{
	struct uu_table_user *u, *free = NULL;

	for (u = uu_table_users; u < uu_table_users + UU_TABLE_USERS; u++) {
		if (uid_eq(u->uid, uid))
			return u;
		if (!free && !atomic_long_read(&u->bytes))
			free = u;
	}
	if (!free)
		return &uu_table_users[UU_TABLE_USERS];
	free->uid = uid;
	free->full_until = jiffies;
	return free;
}

/* The users holding tables, @me counted. Context: uu_tables_lock held. */
static unsigned int uu_table_users_holding(struct uu_table_user *me)
{
	unsigned int n = 0;
	int i;

	for (i = 0; i <= UU_TABLE_USERS; i++)
		if (&uu_table_users[i] == me || atomic_long_read(&uu_table_users[i].bytes))
			n++;
	return n;
}

/*
 * The table to drop for @me, least recently used first: if @me is within @share with its
 * new table (!@over), one of a user over its share, in use or not, else an idle one; if
 * not, an idle one of its own or of a user over its share. NULL: none may go.
 * Context: uu_tables_lock held.
 */
static struct uu_table *uu_tables_victim(struct uu_table_user *me, bool over, long share)
{
	struct uu_table *t, *lru = NULL;
	bool lru_greedy = false;
	int bkt;

	hash_for_each(uu_tables, bkt, t, node) {
		struct uu_table_user *owner = &uu_table_users[t->user];
		bool idle = !time_before(jiffies, READ_ONCE(t->used) + UU_TABLE_IDLE);
		bool greedy = owner != me && atomic_long_read(&owner->bytes) > share;

		if (over ? !idle || (owner != me && !greedy) : !idle && !greedy)
			continue;
		/* Within its share, a greedy user's tables go before anyone's idle ones. */
		greedy = greedy && !over;
		if (lru && (lru_greedy > greedy || (lru_greedy == greedy &&
		    !time_before(READ_ONCE(t->used), READ_ONCE(lru->used)))))
			continue;
		lru = t;
		lru_greedy = greedy;
	}
	return lru;
}

/**
 * uu_table_alloc - a new table of @nwords zeroed words, not in the hash
 * @nwords: its words
 * @words: set to them
 *
 * Charged to current's real uid. Makes room under table_kib by dropping tables as
 * uu_tables_victim() picks them, at most one scan for them every UU_TABLE_RESCAN for a
 * user when a scan found none. The memory of tables dropped here counts until RCU frees
 * them (and their last holder lets go), but not against the new one: for a moment the
 * tables may take table_kib and tables dropped and not yet freed.
 *
 * Context: task (the deferred callback of current's stack).
 * Return: the table, held, or NULL when it does not fit or cannot be allocated.
 */
struct uu_table *uu_table_alloc(size_t nwords, u64 **words)
{
	size_t limit = (size_t)READ_ONCE(table_kib) << 10;
	kuid_t uid = current_uid();
	struct uu_table_user *u;
	struct uu_table *t, *victim;
	size_t bytes = struct_size(t, words, nwords);	/* SIZE_MAX on overflow */
	long freed = 0;	/* dropped here: counted until freed, not against the new one */
	u8 user;

	if (bytes > limit)
		goto full;
	for (;;) {
		long share;
		bool over;

		spin_lock(&uu_tables_lock);
		u = uu_table_user(uid);
		if (atomic_long_read(&uu_table_bytes) + (long)bytes -
		    min(freed, atomic_long_read(&uu_table_dropped)) <= (long)limit)
			break;
		/* A scan found none for this user: the next may, once a table has aged. */
		if (time_before(jiffies, u->full_until)) {
			spin_unlock(&uu_tables_lock);
			goto full;
		}
		share = limit / uu_table_users_holding(u);
		over = atomic_long_read(&u->bytes) + (long)bytes > share;
		victim = uu_tables_victim(u, over, share);
		if (!victim) {
			u->full_until = jiffies + UU_TABLE_RESCAN;
			spin_unlock(&uu_tables_lock);
			goto full;
		}
		if (time_before(jiffies, READ_ONCE(victim->used) + UU_TABLE_IDLE))
			uu_stat_add(UU_STAT_UNWIND_TABLES_EVICTED, 1);
		uu_stat_add(UU_STAT_UNWIND_TABLES_DROPPED, 1);
		freed += victim->bytes;
		uu_table_unhash(victim);
		spin_unlock(&uu_tables_lock);
	}
	/* Charged now, so that tables allocated at once do not all fit under the limit. */
	atomic_long_add(bytes, &uu_table_bytes);
	atomic_long_add(bytes, &u->bytes);
	user = u - uu_table_users;
	spin_unlock(&uu_tables_lock);
	/* No direct reclaim: it may wait for I/O (writeback, a filesystem's shrinker). */
	t = kvzalloc(bytes, GFP_NOWAIT | __GFP_NOWARN);
	if (!t) {
		atomic_long_sub(bytes, &uu_table_users[user].bytes);
		atomic_long_sub(bytes, &uu_table_bytes);
		goto full;
	}
	t->nwords = nwords;
	t->bytes = bytes;
	t->used = jiffies;
	t->user = user;
	t->charged = true;
	refcount_set(&t->ref, 1);
	atomic_long_inc(&uu_table_count);
	*words = t->words;
	return t;
full:
	uu_stat_add(UU_STAT_UNWIND_TABLES_REFUSED, 1);
	return NULL;
}

/**
 * uu_table_publish - make the new table @t the file @key's, unless it has one
 * @t: from uu_table_alloc(), filled; still held by the caller
 * @key: the file's cookie
 *
 * Return: true if @t is in the hash now.
 */
bool uu_table_publish(struct uu_table *t, u64 key)
{
	struct uu_table *old;
	bool done = true;

	spin_lock(&uu_tables_lock);
	hash_for_each_possible(uu_tables, old, node, key)
		if (old->key == key)
			done = false;
	if (done) {
		t->key = key;
		refcount_inc(&t->ref);
		hash_add_rcu(uu_tables, &t->node, t->key);
	}
	spin_unlock(&uu_tables_lock);
	return done;
}

/**
 * uu_table_replace - put the larger copy @new in the place of @old
 * @old: the file's table, held
 * @new: from uu_table_alloc(), filled from @old; still held by the caller
 *
 * Context: uu_tables_write held. If @old was dropped meanwhile, @new is not published.
 */
void uu_table_replace(struct uu_table *old, struct uu_table *new)
{
	spin_lock(&uu_tables_lock);
	if (!hlist_unhashed(&old->node)) {
		new->key = old->key;
		refcount_inc(&new->ref);
		hlist_replace_rcu(&old->node, &new->node);
		/* hlist_unhashed() must see @old gone from here on. */
		old->node.pprev = NULL;
		uu_table_uncharge(old);
		uu_table_put(old);
	}
	spin_unlock(&uu_tables_lock);
}

void uu_tables_write_lock(void)
{
	mutex_lock(&uu_tables_write);
}

void uu_tables_write_unlock(void)
{
	mutex_unlock(&uu_tables_write);
}

/*
 * A table the limit refused to grow is not offered rows again before uu_tables_retry_at()
 * (the limit's next scan for idle tables, UU_TABLE_RESCAN from now), when
 * uu_tables_retry_now() says so.
 */
unsigned long uu_tables_retry_at(void)
{
	return jiffies + UU_TABLE_RESCAN;
}

bool uu_tables_retry_now(unsigned long at)
{
	return !time_before(jiffies, at);
}

/*
 * The shrinker: the memory of tables idle for UU_TABLE_SHRINK_IDLE, which the next stacks
 * would have to read and parse again (the count is all of the tables' memory: a bound).
 */
static unsigned long uu_tables_count(struct shrinker *s, struct shrink_control *sc)
{
	unsigned long pages = atomic_long_read(&uu_table_bytes) >> PAGE_SHIFT;

	return pages ?: SHRINK_EMPTY;
}

static unsigned long uu_tables_scan(struct shrinker *s, struct shrink_control *sc)
{
	unsigned long freed = 0;
	size_t bytes;

	/* Counted when dropped; given back when RCU frees them. */
	while (freed < sc->nr_to_scan && (bytes = uu_tables_drop(UU_TABLE_SHRINK_IDLE)))
		freed += DIV_ROUND_UP(bytes, PAGE_SIZE);
	return freed ?: SHRINK_STOP;
}

/*
 * The tables' memory now, how many there are, and how many users they are charged to:
 * shown in user_unwind_stats.
 */
void uu_tables_memory(unsigned long *bytes, unsigned long *count, unsigned long *users)
{
	int i;

	*bytes = atomic_long_read(&uu_table_bytes);
	*count = atomic_long_read(&uu_table_count);
	*users = 0;
	for (i = 0; i <= UU_TABLE_USERS; i++)
		*users += atomic_long_read(&uu_table_users[i].bytes) > 0;
}

/* Context: task, at load. Return: 0 (without a shrinker, the limit still bounds them). */
int uu_tables_init(void)
{
	int i;

	for (i = 0; i <= UU_TABLE_USERS; i++) {
		uu_table_users[i].uid = INVALID_UID;
		uu_table_users[i].full_until = jiffies;
	}
	uu_tables_shrinker = shrinker_alloc(0, "user_unwind-tables");
	if (!uu_tables_shrinker) {
		pr_warn("no shrinker for the unwind tables: only table_kib bounds them\n");
		return 0;
	}
	uu_tables_shrinker->count_objects = uu_tables_count;
	uu_tables_shrinker->scan_objects = uu_tables_scan;
	shrinker_register(uu_tables_shrinker);
	return 0;
}

/* Drops every table. Context: task, after the last callback (uu_files_exit()). */
void uu_tables_exit(void)
{
	struct uu_table *t;
	struct hlist_node *tmp;
	int bkt;

	if (uu_tables_shrinker)
		shrinker_free(uu_tables_shrinker);
	uu_tables_shrinker = NULL;
	spin_lock(&uu_tables_lock);
	hash_for_each_safe(uu_tables, bkt, tmp, t, node)
		uu_table_unhash(t);
	spin_unlock(&uu_tables_lock);
	/* The RCU callbacks free them, and must run before the module's code goes. */
	rcu_barrier();
}
