#!/usr/bin/env bash
# Compare boot time of N trivial plugins: cordis@3.18.1 + @cordisjs/loader@0.13.1 (Node)
# vs. our `cordis check` (Rust). See README.md in this folder.
#
#   bash benches/compare-cordis/run.sh [--sizes 100,1000,10000] [--runs 3] [--strict] [--build]
#
# --runs R: cordis is booted R times per size, ours 5*R times (it is cheap); the best is kept.
# --strict: exit 1 if a target FAILs (otherwise always exit 0 after printing PASS/FAIL).
# --build:  run `cargo build --release -q` first (done anyway when the binary is missing).
# Environment: CORDIS_BIN (default: target/release/cordis), BOOT_TIMEOUT_MS (Node side).
set -euo pipefail

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
}

SIZES="100,1000,10000"
RUNS=3
STRICT=0
BUILD=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes) SIZES="${2:?--sizes needs a value}"; shift 2 ;;
    --sizes=*) SIZES="${1#*=}"; shift ;;
    --runs) RUNS="${2:?--runs needs a value}"; shift 2 ;;
    --runs=*) RUNS="${1#*=}"; shift ;;
    --strict) STRICT=1; shift ;;
    --build) BUILD=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
IFS=',' read -r -a SIZE_LIST <<<"$SIZES"
for n in "${SIZE_LIST[@]}"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: bad size: $n" >&2; exit 2; }
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: bad --runs: $RUNS" >&2; exit 2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${CORDIS_BIN:-$ROOT/target/release/cordis}"

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 2; }
done

# ---- our binary ----
if [[ $BUILD -eq 1 || ! -x "$BIN" ]]; then
  echo "building $BIN (cargo build --release -q)" >&2
  (cd "$ROOT" && cargo build --release -q)
fi
[[ -x "$BIN" ]] || { echo "run.sh: $BIN not found" >&2; exit 2; }

# ---- temp dir with cordis 3 installed from npm ----
TMP="$(mktemp -d "${TMPDIR:-/tmp}/compare-cordis.XXXXXX")"
cleanup() { rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cp "$HERE/package.json" "$HERE/boot-cordis.mjs" "$TMP/"
cp -R "$HERE/noop-plugin" "$TMP/noop-plugin"
echo "installing cordis@3.18.1 + @cordisjs/loader@0.13.1 into $TMP" >&2
(cd "$TMP" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
node_ver="$(node --version)"
cordis_ver="$(node -p "require('$TMP/node_modules/cordis/package.json').version")"
loader_ver="$(node -p "require('$TMP/node_modules/@cordisjs/loader/package.json').version")"
core_ver="$(node -p "require('$TMP/node_modules/@cordisjs/core/package.json').version")"
echo "node $node_ver, cordis $cordis_ver, @cordisjs/loader $loader_ver, @cordisjs/core $core_ver; ours: $BIN" >&2

# gen FILE N PLUGIN: a cordis.yml list of N entries `- id: e<i>` / `name: PLUGIN`
gen() {
  awk -v n="$2" -v p="$3" 'BEGIN { for (i = 0; i < n; i++) printf "- id: e%d\n  name: %s\n", i, p }' >"$1"
}

# now_us: wall clock in microseconds (bash 5 EPOCHREALTIME)
now_us() { local t="${EPOCHREALTIME/[.,]/}"; echo "$t"; }

min() { printf '%s\n' "$@" | sort -g | head -n1; }

# time_ours FILE N [VERIFY] -> prints "boot_ms process_ms" of one `cordis check` process:
# boot_ms is the report's in-process boot time (first apply -> runtime idle), process_ms the
# wall time of the whole process; with VERIFY=1 (default) also checks that the JSON report
# lists N active entries
time_ours() {
  local file="$1" n="$2" verify="${3:-1}" out="$TMP/ours.json" err="$TMP/ours.err" t0 t1 rc=0
  t0=$(now_us)
  "$BIN" check "$file" --seed 1 --schedule fifo --json >"$out" 2>"$err" || rc=$?
  t1=$(now_us)
  if [[ $rc -ne 0 ]]; then
    echo "run.sh: ours exited $rc for N=$n:" >&2; head -n 20 "$err" >&2; return 1
  fi
  if [[ "$verify" -eq 1 ]]; then
    local active
    active="$(node -e '
      const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      console.log(r.entries.filter(e => e.status === "active").length)' "$out")"
    if [[ "$active" != "$n" ]]; then
      echo "run.sh: ours: only $active/$n entries active for N=$n" >&2; return 1
    fi
  fi
  local boot
  boot="$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).boot_ms.toFixed(3)' "$out")"
  echo "$boot $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1000 }')"
}

# time_cordis FILE N -> prints "boot_ms process_ms" (best-of handled by caller)
time_cordis() {
  local file="$1" n="$2" json t0 t1
  t0=$(now_us)
  json="$(cd "$TMP" && node boot-cordis.mjs "$file" "$n")" || {
    echo "run.sh: cordis boot failed for N=$n" >&2; return 1; }
  t1=$(now_us)
  local boot
  boot="$(node -p 'JSON.parse(process.argv[1]).boot_ms.toFixed(3)' "$json")"
  echo "$boot $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1000 }')"
}

LOAD0="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"

# Process floor: one entry, i.e. our process start + parse + print with nothing to load.
gen "$TMP/ours-1.yml" 1 debug/noop
floor=()
for ((r = 0; r < 5 * RUNS; r++)); do
  read -r _ p <<<"$(time_ours "$TMP/ours-1.yml" 1 $((r == 0)))"
  floor+=("$p")
done
FLOOR="$(min "${floor[@]}")"

declare -A CORDIS_BOOT CORDIS_PROC OURS OURS_PROC
for n in "${SIZE_LIST[@]}"; do
  gen "$TMP/cordis-$n.yml" "$n" cordis-plugin-bench-noop
  gen "$TMP/ours-$n.yml" "$n" debug/noop
  cb=(); cp_=(); ob=(); op=()
  for ((r = 0; r < RUNS; r++)); do
    out="$(time_cordis "$TMP/cordis-$n.yml" "$n")"
    read -r b p <<<"$out"
    cb+=("$b"); cp_+=("$p")
  done
  for ((r = 0; r < 5 * RUNS; r++)); do
    read -r b p <<<"$(time_ours "$TMP/ours-$n.yml" "$n" $((r == 0)))"
    ob+=("$b"); op+=("$p")
  done
  CORDIS_BOOT[$n]="$(min "${cb[@]}")"
  CORDIS_PROC[$n]="$(min "${cp_[@]}")"
  OURS[$n]="$(min "${ob[@]}")"
  OURS_PROC[$n]="$(min "${op[@]}")"
  echo "N=$n done: cordis ${CORDIS_BOOT[$n]} ms, ours ${OURS[$n]} ms" >&2
done

# Like-for-like with cordis's figure (whose loader reads the YAML): our in-process pipeline from
# reading the file to every entry active, best of 5*R, from host/benches/pipeline_sizes.rs.
echo "measuring our in-process pipeline (cargo bench -p cordis-host --bench pipeline_sizes)" >&2
declare -A OURS_PIPE
while read -r n ms; do
  OURS_PIPE[$n]="$ms"
done < <(cd "$ROOT" && cargo bench -q -p cordis-host --bench pipeline_sizes -- \
  "${SIZE_LIST[@]}" --runs $((5 * RUNS)) 2>/dev/null || true)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) print "inf"; else printf "%.1f", a / b }'; }

echo
echo "best of $RUNS runs (cordis) / $((5 * RUNS)) runs (ours); load average at start: $LOAD0; node $node_ver, cordis $cordis_ver + @cordisjs/loader $loader_ver; $(nproc 2>/dev/null || echo ?) CPUs"
echo "cordis (ms): in-process, new Context() -> all N plugins applied (excludes Node start and module import)"
echo "ours (ms):   in-process, the report's boot_ms: first apply -> runtime idle (excludes process"
echo "             start and YAML parsing, like cordis's figure excludes Node start and imports)"
echo "ratio:       cordis (ms) / ours (ms)  <- the targets use this"
echo "pipeline (ms): ours in-process from reading the file to all entries active (parse, resolve,"
echo "             boot), the like-for-like figure: cordis's includes its loader reading the YAML"
echo "processes (ms): context only: whole node process, whole \`cordis check --json\` process"
echo "             (ours includes process start, YAML parsing, JSON printing; 1-entry floor: $FLOOR ms)"
echo
printf '%8s  %12s  %10s  %9s  %14s  %9s    %19s  %19s\n' N "cordis (ms)" "ours (ms)" ratio \
  "pipeline (ms)" ratio "cordis process (ms)" "ours process (ms)"
for n in "${SIZE_LIST[@]}"; do
  pipe="${OURS_PIPE[$n]:-}"
  printf '%8s  %12.1f  %10.2f  %8s×  %14s  %8s×    %19.1f  %19.2f\n' "$n" "${CORDIS_BOOT[$n]}" "${OURS[$n]}" \
    "$(ratio "${CORDIS_BOOT[$n]}" "${OURS[$n]}")" "${pipe:--}" \
    "$([[ -n "$pipe" ]] && ratio "${CORDIS_BOOT[$n]}" "$pipe" || echo -)" \
    "${CORDIS_PROC[$n]}" "${OURS_PROC[$n]}"
done
echo

fail=0
if [[ -n "${OURS[1000]:-}" ]]; then
  r="$(ratio "${CORDIS_BOOT[1000]}" "${OURS[1000]}")"
  if awk -v r="${CORDIS_BOOT[1000]}" -v o="${OURS[1000]}" 'BEGIN { exit !(r >= 100 * o) }'; then
    echo "PASS  >= 100x faster than cordis at 1,000 entries (${r}x)"
  else
    echo "FAIL  >= 100x faster than cordis at 1,000 entries (${r}x)"; fail=1
  fi
else
  echo "SKIP  >= 100x at 1,000 entries (1000 not in --sizes)"
fi
if [[ -n "${OURS[1000]:-}" && -n "${OURS[10000]:-}" ]]; then
  g="$(ratio "${OURS[10000]}" "${OURS[1000]}")"
  if awk -v a="${OURS[10000]}" -v b="${OURS[1000]}" 'BEGIN { exit !(a <= 12 * b) }'; then
    echo "PASS  linear: ours(10,000) <= 12x ours(1,000) (${g}x)"
  else
    echo "FAIL  linear: ours(10,000) <= 12x ours(1,000) (${g}x)"; fail=1
  fi
else
  echo "SKIP  linear growth check (needs 1000 and 10000 in --sizes)"
fi

if [[ $fail -ne 0 && $STRICT -eq 1 ]]; then exit 1; fi
exit 0
