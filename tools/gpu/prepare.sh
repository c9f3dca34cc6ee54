#!/bin/bash
# On this machine, from the project root: build .gpu/ (git ignores it), the packages the offline GPU
# runner lacks, with the notebook stack the render and the notebook tests need.
#
#   bash tools/gpu/prepare.sh [MAKE_BUNDLE]     (default ../shared/gpu/make-bundle)
#
# make-bundle downloads with --no-deps, so nbconvert's own dependencies are named here one by one.
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=${1:-../shared/gpu/make-bundle}
bash "$bundle" nbconvert nbclient mistune bleach webencodings tinycss2 jinja2 markupsafe defusedxml \
  pandocfilters jupyterlab_pygments beautifulsoup4 soupsieve pytest-xdist execnet
size=$(du -m .gpu/site.tar.xz | cut -f1)
echo ".gpu/site.tar.xz: ${size} MB (the device tool carries 64 MiB in all, the project included)"
