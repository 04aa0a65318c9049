module cifartrain.io/tools/seaweedfs

go 1.26

require github.com/seaweedfs/seaweedfs v0.0.0-20261109003541-7506e5f91cd6

// Copied from seaweedfs go.mod: a dependency's replace lines do not apply to its dependents.
replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
