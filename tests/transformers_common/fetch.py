"""Fetch transformers' common model tests from the source distribution of the installed transformers.

`test_modeling_common.py` (`ModelTesterMixin`) and `test_configuration_common.py` (`ConfigTester`) ship in
transformers' sdist on PyPI, not in its wheel. `make install` runs this script, which downloads the sdist
of the installed version and puts the two files beside it, unchanged; they are not kept in this repository
(`.gitignore`). The modules beside them stand in for what the sdist lacks (README.md).
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import transformers

FILES = ("test_modeling_common.py", "test_configuration_common.py")
HERE = Path(__file__).resolve().parent


def main() -> None:
    version = transformers.__version__
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"transformers=={version}", "-d", folder], check=True)
        (archive,) = Path(folder).glob("transformers-*.tar.gz")
        with tarfile.open(archive) as sdist:
            for name in FILES:
                member = sdist.extractfile(f"transformers-{version}/tests/{name}")
                if member is None:
                    raise SystemExit(f"transformers {version}'s sdist has no tests/{name}")
                (HERE / name).write_bytes(member.read())
    print(f"transformers {version}: {', '.join(FILES)} fetched into {HERE}")


if __name__ == "__main__":
    main()
