"""A PGPASSWORD in the environment never reaches a PBS job (qstat -f would show it to every
user), and ncreel writes it nowhere; the load job reads ~/.pgpass or a service file."""

from __future__ import annotations

import pytest
from ncreel.cluster.secrets import pbs_password_note
from ncreel.core.errors import NcreelError
from snakemake_executor_plugin_pbs_pro.submit_string import qsub_environment

PASSWORD = "s3cret:with\\odd"
DB = {"url": "postgresql://ada@db.example:5432/climate", "service": None}


def test_qsub_runs_without_the_password():
    env = {"PGPASSWORD": PASSWORD, "HOME": "/home/ada", "PATH": "/usr/bin"}
    assert qsub_environment(env) == {"HOME": "/home/ada", "PATH": "/usr/bin"}
    assert env["PGPASSWORD"] == PASSWORD  # the controller's own environment is kept


def test_a_load_with_only_pgpassword_stops_before_any_job(tmp_path):
    with pytest.raises(NcreelError) as err:
        pbs_password_note(DB, {"PGPASSWORD": PASSWORD}, home=tmp_path)
    text = str(err.value)
    assert text.startswith("PGPASSWORD is not passed to PBS jobs (a job's variables are in "
                           "its Variable_List")
    assert "put it in ~/.pgpass (chmod 600" in text and PASSWORD not in text
    assert not list(tmp_path.iterdir())  # nothing written


def test_the_note_names_the_file_the_load_job_reads(tmp_path):
    (tmp_path / ".pgpass").write_text("")
    note = pbs_password_note(DB, {"PGPASSWORD": PASSWORD}, home=tmp_path)
    assert note.endswith(f"the load_database job reads the password from {tmp_path}/.pgpass")
    other = tmp_path / "elsewhere"
    other.write_text("")
    service = {"url": None, "service": "climate"}
    note = pbs_password_note(service, {"PGPASSWORD": PASSWORD, "PGSERVICEFILE": str(other)},
                             home=tmp_path)
    assert f"{tmp_path}/.pgpass or {other}" in note and PASSWORD not in note


@pytest.mark.parametrize("database, env", [
    (None, {"PGPASSWORD": PASSWORD}),  # nothing is loaded
    ({"url": None, "service": None}, {"PGPASSWORD": PASSWORD}),
    (DB, {}),  # no PGPASSWORD: libpq's other sources, as always
])
def test_nothing_to_say(tmp_path, database, env):
    assert pbs_password_note(database, env, home=tmp_path) is None
