# shellcheck shell=bash
# go_build OUT MODULE_DIR TAGS LDFLAGS [NAME=]PACKAGE... (sourced): builds Go main packages from
# MODULE_DIR (a go.mod pinning them, with any local sources) into OUT/bin, once. The module is
# built in a copy, so that the build never rewrites the committed go.mod/go.sum; several packages
# build in one `go build` (they share most of their dependencies), into a staging directory whose
# binaries are moved into place only once all were written. A binary is named after its package's
# last element (cmd/kubelet: kubelet), or NAME=PACKAGE names it. Binaries already in OUT/bin are
# not rebuilt. The machine's Go builds them (GOTOOLCHAIN=local), CGO off.
go_build() {
  local out=$1 module=$2 tags=$3 ldflags=$4
  shift 4
  local missing=() names=() item name
  for item in "$@"; do
    name=${item%%=*}
    [ "$name" = "$item" ] && name=$(basename "$item")
    [ -x "$out/bin/$name" ] || { missing+=("${item#*=}"); names+=("$name"); }
  done
  ((${#missing[@]})) || return 0
  local work staging="$out/bin/partial"
  work="$out/src/$(basename "$module")"
  rm -rf "$staging" "$work" && mkdir -p "$work" "$staging"
  cp -r "$module/." "$work/"
  echo "building ${names[*]} into $out/bin" >&2
  local target="$staging/"  # several packages: one binary each in the directory
  ((${#missing[@]} == 1)) && target="$staging/${names[0]}"
  (cd "$work" && GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 go build -p 2 -trimpath \
    -tags="$tags" -ldflags="all=-s -w $ldflags" -o "$target" "${missing[@]}")
  for name in "${names[@]}"; do mv "$staging/$name" "$out/bin/$name"; done
  rmdir "$staging"
}

# require_go MODULE_DIR WHAT: exits unless the machine's Go is at least the module's `go` line.
require_go() {
  local needed have
  needed=$(awk '$1 == "go" {print $2; exit}' "$1/go.mod")
  have=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || true
  if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$needed" "$have" | sort -V | head -1)" != "$needed" ]; then
    echo "build: $2 needs Go >= $needed; this machine has '${have:-no go}'" >&2
    exit 1
  fi
}

# go_mod_pin GO_MOD MODULE: the version GO_MOD requires of MODULE (a `require` line of its own or
# in a block); fails saying so when it requires none.
go_mod_pin() {
  local version
  version=$(awk -v module="$2" '($1 == "require" && $2 == module) || ($1 == module && $2 ~ /^v/) {
    print ($1 == "require" ? $3 : $2); exit }' "$1")
  [ -n "$version" ] || { echo "$1 requires no $2" >&2; return 1; }
  echo "$version"
}
