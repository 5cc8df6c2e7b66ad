# Entry points of the README. `make test` and `make run` set up what is missing first.
BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup configure build test run bench fuzz format lint clean

all: build

setup:
	@scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_WERROR=ON $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Until the chat engine lands, the main job is inspecting the default model.
run: build
	@model=$$(scripts/fetch_default_model.sh) && $(BUILD)/sluice inspect "$$model"

bench: build
	@$(BUILD)/bench/sluice_bench_quant --benchmark_min_time=0.2

fuzz: setup
	@scripts/run_fuzzers.sh $(or $(SECONDS_EACH),60)

format:
	@find src tests bench dev -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' 2>/dev/null | xargs clang-format -i

lint: build
	@find src tests bench -name '*.cpp' -o -name '*.h' | xargs clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD)
