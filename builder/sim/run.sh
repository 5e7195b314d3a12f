#!/usr/bin/env bash
# make sim: the farm simulated on the calibrated model (model.env), from 16
# to 500 servers of the LHCb kind (hack/fabricgen; 163 is the LHCb cabling
# itself, with its 4 spare servers), each planned by the operator's eb-plan:
#   scale.csv         event rate and Tb/s by servers and barrier (every phase)
#   barrier-every.csv at 163 servers, by --barrier-every and barrier
#   failures.csv      at 163 servers, tournament every 4: whole, a server
#                     lost, a leaf lost (the operator's failover tables)
#   receive-window.csv at 163 servers, by --receive-window (a BU posting
#                     its receives a few phases ahead, with credits, as
#                     eb-builder's flag; scale.csv has 1 too, no barrier)
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

plan() {  # plan SERVERS [NAME FAILED_NODES] -> $work/NAME.json (NAME defaults to SERVERS)
  local dir="$work/$1" name=${2:-$1} fail=${3:-}
  mkdir -p "$dir"
  if [ "$1" = 163 ]; then "$fabricgen" -lhcb -out "$dir"; else "$fabricgen" -servers "$1" -out "$dir"; fi
  "$eb_plan" -fabric "$dir/fabric.yaml" -run "$dir/run.yaml" ${fail:+-fail-nodes "$fail"} > "$work/$name.json"
}

simulate() {  # simulate CSV PLAN CYCLES BARRIER EVERY [WINDOW]: a row prefixed with PLAN's name
  local csv=$1 name=$2 cycles=$3 barrier=$4 every=$5 window=${6:-0} header=()
  [ -s "$csv" ] || header=(--header)
  echo ">> $name, barrier $barrier every $every, receive window $window, $cycles cycles" >&2
  "$sim" --plan "$work/$name.json" "${model[@]}" --cycles "$cycles" --barrier "$barrier" --barrier-every "$every" \
    --receive-window "$window" "${header[@]}" 2>/dev/null | sed "/^ranks,/{s/^/plan,/;b}; s/^/$name,/" >> "$csv"
}

rm -f "$out/scale.csv" "$out/barrier-every.csv" "$out/failures.csv" "$out/receive-window.csv"
for servers in 16 32 64 100 163 250 500; do
  plan "$servers"
  cycles=4
  [ "$servers" -lt 250 ] || cycles=2
  for barrier in none tournament centralized; do simulate "$out/scale.csv" "$servers" "$cycles" "$barrier" 1; done
  simulate "$out/scale.csv" "$servers" "$cycles" none 1 1
done
for window in 0 1 2 4 16; do
  simulate "$out/receive-window.csv" 163 4 none 1 "$window"
  simulate "$out/receive-window.csv" 163 4 tournament 4 "$window"
done
for every in 1 2 4 8 16 32 64 128 359; do
  for barrier in tournament centralized; do simulate "$out/barrier-every.csv" 163 4 "$barrier" "$every"; done
done
simulate "$out/barrier-every.csv" 163 4 none 1
# The LHCb farm with a server lost (its two units on spares) and with leaf 0
# lost (10 servers: 8 units on spares, the others dropped), as the
# operator's failovers leave the table.
leaf0=$(seq -f 'sim-eb%03g' 0 9 | paste -sd,)
plan 163 163-server-lost sim-eb000
plan 163 163-leaf-lost "$leaf0"
for name in 163 163-server-lost 163-leaf-lost; do simulate "$out/failures.csv" "$name" 4 tournament 4; done
/usr/bin/python3 "$here/plot.py" "$out"
