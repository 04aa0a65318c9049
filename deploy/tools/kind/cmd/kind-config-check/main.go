// kind-config-check loads kind cluster configs with kind's own loader and validation (the code
// `kind create cluster --config FILE` runs before it touches Docker) and prints what kind made of
// each file: the nodes (role, image, mounts, labels) and, when the file patches containerd, the
// runtimes of the node image's containerd config after kind's own patch code has applied the
// patches. Exits 1 with kind's error on the first file kind rejects.
//
//	kind-config-check [--name CLUSTER] [--containerd-config TOML] FILE...
//
// --name: the cluster name `kind create cluster --name` would give (validated like kind does).
// --containerd-config: the node image's /etc/containerd/config.toml (deploy/tools/build.sh kind
// copies kind's from its module); without it, containerd patches are only listed.
//
// kind keeps its loader internal (pkg/internal/apis/config): the file goes through the public
// cluster.CreateWithConfigFile, whose option is applied to kind's own ClusterOptions by
// reflection, exactly as Provider.Create applies it; then the loaded config's own Validate runs,
// as create.Cluster does (after the name: see check). The containerd patch function is reached by its linker name.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	_ "unsafe" // go:linkname

	burntoml "github.com/BurntSushi/toml"

	"sigs.k8s.io/kind/pkg/apis/config/defaults"
	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/constants"
)

// kind's patch.ContainerdTOML: what `kind create cluster` applies to every node's
// /etc/containerd/config.toml (containerdConfigPatches, containerdConfigPatchesJSON6902).
//
//go:linkname containerdTOML sigs.k8s.io/kind/pkg/internal/patch.ContainerdTOML
func containerdTOML(toPatch string, patches []string, patches6902 []string) (string, error)

// load runs kind's loader on path and returns its internal *config.Cluster (as a reflect.Value).
func load(path string) (reflect.Value, error) {
	option := reflect.ValueOf(cluster.CreateWithConfigFile(path))
	t := option.Type()
	if t.Kind() != reflect.Func || t.NumIn() != 1 || t.In(0).Kind() != reflect.Pointer ||
		t.NumOut() != 1 {
		return reflect.Value{}, fmt.Errorf("kind's CreateOption is no longer a func(*ClusterOptions) error (%s): update kind-config-check", t)
	}
	options := reflect.New(t.In(0).Elem())
	if err, _ := option.Call([]reflect.Value{options})[0].Interface().(error); err != nil {
		return reflect.Value{}, err
	}
	config := options.Elem().FieldByName("Config")
	if !config.IsValid() || config.IsNil() {
		return reflect.Value{}, errors.New("kind's loader returned no config")
	}
	return config, nil
}

func validate(config reflect.Value) error {
	out := config.MethodByName("Validate").Call(nil)
	err, _ := out[0].Interface().(error)
	return err
}

func str(v reflect.Value, field string) string { return v.FieldByName(field).String() }

func sortedKeys(m reflect.Value) []string {
	keys := make([]string, 0, m.Len())
	for _, k := range m.MapKeys() {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	return keys
}

func strings_(v reflect.Value) []string {
	out := make([]string, v.Len())
	for i := range out {
		out[i] = v.Index(i).String()
	}
	return out
}

// runtimes prints the CRI runtimes of a containerd config (config version 2 or 3).
func runtimes(patched string) error {
	var doc map[string]any
	if _, err := burntoml.Decode(patched, &doc); err != nil {
		return fmt.Errorf("the patched containerd config is not TOML: %w", err)
	}
	dig := func(m map[string]any, keys ...string) map[string]any {
		for _, k := range keys {
			next, _ := m[k].(map[string]any)
			if next == nil {
				return nil
			}
			m = next
		}
		return m
	}
	plugin := "io.containerd.grpc.v1.cri" // config version 2
	if v, _ := doc["version"].(int64); v >= 3 {
		plugin = "io.containerd.cri.v1.runtime"
	}
	fmt.Printf("containerd version=%v plugin=%s\n", doc["version"], plugin)
	plugins := dig(doc, "plugins")
	sections := make([]string, 0, len(plugins))
	for section := range plugins {
		sections = append(sections, section)
	}
	sort.Strings(sections)
	fmt.Printf("containerd plugins %s\n", strings.Join(sections, " "))
	cri := dig(doc, "plugins", plugin, "containerd")
	if cri == nil {
		return fmt.Errorf("the patched containerd config has no plugins.%q.containerd", plugin)
	}
	fmt.Printf("containerd default_runtime_name=%v\n", cri["default_runtime_name"])
	rts := dig(cri, "runtimes")
	names := make([]string, 0, len(rts))
	for name := range rts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rt, _ := rts[name].(map[string]any)
		opts, _ := rt["options"].(map[string]any)
		fmt.Printf("containerd runtime %s runtime_type=%v BinaryName=%v SystemdCgroup=%v base_runtime_spec=%v\n",
			name, rt["runtime_type"], opts["BinaryName"], opts["SystemdCgroup"], rt["base_runtime_spec"])
	}
	return nil
}

func check(path, name, containerdConfig string) error {
	config, err := load(path)
	if err != nil {
		return err
	}
	// What create.Cluster does between loading and validating: --name overrides the file's name,
	// and its defaulting names a nameless cluster "kind" (the one default the loader leaves out).
	if name != "" {
		config.Elem().FieldByName("Name").SetString(name)
	}
	if config.Elem().FieldByName("Name").String() == "" {
		config.Elem().FieldByName("Name").SetString(constants.DefaultClusterName)
	}
	if err := validate(config); err != nil {
		return err
	}
	c := config.Elem()
	fmt.Printf("file %s\n", path)
	fmt.Printf("cluster name=%s kind-default-image=%s\n", str(c, "Name"), defaults.Image)
	nodes := c.FieldByName("Nodes")
	for i := 0; i < nodes.Len(); i++ {
		n := nodes.Index(i)
		fmt.Printf("node %d role=%s image=%s\n", i, str(n, "Role"), str(n, "Image"))
		mounts := n.FieldByName("ExtraMounts")
		for j := 0; j < mounts.Len(); j++ {
			m := mounts.Index(j)
			fmt.Printf("node %d mount %s:%s readonly=%t propagation=%s\n", i, str(m, "HostPath"),
				str(m, "ContainerPath"), m.FieldByName("Readonly").Bool(), str(m, "Propagation"))
		}
		labels := n.FieldByName("Labels")
		for _, k := range sortedKeys(labels) {
			fmt.Printf("node %d label %s=%s\n", i, k, labels.MapIndex(reflect.ValueOf(k)).String())
		}
	}
	patches := strings_(c.FieldByName("ContainerdConfigPatches"))
	patches6902 := strings_(c.FieldByName("ContainerdConfigPatchesJSON6902"))
	fmt.Printf("containerd patches=%d json6902=%d\n", len(patches), len(patches6902))
	if len(patches)+len(patches6902) == 0 || containerdConfig == "" {
		return nil
	}
	base, err := os.ReadFile(containerdConfig)
	if err != nil {
		return err
	}
	patched, err := containerdTOML(string(base), patches, patches6902)
	if err != nil {
		return fmt.Errorf("kind cannot patch the node image's containerd config: %w", err)
	}
	return runtimes(patched)
}

func main() {
	name := flag.String("name", "", "cluster name, as `kind create cluster --name` gives it")
	containerdConfig := flag.String("containerd-config", "", "the node image's /etc/containerd/config.toml")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kind-config-check [--name CLUSTER] [--containerd-config TOML] FILE...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, path := range flag.Args() {
		if err := check(path, *name, *containerdConfig); err != nil {
			fmt.Fprintf(os.Stderr, "kind-config-check: %s: %v\n", path, strings.TrimSpace(err.Error()))
			os.Exit(1)
		}
	}
}
