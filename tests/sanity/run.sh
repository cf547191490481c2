#!/usr/bin/env bash
# ansible-test sanity over this collection, as `make test` runs it (`make sanity` alone).
# ansible-test wants the collection at .../ansible_collections/sparkfleet/vllm: the files git tracks
# (and new ones it does not ignore) are copied to such a tree under .cache/, committed there so that
# ansible-test lists exactly them, and tested with this venv's ansible-test and Python.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=.cache/sanity
tree=$root/ansible_collections/sparkfleet/vllm
rm -rf "$root"
mkdir -p "$tree"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' path; do
  if [ ! -e "$path" ] || [ -L "$path" ]; then continue; fi # deleted in the working tree, or a link
  mkdir -p "$tree/$(dirname "$path")"
  cp -p "$path" "$tree/$path"
done
git -C "$tree" init -q
git -C "$tree" add -A
git -C "$tree" -c user.name=sanity -c user.email=sanity@localhost commit -q -m sanity

# ansible-test bootstraps pip in each test's virtual environment with get-pip.py, fetched from
# ci-files.testing.ansible.com into this cache path. Where that host is not reachable (it is not
# from our machines), a stand-in at the path ansible-test's own error message names: pip from the
# venv's ensurepip, then the packages ansible-test asks for, from PyPI.
pip_version=$(python - <<'PY'
from types import SimpleNamespace
from ansible_test._internal.python_requirements import get_venv_packages
import sys
print(get_venv_packages(SimpleNamespace(version="%d.%d" % sys.version_info[:2]))["pip"])
PY
)
get_pip=~/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [ ! -f "$get_pip" ]; then
  mkdir -p "$(dirname "$get_pip")"
  if ! curl -fsS --max-time 15 -o "$get_pip" "https://ci-files.testing.ansible.com/ansible-test/get-pip-${pip_version}.py"; then
    cp tests/sanity/get_pip_standin.py "$get_pip"
    echo "sanity: ci-files.testing.ansible.com not reachable: get-pip stand-in installed at $get_pip"
  fi
fi

python_version=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
cd "$tree"
exec ansible-test sanity --python "$python_version" --color no "$@"
