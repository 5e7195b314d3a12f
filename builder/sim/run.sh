#!/usr/bin/env bash
# make sim: the farm simulated on the calibrated model (model.env), from 16
# to 500 servers of the LHCb kind (hack/fabricgen; 163 is the LHCb cabling
# itself, with its 4 spare servers), each planned by the operator's eb-plan:
#   scale.csv         event rate and Tb/s by servers and barrier (every phase)
#   barrier-every.csv at 163 servers, by --barrier-every and barrier
# then plot.py draws them (PNG) and prints the crossover and the best K.
# Usage: run.sh EB_FARM_SIM EB_PLAN FABRICGEN OUT_DIR
set -euo pipefail
sim=$1 eb_plan=$2 fabricgen=$3 out=$4
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=model.env
. "$here/model.env"
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/eb-sim.XXXXXX")
trap 'rm -rf "$work"' EXIT

model=(--overhead-us "$SIM_OVERHEAD_US" --noise-us "$SIM_NOISE_US" --nic-gbps "$SIM_NIC_GBPS" --link-gbps "$SIM_LINK_GBPS"
       --nic-latency-us "$SIM_NIC_LATENCY_US" --link-latency-us "$SIM_LINK_LATENCY_US"
       --packing-factor "$SIM_PACKING_FACTOR" --fragment-size "$SIM_FRAGMENT_SIZE" --sizes "$SIM_SIZES")

plan() {  # plan SERVERS -> $work/SERVERS.json
  local dir="$work/$1"
  mkdir -p "$dir"
  if [ "$1" = 163 ]; then "$fabricgen" -lhcb -out "$dir"; else "$fabricgen" -servers "$1" -out "$dir"; fi
  "$eb_plan" -fabric "$dir/fabric.yaml" -run "$dir/run.yaml" > "$work/$1.json"
}

simulate() {  # simulate CSV SERVERS CYCLES BARRIER EVERY
  local csv=$1 servers=$2 cycles=$3 barrier=$4 every=$5 header=()
  [ -s "$csv" ] || header=(--header)
  echo ">> $servers servers, barrier $barrier every $every, $cycles cycles" >&2
  "$sim" --plan "$work/$servers.json" "${model[@]}" --cycles "$cycles" --barrier "$barrier" --barrier-every "$every" \
    "${header[@]}" 2>/dev/null | sed "/^ranks,/{s/^/servers,/;b}; s/^/$servers,/" >> "$csv"
}

rm -f "$out/scale.csv" "$out/barrier-every.csv"
for servers in 16 32 64 100 163 250 500; do
  plan "$servers"
  cycles=4
  [ "$servers" -lt 250 ] || cycles=2
  for barrier in none tournament centralized; do simulate "$out/scale.csv" "$servers" "$cycles" "$barrier" 1; done
done
for every in 1 2 4 8 16 32 64 128 359; do
  for barrier in tournament centralized; do simulate "$out/barrier-every.csv" 163 4 "$barrier" "$every"; done
done
simulate "$out/barrier-every.csv" 163 4 none 1
/usr/bin/python3 "$here/plot.py" "$out"
