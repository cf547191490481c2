"""Stand-in for get-pip.py where ci-files.testing.ansible.com is unreachable (tests/sanity/run.sh).

ansible-test runs get-pip.py in each sanity test's new virtual environment with the packages it
wants (pip, setuptools, wheel pins) and get-pip's own options. This does the same with what Python
ships: pip from ensurepip, then those packages from PyPI.
"""

import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

arguments = [argument for argument in sys.argv[1:] if argument not in GET_PIP_ONLY]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
subprocess.check_call([sys.executable, "-m", "pip", "install", *arguments])
