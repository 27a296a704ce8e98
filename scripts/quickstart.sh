#!/usr/bin/env bash
# The README's first command: installs dependencies, builds npukit, installs it (the npukit
# binary, libraries, headers, CMake package and the Python module; prefix $NPUKIT_PREFIX,
# default /usr/local, where Debian's python3 finds `import npukit`) and runs the main job on the
# bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO cmake --install "${BUILD_DIR:-build}" --prefix "${NPUKIT_PREFIX:-/usr/local}" >/dev/null
echo "quickstart: npukit installed under ${NPUKIT_PREFIX:-/usr/local} (python3 -c 'import npukit')"
exec scripts/main-job.sh
