#!/usr/bin/env bash
# A fresh CA, the API server's serving certificate, an admin client certificate
# (O=system:masters), the service-account signing key (all in DIR/pki) and DIR/kubeconfig for the
# admin at SERVER. Shared by the local cluster (start.sh) and the bare control plane of the
# operator's integration tests (tests/integration/control-plane/start.sh).
#   deploy/local-cluster/certs.sh DIR SERVER_URL SUBJECT_ALT_NAMES CLUSTER_NAME
#   e.g. certs.sh /tmp/cp https://127.0.0.1:6443 IP:127.0.0.1,DNS:localhost test
set -euo pipefail
dir=$1 server=$2 sans=$3 name=$4
mkdir -p "$dir/pki"
(
  cd "$dir/pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj "/CN=cifartrain-$name-ca"
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver"
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$sans" >server.ext
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile server.ext -out apiserver.crt
  openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=cifartrain-admin"
  printf 'extendedKeyUsage=clientAuth\n' >client.ext
  openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile client.ext -out admin.crt
  openssl genrsa -out service-account.key 2048
) >"$dir/pki.log" 2>&1

cat >"$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster:
    server: $server
    certificate-authority: $dir/pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $dir/pki/admin.crt
    client-key: $dir/pki/admin.key
contexts:
- name: $name
  context: {cluster: $name, user: admin, namespace: default}
current-context: $name
KUBECONFIG
