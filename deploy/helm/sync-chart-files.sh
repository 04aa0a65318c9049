#!/usr/bin/env bash
# Writes the Helm chart's files/ from their sources in deploy/ (`make chart-files`). A chart
# cannot read outside its directory and a packaged chart must carry what it renders, so the chart
# holds committed copies; deploy/ is the one place to edit. Each copy directory holds exactly its
# source's files: the script adds, updates and removes there, and touches nothing else.
# --check changes nothing: it names every copy that differs from its source, is missing or has
# no source, with the diff, and exits 1 (ctest Helm.CopiesInSync).
#   deploy/helm/sync-chart-files.sh [--check]
set -euo pipefail
shopt -s nullglob
repo=$(cd "$(dirname "$0")/../.." && pwd)
chart_files=deploy/helm/cifar-operator/files

# SOURCE:COPY_DIRECTORY, relative to the repository. SOURCE is a file or a directory of files.
# The dashboard's source here is the committed JSON, not dashboard.py: Grafana.Dashboard keeps
# the two in step, and this script needs no Grafana SDK.
sources=(
  "deploy/crds:$chart_files/crds"
  "deploy/prometheus/rules:$chart_files/prometheus"
  "deploy/grafana/cifartrain.json:$chart_files/grafana"
)

case ${1:-} in
  --check) check=true ;;
  "") check=false ;;
  *) echo "usage: sync-chart-files.sh [--check]" >&2; exit 2 ;;
esac
cd "$repo"

out_of_sync=()
declare -A copied
for entry in "${sources[@]}"; do
  source=${entry%%:*}
  copy_dir=${entry#*:}
  if [ -d "$source" ]; then
    source_files=("$source"/*)
  elif [ -f "$source" ]; then
    source_files=("$source")
  else
    echo "sync-chart-files.sh: no $source" >&2
    exit 1
  fi
  $check || mkdir -p "$copy_dir"

  copied=()
  for file in "${source_files[@]}"; do
    [ -f "$file" ] || { echo "sync-chart-files.sh: $file is not a file" >&2; exit 1; }
    copy=$copy_dir/$(basename "$file")
    copied[$copy]=1
    cmp -s "$file" "$copy" && continue
    if $check && [ ! -e "$copy" ]; then
      out_of_sync+=("$copy is missing (its source: $file)")
    elif $check; then
      out_of_sync+=("$copy differs from its source $file")
      # What the sync would change in the copy.
      diff -u --label "$copy" --label "$file" "$copy" "$file" >&2 || true
    else
      cp "$file" "$copy"
      echo "wrote $copy (from $file)"
    fi
  done
  for copy in "$copy_dir"/*; do
    [ -n "${copied[$copy]:-}" ] && continue
    if $check; then
      out_of_sync+=("$copy has no source in $source")
    else
      rm -r "$copy"
      echo "removed $copy (no source in $source)"
    fi
  done
done

if [ ${#out_of_sync[@]} -gt 0 ]; then
  printf 'FAIL: %s\n' "${out_of_sync[@]}" >&2
  echo "Edit the sources in deploy/, not the chart's copies, then run \`make chart-files\`" \
    "(deploy/helm/sync-chart-files.sh) and commit what it writes." >&2
  exit 1
fi
echo "the chart's files/ match their sources in deploy/"
