# Kiln: the two commands a newcomer needs are `make run` and `make test`.
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
SOURCES = $(shell git ls-files '*.cpp' '*.h' 2>/dev/null | grep -v '^third_party/')

.PHONY: llama-bench all bootstrap build build-asan build-tsan run test test-release test-asan test-tsan check-packages format check-format lint clean fuzz fuzz-parser

all: build

bootstrap:
	@./scripts/bootstrap.sh

$(BUILD)/build.ninja: CMakeLists.txt | bootstrap
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# -O1 -g1 (line tables: ASan's and UBSan's reports keep file:line): the sanitizer build was half of
# `make test`'s time at -O2 -g, and it compiles about 40% faster so.
ASAN_FLAGS = -O1 -g1 -DNDEBUG
$(ASAN_BUILD)/build.ninja: CMakeLists.txt | bootstrap
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(ASAN_FLAGS)" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$(ASAN_FLAGS)" $(CMAKE_FLAGS)

build-asan: bootstrap $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# The main job: check, print and evaluate every example kernel; then the seed's six-case
# experiment (quick protocol) into a fresh out/seed-mma-roll-TIMESTAMP archive, its table, and
# the offline audit of that archive (full report beside it in ...-audit.json).
run: build
	@./scripts/run-examples.sh $(BUILD)/bin/kiln
	@out=out/seed-mma-roll-$$(date -u +%Y%m%dT%H%M%SZ); \
	  echo; echo "=== kiln bench --preset seed-mma-roll --quick --out $$out"; \
	  $(BUILD)/bin/kiln bench --preset seed-mma-roll --quick --out $$out; bench=$$?; \
	  echo; echo "=== kiln audit $$out  (report: $$out-audit.json)"; \
	  $(BUILD)/bin/kiln audit $$out > $$out-audit.json; audit=$$?; \
	  grep -E '"checks": [0-9]|"passed"|"failed"|"verdict"' $$out-audit.json; \
	  test $$bench -eq 0 && test $$audit -eq 0

test: check-format check-packages test-release test-asan

# The Llama example at TinyLlama-1.1B's dimensions against PyTorch, tokens/s (docs/llama.md;
# about 25 minutes; run it on a quiet machine).
llama-bench: build
	PYTHONPATH=$(CURDIR)/$(BUILD)/python /usr/bin/python3 examples/llama/run.py bench \
	  --config examples/llama/configs/tinyllama-1.1b.json --prompts 128 --steps 256 --out out/llama/bench.json

# Fails when the build uses a Debian package that scripts/bootstrap.sh does not install (a build
# that only works on a machine where someone installed it by hand).
check-packages: build
	@./scripts/check-packages.sh $(BUILD)

# The suite, then the ISA-sensitive tests again as on a CPU without AVX-512
# (KILN_HOST_WITHOUT_AVX512=1, host/isa.h: `native` loses every AVX-512 feature and isa=avx512
# objects are compiled but refused at load); last, every grid point the tests compiled but could
# not run on this host (tests/unit/host_isa.h), so none is skipped silently.
NO_AVX512_TESTS = ^(Lanes|Phases|SplitKv|Jit|Api|Peers|IntegerViews|RuntimeLengths)\.|^cli\.(fuzz|isa|npy)$$|^fuzz\.campaign(_block)?$$|^python\.test_llama$$
test-release: build
	@rm -f $(BUILD)/skipped-runs.txt
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(BUILD) && KILN_HOST_WITHOUT_AVX512=1 ctest --output-on-failure -j $(JOBS) -R '$(NO_AVX512_TESTS)'
	@./scripts/not-run.sh $(BUILD)/skipped-runs.txt

test-asan: build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -LE heavy

# ThreadSanitizer (not part of `make test`: a third build, see README): concurrent compiles and
# launches of different kernels from several threads on the shared pool, kernels with threads=2,
# the bench capture + replay beside other launches (tests/unit/test_concurrency.cpp), then the
# runtime, JIT and bench tests, and `kiln run` with threads=2. Any report fails the run; the one
# suppression (tests/tsan/suppressions.txt) covers only oneTBB's own memset/memcpy calls on
# memory it recycles through tbbmalloc, which ThreadSanitizer cannot see (tests/tsan/README.md).
TSAN_BUILD ?= build-tsan
TSAN_TESTS = test_concurrency test_runtime test_jit test_bench
$(TSAN_BUILD)/build.ninja: CMakeLists.txt | bootstrap
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_TSAN=ON $(CMAKE_FLAGS)

build-tsan: bootstrap $(TSAN_BUILD)/build.ninja
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target kiln $(TSAN_TESTS)

test-tsan: build-tsan
	@set -e; export TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan/suppressions.txt; \
	  for t in $(TSAN_TESTS); do echo "=== $$t (ThreadSanitizer)"; $(TSAN_BUILD)/bin/$$t --gtest_brief=1; done; \
	  echo "=== kiln run, threads=2 (ThreadSanitizer)"; \
	  $(TSAN_BUILD)/bin/kiln run --kernel attention --shape 1,8,2,5,300,32,32 --threads 2 --check bitexact; \
	  $(TSAN_BUILD)/bin/kiln run --kernel gemm --shape 64,48,40 --threads 2 --set packet_width=8; \
	  echo "=== a race in a kernel's block is still reported (ThreadSanitizer must fail this one)"; \
	  if KILN_TSAN_EXPECT_RACE=1 $(TSAN_BUILD)/bin/test_runtime --gtest_filter='RuntimeTsan.*' >$(TSAN_BUILD)/expected-race.log 2>&1; then \
	    echo "test-tsan: the deliberate race was not reported"; exit 1; fi; \
	  grep -q 'WARNING: ThreadSanitizer: data race' $(TSAN_BUILD)/expected-race.log; \
	  echo "reported, as it must be ($(TSAN_BUILD)/expected-race.log)"; \
	  echo "test-tsan: no ThreadSanitizer report"

# The differential tester (docs/fuzz.md): `make fuzz [PROGRAMS=N] [SEED=S] [FUZZ_TIME=SEC]`. A fresh
# seed per run by default (the UTC time); reproducers go to out/fuzz-SEED/.
PROGRAMS ?= 1000
FUZZ_TIME ?= 600
FUZZ_SEED := $(or $(SEED),$(shell date -u +%Y%m%d%H%M%S))
fuzz: build
	$(BUILD)/bin/kiln fuzz --programs $(PROGRAMS) --seed $(FUZZ_SEED) --time-limit $(FUZZ_TIME) --out out/fuzz-$(FUZZ_SEED)

# libFuzzer over parse -> verify -> print -> parse (tools/fuzz_parser), clang-22 with ASan+UBSan in
# its own build dir, seeded from examples/ and tests/; new inputs and crashes go to out/fuzz-parser/.
# `make fuzz-parser [FUZZ_PARSER_SECONDS=120]`.
FUZZ_PARSER_BUILD ?= build-fuzz-parser
FUZZ_PARSER_SECONDS ?= 120
$(FUZZ_PARSER_BUILD)/build.ninja: CMakeLists.txt | bootstrap
	cmake -S . -B $(FUZZ_PARSER_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-22 \
	  -DCMAKE_CXX_COMPILER=clang++-22 -DKILN_LIBFUZZER=ON $(CMAKE_FLAGS)

fuzz-parser: bootstrap $(FUZZ_PARSER_BUILD)/build.ninja
	cmake --build $(FUZZ_PARSER_BUILD) -j $(JOBS) --target kiln_parser_fuzzer
	mkdir -p out/fuzz-parser/corpus
	$(FUZZ_PARSER_BUILD)/bin/kiln_parser_fuzzer -max_total_time=$(FUZZ_PARSER_SECONDS) -max_len=16384 -timeout=10 \
	  -artifact_prefix=out/fuzz-parser/ out/fuzz-parser/corpus examples tests/ir tests/error tests/fuzz tests/fuzz-parser

format:
	clang-format -i $(SOURCES)

check-format: bootstrap
	@clang-format --dry-run --Werror $(SOURCES) && echo "format: clean"

lint: build
	clang-tidy -p $(BUILD) --quiet $(filter %.cpp,$(SOURCES))

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
