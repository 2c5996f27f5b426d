# Shared helpers for scripts/bench-*.sh (sourced, not run).
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN{print b-a}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }

# Seconds of build+upload+verify of the run's sync_source, from its journal.
sync_seconds() {
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e["kind"]=="source.verify":
        p=e["payload"]; print((p["build_ms"]+p["upload_ms"]+p["verify_ms"])/1000)' "$1"
}

# Seconds from the first step.start to the last step.end, from a journal.
steps_seconds() {
  python3 -c 'import json,sys
from datetime import datetime
ts=[e for e in map(json.loads, open(sys.argv[1])) if e["kind"] in ("step.start","step.end")]
f=lambda s: datetime.strptime(s,"%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
print(f(ts[-1]["ts"]) - f(ts[0]["ts"]))' "$1"
}

# A one-commit repository at $1 (kept between runs).
small_repo() {
  [ -d "$1/.git" ] && return
  mkdir -p "$1"; echo m > "$1/f"; git -C "$1" init -q -b main; git -C "$1" add -A
  git -C "$1" -c user.name=b -c user.email=b@b commit -qm s
}

# Seconds of the run's sync phase, from its journal: source.resolved to
# source.pin, or to the end of a step named "flush" when there is one
# (provisioning included; process start-up and teardown not).
phase_seconds() {
  python3 -c 'import json,sys
from datetime import datetime
f=lambda s: datetime.strptime(s,"%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
t0=t1=None
for e in map(json.loads, open(sys.argv[1])):
    if e["kind"]=="source.resolved": t0=f(e["ts"])
    if e["kind"]=="source.pin" and t1 is None: t1=f(e["ts"])
    if e["kind"]=="step.end" and e["payload"].get("name")=="flush": t1=f(e["ts"])
print(round(t1-t0,3))' "$1"
}

# The benchmark repository at $1 (kept between runs): >= 20,000 files,
# >= 200 MB, nested, 4 x 25 MiB files, loose objects.
gen_repo() {
  local dir=$1
  [ -d "$dir/.git" ] && return
  mkdir -p "$dir"
  python3 - "$dir" <<'PY'
import os, sys, random
root = sys.argv[1]
rnd = random.Random(42)
n = 0
for a in range(20):
    for b in range(25):
        d = os.path.join(root, f"pkg{a:02d}", f"mod{b:02d}", "src")
        os.makedirs(d, exist_ok=True)
        for c in range(41):
            size = rnd.randint(1000, 9000)
            with open(os.path.join(d, f"file{c:03d}.txt"), "wb") as f:
                f.write(rnd.randbytes(size // 2).hex().encode()[:size])
            n += 1
os.makedirs(os.path.join(root, "assets"), exist_ok=True)
for i in range(4):
    with open(os.path.join(root, "assets", f"big{i}.bin"), "wb") as f:
        f.write(rnd.randbytes(25 * 1024 * 1024))
print(f"generated {n} small files + 4 x 25 MiB", file=sys.stderr)
PY
  echo marker > "$dir/reproducer-marker.txt"
  git -C "$dir" init -q -b main
  git -C "$dir" config gc.auto 0   # stay loose: no automatic gc after the commit
  git -C "$dir" add -A
  git -C "$dir" -c user.name=bench -c user.email=b@b commit -qm bench
}

# The same history, packed (as after `git gc`).
gen_packed() {
  local from=$1 dir=$2
  [ -d "$dir/.git" ] && return
  git clone -q --no-local "$from" "$dir"
  git -C "$dir" gc -q
}

# The rfs binary to measure: $RFS_BIN, else this checkout's release build
# (built now). Needs $root.
rfs_release() {
  if [ -n "${RFS_BIN:-}" ]; then echo "$RFS_BIN"; return; fi
  cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p rfs >&2
  echo "${CARGO_TARGET_DIR:-$root/target}/release/rfs"
}

# Wall seconds of `rfs test --out OUT --json ARGS...` run by $rfs in DIR:
# timed_suite DIR OUT ARGS... (its stderr in OUT.err; a failure ends the
# benchmark).
timed_suite() {
  local dir=$1 out=$2 t0 t1
  shift 2
  rm -rf "$out"
  t0=$(now)
  (cd "$dir" && "$rfs" test --out "$out" --json "$@" > /dev/null 2> "$out.err") \
    || { echo "rfs test failed:" >&2; cat "$out.err" >&2; exit 1; }
  t1=$(now)
  elapsed "$t0" "$t1"
}

# What a suite folder OUT run with JOBS at once would take with no
# overhead: its setup's steps plus every proof's own steps / JOBS (each
# from its journal): suite_ideal OUT JOBS.
suite_ideal() {
  local out=$1 jobs=$2 own=0 j
  for j in "$out"/proofs-*/journal.jsonl; do
    own=$(awk -v a="$own" -v b="$(steps_seconds "$j")" 'BEGIN{print a+b}')
  done
  awk -v s="$(steps_seconds "$out/_setup/journal.jsonl")" -v o="$own" -v n="$jobs" 'BEGIN{print s + o/n}'
}
