#!/usr/bin/env bash
# Runs the README's lab block in order, as a new user would: the block
# after the marker "the lab block", from the checkout, each command in turn,
# and prints the wall time each took and the machine's load average when
# it started, so that the README's times can be checked. A command that
# fails stops the script with its exit code.
set -euo pipefail
cd "$(dirname "$0")/.."
block=$(awk '/<!-- the lab block/ {seen=1; next} seen && /^```sh/ {inside=1; next} inside && /^```/ {exit} inside {print}' README.md)
if [ -z "$block" ]; then
	echo "readme-lab: no lab block in README.md" >&2
	exit 1
fi
rm -rf /tmp/carve-lab
times=()
while IFS= read -r line; do
	printf '\n$ %s\n' "$line"
	load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')
	start=$EPOCHREALTIME
	eval "$line"
	took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	printf 'readme-lab: %s s (load %s at its start)\n' "$took" "$load"
	times+=("$(printf '%7s s  load %-5s  %s' "$took" "$load" "$line")")
done <<< "$block"
echo
echo "readme-lab: every command of the lab block ran; wall times:"
printf '%s\n' "${times[@]}"
