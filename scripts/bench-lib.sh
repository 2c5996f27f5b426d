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
