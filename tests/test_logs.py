"""ncreel.run.logs.stop_on_signals: which signals stop a job, in a real child process."""

import os
import subprocess
import sys

CODE = """
import signal
from ncreel.run.logs import stop_on_signals
stop_on_signals()
print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN,
      signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
      callable(signal.getsignal(signal.SIGTERM)))
"""


def _dispositions(preexec):
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         check=True, preexec_fn=preexec,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return out.stdout.split()


def test_sighup_ignored_under_nohup_stays_ignored_sigint_ignored_is_not():
    import signal

    def nohup_in_background():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # `cmd &` in a script
    # SIGHUP stays ignored (the run outlives a hangup); SIGINT stops the job all the same.
    assert _dispositions(nohup_in_background) == ["True", "False", "True"]


def test_every_stop_signal_handled_from_a_login_shell():
    import signal

    def login_shell():
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
    assert _dispositions(login_shell) == ["False", "False", "True"]
