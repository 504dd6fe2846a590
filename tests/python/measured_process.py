"""Runs a program the way the hostile-input tests judge it: forked, waited
for with wait4 so its own CPU time and peak RSS are known (not the test's),
and killed at a wall-clock deadline."""
import os
import subprocess
import time


def run_measured(argv, scratch, env, timeout_s):
    """(exit status, stdout bytes, stderr bytes, CPU seconds, peak RSS MB), or
    None when it gave no answer within timeout_s. Its output goes to files in
    `scratch` (a pathlib.Path), so a flood cannot fill a pipe and block it."""
    out_path, err_path = scratch / "stdout.txt", scratch / "stderr.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        deadline = time.monotonic() + timeout_s
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                os.wait4(process.pid, 0)
                return None
            time.sleep(0.02)
    return (os.waitstatus_to_exitcode(status), out_path.read_bytes(), err_path.read_bytes(),
            usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0)
