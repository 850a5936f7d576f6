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
# every module beneath it is at the same version. Only a module the tool
# compiles older than ROOT is raised: one it needs newer stays as it needs
# it (go mod edit -require replaces the module's own requirement, which for
# a tool's own go.mod, as MetalLB's, would lower it).
align_with_project() {
  local root=$1 ours theirs
  shift
  ours=$(cd "$root" && GOWORK=off go list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' ./... | sort -u)
  theirs=$(go list -mod=mod -deps -f '{{with .Module}}{{if not .Replace}}{{.Path}} {{.Version}}{{end}}{{end}}' "$@" | sort -u)
  # less(A, B): A before B in Go's module version order (vMAJOR.MINOR.PATCH, a
  # pre-release or pseudo-version before its release; pre-releases compared
  # as text, which orders pseudo-versions by their timestamps).
  awk 'function less(a, b,   x, y, pa, pb, i) {
         sub(/^v/, "", a); sub(/^v/, "", b); sub(/\+.*/, "", a); sub(/\+.*/, "", b)
         pa = index(a, "-") ? substr(a, index(a, "-") + 1) : ""; if (pa != "") a = substr(a, 1, index(a, "-") - 1)
         pb = index(b, "-") ? substr(b, index(b, "-") + 1) : ""; if (pb != "") b = substr(b, 1, index(b, "-") - 1)
         split(a, x, "."); split(b, y, ".")
         for (i = 1; i <= 3; i++) if (x[i] + 0 != y[i] + 0) return x[i] + 0 < y[i] + 0
         if (pa == pb) return 0
         if (pa == "") return 0
         if (pb == "") return 1
         return pa < pb
       }
       NR == FNR { if (NF == 2) ours[$1] = $2; next }
       NF == 2 && ($1 in ours) && less($2, ours[$1]) { print $1 "@" ours[$1] }' \
    <(echo "$ours") <(echo "$theirs") | while read -r m; do
    go mod edit -require "$m"
  done
}
