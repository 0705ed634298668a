#!/bin/sh
# report-png.sh makes docs/report.png: the top of the report of the shipped
# trace (aosp-systemui) replayed through every allocator, as headless
# Chromium shows it in a window of a fixed size (the table, the verdict, the
# fragmentation bars and the headline's zoomed chart). Run it from anywhere
# in the repository:
#
#	scripts/report-png.sh
#
# It needs Go and the C compiler carve builds with, Chromium (chromium,
# chromium-browser or google-chrome), and jemalloc, tcmalloc and mimalloc
# for their rows (a missing one is shown as unavailable). The replays take
# about ten seconds on two cores. The report itself is written to a
# temporary directory and removed; set KEEP=DIR to keep it there.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/docs/report.png"
width=1000
height=2250

browser=
for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null 2>&1; then
		browser=$b
		break
	fi
done
if [ -z "$browser" ]; then
	echo "report-png.sh: no Chromium found (apt-get install chromium)" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/carve" ./cmd/carve)

# The report as a user writes it, so that the command line it shows is
# the one to type.
cd "$tmp"
./carve report -o report.html aosp-systemui >&2

# Chromium as root needs --no-sandbox; the other flags keep it from
# reaching the network or a profile of its own.
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--hide-scrollbars --user-data-dir="$tmp/profile" \
	--window-size="$width,$height" --screenshot="$out" "file://$tmp/report.html" 2>/dev/null
if [ -n "${KEEP:-}" ]; then
	mkdir -p "$KEEP" && cp report.html "$KEEP/"
fi
echo "report-png.sh: wrote $out ($width x $height)" >&2
