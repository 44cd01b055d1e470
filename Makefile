# presto/lento — top-level build.
#
#   make              presto.ko (Debian's headers) and the test programs
#   make check        every test: C units on the host, then the integration
#                     suite in the test VM on the debug kernel
#   make check-memory the integration suite on a KASAN + kmemleak kernel,
#                     less its long randomized, history and crash suites
#   make bench        benchmarks on Debian's kernel: ext4, presto, overlayfs
#   make demo         mount presto over an ext4 cache in the VM and show it
#   make checkpatch   kernel style
#   make setup        install what the project needs (tools/setup)

SHELL := /bin/bash
TOP := $(CURDIR)
CACHE ?= /var/cache/presto

CC ?= cc
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all

# Unit tests (Check), each block below adds its own.
UNITS := tests/bin/unit-tree tests/bin/unit-kml tests/bin/unit-logwrites

TOOLS := tools/bin/kmlcat tools/bin/replay-log tools/bin/lentoctl \
	tools/bin/lento tools/bin/lento-asan
TEST_PROGS := tests/bin/posix tests/bin/fsdiff tests/bin/treecmp \
	tests/bin/presto-errors bench/bin/microbench
SETUP_STAMP := .venv/.setup-done

all: presto/presto.ko $(TOOLS) $(TEST_PROGS)

setup $(SETUP_STAMP): tools/setup
	tools/setup
	@mkdir -p .venv && touch $(SETUP_STAMP)
.PHONY: setup

PRESTO_SRC := $(wildcard presto/*.c presto/*.h) presto/Kbuild

presto/presto.ko: $(PRESTO_SRC) | $(SETUP_STAMP)
	$(MAKE) -C presto

# The same sources built against the debug kernel trees, out of the way of
# the Debian build.
build/%/presto.ko: $(PRESTO_SRC) tools/build-kernel tools/kconfig/debug.config | $(SETUP_STAMP)
	@tree=$$(tools/build-kernel $*) && \
	mkdir -p build/$* && \
	for f in $(PRESTO_SRC); do ln -sf ../../$$f build/$*/; done && \
	$(MAKE) -C $$tree M=$(TOP)/build/$* modules

TESTLIB := tests/lib/tree.c tests/lib/tree.h

# The one KML decoder, shared by kmlcat, lento and the tests.
KMLLIB := protocol/kml.c protocol/kml.h protocol/presto_kml.h

tools/bin/kmlcat: tools/kmlcat/kmlcat.c $(KMLLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iprotocol -o $@ $< protocol/kml.c

# The dm-log-writes decoder, for the crash tests' replay-log.
LWLIB := tools/crash/logwrites.c tools/crash/logwrites.h

tools/bin/replay-log: tools/crash/replay-log.c $(LWLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itools/crash -o $@ $< tools/crash/logwrites.c

# Fuzz targets (libFuzzer, clang), run for a bounded time by make check.
FUZZFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
FUZZERS := build/fuzz/kml build/fuzz/logwrites

build/fuzz/kml: protocol/fuzz/kml_fuzz.c $(KMLLIB)
	@mkdir -p $(@D)
	clang -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE $(FUZZFLAGS) \
		-Iprotocol -o $@ $< protocol/kml.c

build/fuzz/logwrites: tools/crash/fuzz_logwrites.c $(LWLIB)
	@mkdir -p $(@D)
	clang -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE $(FUZZFLAGS) \
		-Itools/crash -o $@ $< tools/crash/logwrites.c

# lento wire protocol (protocol/PROTOCOL.md): the one codec client and
# server share, its unit tests (ASan+UBSan) and its fuzzer. The fuzzer's
# seeds come from the tests: tests/bin/unit-lproto --write-corpus
# protocol/fuzz/corpus/lproto
LPROTOLIB := protocol/lproto.c protocol/lproto.h protocol/lento_types.h
LPROTO_RT := protocol/fuzz/lproto_roundtrip.c protocol/fuzz/lproto_roundtrip.h
FUZZERS += build/fuzz/lproto

tests/bin/unit-lproto: tests/unit/check_lproto.c $(LPROTOLIB) $(LPROTO_RT)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Iprotocol -Iprotocol/fuzz -o $@ \
		tests/unit/check_lproto.c protocol/lproto.c \
		protocol/fuzz/lproto_roundtrip.c \
		$$(pkg-config --cflags --libs check libzstd)

build/fuzz/lproto: protocol/fuzz/lproto_fuzz.c $(LPROTOLIB) $(LPROTO_RT)
	@mkdir -p $(@D)
	clang -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE $(FUZZFLAGS) \
		-Iprotocol -Iprotocol/fuzz -o $@ $< protocol/lproto.c \
		protocol/fuzz/lproto_roundtrip.c \
		$$(pkg-config --cflags --libs libzstd)

UNITS += tests/bin/unit-lproto

# The kernel channel's decoding (lento/kchan.h, protocol/KERNEL.md): its
# unit tests and fuzzer. Seeds: tests/bin/unit-kchan --write-corpus
# protocol/fuzz/corpus/kchan
NL_FLAGS := $$(pkg-config --cflags --libs libnl-3.0 libnl-genl-3.0)
KCHANLIB := lento/kchan_decode.c lento/kchan.h protocol/presto_genl.h
FUZZERS += build/fuzz/kchan
UNITS += tests/bin/unit-kchan

tests/bin/unit-kchan: tests/unit/check_kchan.c $(KCHANLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Iprotocol -Ilento -o $@ \
		tests/unit/check_kchan.c lento/kchan_decode.c \
		$(NL_FLAGS) $$(pkg-config --cflags --libs check)

build/fuzz/kchan: protocol/fuzz/kchan_fuzz.c $(KCHANLIB)
	@mkdir -p $(@D)
	clang -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE $(FUZZFLAGS) \
		-Iprotocol -Ilento -o $@ $< lento/kchan_decode.c $(NL_FLAGS)

POSIX_SRC := $(wildcard tests/posix/*.c)
tests/bin/posix: $(POSIX_SRC) tests/posix/posix.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(POSIX_SRC) -lpthread

tests/bin/fsdiff: tests/fsdiff/fsdiff.c $(TESTLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/lib -o $@ tests/fsdiff/fsdiff.c tests/lib/tree.c

tests/bin/treecmp: tests/lib/treecmp.c $(TESTLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/lib -o $@ tests/lib/treecmp.c tests/lib/tree.c

tests/bin/presto-errors: tests/integration/presto-errors.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<

tests/bin/unit-tree: tests/unit/check_tree.c $(TESTLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Itests/lib -o $@ tests/unit/check_tree.c \
		tests/lib/tree.c $$(pkg-config --cflags --libs check)

tests/bin/unit-kml: tests/unit/check_kml.c $(KMLLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Iprotocol -o $@ tests/unit/check_kml.c \
		protocol/kml.c $$(pkg-config --cflags --libs check)

# Its tests also run tools/bin/replay-log.
tests/bin/unit-logwrites: tests/unit/check_logwrites.c $(LWLIB) \
		tools/bin/replay-log
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Itools/crash -o $@ \
		tests/unit/check_logwrites.c tools/crash/logwrites.c \
		$$(pkg-config --cflags --libs check)

# lento's event loop and control socket, and lentoctl
LOOPLIB := lento/loop.c lento/loop.h
CTLLIB := lento/ctl.c lento/ctl.h lento/jw.c lento/jw.h

tools/bin/lentoctl: tools/lentoctl/lentoctl.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<

UNITS += tests/bin/unit-loop tests/bin/unit-ctl

tests/bin/unit-loop: tests/unit/check_loop.c $(LOOPLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Ilento -o $@ tests/unit/check_loop.c \
		lento/loop.c -luring $$(pkg-config --cflags --libs check)

UNITS += tests/bin/unit-worker

tests/bin/unit-worker: tests/unit/check_worker.c lento/worker.c lento/worker.h \
		$(LOOPLIB) lento/log.c lento/log.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Ilento -o $@ tests/unit/check_worker.c \
		lento/worker.c lento/loop.c lento/log.c -luring -lpthread \
		$$(pkg-config --cflags --libs check)

UNITS += tests/bin/unit-fidset

# lento itself; lento-asan is the same under ASan+UBSan, for the tests.
# (tools/bin: built, not kept.)
LENTO_SRC := lento/main.c lento/server.c lento/store.c lento/vv.c \
	lento/loop.c lento/ctl.c lento/jw.c lento/log.c lento/fidset.c \
	lento/client.c lento/client_fetch.c lento/client_change.c \
	lento/reint.c lento/conn.c lento/cache.c lento/cml.c lento/cml_opt.c \
	lento/kchan.c lento/kchan_decode.c lento/client_kernel.c \
	lento/client_kml.c lento/kml_read.c lento/kml_apply.c lento/resolve.c \
	lento/quarantine.c lento/worker.c lento/fault.c protocol/lproto.c protocol/kml.c
LENTO_HDR := $(wildcard lento/*.h) protocol/lproto.h protocol/lento_types.h \
	protocol/presto_genl.h protocol/kml.h protocol/presto_kml.h
LENTO_LIBS := -luring $$(pkg-config --cflags --libs sqlite3 libzstd) $(NL_FLAGS)

tools/bin/lento: $(LENTO_SRC) $(LENTO_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iprotocol -Ilento -o $@ $(LENTO_SRC) $(LENTO_LIBS)

tools/bin/lento-asan: $(LENTO_SRC) $(LENTO_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Iprotocol -Ilento -o $@ $(LENTO_SRC) \
		$(LENTO_LIBS)

tests/bin/unit-fidset: tests/unit/check_fidset.c lento/fidset.c lento/fidset.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Iprotocol -Ilento -o $@ \
		tests/unit/check_fidset.c lento/fidset.c \
		$$(pkg-config --cflags --libs check)

# Its tests run tools/bin/lentoctl against the control socket.
tests/bin/unit-ctl: tests/unit/check_ctl.c $(LOOPLIB) $(CTLLIB) \
		tools/bin/lentoctl
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Ilento -o $@ tests/unit/check_ctl.c \
		lento/loop.c lento/ctl.c lento/jw.c -luring \
		$$(pkg-config --cflags --libs check)

# lento server store: the server's metadata (SQLite) and file bodies, and
# its unit tests.
STORELIB := lento/store.c lento/store.h lento/vv.c lento/vv.h \
	lento/array.h protocol/lento_types.h

UNITS += tests/bin/unit-store

tests/bin/unit-store: tests/unit/check_store.c $(STORELIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Iprotocol -Ilento -o $@ \
		tests/unit/check_store.c lento/store.c lento/vv.c \
		$$(pkg-config --cflags --libs check sqlite3)

# lento client log
CMLLIB := lento/cml.c lento/cml_opt.c lento/cml.h lento/cml_opt.h lento/blob.h \
	lento/array.h protocol/lento_types.h

UNITS += tests/bin/unit-cml

tests/bin/unit-cml: tests/unit/check_cml.c $(CMLLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Ilento -Iprotocol -o $@ \
		tests/unit/check_cml.c lento/cml.c lento/cml_opt.c \
		$$(pkg-config --cflags --libs check sqlite3)

# lento client cache: its tables and what it makes on the disk.
UNITS += tests/bin/unit-cache

tests/bin/unit-cache: tests/unit/check_cache.c lento/cache.c lento/cache.h \
		lento/fault.c lento/fault.h \
		$(CMLLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Ilento -Iprotocol -o $@ \
		tests/unit/check_cache.c lento/cache.c lento/fault.c lento/cml.c \
		lento/cml_opt.c $$(pkg-config --cflags --libs check sqlite3)

# lento consuming presto's journal: segments written as presto writes them
# (tests/lib/kmlgen.c), read through the ring, turned into the CML.
KAPPLYLIB := lento/kml_read.c lento/kml_read.h lento/kml_apply.c \
	lento/kml_apply.h tests/lib/kmlgen.c tests/lib/kmlgen.h $(LOOPLIB) \
	lento/cache.c lento/cache.h lento/fault.c lento/fault.h lento/log.c \
	lento/log.h lento/fidset.c lento/fidset.h $(CMLLIB) $(KMLLIB)
UNITS += tests/bin/unit-kmlapply

tests/bin/unit-kmlapply: tests/unit/check_kmlapply.c $(KAPPLYLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SANFLAGS) -Ilento -Iprotocol -Itests/lib -o $@ \
		tests/unit/check_kmlapply.c lento/kml_read.c lento/kml_apply.c \
		tests/lib/kmlgen.c lento/loop.c lento/cache.c lento/fault.c \
		lento/fidset.c \
		lento/cml.c lento/cml_opt.c lento/log.c protocol/kml.c -luring \
		$$(pkg-config --cflags --libs check sqlite3)

bench/bin/microbench: bench/microbench.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $<

# lento's consumption of presto's journal, on the host (bench/kmlapply.c).
bench/bin/kmlapply: bench/kmlapply.c $(KAPPLYLIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Ilento -Iprotocol -Itests/lib -o $@ bench/kmlapply.c \
		lento/kml_read.c lento/kml_apply.c tests/lib/kmlgen.c \
		lento/loop.c lento/cache.c lento/fault.c lento/fidset.c lento/cml.c \
		lento/cml_opt.c lento/log.c protocol/kml.c -luring \
		$$(pkg-config --cflags --libs sqlite3)

# Everything compiled needs what tools/setup installs (headers, libraries,
# clang): under make -j on a fresh machine nothing may start before it.
# NO_SETUP=1: it is there already (a build inside the test VM, which has
# no network to set up with).
SETUP_DEP := $(if $(NO_SETUP),,$(SETUP_STAMP))
$(TOOLS) $(TEST_PROGS) $(UNITS) $(FUZZERS) bench/bin/kmlapply: | $(SETUP_DEP)

# C units on the host (under ASan+UBSan), then everything else in one boot
# of the debug kernel. One closing line counts both.
check: all build/debug/presto.ko $(UNITS) $(FUZZERS) tools/bin/lento-asan \
		tools/bin/lentoctl bench/bin/kmlapply | $(SETUP_STAMP)
	@tests/run-check

check-memory: all build/memory/presto.ko | $(SETUP_STAMP)
	@tests/run-check --memory

bench: all | $(SETUP_STAMP)
	@bench/run

demo: all | $(SETUP_STAMP)
	@tools/demo

checkpatch: | $(SETUP_STAMP)
	@tools/checkpatch

clean:
	$(MAKE) -C presto clean
	rm -rf build tests/bin bench/bin tools/bin

.PHONY: all check check-memory bench demo checkpatch clean
