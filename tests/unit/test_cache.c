/* test_cache.c - the trust boundary of cache keys (cache_key_allowed): the
 * queue's own cache space, the configured prefixes, nothing else; and the
 * reason a refused job is dead-lettered with. */
#include "cache.h"

#include <criterion/criterion.h>
#include <string.h>

static struct queue_config
queue(const char *prefixes)
{
	struct queue_config q;

	memset(&q, 0, sizeof(q));
	snprintf(q.name, sizeof(q.name), "q");
	q.cache_key_prefixes = (char *)prefixes;
	return q;
}

Test(cache_key, own_space_only_by_default)
{
	struct queue_config q = queue("");

	cr_expect(cache_key_allowed("ferry:{q}:cache:a", "ferry", &q));
	cr_expect(cache_key_allowed("ferry:{q}:cache:", "ferry", &q));
	cr_expect_not(cache_key_allowed("ferry:{q}:ready", "ferry", &q));
	cr_expect_not(cache_key_allowed("ferry:{q2}:cache:a", "ferry", &q));
	cr_expect_not(cache_key_allowed("ferry:{q}:cachea", "ferry", &q));
	cr_expect_not(cache_key_allowed("ferry:master:h:1", "ferry", &q));
	cr_expect_not(cache_key_allowed("app:session:1", "ferry", &q));
	cr_expect_not(cache_key_allowed("x", "ferry", &q));
	/* another prefix: its own space only */
	cr_expect(cache_key_allowed("f2:{q}:cache:a", "f2", &q));
	cr_expect_not(cache_key_allowed("ferry:{q}:cache:a", "f2", &q));
	q.cache_key_prefixes = NULL;    /* a zeroed queue_config */
	cr_expect_not(cache_key_allowed("app:session:1", "ferry", &q));
}

Test(cache_key, allow_list)
{
	struct queue_config q = queue(" app:cache: ,other:,");

	cr_expect(cache_key_allowed("app:cache:7", "ferry", &q));
	cr_expect(cache_key_allowed("app:cache:", "ferry", &q));
	cr_expect(cache_key_allowed("other:h", "ferry", &q));
	cr_expect(cache_key_allowed("ferry:{q}:cache:a", "ferry", &q));
	cr_expect_not(cache_key_allowed("app:cachex", "ferry", &q));
	cr_expect_not(cache_key_allowed("app:session:1", "ferry", &q));
	cr_expect_not(cache_key_allowed(" app:cache:7", "ferry", &q));
	cr_expect_not(cache_key_allowed("othe", "ferry", &q));
	/* ferry's own keys stay refused whatever the list says (config.c
	 * refuses such a list; this holds even without that check) */
	q = queue("ferry:");
	cr_expect_not(cache_key_allowed("ferry:{q}:ready", "ferry", &q));
	q = queue("fer");
	cr_expect_not(cache_key_allowed("ferry:{q}:ready", "ferry", &q));
	cr_expect(cache_key_allowed("ferret", "ferry", &q));
}

Test(cache_key, refusal_names_the_key_bounded)
{
	char buf[256], key[600];

	cache_key_refusal(buf, sizeof(buf), "app:session:1", "ferry", "q");
	cr_expect_str_eq(buf, "cache_key \"app:session:1\" is outside the "
	    "queue's cache space ferry:{q}:cache: and cache_key_prefixes");
	/* long: cut to 60 bytes at a character boundary, then "..." */
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	memcpy(key + 58, "\xc3\xa9\xe2\x82\xac", 5);  /* bytes 58-59, 60-62 */
	cache_key_refusal(buf, sizeof(buf), key, "ferry", "q");
	cr_expect(strncmp(buf, "cache_key \"", 11) == 0);
	cr_expect(strncmp(buf + 11 + 58, "\xc3\xa9...\" is outside", 17) == 0,
	    "%s", buf);
	/* control characters and bytes that are not UTF-8 shown as '?' */
	cache_key_refusal(buf, sizeof(buf), "a\nb\xff" "c", "ferry", "q");
	cr_expect(strncmp(buf, "cache_key \"a?b?c\" is", 20) == 0, "%s", buf);
}
