/* fuzz_wrapper.c - wrapper_parse (src/format/wrapper.c), both kinds, against the
 * grammar of doc/formats.md: an element it accepts is rebuilt byte for
 * byte from what it returned, every string token decodes to valid UTF-8
 * without NUL exactly as jansson decodes it, and the text cjson would
 * write for it is accepted again with the same text. */
#include "fuzz.h"
#include "wrapper.h"

struct sb {
	char *p;
	size_t n, cap;
};

static void
sb_put(struct sb *b, const char *p, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		CHECK(b->p != NULL);
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void
sb_str(struct sb *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

static void
sb_num(struct sb *b, const char *name, long long v)
{
	char tmp[64];

	snprintf(tmp, sizeof(tmp), "%s%lld", name, v);
	sb_str(b, tmp);
}

static void
sb_tok(struct sb *b, const char *name, struct wrapper_str s)
{
	if (s.p == NULL)
		return;
	sb_str(b, name);
	sb_put(b, s.p, s.n);
}

static void
sb_stamps(struct sb *b, const struct wrapper *w, bool empty)
{
	if (w->nstamps == 0 && !empty)
		return;
	sb_str(b, ",\"stamps\":[");
	for (int i = 0; i < w->nstamps; i++) {
		if (i > 0)
			sb_str(b, ",");
		sb_put(b, w->stamps[i].p, w->stamps[i].n);
	}
	sb_str(b, "]");
}

/* The element's bytes before the document, as the grammar writes w. */
static void
rebuild(struct sb *b, const struct wrapper *w, enum wrapper_kind kind,
    bool empty_stamps)
{
	b->n = 0;
	if (kind == WRAPPER_JOB) {
		sb_num(b, WRAPPER_HEAD "\"recoveries\":", w->recoveries);
		sb_num(b, ",\"attempts\":", w->attempts);
		sb_stamps(b, w, empty_stamps);
		sb_tok(b, ",\"first_error\":", w->first_error);
		sb_tok(b, ",\"last_error\":", w->last_error);
		if (w->seq != -1)
			sb_num(b, ",\"seq\":", w->seq);
	} else {
		sb_tok(b, "{\"reason\":", w->reason);
		sb_num(b, ",\"attempts\":", w->attempts);
		sb_num(b, ",\"recoveries\":", w->recoveries);
		sb_num(b, ",\"time\":", w->time);
		sb_tok(b, ",\"worker\":", w->worker);
		sb_tok(b, ",\"id\":", w->id);
		sb_stamps(b, w, empty_stamps);
		sb_tok(b, ",\"first_error\":", w->first_error);
		sb_tok(b, ",\"last_error\":", w->last_error);
	}
	sb_str(b, WRAPPER_JOB_MARK);
}

/* text as cjson (Redis' Lua) encodes a string. */
static void
cjson_encode(struct sb *b, const char *text)
{
	static const char hex[] = "0123456789abcdef";

	b->n = 0;
	sb_str(b, "\"");
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		char e[7] = { '\\', 0 };
		switch (*p) {
		case '"': case '\\': case '/': e[1] = (char)*p; break;
		case '\b': e[1] = 'b'; break;
		case '\f': e[1] = 'f'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		default:
			if (*p < 0x20 || *p == 0x7f) {
				memcpy(e + 1, "u00", 3);
				e[4] = hex[*p >> 4];
				e[5] = hex[*p & 15];
			} else {
				sb_put(b, (const char *)p, 1);
				continue;
			}
		}
		sb_str(b, e);
	}
	sb_str(b, "\"");
}

static void
check_token(struct wrapper_str s, const char *el, const char *doc)
{
	struct sb enc = { 0 }, again = { 0 };
	struct wrapper w2;
	char *text;
	size_t n;

	if (s.p == NULL)
		return;
	CHECK(s.p >= el && s.p + s.n <= doc);
	CHECK(s.n >= 2 && s.n <= WRAPPER_STR_MAX);
	CHECK(s.p[0] == '"' && s.p[s.n - 1] == '"');
	text = wrapper_str_text(s);
	CHECK(text != NULL);
	n = strlen(text);
	CHECK(n <= s.n - 2);
	CHECK(fuzz_utf8_ok(text, n));
	CHECK(fuzz_jansson_string_is(s.p, s.n, text, n));
	/* what the Lua side writes for this text is read back the same */
	cjson_encode(&enc, text);
	if (enc.n <= WRAPPER_STR_MAX) {
		sb_str(&again, WRAPPER_HEAD "\"recoveries\":0,\"attempts\":0,"
		    "\"first_error\":");
		sb_put(&again, enc.p, enc.n);
		sb_str(&again, ",\"job\":{}}");
		CHECK(wrapper_parse(again.p, again.n, WRAPPER_JOB, &w2) == 0);
		char *t2 = wrapper_str_text(w2.first_error);
		CHECK(strcmp(t2, text) == 0);
		free(t2);
		wrapper_free(&w2);
	}
	free(text);
	free(enc.p);
	free(again.p);
}

static void
check_kind(const char *el, size_t len, enum wrapper_kind kind)
{
	struct wrapper w;
	struct sb b = { 0 };
	const char *mark;

	if (wrapper_parse(el, len, kind, &w) != 0) {
		CHECK(w.stamps == NULL && w.nstamps == 0 && w.doc == NULL);
		return;
	}
	CHECK(len >= 2 && el[len - 1] == '}');
	CHECK(w.doc >= el + 1 && w.doc + w.doc_len == el + len - 1);
	mark = memmem(el, len, WRAPPER_JOB_MARK, strlen(WRAPPER_JOB_MARK));
	CHECK(mark != NULL && mark + strlen(WRAPPER_JOB_MARK) == w.doc);
	CHECK(w.recoveries >= 0 && w.recoveries < 1000000000LL);
	CHECK(w.attempts >= 0 && w.attempts < 1000000000LL);
	CHECK(w.seq >= -1 && w.seq < 1000000000000000LL);
	CHECK(w.time >= -1 && w.time < 1000000000000000LL);
	if (kind == WRAPPER_JOB) {
		CHECK(wrapper_looks_like(el, len));
		CHECK(w.reason.p == NULL && w.worker.p == NULL &&
		    w.id.p == NULL && w.time == -1);
	} else {
		CHECK(w.reason.p != NULL && w.worker.p != NULL && w.time >= 0);
		CHECK(w.seq == -1);
	}
	rebuild(&b, &w, kind, false);
	if (!(b.n == (size_t)(w.doc - el) && memcmp(b.p, el, b.n) == 0))
		rebuild(&b, &w, kind, true);    /* "stamps":[] */
	CHECK(b.n == (size_t)(w.doc - el) && memcmp(b.p, el, b.n) == 0);
	free(b.p);
	check_token(w.reason, el, w.doc);
	check_token(w.worker, el, w.doc);
	check_token(w.id, el, w.doc);
	check_token(w.first_error, el, w.doc);
	check_token(w.last_error, el, w.doc);
	for (int i = 0; i < w.nstamps; i++)
		check_token(w.stamps[i], el, w.doc);
	CHECK(wrapper_str_text((struct wrapper_str){ NULL, 0 }) == NULL);
	wrapper_free(&w);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *el = (const char *)data;

	check_kind(el, size, WRAPPER_JOB);
	check_kind(el, size, WRAPPER_DEAD);
	return 0;
}
