#!/bin/sh
# Points apt at snapshot.debian.org for the date given (e.g. 20250601T000000Z), so a Docker
# build installs the packages of that day; does nothing without an argument. Used by the
# Dockerfile's stages.
set -eu
[ -n "${1:-}" ] || exit 0
sed -i \
  -e "s|http://deb.debian.org/debian-security|http://snapshot.debian.org/archive/debian-security/$1|" \
  -e "s|http://deb.debian.org/debian|http://snapshot.debian.org/archive/debian/$1|" \
  /etc/apt/sources.list.d/debian.sources
echo 'Acquire::Check-Valid-Until "false";' > /etc/apt/apt.conf.d/99snapshot
