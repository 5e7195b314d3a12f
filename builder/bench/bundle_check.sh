#!/usr/bin/env bash
# Runs a bench bundle (bundle.sh) where nothing else is installed: in a root
# holding only a static busybox (the shell and base utilities of a bare
# machine) and the bundle, with /proc, /dev and an empty /tmp, the nearest
# thing here to a bare x86-64 machine. A short bench (one round, few events,
# the table and barriers cut down) must print its figures. Needs root
# (mount namespace, chroot). make test runs it (test-bench-bundle).
# Usage: builder/bench/bundle_check.sh BUNDLE_DIR
set -euo pipefail
bundle=$(cd "${1:?usage: builder/bench/bundle_check.sh BUNDLE_DIR}" && pwd)
unavailable() {
  if [ -n "${EB_REQUIRE_ALL_TESTS:-}" ]; then echo "FAIL: bench bundle check cannot run: $1" >&2; exit 1; fi
  echo "SKIP: bench bundle check: $1" >&2
  exit 0
}
[ "$(id -u)" = 0 ] || unavailable "needs root for its chroot"
busybox=$(type -P busybox || true)
[ -n "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 ||
  unavailable "needs a static busybox (Debian's busybox-static; make packages installs it)"

root=$(mktemp -d)
trap 'umount -R "$root/proc" "$root/dev" 2>/dev/null || true; rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,proc,dev,tmp,bundle}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"; done
cp -a "$bundle/." "$root/bundle/"
chmod 1777 "$root/tmp"

started=$(date +%s)
out=$root/bench.out
unshare --mount --fork sh -c '
  mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" &&
  exec chroot "$1" /bin/env -i PATH=/bin TMPDIR=/tmp EB_BENCH_RUNS=1 EB_BENCH_UNITS=2 EB_BENCH_EVENTS=200000 \
    EB_BENCH_SECONDS=1 EB_BENCH_TABLE_UNITS=2 EB_BENCH_TABLE_THREADS="1 2" EB_BENCH_BARRIER_UNITS=2 /bundle/run' \
  sh "$root" >"$out" 2>"$root/bench.err" || { cat "$root/bench.err" >&2; echo "FAIL: the bundle's bench failed in a bare root" >&2; exit 1; }
for figure in machine_cores iperf3_pairs_throughput_n2 tcp_vs_iperf3_pairs_n2 builder_data_threads_n2 \
  tcp_vs_iperf3_pairs_n2_threads1 barrier_latency_tournament_n2; do
  grep -q "^BENCH name=${figure}[_ ]" "$out" || {
    cat "$out" "$root/bench.err" >&2
    echo "FAIL: the bundle's bench printed no $figure" >&2
    exit 1
  }
done
echo "bench bundle: its bench ran in a root holding only busybox and the bundle, $(($(date +%s) - started)) s;" \
  "$(grep -c '^BENCH' "$out") BENCH lines"
