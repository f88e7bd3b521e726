#!/usr/bin/env bash
# Record real host-probe and in-container-probe output on a GPU machine (run natively, no Docker).
#
#   OUT=/some/dir bash scripts/device-record.sh
#
# Writes at most 8 files under $OUT (the device tool returns at most 8):
#   nvidia-smi.txt          default table
#   nvidia-smi-q.txt        nvidia-smi -q
#   nvidia-smi-query.csv    nvidia-smi --query-gpu=... --format=csv
#   misc.txt                topo -m, -L, --version, fabric manager, /dev/nvidia*, /proc/driver/nvidia/version,
#                           toolkit, CDI, kernel, python/torch versions
#   hostinfo.json           python -m builder.checks.host (the live probe of this repository)
#   probe.json              builder/checks/probe.py --mode nvidia (torch: devices, compute, arch coverage)
#   probe-hidden.json       the same with CUDA_VISIBLE_DEVICES="" (the probe must FAIL: no GPU visible)
#   probe-jax.json          the probe with --framework jax
# misc.txt ends with every command's exit code, milliseconds and stderr.
# Never fails where a tool is absent: each command's exit code is recorded instead.
set -u
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
LOG="$(mktemp)"
PY="$(command -v python3 || command -v python || echo python3)"

rec() { # rec OUTFILE CMD...  (append stdout to OUTFILE, log exit code + stderr)
  local out="$1"; shift
  local t0 t1 rc err
  err="$(mktemp)"
  t0=$(date +%s%N)
  timeout 120 "$@" >>"$out" 2>"$err"
  rc=$?
  t1=$(date +%s%N)
  {
    echo "\$ $*"
    echo "exit=$rc ms=$(( (t1 - t0) / 1000000 ))"
    if [ -s "$err" ]; then sed 's/^/  stderr: /' "$err" | head -50; fi
  } >>"$LOG"
  rm -f "$err"
  return 0
}

section() { echo; echo "===== $* ====="; }

rec "$OUT/nvidia-smi.txt" nvidia-smi
rec "$OUT/nvidia-smi-q.txt" nvidia-smi -q
rec "$OUT/nvidia-smi-query.csv" nvidia-smi \
  --query-gpu=index,name,pci.bus_id,memory.total,driver_version,vbios_version,compute_cap,uuid,mig.mode.current \
  --format=csv

M="$OUT/misc.txt"
: >"$M"
section "nvidia-smi --version" >>"$M"; rec "$M" nvidia-smi --version
section "nvidia-smi -L" >>"$M"; rec "$M" nvidia-smi -L
section "nvidia-smi topo -m" >>"$M"; rec "$M" nvidia-smi topo -m
section "nvidia-smi -q -d FABRIC" >>"$M"; rec "$M" nvidia-smi -q -d FABRIC
section "systemctl is-active nvidia-fabricmanager" >>"$M"; rec "$M" systemctl is-active nvidia-fabricmanager
section "nv-fabricmanager --version" >>"$M"; rec "$M" nv-fabricmanager --version
section "ls -l /dev/nvidia*" >>"$M"; rec "$M" sh -c 'ls -l /dev/nvidia* /dev/nvidia-caps 2>&1'
section "/proc/driver/nvidia/version" >>"$M"; rec "$M" cat /proc/driver/nvidia/version
section "toolkit" >>"$M"; rec "$M" sh -c 'for t in nvidia-ctk nvidia-container-runtime-hook nvidia-container-cli nvidia-container-runtime docker podman; do printf "%s: " "$t"; command -v "$t" || echo "not found"; done'
section "nvidia-ctk --version" >>"$M"; rec "$M" nvidia-ctk --version
section "CDI specs" >>"$M"; rec "$M" sh -c 'ls -l /etc/cdi /var/run/cdi 2>&1'
section "PCI display devices (sysfs)" >>"$M"; rec "$M" sh -c 'for d in /sys/bus/pci/devices/*; do c=$(cat $d/class 2>/dev/null); case "$c" in 0x03*|0x12*) echo "$(basename $d) class=$c vendor=$(cat $d/vendor) device=$(cat $d/device)";; esac; done'
section "uname -a" >>"$M"; rec "$M" uname -a
section "python / torch" >>"$M"; rec "$M" "$PY" -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "arch_list", torch.cuda.get_arch_list())'

rec "$OUT/hostinfo.json" "$PY" -m builder.checks.host
rec "$OUT/probe.json" "$PY" builder/checks/probe.py --mode nvidia --framework torch
rec "$OUT/probe-hidden.json" env CUDA_VISIBLE_DEVICES= "$PY" builder/checks/probe.py --mode nvidia --framework torch
rec "$OUT/probe-jax.json" "$PY" builder/checks/probe.py --mode nvidia --framework jax
{ echo; echo "===== commands (exit code, milliseconds, stderr) ====="; cat "$LOG"; } >>"$M"
rm -f "$LOG"

echo "recorded under $OUT:"
ls -l "$OUT"
