/*
 * libFuzzer target for the KML decoder: the input is taken as a segment
 * (header, then records) and as a bare run of records. Built with
 * FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION so that CRCs do not stop it.
 */
#include <stddef.h>
#include <stdint.h>
#include "kml.h"

/* Touch every byte a record claims, so ASan sees any overrun. */
static unsigned int walk(const struct kml_record *r)
{
	unsigned int sum = 0;
	const char *name;

	for (size_t i = 0; i < r->name_len; i++)
		sum += (unsigned char)r->name[i];
	for (size_t i = 0; i < r->name2_len; i++)
		sum += (unsigned char)r->name2[i];
	for (size_t i = 0; i < r->data_len; i++)
		sum += r->data[i];
	for (size_t pos = 0, n; (name = kml_resync_xattr(r, &pos, &n));) {
		if (!n || n > PRESTO_KML_NAME_MAX || name[n])
			__builtin_trap();	/* the decoder promised */
		sum += (unsigned int)n;
	}
	return sum + kml_op_name(r->op)[0];
}

static unsigned int records(const uint8_t *p, size_t len, uint64_t seq)
{
	struct kml_record r;
	const char *why;
	unsigned int sum = 0;

	while (kml_decode_record(p, len, seq, &r, &why) == KML_OK) {
		if (r.len > len || r.len == 0)
			__builtin_trap();	/* the decoder promised */
		sum += walk(&r);
		seq = r.seq + 1;
		p += r.len;
		len -= r.len;
	}
	return sum;
}

volatile unsigned int kml_fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kml_seg_header h;
	const char *why;

	kml_fuzz_sink += records(data, size, 0);
	if (!kml_decode_header(data, size, &h, &why) &&
	    size >= PRESTO_KML_HDR_SIZE)
		kml_fuzz_sink += records(data + PRESTO_KML_HDR_SIZE,
				size - PRESTO_KML_HDR_SIZE, h.first_seq);
	return 0;
}
