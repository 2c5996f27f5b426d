#!/usr/bin/env bash
# rfs under an egress flood (issue #44): rfs's peak memory, the bundle's
# size and a later step's request time, against a baseline run in the same
# invocation that makes no flood. Targets: rfs <= 100 MB, bundle <= 5 MB,
# the later step unaffected.
#   baseline: a later step fetches from a test server, nothing else;
#   refusals: 2,000 refused requests with 60 KB names, then the fetch;
#   slow:     2,000 silent connections and 600 idle CONNECT tunnels held
#             by a background process, then the fetch.
# The test server is busybox httpd in a network namespace of the
# script's own (10.194.0.2:8080); nothing else is contacted.
# Needs root (namespaces), python3, busybox. Usage:
#   [RFS_BIN=path/to/rfs] scripts/bench-egress-flood.sh [WORKDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-flood.XXXXXX)}
mkdir -p "$work"
export RFS_STATE_DIR="$work/state"
source "$root/scripts/bench-lib.sh"
rfs=$(rfs_release)

ns=rfsbenchflood
ip netns del $ns 2>/dev/null || true
ip link del rbf0 2>/dev/null || true
ip netns add $ns
ip link add rbf0 type veth peer name rbf1
ip link set rbf1 netns $ns
ip addr add 10.194.0.1/30 dev rbf0; ip link set rbf0 up
ip -n $ns addr add 10.194.0.2/30 dev rbf1; ip -n $ns link set rbf1 up; ip -n $ns link set lo up
mkdir -p "$work/www"; echo "test service" > "$work/www/index.html"
ip netns exec $ns busybox httpd -f -p 10.194.0.2:8080 -h "$work/www" &
httpd=$!
cleanup() { kill $httpd 2>/dev/null || true; ip netns del $ns 2>/dev/null || true; ip link del rbf0 2>/dev/null || true; }
trap cleanup EXIT
sleep 0.5

repo="$work/repo"
if [ ! -d "$repo/.git" ]; then
  mkdir -p "$repo"
  cat > "$repo/refuse.py" <<'PY'
import os, socket
host, port = os.environ["http_proxy"].split("//")[1].rstrip("/").split(":")
for i in range(2000):
    name = ("x%d." % i) + "a" * 60000 + ".example"
    s = socket.create_connection((host, int(port)))
    s.sendall(("GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n" % (name, name)).encode())
    s.recv(4096); s.close()
PY
  cat > "$repo/slow.py" <<'PY'
import os, socket, sys, time
host, port = os.environ["http_proxy"].split("//")[1].rstrip("/").split(":")
held = [socket.create_connection((host, int(port))) for _ in range(2000)]
for _ in range(600):
    s = socket.create_connection((host, int(port)))
    s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % sys.argv[1]).encode())
    s.recv(4096); held.append(s)
print("holding", flush=True)
time.sleep(600)
PY
  git -C "$repo" init -q -b main; git -C "$repo" add -A
  git -C "$repo" -c user.name=b -c user.email=b@b commit -qm flood
fi
head='sandbox(#{ network: #{ allow: ["10.194.0.2:8080"] } }); sync_source();'
fetch='step("later", "curl -sS -m 120 -o /dev/null -w %{time_total} http://10.194.0.2:8080/");'
echo "$head $fetch" > "$work/baseline.rhai"
echo "$head step(\"flood\", \"python3 refuse.py\"); $fetch" > "$work/refusals.rhai"
echo "$head let h = spawn(\"holder\", \"python3 slow.py 10.194.0.2:8080\"); h.wait_for(#{ line: \"holding\", timeout: 300 }); $fetch" > "$work/slow.rhai"

# Peak resident memory of rfs (KiB), from the kernel's accounting of the
# child; then the bundle's bytes and the later step's seconds.
measure() {
  local name=$1 out="$work/out-$1"
  rm -rf "$out"
  local kb
  kb=$(cd "$repo" && python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if r.returncode: sys.exit("rfs failed: %d" % r.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$rfs" run --provider local "$work/$name.rhai" --out "$out")
  local bytes secs
  bytes=$(du -sb "$out" | cut -f1)
  secs=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e["kind"]=="step.end" and e["payload"].get("name")=="later": print(e["payload"]["duration_ms"]/1000)' "$out/journal.jsonl")
  echo "$kb $bytes $secs"
}

read -r bk bb bs < <(measure baseline)
printf '%-10s rfs peak %6.1f MB   bundle %7.2f MB   later step %6.2f s\n' baseline "$(ratio "$bk" 1024)" "$(ratio "$bb" 1048576)" "$bs"
for run in refusals slow; do
  read -r k b s < <(measure $run)
  printf '%-10s rfs peak %6.1f MB (%sx)   bundle %7.2f MB (%sx)   later step %6.2f s (%sx)\n' \
    "$run" "$(ratio "$k" 1024)" "$(ratio "$k" "$bk")" "$(ratio "$b" 1048576)" "$(ratio "$b" "$bb")" "$s" "$(ratio "$s" "$bs")"
done
