#!/usr/bin/env bash
# Writes the kernel name table shipped beside the fatbin: one "name=mangled" line per entry point
# of the PTX kept from the same nvcc run (so the names match the fatbin's SASS and PTX). Kernels
# in an anonymous namespace get a mangled name that nvcc derives per translation unit; Java looks
# them up by their plain name through this table. Usage: kernel-names.sh PTX OUT
set -euo pipefail
ptx="$1"; out="$2"
tmp="$out.tmp"
: >"$tmp"
n=0
while read -r mangled; do
  plain="$(c++filt "$mangled")"
  plain="${plain//(anonymous namespace)::/}"
  plain="${plain%%(*}"        # drop the parameter list
  plain="${plain##*::}"       # drop namespaces
  if grep -q "^$plain=" "$tmp"; then
    echo "kernel-names.sh: two entry points named '$plain' in $ptx (overloads are not supported)" >&2
    exit 1
  fi
  echo "$plain=$mangled" >>"$tmp"
  n=$((n + 1))
done < <(sed -n 's/^.*\.entry[[:space:]]\+\([A-Za-z0-9_$]\+\)(.*$/\1/p' "$ptx")
if [[ $n == 0 ]]; then
  echo "kernel-names.sh: no .entry in $ptx" >&2
  exit 1
fi
mv "$tmp" "$out"
