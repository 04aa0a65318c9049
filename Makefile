# The two commands of the README: `make demo` and `make test`. Each installs what is missing
# (scripts/install-deps.sh is idempotent), builds, then runs.
BUILD_DIR ?= build
JOBS ?= 2
WERROR ?= ON

.PHONY: all deps configure build test demo bench format tidy clean

all: build

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCIFAR_WERROR=$(WERROR)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest -j2 --output-on-failure --timeout 900

demo: build
	bash scripts/demo.sh $(BUILD_DIR)/bin/cifar-train

bench: build
	bash bench/run_all.sh $(BUILD_DIR)

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

tidy: configure
	git ls-files 'runtime/*.cpp' | xargs clang-tidy -p $(BUILD_DIR) --quiet

clean:
	rm -rf $(BUILD_DIR)
