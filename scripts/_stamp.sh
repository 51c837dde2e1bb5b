# Helpers sourced by the setup scripts: progress lines on stderr, stamp files keyed by a hash of
# the files a step depends on, and pip with its output kept off stdout.

say() {
    echo "setup: $*" >&2
}

# stamp_key FILE...: one hash of the named files' contents (a missing file counts as empty).
stamp_key() {
    local file
    for file in "$@"; do
        echo "== $file"
        if [ -f "$file" ]; then cat "$file"; fi
    done | if command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi \
        | cut -d' ' -f1
}

# stamp_fresh STAMP KEY: true when STAMP holds exactly KEY.
stamp_fresh() {
    [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]
}

stamp_write() {
    printf '%s\n' "$2" >"$1"
}

# pip_quiet COMMAND...: runs a pip command with everything it prints sent to stderr, minus
# notes about ignored index locations and the build backend's warnings (setuptools prints a
# block about editable installs on every build); fails when the command fails.
pip_quiet() {
    local status=0
    PYTHONWARNINGS=ignore "$@" 2>&1 | grep -v "^WARNING: Location" >&2 || status="${PIPESTATUS[0]}"
    return "$status"
}
