#!/usr/bin/env bash
# The web console's graph library (docs/console.md): cytoscape from the npm
# registry, unpacked into ${NETPEER_CONSOLE_ASSETS:-~/.cache/netpeer/console}
# (netpeerd's console_assets default). Nothing of it is kept in this
# repository. Cached; the tarball's checksum is checked. Prints the directory.
set -euo pipefail
VERSION=3.34.4
SHA1=20cbd1b1f8cb2e25699bdf68887564fc3c74b375   # the registry's shasum of cytoscape-$VERSION.tgz
DIR=${NETPEER_CONSOLE_ASSETS:-$HOME/.cache/netpeer/console}
say() { echo "install-console-assets: $*" >&2; }
mkdir -p "$DIR"
if [ -f "$DIR/cytoscape.min.js" ] && [ "$(cat "$DIR/VERSION" 2>/dev/null)" = "$VERSION" ]; then
  say "cytoscape $VERSION present in $DIR"
  echo "$DIR"
  exit 0
fi
tgz="$DIR/cytoscape-$VERSION.tgz"
if [ ! -f "$tgz" ]; then
  if command -v npm >/dev/null; then
    (cd "$DIR" && npm pack --silent "cytoscape@$VERSION" >/dev/null)
  else   # the same tarball, from the same registry
    curl -fsSL -o "$tgz.part" "https://registry.npmjs.org/cytoscape/-/cytoscape-$VERSION.tgz"
    mv "$tgz.part" "$tgz"
  fi
fi
if [ "$(sha1sum "$tgz" | cut -d' ' -f1)" != "$SHA1" ]; then
  rm -f "$tgz"
  say "cytoscape-$VERSION.tgz does not have the registry's checksum $SHA1: removed; run again"
  exit 1
fi
tar -xzf "$tgz" -O package/dist/cytoscape.min.js > "$DIR/cytoscape.min.js.part"
mv "$DIR/cytoscape.min.js.part" "$DIR/cytoscape.min.js"
echo "$VERSION" > "$DIR/VERSION"
say "cytoscape $VERSION installed in $DIR"
echo "$DIR"
