# shellcheck shell=bash
# Helpers for perftest runs on $EB_RDMA_DEVICE (sourced by bench-perftest.sh
# and selftest.sh; they run where run.sh put them: the VM or RDMA hardware).

# gid_index DEV: the GID index perftest needs (-x) on a RoCE port: the RoCE v2
# entry holding an IPv4-mapped address (::ffff:a.b.c.d). Empty on InfiniBand.
gid_index() {
  local port=/sys/class/infiniband/$1/ports/1 g i
  [ "$(cat "$port/link_layer")" = Ethernet ] || return 0
  for g in "$port"/gids/*; do
    i=${g##*/}
    if [ "$(cat "$port/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] &&
      [[ $(cat "$g") == 0000:0000:0000:0000:0000:ffff:* ]]; then
      echo "$i"
      return 0
    fi
  done 2>/dev/null
  echo "error: $1 has no RoCE v2 GID with an IPv4 address; give its netdev an IPv4 address" >&2
  return 1
}

# wait_listen PORT PID: until a TCP socket listens on PORT (perftest's
# out-of-band exchange), or PID died, or 60 s passed.
wait_listen() {
  local deadline=$((SECONDS + 60))
  until [ -n "$(ss -Hltn "sport = :$1")" ]; do
    kill -0 "$2" 2>/dev/null || { echo "error: the server (pid $2) exited before listening on $1" >&2; return 1; }
    [ "$SECONDS" -lt "$deadline" ] || { echo "error: nothing listens on port $1 after 60 s" >&2; return 1; }
    sleep 0.1
  done
}

# perftest_pair TOOL PORT OUT ARGS...: runs TOOL's server and its client on the
# same device (RC over rxe's loopback, or the HCA's), each bounded by timeout;
# the client's output goes to OUT, the server's to OUT.server. Both must exit 0.
perftest_pair() {
  local tool=$1 port=$2 out=$3 gid spid rc=0 src=0
  shift 3
  gid=$(gid_index "$EB_RDMA_DEVICE")
  local args=(-d "$EB_RDMA_DEVICE" -p "$port" -F "$@" ${gid:+-x "$gid"})
  timeout 300 "$tool" "${args[@]}" >"$out.server" 2>&1 &
  spid=$!
  wait_listen "$port" "$spid" || { cat "$out.server" >&2; return 1; }
  timeout 300 "$tool" "${args[@]}" "$EB_VERBS_ADDRESS" >"$out" 2>&1 || rc=$?
  wait "$spid" || src=$?
  if [ "$rc" != 0 ] || [ "$src" != 0 ]; then
    echo "error: $tool ${args[*]} failed (client exit $rc, server exit $src); client then server output:" >&2
    cat "$out" "$out.server" >&2
    return 1
  fi
}

# average_gbits OUT: the 'BW average' column of a perftest run in its
# default unit, MiB/s (2^20 bytes, printed to 2 decimals: 4 significant
# digits where --report_gbits gives 2 at Soft-RoCE's rates), in Gb/s.
average_gbits() {
  awk '/BW average/ { h = 1; next } h && $1 ~ /^[0-9]+$/ { printf "%.4g\n", $4 * 1048576 * 8 / 1e9; exit }' "$1"
}
