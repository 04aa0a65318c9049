module cifartrain.io/cluster/kueue

go 1.25.0

require sigs.k8s.io/kueue v0.17.0
