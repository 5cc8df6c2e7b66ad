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
	@model=$$(scripts/fetch_default_model.sh) && exec $(BUILD)/sluice run "$$model" $(ARGS)

bench: build
	@$(BUILD)/bench/sluice_bench_quant --benchmark_min_time=0.2

fuzz: setup
	@scripts/run_fuzzers.sh $(or $(SECONDS_EACH),60)

format:
	@git ls-files -co --exclude-standard -- '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

lint:
	@tools/check_format.sh

clean:
	rm -rf $(BUILD)
