/* test_cluster_slot.c - Redis Cluster hash slots (cluster.c): the values
 * Redis documents, and the hash tag rule ferry's key layout rests on (every
 * key of queue Q carries {Q}, so they share one slot). */
#include <criterion/criterion.h>
#include <string.h>

#include "cluster.h"

static int
slot(const char *key)
{
	return cluster_slot_of_key(key, strlen(key));
}

Test(cluster_slot, documented_values)
{
	cr_expect_eq(slot("foo"), 12182);
	cr_expect_eq(slot("bar"), 5061);
	cr_expect_eq(slot(""), 0);
}

Test(cluster_slot, hash_tags)
{
	cr_expect_eq(slot("{user1000}.following"), slot("{user1000}.followers"));
	cr_expect_eq(slot("{user1000}.following"), slot("user1000"));
	/* an empty tag hashes the whole key; only the first {...} counts */
	cr_expect_eq(slot("foo{}{bar}"), slot("foo{}{bar}"));
	cr_expect_neq(slot("foo{}{bar}"), slot("bar"));
	cr_expect_eq(slot("foo{{bar}}zap"), slot("{bar"));
	cr_expect_eq(slot("foo{bar}{zap}"), slot("bar"));
	cr_expect_eq(slot("{"), cluster_slot_of_key("{", 1));
}

Test(cluster_slot, queue_keys_share_the_queue_slot)
{
	const char *keys[] = { "ferry:{orders}:ready", "ferry:{orders}:requeue",
		"ferry:{orders}:proc:h:1:abcd.42", "ferry:{orders}:masters",
		"ferry:{orders}:clock", "ferry:{orders}:cache:x" };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_expect_eq(slot(keys[i]), cluster_slot_of_queue("orders"), "%s",
		    keys[i]);
}
