#!/usr/bin/env bash
# Fails when any C++/CUDA file differs from what the checked-in .clang-format produces.
# Run by ctest as `format`; fix with `make format`.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.cpp' '*.h' '*.cu' '*.cuh')
((${#files[@]})) || { echo "format: no files"; exit 0; }
clang-format --dry-run --Werror "${files[@]}"
echo "format: ${#files[@]} files clean"
