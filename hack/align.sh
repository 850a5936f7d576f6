# Sourced by the tool builds from the Go module proxy (the kube binaries in
# hack/build-control-plane.sh, helm in hack/helm/install.sh):
# align_with_project.
#
# align_with_project ROOT PKG...: in the module of the current directory
# (a scratch module or a copy of the tool's own), requires ROOT's version of
# every module whose packages both ROOT's build and PKG's compile, unless the
# current module replaces it. Go's build cache keys a compiled package by
# its source and its dependencies' compiled output, so a package of
# client-go, apiserver or api is compiled once for both builds only when
# every module beneath it is at the same version. A requirement only raises
# a version (Go takes the highest one required), so a module the tool needs
# newer stays as the tool needs it.
align_with_project() {
  local root=$1 ours theirs
  shift
  ours=$(cd "$root" && GOWORK=off go list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' ./... | sort -u)
  theirs=$(go list -mod=mod -deps -f '{{with .Module}}{{if not .Replace}}{{.Path}} {{.Version}}{{end}}{{end}}' "$@" | sort -u)
  awk 'NR == FNR { if (NF == 2) ours[$1] = $2; next }
       NF == 2 && ($1 in ours) && ours[$1] != $2 { print $1 "@" ours[$1] }' \
    <(echo "$ours") <(echo "$theirs") | while read -r m; do
    go mod edit -require "$m"
  done
}
