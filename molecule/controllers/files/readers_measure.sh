#!/bin/sh
# One measurement by a stand-in reader (tests/integration/readers_standin.py):
#   readers_measure.sh DIR NAME SEED
# drops the page cache, asks DIR/NAME.fifo to fault 32 random 8 KiB records with SEED, waits for the
# stand-in's result line in DIR/NAME.out and prints it (JSON, with "amplification").
set -eu
dir=$1 name=$2 seed=$3
lines=$(wc -l <"$dir/$name.out")
sync
echo 3 >/proc/sys/vm/drop_caches
timeout 60 sh -c "echo 'measure $seed 32' >'$dir/$name.fifo'"
i=0
while [ "$(wc -l <"$dir/$name.out")" -le "$lines" ]; do
	i=$((i + 1))
	if [ "$i" -gt 600 ]; then
		echo "stand-in $name gave no result in 60 s" >&2
		exit 1
	fi
	sleep 0.1
done
tail -n 1 "$dir/$name.out"
