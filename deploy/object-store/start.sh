#!/usr/bin/env bash
# Starts a real S3-compatible object store in the background: SeaweedFS's `weed server -s3` (built
# from its Go module by deploy/tools/build.sh seaweedfs), for the tests and the local cluster's
# checkpoint bucket. Everything it keeps is under RUN_DIR: its data, log and unix sockets, and
#   endpoint          http://ADDRESS:PORT, the S3 endpoint
#   credentials.env   AWS_ACCESS_KEY_ID=... and AWS_SECRET_ACCESS_KEY=... (made at the first start
#                     or with --fresh; a restart keeps them)
#   pid               the server's process (stop.sh stops it)
#   endpoint-https    https://ADDRESS:PORT, the same store over TLS (with --tls)
#   ca.pem            the certificate authority of its TLS certificate (with --tls)
# It makes each --bucket and writes one object into it: SeaweedFS gives a bucket its storage on the
# first write (seconds), so a warmed bucket answers writes at once.
#   deploy/object-store/start.sh RUN_DIR [--address IP] [--port P] [--bucket NAME]... [--fresh]
#                                [--tls] [--dns-name NAME]... [--metrics-port P]
#                                [--put DIR=BUCKET/PREFIX]...
# --address: where it listens (default 127.0.0.1; a node's IP for pods to reach it, e.g. the
# local cluster's 10.244.0.1 with --port 8333, as deploy/examples/s3-ps-job.yaml expects). --port:
# the S3 port (default: a free one). --fresh: without what an earlier start stored (the tests'),
# and with new keys.
# --tls: also serves https on the next port, with a certificate for ADDRESS, localhost,
# s3.localhost and *.s3.localhost from a CA made for it (ca.pem). Either way buckets answer
# virtual-host style too, as BUCKET.s3.localhost:PORT (curl resolves *.localhost to the loopback
# itself; a certificate's wildcard must leave two labels, so not *.localhost). --dns-name: one more
# name the certificate is for (a name clients resolve to ADDRESS). --metrics-port: its
# Prometheus metrics there (SeaweedFS_s3_request_total by request type: what a job costs).
# --put: the files of DIR (not its subdirectories) as objects BUCKET/PREFIX/<name>, once the
# buckets are made (the local cluster's CIFAR-10 for dataset.uri).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
run=${1:?usage: start.sh RUN_DIR [--address IP] [--bucket NAME]...}
shift
address=127.0.0.1
buckets=()
fresh=0
tls=0
metrics_flags=()
dns_names=()
puts=()
s3_port=
while (($#)); do
  case $1 in
    --fresh) fresh=1; shift ;;
    --tls) tls=1; shift ;;
    --dns-name) dns_names+=("${2:?--dns-name needs a name}"); shift 2 ;;
    --metrics-port) metrics_flags=(-metricsPort="${2:?--metrics-port needs a number}"); shift 2 ;;
    --port) s3_port=${2:?--port needs a number}; shift 2 ;;
    --address) address=${2:?--address needs an IP}; shift 2 ;;
    --bucket) buckets+=("${2:?--bucket needs a name}"); shift 2 ;;
    --put) [[ ${2:-} == ?*=?*/* ]] || { echo "start.sh: --put DIR=BUCKET/PREFIX" >&2; exit 2; }
      puts+=("$2"); shift 2 ;;
    *) echo "start.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$run"
run=$(cd "$run" && pwd)
if [ -f "$run/pid" ] && kill -0 "$(cat "$run/pid")" 2>/dev/null; then
  echo "object store already running in $run: $(cat "$run/endpoint")"
  exit 0
fi
weed="$("$repo/deploy/tools/build.sh" seaweedfs)/weed"

# A restart (no --fresh) serves where the last start did: its S3 and https ports, its keys and its
# certificate, so that clients (a job's pods, a Secret made from credentials.env) go on as with a
# store that restarted or failed over.
https_port=
if ((!fresh)); then
  [ -z "$s3_port" ] && [ -s "$run/endpoint" ] && s3_port=$(sed 's/.*://' "$run/endpoint")
  [ -s "$run/endpoint-https" ] && https_port=$(sed 's/.*://' "$run/endpoint-https")
fi

# Nine ports in a row (master, volume, filer, S3, each with its gRPC port, and S3 over https),
# below the ephemeral range, free a moment ago.
port_free() { ! (exec 3<>"/dev/tcp/$address/$1") 2>/dev/null; }
first=
for _ in $(seq 200); do
  base=$((20000 + RANDOM % 12000))
  ok=1
  for p in $(seq "$base" $((base + 8))); do
    port_free "$p" && [ "$p" != "$s3_port" ] && [ "$p" != "$https_port" ] || { ok=0; break; }
  done
  ((ok)) && { first=$base; break; }
done
[ -n "$first" ] || { echo "start.sh: no 9 free ports on $address" >&2; exit 1; }
s3_port=${s3_port:-$((first + 6))}
s3_grpc=$((first + 7))

# A restart keeps its keys (as a store's restart or failover does: clients and the Secret made from
# credentials.env stay valid); --fresh makes new ones.
umask 077
if ((!fresh)) && [ -s "$run/credentials.env" ]; then
  key_id=$(sed -n 's/^AWS_ACCESS_KEY_ID=//p' "$run/credentials.env")
  secret=$(sed -n 's/^AWS_SECRET_ACCESS_KEY=//p' "$run/credentials.env")
else
  key_id=cifar$(openssl rand -hex 6)
  secret=$(openssl rand -hex 20)
  printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' "$key_id" "$secret" >"$run/credentials.env"
fi
printf '{"identities":[{"name":"cifartrain","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List"]}]}\n' \
  "$key_id" "$secret" >"$run/s3.json"
tls_flags=()
# The certificate is made again with --fresh, or when it is missing or within a day of its end.
if ((tls)) && { ((fresh)) || [ ! -s "$run/ca.pem" ] ||
  ! openssl x509 -checkend 86400 -noout -in "$run/tls.pem" >/dev/null 2>&1; }; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=cifartrain object store CA" \
    -keyout "$run/ca.key" -out "$run/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$address" -keyout "$run/tls.key" \
    -out "$run/tls.csr" 2>/dev/null
  names=
  for name in ${dns_names[@]+"${dns_names[@]}"}; do names+=",DNS:$name"; done
  printf 'subjectAltName=IP:%s,DNS:localhost,DNS:s3.localhost,DNS:*.s3.localhost%s\n' "$address" \
    "$names" >"$run/tls.ext"
  openssl x509 -req -in "$run/tls.csr" -CA "$run/ca.pem" -CAkey "$run/ca.key" -CAcreateserial \
    -days 7 -extfile "$run/tls.ext" -out "$run/tls.pem" 2>/dev/null
fi
if ((tls)); then
  https_port=${https_port:-$((first + 8))}
  tls_flags=(-s3.cert.file="$run/tls.pem" -s3.key.file="$run/tls.key" -s3.port.https="$https_port")
fi
umask 022
((fresh)) && rm -rf "$run/data" "$run/log"
mkdir -p "$run/data" "$run/log"
# -master.telemetry=false: it would post to telemetry.seaweedfs.com. No automatic buckets: a
# job's missing bucket must stay missing (and say so).
setsid "$weed" -logdir="$run/log" server -dir="$run/data" -ip="$address" -ip.bind="$address" \
  -master.peers=none -master.telemetry=false -master.volumeSizeLimitMB=256 -volume.max=0 \
  -volume.preStopSeconds=0 \
  -master.port=$first -master.port.grpc=$((first + 1)) \
  -volume.port=$((first + 2)) -volume.port.grpc=$((first + 3)) \
  -filer.port=$((first + 4)) -filer.port.grpc=$((first + 5)) -filer.localSocket="$run/filer.sock" \
  -s3 -s3.port="$s3_port" -s3.port.grpc="$s3_grpc" -s3.localSocket="$run/s3.sock" \
  -s3.config="$run/s3.json" -s3.autoCreateBucket=false -s3.port.iceberg=0 -s3.port.lance=0 \
  -s3.domainName=s3.localhost "${tls_flags[@]}" "${metrics_flags[@]}" \
  </dev/null >"$run/weed.log" 2>&1 &
echo $! >"$run/pid"
# A start that fails on the way (no answer, a bucket refused) leaves no server behind.
started=0
trap '((started)) || "$(dirname "$0")/stop.sh" "$run"' EXIT
endpoint="http://$address:$s3_port"
echo "$endpoint" >"$run/endpoint"
rm -f "$run/endpoint-https"
((tls)) && echo "https://$address:$https_port" >"$run/endpoint-https"

s3() {  # s3 METHOD PATH [curl args...]: a signed request; prints the HTTP status
  local method=$1 path=$2
  shift 2
  curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X "$method" --aws-sigv4 aws:amz:us-east-1:s3 \
    --user "$key_id:$secret" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@" "$endpoint/$path"
}
up=0
for _ in $(seq 300); do  # 60 s
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$endpoint/" || true)
  [ "$code" = 403 ] || [ "$code" = 200 ] && { up=1; break; }
  kill -0 "$(cat "$run/pid")" 2>/dev/null || break
  sleep 0.2
done
if ((up && tls)); then  # the https listener starts beside the plain one
  up=0
  for _ in $(seq 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$run/ca.pem" \
      "$(cat "$run/endpoint-https")/" || true)
    [ "$code" = 403 ] || [ "$code" = 200 ] && { up=1; break; }
    sleep 0.2
  done
fi
if ((!up)); then
  echo "start.sh: SeaweedFS's S3 gateway did not answer at $endpoint; its log:" >&2
  tail -30 "$run/weed.log" >&2
  exit 1
fi
for bucket in "${buckets[@]}"; do
  code=$(s3 PUT "$bucket")  # 409: there from an earlier start
  [ "$code" = 200 ] || [ "$code" = 409 ] || { echo "start.sh: creating bucket $bucket answered $code" >&2; exit 1; }
  code=$(s3 PUT "$bucket/.warm" --data-binary warm)
  [ "$code" = 200 ] || { echo "start.sh: the first write into $bucket answered $code" >&2; exit 1; }
done
for put in "${puts[@]}"; do
  dir=${put%%=*} to=${put#*=}
  [ -d "$dir" ] || { echo "start.sh: --put: no directory $dir" >&2; exit 1; }
  for file in "$dir"/*; do
    [ -f "$file" ] || continue
    code=$(s3 PUT "$to/$(basename "$file")" -T "$file")
    [ "$code" = 200 ] || { echo "start.sh: putting $file as $to/$(basename "$file") answered $code" >&2; exit 1; }
  done
  echo "put $dir into s3://$to"
done
started=1
echo "object store at $endpoint (run directory $run)"
