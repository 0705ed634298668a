#!/usr/bin/env bash
# Runs the README's lab block in order, as a new user would: the block
# after the marker "the lab block", from the checkout, each command in turn.
# A command that fails stops the script with its exit code.
set -euo pipefail
cd "$(dirname "$0")/.."
block=$(awk '/<!-- the lab block/ {seen=1; next} seen && /^```sh/ {inside=1; next} inside && /^```/ {exit} inside {print}' README.md)
if [ -z "$block" ]; then
	echo "readme-lab: no lab block in README.md" >&2
	exit 1
fi
rm -rf /tmp/carve-lab
while IFS= read -r line; do
	printf '\n$ %s\n' "$line"
	eval "$line"
done <<< "$block"
echo
echo "readme-lab: every command of the lab block ran"
