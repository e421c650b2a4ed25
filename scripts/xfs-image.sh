#!/usr/bin/env bash
# xfs-image.sh DIR IMAGE SIZE [mkfs.xfs options…]: an XFS filesystem image of DIR's tree
# (dirs, regular files, symlinks), made without root: xfsprogs before 6.13 take no
# directory to copy, so this writes the prototype file `mkfs.xfs -p` reads. Owners are
# root; names may not hold whitespace (a prototype file cannot say them). What the tests
# make XFS node images with; usable by hand (an image below 300 MiB is made with
# xfsprogs' test switch, as its own test suite does).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 DIR IMAGE SIZE [mkfs.xfs options…]" >&2; exit 2; }
dir=$(realpath "$1") img=$2 size=$3
shift 3
proto=$(mktemp)
trap 'rm -f "$proto"' EXIT
{
    printf '/dev/null\n0 0\nd--755 0 0\n'
    open=0
    while IFS=$'\t' read -r depth type perm rel link; do
        name=${rel##*/}
        case $name in *[[:space:]]*) echo "$0: a name with whitespace: $rel" >&2; exit 2 ;; esac
        while ((open >= depth)); do echo '$'; open=$((open - 1)); done
        mode=$(printf '%03o' $((8#$perm & 8#777)))
        case $type in
            d) echo "$name d--$mode 0 0"; open=$depth ;;
            f) echo "$name ---$mode 0 0 $dir/$rel" ;;
            l) echo "$name l--777 0 0 $link" ;;
            *) ;;
        esac
    done < <(find "$dir" -mindepth 1 -printf '%d\t%y\t%m\t%P\t%l\n')
    while ((open > 0)); do echo '$'; open=$((open - 1)); done
    echo '$'
} > "$proto"
rm -f "$img"
truncate -s "$size" "$img"
QA_CHECK_FS=1 TEST_DIR=/tmp TEST_DEV=/dev/null mkfs.xfs -q -f "$@" -p "$proto" "$img"
