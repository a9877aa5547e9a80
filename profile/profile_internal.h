/* SPDX-License-Identifier: MIT */
/* Private to profile/: the loaded profile, and what its passes and exporters share. */
#ifndef HVPROF_PROFILE_INTERNAL_H
#define HVPROF_PROFILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/profile.h>

#include "containers_internal.h"

/*
 * Option @field of the options struct @opts, which carries its size (libbpf's OPTS_GET): the
 * field when @opts is non-NULL and its size covers the field (a caller built against an older
 * header passes a smaller struct), else @def. A macro because it serves every options struct;
 * @opts is evaluated more than once, so pass a plain pointer.
 */
#define OPT(opts, field, def)                                                                  \
	((opts) && (opts)->size >= offsetof(__typeof__(*(opts)), field) + sizeof((opts)->field) \
		 ? (opts)->field                                                               \
		 : (def))

/* ---- model.c: the loaded profile */
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
 * A location: one distinct (frame, ip). The comm frame and the lost frame have ip 0.
 * @mapping: index in profile.mappings, or UINT32_MAX. @sym_off: ip minus the start of its
 * symbol, or UINT64_MAX when the frame has no symbol.
 */
struct loc {
	uint32_t frame;
	uint32_t mapping;
	uint64_t ip;
	uint64_t sym_off;
};

/*
 * A mapping: the object frames of one DSO name come from. @dso: strpool id of the DSO name of
 * the frames (what report shows); @path: strpool id of its file (guest path of an executable,
 * host path of the vmlinux); @build_id: strpool id of the lower-case hex GNU build-id ("" none);
 * @start/@limit: lowest ip and highest ip + 1 of its locations (0/0 when none has an ip).
 */
struct mapping {
	uint32_t dso;
	uint32_t path;
	uint32_t build_id;
	uint64_t start, limit;
};

/*
 * One kept sample (profile_options.keep_samples): @lstack indexes profile.lstacks (from the
 * loader to symbolize_pass(), the index of the sample's raw stack in raw_stacks.stacks).
 */
struct psample {
	uint64_t time_ns;
	uint64_t period;
	uint32_t lstack;
	uint32_t vcpu;
};

/*
 * stacks: key = [pid, tgid, frame ids...] with frame 0 the comm frame, then frames root
 * (outermost) to leaf (innermost): user outer..inner (or a lost frame), kernel outer..inner.
 */
#define STACK_KEY_FRAMES 2 /* index of the first frame id in a stack key */
/*
 * lstacks: the same stacks at the level of locations (distinct ips): key = [index of the stack
 * in stacks, loc ids root..leaf] (the first loc is the comm's); count and period as stacks.
 */
#define LSTACK_KEY_LOCS 1 /* index of the first loc id in an lstack key */

/*
 * Every workload window of a recording, in order (record --repeat runs the command N times):
 * each workload start opens one, the first workload end after it closes it; a start that comes
 * while a window is open leaves that one without an end (it stops at the next start). The first
 * PROFILE_MAX_WINDOWS are kept, @seen counts every start.
 */
struct window_list {
	struct profile_window w[PROFILE_MAX_WINDOWS];
	size_t n;
	uint64_t seen;
};

struct profile {
	struct strpool strs;
	struct frame *frames;
	size_t n_frames, cap_frames;
	struct u64map frame_ids;
	struct seqtab stacks;
	struct loc *locs;
	size_t n_locs, cap_locs;
	struct seqtab lstacks;
	struct mapping *mappings;
	size_t n_mappings, cap_mappings;
	struct u64map mapping_of_dso; /* dso strpool id -> index in mappings */
	struct psample *samples;      /* kept samples in time order (keep_samples), or NULL */
	size_t n_samples, cap_samples;
	int kept_samples;
	struct meta_kv *meta;
	size_t n_meta, cap_meta;
	struct counter_kv *counters;
	size_t n_counters, cap_counters;
	struct profile_stats stats;
	char *read_error;
	char *filter_desc;            /* sample_filter.desc of the load's filters, or NULL */
	struct profile_window window; /* from EVENT records (profile_add_event) */
	int has_window;               /* a workload start was seen */
	struct window_list windows;   /* every workload window (record --repeat) */
};

/* Add an EVENT record to @l (workload start and end; other kinds are ignored). */
void window_list_add_event(struct window_list *l, const struct hvp_event *e);
/* Window @idx of @l as a time range [*@start_ns, *@end_ns] (UINT64_MAX: to the end).
 * Return: 0; -ENOENT no such window. */
int window_list_range(const struct window_list *l, size_t idx, uint64_t *start_ns,
		      uint64_t *end_ns);

/* An EVENT record: the first workload start, the first end after it, the sampling start. */
void profile_add_event(struct profile *p, const struct hvp_event *e);
/* The same on a bare window: *@has_window once a workload start was seen (runscan.c's too). */
void window_add_event(struct profile_window *w, int *has_window, const struct hvp_event *e);

/*
 * Intern the frame (@kind, @name, @dso); @resolved: it names a symbol (kept from the first time
 * the frame is interned). *@id: its index in p->frames. Return: 0, or -ENOMEM.
 */
int profile_frame(struct profile *p, enum frame_kind kind, const char *name, const char *dso,
		  int resolved, uint32_t *id) __must_check;

/*
 * The mapping of the DSO name of strpool id @dso_id; a new one has the DSO name as its path,
 * no build-id and no address range yet. *@idx: its index in p->mappings. Return: 0, or -ENOMEM.
 */
int profile_mapping_of(struct profile *p, uint32_t dso_id, uint32_t *idx) __must_check;

/*
 * Record that frames of DSO name @dso come from the file @path with @build_id ("" none); a
 * later note for the same DSO name replaces the path and build-id. Return: 0, or -ENOMEM.
 */
int profile_mapping_note(struct profile *p, const char *dso, const char *path,
			 const char *build_id) __must_check;

/* Append the META pair (@key, @value), copied; a key may repeat. Return: 0, or -ENOMEM. */
int profile_add_meta(struct profile *p, const char *key, const char *value) __must_check;

/* Set counter @name (copied) to @value, replacing an earlier value. Return: 0, or -ENOMEM. */
int profile_set_counter(struct profile *p, const char *name, uint64_t value) __must_check;

/* The display name of frame @id ("[unknown]" for UINT32_MAX), owned by @p. */
const char *frame_name(const struct profile *p, uint32_t id);

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
/* A frame for a kernel IP; *@sym_off: @ip minus its symbol's start, or UINT64_MAX. */
int symbolize_kernel(struct symbolizer *s, uint64_t ip, uint32_t *frame, uint64_t *sym_off)
	__must_check;
/*
 * A frame for a user IP of a process whose executable is @exe (a guest path, "" unknown) with
 * text at [@start_code, @end_code) (GVAs); @image: a dense id of (exe, start, end) for caching,
 * or UINT32_MAX when the process is unknown.
 */
int symbolize_user(struct symbolizer *s, uint32_t image, const char *exe, uint64_t start_code,
		   uint64_t end_code, uint64_t ip, uint32_t *frame, uint64_t *sym_off) __must_check;
struct addrspace;
/*
 * A frame for user @ip of address space @as (symbolize_map.c; NULL: the process is unknown).
 * An address space without mappings (a recording without MAPPING records) goes through
 * symbolize_user() with its executable. Otherwise by the mapping of @ip: its file's symbol
 * (DSO: the basename of its path, "libc.so.6"); "[libc.so.6+0xOFF]" (OFF: file offset) when
 * the file is not found, stripped, or no symbol covers @ip; "[vdso+0xOFF]" in the vDSO;
 * "0xOFF" in "[anon]" for other anonymous memory (OFF: offset in the mapping); "0xIP" in
 * "[unknown]" outside every mapping. *@sym_off: @ip minus its symbol's start, or UINT64_MAX.
 * Return: 0, or -ENOMEM.
 */
int symbolize_user_as(struct symbolizer *s, const struct addrspace *as, uint64_t ip,
		      uint32_t *frame, uint64_t *sym_off) __must_check;
/*
 * symbolizer_read_slide - take the KASLR slide from META `kernel_slide` again. The symbolizer
 * may be created while loading (for the DWARF unwinder), before the slide's META record, which
 * the recorder writes when it learns the slide (mid-run for a guest-chosen KASLR): the loader
 * calls this once the whole file is read, before kernel IPs are symbolized.
 */
void symbolizer_read_slide(struct symbolizer *s);
void symbolizer_free(struct symbolizer *s);

/* Resolve @guest_path inside @root (symlinks stay inside it). *@out: malloc'ed host path. */
int resolve_in_root(const char *root, const char *guest_path, char **out) __must_check;

/*
 * ---- load.c -> symbolize_pass.c: the raw samples. A raw stack's key is RAW_FIXED values
 * [comm strpool id, pid, tgid, address-space id + 1 (0: none), lost (RAW_LOST_*), truncated,
 * n_kernel, n_user] then n_kernel kernel ips and n_user user ips, each innermost first; count
 * and period are those of its samples.
 */
enum raw_key {
	RAW_COMM,
	RAW_PID,     /* (uint64_t)(int64_t) pid */
	RAW_TGID,    /* (uint64_t)(int64_t) tgid */
	RAW_AS,      /* the address space (addrspace.h) the user ips belong to: id + 1, 0 none */
	RAW_LOST,
	RAW_TRUNC,   /* 1: the user walk stopped at its depth bound (HVP_WALK_DEPTH) */
	RAW_N_KERNEL,
	RAW_N_USER,
	RAW_FIXED,   /* the number of the fields above: the first ip's index */
};
#define RAW_MAX (RAW_FIXED + 2 * HVP_MAX_CALLCHAIN)

/* Why a sample shows "[user stack lost: ...]" (RAW_LOST; 0: not lost). */
#define RAW_LOST_NONE 0
#define RAW_LOST_DROPPED 1   /* the sample says HVP_WALK_LOST, or its USER_STACK does */
#define RAW_LOST_NO_RECORD 2 /* deferred, and no USER_STACK with its cookie and pid in the file */
#define RAW_LOST_STOP 0x100  /* | enum hvp_walk_stop: the USER_STACK has no frame */

struct as_table;

struct raw_stacks {
	struct seqtab stacks;        /* key as above */
	const struct as_table *ases; /* the address spaces RAW_AS names (the loader's) */
};

/*
 * Symbolize every raw stack of @raw with the symbolizer @sym (the loader's): aggregate the
 * stacks of frames and of locations into @p (p->stacks, p->lstacks, p->locs, mappings'
 * ranges), point the kept samples at their location stacks and sort them by time, and fill the
 * stacks, frames, truncated and unresolved statistics. @max_stack: profile_options.max_stack.
 * @raw and @sym stay the caller's. Return: 0, -ENOMEM, or the symbolizer's error.
 */
int symbolize_pass(struct profile *p, const struct raw_stacks *raw, struct symbolizer *sym,
		   unsigned int max_stack) __must_check;

/*
 * symbolize_pass() over the @n raw tables @raws in turn (the time windows of
 * profile_load_windows_fd()), sharing the locations and the symbolizer's caches: each table's
 * stacks alone go into p->stacks and p->lstacks (emptied first), in the table's order, as
 * symbolize_pass() would put them there, and become @outs[k] (profile_stacks_from_profile());
 * each table's seqtab is freed once done with. Kept samples are not supported (none may be).
 * Return: 0 and @n sets in @outs; -ENOMEM, or the symbolizer's error (no set is left, and
 * @outs is not written: the sets are built apart and copied there on success only).
 */
int symbolize_pass_windows(struct profile *p, struct raw_stacks *raws, size_t n,
			   struct symbolizer *sym, unsigned int max_stack,
			   struct profile_stacks **outs) __must_check;

/*
 * profile_load_fd() cut by the time windows @w[0..@n) (profile_stacks_load_windows()): the
 * kept samples of window k become @outs[k]; no profile is left. Return: as profile_load_fd();
 * -EINVAL also for an empty range or keep_samples.
 */
int profile_load_windows_fd(int fd, const char *name, const struct profile_options *opts,
			    const struct profile_time_window *w, size_t n,
			    struct profile_stacks **outs, char *errbuf, size_t errbuf_len)
	__must_check;

/* ---- filter.c: the sample filters of profile_options, for the loader. */
struct sample_filter {
	int active;            /* any filter at all */
	char *desc;            /* the filters as options ("--comm a,b --time 1.5,"), or NULL */
	char **comms;          /* n_comms names, pointing into comm_buf; NULL: any comm */
	size_t n_comms;
	char *comm_buf;
	int32_t *pids, *tids;  /* n_pids tgids, n_tids tids; NULL: any */
	size_t n_pids, n_tids;
	int has_time;
	uint64_t time_start, time_end; /* ns since the recording started, both included */
	int only;              /* enum profile_only */
};

/*
 * Parse the filters of @opts into @f (see profile_filter_check()). Return: 0 (free @f with
 * sample_filter_free()); -EINVAL a bad filter, said in @errbuf; -ENOMEM. On error @f is empty.
 */
int sample_filter_init(struct sample_filter *f, const struct profile_options *opts,
		       char *errbuf, size_t errbuf_len) __must_check;
/*
 * Whether @f keeps a sample of thread @tid of process @tgid whose comm is @comm, taken at
 * @time_ns (since the recording started) at CPL @cpl (3 user, else kernel): 1 keep, 0 drop.
 */
int sample_filter_keep(const struct sample_filter *f, const char *comm, int32_t tid,
		       int32_t tgid, uint64_t time_ns, uint8_t cpl);
/* Free what @f holds and leave it empty (no filter); a zeroed @f is fine. */
void sample_filter_free(struct sample_filter *f);

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

/* ---- stackset.c: stacks of frame names (key: strpool ids, root first) with counts. */
struct profile_stacks {
	struct strpool names;
	struct seqtab stacks; /* count = samples; period unused */
	uint64_t total;
};

/* ---- diff_stats.c: the |z| a change needs when @tested entries are tested (Bonferroni, 1%). */
double diff_z_crit(size_t tested);

/*
 * ---- diff.c: the name diff compares a stack's first frame (its comm) under. A workqueue
 * worker's number is which worker of the pool ran the work, not what ran: Linux names them
 * "kworker/%d:%d%s" (per-CPU pool, H when high-priority) and "kworker/u%d:%d%s" (unbound pool,
 * kernel/workqueue.c create_worker()), later kernels append "-workqueue". Two boots start their
 * workers in another order, so kworker/0:0 in one is kworker/0:1 in the other. Returns @comm
 * itself, or @buf (of @len bytes) holding it with the worker number as "*": kworker/0:*,
 * kworker/u4:*H-events_unbound. Never fails: a name that does not fit is returned as it is.
 */
const char *diff_comm_name(const char *comm, char *buf, size_t len);

/* ---- json.c: JSON values. */
/* @s as a JSON string, quotes included (control bytes escaped, invalid UTF-8 as U+FFFD). */
void json_string(struct outbuf *ob, const char *s);
/* @v with 4 decimals, or null for NaN and infinities. */
void json_double(struct outbuf *ob, double v);

/*
 * ---- flametree.c: the tree of both flamegraphs. Stacks are merged by prefix: a node per
 * distinct path from the root, with the samples of its subtree per side (a plain flamegraph
 * uses side 0; the differential one BASE 0 and NEW 1).
 */
#define FLAMETREE_ROOT UINT32_MAX /* the id of the root ("all") */

struct flamenode {
	uint32_t id;          /* the caller's id of the frame; FLAMETREE_ROOT for the root */
	uint32_t parent;      /* node index; UINT32_MAX for the root */
	uint32_t depth;       /* 0 for the root */
	uint32_t first_child; /* index into flametree.children (flametree_layout()) */
	uint32_t n_children;
	uint64_t count[2];    /* samples in this subtree, per side */
	uint64_t x;           /* samples of the laid-out side left of this node */
};

struct flametree {
	struct flamenode *n;  /* n[0] is the root; parents come before their children */
	size_t len, cap;
	struct u64map child;  /* (parent << 32 | id) -> node index */
	uint32_t *children;   /* node indices: each node's children, one sorted run */
	uint32_t max_depth;
};

/* The order of sibling nodes in the layout (qsort_r style: < 0, 0, > 0). */
typedef int flametree_cmp_fn(const struct flamenode *a, const struct flamenode *b,
			     const void *arg);

/* An empty tree (the root alone) in @t. Return: 0, or -ENOMEM. flametree_free() in any case. */
int flametree_init(struct flametree *t) __must_check;
/*
 * Add @count samples on @side (0 or 1) of the stack @ids[0..@n) (root first; ids < 2^32) to
 * every node on its path, creating nodes as needed. Return: 0, or -ENOMEM.
 */
int flametree_add(struct flametree *t, int side, const uint64_t *ids, uint32_t n, uint64_t count)
	__must_check;
/*
 * Once every stack is added: order each node's children by @cmp (called with @arg) and set
 * every node's x from the samples of @side. Return: 0, or -ENOMEM.
 */
int flametree_layout(struct flametree *t, int side, flametree_cmp_fn *cmp, const void *arg)
	__must_check;
/* Free what @t holds and leave it empty; accepts a zeroed or partly built tree. */
void flametree_free(struct flametree *t);

/* ---- flamesvg.c: the SVG both flamegraphs share (page, interaction, frame boxes). */
#define FLAMESVG_FRAME_H 16 /* pixels per stack level */
#define FLAMESVG_PAD 10     /* left/right margin (pixels) */

/* XML text or attribute value: escape markup, replace control bytes and invalid UTF-8. */
void xml_escape(struct outbuf *ob, const char *s);
/*
 * The SVG of @width x @height pixels up to its title: XML declaration, <svg>, style, the
 * <script> of the interaction (hover, zoom, search, reset), a background of colour @bg (CSS
 * "rgb(r,g,b)"), and the opening tag of the title <text>, which the caller writes and closes.
 */
void flamesvg_begin(struct outbuf *ob, unsigned int width, unsigned int height, const char *bg);
/*
 * The Reset Zoom and Search controls at y = @ctl_y, the matched and details lines, and the
 * opening tag of the frames group (flamesvg_end() closes it).
 */
void flamesvg_controls(struct outbuf *ob, unsigned int width, unsigned int height,
		       unsigned int ctl_y);
/*
 * The box of node @n of laid-out tree @t (pixels): @x and @w scale its samples of @side to
 * @width less the margins; @y puts the root at the bottom of the frames, which start at @top.
 */
void flamesvg_place(const struct flametree *t, const struct flamenode *n, int side,
		    unsigned int width, unsigned int top, double *x, double *y, double *w);
/* A frame's <g> up to its <title>, whose text the caller writes (escaped) next. */
void flamesvg_frame_begin(struct outbuf *ob, uint32_t depth, const char *name);
/* The end of the frame's <title>, its box at @x, @y, @w filled with @fill, and its label. */
void flamesvg_frame_end(struct outbuf *ob, double x, double y, double w, const char *fill);
/* The end of the frames group and of the SVG. */
void flamesvg_end(struct outbuf *ob);

/* ---- report_rows.c -> report.c: the rows of `report`, built and sorted. */
enum report_key {
	REPORT_KEY_COMM,
	REPORT_KEY_PID,
	REPORT_KEY_DSO,
	REPORT_KEY_SYM,
	REPORT_N_KEYS,
};

/* @k's name in --sort and in JSON rows ("comm", ...) and its column header ("Command", ...). */
const char *report_key_name(enum report_key k);
const char *report_key_header(enum report_key k);

struct report_row {
	uint64_t count;        /* samples whose innermost frame has the row's keys */
	uint64_t weight;       /* their period, or count when the recording has no periods */
	uint64_t child_weight; /* weight of the samples with a frame with these keys anywhere */
	const char *col[REPORT_N_KEYS]; /* the text of each sorted-on key but pid ("[k] name" for
					 * sym: "[k]" kernel, "[.]" user) */
	int64_t pid;
};

struct report_rows {
	struct report_row *rows; /* by child_weight (with children), weight, count, then keys */
	size_t n;
	enum report_key keys[REPORT_N_KEYS]; /* the sort keys, in --sort order */
	int n_keys;
	int children;            /* child_weight is filled */
	int use_period;          /* weights are periods (ns of the clock counter) */
	uint64_t total_weight;   /* of all rows (self weights) */
	char **syms;             /* the owned sym texts of the rows, by creation order */
};

/*
 * The rows of @p by the comma list @sort (NULL: "comm,dso,sym"), with children weights when
 * @children. On success @out holds them until report_rows_free(); on error it is empty.
 * Return: 0; -EINVAL a bad @sort; -ENOMEM.
 */
int report_rows_build(const struct profile *p, const char *sort, int children,
		      struct report_rows *out) __must_check;
void report_rows_free(struct report_rows *r);

/* ---- facts.c: the run's facts, for the report header, the flamegraph and pprof comments. */
struct facts {
	char **line; /* n owned NUL-terminated lines, without newlines */
	size_t n, cap;
	int err;     /* -ENOMEM once a line could not be added */
};

/*
 * The facts of @p into @f, one line each, in this order: "Samples: 1000 (kernel 600, user
 * 400, kernel threads 0)", the filters ("Filtered: --comm sh: kept 10 of 1000 samples
 * (1.0%)") when the load had any, lost user stacks, event, then as present callchain mode, kernel,
 * kernel placement, strategy, vCPUs, image, command line; the end; every counter in recording
 * order as "Counters: name=value, ..." lines of at most 98 columns (one counter longer than
 * that on a line of its own); where a damaged recording stopped. Lines are not truncated.
 * Return: 0 (@f holds the lines until facts_free()); -ENOMEM (@f is empty).
 */
int profile_facts(const struct profile *p, struct facts *f) __must_check;
void facts_free(struct facts *f);

#endif /* HVPROF_PROFILE_INTERNAL_H */
