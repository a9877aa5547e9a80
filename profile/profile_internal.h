/* SPDX-License-Identifier: MIT */
/* Private to profile/: the containers (strpool, u64map, seqtab) and the loaded profile. */
#ifndef HVPROF_PROFILE_INTERNAL_H
#define HVPROF_PROFILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/profile.h>

static inline uint64_t mix64(uint64_t x)
{
	/* The finalizer of MurmurHash3: every input bit affects every output bit. */
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* ---- strpool.c: interned NUL-terminated strings, identified by a dense uint32_t id. */
struct strpool {
	char **strs;
	uint32_t n, cap;
	uint32_t *slots; /* id + 1, 0 = empty; power-of-two size */
	uint64_t *hashes;
	size_t nslots;
};

int strpool_intern(struct strpool *sp, const char *s, size_t len, uint32_t *id) __must_check;
static inline const char *strpool_get(const struct strpool *sp, uint32_t id)
{
	return sp->strs[id];
}
void strpool_free(struct strpool *sp);

/* ---- u64map.c: uint64_t -> uint64_t hash map (linear probing, backward-shift delete). */
struct u64map {
	uint64_t *keys;
	uint64_t *vals;
	uint8_t *used;
	size_t cap, n; /* cap: power of two or 0 */
};

int u64map_put(struct u64map *m, uint64_t key, uint64_t val) __must_check;
int u64map_get(const struct u64map *m, uint64_t key, uint64_t *val) __must_check;
void u64map_del(struct u64map *m, uint64_t key);
void u64map_free(struct u64map *m);

/* ---- aggregate.c: counts and periods per distinct sequence of uint64_t (a stack key). */
struct seqtab_entry {
	uint64_t key_off; /* into arena */
	uint32_t key_len;
	uint64_t hash;
	uint64_t count;
	uint64_t period;
};

struct seqtab {
	struct seqtab_entry *e;
	size_t n, cap;
	uint64_t *arena;
	size_t arena_len, arena_cap;
	uint32_t *slots; /* entry index + 1, 0 = empty */
	size_t nslots;
};

/* Add @count/@period to the entry of @key (created if new); *@idx: its index (optional). */
int seqtab_add(struct seqtab *st, const uint64_t *key, uint32_t len, uint64_t count,
	       uint64_t period, size_t *idx) __must_check;
static inline const uint64_t *seqtab_key(const struct seqtab *st, size_t idx, uint32_t *len)
{
	*len = st->e[idx].key_len;
	return st->arena + st->e[idx].key_off;
}
void seqtab_free(struct seqtab *st);

/* ---- the loaded profile (profile.c) */
enum frame_kind {
	FRAME_COMM = 0,   /* the root of a stack: the thread's comm */
	FRAME_USER = 1,
	FRAME_KERNEL = 2,
	FRAME_LOST = 3,   /* "[user stack lost: REASON]", in the user part */
};

struct frame {
	uint32_t name; /* strpool id */
	uint32_t dso;  /* strpool id */
	uint32_t kind; /* enum frame_kind */
	uint32_t resolved;
};

struct meta_kv {
	char *key;
	char *value;
};

struct counter_kv {
	char *name;
	uint64_t value;
};

/*
 * stacks: key = [pid, tgid, frame ids...] with frame 0 the comm frame, then frames root
 * (outermost) to leaf (innermost): user outer..inner (or a lost frame), kernel outer..inner.
 */
#define STACK_KEY_FRAMES 2 /* index of the first frame id in a stack key */

struct profile {
	struct strpool strs;
	struct frame *frames;
	size_t n_frames, cap_frames;
	struct u64map frame_ids;
	struct seqtab stacks;
	struct meta_kv *meta;
	size_t n_meta, cap_meta;
	struct counter_kv *counters;
	size_t n_counters, cap_counters;
	struct profile_stats stats;
	char *read_error;
};

/* Intern a frame; *@id its index in p->frames. */
int profile_frame(struct profile *p, enum frame_kind kind, const char *name, const char *dso,
		  int resolved, uint32_t *id) __must_check;

/* ---- symbolize.c: IPs to frames, with per-file symtab caches. */
struct symbolizer;

struct sym_config {
	const char *vmlinux; /* explicit override, or NULL */
	const char *symfs;
	const char *rootfs;  /* explicit override, or NULL */
	int no_symbols;
};

int symbolizer_create(struct profile *p, const struct sym_config *cfg, struct symbolizer **out)
	__must_check;
/* A frame for a kernel IP. */
int symbolize_kernel(struct symbolizer *s, uint64_t ip, uint32_t *frame) __must_check;
/*
 * A frame for a user IP of a process whose executable is @exe (a guest path, "" unknown) with
 * text at [@start_code, @end_code) (GVAs); @image: a dense id of (exe, start, end) for caching,
 * or UINT32_MAX when the process is unknown.
 */
int symbolize_user(struct symbolizer *s, uint32_t image, const char *exe, uint64_t start_code,
		   uint64_t end_code, uint64_t ip, uint32_t *frame) __must_check;
void symbolizer_free(struct symbolizer *s);

/* Resolve @guest_path inside @root (symlinks stay inside it). *@out: malloc'ed host path. */
int resolve_in_root(const char *root, const char *guest_path, char **out) __must_check;

/* ---- outbuf.c: buffered, formatted output to a profile_sink, with a sticky error. */
struct outbuf {
	const struct profile_sink *sink;
	int err;
	size_t len;
	char buf[65536];
};

void outbuf_init(struct outbuf *ob, const struct profile_sink *sink);
void outbuf_printf(struct outbuf *ob, const char *fmt, ...) __printf(2, 3);
void outbuf_write(struct outbuf *ob, const char *s, size_t len);
void outbuf_puts(struct outbuf *ob, const char *s);
int outbuf_flush(struct outbuf *ob) __must_check;

/* ---- facts.c: the run's facts shared by the report header and the flamegraph subtitle. */
#define FACT_LINE 320
#define FACT_MAX 12
/* Fill @lines with one fact each ("Samples: 1000 (kernel 600, user 400)", ...); return how many. */
size_t profile_facts(const struct profile *p, char lines[][FACT_LINE], size_t max);

/* ---- names shared by the exporters */
/* The display name of frame @id ("[unknown]" for UINT32_MAX). */
const char *frame_name(const struct profile *p, uint32_t id);

#endif /* HVPROF_PROFILE_INTERNAL_H */
