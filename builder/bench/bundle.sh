#!/usr/bin/env bash
# Packs the data-mover benchmark into one folder that runs on a bare x86-64
# Linux machine with nothing installed but a shell and the base utilities
# (coreutils, grep, sed; busybox will do): run.sh and lib.sh, the builder's
# tools, iperf3, bash, awk and GNU time, every shared library they load and
# the dynamic loader itself. Each program is started through the bundled
# loader with the bundled libraries, so the machine's own C library (or its
# absence) does not matter. On the machine:
#   BUNDLE/run            # the bench, BENCH lines on stdout (EB_BENCH_* as run.sh)
# make bench-bundle writes it to build/bench-bundle (BUNDLE=...).
# Usage: builder/bench/bundle.sh BUILD_DIR BUNDLE_DIR
set -euo pipefail
build=$(cd "${1:?usage: builder/bench/bundle.sh BUILD_DIR BUNDLE_DIR}" && pwd)
bundle=${2:?usage: builder/bench/bundle.sh BUILD_DIR BUNDLE_DIR}
here=$(cd "$(dirname "$0")" && pwd)

[ "$(uname -m)" = x86_64 ] || { echo "bench-bundle: packs x86-64 programs; this is $(uname -m)" >&2; exit 1; }
tools=("$build/eb-builder" "$build/eb-barrier-probe" "$build/eb-barrier-plan")
programs=()
for name in iperf3 bash awk time; do
  path=$(type -P "$name") || { echo "bench-bundle: $name not found; make packages installs it" >&2; exit 1; }
  programs+=("$(readlink -f "$path")")
done
for tool in "${tools[@]}"; do
  [ -x "$tool" ] || { echo "bench-bundle: $tool missing; run make build-builder" >&2; exit 1; }
done

rm -rf "$bundle"
mkdir -p "$bundle"/{bench,builder,bin,libexec,lib}
cp "$here/run.sh" "$here/lib.sh" "$bundle/bench/"

# libs_of PROGRAM: the absolute paths ldd resolves, the loader included.
libs_of() {
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
}
loader=""
for program in "${tools[@]}" "${programs[@]}"; do
  while read -r lib; do
    cp -L -n "$lib" "$bundle/lib/"
    case $lib in */ld-linux-x86-64.so.*) loader=$(basename "$lib") ;; esac
  done < <(libs_of "$program")
done
[ -n "$loader" ] || { echo "bench-bundle: no dynamic loader among the libraries of ${tools[0]}" >&2; exit 1; }

# wrap DIR NAME PROGRAM: DIR/NAME starts PROGRAM (copied into libexec)
# through the bundled loader and libraries, keeping its process (exec).
wrap() {
  local dir=$1 name=$2 program=$3
  cp -L "$program" "$bundle/libexec/$name"
  cat >"$bundle/$dir/$name" <<EOF
#!/bin/sh
root=\$(cd "\$(dirname "\$0")/.." && pwd)
exec "\$root/lib/$loader" --library-path "\$root/lib" "\$root/libexec/$name" "\$@"
EOF
  chmod +x "$bundle/$dir/$name"
}
for tool in "${tools[@]}"; do wrap builder "$(basename "$tool")" "$tool"; done
for program in "${programs[@]}"; do
  name=$(basename "$program")
  case $name in gawk | mawk | original-awk | busybox) name=awk ;; esac
  wrap bin "$name" "$program"
done

cat >"$bundle/run" <<'EOF'
#!/bin/sh
# The data-mover benchmark with this folder's programs alone: BENCH lines on
# stdout, progress on stderr. EB_BENCH_UNITS (default "4 8"), EB_BENCH_RUNS
# (3) and the other EB_BENCH_* variables of bench/run.sh apply.
root=$(cd "$(dirname "$0")" && pwd)
export PATH="$root/bin:$PATH"
export EB_BENCH_UNITS="${EB_BENCH_UNITS:-4 8}"
exec "$root/bin/bash" "$root/bench/run.sh" "$root/builder"
EOF
chmod +x "$bundle/run"
echo ">> bench bundle in $bundle ($(du -sh "$bundle" | cut -f1)): run $bundle/run on any x86-64 Linux machine"
