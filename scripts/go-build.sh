# Sourced by the install-*.sh scripts that build a tool from Go modules into a versioned cache
# directory ($prefix). They define log, die and their own cache check before sourcing it.

# find_go WHAT: sets go_bin to $GO, the go on PATH or /usr/local/go/bin/go; dies naming WHAT otherwise.
find_go() {
    if [[ -n "${GO:-}" ]]; then
        go_bin="$GO"
    elif command -v go >/dev/null 2>&1; then
        go_bin="$(command -v go)"
    elif [[ -x /usr/local/go/bin/go ]]; then
        go_bin=/usr/local/go/bin/go
    else
        die "go not found: install Go (https://go.dev/dl), put it on PATH or set GO=/path/to/go; it builds $1"
    fi
    "$go_bin" version >/dev/null 2>&1 || die "'$go_bin' does not run"
}

# build_lock CHECK ANSWER WHAT: one builder at a time per $prefix. A caller that waited for another
# one and then finds the cache filled (the command CHECK succeeds) prints ANSWER and exits 0.
build_lock() {
    mkdir -p "$prefix"
    exec 9>"$prefix/.lock"
    if command -v flock >/dev/null 2>&1; then
        flock 9
        if $1; then
            log "$3 already built (by a concurrent run): $2"
            printf '%s\n' "$2"
            exit 0
        fi
    fi
}
