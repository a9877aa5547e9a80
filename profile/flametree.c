// SPDX-License-Identifier: MIT
// The tree of both flamegraphs (flamegraph.c, diff_svg.c): stacks merged by prefix, one node
// per distinct path from the root, with samples per side; then laid out left to right, each
// node's children in the caller's order.
#include <errno.h>
#include <stdlib.h>

#include "profile_internal.h"

int flametree_init(struct flametree *t)
{
	*t = (struct flametree){ .cap = 1024 };
	t->n = malloc(t->cap * sizeof(*t->n));
	if (!t->n)
		return -ENOMEM;
	t->n[0] = (struct flamenode){ .id = FLAMETREE_ROOT, .parent = UINT32_MAX };
	t->len = 1;
	return 0;
}

/* The child of node @parent with @id, created if new; *@out its index. */
static int flametree_child(struct flametree *t, uint32_t parent, uint32_t id, uint32_t *out)
{
	uint64_t key = (uint64_t)parent << 32 | id, val;
	int err;

	if (!u64map_get(&t->child, key, &val)) {
		*out = (uint32_t)val;
		return 0;
	}
	if (t->len == t->cap) {
		struct flamenode *nn = array_grow(t->n, &t->cap, sizeof(*nn), 1024);

		if (!nn)
			return -ENOMEM;
		t->n = nn;
	}
	if (t->len >= UINT32_MAX - 1)
		return -ENOMEM;
	err = u64map_put(&t->child, key, t->len);
	if (err)
		return err;
	t->n[t->len] = (struct flamenode){ .id = id, .parent = parent,
					   .depth = t->n[parent].depth + 1 };
	if (t->n[t->len].depth > t->max_depth)
		t->max_depth = t->n[t->len].depth;
	*out = (uint32_t)t->len++;
	return 0;
}

int flametree_add(struct flametree *t, int side, const uint64_t *ids, uint32_t n, uint64_t count)
{
	uint32_t cur = 0;
	int err;

	t->n[0].count[side] += count;
	for (uint32_t j = 0; j < n; j++) {
		err = flametree_child(t, cur, (uint32_t)ids[j], &cur);
		if (err)
			return err;
		t->n[cur].count[side] += count;
	}
	return 0;
}

struct order {
	const struct flametree *t;
	flametree_cmp_fn *cmp;
	const void *arg;
};

/* qsort_r comparator of node indices: @arg is the struct order. */
static int cmp_index(const void *a, const void *b, void *arg)
{
	const struct order *o = arg;

	return o->cmp(&o->t->n[*(const uint32_t *)a], &o->t->n[*(const uint32_t *)b], o->arg);
}

int flametree_layout(struct flametree *t, int side, flametree_cmp_fn *cmp, const void *arg)
{
	struct order order = { .t = t, .cmp = cmp, .arg = arg };
	uint32_t *fill;

	t->children = malloc(t->len * sizeof(*t->children));
	fill = calloc(t->len, sizeof(*fill));
	if (!t->children || !fill) {
		free(fill);
		return -ENOMEM;
	}
	/* Counting sort of nodes by parent: each node's children are one contiguous run. */
	for (size_t i = 1; i < t->len; i++)
		t->n[t->n[i].parent].n_children++;
	for (size_t i = 0, off = 0; i < t->len; i++) {
		t->n[i].first_child = (uint32_t)off;
		off += t->n[i].n_children;
	}
	for (size_t i = 1; i < t->len; i++) {
		struct flamenode *par = &t->n[t->n[i].parent];

		t->children[par->first_child + fill[t->n[i].parent]++] = (uint32_t)i;
	}
	free(fill);
	/* Parents are created before their children, so one pass in index order places all. */
	for (size_t i = 0; i < t->len; i++) {
		struct flamenode *n = &t->n[i];
		uint64_t x = n->x;

		if (n->n_children > 1) /* children may be NULL (no child anywhere): no NULL + 0 */
			qsort_r(t->children + n->first_child, n->n_children, sizeof(uint32_t),
				cmp_index, &order);
		for (uint32_t c = 0; c < n->n_children; c++) {
			struct flamenode *ch = &t->n[t->children[n->first_child + c]];

			ch->x = x;
			x += ch->count[side];
		}
	}
	return 0;
}

void flametree_free(struct flametree *t)
{
	free(t->n);
	free(t->children);
	u64map_free(&t->child);
	*t = (struct flametree){ 0 };
}
