"""A PGPASSWORD in the environment reaches scheduler jobs in a private file, never in
their environment (PBS's ``qstat -f`` shows a job's Variable_List to every user)."""

import os
import stat

import pytest
from ncreel.cluster.secrets import passfile, password_to_private_file
from ncreel.errors import NcreelError

#: A password with what a password file escapes (``:``, ``\``) and shell text.
PASSWORD = "s3:cr\\et $(id) 'ü"


def test_password_moves_to_a_private_file_libpq_reads(pg_server, tmp_path, monkeypatch):
    import psycopg

    env = {"PGPASSWORD": PASSWORD, "HOME": "/nowhere"}
    note = password_to_private_file(env, tmp_path, run="r1")
    path = tmp_path / passfile("r1")
    assert env == {"HOME": "/nowhere", "PGPASSFILE": str(path)}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert PASSWORD not in note and ".snakemake/ncreel/pgpass-r1 " in note
    # libpq takes the password from the file (it looks it up before connecting).
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", env["PGPASSFILE"])
    with psycopg.connect(pg_server["conninfo"]) as conn:
        assert conn.info.password == PASSWORD
    # Called again (a resumed run), an existing file is rewritten private.
    os.chmod(path, 0o644)
    password_to_private_file({"PGPASSWORD": "x"}, tmp_path, run="r1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert password_to_private_file({}, tmp_path, run="r1") is None
    # Another run of the directory, at once, with its own password: its own file.
    password_to_private_file({"PGPASSWORD": "y"}, tmp_path, run="r2")
    assert path.read_text() == "*:*:*:*:x\n"


def test_a_password_a_file_cannot_hold_is_refused_without_showing_it(tmp_path):
    env = {"PGPASSWORD": "line1\nline2"}
    with pytest.raises(NcreelError, match="^PGPASSWORD holds a line break") as err:
        password_to_private_file(env, tmp_path)
    assert "line1" not in str(err.value) and env == {"PGPASSWORD": "line1\nline2"}
