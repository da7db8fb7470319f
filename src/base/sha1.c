/* sha1.c - SHA-1 after FIPS 180-4, written from the standard (public-domain
 * style): a 16-word rolling message schedule, big-endian I/O. */
#include "sha1.h"

#include <string.h>

static uint32_t
sha1_rol(uint32_t x, int n)
{
	return x << n | x >> (32 - n);
}

static uint32_t
sha1_load32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static void
sha1_store32(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* The round function and constant of round i (0..79). */
static uint32_t
sha1_f(int i, uint32_t b, uint32_t c, uint32_t d)
{
	if (i < 20)
		return ((b & c) | (~b & d)) + 0x5a827999;
	if (i < 40)
		return (b ^ c ^ d) + 0x6ed9eba1;
	if (i < 60)
		return ((b & c) | (b & d) | (c & d)) + 0x8f1bbcdc;
	return (b ^ c ^ d) + 0xca62c1d6;
}

static void
sha1_block(uint32_t h[5], const unsigned char *p)
{
	uint32_t w[16], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], t;

	for (int i = 0; i < 16; i++)
		w[i] = sha1_load32(p + 4 * i);
	for (int i = 0; i < 80; i++) {
		if (i >= 16)
			w[i & 15] = sha1_rol(w[(i + 13) & 15] ^
			    w[(i + 8) & 15] ^ w[(i + 2) & 15] ^ w[i & 15], 1);
		t = sha1_rol(a, 5) + sha1_f(i, b, c, d) + e + w[i & 15];
		e = d;
		d = c;
		c = sha1_rol(b, 30);
		b = a;
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void
sha1_init(struct sha1_ctx *c)
{
	static const uint32_t iv[5] = {
		0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0
	};

	memcpy(c->h, iv, sizeof(iv));
	c->len = 0;
}

void
sha1_update(struct sha1_ctx *c, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t have = c->len % 64;

	c->len += len;
	if (have > 0) {
		size_t take = 64 - have < len ? 64 - have : len;
		memcpy(c->buf + have, p, take);
		p += take;
		len -= take;
		if (have + take < 64)
			return;
		sha1_block(c->h, c->buf);
	}
	for (; len >= 64; p += 64, len -= 64)
		sha1_block(c->h, p);
	if (len > 0)
		memcpy(c->buf, p, len);
}

/* Pad with 0x80, zeros and the length in bits, then emit the state. */
void
sha1_final(struct sha1_ctx *c, unsigned char out[SHA1_DIGEST_LEN])
{
	size_t have = c->len % 64;
	uint64_t bits = c->len * 8;

	c->buf[have++] = 0x80;
	if (have > 56) {
		memset(c->buf + have, 0, 64 - have);
		sha1_block(c->h, c->buf);
		have = 0;
	}
	memset(c->buf + have, 0, 56 - have);
	sha1_store32(c->buf + 56, (uint32_t)(bits >> 32));
	sha1_store32(c->buf + 60, (uint32_t)bits);
	sha1_block(c->h, c->buf);
	for (int i = 0; i < 5; i++)
		sha1_store32(out + 4 * i, c->h[i]);
}
