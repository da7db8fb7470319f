/* sha1.h - SHA-1 (FIPS 180-4), for naming jobs that carry no id. Not for
 * security: only a stable, well-known digest of a document's bytes. */
#ifndef FERRY_SHA1_H
#define FERRY_SHA1_H

#include <stddef.h>
#include <stdint.h>

#define SHA1_DIGEST_LEN 20

struct sha1_ctx {
	uint32_t h[5];
	uint64_t len;                   /* bytes hashed so far */
	unsigned char buf[64];          /* the partial block, len % 64 bytes */
};

void sha1_init(struct sha1_ctx *c);
void sha1_update(struct sha1_ctx *c, const void *data, size_t len);
void sha1_final(struct sha1_ctx *c, unsigned char out[SHA1_DIGEST_LEN]);

#endif
