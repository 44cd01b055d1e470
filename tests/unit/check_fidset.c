// SPDX-License-Identifier: MIT
/* The fid set and map against plain arrays, over random changes. */
#include <check.h>
#include <stdlib.h>
#include "fidset.h"

#define N 3000

static struct lento_fid rand_fid(unsigned int *seed)
{
	/* Few distinct values, so adds collide and deletions find things. */
	return (struct lento_fid){ 1 + rand_r(seed) % 3, rand_r(seed) % 4,
				   1 + rand_r(seed) % 700 };
}

static int ref_find(const struct lento_fid *ref, int n,
		    const struct lento_fid *f)
{
	int i;

	for (i = 0; i < n; i++)
		if (lento_fid_eq(&ref[i], f))
			return i;
	return -1;
}

START_TEST(random_against_array)
{
	static struct lento_fid ref[N * 2];
	unsigned int seed = 12345 + _i;
	struct fidset s;
	int n = 0, step, i;

	fidset_init(&s);
	for (step = 0; step < 20000; step++) {
		struct lento_fid f = rand_fid(&seed);
		int at = ref_find(ref, n, &f), r = rand_r(&seed) % 100;

		if (r < 55) {
			ck_assert_int_eq(fidset_add(&s, &f), at < 0);
			if (at < 0)
				ref[n++] = f;
		} else if (r < 97) {
			ck_assert_int_eq(fidset_del(&s, &f), at >= 0);
			if (at >= 0)
				ref[at] = ref[--n];
		} else {
			uint32_t v = 1 + rand_r(&seed) % 3;
			size_t gone = 0;

			for (i = 0; i < n; i++)
				if (ref[i].volume == v) {
					ref[i--] = ref[--n];
					gone++;
				}
			ck_assert_uint_eq(fidset_del_volume(&s, v), gone);
		}
		ck_assert_uint_eq(s.count, (size_t)n);
		if (step % 500 == 0)
			for (i = 0; i < n; i++)
				ck_assert(fidset_has(&s, &ref[i]));
	}
	for (i = 0; i < n; i++)
		ck_assert(fidset_has(&s, &ref[i]));
	fidset_free(&s);
}
END_TEST

START_TEST(null_fid)
{
	struct fidset s;
	struct lento_fid z = { 0, 0, 0 };

	fidset_init(&s);
	ck_assert_int_lt(fidset_add(&s, &z), 0);
	ck_assert(!fidset_has(&s, &z));
	ck_assert(!fidset_del(&s, &z));
	fidset_free(&s);
}
END_TEST

/* The map against a plain array: puts, replacements, clears. */
START_TEST(map_against_array)
{
	/* Room for every fid rand_fid() gives: 3 volumes, 4 clients, 700. */
	static struct lento_fid ref[3 * 4 * 700];
	static size_t refval[3 * 4 * 700];
	unsigned int seed = 777 + _i;
	struct fidmap m;
	struct lento_fid z = { 0, 0, 0 };
	size_t v;
	int n = 0;

	fidmap_init(&m);
	ck_assert(!fidmap_get(&m, &z, &v));
	ck_assert_int_lt(fidmap_put(&m, &z, 1), 0);
	for (int step = 0; step < 20000; step++) {
		struct lento_fid f = rand_fid(&seed);
		int at = ref_find(ref, n, &f), r = rand_r(&seed) % 1000;

		if (r < 600) {
			v = (size_t)rand_r(&seed);
			ck_assert_int_eq(fidmap_put(&m, &f, v), 0);
			if (at < 0)
				at = n++;
			ref[at] = f;
			refval[at] = v;
		} else if (r < 997) {
			size_t got = 0;

			ck_assert_int_eq(fidmap_get(&m, &f, &got), at >= 0);
			if (at >= 0)
				ck_assert_uint_eq(got, refval[at]);
		} else {
			fidmap_clear(&m);
			n = 0;
		}
		ck_assert_uint_eq(m.count, (size_t)n);
	}
	for (int i = 0; i < n; i++) {
		ck_assert(fidmap_get(&m, &ref[i], &v));
		ck_assert_uint_eq(v, refval[i]);
	}
	fidmap_free(&m);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("fidset");
	TCase *tc = tcase_create("fidset");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, random_against_array, 0, 5);
	tcase_add_test(tc, null_fid);
	tcase_add_loop_test(tc, map_against_array, 0, 3);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
