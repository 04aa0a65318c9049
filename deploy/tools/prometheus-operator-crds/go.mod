module cifartrain.io/tools/prometheus-operator-crds

go 1.25.0

require github.com/prometheus-operator/prometheus-operator v0.89.0
