module cifartrain.io/controlplane/etcd

go 1.26.0

require (
	go.etcd.io/etcd/server/v3 v3.6.8
	go.etcd.io/etcd/etcdctl/v3 v3.6.8
)
