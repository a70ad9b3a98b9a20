#!/usr/bin/env bash
# Builds the pinned cluster binaries from the Go module proxy into
# $CACHE_DIR/<component>-<version>/, skipping any that are already built.
# Usage: hack/build.sh [kubernetes|etcd|kwok|coredns|kind|keda|kueue|kind-node|e2e]...
# (default: etcd kwok coredns kubernetes kind; keda, kueue and kind-node, what kind's
# node image is made of (hack/kind.sh image), and e2e, Kubernetes' own e2e
# test binary (hack/test-upstream.sh), only when asked for)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_cmd go "install Go 1.26 and put it on PATH"

KUBE_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

# k8s.io/kubernetes replaces its ~30 staging modules with ./staging paths, and
# replace directives of a dependency are ignored, so a wrapper module must pin
# each staging module to its published v0.x twin.
# write_kubernetes_module DIR PACKAGE...: a PACKAGE without a slash is a
# command (cmd/NAME), else a package path inside k8s.io/kubernetes.
write_kubernetes_module() {
  local dir=$1 minor=${KUBERNETES_VERSION#v1.} cmd
  shift
  local commands=("$@")
  local staging=v0.$minor
  mkdir -p "$dir"
  cp "$(go_module_file "k8s.io/kubernetes@$KUBERNETES_VERSION" GoMod)" "$dir/upstream.mod"
  {
    echo "module paralleljob.dev/hack/kubernetes"
    echo "go 1.24.0"
    echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
    echo "replace ("
    sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$dir/upstream.mod"
    echo ")"
  } >"$dir/go.mod"
  rm -f "$dir/upstream.mod"
  printf 'package tools\n\nimport (\n' >"$dir/tools.go"
  for cmd in "${commands[@]}"; do
    [[ $cmd == */* ]] || cmd=cmd/$cmd
    printf '\t_ "k8s.io/kubernetes/%s"\n' "$cmd" >>"$dir/tools.go"
  done
  printf ')\n' >>"$dir/tools.go"
  sed -i '1i //go:build tools\n' "$dir/tools.go"
}

kube_ldflags() {
  local ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1"
    ldflags+=" -X $pkg.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2) -X $pkg.gitTreeState=clean"
    ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ldflags"
}

# build_kube_commands NAME COMMAND...: builds commands of k8s.io/kubernetes
# into $CACHE_DIR/NAME-$KUBERNETES_VERSION/bin, unless there already (the
# directory appears complete or not at all).
build_kube_commands() {
  local name=$1
  shift
  local commands=("$@")
  local out=$CACHE_DIR/$name-$KUBERNETES_VERSION
  [ -x "$out/bin/${commands[-1]}" ] && { log "$name $KUBERNETES_VERSION: cached in $out"; return; }
  local work=$CACHE_DIR/src/$name-$KUBERNETES_VERSION ldflags
  write_kubernetes_module "$work" "${commands[@]}"
  ldflags=$(kube_ldflags)
  (
    cd "$work" || exit 1
    log "$name $KUBERNETES_VERSION: resolving modules"
    go mod tidy -e >/dev/null 2>&1 || true
    go mod download
    mkdir -p "$out/bin.tmp"
    for cmd in "${commands[@]}"; do
      local start=$SECONDS
      log "$name $KUBERNETES_VERSION: building $cmd"
      CGO_ENABLED=0 go build -trimpath -tags tools -ldflags "$ldflags" -o "$out/bin.tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd"
      log "$name $KUBERNETES_VERSION: built $cmd in $((SECONDS - start))s"
    done
  )
  rm -rf "${out:?}/bin" && mv "$out/bin.tmp" "$out/bin"
}

build_kubernetes() { build_kube_commands kubernetes "${KUBE_COMMANDS[@]}"; }

# Kubernetes' own end-to-end suite, test/e2e of the same module, compiled as
# its CI does (`go test -c`; upstream's make WHAT=test/e2e/e2e.test) into
# $CACHE_DIR/e2e-$KUBERNETES_VERSION/bin/e2e.test (complete or absent), and beside
# it the ginkgo CLI of the version that module requires, the one linked into
# e2e.test (upstream's vendored hack/ginkgo-e2e.sh runner), which runs its specs in
# parallel processes (hack/test-upstream.sh, UPSTREAM_PROCS). Either is built when
# missing, ginkgo alone in seconds.
# hack/test-upstream.sh runs its Job and CronJob specs against the local cluster.
E2E_PACKAGE=test/e2e
GINKGO_PACKAGE=github.com/onsi/ginkgo/v2/ginkgo
build_e2e() {
  local out=$CACHE_DIR/e2e-$KUBERNETES_VERSION
  if [ -x "$out/bin/e2e.test" ] && [ -x "$out/bin/ginkgo" ]; then
    log "e2e $KUBERNETES_VERSION: cached in $out"
    return
  fi
  local work=$CACHE_DIR/src/e2e-$KUBERNETES_VERSION ldflags start=$SECONDS
  write_kubernetes_module "$work" "$E2E_PACKAGE"
  sed -i "s#^import (\$#&\n\t_ \"$GINKGO_PACKAGE\"#" "$work/tools.go"
  ldflags=$(kube_ldflags)
  (
    cd "$work" || exit 1
    log "e2e $KUBERNETES_VERSION: resolving modules"
    go mod tidy -e >/dev/null 2>&1 || true
    go mod download
    if [ ! -x "$out/bin/e2e.test" ]; then
      rm -rf "$out/bin.tmp" && mkdir -p "$out/bin.tmp"
      log "e2e $KUBERNETES_VERSION: building e2e.test (go test -c k8s.io/kubernetes/$E2E_PACKAGE)"
      CGO_ENABLED=0 go test -c -vet=off -trimpath -ldflags "$ldflags" \
        -o "$out/bin.tmp/e2e.test" "k8s.io/kubernetes/$E2E_PACKAGE"
      rm -rf "${out:?}/bin" && mv "$out/bin.tmp" "$out/bin"
    fi
    log "e2e $KUBERNETES_VERSION: building ginkgo ($(go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2))"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/bin/ginkgo.tmp" "$GINKGO_PACKAGE"
    mv "$out/bin/ginkgo.tmp" "$out/bin/ginkgo"
  )
  log "e2e $KUBERNETES_VERSION: built in $((SECONDS - start))s"
}

# Builds a main package of a module that has no usable replace directives of
# its own by requiring it from a throwaway wrapper module.
# build_wrapped NAME VERSION MODULE PACKAGE BINARY [EXTRA_LDFLAGS]
build_wrapped() {
  local name=$1 version=$2 module=$3 pkg=$4 binary=$5 ldflags="-s -w ${6:-}"
  local out=$CACHE_DIR/$name-$version
  [ -x "$out/bin/$binary" ] && { log "$name $version: cached in $out"; return; }
  local work=$CACHE_DIR/src/$name-$version start=$SECONDS
  mkdir -p "$work" "$out/bin"
  (
    cd "$work" || exit 1
    printf 'module paralleljob.dev/hack/%s\n\ngo 1.24.0\n\nrequire %s %s\n' "$name" "$module" "$version" >go.mod
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >tools.go
    log "$name $version: resolving modules"
    go mod tidy -e >/dev/null 2>&1 || true
    go get "$pkg@$version" >/dev/null
    log "$name $version: building $binary"
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/bin/$binary.tmp" "$pkg"
    mv "$out/bin/$binary.tmp" "$out/bin/$binary"
  )
  log "$name $version: built in $((SECONDS - start))s"
}

build_etcd() { build_wrapped etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 etcd; }
build_kwok() { build_wrapped kwok "$KWOK_VERSION" sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok kwok; }
build_coredns() { build_wrapped coredns "$COREDNS_VERSION" github.com/coredns/coredns github.com/coredns/coredns coredns; }

KEDA_MODULE=github.com/kedacore/keda/v2
# binary name -> main package: the operator and the metrics API server
# (adapter) that KEDA's own images ship; the admission webhooks are left out.
declare -A KEDA_COMMANDS=([keda]=cmd/operator [keda-adapter]=cmd/adapter)

# KEDA's go.mod has replace and exclude directives, so `go install` refuses it
# and a dependency's directives are ignored: a wrapper module requires KEDA,
# copies its go line and every replace/exclude that points to a module version.
# A replace to a local path cannot be copied, so it is an error.
write_keda_module() {
  local dir=$1 upstream=$1/upstream.mod local_replaces
  mkdir -p "$dir"
  cp "$(go_module_file "$KEDA_MODULE@$KEDA_VERSION" GoMod)" "$upstream"
  # One directive per line, block form or not: "replace A v => B v", "exclude A v".
  awk '/^(replace|exclude) \($/ { block = $1; next }
       block && /^\)/ { block = ""; next }
       block && NF { sub(/^[ \t]+/, ""); print block " " $0; next }
       /^(replace|exclude) [^(]/ { print }' "$upstream" | sed 's#[ \t]*//.*##' >"$dir/directives"
  local_replaces=$(grep -E '^replace .*=> *(\.|/)' "$dir/directives" || true)
  [ -z "$local_replaces" ] || die "keda $KEDA_VERSION: go.mod replaces with local paths: $local_replaces"
  {
    echo "module paralleljob.dev/hack/keda"
    grep -E '^(go|toolchain) ' "$upstream"
    echo "require $KEDA_MODULE $KEDA_VERSION"
    cat "$dir/directives"
  } >"$dir/go.mod"
  rm -f "$upstream" "$dir/directives"
  printf '//go:build tools\n\npackage tools\n\nimport (\n' >"$dir/tools.go"
  local bin
  for bin in "${!KEDA_COMMANDS[@]}"; do printf '\t_ "%s/%s"\n' "$KEDA_MODULE" "${KEDA_COMMANDS[$bin]}" >>"$dir/tools.go"; done
  printf ')\n' >>"$dir/tools.go"
}

build_keda() {
  local out=$CACHE_DIR/keda-$KEDA_VERSION bin
  local cached=1
  for bin in "${!KEDA_COMMANDS[@]}"; do [ -x "$out/bin/$bin" ] || cached=; done
  [ -n "$cached" ] && { log "keda $KEDA_VERSION: cached in $out"; return; }
  local work=$CACHE_DIR/src/keda-$KEDA_VERSION
  write_keda_module "$work"
  # As KEDA's Makefile (GO_LDFLAGS), whose release builds pass the tag
  # without its "v"; GitCommit stays empty, the proxy does not know it.
  local ldflags="-s -w -X $KEDA_MODULE/version.Version=${KEDA_VERSION#v}"
  (
    cd "$work" || exit 1
    log "keda $KEDA_VERSION: resolving modules"
    go mod tidy -e >/dev/null 2>&1 || true
    go mod download
    mkdir -p "$out/bin.tmp"
    for bin in "${!KEDA_COMMANDS[@]}"; do
      local start=$SECONDS
      log "keda $KEDA_VERSION: building $bin"
      CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/bin.tmp/$bin" "$KEDA_MODULE/${KEDA_COMMANDS[$bin]}"
      log "keda $KEDA_VERSION: built $bin in $((SECONDS - start))s"
    done
  )
  rm -rf "${out:?}/bin" && mv "$out/bin.tmp" "$out/bin"
}

# Kueue (make test-kueue, hack/test-kueue.sh): its manager, the binary of its
# image, and its e2e suite test/e2e/singlecluster compiled as `go test -c`, from
# a writable copy of the module (go.mod without replace directives, its go.sum
# as shipped), into $CACHE_DIR/kueue-$KUEUE_VERSION/{bin,src}; the suite reads
# manifests and configs from that src at run time (PROJECT_DIR). Beside it,
# agnhost, the test image's binary its specs run, from the pinned Kubernetes.
KUEUE_MODULE=sigs.k8s.io/kueue
build_kueue() {
  local out=$CACHE_DIR/kueue-$KUEUE_VERSION
  if [ -x "$out/bin/manager" ] && [ -x "$out/bin/singlecluster.test" ] && [ -d "$out/src" ]; then
    log "kueue $KUEUE_VERSION: cached in $out"
  else
    local module_dir start=$SECONDS
    module_dir=$(go_module_file "$KUEUE_MODULE@$KUEUE_VERSION" Dir)
    rm -rf "$out" && mkdir -p "$out/bin.tmp"
    cp -r "$module_dir" "$out/src.tmp" && chmod -R u+w "$out/src.tmp"
    (
      cd "$out/src.tmp" || exit 1
      log "kueue $KUEUE_VERSION: resolving modules"
      go mod download
      log "kueue $KUEUE_VERSION: building the manager"
      CGO_ENABLED=0 go build -trimpath \
        -ldflags "-s -w -X $KUEUE_MODULE/pkg/version.GitVersion=$KUEUE_VERSION" \
        -o "$out/bin.tmp/manager" ./cmd/kueue
      log "kueue $KUEUE_VERSION: building the e2e suite (go test -c ./test/e2e/singlecluster)"
      CGO_ENABLED=0 go test -c -vet=off -trimpath -o "$out/bin.tmp/singlecluster.test" ./test/e2e/singlecluster
    )
    mv "$out/src.tmp" "$out/src" && mv "$out/bin.tmp" "$out/bin"
    log "kueue $KUEUE_VERSION: built in $((SECONDS - start))s"
  fi
  local agnhost=$CACHE_DIR/agnhost-$KUBERNETES_VERSION
  [ -x "$agnhost/bin/agnhost" ] && { log "agnhost $KUBERNETES_VERSION: cached in $agnhost"; return; }
  local work=$CACHE_DIR/src/agnhost-$KUBERNETES_VERSION start=$SECONDS
  write_kubernetes_module "$work" test/images/agnhost
  (
    cd "$work" || exit 1
    log "agnhost $KUBERNETES_VERSION: resolving modules"
    go mod tidy -e >/dev/null 2>&1 || true
    go mod download
    mkdir -p "$agnhost/bin"
    CGO_ENABLED=0 go build -trimpath -tags tools -ldflags "-s -w" \
      -o "$agnhost/bin/agnhost.tmp" k8s.io/kubernetes/test/images/agnhost
    mv "$agnhost/bin/agnhost.tmp" "$agnhost/bin/agnhost"
  )
  log "agnhost $KUBERNETES_VERSION: built in $((SECONDS - start))s"
}

# The kind CLI: make deploy's (hack/deploy.sh kind) and hack/kind.sh's.
build_kind() { build_wrapped kind "$KIND_VERSION" sigs.k8s.io/kind sigs.k8s.io/kind kind; }

# What kind's node image is made of (hack/kind.sh image): kubeadm (kubeadm
# init/join on the node), crictl (the node's CRI client), and etcd and CoreDNS
# at exactly the versions kubeadm $KUBERNETES_VERSION deploys
# (KIND_ETCD_VERSION, KIND_COREDNS_VERSION: `kubeadm config images list`),
# and local-path-provisioner (kind's default storage class).
build_kind_node() {
  build_kube_commands kubeadm kubeadm
  build_wrapped cri-tools "$CRI_TOOLS_VERSION" sigs.k8s.io/cri-tools sigs.k8s.io/cri-tools/cmd/crictl crictl \
    "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION"
  build_wrapped etcd "$KIND_ETCD_VERSION" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 etcd
  build_wrapped coredns "$KIND_COREDNS_VERSION" github.com/coredns/coredns github.com/coredns/coredns coredns
  build_wrapped local-path-provisioner "$LOCAL_PATH_PROVISIONER_VERSION" github.com/rancher/local-path-provisioner \
    github.com/rancher/local-path-provisioner local-path-provisioner
}

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(etcd kwok coredns kubernetes kind)
total=$SECONDS
mkdir -p "$CACHE_DIR"
for target in "${targets[@]}"; do
  case $target in
    kubernetes | etcd | kwok | coredns | kind | keda | kueue | kind-node | e2e)
      # One build of a component at a time: make test's parallel workers may ask for
      # the same one at once (two KEDA tests did on a cold cache, and the second one's
      # move of bin.tmp found it gone); the one that waited finds it cached.
      (
        exec {lock}>"$CACHE_DIR/.build-$target.lock"
        flock "$lock"
        "build_${target//-/_}"
      )
      ;;
    *) die "unknown component '$target' (expected kubernetes, etcd, kwok, coredns, kind, keda, kueue, kind-node or e2e)" ;;
  esac
done
log "all requested components ready in $((SECONDS - total))s (cache: $CACHE_DIR)"
