"""The recorder's package (capture/python) installs as users install it,
`pip install ./capture/python`, and writes nothing into its source folder.

The build runs on a copy of the folder, offline (--no-build-isolation, with
Debian's flit providing flit_core: cmake/debian-deps.txt), so the test cannot
touch the repository.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

SOURCE = os.path.join(os.path.dirname(__file__), "..", "..", "capture", "python")


def files_under(folder):
    found = set()
    for root, _, names in os.walk(folder):
        for name in names:
            found.add(os.path.relpath(os.path.join(root, name), folder))
    return found


class PackageBuild(unittest.TestCase):
    def test_wheel_builds_offline_and_leaves_the_source_untouched(self):
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "python")
            shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))
            before = files_under(source)
            wheels = os.path.join(tmp, "wheels")
            result = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", source, "--no-build-isolation", "--no-deps", "-q", "-w", wheels],
                capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertEqual(files_under(source), before, "the build wrote into the source folder")
            built = [name for name in os.listdir(wheels) if name.endswith(".whl")]
            self.assertEqual(len(built), 1, built)
            with zipfile.ZipFile(os.path.join(wheels, built[0])) as wheel:
                packaged = {name for name in wheel.namelist() if name.startswith("kvscope_capture/")}
            modules = {"kvscope_capture/" + name for name in os.listdir(os.path.join(SOURCE, "kvscope_capture"))
                       if name.endswith(".py")}
            self.assertEqual(packaged, modules)


if __name__ == "__main__":
    unittest.main()
